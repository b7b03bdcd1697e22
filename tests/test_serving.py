"""Served answer batches: one llama.cpp server (SmolLM2 from PyPI) per batch instead of a model load per answer
job, with the in-process calls' cache identity, bounded restarts and a record of every server start."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest

from conftest import REPO, clock_free
from senri import config as cfgmod
from senri import serving
from senri.backends import open_backend
from senri.backends.base import ChatRequest, EngineUnavailable, Message
from senri.backends.cache import request_key
from senri.backends.openai import OpenAIBackend
from senri.backends.served import Endpoint, ServedBackend, endpoint_for, serving_through

VIDEO = "demo_01"
METHODS = ("blind", "blind_letter")
#: The override that serves SmolLM2: its answers run as one batch against one llama.cpp server.
SERVED = "serving.models=[smollm2]"
PREDICTIONS = [f"results/predictions/{m}/smollm2/{VIDEO}.parquet" for m in METHODS]


def _smollm2() -> dict:
    return {"name": "smollm2", **cfgmod.compose()["model"]["smollm2"]}


# --- identity, routing, the openai backend's transport failures ------------------------------------------------
def test_a_served_call_has_the_in_process_calls_identity_and_cache_key(monkeypatch):
    monkeypatch.setenv("SENRI_SERVER_KEY", "k")
    config = _smollm2()
    local = open_backend(config, None)
    try:
        served = ServedBackend(config, Endpoint("http://127.0.0.1:1", config))
        assert served.identity == local.identity and "gguf_sha256" in served.identity
        assert served.capabilities == local.capabilities
        request = ChatRequest((Message.text("user", "Which room has the red door?"),), max_tokens=8)
        assert request_key(served.identity, request) == request_key(local.identity, request)
        assert served.count_tokens(request) == local.count_tokens(request)
        from senri.backends.llamacpp import request_body

        assert served.request_body(request) == request_body(config, request)  # the body llama.cpp gets in process
        # (one call before close: an xllamacpp server destroyed while still starting up can hang)
        assert local.complete(ChatRequest(request.messages, max_tokens=1)).error is None
    finally:
        local.close()


def test_every_backend_of_the_served_model_config_goes_to_the_server_and_no_other(monkeypatch):
    monkeypatch.setenv("SENRI_SERVER_KEY", "k")
    config = _smollm2()
    captioner_view = {k: v for k, v in config.items() if k != "name"}  # the same model config without its name
    with serving_through(Endpoint("http://127.0.0.1:1", config)):
        assert isinstance(open_backend(config, None), ServedBackend)
        assert isinstance(open_backend(captioner_view, None), ServedBackend)
        assert endpoint_for({**captioner_view, "n_ctx": 4096}) is None  # another engine setting: another model
    assert endpoint_for(config) is None  # outside the block every backend runs in process again


def test_a_dead_server_raises_engine_unavailable_and_a_transport_failure_is_sent_again(monkeypatch):
    from senri.backends.server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens
    request = ChatRequest((Message.text("user", "hi"),))
    quick = {"base_url": url, "model": "m", "max_retries": 1, "backoff_base_s": 0.01, "backoff_cap_s": 0.02}
    served = OpenAIBackend({**quick, "transport_failure": "raise"})
    with pytest.raises(EngineUnavailable, match="ConnectError"):
        served.complete(request)
    recording = OpenAIBackend(quick)
    first = recording.complete(request)
    assert first.error and "ConnectError" in first.error and first.attempts == 2
    assert recording.complete(request).attempts == 2  # sent again, not the remembered failure
    assert not recording._failed


def test_the_serving_config_is_checked_and_kept_out_of_every_answer_slice():
    base = "dataset=demo method=[blind] model=[smollm2,openai_api]"
    cfg = cfgmod.compose(f"{base} serving.models=[smollm2]")
    assert cfgmod.stage_slice(cfg, "answer", method="blind", model="smollm2") == \
        cfgmod.stage_slice(cfgmod.compose(base), "answer", method="blind", model="smollm2")
    with pytest.raises(cfgmod.ConfigError, match="config.serving.models: 'qwen15_coder' is not a selected model"):
        serving.served_models(cfgmod.compose(f"{base} serving.models=[qwen15_coder]"))
    with pytest.raises(cfgmod.ConfigError, match="'openai_api'.*cannot be served"):
        serving.served_models(cfgmod.compose(f"{base} serving.models=[openai_api]"))
    # the shipped video model is servable (issue 36 item 1)
    assert serving.served_models(cfgmod.compose("dataset=demo method=[blind] model=[qwen25vl7b_vllm] "
                                                "serving.models=[qwen25vl7b_vllm]")) == ["qwen25vl7b_vllm"]
    with pytest.raises(cfgmod.ConfigError, match="config.serving.batch.openai_api"):
        serving.served_models(cfgmod.compose(f"{base} serving.models=[smollm2] +serving.batch.openai_api=model"))


def test_batches_hold_exactly_the_in_process_rules_files_in_video_order():
    cfg = cfgmod.compose("dataset=demo method=[random,blind,blind_letter] serving.models=[smollm2]")
    videos = ["demo_01", "demo_02"]
    (batch,) = serving.batches(cfg, videos)
    expected = [(v, m) for v in videos for m in ("blind", "blind_letter")]
    assert [(a.video_id, a.method) for a in batch.answers] == expected
    assert batch.outputs[:2] == ["results/predictions/blind/smollm2/demo_01.parquet",
                                 "results/predictions/blind/smollm2/demo_01.config.yaml"]
    per_method = cfgmod.compose("dataset=demo method=[blind,blind_letter] serving.models=[smollm2] "
                                "+serving.batch.smollm2=method_model")
    assert [b.name for b in serving.batches(per_method, videos)] == ["smollm2.blind", "smollm2.blind_letter"]
    pattern = re.compile(serving.in_process_model_pattern(cfg) + "/")
    assert not pattern.fullmatch("smollm2/") and pattern.fullmatch("smollm2b/") and pattern.fullmatch("none/")
    assert serving.load_counts(cfg, videos) == {"answer_jobs": 4, "in_process": 4, "served": 1, "batches": 1,
                                                "role_loads_served": 0}
    # The digest works out each run's params once (issue 53: planning at 900 videos) and still hashes every
    # answer with its own run's: blind's and blind_letter's slices differ.
    import hashlib

    expected_digest = hashlib.sha256()
    for a in batch.answers:
        expected_digest.update(cfgmod.canonical_json({"out": a.out, "inputs": dict(a.inputs),
                                                      **serving.answer_params(cfg, a.method, a.model)}).encode())
    assert serving.answer_params(cfg, "blind", "smollm2") != serving.answer_params(cfg, "blind_letter", "smollm2")
    assert serving.batch_digest(cfg, batch) == expected_digest.hexdigest()[:16]


def test_load_counts_count_the_models_an_answer_s_roles_open_beside_its_server():
    """Issue 36 item 4: VideoLucy's VLM captioner, a memory system's query roles (WorldMM's retriever,
    MAGIC-Video's time extractor) and tool models are loads of their own per answer job — in process always
    (the captioner even when it is the run's model: the caption service opens it), served only when the batch's
    server does not serve them (the same model reaches the server)."""
    videos = ["v1", "v2"]
    cfg = cfgmod.compose("dataset=demo method=[videolucy,worldmm] model=[smollm2,qwen15_coder] "
                         "memory.captioner=smollm2 serving.models=[smollm2]")
    assert {k: v["name"] for k, v in serving.answer_role_models(cfg, "videolucy").items()} == {"captioner": "smollm2"}
    assert {k: v["name"] for k, v in serving.answer_role_models(cfg, "worldmm").items()} == {
        "worldmm.retriever": "qwen15_coder"}
    assert serving.role_loads(cfg, "videolucy", "smollm2", None) == 1  # its own caption service
    assert serving.role_loads(cfg, "videolucy", "smollm2", {"name": "smollm2", **cfg["model"]["smollm2"]}) == 0
    assert serving.role_loads(cfg, "worldmm", "qwen15_coder", None) == 0  # the retriever is the run's model
    assert serving.role_loads(cfg, "worldmm", "smollm2", {"name": "smollm2", **cfg["model"]["smollm2"]}) == 1
    counts = serving.load_counts(cfg, videos)
    # 8 answer jobs: each loads its model; videolucy's also its captioner, worldmm × smollm2 its retriever
    assert counts == {"answer_jobs": 8, "in_process": 8 + 4 + 2, "served": 1 + 2 + 4 + 2, "batches": 1,
                      "role_loads_served": 2}


def test_the_serving_plan_bench_serves_the_shipped_vllm_configs_with_one_load_per_model_and_replica(capsys):
    """Issue 36 item 1: the shipped ``video: true`` config is servable, so the paper-sized plan is 3 loads
    (× replicas) instead of 420."""
    sys.path.insert(0, str(REPO / "bench"))
    import serving_plan

    assert serving_plan.main(["--replicas", "1", "2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("video: true")]
    assert [(r[3], r[4], r[7], r[8], r[10]) for r in rows] == [
        ("model", "1", "420", "3", "0"), ("model", "2", "420", "6", "0"),
        ("method_model", "1", "420", "42", "0"), ("method_model", "2", "420", "84", "0")]


# --- the served batch on the small demo --------------------------------------------------------------------------
#: Questions per answer: the first of each of the first two of the demo's task types on the video. Two calls per
#: answer leave room to kill a server after one of them (:data:`KILL_AFTER_CALLS`) with one left in that answer: a
#: kill still lands mid-answer with a call before and after it. Every run here (in process, served, killed,
#: restarted, replayed) pays its model calls again, so each question more costs every test of this module: four (and
#: six before them) checked nothing two do not, and cost about 14 CPU-s more in this module.
QUESTIONS_PER_ANSWER = 2
#: Responses in the first answer's cache when a test kills the server: half its calls, the rest still to come.
KILL_AFTER_CALLS = QUESTIONS_PER_ANSWER // 2


@pytest.fixture(scope="module")
def questions_file(small_demo, tmp_path_factory) -> Path:
    """The small demo's questions on :data:`VIDEO`, one per task type, of the first :data:`QUESTIONS_PER_ANSWER`
    task types in the file."""
    rows = [json.loads(line) for line in Path(small_demo["questions"]).read_text().splitlines()]
    first_per_task = {}
    for row in (r for r in rows if r["video_id"] == VIDEO):
        if row["task_type"] in first_per_task or len(first_per_task) < QUESTIONS_PER_ANSWER:
            first_per_task.setdefault(row["task_type"], row)
    assert len(first_per_task) == QUESTIONS_PER_ANSWER, sorted(first_per_task)
    path = tmp_path_factory.mktemp("serving_questions") / "questions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in first_per_task.values()))
    return path


def _overrides(small_demo, questions_file, *extra: str) -> str:
    # cache_prompt off: every call is evaluated from scratch, so a fresh call's numerics do not depend on what the
    # engine evaluated before (a shared server's prompt-cache history differs from an answer job's own engine's).
    # anonymize off: the blind methods read no pixels, so blurring the video's faces first (the costliest stage
    # here) would change nothing these tests compare. One llama.cpp thread per engine: the thread count is no
    # part of a call's cache identity, and two spinning threads per engine on a shared 2-core machine cost
    # several times the CPU (and wall) time of one; -c2 then runs the two in-process answers side by side.
    return " ".join([f"dataset=senri dataset.questions=[{questions_file}]",
                     f"dataset.videos_dir={small_demo['videos_dir']} dataset.video_ids=[{VIDEO}]",
                     f"method=[{','.join(METHODS)}] +model.smollm2.cache_prompt=false anonymize.enabled=false",
                     "model.smollm2.threads=1", *extra])


def snakemake(workdir: Path, overrides: str, *targets: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
                           "-c2", *targets, "--config", f"overrides={overrides}"],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def starts(workdir: Path) -> list[dict]:
    path = workdir / "results" / "serving" / "smollm2.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


#: What the in-process answers leave in a workdir: their tables, response caches, logs and benchmarks.
ANSWER_FOLDERS = ("results/predictions", "results/cache", "results/logs/answer", "results/benchmarks/answer")


@pytest.fixture(scope="module")
def in_process(small_demo, questions_file, tmp_path_factory):
    """The answers run in process, in the same Snakemake run as what they read (the questions table and the
    video's probe table): a run of its own for those cost one more Snakemake start."""
    work = tmp_path_factory.mktemp("in_process") / "w"
    snakemake(work, _overrides(small_demo, questions_file), "results/questions.parquet",
              f"results/probe/{VIDEO}.parquet", *PREDICTIONS)
    return work


@pytest.fixture(scope="module")
def prepared(in_process, tmp_path_factory):
    """A workdir with the questions table and the video's probe table, what the answers read: the in-process
    run's workdir as it was made, without anything of its answers."""
    work = tmp_path_factory.mktemp("prepared") / "w"
    shutil.copytree(in_process, work)
    for folder in ANSWER_FOLDERS:
        shutil.rmtree(work / folder)
    return work


def _copy(prepared: Path, tmp_path: Path) -> Path:
    work = tmp_path / "w"
    shutil.copytree(prepared, work)
    return work


def _tables(work: Path) -> list[pl.DataFrame]:
    return [pl.read_parquet(work / p) for p in PREDICTIONS]


@pytest.mark.workflow
def test_served_and_in_process_predictions_are_equal_and_each_mode_replays_the_others_cache(
        prepared, in_process, small_demo, questions_file, tmp_path):
    served = _copy(prepared, tmp_path)
    run = snakemake(served, _overrides(small_demo, questions_file, SERVED), *PREDICTIONS)
    assert "rule answer_served_smollm2:" in run.stdout + run.stderr and "rule answer:" not in run.stdout + run.stderr
    (start,) = starts(served)  # one server start for the batch's two answers
    # The serving knobs are in no answer's config slice: changing them reruns nothing (and so neither does the
    # unchanged config, which the dry run of this config once checked separately).
    knobs = " serving.answers_at_once=1 serving.max_restarts=5"
    dry = snakemake(served, _overrides(small_demo, questions_file, SERVED + knobs), "-n",
                    *PREDICTIONS)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    assert start["exit"] == "stopped: batch done" and start["answers_done"] == 2 and start["load_s"] > 0
    for a, b in zip(_tables(served), _tables(in_process)):
        assert a["error"].null_count() == a.height
        assert clock_free(a).equals(clock_free(b))
    sidecars = [p.replace(".parquet", ".config.yaml") for p in PREDICTIONS]
    assert [(served / s).read_text() for s in sidecars] == [(in_process / s).read_text() for s in sidecars]

    # Served files replayed in process from the served caches, and in-process files replayed served: byte-identical.
    # Each replay runs its mode's job itself (the in-process rule's command, the batch's): which rule Snakemake
    # picks for each mode is checked above (this run, the in_process fixture's); two more Snakemake starts cost 9
    # CPU-s.
    def replay(work: Path, mode: str) -> None:
        before = [(work / p).read_bytes() for p in PREDICTIONS]
        for p in PREDICTIONS:
            (work / p).unlink()
        overrides = _overrides(small_demo, questions_file, mode)
        if mode:
            batch = _batch_process(work, overrides)
            assert batch.wait(timeout=600) == 0, (work / "results/logs/serving/smollm2.log").read_text()[-3000:]
        else:
            cfg = cfgmod.compose(cfgmod.parse_overrides(overrides))
            served_cfg = cfgmod.compose(cfgmod.parse_overrides(_overrides(small_demo, questions_file, SERVED)))
            for answer in (a for b in serving.batches(served_cfg, [VIDEO]) for a in b.answers):  # their files
                *in_process_command, flag, url = serving.answer_command(cfg, answer, "http://unused")
                assert (flag, url) == ("--server", "http://unused")  # the in-process rule's command, then --server
                with (work / answer.log).open("wb") as log:
                    assert subprocess.run(in_process_command, cwd=work, env=_job_env(), stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode == 0
        assert [(work / p).read_bytes() for p in PREDICTIONS] == before
        for p in PREDICTIONS:
            answer_log = (work / p.replace("predictions", "logs/answer").replace(".parquet", ".log")).read_text()
            assert re.findall(r"response cache: \d+ hit\(s\), (\d+) miss\(es\)", answer_log) == ["0"]

    # The two workdirs' replays side by side: each is mostly the interpreter's and the engine's start-up on one core,
    # no model call.
    with ThreadPoolExecutor(max_workers=2) as pool:
        for replayed in [pool.submit(replay, served, ""), pool.submit(replay, in_process, SERVED)]:
            replayed.result()
    assert len(starts(in_process)) == 1 and len(starts(served)) == 1


def _job_env() -> dict[str, str]:
    """A job's environment as the workflow gives it: senri importable from this checkout."""
    return {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _batch_process(work: Path, overrides: str) -> subprocess.Popen:
    (work / "results" / "logs" / "serving").mkdir(parents=True, exist_ok=True)
    log = (work / "results" / "logs" / "serving" / "smollm2.log").open("wb")
    return subprocess.Popen([sys.executable, "-m", "senri.serving", "--overrides",
                             json.dumps(cfgmod.parse_overrides(overrides)), "--batch", "smollm2"],
                            cwd=work, env=_job_env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _kill_server_after_some_calls(work: Path, batch: subprocess.Popen, calls: int = KILL_AFTER_CALLS) -> int:
    """SIGKILL the batch's server once the first answer's cache holds ``calls`` responses; return its pid."""
    import sqlite3

    cache = work / f"results/cache/answer/{METHODS[0]}/smollm2/{VIDEO}.sqlite"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and batch.poll() is None:
        if cache.exists():
            try:
                with sqlite3.connect(cache) as db:
                    if db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] >= calls:
                        break
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    text = (work / "results/logs/serving/smollm2.log").read_text()
    pid = int(text.split("server pid ")[1].split()[0])
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.workflow
def test_a_server_killed_mid_run_is_restarted_leaves_no_error_rows_and_the_result_matches(
        prepared, in_process, small_demo, questions_file, tmp_path):
    work = _copy(prepared, tmp_path)
    batch = _batch_process(work, _overrides(small_demo, questions_file, SERVED))
    killed = _kill_server_after_some_calls(work, batch)
    assert batch.wait(timeout=600) == 0, (work / "results/logs/serving/smollm2.log").read_text()[-3000:]
    first, second = starts(work)
    assert first["pid"] == killed and first["exit"] == "died (exit code -9)" and first["answers_done"] < 2
    assert second["exit"] == "stopped: batch done" and second["answers_left"] == 0
    for a, b in zip(_tables(work), _tables(in_process)):
        assert a["error"].null_count() == a.height  # the dead server's calls are no wrong answers
        assert clock_free(a).equals(clock_free(b))


@pytest.mark.workflow
def test_a_server_that_keeps_dying_leaves_error_rows_for_what_it_did_not_answer_or_fails_the_batch(
        prepared, small_demo, questions_file, tmp_path):
    """Issue 36 item 3: past serving.max_restarts, the default (on_dead_server: error_rows) writes one error row
    per question the server left unanswered and the batch ends (the run's tables come out, the loss counted);
    on_dead_server: fail fails the job without writing them (the profile's retries run it again)."""
    def killed_batch(work: Path, *policy: str) -> int:
        batch = _batch_process(work, _overrides(small_demo, questions_file, SERVED, "serving.max_restarts=0",
                                                *policy))
        _kill_server_after_some_calls(work, batch)
        return batch.wait(timeout=600)

    # The two policies' batches side by side (the default's and fail's): each runs its server on one core.
    work, failing = _copy(prepared, tmp_path), _copy(prepared, tmp_path / "fail")
    with ThreadPoolExecutor(max_workers=2) as pool:
        error_rows = pool.submit(killed_batch, work)
        fail = pool.submit(killed_batch, failing, "serving.on_dead_server=fail")
        error_rows_code, fail_code = error_rows.result(), fail.result()

    assert error_rows_code == 0
    assert "serving.max_restarts=0" in (work / "results/logs/serving/smollm2.log").read_text()
    tables = [pl.read_parquet(work / p) for p in PREDICTIONS]
    unanswered = [t for t in tables if t["error"].is_not_null().any()]  # (an answer may have finished first)
    assert unanswered and all(t["pred"].is_null().all() and not t["correct"].any() for t in unanswered)
    assert all(t["error"].str.starts_with("not answered: batch smollm2: the smollm2 server stopped answering").all()
               for t in unanswered)
    (start,) = starts(work)
    assert start["exit"].startswith("died")

    assert fail_code == 1
    assert not (failing / PREDICTIONS[0]).exists()  # the answer the server died under wrote nothing


def test_a_missing_server_executable_stops_the_batch_at_once_with_its_name(tmp_path, monkeypatch):
    """Issue 36 item 5: no restart can bring a missing ``vllm`` back; the batch says which executable, before any
    start or answer, instead of a traceback or max_restarts "stopped answering" rounds."""
    cfg = cfgmod.compose("dataset=demo method=[blind] model=[qwen25vl7b_vllm] serving.models=[qwen25vl7b_vllm]")
    (batch,) = serving.batches(cfg, ["demo_01"])
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without vllm
    with pytest.raises(serving.BatchError, match=r"executable 'vllm' is not on PATH \(model config backend 'vllm'\)"):
        serving.run_batch(cfg, batch, tmp_path)
    assert not (tmp_path / "results" / "serving").exists()  # no server start was recorded: none was tried


@pytest.mark.workflow
def test_an_answer_that_fails_for_its_own_reason_costs_its_questions_not_the_batch(
        prepared, in_process, small_demo, questions_file, tmp_path):
    """Issue 36 item 3: one answer's job fails deterministically (its response cache is not a database): its
    questions become error rows naming the failure, the batch ends well, and the other answer is untouched."""
    work = _copy(prepared, tmp_path)
    broken = work / f"results/cache/answer/{METHODS[1]}/smollm2/{VIDEO}.sqlite"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_bytes(b"not a database, " * 64)
    batch = _batch_process(work, _overrides(small_demo, questions_file, SERVED))
    assert batch.wait(timeout=600) == 0, (work / "results/logs/serving/smollm2.log").read_text()[-3000:]
    good, failed = _tables(work)
    expected = _tables(in_process)
    assert clock_free(good).equals(clock_free(expected[0]))
    assert failed.height == expected[1].height and failed["pred"].is_null().all() and not failed["correct"].any()
    assert failed["error"].str.contains(r"answer job failed \(exit 1\) in served batch").all()
    assert failed["error"].str.contains("not a database").all()  # the end of the answer's own log
    assert (failed["method"] == METHODS[1]).all() and (failed["memory"] == "none").all()
    assert (work / PREDICTIONS[1].replace(".parquet", ".config.yaml")).read_text() == (
        in_process / PREDICTIONS[1].replace(".parquet", ".config.yaml")).read_text()
    (start,) = starts(work)
    assert start["exit"].startswith("stopped: batch done, 1 answer(s) failed for a reason of their own")


def test_replicas_split_a_model_s_videos_into_contiguous_batches_one_server_each():
    """Issue 36 item 4: serving.replicas.<model> = N gives N batch jobs over contiguous shares of the videos (data
    parallel), so loads = models × replicas; more replicas than videos gives one batch per video."""
    videos = ["v1", "v2", "v3"]
    assert serving.video_shares(videos, 2) == [["v1", "v2"], ["v3"]]
    assert serving.video_shares(videos, 5) == [["v1"], ["v2"], ["v3"]] and serving.video_shares(videos, 1) == [videos]
    cfg = cfgmod.compose("dataset=demo method=[random,blind,blind_letter] serving.models=[smollm2] "
                         "+serving.replicas.smollm2=2")
    plan = serving.batches(cfg, videos)
    assert [b.name for b in plan] == ["smollm2.r1", "smollm2.r2"]
    assert [sorted({a.video_id for a in b.answers}) for b in plan] == [["v1", "v2"], ["v3"]]
    assert [b.rule_name for b in plan] == ["answer_served_smollm2_r1", "answer_served_smollm2_r2"]
    assert sorted(o for b in plan for o in b.outputs) == sorted(o for b in serving.batches(
        cfgmod.compose("dataset=demo method=[random,blind,blind_letter] serving.models=[smollm2]"), videos) for o in b.outputs)
    assert serving.load_counts(cfg, videos) == {"answer_jobs": 6, "in_process": 6, "served": 2, "batches": 2,
                                                "role_loads_served": 0}
    with pytest.raises(cfgmod.ConfigError, match=r"serving\.replicas\.qwen15_coder: 'qwen15_coder' is not in"):
        serving.batches(cfgmod.compose("dataset=demo method=[blind] serving.models=[smollm2] "
                                       "+serving.replicas.qwen15_coder=2"), videos)


def test_a_request_the_server_keeps_failing_with_500_is_that_request_s_error_not_a_dead_server(monkeypatch):
    """Issue 36 item 3: a served call answered 500 on every attempt by a server that still says it is up is the
    request's own failure (recorded, its question an error row; the batch goes on); a server that is gone is
    the engine's failure (EngineUnavailable: the batch restarts it)."""
    from strict_openai import StrictOpenAI

    monkeypatch.setenv("SENRI_SERVER_KEY", "batch-key")
    config = {"name": "qwen25vl7b_vllm", **cfgmod.compose("model=[qwen25vl7b_vllm]")["model"]["qwen25vl7b_vllm"]}
    rules = [{"match": "poison", "error": "CUDA error: an illegal memory access", "status": 500}, {"text": "B"}]
    with StrictOpenAI(rules, model="qwen25vl7b_vllm", api_key="batch-key", video="senri") as server:
        served = ServedBackend(config, Endpoint(server.base_url.removesuffix("/v1"), config))
        served.backoff_base_s = served.backoff_cap_s = 0.01
        bad = served.complete(ChatRequest((Message.text("user", "a poison prompt"),), max_tokens=4))
        good = served.complete(ChatRequest((Message.text("user", "a fine prompt"),), max_tokens=4))
        url = server.base_url
    assert bad.error and "HTTP 500" in bad.error and "the server is up" in bad.error and bad.attempts == 4
    assert good.error is None and good.text == "B"
    gone = ServedBackend(config, Endpoint(url.removesuffix("/v1"), config))  # nothing listens there now
    gone.backoff_base_s = gone.backoff_cap_s = 0.01
    with pytest.raises(EngineUnavailable):
        gone.complete(ChatRequest((Message.text("user", "a fine prompt"),), max_tokens=4))


@pytest.mark.workflow
def test_a_batch_killed_mid_way_restores_its_finished_answers_on_the_rerun_with_no_call_and_no_load(
        prepared, in_process, small_demo, questions_file, tmp_path):
    """Issue 36 item 3: Snakemake deletes a killed job's outputs, so a finished answer survives only as the
    batch's kept copy (results/serving/kept): the rerun restores it — no model call, and no server start when
    nothing else is left — and answers only the rest; the tables equal the in-process run's."""
    import sqlite3

    work = _copy(prepared, tmp_path)
    overrides = _overrides(small_demo, questions_file, "serving.models=[smollm2] serving.answers_at_once=1")
    batch = _batch_process(work, overrides)
    kept = work / serving.KEPT
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and batch.poll() is None and not list(kept.rglob("*.digest")):
        time.sleep(0.1)
    batch.kill()  # SIGKILL: the server follows it (parent-death signal)
    batch.wait(timeout=60)
    finished = sorted(kept.rglob("*.digest"))
    assert finished, "no answer finished before the kill"
    for p in PREDICTIONS:  # what Snakemake deletes of a killed job, and before it runs the job again
        (work / p).unlink(missing_ok=True)
        (work / p.replace(".parquet", ".config.yaml")).unlink(missing_ok=True)
    (work / "results/serving/smollm2.jsonl").unlink(missing_ok=True)
    cache_rows = {}
    for digest in finished:
        method = digest.relative_to(kept).parts[0]
        with sqlite3.connect(work / f"results/cache/answer/{method}/smollm2/{VIDEO}.sqlite") as db:
            cache_rows[method] = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    again = _batch_process(work, overrides)
    assert again.wait(timeout=600) == 0, (work / "results/logs/serving/smollm2.log").read_text()[-3000:]
    batch_log = (work / "results/logs/serving/smollm2.log").read_text()
    assert f"({len(finished)} restored)" in batch_log
    for method, rows in cache_rows.items():
        assert f"restored {method}/smollm2/{VIDEO}" in batch_log
        with sqlite3.connect(work / f"results/cache/answer/{method}/smollm2/{VIDEO}.sqlite") as db:
            assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == rows  # no call made
    assert len(starts(work)) == (0 if len(finished) == len(PREDICTIONS) else 1)  # a load only for what is left
    for a, b in zip(_tables(work), _tables(in_process)):
        assert a["error"].null_count() == a.height
        assert clock_free(a).equals(clock_free(b))
    # a kept answer is restored only under its digest: a changed input is answered again
    cfg = cfgmod.compose(cfgmod.parse_overrides(overrides))
    answer = next(a for b in serving.batches(cfg, [VIDEO]) for a in b.answers if a.method in cache_rows)
    assert serving.restore_answer(cfg, answer, work)
    os.utime(work / answer.inputs["questions"])
    assert not serving.restore_answer(cfg, answer, work)
    serving.keep_answer(cfg, answer, work)
    assert serving.restore_answer(cfg, answer, work)
    (work / answer.cache).unlink()  # a deleted response cache: fresh calls wanted, the kept copy is not used
    assert not serving.restore_answer(cfg, answer, work)


def test_a_batch_asks_for_its_model_s_threads_and_cpus_for_each_concurrent_answer():
    """Issue 36 item 4: a batch's CPUs are its server's (the model config's threads) plus
    serving.cpus_per_answer for each of serving.answers_at_once answers (their frame decoding)."""
    cfg = cfgmod.compose("dataset=demo method=[blind] model=[qwen25vl7b_vllm] serving.models=[qwen25vl7b_vllm] "
                         "serving.answers_at_once=4")
    (batch,) = serving.batches(cfg, ["v1"])
    assert serving.batch_threads(cfg, batch) == 1 + 4
    cfg["serving"]["cpus_per_answer"] = 2
    assert serving.batch_threads(cfg, batch) == 1 + 8
    cfg = cfgmod.compose("dataset=demo method=[blind] serving.models=[smollm2] serving.cpus_per_answer=0")
    (batch,) = serving.batches(cfg, ["v1"])
    assert serving.batch_threads(cfg, batch) == 2  # llama.cpp's server threads only
