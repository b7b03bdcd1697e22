"""The report's coverage block and the subset mark on a benchmark table (issue 58 item 4).

Near the top of ``report.html``: the sentence ingest and the end of the Snakemake run print
(:mod:`senri.coverage`), the quirk counts on kept questions and, apart, on left-out ones, and the left-out
questions by reason and video (the whole list is ``results/questions.report.parquet``). A benchmark table
computed on fewer questions than its files hold carries ``subset = true`` and the coverage sentence in its data
(``benchmark_<name>.parquet/.csv``), and its rows are labelled :data:`~senri.coverage.SUBSET_MARK` beside the
published full-set rows.
"""

from __future__ import annotations

import html
from dataclasses import replace
from typing import Any

import polars as pl

from senri.coverage import LEFT_OUT, SUBSET_MARK, Coverage, coverage, flag_counts

#: The source label of our rows in a benchmark table (beside ``published``).
OURS = "this run set"
#: How many videos the block lists by name per reason before pointing to the parquet.
LISTED_VIDEOS = 40


def coverage_html(questions: pl.DataFrame, report: pl.DataFrame) -> str:
    """The coverage block (module docstring); ``report``: the ingest report (empty: a run set ingested before
    the report listed its left-out questions shows only the question count)."""
    cover = coverage(questions, report)
    kept, left = flag_counts(questions, report)
    parts = [f'<p class="coverage{" partial" if cover.partial else ""}"><b>{html.escape(cover.line())}</b></p>']
    if cover.partial:
        parts.append(f'<p class="note">Every table below is computed on these {cover.questions:,} questions; a '
                     f"benchmark table marks its rows {SUBSET_MARK} beside the published full-set rows.</p>")
    if kept:
        parts.append("<p>Flags on the kept questions: " + html.escape(", ".join(f"{f} {n:,}" for f, n in kept.items()))
                     + ".</p>")
    if left:
        parts.append("<p>Flags on the left-out questions (in no table): "
                     + html.escape(", ".join(f"{f} {n:,}" for f, n in left.items())) + ".</p>")
    for reason, count in cover.left_out:
        rows = report.filter(pl.col("flag") == reason)
        by_video = rows.group_by("video_id", maintain_order=True).agg(pl.col("record"))
        items = "".join(f"<li>{html.escape(video or '(no video id)')}: {html.escape(', '.join(records))}</li>"
                        for video, records in by_video.head(LISTED_VIDEOS).iter_rows())
        more = (f"<li>… and {by_video.height - LISTED_VIDEOS:,} more videos</li>"
                if by_video.height > LISTED_VIDEOS else "")
        parts.append(f"<details><summary>{count:,} questions {html.escape(LEFT_OUT[reason])} left out "
                     f"({by_video.height:,} videos)</summary><ul>{items}{more}</ul>"
                     "<p class=\"note\">The whole list, with each reason: results/questions.report.parquet.</p>"
                     "</details>")
    return "".join(parts)


def mark_subset(tables: Any, cover: Coverage) -> Any:
    """A benchmark's tables (:class:`senri.report.benchmark.BenchmarkTables`; not imported, it imports this
    module) with ``subset`` (bool) and ``coverage`` (the sentence) on each of our rows."""
    table = tables.table.with_columns(pl.lit(cover.partial).alias("subset"), pl.lit(cover.line()).alias("coverage"))
    return replace(tables, table=table)


def ours_label(partial: bool) -> str:
    """Our rows' source label beside published rows: marked when computed on fewer questions than they were."""
    return f"{OURS} {SUBSET_MARK} subset" if partial else OURS


def subset_note(computed_on: str, published_on: str, coverage_line: str) -> str:
    """The note under a table whose rows are marked by :func:`ours_label`: what it was computed on, what the
    published rows were, and the coverage sentence."""
    return f"{SUBSET_MARK} Computed on {computed_on}, not {published_on} the published rows were: {coverage_line}."


def _partial(table: pl.DataFrame) -> bool:
    return bool("subset" in table.columns and table.height and table["subset"].any())


def source_label(table: pl.DataFrame) -> str:
    """Our rows' source label in a benchmark table: marked when the table was computed on a subset."""
    return ours_label(_partial(table))


def subset_notes(table: pl.DataFrame) -> list[str]:
    """The note under a benchmark table computed on a subset (none for the full set)."""
    return [subset_note("a subset", "the full set", table["coverage"][0])] if _partial(table) else []
