"""The OpenAI-compatible text embedder (issue 62: M3-Agent's text-embedding-3-large by name) over real HTTP on
loopback: llama.cpp's server started with ``--embeddings`` on the packaged all-MiniLM-L6-v2 written as GGUF
(tests/minilm_gguf.py), against senri's in-process MiniLM stand-in on the same weights; the key, the response
cache, the retries and the replies a client must refuse; and the M3-Agent wiring (the release default by name, the
named stand-in, a run without the key stopping with its name)."""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from senri.backends.base import BackendError
from senri.backends.embeddings import EmbeddingError, EmbeddingsClient, parse_embeddings
from senri.backends.server import ManagedServer

sys.path.insert(0, str(Path(__file__).parent))

#: Texts as M3-Agent embeds them: memory texts with their node tags, a query, accents, digits and punctuation.
TEXTS = ["<face_2> walks into the kitchen.", "<voice_0> says: Let's go to the kitchen.",
         "Who opened the red door at 03:15?", "Müller put the KEYS on the table (twice)!",
         "Equivalence: <face_3>, <voice_1>"]
KEY_ENV = "SENRI_TEST_EMBEDDINGS_KEY"


@pytest.fixture(scope="module")
def minilm_server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server embedding with the packaged MiniLM (mean pooling, as
    sentence-transformers pools it), a bearer key required, on a free loopback port."""
    import os

    from minilm_gguf import write_minilm_gguf

    folder = tmp_path_factory.mktemp("minilm_gguf")
    gguf = write_minilm_gguf(folder / "all-MiniLM-L6-v2.f32.gguf")
    config = {"gguf": {"path": str(gguf)}, "embeddings": True, "pooling": "mean", "n_ctx": 512, "threads": 1}
    os.environ[KEY_ENV] = "sk-test-embeddings"
    command = [sys.executable, "-m", "senri.backends.llamacpp", "--port", "{port}", "--host", "{host}",
               "--model-config", json.dumps(config), "--api-key-env", KEY_ENV]
    with ManagedServer(command, health_path="/health", startup_timeout_s=120, log_path=folder / "server.log",
                       api_key=os.environ[KEY_ENV]) as server:
        yield server
    os.environ.pop(KEY_ENV, None)


def client_config(url: str, **extra) -> dict:
    return {"backend": "openai", "base_url": url + "/v1", "model": "all-MiniLM-L6-v2", "api_key_env": KEY_ENV,
            "timeout_s": 60, "max_retries": 1, "backoff_base_s": 0.01, "backoff_cap_s": 0.02, **extra}


def test_the_server_s_minilm_vectors_agree_with_the_in_process_stand_in(minilm_server, tmp_path):
    """The same weights both ways: llama.cpp over HTTP and transformers in process give the same sentence vectors
    (cosine > 0.9999 for every text; measured 0.9999992 to 0.9999995), so the API client reads the server's
    vectors whole, in order, batched. A second client on the same response cache sends nothing."""
    from senri.memory.retrieval import Embedder

    cache = tmp_path / "cache.sqlite"
    client = EmbeddingsClient(client_config(minilm_server.url, batch_size=2), cache)
    served = client.embed(TEXTS + TEXTS[:1])  # a repeated text is embedded once
    assert served.shape == (len(TEXTS) + 1, 384) and client.tally.calls == 3 and client.tally.texts == len(TEXTS)
    assert client.tally.prompt_tokens > len(TEXTS) * 5
    local = Embedder().encode(TEXTS)
    cosines = (served[:-1] * local).sum(1) / np.linalg.norm(served[:-1], axis=1) / np.linalg.norm(local, axis=1)
    assert cosines.min() > 0.9999, cosines
    assert np.allclose(served[-1], served[0])
    client.close()
    again = EmbeddingsClient(client_config(minilm_server.url), cache)
    assert np.array_equal(again.embed(TEXTS), served[:-1]) and again.tally.calls == 0
    assert again.tally.cached == len(TEXTS)
    again.close()


def test_the_key_comes_from_the_environment_and_a_refusal_is_not_retried(minilm_server, monkeypatch):
    monkeypatch.setenv("SENRI_WRONG_KEY", "sk-wrong")
    client = EmbeddingsClient(client_config(minilm_server.url, api_key_env="SENRI_WRONG_KEY", max_retries=3))
    with pytest.raises(EmbeddingError, match="HTTP 401") as caught:
        client.embed(["x"])
    assert client.tally.calls == 1 and "sk-wrong" not in str(caught.value)
    monkeypatch.delenv("SENRI_UNSET_KEY", raising=False)
    with pytest.raises(BackendError, match="SENRI_UNSET_KEY"):
        EmbeddingsClient(client_config(minilm_server.url, api_key_env="SENRI_UNSET_KEY"))


def test_a_server_that_ignores_dimensions_is_an_error_not_a_silent_change_of_space(minilm_server):
    client = EmbeddingsClient(client_config(minilm_server.url, dimensions=128))
    with pytest.raises(EmbeddingError, match=r"width\(s\) \[384\], expected 128"):
        client.embed(["a kitchen"])


class Flaky(BaseHTTPRequestHandler):
    """503 with Retry-After twice, then a reply whose items come in reverse index order."""

    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Flaky.seen.append(body)
        if len(Flaky.seen) <= 2:
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        data = [{"index": i, "embedding": [float(i + 1), 0.0, 1.0]} for i in range(len(body["input"]))][::-1]
        payload = json.dumps({"data": data, "usage": {"prompt_tokens": 7}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def test_503s_are_retried_and_the_reply_is_read_by_index():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        client = EmbeddingsClient({**client_config(url, max_retries=2, dimensions=3), "api_key_env": None})
        vectors = client.embed(["a", "b"])
        assert vectors[:, 0].tolist() == [1.0, 2.0] and client.tally.calls == 3
        assert Flaky.seen[-1] == {"model": "all-MiniLM-L6-v2", "input": ["a", "b"], "encoding_format": "float",
                                  "dimensions": 3}
    finally:
        server.shutdown()


@pytest.mark.parametrize("payload, words", [
    ({"object": "list"}, "field 'data' missing"),
    ({"data": [{"index": 0, "embedding": [1.0]}]}, "1 vectors for 2 inputs"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}, "index 0 is not a new index"),
    ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}, "width"),
    ({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0]}]}, "not a list of numbers"),
    ({"data": [{"index": 0, "embedding": [float("nan")]}, {"index": 1, "embedding": [1.0]}]}, "non-finite"),
])
def test_a_reply_that_is_not_the_asked_embeddings_is_named(payload, words):
    with pytest.raises(EmbeddingError, match=words):
        parse_embeddings(payload, 2, None)


# --- M3-Agent's text-embedder role -------------------------------------------------------------------------
def test_m3_agent_defaults_to_the_release_embedder_by_name_and_stops_naming_its_key_without_it(monkeypatch):
    """The release default (text-embedding-3-large over the API) is resolved into the system's slice; a run
    without OPENAI_API_KEY stops with the variable's name instead of embedding with anything else; ``minilm`` is
    the named stand-in."""
    from senri.config import compose
    from senri.memory.worldmm.common import MiniLMEncoder, open_text_encoder

    system = compose("memory_system=[m3_agent]")["memory_system"]["m3_agent"]
    assert system["text_embedder"] == "text_embedding_3_large"
    resolved = system["text_embedder_config"]
    assert resolved["name"] == "text_embedding_3_large" and resolved["config"]["model"] == "text-embedding-3-large"
    assert resolved["config"]["api_key_env"] == "OPENAI_API_KEY" and "api_key" not in resolved["config"]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        open_text_encoder(system, "memory_system.m3_agent.text_embedder")
    standin = compose("memory_system=[m3_agent] memory_system.m3_agent.text_embedder=minilm")["memory_system"]
    assert "text_embedder_config" not in standin["m3_agent"]
    assert isinstance(open_text_encoder(standin["m3_agent"]), MiniLMEncoder)


def test_m3_agent_s_store_embeds_its_queries_through_the_served_embedder_and_counts_the_calls(minilm_server,
                                                                                              tmp_path):
    """The store's query side (M-R4) with an API text embedder: normalised vectors from the server, kept in the
    answer job's response cache, the calls counted for the question's trace (the build side opens the same
    encoder with the build job's cache: ``ClipBuilder``)."""
    import random

    import yaml

    from senri.memory.m3_agent.graph import GraphConfig, MemoryGraph
    from senri.memory.m3_agent.store import CONFIG_FILE, GRAPH_FILE, M3AgentStore

    (tmp_path / GRAPH_FILE).write_text(json.dumps(MemoryGraph(GraphConfig(), random.Random(0)).to_dict()))
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump({"source": "built", "seed": 0, "lost": None}))
    system = {"text_embedder": "minilm_served",
              "text_embedder_config": {"name": "minilm_served", "config": client_config(minilm_server.url)}}
    store = M3AgentStore.open(tmp_path, system, None)
    store.response_cache = tmp_path / "answer.sqlite"
    vectors = np.asarray(store.embed(TEXTS[:2] + TEXTS[:1]))
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert store.embedding_calls()["embedding_calls"]["calls"] == 1
    assert store._encoder.name == "api:minilm_served:all-MiniLM-L6-v2"
    again = M3AgentStore.open(tmp_path, system, None)
    again.response_cache = store.response_cache
    again.embed(TEXTS[:2])
    assert again.embedding_calls()["embedding_calls"] | {"latency_s": 0} == {
        "calls": 0, "texts": 0, "cached": 2, "prompt_tokens": 0, "timed_out_attempts": 0, "latency_s": 0}


class Slow(BaseHTTPRequestHandler):
    """An embeddings server that answers after the client's deadline."""

    def do_POST(self):  # noqa: N802 - http.server's name
        import time

        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.6)
        self.send_response(503)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_query_embedding_that_times_out_fails_the_question_recorded_with_its_timeouts(tmp_path):
    """At answer time the controller's search embeds its query: an embedder that never answers in time fails that
    question (an error row, counted wrong; the run goes on), its timed-out attempts booked in ``timeouts`` and
    its calls in the trace."""
    import random
    import types

    import yaml

    from senri.backends import open_backend
    from senri.memory.m3_agent.graph import GraphConfig, MemoryGraph
    from senri.memory.m3_agent.store import CONFIG_FILE, GRAPH_FILE
    from senri.methods.base import RunContext
    from senri.methods.m3_agent import M3Agent
    from senri.records import Question

    store = tmp_path / "store"
    store.mkdir()
    (store / GRAPH_FILE).write_text(json.dumps(MemoryGraph(GraphConfig(), random.Random(0)).to_dict()))
    (store / CONFIG_FILE).write_text(yaml.safe_dump({"source": "built", "seed": 0, "lost": None}))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        embedder = {**client_config(url, timeout_s=0.2, max_retries=1), "api_key_env": None}
        system = {"text_embedder": "api", "text_embedder_config": {"name": "api", "config": embedder}}
        script = tmp_path / "controller.jsonl"
        script.write_text(json.dumps({"text": "<think>look</think>Action: [Search]\nContent: red door"}) + "\n")
        backend = open_backend({"backend": "scripted", "script": str(script)}, tmp_path / "cache.sqlite")
        context = RunContext(video=types.SimpleNamespace(video_id="v", duration_s=60.0), method_name="m3_agent",
                             method_config={"prompts": "m3_agent", "rounds": 5}, model_name="ctl",
                             model_config={}, seed=0, backend=backend, memory_system="m3_agent",
                             memory_system_config=system, memory_store=store,
                             response_cache=tmp_path / "cache.sqlite")
        question = Question(video_id="v", qid="q1", task_type="L", direction="ES", question="Where is the door?",
                            option_a="a", option_b="b", option_c="c", option_d="d", answer="A")
        result = M3Agent(context).answer(question)
    finally:
        server.shutdown()
    assert result.pred is None and "timed out" in result.tally.errors[0].lower()
    assert result.tally.health["timeouts"] == 2
    assert result.trace["embedding_calls"]["calls"] == 2 and result.trace["rounds"] == 1
