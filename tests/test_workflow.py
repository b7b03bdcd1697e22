"""End-to-end: the Snakemake DAG on the demo (`make demo`), its caching, and the workflow's house rules."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest
import yaml

# snakemake: other test modules import it from here
from conftest import DAG_DEMO, DEMO_RUN, ONE_VIDEO_DEMO, REPO, snakemake
from senri import code_identity
from senri import config as senri_config
from senri import demo
from senri.memory.hierarchy import memory_plan
from senri import workflow as senri_workflow

pytestmark = pytest.mark.workflow


def planned_jobs(workdir: Path, *args: str, **options) -> dict[str, int]:
    """The jobs a dry run would execute, as {rule: count}, read from Snakemake's job-stats table (``options``:
    :func:`conftest.snakemake`'s ``env`` and ``snakefile``)."""
    proc = snakemake(workdir, "-n", "--quiet", "rules", *args, **options)
    return job_stats(proc.stdout + proc.stderr)


def job_stats(text: str) -> dict[str, int]:
    """{rule: count} of a dry run's job-stats table ({} where Snakemake had nothing to do)."""
    if "Nothing to be done" in text:
        return {}
    stats = text.split("Job stats:", 1)[1].splitlines()
    jobs = {}
    for line in stats[3:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        jobs[parts[0]] = int(parts[1])
    return jobs


def planned_jobs_under(workdir: Path, overrides: list[str], base: str = "") -> dict[str, dict[str, int]]:
    """:func:`planned_jobs` under each of ``overrides`` (one ``--config overrides=...`` each, after ``base``, the
    overrides the workdir's run had): half of them planned in each of two processes side by side
    (tests/dry_run.py, Snakemake's API). A dry run takes no lock on the workdir and writes nothing; most of one
    alone is start-up (importing Snakemake and senri, one core's work), so a dozen in two processes cost about a
    third of a dozen ``snakemake -n`` calls."""
    from dry_run import plan

    cases = {f"c{i}": f"{base} {override}".strip() for i, override in enumerate(overrides)}
    halves = [dict(list(cases.items())[k::2]) for k in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        texts = {name: text for part in pool.map(lambda half: plan(workdir, half, shared=True), halves)
                 for name, text in part.items()}
    assert set(texts) == set(cases), sorted(set(cases) - set(texts))
    for name, text in texts.items():
        assert f"!!! {name} failed" not in text, text[-3000:]
    return {override: job_stats(texts[f"c{i}"]) for i, override in enumerate(overrides)}


#: make demo's run as the tests below run it (conftest.DEMO_RUN: make demo's config at 4 questions a video, SmolLM2 on
#: one thread): its sizes, not numbers copied here, set what the checks below expect, so a resized demo keeps every
#: check.
DEMO_CFG = senri_config.compose(DEMO_RUN)
DEMO = demo.DemoConfig.from_mapping(DEMO_CFG["dataset"]["demo"])
#: The ``--config`` of every Snakemake call on make demo's run below.
DEMO_CONFIG = ("--config", f"overrides={DEMO_RUN}")
QUESTIONS_PER_VIDEO = sum(DEMO.questions_per_task.values())
N_QUESTIONS = DEMO.n_videos * QUESTIONS_PER_VIDEO
DEMO_FRAMES = demo.plan_walk(DEMO, "demo_01").duration_s * DEMO.fps
#: Coarse captions of a demo video: its length split at the clip span of the preset that length picks.
COARSE_CLIPS = memory_plan(DEMO_CFG["memory"],
                           demo.plan_walk(DEMO, "demo_01").duration_s)["levels"]["coarse"]["clips"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, prepared_demo) -> Path:
    """make demo's run (conftest.DEMO_RUN), from a copy of its upstream stages, which the two-video DAG tests of
    other modules share (conftest.prepared_demo: prepared once per session; SmolLM2's thread count is in none of
    their slices, so Snakemake runs none of them again). Every job also logs the modules it imported (Python's
    ``-X importtime``, in its log; the prepared jobs' too): the code-identity test below holds each job's imports
    against its code digest."""
    workdir = prepared_demo(tmp_path_factory.mktemp("workflow"), DAG_DEMO)
    proc = snakemake(workdir, "-c2", *DEMO_CONFIG, env={"PYTHONPROFILEIMPORTTIME": "1"})
    ran = set(re.findall(r"^\s*(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.MULTILINE))
    assert ran == {"frames", "answer", "aggregate", "report", "all"}, ran  # the prepared stages were not run again
    return workdir


#: The one-video demo the memory-system DAG tests share (conftest.ONE_VIDEO_DEMO): VideoLucy's caption-cache and
#: call-bound checks run there, on a copy of its prepared upstream stages, not on make demo's workdir.
ONE_VIDEO_CFG = senri_config.compose(ONE_VIDEO_DEMO)
ONE_VIDEO = demo.DemoConfig.from_mapping(ONE_VIDEO_CFG["dataset"]["demo"])
ONE_VIDEO_QUESTIONS = sum(ONE_VIDEO.questions_per_task.values())
ONE_VIDEO_COARSE_CLIPS = memory_plan(ONE_VIDEO_CFG["memory"],
                                     demo.plan_walk(ONE_VIDEO, "demo_01").duration_s)["levels"]["coarse"]["clips"]
#: VideoLucy's questions: a seeded 2 of the one-video demo's 4 (dataset.subset, drawn and recorded by ingest).
LUCY_QUESTIONS = 2
LUCY_TARGET = "results/predictions/videolucy/smollm2/demo_01.parquet"
#: VideoLucy (not in make demo's run set) on the embedded SmolLM2 over the one-video demo's perception memory.
WITH_VIDEOLUCY = ("--config", f"overrides={ONE_VIDEO_DEMO} method=[videolucy] "
                  f"dataset.subset={{n:{LUCY_QUESTIONS},seed:0}}", "--", LUCY_TARGET)


@pytest.fixture(scope="module")
def lucy_run(tmp_path_factory, prepared_demo) -> Path:
    """VideoLucy's answers over the one-video demo, 2 of its 4 questions (:data:`LUCY_QUESTIONS`): it used to run
    on make demo's workdir, over its second video's 8 questions, the second-slowest setup of this module (69 s),
    then over the one-video demo's 4 (48 s); what its tests check (every question answered within the call bound
    on the real SmolLM2; a rerun reads every caption and answer from the caches) holds per question and per video,
    not for those questions in particular, and the answer job, most of this run, costs per question. The drawn
    subset changes the ingest slice only: the prepared memory is reused."""
    workdir = prepared_demo(tmp_path_factory.mktemp("lucy"), ONE_VIDEO_DEMO)
    proc = snakemake(workdir, "-c2", *WITH_VIDEOLUCY)
    ran = set(re.findall(r"^\s*(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.MULTILINE))
    assert ran == {"ingest", "answer"}, ran  # the subset's questions, then VideoLucy over the prepared memory
    return workdir


def test_demo_run_produces_the_main_table(demo_run):
    main = (demo_run / "results/tables/main.md").read_text()
    assert re.search(rf"^\| random \| none \| none \| {N_QUESTIONS} \| \d+\.\d \|", main, re.MULTILINE), main
    for table in demo_run.glob("results/**/*.parquet"):
        rows = pl.read_parquet(table).height  # every stage's output opens with polars
        # The demo's walks show no faces: its detections tables are empty; its SENRI-format questions have no
        # quirk to report (the ingest report is empty); every other table is not.
        assert rows > 0 or table.name.endswith(".detections.parquet") or table.name == "questions.report.parquet", table
    videos = pl.read_parquet(demo_run / "results/videos.parquet")
    assert videos["video_id"].to_list() == ["demo_01", "demo_02"]
    walks = {w["video_id"]: w for w in json.loads((demo_run / "results/demo/walks.json").read_text())}
    assert videos["duration_s"].to_list() == pytest.approx([walks[v]["duration_s"] for v in videos["video_id"]],
                                                           abs=0.05)  # the probed length is the walk script's
    questions = pl.read_parquet(demo_run / "results/questions.parquet")
    assert questions.height == N_QUESTIONS
    per_task = questions.group_by("video_id", "task_type").len()
    assert {(r["task_type"], r["len"]) for r in per_task.iter_rows(named=True)} == {
        (task, n) for task, n in DEMO.questions_per_task.items() if n}


def test_bench_demo_times_every_rule_of_the_demo(demo_run, tmp_path):
    """bench/demo.py's table (the README's time per rule) has a row for every rule make demo runs, with its jobs;
    make demo's own config (no override: 8 questions a video) plans exactly these jobs too, so the run the tests
    here check at 4 questions a video is make demo's DAG."""
    spec = importlib.util.spec_from_file_location("bench_demo", REPO / "bench" / "demo.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = bench.summarize(demo_run, wall=100.0, cpu=150.0, cores=2, load=(0.5, 1.5))
    rows = [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    jobs = {row[0]: int(row[1]) for row in rows[1:]}
    answers = len(list(demo_run.glob("results/predictions/*/*/*.parquet")))
    per_video = {"demo_video", "anonymize", "probe", "frames", "track", "memory"}
    assert jobs == {**{rule: DEMO.n_videos for rule in per_video}, "answer": answers, "demo_questions": 1,
                    "ingest": 1, "videos_table": 1, "aggregate": 1, "report": 1,
                    "all": DEMO.n_videos * len(per_video) + answers + 5}
    assert planned_jobs(tmp_path) == {**jobs, "all": 1}  # a fresh checkout's `snakemake -c2`, dry
    assert float(rows[-1][3]) > 0 and float(next(r for r in rows if r[0] == "anonymize")[3]) > 0, text  # CPU s
    assert "150 CPU s in all" in text and "Load average (1 min) 0.5 before, 1.5 after" in text


def test_every_stage_after_anonymization_reads_the_anonymized_video(demo_run):
    videos = pl.read_parquet(demo_run / "results/videos.parquet")
    assert videos["path"].to_list() == ["results/anonymized/demo_01.mp4", "results/anonymized/demo_02.mp4"]
    assert videos["n_frames"].to_list() == [DEMO_FRAMES, DEMO_FRAMES]  # the source's frame count, kept
    assert (videos["keyframe_interval_s"] == 1.0).all()  # a camera-like GOP, so frame sampling stays cheap
    detections = pl.read_parquet(demo_run / "results/anonymized/demo_01.detections.parquet")
    assert detections.columns[:4] == ["video_id", "frame_index", "pts_s", "cls"]
    log = (demo_run / "results/logs/anonymize/demo_01.log").read_text()
    stride = DEMO_CFG["anonymize"]["stride"]
    detected = len(range(0, DEMO_FRAMES, stride)) + ((DEMO_FRAMES - 1) % stride != 0)  # every stride-th, and the last
    assert re.search(rf"demo_01: {DEMO_FRAMES} frames \({detected} detected, {DEMO_FRAMES - detected} propagated\)",
                     log), log


def test_demo_blind_row_comes_from_a_real_model(demo_run):
    main = (demo_run / "results/tables/main.md").read_text()
    assert re.search(rf"^\| blind \| smollm2 \| none \| {N_QUESTIONS} \| \d+\.\d \|", main, re.MULTILINE), main
    blind = pl.concat([pl.read_parquet(p) for p in (demo_run / "results/predictions/blind/smollm2").glob("*.parquet")])
    assert blind.height == N_QUESTIONS and blind["error"].is_null().all()
    assert (blind["n_llm_calls"] == 1).all() and (blind["prompt_tokens"] > 50).all()
    assert blind["raw_output"].is_not_null().all() and blind["parse_ok"].sum() >= 0.875 * N_QUESTIONS
    log = (demo_run / "results/logs/answer/blind/smollm2/demo_01.log").read_text()
    assert "llama.cpp loaded SmolLM2-135M-Instruct.Q4_1.gguf" in log and "hit rate 0.0%" in log


def test_the_demo_report_has_every_table_and_figure(demo_run):
    page = (demo_run / "results/report.html").read_text()
    for heading in ("Table 2 layout", "Table 3 layout", "Table 4 layout", "Table 11 layout", "Fig. 6 layout",
                    "Accuracy by task type", "Answer letters"):
        assert heading in page, heading
    assert page.count("data:image/png;base64,") == 3  # Fig. 5 needs direct-perception runs at several budgets
    stats = pl.read_parquet(demo_run / "results/report/tables/paired_stats.parquet")
    assert set(stats["comparison"]) == {"model vs chance: random/none → blind/smollm2",
                                        "letter scoring: blind_letter/smollm2 → blind_debiased/smollm2",
                                        "blind_debiased/smollm2 → w/o debiasing"}
    assert (stats["resamples"] == 10_000).all() and (stats["seed"] == 0).all()
    assert_report_has_run_health_and_chance(demo_run / "results")


def assert_report_has_run_health_and_chance(results: Path) -> None:
    """Issue 24's run-health table and issue 28's chance note, in a workflow's report: one run-health row per
    run of the main table, every run but random compared with random, the words where an interval covers 0."""
    page = (results / "report.html").read_text()
    keys = ["method", "model", "memory"]
    main = pl.read_parquet(results / "report/tables/main.parquet").select(keys).sort(keys)
    health = pl.read_parquet(results / "report/tables/run_health.parquet")
    assert health.select(keys).sort(keys).rows() == main.rows()
    assert "<h2>Run health</h2>" in page
    chance = pl.read_parquet(results / "report/tables/chance.parquet")
    assert chance.height == main.filter(pl.col("method") != "random").height
    assert ("cannot be told apart from chance" in page) == chance["covers_zero"].any()
    assert ("make evidence" in page) == chance["covers_zero"].any()
    # Issue 39: a memory run that mostly answered without retrieval is marked beside the main table, with its count.
    for row in health.filter((pl.col("memory") != "none")
                             & (pl.col("no_retrieval") * 2 > pl.col("questions"))).iter_rows(named=True):
        assert f"answered {row['no_retrieval']} of its {row['questions']} questions without retrieving" in page, row
        assert "‡" in page
    # The same page beside the browser, its links inside report/ (copying report/ keeps them).
    inside = (results / "report/index.html").read_text()
    assert 'href="questions/index.html"' in inside and 'href="report/questions/index.html"' in page


def recorded_calls(value) -> int:
    """Model calls a trace records: every entry with a ``call`` name, counting the attempts a repair replaced."""
    if isinstance(value, dict):
        own = max(1, int(value.get("attempts") or 1)) if "call" in value else 0
        return own + sum(recorded_calls(v) for k, v in value.items() if k != "rejected_attempts")
    if isinstance(value, list):
        return sum(recorded_calls(v) for v in value)
    return 0


def test_every_demo_call_is_in_its_trace_with_its_prompt(demo_run):
    """Issue 39 item 2: every model call of every demo method is recorded (prompt and reply), and the question
    page of blind_debiased shows its four orderings with their letter mapping."""
    files = sorted((demo_run / "results/predictions").glob("*/*/*.parquet"))
    preds = pl.concat([pl.read_parquet(f) for f in files if not f.name.endswith(".config.parquet")],
                      how="diagonal_relaxed")
    for row in preds.iter_rows(named=True):
        trace = json.loads(row["trace"]) if row["trace"] else {}
        made = row["n_llm_calls"] + row["n_vlm_calls"]
        assert recorded_calls(trace) == made, (row["method"], row["qid"], made)
        calls = [c for c in trace.get("calls", [])]
        assert all(c.get("prompt") for c in calls), (row["method"], row["qid"])
    debiased = preds.filter(pl.col("method") == "blind_debiased").row(0, named=True)
    page = (demo_run / "results/report/questions/q" / f"{debiased['qid']}.html").read_text()
    section = re.search(r'<section class="run"[^>]* data-run="blind_debiased/smollm2">(.*?)</section>', page, re.S).group(1)
    assert all(f"answer:shift{k}" in section for k in range(4)) and section.count("options shown as:") == 4
    assert "A = option B, B = option C, C = option D, D = option A" in section  # shift 1
    assert "how the prediction follows" in section and "score per original option" in section


def test_demo_memory_is_built_by_the_perception_captioner_from_the_track(demo_run):
    walks = {w["video_id"]: w for w in json.loads((demo_run / "results/demo/walks.json").read_text())}
    for video_id, walk in walks.items():
        memory = pl.read_parquet(demo_run / f"results/memory/perception/{video_id}.parquet")
        assert memory["level"].to_list() == ["coarse"] * COARSE_CLIPS and memory["error"].is_null().all()
        text = " ".join(memory["text"])
        for place in walk["places"]:
            assert f'"{place["name"]}"' in text  # the signs, read by OCR
        log = (demo_run / f"results/logs/track/{video_id}.log").read_text()
        turns = re.search(r"turns: (.*); \d+ pauses", log).group(1).split(", ")
        assert [t.split()[0] for t in turns] == [t["direction"] for t in walk["turns"]]
        assert all(abs(int(t.split()[1].rstrip("°")) - 90) <= 30 for t in turns)
        assert f"Turned {turns[0]}" in text
        cost = pl.read_parquet(demo_run / f"results/memory/perception/{video_id}.cost.parquet")
        assert cost["computed"].to_list() == [COARSE_CLIPS] and cost["frames"].sum() > 0
    assert (demo_run / "results/track/demo_01.png").read_bytes()[:4] == b"\x89PNG"
    # make demo's memory method reads this memory: every question answered, each within its call bound.
    search = pl.concat([pl.read_parquet(p) for p in (demo_run / "results/predictions/memory_search/smollm2").glob("*.parquet")])
    assert search.height == N_QUESTIONS and search["error"].is_null().all() and search["trace"].is_not_null().all()
    assert (search["n_llm_calls"] >= 1).all() and (search["n_llm_calls"] <= 12).all()  # (5 rounds + forced)·(1 + 1 repair)
    assert {json.loads(t)["retriever"] for t in search["trace"]} == {"embedding"}


def test_videolucy_answers_every_demo_question_over_the_perception_memory(lucy_run):
    """VideoLucy is not in make demo's run set (too slow on SmolLM2 for 5 minutes); asked for, it answers a
    demo video's questions over the perception memory within its call bound."""
    lucy = pl.read_parquet(lucy_run / LUCY_TARGET)
    assert lucy.height == LUCY_QUESTIONS and lucy["error"].is_null().all() and lucy["trace"].is_not_null().all()
    assert (lucy["n_llm_calls"] >= 2).all() and (lucy["n_llm_calls"] <= 26).all()  # (3 + 2·5)·(1 + 1 repair)


def _clock_s(text: str) -> int:
    minutes, seconds = text.split(":")
    return int(minutes) * 60 + int(seconds)


def test_the_demo_memory_holds_every_navigation_answer(demo_run):
    """Reading only the memory's text (signs with when they were read, turns with when they happened), the
    route of every navigation-planning (NP) question is the correct option's: the information is there for a
    memory method to use."""
    questions = pl.read_parquet(demo_run / "results/questions.parquet").filter(pl.col("task_type") == "NP")
    assert questions.height == DEMO.n_videos * DEMO.questions_per_task["NP"] > 0
    for q in questions.iter_rows(named=True):
        text = " ".join(pl.read_parquet(demo_run / f"results/memory/perception/{q['video_id']}.parquet")["text"])
        signs: dict[str, list[int]] = {}
        for name, first, last in re.findall(r'"([A-Z ]+)" \((\d+:\d\d)(?:–(\d+:\d\d))?\)', text):
            signs.setdefault(name, []).extend([_clock_s(first), _clock_s(last or first)])
        turns = [(_clock_s(start), side) for side, start in
                 re.findall(r"Turned (left|right) \d+° at (\d+:\d\d)–", text)]
        start, end = re.search(r"After I left the (.+), how did I walk to the (.+)\?", q["question"]).groups()
        left_at, arrived_at = max(signs[start.upper()]), min(signs[end.upper()])
        route = [side for t, side in sorted(turns) if left_at <= t <= arrived_at]
        phrase = ", ".join(f"turn {d}" for d in route[:-1]) + f", then turn {route[-1]}"
        correct = q["option_" + q["answer"].lower()]
        assert phrase[0].upper() + phrase[1:] == correct, (q["qid"], route, correct)


def test_a_second_run_makes_no_captioner_call(lucy_run):
    for path in ("results/memory/perception/demo_01.parquet", LUCY_TARGET):
        (lucy_run / path).unlink()
    snakemake(lucy_run, "-c2", *WITH_VIDEOLUCY)
    memory_log = (lucy_run / "results/logs/memory/perception/demo_01.log").read_text()
    assert f"0 computed, {ONE_VIDEO_COARSE_CLIPS} reused from the caption cache" in memory_log
    answer_log = (lucy_run / "results/logs/answer/videolucy/smollm2/demo_01.log").read_text()
    assert "0 miss(es), hit rate 100.0%" in answer_log
    assert re.search(r"captioner perception: 0 caption\(s\) computed, \d+ reused", answer_log), answer_log


def test_every_stage_writes_its_config_log_and_benchmark(demo_run):
    results = demo_run / "results"
    for sidecar in ["questions.config.yaml", "probe/demo_01.config.yaml", "tables/config.yaml",
                    "predictions/random/none/demo_02.config.yaml", "demo/questions.config.yaml",
                    "track/demo_01.config.yaml", "memory/perception/demo_02.config.yaml"]:
        assert (results / sidecar).is_file(), sidecar
    assert "seed: 0" in (results / "predictions/random/none/demo_01.config.yaml").read_text()
    for log in ["ingest.log", "aggregate.log", "videos_table.log", "demo_questions.log", "probe/demo_01.log",
                "answer/random/none/demo_02.log", "demo_video/demo_01.log", "track/demo_02.log",
                "memory/perception/demo_01.log"]:
        assert (results / "logs" / log).is_file(), log
    frames = pl.read_parquet(results / "frames/uniform_512/demo_01.parquet")
    assert frames.height == 512 and frames["error"].is_null().all() and (frames["height"] == 360).all()
    for bench in ["probe/demo_02.tsv", "answer/random/none/demo_01.tsv", "demo_video/demo_02.tsv",
                  "frames/uniform_512/demo_01.tsv", "track/demo_01.tsv", "memory/perception/demo_02.tsv"]:
        assert (results / "benchmarks" / bench).is_file(), bench


def test_a_finished_run_schedules_nothing(demo_run):
    assert planned_jobs(demo_run, *DEMO_CONFIG) == {}


def test_adding_a_method_reruns_only_answer_and_aggregate(demo_run):
    extra = "+method.random_b={implementation:random,approach:baseline,uses_model:false}"
    # VideoLucy's Fig. 6 experiments by name (issue 52): one answer job per arm and video, over the memory built.
    arms = {"answer": 4 * DEMO.n_videos, "aggregate": 1, "report": 1, "all": 1}
    expected = {extra: {"answer": 2, "aggregate": 1, "report": 1, "all": 1},
                "experiment=videolucy_depth": arms, "experiment=videolucy_iterations": arms}
    assert planned_jobs_under(demo_run, list(expected), base=DEMO_RUN) == expected


def test_a_changed_slice_reruns_exactly_the_stages_that_read_it(demo_run):
    tables = {"aggregate": 1, "report": 1, "all": 1}
    expected = {
        "seed=5": {"answer": 10, **tables},
        # The memory slice is read by the memory stage and the memory methods' answer jobs (memory_search).
        "memory.auto.mlvu_short=500": {"memory": 2, "answer": 2, **tables},
        "track.hfov_deg=60": {"track": 2, "memory": 2, "answer": 2, **tables},
        # Another inference setting never re-captions: only the model's answer jobs rerun.
        "model.smollm2.max_tokens=300": {"answer": 8, **tables},
        "sampling.plans.uniform_512.n=256": {"frames": 2, "all": 1},
        "sampling.carriers=true": {"carrier": 2, "all": 1},
        "aggregate.decimals=2": tables,
        "report.bootstrap_resamples=2000": {"report": 1, "all": 1},
        "anonymize.stride=10": {"anonymize": 2, "probe": 2, "frames": 2, "track": 2, "memory": 2, "videos_table": 1,
                                "answer": 10, **tables},
        "probe.keyframe_scan_s=60": {"probe": 2, "videos_table": 1, "memory": 2, "answer": 10, **tables},
    }
    assert planned_jobs_under(demo_run, list(expected), base=DEMO_RUN) == expected


def test_deleting_predictions_reruns_those_jobs_and_answers_from_the_response_cache(demo_run):
    """Deleting two prediction files schedules exactly their answer jobs and the tables; the run that follows
    answers the model's questions again from the response cache, byte for byte (every question a hit), and
    leaves nothing to do. (Two tests that each deleted one file and ran the demo again, merged: one rerun.) What
    the rerun schedules is read from its own job-stats table, which Snakemake prints before it runs a job (the
    table a dry run prints): a dry run beforehand cost a Snakemake start-up more."""
    blind = demo_run / "results/predictions/blind/smollm2/demo_02.parquet"
    random_guess = demo_run / "results/predictions/random/none/demo_02.parquet"
    before = blind.read_bytes()
    blind.unlink()
    random_guess.unlink()
    rerun = snakemake(demo_run, "-c2", *DEMO_CONFIG)
    assert job_stats(rerun.stdout + rerun.stderr) == {"answer": 2, "aggregate": 1, "report": 1, "all": 1}
    assert blind.read_bytes() == before and random_guess.is_file()
    log = (demo_run / "results/logs/answer/blind/smollm2/demo_02.log").read_text()
    assert f"{QUESTIONS_PER_VIDEO} hit(s), 0 miss(es), hit rate 100.0%" in log
    assert planned_jobs(demo_run, *DEMO_CONFIG) == {}


def test_direct_perception_on_a_tiny_vlm_reads_the_frame_store_through_the_dag(tmp_path, prepared_demo):
    """Direct perception at two frame budgets on a tiny random VLM over the one-video demo: each budget's frame
    store is built and read by its answer job, and the report draws the frame-budget figure. One video proves
    the wiring; the two-video demo it ran on before doubled the answer jobs, each loading torch and the model."""
    from tiny_vlm import build_tiny_llava

    model = build_tiny_llava(tmp_path / "tiny-vlm")
    prepared_demo(tmp_path, ONE_VIDEO_DEMO)
    overrides = (f"{ONE_VIDEO_DEMO} method=[random,direct] method.direct.frames=[4,8] model=[] "
                 f"+model.tiny={{backend:transformers,path:{model},max_tokens:4}}")
    snakemake(tmp_path, "-c2", "--config", f"overrides={overrides}")
    for budget in (4, 8):
        store = pl.read_parquet(tmp_path / f"results/frames/uniform_{budget}/demo_01.parquet")
        assert store.height == budget and store["error"].is_null().all()
        predictions = pl.read_parquet(tmp_path / f"results/predictions/direct_{budget}/tiny/demo_01.parquet")
        assert predictions["error"].is_null().all() and (predictions["n_vlm_calls"] == 1).all()
    # The bigger budget sends more image tokens through the same prompt.
    small, big = (pl.read_parquet(tmp_path / f"results/predictions/direct_{b}/tiny/demo_01.parquet") for b in (4, 8))
    assert (big["prompt_tokens"] > small["prompt_tokens"]).all()
    main = (tmp_path / "results/tables/main.md").read_text()
    assert (tmp_path / "results/report/figures/frame_budget.png").stat().st_size > 1000
    for budget in (4, 8):  # random weights: parse failures are expected, flagged with †
        assert re.search(rf"^\| direct_{budget}( †)? \| tiny \| none \| {ONE_VIDEO_QUESTIONS} \|", main,
                         re.MULTILINE), main


def test_every_agent_method_runs_through_the_dag_on_the_perception_memory(tmp_path, prepared_demo):
    """memory_search, senri_agent and its three ablations on the one-video demo's perception memory, with a
    scripted controller/verifier model: the DAG wires memory, track, caption cache and retrieval index into every
    job. One video proves the wiring (each job reads its own video's inputs); the two-video demo it ran on before
    doubled the answer jobs, each paying the interpreter's and the embedder's start-up."""
    script = tmp_path / "agent.jsonl"
    verify = {"action": "verify", "checks": [{"target_context": "the sign in front of me", "objective": "read the sign",
                                              "requirements": ["the sign is legible"], "windows": [[3, 9]]}]}
    report = {"observation": "a sign", "evidence_moments": [0], "requirement_findings": {"R1": "a sign", "R2": "legible"},
              "requirement_evidence_moments": {"R1": [0], "R2": [1]}}
    rules = [{"match": "Update the working memory", "text": json.dumps({"note": "r1: a legible sign",
                                                                        "selected_report_ids": ["r1"]})},
             {"match": "observe in these frames", "text": json.dumps(report)},
             {"match": "Target context (R1)", "text": json.dumps(report)},
             {"match": "[r1]", "text": json.dumps({"action": "answer", "answer": "B"})},
             {"match": "This is the last round", "text": json.dumps({"action": "answer", "answer": "A"})},
             {"match": "search, verify, answer", "text": json.dumps(verify)},
             {"match": "search, answer", "text": json.dumps({"action": "search", "query": "which sign did I see"})}]
    script.write_text("".join(json.dumps(r) + "\n" for r in rules))
    methods = "memory_search,senri_agent,senri_agent_no_tg,senri_agent_no_pv,senri_agent_no_wm"
    prepared_demo(tmp_path, ONE_VIDEO_DEMO)
    overrides = (f"{ONE_VIDEO_DEMO} method=[{methods}] model=[] "
                 f"+model.agent={{backend:scripted,script:{script},concurrency:4,images:true}} method.memory_search.retriever=bm25")
    snakemake(tmp_path, "-c2", "--config", f"overrides={overrides}")
    main = pl.read_parquet(tmp_path / "results/tables/main.parquet")
    assert sorted(main["method"]) == sorted(methods.split(","))
    assert (main["n"] == ONE_VIDEO_QUESTIONS).all() and (main["errors"] == 0).all()
    assert (main["parse_failures"] == 0).all()
    for method in methods.split(","):
        predictions = pl.read_parquet(tmp_path / f"results/predictions/{method}/agent/demo_01.parquet")
        actions = {tuple(json.loads(t)["actions"]) for t in predictions["trace"]}
        expected = ("search",) * 5 + ("answer",) if method == "memory_search" else ("verify", "answer")
        assert actions == {expected}, (method, actions)
    index = list((tmp_path / "results/cache/captions/perception/demo_01/index").glob("index-*.npz"))
    assert len(index) == 1  # the embedding index, built once per memory and shared by the agent jobs


def copy_checkout(root: Path) -> Path:
    """A copy of the repository's code (the Snakefile, its rules and the package), the config and workflow folders
    linked: a checkout to edit."""
    shutil.copytree(REPO / "src" / "senri", root / "src" / "senri", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "rules", root / "rules")
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    for folder in ("config", "workflow", "envs"):
        (root / folder).symlink_to(REPO / folder)
    return root


#: Rules whose log name is not the stage their code digest names.
LOG_STAGES = {"demo_video": "demo_data", "demo_questions": "demo_data"}


def test_every_module_a_demo_job_imported_is_in_its_code_digest(demo_run):
    """The rerun promise, checked on what the jobs really ran: every package module a demo job imported (its log,
    under ``-X importtime``) is part of the code its params hash, the command line's wiring excepted
    (:func:`senri.code_identity.wiring_modules`)."""
    cfg = DEMO_CFG
    # What every job loads before its handler runs: the command line and what it imports to parse the config and
    # name errors (code_identity.NOT_STAGE_CODE); a stage's own use of one of these is in its import closure.
    startup = subprocess.run([sys.executable, "-X", "importtime", "-m", "senri", "--help"], capture_output=True,
                             text=True, check=True).stderr
    wiring = set(re.findall(r"\|\s+(senri(?:\.\w+)*)\s*$", startup, re.MULTILINE))
    assert set(code_identity.NOT_STAGE_CODE) <= wiring | {"senri.__main__"}
    checked = set()
    for log in sorted((demo_run / "results" / "logs").rglob("*.log")):
        loaded = set(re.findall(r"^import time:.*\|\s+(senri(?:\.\w+)*)\s*$", log.read_text(), re.MULTILINE))
        parts = log.relative_to(demo_run / "results" / "logs").with_suffix("").parts
        rule = LOG_STAGES.get(parts[0], parts[0])
        if rule == "answer":
            expected = senri_workflow.job_modules("answer", **senri_workflow.answer_code_selection(cfg, *parts[1:3]))
        else:
            expected = senri_workflow.job_modules(rule)
        missing = loaded - set(expected) - wiring
        assert not missing, f"{log.name} of {rule}: {sorted(missing)}"
        checked.add(rule)
    assert checked >= {"demo_data", "ingest", "probe", "videos_table", "frames", "anonymize", "track", "memory",
                       "answer", "aggregate", "report"}


def test_editing_a_scorer_reruns_the_report_and_no_answer_job(demo_run, tmp_path):
    """The stale-report case of issue 59: after make demo, an edit to the official scorers' module plans the
    tables and the report again (the aggregate scores by the benchmark's official scorer), and nothing else (a
    checkout's copy, its scorers edited: its Snakefile puts its own package first on the path)."""
    checkout = copy_checkout(tmp_path / "checkout")
    scoring = checkout / "src" / "senri" / "benchmarks" / "scoring.py"
    scoring.write_text(scoring.read_text() + "\n# a fixed scorer\n")
    assert planned_jobs(demo_run, *DEMO_CONFIG, snakefile=checkout / "Snakefile") == {"aggregate": 1, "report": 1,
                                                                                      "all": 1}
    assert planned_jobs(demo_run, *DEMO_CONFIG) == {}  # the repository's own code: nothing to do


def test_invalid_config_stops_the_workflow_naming_the_key(demo_run):
    with ThreadPoolExecutor(max_workers=2) as pool:  # two dry runs side by side, as in planned_jobs_under
        unknown_key, bare_key = pool.map(lambda config: snakemake(demo_run, "-n", "--config", config, check=False),
                                         ("overrides=+sampling.foo=1", "seed=3"))
    assert unknown_key.returncode != 0
    assert "config.sampling.foo: unknown key" in unknown_key.stdout + unknown_key.stderr
    assert bare_key.returncode != 0 and 'overrides="' in bare_key.stdout + bare_key.stderr


def test_bad_questions_fail_ingest_with_every_problem_in_its_log(tmp_path, small_demo):
    """A question file with a bad answer letter and a duplicate qid stops the workflow at ingest, the log naming
    each problem by row and field, and no questions table is left behind. The run asks for the questions table
    only: without a target, a per-video stage that does not wait for ingest (anonymize of one of the small
    demo's 68-s, 30-fps videos) ran first, 71 of the test's 97 CPU s in a measured run."""
    records = [json.loads(line) for line in small_demo["questions"].read_text().splitlines()[:3]]
    records[1]["answer"] = "E"
    records[2]["qid"] = records[0]["qid"]
    questions = tmp_path / "bad.json"
    questions.write_text(json.dumps(records))
    overrides = f"dataset=senri dataset.questions=[{questions}] dataset.videos_dir={small_demo['videos_dir']}"
    proc = snakemake(tmp_path, "-c1", "--config", f"overrides={overrides}", "--", "results/questions.parquet",
                     check=False)
    assert proc.returncode != 0
    log = (tmp_path / "results/logs/ingest.log").read_text()
    assert "row 2, field 'answer'" in log and "row 3, field 'qid': duplicate qid" in log
    assert not (tmp_path / "results/questions.parquet").exists()


# ----------------------------------------------------------------------------------- house rules (static)

RULE_FILES = sorted((REPO / "rules").glob("*.smk"))


def _rule_blocks():
    """(file, rule name, body) for every rule: the text from its ``rule`` line to the next one."""
    for path in RULE_FILES:
        parts = re.split(r"^\s*rule (\w+):\s*$", path.read_text(), flags=re.MULTILINE)
        for name, body in zip(parts[1::2], parts[2::2]):
            yield path.name, name, body


def test_snakefile_only_includes_and_defines_all():
    code = [l for l in (REPO / "Snakefile").read_text().splitlines() if l.strip() and not l.lstrip().startswith("#")]
    rules = [l for l in code if l.startswith("rule ")]
    assert rules == ["rule all:"]
    top = [l for l in code if not l.startswith((" ", "\t"))]
    assert all(l.startswith("include:") or l == "rule all:" for l in top), top


def test_every_rule_has_a_log_and_no_lambda():
    blocks = list(_rule_blocks())
    assert {name for _, name, _ in blocks} >= {"demo_video", "demo_questions", "ingest", "probe", "videos_table",
                                               "frames", "carrier", "answer", "aggregate"}
    for file, name, body in blocks:
        assert "log:" in body, f"{file}: rule {name} has no log"
        assert "lambda" not in body, f"{file}: rule {name} uses a lambda"
    expensive = {"demo_video", "anonymize", "probe", "answer", "frames"}
    for file, name, body in blocks:
        if name in expensive:
            assert "benchmark:" in body, f"{file}: rule {name} has no benchmark"


def test_snakemake_lint_is_clean(tmp_path):
    """The workflow catalog's CI standard: `snakemake --lint` finds nothing."""
    result = snakemake(tmp_path, "--lint", check=False)
    assert result.returncode == 0 and "Lints for" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_top_level_layout():
    # docs/ holds protocol.md, the map from the papers' protocol to the code (issues #16, #17).
    allowed = {"Snakefile", "workflow", "docs", "rules", "envs", "config", "results", "src", "tests", "bench", "README.md",
               "Makefile", "pyproject.toml", ".ci", ".gitignore", ".git", ".venv", ".snakemake", ".pytest_cache",
               ".whl", ".gl"}
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
    top = {path.split("/", 1)[0] for path in tracked} or {p.name for p in REPO.iterdir()}
    assert top <= allowed, top - allowed


def test_every_rule_runs_in_a_pinned_conda_env_that_exists():
    for file, name, body in _rule_blocks():
        match = re.search(r'conda:\s*\n\s*"([^"]+)"', body)
        assert match, f"{file}: rule {name} has no conda env"
        env = (REPO / "rules" / match.group(1)).resolve()
        assert env.is_file(), env
        dependencies = yaml.safe_load(env.read_text())["dependencies"]
        conda = [d for d in dependencies if isinstance(d, str)]
        pip = [p for d in dependencies if isinstance(d, dict) for p in d.get("pip", [])]
        assert conda and all(re.fullmatch(r"[\w.-]+=[\w.]+", d) for d in conda), (env, conda)
        assert all("==" in p for p in pip), (env, pip)


def test_readme_has_exactly_three_newcomer_commands_that_exist():
    readme = (REPO / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [l.split("#", 1)[0].strip() for l in quick.strip().splitlines()]
    assert commands == ["make install", "make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    for target in ("install", "demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
    assert "snakemake -c2" in makefile and "python -m pytest" in makefile
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_answer_jobs_ask_for_gpus_only_for_gpu_backends():
    cfg = {"model": {"none": {"backend": "none"}, "qwen": {"backend": "vllm"},
                     "big": {"backend": "transformers", "gpus": 2, "mem_mb": 64000},
                     "api": {"backend": "openai"}}}
    cfg["model"]["cpu"] = {"backend": "llamacpp"}
    assert senri_workflow.answer_resources(cfg, "none") == {"gpu": 0, "mem_mb": 2000, "threads": 1}
    assert senri_workflow.answer_resources(cfg, "api")["gpu"] == 0
    assert senri_workflow.answer_resources(cfg, "qwen") == {"gpu": 1, "mem_mb": 16000, "threads": 1}
    assert senri_workflow.answer_resources(cfg, "big") == {"gpu": 2, "mem_mb": 64000, "threads": 1}
    assert senri_workflow.answer_resources(cfg, "cpu") == {"gpu": 0, "mem_mb": 2000, "threads": 2}


def _package_imports() -> dict[str, set[str]]:
    """Module → the package modules it imports anywhere (top level, inside functions, under TYPE_CHECKING)."""
    import ast

    root = REPO / "src"
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def test_the_package_has_no_import_cycle():
    """Modules import downward only (a memory system's build, search and release parts under its store; the
    config, the prompts and the methods apart): a circle makes every part of it load, and break, together."""
    graph = _package_imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c) for c in cycles)
