"""The benchmarks' table layouts: VideoLucy's published rows reproduced from integer counts, LVBench's
multi-label columns, MLVU's macro M-Avg, skipped replies outside every denominator, SENRI's layout unchanged."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import polars as pl

import senri.report
from senri.aggregate import main_table
from senri.benchmarks import BENCHMARKS
from senri.benchmarks.layouts import column_counts, column_value, layout, micro_value
from senri.benchmarks.scoring import SCORERS
from senri.benchmarks.senri import TASK_DIRECTION
from tests.reference import reference_file

PUBLISHED = Path(senri.report.__file__).parent / "published"


def outcomes(correct: int, n: int) -> list[str]:
    return ["correct"] * correct + ["wrong"] * (n - correct)


def test_table1_videolucy_row_from_counts_vm11():
    rows = [(split, ["Counting Problem"], v) for split, c in (("short", 707), ("medium", 649), ("long", 601))
            for v in outcomes(c, 900)]
    vm = layout("videomme")
    counts = column_counts(vm, rows)
    assert counts["avg"] == (1957, 2700)
    assert [column_value(vm, counts, k) for k in vm.keys] == [78.6, 72.1, 66.8, 72.5]


def test_skipped_replies_are_in_no_denominator_vm10():
    vm = layout("videomme")
    counts = column_counts(vm, [("short", [], "correct"), ("short", [], "skipped"), ("long", [], "wrong")])
    assert counts == {"short": (1, 1), "medium": (0, 0), "long": (0, 1), "avg": (1, 2)}
    assert column_value(vm, counts, "medium") is None and column_value(vm, counts, "avg") == 50.0


def test_table4_videolucy_row_counts_all_504_em8():
    rows = ([(None, ["Event"], v) for v in outcomes(148, 252)]
            + [(None, ["Detail"], v) for v in outcomes(138, 252)])
    em = layout("egomem")
    counts = column_counts(em, rows)
    assert [column_value(em, counts, k) for k in em.keys] == [58.7, 54.8, 56.7]
    assert counts["avg"] == (286, 504)


def test_lvbench_categories_are_multi_label_and_overall_is_over_questions_lv10():
    lv = layout("lvbench")
    rows = [(None, ["ER", "KIR"], "correct"), (None, ["ER"], "wrong"), (None, ["TG"], "wrong"),
            (None, ["Rea", "Sum", "EU"], "correct")]
    counts = column_counts(lv, rows)
    assert counts["er"] == (1, 2) and counts["kir"] == (1, 1) and counts["overall"] == (2, 4)
    assert sum(counts[k][1] for k in ("er", "eu", "kir", "tg", "rea", "sum")) == 7   # more than 4 questions
    assert column_value(lv, counts, "overall") == 50.0


def test_mlvu_m_avg_is_the_macro_mean_of_the_seven_tasks_ml11_ml13():
    ml = layout("mlvu")
    rows = [(None, ["plotQA"], v) for v in outcomes(9, 10)] + [(None, ["findNeedle", "needle"], "wrong")]
    rows += [(None, [task], "correct") for task in ("ego", "count", "order", "anomaly_reco", "topic_reasoning")]
    counts = column_counts(ml, rows)
    assert counts["needle"] == (0, 1)
    # macro: (90 + 0 + 100·5) / 7 = 84.28… ; micro over questions: 14 / 16 = 87.5
    assert column_value(ml, counts, "m_avg") == 84.3
    assert micro_value(counts, ml) == 87.5


def test_senri_layout_is_the_main_table():
    rng = random.Random(3)
    task_types = list(TASK_DIRECTION)
    questions = [(f"q{i}", task_types[i % 6], rng.random() < 0.4) for i in range(40)]
    scored = pl.DataFrame({
        "method": ["m"] * 40, "model": ["x"] * 40, "memory": ["none"] * 40, "video_id": ["v"] * 40,
        "qid": [q for q, _, _ in questions], "task_type": [t for _, t, _ in questions],
        "direction": [TASK_DIRECTION[t] for _, t, _ in questions], "correct": [c for _, _, c in questions],
        "parse_failure": [False] * 40, "backend_error": [False] * 40, "timeout": [False] * 40,
        "missing": [False] * 40})
    main = main_table(scored).row(0, named=True)
    senri_layout = layout("senri")
    counts = column_counts(senri_layout, [(None, [t], "correct" if c else "wrong") for _, t, c in questions])
    CATEGORIES = ("total", "es", "l", "np", "oc", "rr", "se", "rer", "ter")  # the paper's Table 2 order
    assert senri_layout.keys == CATEGORIES
    assert {k: column_value(senri_layout, counts, k) for k in CATEGORIES} == {k: main[k] for k in CATEGORIES}
    assert {k: counts[k] for k in CATEGORIES} == {k: (main[f"correct_{k}"], main[f"n_{k}"]) for k in CATEGORIES}


def test_every_layout_names_registered_scorers_and_its_published_rows():
    for name in BENCHMARKS.names():
        table = layout(name)
        assert table.name == name and table.headline in table.keys
        assert set(table.scorers) <= set(SCORERS.names())
        if table.published is None:
            continue
        shipped = PUBLISHED / table.published
        # The runtime copy is the vendored reference file, byte for byte.
        assert shipped.read_bytes() == reference_file(f"videolucy/{table.published}").read_bytes()
        with shipped.open(newline="") as handle:
            header = next(csv.reader(handle))
        labels = {c.label for c in table.columns}
        assert header[:3] == ["Group", "Method", "Cite"] and set(header[3:]) <= labels


def test_every_benchmark_names_a_registered_official_scorer_and_layout():
    from senri.benchmarks import BENCHMARKS

    for name in BENCHMARKS.names():
        benchmark = BENCHMARKS.load(name)
        table = benchmark.layout
        assert benchmark.official_scorer in SCORERS and benchmark.official_scorer in table.scorers
        if table.published is not None:   # the categories the reader gives are the ones the layout counts
            counted = {m.lower() for c in table.columns if c.over == "category" for m in c.members}
            assert counted <= {c.lower() for c in benchmark.categories}
