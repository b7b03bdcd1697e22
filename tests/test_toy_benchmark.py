"""A sixth benchmark defined only here plus one registration: it goes through the config, ingest, the answer
stage, aggregate and the report with its own layout (columns, macro headline, figure and breakdowns), no other
file touched — what adding a benchmark takes (docs/benchmarks.md, "Adding a benchmark")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import polars as pl
import pytest

from senri.benchmarks import BENCHMARKS
from senri.benchmarks.base import (Benchmark, NativeSet, NativeVideo, answer_flags, facet, make_question,
                                   no_preset, question_files)
from senri.benchmarks.layouts import Breakdown, Column, Figure, Layout


def read(dataset: Mapping[str, Any]) -> NativeSet:
    """The toy format: a JSON list of {id, video, split, kind, level, q, options, answer}."""
    native = NativeSet()
    for path in question_files(dataset):
        for record in json.loads(path.read_text()):
            flags = [native.flag(str(path), record["id"], record["video"], flag, detail)
                     for flag, detail in answer_flags(record["answer"], len(record["options"]))]
            native.questions.append(make_question(
                benchmark="toy", video_id=record["video"], qid=record["id"],
                categories=[record["kind"], *facet("level", record["level"])], question=record["q"],
                options=record["options"], answer=record["answer"], flags=flags, split=record["split"]))
            native.videos.setdefault(record["video"], NativeVideo(record["video"], (f"{record['video']}.mp4",),
                                                                  split=record["split"]))
    return native


LAYOUT = Layout(
    "toy", "Toy benchmark (its own layout)",
    (Column("easy", "Easy", "split", ("easy",)), Column("hard", "Hard", "split", ("hard",)),
     Column("colour", "Colour", "category", ("colour",)), Column("shape", "Shape", "category", ("shape",)),
     Column("mean", "Mean", "macro", ("colour", "shape"))),
    headline="mean", scorers=("senri_strict", "method"),
    figure=Figure(("colour", "shape"), "Accuracy by kind"),
    breakdowns=(Breakdown("kind", "Kinds", "category", by_split=True, order=("shape", "colour")),
                Breakdown("level", "Levels", "level")))
TOY = Benchmark(name="toy", title="Toy", categories=("colour", "shape"), splits=("easy", "hard"),
                official_scorer="senri_strict", layout=LAYOUT, read=read, preset=no_preset, options=("root",),
                glossary=(("kinds", {"colour": "what colour a thing is", "shape": "what shape a thing is"}),))


@pytest.fixture
def toy_registered(monkeypatch):
    """The one registration (as a line in senri/benchmarks/__init__.py would make it), undone after the test."""
    monkeypatch.setitem(BENCHMARKS._targets, "toy", f"{__name__}:TOY")


def _files(root: Path) -> None:
    records = [{"id": f"t{i}", "video": f"v{i % 2}", "split": ("easy", "hard")[i % 2], "kind": ("colour", "shape")[i % 3 == 0],
                "level": ("one", "two")[i % 4 == 0], "q": f"Question {i}?", "options": ["red", "blue", "green"],
                "answer": "ABC"[i % 3]} for i in range(8)]
    (root / "toy.json").write_text(json.dumps(records))
    for video in ("v0", "v1"):
        (root / f"{video}.mp4").write_bytes(b"")  # ingest only checks that the file is there; random reads no frame


def test_a_benchmark_defined_in_one_module_runs_through_every_stage_with_its_own_layout(toy_registered, tmp_path):
    from senri import config as cfgmod
    from senri.aggregate import aggregate
    from senri.answer import answer_video
    from senri.ingest import ingest_dataset
    from senri.records import VideoInfo
    from senri.report import build_report

    root = tmp_path / "toy"
    root.mkdir()
    _files(root)
    cfg = cfgmod.compose(["dataset=senri", "dataset.name=toy", "+dataset.benchmark=toy", f"+dataset.root={root}",
                          f"dataset.questions=[{root}/toy.json]", f"dataset.videos_dir={root}", "dataset.video_ext=[.mp4]",
                          "method=[random]", "report.bootstrap_resamples=200"])
    ingest_config = cfgmod.stage_slice(cfg, "ingest")
    assert ingest_config["benchmark"] == "toy" and ingest_config["root"] == str(root)  # its options, declared
    questions, _ = ingest_dataset(ingest_config)
    assert questions.height == 8 and set(questions["benchmark"]) == {"toy"}

    stage = cfgmod.stage_slice(cfg, "answer", method="random", model="none")
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    for video_id, part in questions.group_by("video_id"):
        video = VideoInfo(video_id=video_id[0], path=str(root / f"{video_id[0]}.mp4"), duration_s=60.0, avg_fps=10.0,
                          r_fps=10.0, n_frames=600, width=64, height=64, rotation=0, codec="h264",
                          keyframe_interval_s=1.0, is_vfr=False, has_audio=False, size_bytes=0, fingerprint="x")
        answer_video(part, video, stage).write_parquet(predictions / f"{video_id[0]}.parquet")
    paths = sorted(predictions.glob("*.parquet"))

    main = aggregate(paths, questions, tmp_path / "tables")["main"]
    assert [c for c in main.columns if c in LAYOUT.keys] == list(LAYOUT.keys) and "es" not in main.columns
    assert main.row(0, named=True)["n_easy"] + main.row(0, named=True)["n_hard"] == 8
    assert (tmp_path / "tables" / "main.md").read_text().splitlines()[0].count("| Easy | Hard | Colour | Shape | Mean |")

    report = build_report(paths, questions, tmp_path / "out", cfgmod.stage_slice(cfg, "report")["report"], seed=0)
    tables = tmp_path / "out" / "report" / "tables"
    shown = pl.read_parquet(tables / "main.parquet")
    assert {"colour", "shape", "mean"} <= set(shown.columns) and not {"es", "total"} & set(shown.columns)
    assert "Toy benchmark (its own layout)" in (tables / "benchmark_toy.md").read_text()
    kinds = pl.read_parquet(tables / "breakdown_toy_kind.parquet")
    assert kinds.filter(pl.col("split") == "all")["value"].to_list() == ["shape", "colour"]   # its declared order
    assert kinds.filter(pl.col("split") == "all")["n"].sum() == 8
    assert set(pl.read_parquet(tables / "breakdown_toy_level.parquet")["value"]) == {"one", "two"}
    page = report.read_text()
    assert "Accuracy by kind" in page and "Accuracy by task type" not in page
    assert "what colour a thing is" in (tmp_path / "out" / "report" / "questions" / "index.html").read_text()
