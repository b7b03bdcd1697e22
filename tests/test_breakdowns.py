"""Each benchmark's own breakdown tables (issue 58 item 5), as its official tool computes them: Video-MME's per
domain, sub-category and task type within each split and over all of them, against the official scorer's own
printout on its template; the values every breakdown lists against the real files' categories; no SENRI-only
column or figure for a benchmark SENRI's taxonomy does not describe, and none of SENRI's codes in the stages."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl

from reference import reference_file
from senri.benchmarks import BENCHMARKS
from senri.records import Prediction, to_frame
from senri.report.benchmark import benchmark_tables, breakdown_table

DATA = Path(__file__).resolve().parent / "data" / "benchmarks"
SRC = Path(__file__).resolve().parents[1] / "src" / "senri"
CONFIG = {"pairs": [], "bootstrap_resamples": 50, "confidence": 0.95}


def _all_correct(questions: pl.DataFrame) -> pl.DataFrame:
    """An official-scorer verdict table where every question is counted and right (one run)."""
    return questions.select(pl.lit("m").alias("method"), pl.lit("x").alias("model"), pl.lit("none").alias("memory"),
                            "qid", "split", pl.col("categories"), pl.lit("correct").alias("verdict"))


def test_videomme_breakdowns_equal_the_official_scorer_on_its_template():
    """The template's own sample replies, scored by senri's tables and by eval_your_results.py (its printout,
    tests/data/benchmarks/videomme/template_breakdowns.json): every value either shows the tool's accuracy or
    has no question (the tool prints 0.0 for those; senri leaves them out)."""
    template = reference_file("benchmarks/videomme/output_test_template.json")
    benchmark = BENCHMARKS.load("videomme")
    native = benchmark.read({"questions": [str(template)], "repair_json": True, "video_ext": [".mp4"]})
    from senri.records import Question

    questions = to_frame(native.questions, Question)
    text = re.sub(r",(\s*[\]}])", r"\1", template.read_text(encoding="utf-8"))
    replies = {q["question_id"]: q["response"] for video in json.loads(text) for q in video["questions"]}
    predictions = to_frame([Prediction(video_id=q.video_id, qid=q.qid, task_type=q.task_type, method="m", model="x",
                                       pred=None, answer=q.answer, correct=False, parse_ok=False,
                                       raw_output=replies[q.qid], n_llm_calls=0, n_vlm_calls=0, prompt_tokens=0,
                                       completion_tokens=0, latency_s=0.0, error=None)
                            for q in native.questions], Prediction)
    tables = benchmark_tables(predictions, questions, benchmark, CONFIG, seed=0)
    tool = json.loads((DATA / "videomme" / "template_breakdowns.json").read_text(encoding="utf-8"))["printed"]
    compared = 0
    for name, section in (("domain", "domain"), ("sub_category", "sub_category"), ("task_type", "task_type")):
        ours = tables.breakdowns[name]
        for block in ("short", "all"):
            printed = tool[block][section]
            mine = {r["value"]: r for r in ours.filter(pl.col("split") == block).iter_rows(named=True)}
            assert list(printed) == [v for v in next(b.order for b in benchmark.layout.breakdowns if b.name == name)]
            for value, accuracy in printed.items():
                if value in mine:
                    assert f"{mine[value]['accuracy']:.1f}%" == accuracy, (name, block, value)
                    compared += 1
                else:
                    assert accuracy == "0.0%", (name, block, value)
        assert set(ours["split"]) == {"short", "all"}
    assert compared == 2 * (1 + 1 + 5)   # Knowledge; Humanity & History; five task types of the nine questions
    overall = tables.table.row(0, named=True)
    assert f"{overall['avg']:.1f}%" == tool["all"]["overall"]["Overall"] == tool["short"]["overall"]["Overall"]


def test_every_breakdown_lists_the_real_files_categories_in_the_tools_order():
    """Video-MME (38 real videos), MLVU dev (the seven task files' excerpts) and EgoMem (41 real records): each
    breakdown has exactly the values the real files carry, each counted as often as the file has it."""
    files = {"videomme": {"questions": [str(DATA / "videomme" / "videomme_json_file.excerpt.json")]},
             "mlvu": {"questions": [str(DATA / "mlvu" / f"{n}.json") for n in (
                 "1_plotQA", "2_needle", "3_ego", "4_count", "5_order", "6_anomaly_reco", "7_topic_reasoning")],
                      "videos_dir": str(DATA)},
             "egomem": {"questions": [str(DATA / "egomem" / "EgoMem.excerpt.json")]}}
    for name, dataset in files.items():
        benchmark = BENCHMARKS.load(name)
        from senri.records import Question

        questions = to_frame(benchmark.read({"video_ext": [".mp4"], **dataset}).questions, Question)
        for breakdown in benchmark.layout.breakdowns:
            table = breakdown_table(_all_correct(questions), breakdown, benchmark.splits).filter(
                pl.col("split") == "all")
            key = "" if breakdown.by == "category" else f"{breakdown.by}="
            expected = Counter(c[len(key):] for cats in questions["categories"] for c in cats
                               if (c.startswith(key) if key else "=" not in c))
            assert dict(zip(table["value"], table["n"])) == dict(expected), (name, breakdown.name)
            assert set(expected) <= set(breakdown.order), (name, breakdown.name, set(expected) - set(breakdown.order))
            assert table["value"].to_list() == [v for v in breakdown.order if v in expected]
            assert (table["accuracy"] == 100.0).all()
            if breakdown.by_split:   # each split block counts its own questions; together, the "all" block
                blocks = breakdown_table(_all_correct(questions), breakdown, benchmark.splits)
                assert blocks.filter(pl.col("split") != "all")["n"].sum() == table["n"].sum()


def test_mlvu_breakdown_counts_the_whole_real_count_task_file():
    from senri.records import Question

    benchmark = BENCHMARKS.load("mlvu")
    path = reference_file("benchmarks/mlvu/4_count.json")
    questions = to_frame(benchmark.read({"questions": [str(path)], "video_ext": [".mp4"]}).questions, Question)
    (task,) = benchmark.layout.breakdowns
    table = breakdown_table(_all_correct(questions), task, benchmark.splits)
    assert table.select("value", "n").rows() == [("count", 206)]


def test_no_senri_only_column_or_figure_for_a_native_benchmark():
    """A native benchmark's main table, figure and breakdowns are its own layout's; SENRI-Bench's are not drawn
    for it (the old task-type figure was drawn empty for Video-MME)."""
    from senri.benchmarks.senri import TASK_TYPES

    senri = BENCHMARKS.load("senri").layout
    for name in BENCHMARKS.names():
        layout = BENCHMARKS.load(name).layout
        assert layout.figure is not None and set(layout.figure.columns) <= set(layout.keys)
        if name != "senri":
            assert not set(layout.keys) & {k for k in senri.keys if k != "total"}
            assert not {t.lower() for t in TASK_TYPES} & set(layout.figure.columns)
            assert layout.breakdowns and layout.scorers[0] == BENCHMARKS.load(name).official_scorer


def test_the_stages_name_no_senri_task_type():
    """SENRI-Bench's taxonomy lives in its benchmark module only: records.py, aggregate.py and report/ name none of
    its task types or directions (as a quoted code) nor its taxonomy's tables."""
    from senri.benchmarks.senri import DIRECTIONS, TASK_TYPES

    codes = "|".join(re.escape(c) for c in (*TASK_TYPES, *DIRECTIONS))
    quoted = re.compile(rf"""["']({codes})["']""")
    names = re.compile(r"\b(TASK_DIRECTION|TASK_TYPES|TASK_NAMES|DIRECTION_NAMES|DIRECTIONS)\b")
    files = [SRC / "records.py", SRC / "aggregate.py", *sorted((SRC / "report").glob("*.py"))]
    found = [f"{path.name}:{i}: {line.strip()}" for path in files
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if quoted.search(line) or names.search(line)]
    assert len(files) > 5 and not found, found


def test_the_config_schema_accepts_exactly_the_registered_benchmarks(monkeypatch):
    from senri import config as cfgmod

    schema = cfgmod._schema()
    assert schema["properties"]["dataset"]["properties"]["benchmark"]["enum"] == BENCHMARKS.names()
    monkeypatch.setitem(BENCHMARKS._targets, "toy", "test_toy_benchmark:TOY")
    assert "toy" in cfgmod._schema()["properties"]["dataset"]["properties"]["benchmark"]["enum"]
