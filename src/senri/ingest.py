"""Question files → one question table and its ingest report, read by the dataset's benchmark module.

A SENRI-format file is validated strictly (:mod:`senri.benchmarks.senri.reader`: every problem at once, with file,
row and field; nothing written when one fails); a native benchmark's file is read as the benchmark has it
(:mod:`senri.benchmarks`), its quirks counted in the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from senri.benchmarks.base import IngestError, Problem
# The SENRI format's reader lives with SENRI-Bench (senri.benchmarks.senri); its names stay importable from here.
from senri.benchmarks.senri.reader import (QUESTION_SCHEMA, RawRecord, find_video, ingest, normalize, read_records,
                                           validated_questions, video_ids_in)
from senri.records import IngestQuirk, Question, to_frame

if TYPE_CHECKING:
    from senri.benchmarks.base import NativeVideo

__all__ = ["IngestError", "Problem", "QUESTION_SCHEMA", "RawRecord", "find_video", "ingest", "ingest_dataset",
           "locate_video", "normalize", "read_records", "report_path", "validated_questions", "video_ids_in"]


def ingest_dataset(dataset: Mapping[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The question table and the ingest report of a dataset config, read by its benchmark's module.

    SENRI format: strict (:func:`ingest`; the report is empty). A native benchmark: every record kept, its
    quirks flagged and counted in the report; a question whose video file is not under ``videos_dir`` is left
    out and reported (``video_missing``: LVBench's release lists videos no longer downloadable); with
    ``dataset.video_ids`` set, only those videos are kept; with ``dataset.splits`` set, only the questions of
    those split labels (Video-MME's long split for VideoLucy's Fig. 6).
    """
    from senri.benchmarks import load_benchmark
    from senri.benchmarks.base import NativeFileError

    benchmark = load_benchmark(dataset)
    try:
        native = benchmark.read(dataset)
    except NativeFileError as exc:
        raise IngestError([Problem(str(exc).partition(": ")[0], None, None, str(exc).partition(": ")[2])]) from None
    quirks = list(native.quirks)
    wanted = set(dataset.get("video_ids") or ())
    splits = set(dataset.get("splits") or ())
    kept: list[Question] = []
    found: dict[str, bool] = {}
    for question in native.questions:
        if (wanted and question.video_id not in wanted) or (splits and question.split not in splits):
            continue
        if question.video_id not in found:
            found[question.video_id] = locate_video(dataset, native.videos[question.video_id]) is not None
            if not found[question.video_id] and not benchmark.strict:
                video = native.videos[question.video_id]
                quirks.append(IngestQuirk(
                    file=", ".join(map(str, dataset["questions"])), record="", video_id=question.video_id,
                    flag="video_missing", detail=f"no file {' or '.join(video.files)} under {dataset['videos_dir']}: "
                                                 f"its questions are left out"))
        if found[question.video_id] or benchmark.strict:
            kept.append(question)
    if not kept:
        raise IngestError([Problem(", ".join(map(str, dataset["questions"])), None, None,
                                   f"no question of benchmark {benchmark.name!r} has its video under "
                                   f"{dataset['videos_dir']} (see the video-file rule in config/dataset/)")])
    table = to_frame(kept, Question)
    if benchmark.strict:
        table = table.sort("video_id", maintain_order=True)
    return table, to_frame(quirks, IngestQuirk)


def locate_video(dataset: Mapping[str, Any], video: NativeVideo) -> Path | None:
    """The first of a video's candidate files (relative to ``dataset.videos_dir``) that exists."""
    for relative in video.files:
        candidate = Path(dataset["videos_dir"]) / relative
        if candidate.is_file():
            return candidate
    return None


def report_path(table: str | Path) -> Path:
    """The ingest report beside the question table: ``questions.parquet`` → ``questions.report.parquet``."""
    table = Path(table)
    return table.with_name(f"{table.stem}.report.parquet")
