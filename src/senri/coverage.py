"""How much of its question files a run covers, read from ingest's two tables: the question table
(``results/questions.parquet``) and the ingest report beside it (``results/questions.report.parquet``).

A partial download must never pass for the full set: the same sentence — "N of M questions (V of W videos) — K
questions on missing videos left out" — is printed by ingest, at the end of a Snakemake run and near the top of
the report, and a benchmark table computed on fewer questions than its files hold is marked beside the
published full-set rows. Everything here is derived from the two tables, so each place says the same thing.

The report's rows fall in three kinds: a question left out (one row per question; ``flag`` = the reason in
:data:`LEFT_OUT`), a note on the whole set (``flag`` in :data:`SET_NOTES`: a ``dataset.splits``/``video_ids``
filter, an empty MLVU task file, a repaired file), and a quirk of one record (every other flag). Quirk counts
are split between the kept questions and the left-out ones, so a count never includes a question the run
does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

#: Why a question of the files is not in the question table (the ingest report's ``flag``) → how it is said.
LEFT_OUT: dict[str, str] = {
    "video_missing": "on missing videos",
    "bad_video_id": "with a video id that cannot name a file",
    "not_drawn": "not drawn by dataset.subset",
}
#: Whole-set rows: the selection a config made (``filter``), a task file without questions, a note on a file.
SET_NOTES = ("filter", "empty_task_file", "file_note")
#: Set notes that make the run cover less than its benchmark's full set.
REDUCING_NOTES = ("filter", "empty_task_file")
#: The mark a table row computed on part of a benchmark carries beside published full-set rows.
SUBSET_MARK = "◊"


@dataclass(frozen=True)
class Coverage:
    questions: int            # in the question table
    of_questions: int         # selected by the config (every question of the files without a filter)
    videos: int
    of_videos: int
    left_out: tuple[tuple[str, int], ...]   # (reason, questions), in LEFT_OUT's order, zeros left out
    reductions: tuple[str, ...]              # the filter and empty-task sentences

    @property
    def partial(self) -> bool:
        """Whether the run covers less than its files' full set (a table on it is marked :data:`SUBSET_MARK`)."""
        return self.questions < self.of_questions or bool(self.reductions)

    def line(self) -> str:
        """"N of M questions (V of W videos) — K questions on missing videos left out", then any other reason
        and the selection notes."""
        counts = dict(self.left_out)
        text = (f"{self.questions:,} of {self.of_questions:,} questions ({self.videos:,} of {self.of_videos:,} "
                f"videos) — {counts.get('video_missing', 0):,} questions {LEFT_OUT['video_missing']} left out")
        others = [f"{n:,} {LEFT_OUT[reason]}" for reason, n in self.left_out if reason != "video_missing"]
        if others:
            text += f"; also left out: {', '.join(others)}"
        return text + "".join(f"; {note}" for note in self.reductions)

    def marker(self) -> str:
        """The text beside a table row computed on this run's questions (empty for the full set)."""
        if not self.partial:
            return ""
        return f"{SUBSET_MARK} subset: {self.line()}"


def _kept_rows(questions: pl.DataFrame, report: pl.DataFrame) -> pl.Expr:
    """Quirk rows of a kept question (its id) or of a kept video (a video-wide row has no record)."""
    qids = questions["qid"].to_list() if questions.height else []
    videos = questions["video_id"].unique().to_list() if questions.height else []
    return pl.col("record").is_in(qids) | ((pl.col("record") == "") & pl.col("video_id").is_in(videos)
                                           & (pl.col("video_id") != ""))


def coverage(questions: pl.DataFrame, report: pl.DataFrame) -> Coverage:
    """The run's coverage from its question table and ingest report (module docstring)."""
    left = report.filter(pl.col("flag").is_in(list(LEFT_OUT)))
    counts = {reason: left.filter(pl.col("flag") == reason)["record"].n_unique() for reason in LEFT_OUT}
    videos = set(questions["video_id"].to_list()) if questions.height else set()
    every_video = videos | {v for v in left["video_id"].to_list() if v}
    reductions = tuple(
        f"{Path(row['file']).name}: {row['detail']}" if row["flag"] == "empty_task_file" else row["detail"]
        for row in report.filter(pl.col("flag").is_in(list(REDUCING_NOTES))).iter_rows(named=True))
    return Coverage(questions=questions.height, of_questions=questions.height + sum(counts.values()),
                    videos=len(videos), of_videos=len(every_video),
                    left_out=tuple((reason, n) for reason, n in counts.items() if n), reductions=reductions)


def flag_counts(questions: pl.DataFrame, report: pl.DataFrame) -> tuple[dict[str, int], dict[str, int]]:
    """(flag → rows on kept questions, flag → rows on left-out questions) of the record quirks, each sorted by
    flag: the kept counts are what the run's tables contain; the others are said apart."""
    quirks = report.filter(~pl.col("flag").is_in([*LEFT_OUT, *SET_NOTES]))
    kept = quirks.filter(_kept_rows(questions, quirks))
    rest = quirks.filter(~_kept_rows(questions, quirks))

    def count(rows: pl.DataFrame) -> dict[str, int]:
        return dict(sorted(rows.group_by("flag").len().iter_rows())) if rows.height else {}

    return count(kept), count(rest)


def summary_lines(questions: pl.DataFrame, report: pl.DataFrame) -> list[str]:
    """What ingest prints (and the end of a Snakemake run): the coverage line, then the quirk counts on kept
    questions and, apart, on left-out ones."""
    kept, rest = flag_counts(questions, report)
    lines = [coverage(questions, report).line()]
    if kept:
        lines.append("flags on kept questions: " + ", ".join(f"{flag} {n:,}" for flag, n in kept.items()))
    if rest:
        lines.append("flags on left-out questions (not in the tables): "
                     + ", ".join(f"{flag} {n:,}" for flag, n in rest.items()))
    return lines


def summary_from_files(table: str | Path, report: str | Path) -> list[str]:
    """:func:`summary_lines` of the files ingest wrote; [] where either is absent (a run that stopped before)."""
    table, report = Path(table), Path(report)
    if not (table.is_file() and report.is_file()):
        return []
    return summary_lines(pl.read_parquet(table, columns=["qid", "video_id"]), pl.read_parquet(report))
