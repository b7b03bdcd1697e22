import json
import signal
import sqlite3
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from senri.answer import answer_video
from senri.ingest import ingest
from senri.methods import METHODS
from senri.methods.base import CallTally, Method, MethodAnswer
from senri.methods.random import seeded_letter
from senri.probe import probe
from senri.records import Prediction, schema_of

RANDOM = {"seed": 0, "method": {"name": "random", "implementation": "random", "approach": "baseline",
                                "uses_model": False}, "model": {"name": "none", "backend": "none"}}


@pytest.fixture(scope="module")
def demo_tables(small_demo):
    questions = ingest([small_demo["questions"]], small_demo["videos_dir"], [".mp4"])
    return questions, probe(small_demo["videos"]["demo_01"], "demo_01")


def test_random_is_seeded_per_qid_and_uniform():
    assert seeded_letter(0, "q1") == seeded_letter(0, "q1")
    counts = Counter(seeded_letter(0, f"q{i}") for i in range(4000))
    assert set(counts) == {"A", "B", "C", "D"} and all(900 <= c <= 1100 for c in counts.values())
    assert [seeded_letter(0, f"q{i}") for i in range(50)] != [seeded_letter(1, f"q{i}") for i in range(50)]


def test_random_run_fulfils_the_contract_and_ignores_question_order(demo_tables):
    questions, video = demo_tables
    first = answer_video(questions, video, RANDOM)
    shuffled = answer_video(questions.sample(fraction=1.0, shuffle=True, seed=3), video, RANDOM)
    assert first.schema == schema_of(Prediction)
    assert set(first["video_id"]) == {"demo_01"} and first.height == 16
    assert first.sort("qid")["pred"].to_list() == shuffled.sort("qid")["pred"].to_list()
    assert (first["correct"] == (first["pred"] == first["answer"])).all()
    assert first["parse_ok"].all() and first["error"].is_null().all()


class _Flaky(Method):
    approach = "baseline"
    uses_model = False

    def answer(self, question):
        if question.qid.endswith("_L_1"):
            raise RuntimeError("backend exploded")
        if question.qid.endswith("_L_2"):
            return MethodAnswer(pred=None, raw_output="I think it is the bakery", parse_ok=False)
        return MethodAnswer(pred=question.answer, raw_output=question.answer, parse_ok=True,
                            tally=CallTally(n_llm_calls=1))


def test_a_failing_question_is_recorded_and_the_run_goes_on(demo_tables, monkeypatch):
    module = types.ModuleType("senri_test_flaky")
    module.Flaky = _Flaky
    monkeypatch.setitem(sys.modules, "senri_test_flaky", module)
    monkeypatch.setitem(METHODS._targets, "flaky", "senri_test_flaky:Flaky")
    config = {**RANDOM, "method": {**RANDOM["method"], "name": "flaky", "implementation": "flaky"}}
    questions, video = demo_tables
    out = answer_video(questions, video, config).sort("qid")
    failed = out.filter(pl.col("qid") == "demo_01_L_1").row(0, named=True)
    assert failed["error"] == "RuntimeError: backend exploded"
    assert failed["pred"] is None and failed["correct"] is False and failed["parse_ok"] is False
    unparsed = out.filter(pl.col("qid") == "demo_01_L_2").row(0, named=True)
    assert unparsed["parse_ok"] is False and unparsed["error"] is None and unparsed["correct"] is False
    assert unparsed["raw_output"] == "I think it is the bakery"
    assert out["correct"].sum() == out.height - 2 and out["n_llm_calls"].sum() == out.height - 2


def test_config_and_class_must_agree_on_uses_model(demo_tables):
    questions, video = demo_tables
    config = {**RANDOM, "method": {**RANDOM["method"], "uses_model": True}}
    with pytest.raises(ValueError, match="uses_model"):
        answer_video(questions, video, config)


def test_cli_answer_without_a_tty_prints_no_progress_bar(tmp_path, demo_tables, senri_env):
    questions, video = demo_tables
    q_path, v_path = tmp_path / "q.parquet", tmp_path / "v.parquet"
    questions.write_parquet(q_path)
    from senri.records import VideoInfo, to_frame

    to_frame([video], VideoInfo).write_parquet(v_path)
    out = tmp_path / "pred" / "demo_01.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "senri", "answer", "--questions", str(q_path), "--video-info", str(v_path),
         "--method", "random", "--model", "none", "--out", str(out)],
        capture_output=True, text=True, env=senri_env, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "q/s" not in proc.stderr and "%|" not in proc.stderr
    assert pl.read_parquet(out).height == 16
    assert (tmp_path / "pred" / "demo_01.config.yaml").exists()


def blind_stage(script: Path, record: Path, answer_format: str = "text", **method) -> dict:
    return {"seed": 0,
            "method": {"name": "blind", "implementation": "blind", "approach": "baseline", "uses_model": True,
                       "answer_format": answer_format, **method},
            "model": {"name": "scripted", "backend": "scripted", "script": str(script), "record": str(record)}}


def write_script(path: Path, rules: list[dict]) -> Path:
    path.write_text("".join(json.dumps(rule) + "\n" for rule in rules))
    return path


def test_blind_records_parse_failures_and_backend_errors_per_question(tmp_path, demo_tables):
    questions, video = demo_tables
    rows = questions.filter(pl.col("video_id") == "demo_01").sort("qid")
    broken, vague = rows["question"][0], rows["question"][1]
    script = write_script(tmp_path / "s.jsonl", [
        {"match": broken, "error": "HTTP 503: overloaded"},
        {"match": vague, "text": "Hard to say from what I saw."},
        {"text": "After careful thought, the answer is (c).", "latency_s": 0.125},
    ])
    out = answer_video(questions, video, blind_stage(script, tmp_path / "r.jsonl"), cache=tmp_path / "c.sqlite")
    by_question = {row["question"]: row for row in rows.iter_rows(named=True)}
    out = out.join(rows.select("qid", "question"), on="qid")
    error_row = out.filter(pl.col("question") == broken).row(0, named=True)
    assert error_row["error"] == "answer: HTTP 503: overloaded" and error_row["pred"] is None
    vague_row = out.filter(pl.col("question") == vague).row(0, named=True)
    assert not vague_row["parse_ok"] and vague_row["pred"] is None and vague_row["error"] is None
    rest = out.filter(~pl.col("question").is_in([broken, vague]))
    assert (rest["pred"] == "C").all() and rest["parse_ok"].all() and (rest["latency_s"] == 0.125).all()
    assert (rest["correct"] == (rest["answer"] == "C")).all()
    assert len(by_question) == 16


def test_a_killed_answer_run_restarts_without_repeating_finished_calls(tmp_path, demo_tables, senri_env):
    """SIGKILL mid-run, restart on the same cache: only unfinished calls are issued again, and the
    predictions are byte-identical to those of an uninterrupted run."""
    from senri.records import VideoInfo, to_frame

    questions, video = demo_tables
    q_path, v_path = tmp_path / "q.parquet", tmp_path / "v.parquet"
    questions.write_parquet(q_path)
    to_frame([video], VideoInfo).write_parquet(v_path)
    # The killed run and its restart wait 0.1 s a call, so the kill lands mid-run (1 s of margin between the 6th
    # and the last call); the uninterrupted run gets the same replies at once (the script's delay is not in the
    # predictions, only in the backend's cache identity, which that run does not share).
    reply = {"text": "The answer is B.", "latency_s": 0.2}
    scripts = {"killed": write_script(tmp_path / "s.jsonl", [{**reply, "delay_s": 0.1}]),
               "clean": write_script(tmp_path / "clean.jsonl", [reply])}

    def command(run: str) -> list[str]:
        stage = blind_stage(scripts[run], tmp_path / f"{run}.record.jsonl")
        return [sys.executable, "-m", "senri", "answer", "--config", json.dumps(stage), "--questions", str(q_path),
                "--video-info", str(v_path), "--method", "blind", "--model", "scripted",
                "--cache", str(tmp_path / f"{run}.sqlite"), "--out", str(tmp_path / f"{run}.parquet")]

    def cached(run: str) -> int:
        path = tmp_path / f"{run}.sqlite"
        if not path.exists():
            return 0
        with sqlite3.connect(path) as db:
            try:
                return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            except sqlite3.OperationalError:
                return 0

    victim = subprocess.Popen(command("killed"), env=senri_env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while cached("killed") < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    finished = cached("killed")
    assert 6 <= finished < 16 and not (tmp_path / "killed.parquet").exists()
    issued_before = len((tmp_path / "killed.record.jsonl").read_text().splitlines())

    restart = subprocess.run(command("killed"), env=senri_env, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True)
    assert restart.returncode == 0, restart.stderr
    issued_total = len((tmp_path / "killed.record.jsonl").read_text().splitlines())
    assert issued_total - issued_before == 16 - finished  # no finished call repeated
    assert f"{finished} hit(s), {16 - finished} miss(es)" in restart.stderr

    clean = subprocess.run(command("clean"), env=senri_env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    assert (tmp_path / "killed.parquet").read_bytes() == (tmp_path / "clean.parquet").read_bytes()


# --- direct perception as the paper ran it: one native video of exactly the sampled frames, greedy -------------

def _direct_inputs(tmp_path, small_demo, frames: int = 6):
    from senri import cli
    from senri.decode import write_carrier

    store = tmp_path / f"uniform_{frames}.parquet"
    config = {"plan": {"name": f"uniform_{frames}", "kind": "uniform", "n": frames, "placement": "center",
                       "accuracy": "auto"}, "short_side": 64, "jpeg_quality": 90, "keyframe_fraction": 0.25,
              "watchdog_s": 600}
    assert cli.main(["frames", str(small_demo["videos"]["demo_01"]), "--video-id", "demo_01", "--config",
                     json.dumps(config), "--out", str(store)]) == 0
    carrier = tmp_path / f"uniform_{frames}.carrier.mp4"
    write_carrier(store, carrier)
    return store, carrier


def _direct_stage(tmp_path, frames: int, **model) -> dict:
    script, record = tmp_path / "direct.jsonl", tmp_path / "direct.calls.jsonl"
    script.write_text(json.dumps({"text": '{"answer": "B"}'}) + "\n")
    return {"seed": 0,
            "method": {"name": "direct", "implementation": "direct", "approach": "direct_perception",
                       "uses_model": True, "frames": frames, "plan": f"uniform_{frames}", "answer_format": "json",
                       "greedy": True},
            "model": {"name": "vid", "backend": "scripted", "script": str(script), "record": str(record),
                      "temperature": 0.7, **model}}


def test_direct_sends_one_native_video_of_exactly_the_sampled_frames_greedily(tmp_path, demo_tables, small_demo):
    from senri.decode import carrier_frame_count

    questions, video = demo_tables
    store, carrier = _direct_inputs(tmp_path, small_demo)
    stage = _direct_stage(tmp_path, 6, video=True)
    predictions = answer_video(questions, video, stage, frames=store, carrier=carrier)
    assert predictions["error"].is_null().all() and (predictions["pred"] == "B").all()
    assert carrier_frame_count(carrier.read_bytes()) == 6
    calls = [json.loads(line) for line in (tmp_path / "direct.calls.jsonl").read_text().splitlines()]
    for call in calls:
        parts = [p for m in call["payload"]["messages"] for p in m["content"]]
        media = [p for p in parts if isinstance(p, dict)]
        assert len(media) == 1 and media[0]["fps"] == 1.0 and "video" in media[0]  # one video, no images
        times = media[0]["times_s"]  # each carrier frame's source time, placed there for the model
        assert media[0]["timeline"] == "source" and len(times) == 6 and times == sorted(times) and times[-1] > 5
        text = "".join(p for p in parts if isinstance(p, str))
        assert "packs 6 frames sampled uniformly" in text and text.count(":") >= 6  # every carrier second's time
        assert call["payload"]["temperature"] == 0.0  # greedy, whatever the model config says
    assert {json.loads(t)["visual_input"] for t in predictions["trace"]} == {"video"}
    assert {json.loads(t)["frames"] for t in predictions["trace"]} == {6}
    # A backend without video input gets the same frames as timestamped images.
    images = answer_video(questions, video, _direct_stage(tmp_path, 6), frames=store, carrier=None)
    assert {json.loads(t)["visual_input"] for t in images["trace"]} == {"images"}


def test_direct_refuses_a_carrier_that_does_not_hold_exactly_the_sampled_frames(tmp_path, demo_tables, small_demo):
    from senri.decode import write_carrier

    questions, video = demo_tables
    store, _ = _direct_inputs(tmp_path, small_demo)
    short = tmp_path / "short.parquet"
    pl.read_parquet(store).head(5).write_parquet(short)
    stale = tmp_path / "stale.carrier.mp4"
    write_carrier(short, stale)  # 5 frames for a 6-frame store
    with pytest.raises(ValueError, match="carrier holds 5 frames.*6 decoded frames"):
        answer_video(questions, video, _direct_stage(tmp_path, 6, video=True), frames=store, carrier=stale)


def test_thinking_switch_reaches_the_chat_template(tmp_path):
    from tiny_vlm import build_tiny_llava

    from senri.backends.base import ChatRequest, Message
    from senri.backends.openai_format import chat_body, chat_template_kwargs, thinking_body
    from senri.backends.transformers import TransformersBackend

    assert chat_template_kwargs({"thinking": False}) == {"enable_thinking": False}
    assert chat_template_kwargs({"thinking": None}) == {} == chat_template_kwargs({})
    request = ChatRequest(messages=(Message.text("user", "hi"),), max_tokens=2)
    assert chat_body(request, None, extra=thinking_body({"thinking": False}))["chat_template_kwargs"] == {
        "enable_thinking": False}
    folder = build_tiny_llava(tmp_path / "tiny")
    seen = []
    backend = TransformersBackend({"path": str(folder), "thinking": False})
    original = backend.processor.apply_chat_template
    backend.processor.apply_chat_template = lambda *a, **k: seen.append(k) or original(*a, **k)
    assert backend.complete(request).error is None
    assert seen[0]["enable_thinking"] is False and backend.identity["enable_thinking"] is False
    assert "enable_thinking" not in TransformersBackend({"path": str(folder)}).identity  # unset: cache keys unchanged
    # llama.cpp's in-process server takes the switch in the request body (a template without it ignores it).
    import yaml

    from senri.backends import BACKENDS
    from senri.config import CONFIG_DIR

    smollm2 = {**yaml.safe_load((CONFIG_DIR / "model" / "smollm2.yaml").read_text()), "thinking": False}
    llama = BACKENDS.load("llamacpp")(smollm2)
    try:
        assert llama.complete(request).error is None and llama.identity["enable_thinking"] is False
    finally:
        llama.close()


@pytest.mark.workflow
def test_direct_perception_in_video_mode_through_the_dag(tmp_path, prepared_demo):
    """The DAG builds the plan's carrier for a model that takes video and the answer job sends it as one video
    of exactly the sampled frames. (A tiny random Qwen2-VL would need torchvision's video processor, which is
    not installable beside the CPU torch here; a scripted video model stands in for it.)"""
    from conftest import DAG_DEMO
    from test_workflow import snakemake

    from senri.decode import carrier_frame_count

    script, record = tmp_path / "video.jsonl", tmp_path / "video.calls.jsonl"
    script.write_text(json.dumps({"text": '{"answer": "C"}'}) + "\n")
    prepared_demo(tmp_path, DAG_DEMO)
    overrides = (f"{DAG_DEMO} method=[direct] method.direct.frames=[8] model=[] "
                 f"+model.vid={{backend:scripted,script:{script},record:{record},video:true,images:true}}")
    # Up to the prediction files (and so the carriers they read): the tables and report over direct perception's
    # runs are test_workflow.py::test_direct_perception_on_a_tiny_vlm_reads_the_frame_store_through_the_dag's.
    predictions = [f"results/predictions/direct_8/vid/{v}.parquet" for v in ("demo_01", "demo_02")]
    snakemake(tmp_path, "-c2", *predictions, "--config", f"overrides={overrides}")
    for video_id in ("demo_01", "demo_02"):
        carrier = tmp_path / f"results/frames/uniform_8/{video_id}.carrier.mp4"
        store = pl.read_parquet(tmp_path / f"results/frames/uniform_8/{video_id}.parquet")
        assert carrier_frame_count(carrier.read_bytes()) == store.height == 8
        predictions = pl.read_parquet(tmp_path / f"results/predictions/direct_8/vid/{video_id}.parquet")
        assert predictions["error"].is_null().all() and (predictions["pred"] == "C").all()
        traces = [json.loads(t) for t in predictions["trace"]]
        assert {(t["visual_input"], t["frames"]) for t in traces} == {("video", 8)}
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls and all([p["fps"] for m in c["payload"]["messages"] for p in m["content"] if isinstance(p, dict)]
                         == [1.0] for c in calls)
