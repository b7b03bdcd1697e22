"""SENRI Table 2's published rows beside ours (issue 62): the Table 2 experiments name the paper's table
(``report.published: paper_table2``), each method config carries its row's name (``paper_name``), and the report
prints every run's published rows right after it, in the paper's layout, ours marked ◊ on fewer than the 500
questions the paper's were computed on."""

from __future__ import annotations

import polars as pl
import pytest

from senri.config import compose, stage_slice
from senri.ingest import ingest
from senri.report import build_report
from senri.report.published import PAPER_TABLE2, PUBLISHED_TABLE2, paper_rows_for, published_csv
from test_report import CONFIG, write_run

KEYS = ["total", "es", "l", "np", "oc", "rr", "se", "rer", "ter"]


@pytest.fixture(scope="module")
def questions(small_demo):
    return ingest([small_demo["questions"]], small_demo["videos_dir"], [".mp4"])


def test_every_table2_system_s_paper_name_names_rows_of_the_paper_and_stays_out_of_the_answer_slice():
    """The match is derived from the configs: every system of ``experiment=table2`` whose method config carries a
    paper_name finds its row(s) (a misspelt name would find none); the name reaches the report's slice, not the
    answer stage's (naming a row reruns no answer)."""
    cfg = compose("experiment=table2")
    paper = published_csv(PAPER_TABLE2, ("approach", "method", "inference_model", *KEYS))
    names = cfg["report"]["published_names"]
    named = {run: n for run, n in names.items() if n["method"]}
    assert len(named) == 13 and names["direct/smollm2"] == {"method": None, "model": None}
    for run, name in named.items():
        assert paper_rows_for(paper, name["method"], name["model"]).height >= 1, run
    assert paper_rows_for(paper, "VideoARM", None)["inference_model"].to_list() == ["Qwen3.8-27B", "Gemini 3.7 Flash"]
    assert paper_rows_for(paper, "VideoARM", "Gemini 3.7 Flash")["total"].to_list() == [59.0]
    assert paper_rows_for(paper, None, "GPT-5")["total"].to_list() == [47.2]
    assert "paper_name" not in stage_slice(cfg, "answer", "m3_agent", "m3_agent_control")["method"]
    assert "published_names" in stage_slice(cfg, "report")["report"]
    assert "published_names" not in compose("")["report"]


def test_the_report_prints_each_run_s_published_rows_after_it_in_the_paper_s_layout(questions, tmp_path):
    paths = write_run(tmp_path, questions, "direct", "gpt5", "direct_perception", 2)
    paths += write_run(tmp_path, questions, "blind", "m", "baseline", 3)
    paths += write_run(tmp_path, questions, "videoarm", "qwen", "evidence_seeking", 2)
    paths += write_run(tmp_path, questions, "videoarm", "qwen_b", "evidence_seeking", 3)
    paths += write_run(tmp_path, questions, "m3_agent", "ctl", "persistent_memory", 4)
    names = {"direct/gpt5": {"method": None, "model": "GPT-5"}, "blind/m": {"method": None, "model": None},
             "videoarm/qwen": {"method": "VideoARM", "model": None},
             "videoarm/qwen_b": {"method": "VideoARM", "model": None},
             "m3_agent/ctl": {"method": "M3-Agent", "model": None}}
    config = {**CONFIG, "pairs": [], "ablations": [], "no_visual_input": [], "published": "paper_table2",
              "published_names": names}
    build_report(paths, questions, tmp_path / "out", config, seed=0)
    tables = tmp_path / "out/report/tables"
    table = pl.read_parquet(tables / "main_beside_paper.parquet")
    ours = "this run set ◊ subset"  # the demo's questions, not SENRI-Bench's 500
    assert table.select("method", "model", "source").rows() == [
        ("blind", "m", ours),
        ("direct", "gpt5", ours), ("GPT-5", "GPT-5", PUBLISHED_TABLE2),
        ("videoarm", "qwen", ours), ("videoarm", "qwen_b", ours),  # both runs, then the system's two rows once
        ("VideoARM", "Qwen3.8-27B", PUBLISHED_TABLE2), ("VideoARM", "Gemini 3.7 Flash", PUBLISHED_TABLE2),
        ("m3_agent", "ctl", ours), ("M3-Agent", "Qwen3-32B∗", PUBLISHED_TABLE2)]
    m3 = table.filter(pl.col("method") == "M3-Agent").row(0, named=True)
    assert [m3[k] for k in KEYS] == [33.6, 33.2, 41.6, 23.2, 31.4, 34.4, 34.3, 36.4, 32.1] and m3["n"] is None
    main = pl.read_parquet(tables / "main.parquet")
    ours_m3 = table.filter(pl.col("method") == "m3_agent").row(0, named=True)
    assert ours_m3["total"] == main.filter(pl.col("method") == "m3_agent")["total"][0]
    assert table.filter(pl.col("method") == "M3-Agent")["approach"].to_list() == ["persistent_memory"]
    markdown = (tables / "main_beside_paper.md").read_text()
    assert "**Persistent Memory**" in markdown and "| M3-Agent | Qwen3-32B∗ |" in markdown
    assert "No published row for blind/m" in markdown
    assert f"◊ Computed on {questions.height} questions, not the 500 of SENRI-Bench" in markdown
    page = (tmp_path / "out/report.html").read_text()
    assert "Main results beside the paper&#x27;s Table 2" in page or "Main results beside the paper's Table 2" in page
