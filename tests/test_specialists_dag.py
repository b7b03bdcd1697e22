"""``experiment=table2_direct_specialists`` end to end on the one-video demo through the DAG: the four specialist
rows plan and run by name on their release defaults, each pinned model swapped for the stub model in a real
release worker (a venv built with no pins), frame budgets cut down so the jobs stay seconds. Each row's predictions
hold every question, answered through the release's own parser, with the frames each release decoded.

The experiment runs in a copy of Table 2's DAG run (tests/test_experiments.py::table2_run), which runs the same four
rows by the same configs (:data:`test_experiments.SPECIALISTS` on :func:`test_experiments.stub_model`): Snakemake
finds their answer jobs finished (the same parameters, inputs and code) and runs the experiment's own main table
and report over them."""

from __future__ import annotations

import json

import polars as pl
import pytest

from conftest import ONE_VIDEO_DEMO
from test_experiments import SPECIALISTS, copy_run, stub_model
from test_memory_store import _snakemake

pytestmark = pytest.mark.workflow

ROWS = (("cambrian_s", "first_capital (C-A1)"), ("cambrian_s_lfp", "first_word (L-A1)"),
        ("internvideo3", "start_letter_then_regex (I-A1)"), ("videochat3", "lvbench (V-A1)"))


def test_table2_direct_specialists_on_the_demo_through_the_dag(tmp_path, table2_workdir):
    table2 = copy_run(table2_workdir, tmp_path)
    assert all(f"method.{name}.models=[stub]" in SPECIALISTS for name, _ in ROWS)
    _snakemake(tmp_path, f"experiment=table2_direct_specialists {ONE_VIDEO_DEMO} model=[] "
                         f"+model.stub={stub_model(table2)} {SPECIALISTS}")
    questions = pl.read_parquet(tmp_path / "results/questions.parquet")
    for name, rule in ROWS:
        rows = pl.read_parquet(tmp_path / f"results/predictions/{name}/stub/demo_01.parquet")
        assert rows.height == questions.height, name
        assert rows["error"].is_null().all() and rows["parse_ok"].all(), (name, rows["error"].to_list())
        assert (rows["raw_output"] == rows["pred"] + ".").all(), name  # the stub's "<L>." read by the release rule
        traces = [json.loads(t) for t in rows["trace"]]
        assert {t["parse_rule"] for t in traces} == {rule} and {t["release"] for t in traces} == {name}
        assert (rows["frames_seen"] > 0).all() and rows["frames_seen"].n_unique() == 1, name
    main = pl.read_parquet(tmp_path / "results/report/tables/main.parquet")
    assert set(main.filter(pl.col("approach") == "direct_perception")["method"]) == {name for name, _ in ROWS}
