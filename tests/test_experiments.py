"""The paper's Table 3 and Table 4 end to end on the demo (issues #25, #26 "done when"): ``experiment=table3``
builds the WorldMM and MAGIC-Video stores with the memory_system rule, answers the four Table 3 rows per model
and prints the pairs table keyed by memory system; ``experiment=table4`` in the same directory runs SENRI-Agent's
three ablations on MAGIC-Video over the store already built; ``experiment=table3_text_only`` (the README's CPU
command, issue 40) then answers Table 3 on a text-only model with SENRI-Agent's labelled text-only variant over
the same stores, labelled "SENRI-Agent (text only)" in the pairs table.

One scripted model plays every role — the builders' LLM roles, the retrievers' W8/W9/G13 calls, the original
workflows' controllers and QA calls, SENRI-Agent's controller, verifiers and updater — each answered by its
prompt's instruction text. The original workflows' QA calls always answer A; SENRI-Agent answers each question
right only once its working memory holds the verifier's finding, so the tables' numbers follow from the demo's
answer key: Original = share of questions whose answer is A, SENRI-Agent = 100, and its w/o Working Memory
variant (which never writes that note) = the A share again."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from conftest import ONE_VIDEO_DEMO, REPO
from senri import config as senri_config
from test_magic_video import ROLE_REPLIES
from test_memory_store import _snakemake
from test_worldmm import BUILD_RULES

pytestmark = pytest.mark.workflow

#: What the updater writes into the working memory; SENRI-Agent answers right only when it reads it.
NOTE = "r1: a legible sign at the start"
CHECK = {"action": "verify", "rationale": "look", "checks": [{
    "target_context": "the sign in front of me", "objective": "read the sign", "requirements": ["the sign is legible"],
    "windows": [[3, 9]]}]}
REPORT = {"observation": "a sign", "evidence_moments": [0], "requirement_findings": {"R1": "a sign", "R2": "legible"},
          "requirement_evidence_moments": {"R1": [0], "R2": [1]}}
DEMO = ONE_VIDEO_DEMO + " "


def answer(letter: str) -> str:
    return json.dumps({"action": "answer", "rationale": "r", "answer": letter})


def role_rules(questions: pl.DataFrame) -> list[dict]:
    """The scripted model's replies, first match wins: builder roles, retriever calls, verifier and updater,
    then the answers (per question for SENRI-Agent with its note), then the controllers' search steps."""
    rules = list(BUILD_RULES)
    rules += [{"match": m, "text": json.dumps(r)} for m, r in ROLE_REPLIES]
    rules += [{"match": "Fact filtering", "text": '{"fact": []}'},                       # W8
              {"match": "Caption ranking", "text": "[]"},                                # W9
              {"match": "Does this search query refer to a specific time", "text": "null"},  # G13
              {"match": "Update the working memory", "text": json.dumps({"note": NOTE, "selected_report_ids": ["r1"]})},
              {"match": "observe in these frames", "text": json.dumps(REPORT)},          # w/o target guidance
              {"match": "Target context (R1)", "text": json.dumps(REPORT)}]
    rules += [{"match": [q["question"], NOTE], "text": answer(q["answer"])} for q in questions.iter_rows(named=True)]
    rules += [{"match": "[r1]", "text": answer("A")},
              {"match": "This is the last round", "text": answer("A")},
              {"match": "Give only the letter", "text": "A"},                                 # W11
              {"match": "Answer a question about a long first-person video", "text": "A"},    # G15
              {"match": "Round history:\n[]", "text": json.dumps(                             # W10, round 1
                  {"decision": "search", "selected_memory": {"memory_type": "episodic", "search_query": "the sign"}})},
              {"match": "Memory: episodic", "text": json.dumps({"decision": "answer"})},
              {"match": "(nothing retrieved yet)", "text": json.dumps(
                  {"action": "search", "rationale": "r", "query": "Which sign did I see on the way?"})},
              {"match": "Round 2 of 5 search rounds", "text": answer("A")},                   # G14
              {"match": "search, verify, answer", "text": json.dumps(CHECK)}]
    return rules


def header_overrides(experiment: Path) -> str:
    """The overrides of the ``snakemake … --config overrides="…"`` command an experiment file's header gives."""
    commands = re.findall(r'^#.*snakemake .*overrides="([^"]+)"', experiment.read_text(), re.MULTILINE)
    assert len(commands) == 1, f"{experiment}: its header gives {len(commands)} snakemake commands, not one"
    return commands[0]


EXPERIMENTS = sorted((REPO / "config/experiment").glob("*.yaml"))


@pytest.fixture(scope="module")
def experiment_plans(tmp_path_factory) -> dict[str, str]:
    """Each experiment's dry-run job list (or its failure), all planned in one process (tests/dry_run.py)."""
    from dry_run import plan

    return plan(tmp_path_factory.mktemp("plans"), {path.stem: header_overrides(path) for path in EXPERIMENTS})


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_shipped_experiment_plans_its_header_command(experiment, experiment_plans):
    """Issue 53: each experiment's own command builds its DAG on the demo (``snakemake -n``), every planned run's
    prediction file among the jobs. Table 2 stopped here once (``KeyError: 'egagent'``: a pinned store that no
    MemoryStore reader brought in) while composing it passed."""
    overrides = header_overrides(experiment)
    assert f"experiment={experiment.stem}" in overrides
    plan = experiment_plans[experiment.stem]
    assert f"!!! {experiment.stem} failed" not in plan and "This was a dry-run" in plan, plan[-3000:]
    for method, model in senri_config.runs(senri_config.compose(overrides)):
        assert f"results/predictions/{method}/{model}/demo_01.parquet" in plan, (method, model)


def _rows(table: pl.DataFrame, *columns: str) -> list[tuple]:
    return table.select(*columns).rows()


def test_table3_then_table4_on_the_demo_through_the_dag(tmp_path, prepared_demo):
    """Also the MAGIC-Video store's DAG test: its record, 30-s nodes and PPR retriever (the same store job that
    ``memory_system=[magic_video] method=[magic_video,senri_agent]`` runs; one DAG builds it for both)."""
    prepared_demo(tmp_path, ONE_VIDEO_DEMO)  # the demo's upstream stages, questions among them, run once per session
    started = time.monotonic()
    script = tmp_path / "agent.jsonl"
    script.write_text("")
    # Both stores' text vectors by the tests' hashed words (tests/hashed_encoder.py): the 2 store jobs and 11 answer
    # jobs load neither torch nor MiniLM, seconds each. MiniLM itself: test_magic_video.py::
    # test_default_text_encoder_is_minilm_end_to_end, and through the DAG test_workflow.py's memory_search runs.
    encoder = "hashed_encoder:HashedWords"
    models = ("model=[] memory_system.magic_video.models.builder=agent memory_system.magic_video.models.time_extractor=agent "
              f"+memory_system.magic_video.text_embedder={encoder} "
              f"+model.agent={{backend:scripted,script:{script},concurrency:4,images:true}}")
    table3 = (f"experiment=table3 {DEMO}{models} memory_system.worldmm.models.summariser=agent "
              "memory_system.worldmm.models.extractor=agent memory_system.worldmm.models.retriever=agent "
              f"memory_system.worldmm.text_embedder={encoder}")
    # The prepared demo's questions: Table 3's run keeps them (its ingest slice is the demo's), and the answers
    # below follow them question by question.
    questions = pl.read_parquet(tmp_path / "results/questions.parquet")
    assert questions.height == 4
    script.write_text("".join(json.dumps(r) + "\n" for r in role_rules(questions)))

    # ------------------------------------------------------------------------------------------- Table 3
    _snakemake(tmp_path, table3)
    stores = {s: tmp_path / f"results/memory_system/{s}/perception/demo_01" for s in ("worldmm", "magic_video")}
    for system, store in stores.items():
        record = yaml.safe_load((store / "config.yaml").read_text())
        assert record["stage"] == "memory_system" and record["source"] == "built", system
        assert record["visual"] == {"worldmm": "time ranges only (no embedder configured: text queries return nothing)",
                                    "magic_video": "skipped (no embedder configured)"}[system], system
        assert (store / "items.parquet").is_file()
    worldmm = yaml.safe_load((stores["worldmm"] / "config.yaml").read_text())
    assert worldmm["substitutions"]["text_embedder"]["used"] == "hashed-words-test"
    magic = yaml.safe_load((stores["magic_video"] / "config.yaml").read_text())
    assert magic["base_captions"].startswith("caption service (perception)") and magic["builder"]["failed"] == 0
    assert magic["text_encoder"] == encoder
    assert pl.read_parquet(stores["magic_video"] / "nodes.parquet").filter(pl.col("level") == "30sec").height >= 2
    assert sorted(p.name for p in (tmp_path / "results/predictions").iterdir()) == [
        "magic_video", "senri_agent@magic_video", "senri_agent@worldmm", "worldmm"]
    actions = {"worldmm": ("search", "answer"), "magic_video": ("search", "answer"),
               "senri_agent@worldmm": ("search", "verify", "answer"),
               "senri_agent@magic_video": ("search", "verify", "answer")}
    for run, expected in actions.items():
        predictions = pl.read_parquet(tmp_path / f"results/predictions/{run}/agent/demo_01.parquet")
        system = run.split("@")[-1]
        assert predictions.height == 4 and predictions["error"].is_null().all(), run
        assert (predictions["memory"] == f"{system}/perception").all(), run
        assert {tuple(json.loads(t)["actions"]) for t in predictions["trace"]} == {expected}, run
        if system == "magic_video":
            assert {json.loads(t)["retriever"] for t in predictions["trace"]} == {"ppr"}, run

    share_a = 100.0 * (questions["answer"] == "A").sum() / questions.height
    original, agent = f"{share_a:.1f}", "100.0"
    pairs = pl.read_parquet(tmp_path / "results/report/tables/pairs.parquet")
    assert _rows(pairs.filter(pl.col("run") != ""), "group", "run", "memory", "label", "total") == [
        ("WorldMM · agent", "worldmm/agent", "worldmm/perception", "Original", original),
        ("WorldMM · agent", "senri_agent@worldmm/agent", "worldmm/perception", "SENRI-Agent", agent),
        ("MAGIC-Video · agent", "magic_video/agent", "magic_video/perception", "Original", original),
        ("MAGIC-Video · agent", "senri_agent@magic_video/agent", "magic_video/perception", "SENRI-Agent", agent)]
    deltas = pairs.filter(pl.col("run") == "")
    assert deltas["label"].to_list() == ["Δ [95% CI] McNemar p"] * 2
    assert all(d.startswith(f"{100.0 - share_a:+.1f} [") for d in deltas["total"])
    markdown = (tmp_path / "results/report/tables/pairs.md").read_text()
    assert "Memory system / pair" in markdown and "Workflow" in markdown
    for group, label in (("WorldMM · agent", "Original"), ("MAGIC-Video · agent", "SENRI-Agent")):
        assert any(group in line and label in line for line in markdown.splitlines()), markdown
    table3_s = time.monotonic() - started

    # ------------------------------------------------------------------------------------------- Table 4
    built = {s: (store / "items.parquet").stat().st_mtime_ns for s, store in stores.items()}
    proc = _snakemake(tmp_path, f"experiment=table4 {DEMO}{models}")
    log = proc.stdout + proc.stderr
    assert "rule memory_system:" not in log and "localrule memory_system:" not in log, log[-3000:]
    assert {s: (store / "items.parquet").stat().st_mtime_ns for s, store in stores.items()} == built
    variants = {"senri_agent_no_tg@magic_video": ("search", "verify", "answer"),
                "senri_agent_no_pv@magic_video": ("search", "verify", "answer"),
                "senri_agent_no_wm@magic_video": ("search", "verify", "answer")}
    for run, expected in variants.items():
        predictions = pl.read_parquet(tmp_path / f"results/predictions/{run}/agent/demo_01.parquet")
        assert predictions["error"].is_null().all() and (predictions["memory"] == "magic_video/perception").all()
        assert {tuple(json.loads(t)["actions"]) for t in predictions["trace"]} == {expected}, run
    ablations = pl.read_parquet(tmp_path / "results/report/tables/ablations.parquet")
    assert _rows(ablations.filter(pl.col("run") != ""), "variant", "run", "memory", "total") == [
        ("SENRI-Agent · agent", "senri_agent@magic_video/agent", "magic_video/perception", agent),
        ("w/o Target Guidance", "senri_agent_no_tg@magic_video/agent", "magic_video/perception", agent),
        ("w/o Parallel Verifiers", "senri_agent_no_pv@magic_video/agent", "magic_video/perception", agent),
        ("w/o Working Memory", "senri_agent_no_wm@magic_video/agent", "magic_video/perception", original)]
    main = pl.read_parquet(tmp_path / "results/tables/main.parquet")
    assert sorted(main["method"]) == sorted(["senri_agent@magic_video", *variants])  # table4's run set only
    print(f"table3 {table3_s:.0f} s, table4 {time.monotonic() - started - table3_s:.0f} s")

    # ------------------------------------------- Table 3 on a text-only model (the README's CPU command, issue 40)
    reader = f"+model.reader={{backend:scripted,script:{script},concurrency:4,images:false}}"
    # The same stores: every builder role on the scripted model, as Table 3's run had them.
    proc = _snakemake(tmp_path, f"{table3.replace('experiment=table3 ', 'experiment=table3_text_only ')} {reader}")
    log = proc.stdout + proc.stderr
    assert "rule memory_system:" not in log and "localrule memory_system:" not in log, log[-3000:]
    for run in ("senri_agent_text_only@worldmm", "senri_agent_text_only@magic_video"):
        predictions = pl.read_parquet(tmp_path / f"results/predictions/{run}/reader/demo_01.parquet")
        assert predictions["error"].is_null().all() and (predictions["frames_seen"] == 0).all(), run
        traces = [json.loads(t) for t in predictions["trace"]]
        assert {t["variant"] for t in traces} == {"text_only"}, run
        assert {tuple(t["actions"]) for t in traces} == {("search", "verify", "answer")}, run
        assert {r.get("verifier_input") for t in traces for r in t["rounds"] if r["action"] == "verify"} == {"text"}
    pairs = pl.read_parquet(tmp_path / "results/report/tables/pairs.parquet")
    assert _rows(pairs.filter((pl.col("run") != "") & pl.col("group").str.ends_with("reader")),
                 "group", "run", "label", "total") == [
        ("WorldMM · reader", "worldmm/reader", "Original", original),
        ("WorldMM · reader", "senri_agent_text_only@worldmm/reader", "SENRI-Agent (text only)", agent),
        ("MAGIC-Video · reader", "magic_video/reader", "Original", original),
        ("MAGIC-Video · reader", "senri_agent_text_only@magic_video/reader", "SENRI-Agent (text only)", agent)]
    assert "SENRI-Agent (text only)" in (tmp_path / "results/report/tables/pairs.md").read_text()
