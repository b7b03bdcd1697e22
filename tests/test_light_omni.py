"""Light-Omni end to end without weights: the release worker protocol (the adapter senri ships, a stand-in
"release checkout" whose scripts/model.py is a scripted model and whose scripts/prompts.py holds placeholder
templates), the streaming state machine on scripted VAD flags with the memory adapter's replies coming back
through the worker, the question loop, and the latent rules on random tensors (K-16, K-17)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from senri.memory.light_omni import agent, latent, memory, replies, stream
from senri.memory.light_omni.units import Unit
from light_omni_standin import make_checkout

@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    return make_checkout(tmp_path_factory.mktemp("light_omni_release"))


@pytest.fixture
def worker_model(checkout, monkeypatch):
    from senri.memory.light_omni.engine import WorkerOmniModel

    model = WorkerOmniModel({"backend": "release_worker", "model": "ckpt", "env": "light_omni",
                             "release_checkout": str(checkout), "adapter": "light_omni:LightOmniAdapter",
                             "startup_timeout_s": 60, "request_timeout_s": 60})
    # the worker runs under this interpreter (building envs/light_omni.txt needs a GPU node's wheels)
    env = types.SimpleNamespace(python=Path(sys.executable), key="this-interpreter", path=Path(sys.prefix))
    monkeypatch.setattr(model.backend, "environment", lambda: env)
    yield model
    model.close()


def _units(folder: Path, n: int) -> list[Unit]:
    import cv2

    units = []
    for i in range(n):
        stamp = replies.add_time(replies.START_TIME, add_sec=i)
        image, audio = folder / f"image_{stamp}.png", folder / f"audio_{stamp}.wav"
        cv2.imwrite(str(image), np.full((540, 960, 3), i, dtype=np.uint8))
        with wave.open(str(audio), "wb") as handle:
            handle.setnchannels(1), handle.setsampwidth(2), handle.setframerate(16000)
            handle.writeframes(np.zeros(16000, dtype="<i2").tobytes())
        units.append(Unit(i, stamp, image, audio))
    return units


def test_the_worker_streams_a_video_and_answers_through_the_release_code(worker_model, tmp_path):
    flags = [False] * 3 + [True] * 6 + [False] * 3   # speech from unit 3, ends at unit 9 (≥ 5 buffered)
    units = _units(tmp_path, len(flags))
    mem = memory.LightOmniMemory(worker_model)
    resets = []
    record = agent.stream_video(units, mem, tmp_path / "out", stream.flags_source(flags), lambda: resets.append(1))
    assert record.segments == [(0, 9), (10, 11)]
    # each segment's log came back through the worker: 10 frames + 1 audio, then 2 frames + 1 audio
    assert [log["visual"] for log in mem.logs] == ["10 frames 2026-01-01 08:00:00|2026-01-01 08:00:09",
                                                   "2 frames 2026-01-01 08:00:10|2026-01-01 08:00:11"]
    assert [log["auditory"] for log in mem.logs] == ["1 audio", "Silent"]   # the "Silent" rule (K-15)
    assert sorted(mem.retriever.semantic.items) == [
        "2026-01-01 08:00:00\u20142026-01-01 08:00:09: fact 1", "2026-01-01 08:00:10\u20142026-01-01 08:00:11: fact 2"]
    frames = sorted((tmp_path / "out" / "profiles" / "data").iterdir())
    import cv2
    assert len(frames) == 12 and cv2.imread(str(frames[0])).shape[:2] == (270, 480)   # long edge 480
    outcome = agent.answer_question(mem, worker_model, replies.question_text("Which?", ["A. x", "B. y"]))
    # the reaction's decisions are ignored for a benchmark question: retrieval is forced (L-L2)
    assert outcome.semantic_hits == 2 and outcome.episodic_hits == 0   # top 12 of 2 facts; nothing archived yet
    # LP5 got the STM's sampled frame (12 frames, ratio 0.1 → 1); both segments' feature caches were cleared
    assert outcome.response == "B. 1 images; cleared 2"
    assert replies.first_character(outcome.response) == "B"
    assert worker_model.calls == {"embed": 2, "log": 2, "end_message": 3, "react": 1, "respond": 1}


def test_an_unrepairable_log_reply_is_a_clear_error_and_a_worker_error_names_the_op(worker_model):
    from senri.memory.light_omni.engine import LightOmniModelError

    with pytest.raises(LightOmniModelError, match="op log: KeyError: 'end_time'"):
        worker_model._call("log", {"start_time": "x"})  # the adapter raised: the worker lives on
    assert worker_model.merge("seq") == json.dumps({"visual": "merged", "auditory": "merged", "assistant": "null"})
    class Bad:
        def log(self, request):
            return "Sorry, I cannot help."
        def embed_documents(self, texts):
            return np.zeros((len(texts), 4))
    mem = memory.LightOmniMemory(Bad())
    with pytest.raises(TypeError, match="not a JSON object"):
        mem.add_segment({"start_time": replies.START_TIME, "end_time": replies.START_TIME, "image_path": []}, [])


def test_compression_keeps_the_farthest_tokens_in_order_and_near_duplicates_keep_32():
    torch.manual_seed(0)
    first = torch.randn(200, 16)
    other = torch.randn(200, 16) + 5.0
    near = first + 0.01 * torch.randn(200, 16)
    masks = latent.image_keep_masks([first, other, near, torch.randn(20, 16)])
    # ``near`` repeats ``first`` but is compared with the last kept image's mean (``other``): kept in full
    assert [int(m.sum()) for m in masks] == [50, 50, 50, 20]
    assert [int(m.sum()) for m in latent.image_keep_masks([first, near, near])] == [50, 32, 32]
    scores = 1 - torch.nn.functional.normalize(first, dim=-1) @ torch.nn.functional.normalize(first.mean(0), dim=0)
    assert set(torch.nonzero(masks[0]).flatten().tolist()) == set(torch.topk(scores, 50).indices.tolist())


def test_latent_read_out_and_query_composition_on_random_tensors():
    torch.manual_seed(1)
    vocab, seq = 10000, 200
    logits = torch.randn(seq, vocab)
    logits[seq - 65, latent.YES_TOKEN] = 100.0   # last is_response latent says yes
    logits[seq - 33, 5] = 100.0                  # last is_retrieve latent says something else
    state = latent.read_latents(logits, torch.randn(32, 1024))
    assert state.is_response and not state.is_retrieve
    text = torch.randn(3, 1024)
    soft = torch.randn(32, 1024)
    got = latent.compose_embeddings(text, soft)
    t = torch.nn.functional.normalize(text, dim=1)
    p = torch.nn.functional.normalize(soft.mean(0, keepdim=True), dim=1)
    assert torch.allclose(got, torch.nn.functional.normalize(t + p, dim=1), atol=1e-6)
    assert torch.allclose(got.norm(dim=1), torch.ones(3))
    assert torch.allclose(latent.compose_embeddings(text), t)


def test_a_memory_without_segments_cannot_answer_and_says_why():
    mem = memory.LightOmniMemory(types.SimpleNamespace(embed_documents=lambda t: np.zeros((len(t), 4))))
    with pytest.raises(ValueError, match="no segment"):
        agent.answer_question(mem, None, "Q")


class ScriptedOmni:
    """The omni role scripted in-process (the worker protocol is tested above): LP1 logs that name their
    segment, LP2 merges, documents embedded by a hash of their words; the reaction points at "tone"."""

    def __init__(self, answer="C. because"):
        self.answer, self.calls, self.closed = answer, {}, False

    def _count(self, op):
        self.calls[op] = self.calls.get(op, 0) + 1

    def log(self, request):
        self._count("log")
        return json.dumps({"visual": f"{len(request.images)} frames", "auditory": f"tone {request.start_time}",
                           "semantic_memory": [f"a tone plays at {request.start_time}"]})

    def merge(self, sequence):
        self._count("merge")
        return json.dumps({"visual": "merged"})

    def update_profiles(self, current, sequence):
        self._count("profiles")
        return "{}"

    def embed_documents(self, texts):
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i, sum(map(ord, word)) % 16] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-8)

    def react(self, request):
        self._count("react")
        return agent.Reaction(False, False, self.embed_documents(["tone"])[0])

    def respond(self, request):
        self._count("respond")
        return self.answer

    def close(self):
        self.closed = True


def _amplitude_vad(monkeypatch):
    """The release cases' probability-coded VAD stand-in (speech probability = the window's peak amplitude): the
    real Silero JIT is checked by the vad_push cases; on this machine it costs seconds a unit."""
    monkeypatch.setattr(stream, "silero_activity",
                        lambda: stream.VoiceActivity(lambda window: float(np.abs(window).max())))


def _video(path: Path, seconds: int, audio: bool) -> Path:
    from senri.media import run_ffmpeg

    inputs = ["-f", "lavfi", "-i", f"testsrc2=s=160x90:r=4:d={seconds}"]
    if audio:
        inputs += ["-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}"]
    run_ffmpeg(["-y", *inputs, "-c:v", "libx264", "-pix_fmt", "yuv420p", *(["-c:a", "aac"] if audio else []),
                "-shortest", str(path)], what="test video")
    return path


@pytest.mark.parametrize("audio", [True, False])
def test_the_store_builds_by_streaming_and_the_method_answers_from_it(tmp_path, monkeypatch, audio):
    """The light_omni store's build (units by the release's ffmpeg commands, real Silero VAD, the memory state
    machine) and the light_omni method over it, with the omni role scripted. A video without an audio track is a
    recorded condition (1-s silences, ``audio: silent``), nothing lost."""
    from senri.captioners.base import VideoMedia
    from senri.memory.light_omni import store as lo_store
    from senri.memory.store import BuildRequest, store_class
    from senri.methods.base import RunContext
    from senri.methods.light_omni import LightOmni
    from senri.probe import probe
    from senri.records import Question

    video = _video(tmp_path / "v.mp4", 35, audio)
    info = probe(video, "v")
    scripted = ScriptedOmni()
    monkeypatch.setattr(lo_store, "open_engine", lambda models, where: scripted)
    _amplitude_vad(monkeypatch)
    out = tmp_path / "store"
    cls = store_class("light_omni")
    cls.build(BuildRequest(video=info, system="light_omni", system_config={"fact_order": "first_seen"},
                           memory_config={}, out_dir=out, media=VideoMedia("v", video, "", info.duration_s),
                           models={"omni": ("light_omni", {"backend": "release_worker"})}))
    record = __import__("yaml").safe_load((out / "config.yaml").read_text())
    assert record["units"] == 35 and record["audio"] == ("track" if audio else "silent")
    assert "lost" not in record and scripted.closed
    # ffmpeg's sine is at amplitude 1/8, below the 0.5 threshold: only the 30-unit background rule cuts (L-C4)
    assert record["segments"] == [[0, 29], [30, 34]] and record["model_calls"] == {"log": 2}
    store = cls.open(out, {"fact_order": "first_seen"}, info)
    kinds = [(i.kind, i.start_s, i.end_s) for i in store.items()]
    assert kinds == [("semantic", 0.0, 30.0), ("semantic", 30.0, 35.0)]   # nothing archived before 9 logs
    # U-2: memory_search's entry point embeds the text through the omni role and ranks both indexes
    store.config["model_configs"] = {"omni": {"name": "light_omni", "config": {"backend": "release_worker"}}}
    hits = store.search("a tone plays at 2026-01-01 08:00:30", 1)
    assert [(h.item_id, h.kind) for h in hits] == [("semantic:1", "semantic")] and hits[0].score > 0.5
    assert [h.item_id for h in store.search("a tone plays at 2026-01-01 08:00:30", 2, exclude={"semantic:1"})] == \
        ["semantic:0"]
    with pytest.raises(ValueError, match="memory_type"):
        store.search("x", 1, memory_type="visual")
    method = LightOmni(RunContext(video=info, method_name="light_omni", method_config={}, model_name="light_omni",
                                  model_config={}, seed=0, memory_system="light_omni", memory_store=out,
                                  memory_system_config={}))
    q = Question("v", "q1", "t", "d", "What plays?", "silence", "speech", "a tone", "music", "C")
    answer = method.answer(q)
    assert (answer.pred, answer.parse_ok, answer.raw_output) == ("C", True, "C. because")
    assert answer.trace["semantic_hits"] == 2 and answer.trace["roles"] == ["LP4", "LP5"]
    scripted.answer = "(C) a tone"   # K-19: the first character decides
    assert method.answer(q).pred is None
    scripted.answer = "null"         # L-L3: "null" → "" → the release's IndexError, a recorded failure
    failed = method.answer(q)
    assert failed.pred is None and "empty response" in failed.error


def test_a_lost_build_fails_each_question_with_the_reason(tmp_path, monkeypatch):
    from senri.captioners.base import VideoMedia
    from senri.memory.light_omni import store as lo_store
    from senri.memory.store import BuildRequest, store_class
    from senri.methods.base import RunContext
    from senri.methods.light_omni import LightOmni
    from senri.probe import probe
    from senri.records import Question

    video = _video(tmp_path / "v.mp4", 3, True)
    info = probe(video, "v")
    scripted = ScriptedOmni()
    scripted.log = lambda request: "not json at all"
    monkeypatch.setattr(lo_store, "open_engine", lambda models, where: scripted)
    _amplitude_vad(monkeypatch)
    out = tmp_path / "store"
    store_class("light_omni").build(BuildRequest(video=info, system="light_omni", system_config={},
                                                 memory_config={}, out_dir=out,
                                                 media=VideoMedia("v", video, "", info.duration_s)))
    method = LightOmni(RunContext(video=info, method_name="light_omni", method_config={}, model_name="light_omni",
                                  model_config={}, seed=0, memory_system="light_omni", memory_store=out,
                                  memory_system_config={}))
    assert method.store.question_counts() == {"builder_losses": 1}
    answer = method.answer(Question("v", "q1", "t", "d", "Q?", "a", "b", "c", "d", "A"))
    assert answer.pred is None and "not a JSON object" in answer.error


@pytest.mark.workflow
def test_table2_omni_builds_and_answers_light_omni_on_the_demo_through_a_stand_in(table2_omni_workdir):
    """``experiment=table2_omni`` (Light-Omni's row) end to end on the one-video demo: the memory_system rule streams
    the demo video through a release worker (a real environment built offline from an empty pin file, the stand-in
    checkout's scripted model, senri's adapter), the answer jobs ask every question through it. The demo's
    anonymized video has no audio track here (``anonymize.keep_audio=false``, the upstream stages as prepared):
    the build streams 1-s silences and records it. The run is the one both omni rows share
    (conftest's ``table2_omni_workdir``; M3-Agent's row is checked in tests/test_experiments.py)."""
    import polars as pl
    import yaml

    tmp_path = table2_omni_workdir
    store = tmp_path / "results/memory_system/light_omni/perception/demo_01"
    record = yaml.safe_load((store / "config.yaml").read_text())
    assert record["source"] == "built" and "lost" not in record, record
    assert record["audio"] == "silent" and record["units"] >= 30 and record["models"] == {"omni": "omni_standin"}
    assert record["model_calls"]["log"] == len(record["segments"]) >= 2
    # the experiment's face stand-ins ran over every unit's frame and are labelled (the demo shows no face)
    assert record["faces"]["model"] == "centerface+dlib_resnet" and record["faces"]["standin"] is True
    assert record["faces"]["identity_cosine"] == 0.93 and record["face_profiles"] == record["faces_identified"] == 0
    predictions = pl.read_parquet(tmp_path / "results/predictions/light_omni/omni_standin/demo_01.parquet")
    questions = pl.read_parquet(tmp_path / "results/questions.parquet")
    assert predictions.height == questions.height and predictions["error"].is_null().all()
    assert (predictions["pred"] == "B").all() and (predictions["memory"] == "light_omni/perception").all()


def test_the_seeded_fact_order_is_the_run_s_and_the_options_name_the_others():
    """K-15 / issue 62 item 5: a log's deduplicated facts in an order drawn from the run's seed (the same seed, the
    same order; every order a permutation of the reply's distinct facts); first_seen keeps the reply's order."""
    reply = json.dumps({"visual": "v", "auditory": "a", "semantic_memory": [f"f{i}" for i in range(8)] + ["f0"]})

    class Model:
        def log(self, request):
            return reply

        def embed_documents(self, texts):
            return np.ones((len(texts), 4), dtype=np.float32)

    def facts(order, seed):
        mem = memory.LightOmniMemory(Model(), fact_order=order, seed=seed)
        mem.add_segment({"start_time": replies.START_TIME, "end_time": replies.START_TIME, "image_path": []}, [])
        return [f.rsplit(": ", 1)[1] for f in mem.retriever.semantic.items]

    assert facts("seeded", 3) == facts("seeded", 3) != facts("seeded", 4)
    assert sorted(facts("seeded", 3)) == sorted(facts("set", 0)) == [f"f{i}" for i in range(8)]
    assert facts("first_seen", 0) == [f"f{i}" for i in range(8)]
    with pytest.raises(ValueError, match="fact_order"):
        memory.LightOmniMemory(Model(), fact_order="sorted")
