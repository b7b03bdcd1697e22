"""Question files → one question table and its ingest report, read by the dataset's benchmark module.

A SENRI-format file is validated strictly (:mod:`senri.benchmarks.senri.reader`: every problem at once, with file,
row and field; nothing written when one fails); a native benchmark's file is read as the benchmark has it
(:mod:`senri.benchmarks`), its quirks counted in the report.
"""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from senri.benchmarks.base import IngestError, Problem
# The SENRI format's reader lives with SENRI-Bench (senri.benchmarks.senri); its names stay importable from here.
from senri.benchmarks.senri.reader import (QUESTION_SCHEMA, RawRecord, find_video, ingest, normalize, read_records,
                                           validated_questions, video_ids_in)
from senri.records import IngestQuirk, Question, to_frame

if TYPE_CHECKING:
    from senri.benchmarks.base import NativeSet, NativeVideo

__all__ = ["IngestError", "Problem", "QUESTION_SCHEMA", "RawRecord", "find_video", "ingest", "ingest_dataset",
           "locate_video", "normalize", "not_drawn_rows", "read_records", "report_path", "validated_questions",
           "video_ids_in"]


def ingest_dataset(dataset: Mapping[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The question table and the ingest report of a dataset config, read by its benchmark's module.

    SENRI format: strict (:func:`ingest`). A native benchmark: every usable record kept, its quirks flagged in the
    report; a damaged record refuses the ingest with every problem named (file, record, field). With
    ``dataset.video_ids`` / ``dataset.splits`` set, only those videos / split labels (Video-MME's long split for
    VideoLucy's Fig. 6) are kept — an unknown value is refused with the valid ones — and the selection is a
    ``filter`` row. A selected question whose video file is not under ``videos_dir`` is left out, one
    ``video_missing`` row per question (a partial download; LVBench's release lists videos no longer
    downloadable): :mod:`senri.coverage` states it wherever the run is shown.
    """
    from senri.benchmarks import load_benchmark
    from senri.benchmarks.base import NativeFileError

    benchmark = load_benchmark(dataset)
    files = ", ".join(map(str, dataset["questions"]))
    try:
        native = benchmark.read(dataset)
    except NativeFileError as exc:
        raise IngestError([Problem(p.file, None, p.field, p.message, p.record) for p in exc.problems]) from None
    if not native.questions:
        raise IngestError([Problem(files, None, None, "the question files hold no questions")])
    selected, selection = _selected(dataset, benchmark, native)
    chosen = {q.qid for q in selected}
    chosen_videos = {q.video_id for q in selected}
    quirks = [q for q in native.quirks
              if q.record == "" and (not q.video_id or q.video_id in chosen_videos)  # a file's or a video's note
              or q.record in chosen
              or (q.flag == "bad_video_id" and selection is None)]  # left out by the reader, before any filter
    if selection is not None:
        quirks.append(IngestQuirk(file=files, record="", video_id="", flag="filter", detail=selection))
    kept: list[Question] = []
    found: dict[str, bool] = {}
    for question in selected:
        video = native.videos[question.video_id]
        if question.video_id not in found:
            found[question.video_id] = benchmark.strict or locate_video(dataset, video) is not None
        if found[question.video_id]:
            kept.append(question)
        else:
            quirks.append(IngestQuirk(
                file=files, record=question.qid, video_id=question.video_id, flag="video_missing",
                detail=f"no file {' or '.join(video.files)} under {dataset['videos_dir']}: the question is left out"))
    if not kept:
        example = native.videos[selected[0].video_id]
        raise IngestError([Problem(files, None, None,
                                   f"none of the {len(selected):,} selected questions of benchmark {benchmark.name!r} "
                                   f"has its video under {dataset['videos_dir']} (e.g. no "
                                   f"{Path(dataset['videos_dir']) / example.files[0]}; see the video-file rule in "
                                   f"config/dataset/{benchmark.name}.yaml)")])
    repeated = sorted(qid for qid, n in Counter(q.qid for q in kept).items() if n > 1)
    if repeated:  # each reader refuses these with their places; this guards the table's key itself
        raise IngestError([Problem(files, None, "question id", f"repeated question id(s): {', '.join(repeated[:10])}")])
    table = to_frame(kept, Question)
    if benchmark.strict:
        table = table.sort("video_id", maintain_order=True)
    return table, to_frame(quirks, IngestQuirk)


def _selected(dataset: Mapping[str, Any], benchmark: Any, native: "NativeSet") -> tuple[list[Question], str | None]:
    """The questions ``dataset.video_ids`` and ``dataset.splits`` select, and the sentence that says so (None
    without a filter). An unknown split or video id refuses the ingest, listing the valid ones: a typo must not
    quietly select nothing, or everything."""
    splits = [str(s) for s in dataset.get("splits") or ()]
    wanted = [str(v) for v in dataset.get("video_ids") or ()]
    problems = []
    if splits:
        valid = list(benchmark.splits) + sorted({q.split for q in native.questions if q.split} - set(benchmark.splits))
        unknown = [s for s in splits if s not in valid]
        if unknown:
            problems.append(Problem("dataset.splits", None, None, (
                f"unknown split(s) {', '.join(map(repr, unknown))}; benchmark {benchmark.name!r} has "
                + (f"the split labels {', '.join(valid)}" if valid else "no split labels (leave dataset.splits empty)"))))
    if wanted:
        unknown = [v for v in wanted if v not in native.videos]
        if unknown:
            hints = [f"{v!r} (did you mean {', '.join(map(repr, close))}?)" if close else repr(v)
                     for v in unknown[:10] for close in [difflib.get_close_matches(v, list(native.videos), n=2)]]
            problems.append(Problem("dataset.video_ids", None, None, (
                f"{len(unknown)} video id(s) not in the question files: {', '.join(hints)}"
                + (" …" if len(unknown) > 10 else "") + f"; the files name {len(native.videos):,} videos, e.g. "
                + ", ".join(list(native.videos)[:8]))))
    if problems:
        raise IngestError(problems)
    if not splits and not wanted:
        return list(native.questions), None
    keep_splits, keep_videos = set(splits), set(wanted)
    selected = [q for q in native.questions
                if (not keep_splits or q.split in keep_splits) and (not keep_videos or q.video_id in keep_videos)]
    said = " and ".join(part for part in (f"dataset.splits=[{','.join(splits)}]" if splits else "",
                                          f"dataset.video_ids ({len(wanted)} id(s))" if wanted else "") if part)
    if not selected:
        raise IngestError([Problem("dataset.splits" if splits else "dataset.video_ids", None, None,
                                   f"{said} select none of the files' {len(native.questions):,} questions")])
    return selected, f"{said} keep {len(selected):,} of the files' {len(native.questions):,} questions"


def not_drawn_rows(whole: pl.DataFrame, drawn: pl.DataFrame, report: pl.DataFrame) -> pl.DataFrame:
    """The ingest report with one ``not_drawn`` row per question ``dataset.subset`` did not draw (and the quirk
    rows of those questions still there, counted apart from the kept ones by :mod:`senri.coverage`)."""
    left = whole.filter(~pl.col("qid").is_in(drawn["qid"].to_list()))
    rows = [IngestQuirk(file="dataset.subset", record=qid, video_id=video_id, flag="not_drawn",
                        detail="not drawn by dataset.subset") for qid, video_id in left.select("qid", "video_id").iter_rows()]
    return pl.concat([report, to_frame(rows, IngestQuirk)], how="vertical") if rows else report


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
