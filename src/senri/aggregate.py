"""Predictions → accuracy tables, with the benchmark's exact rules.

The main table's columns are the layout the questions' benchmark declares (:mod:`senri.benchmarks`:
SENRI-Bench's Table 2 under the method's letter, a native benchmark's own columns under its official scorer);
nothing here names a benchmark or a category. Integer correct counts are kept to the end; overall accuracy is
taken over all questions directly (not as a mean of categories, unless the layout's column is a macro mean);
percentages are rounded half-up from the integers, for display only (:mod:`senri.percent`). A question with no
prediction in a run counts as its scorer counts it (the method's letter: wrong) and is reported in
``missing``, so a run that lost part of its output can never look better than it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import polars as pl

from senri.benchmarks import BENCHMARKS
from senri.benchmarks.base import FACET
from senri.benchmarks.layouts import Layout, column_counts, column_counts_total, column_value
from senri.percent import display_percent, percent_value
from senri.records import (BEHAVIOUR_COUNTS, HEALTH_COUNTS, STORE_COUNTS, Prediction, Question, TableError, check_frame,
                           counted_letters, schema_of)

if TYPE_CHECKING:
    from senri.benchmarks.base import Benchmark

__all__ = ["display_percent", "percent_value"]  # the rounding rule (senri.percent), importable from here as always
#: What names a run in every table: the method, the inference model and the memory — its system and captioner
#: (``captions/perception``, ``worldmm/qwen25vl7b_vllm``: :func:`senri.memory.store.memory_label`; ``none`` for
#: methods without a memory), so a run over perception text can never be read as one over a VLM's captions,
#: nor a run over senri's captions as one over WorldMM's memory.
RUN_KEYS = ["method", "model", "memory"]
#: Per-run failure counts, shown as columns in every table a run appears in (timeouts are also errors).
RUN_LABELS = {"method": "Method", "model": "Model", "memory": "Memory"}
FAILURE_COLUMNS = ("parse_failures", "errors", "timeouts", "missing")
FAILURE_LABELS = {"parse_failures": "Parse failures", "errors": "Errors", "timeouts": "Timeouts", "missing": "Missing"}
FAILURE_MARK = " †"
FAILURE_NOTE = ("† run with parse failures, backend errors or missing predictions (each counted wrong, except an error "
                "row that keeps its release's fallback letter, as LongVideo-R1's failed_call: release_letter_a does).")


class AggregateError(ValueError):
    pass


def load_predictions(paths: Iterable[str | Path]) -> pl.DataFrame:
    """Read prediction files (or every ``*.parquet`` under a folder), checking each against the contract."""
    files: list[Path] = []
    for path in map(Path, paths):
        files.extend(sorted(path.rglob("*.parquet")) if path.is_dir() else [path])
    if not files:
        raise AggregateError("no prediction files given")
    try:  # one read and one check: files one senri version wrote share one schema (issue 53: 12,600 files of a
        # 900-video benchmark's 14 runs took 110 CPU-s checked one by one, 7 s read at once)
        return _checked(pl.read_parquet(files), f"{len(files)} prediction files")
    except (pl.exceptions.PolarsError, TableError):
        pass  # schemas differ (an older file without a later column) or a file breaks the contract: file by file,
        # each filled in and checked on its own, so an error names its file
    return pl.concat([_checked(pl.read_parquet(f), str(f)) for f in files], how="vertical")


def _checked(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    return check_frame(with_defaults(frame), Prediction, source).select(list(schema_of(Prediction)))


def with_defaults(df: pl.DataFrame) -> pl.DataFrame:
    """Columns the prediction contract added later with a default (``memory``, the captioner counts), filled in
    for files written before them; a column without a default stays missing and fails the check."""
    import dataclasses

    schema = schema_of(Prediction)
    missing = [f for f in dataclasses.fields(Prediction)
               if f.name not in df.columns and f.default is not dataclasses.MISSING and f.default is not None]
    return df.with_columns([pl.lit(f.default, dtype=schema[f.name]).alias(f.name) for f in missing])


def score(predictions: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """One row per (run, question) of the question table: correct, parse/error flags, missing flag."""
    questions = check_frame(questions, Question, "questions")
    dupes = predictions.group_by([*RUN_KEYS, "qid"]).len().filter(pl.col("len") > 1)
    if dupes.height:
        raise AggregateError(f"{dupes.height} question(s) predicted more than once in a run, e.g. {dupes.row(0)}")
    unknown = predictions.join(questions.select("qid"), on="qid", how="anti")
    if unknown.height:
        raise AggregateError(
            f"{unknown.height} prediction(s) for questions not in the question table, e.g. {unknown.row(0, named=True)['qid']!r}"
            " (stale predictions from an older question file?)"
        )
    runs = predictions.select(RUN_KEYS).unique(maintain_order=True)
    grid = runs.join(questions.select("video_id", "qid", "task_type", "direction", "answer"), how="cross")
    scored = grid.join(
        predictions.select(*RUN_KEYS, "qid", "pred", "correct", "parse_ok", "error"),
        on=[*RUN_KEYS, "qid"],
        how="left",
    )
    return scored.with_columns(
        missing=pl.col("correct").is_null(),
        # Recompute correctness from the letters: a prediction file cannot claim a right answer it lacks.
        correct=(pl.col("pred") == pl.col("answer")).fill_null(False),
        parse_failure=(~pl.col("parse_ok").fill_null(True)) & pl.col("error").is_null(),
        backend_error=pl.col("error").is_not_null(),
        timeout=pl.col("error").str.contains(r"(?i)time(d)? ?out").fill_null(False),
    )


def run_set_benchmark(questions: pl.DataFrame) -> Benchmark:
    """The benchmark the questions come from (their ``benchmark`` column; SENRI-format files without it: senri).
    A run set is one benchmark's: its layout names every table's columns."""
    names = questions["benchmark"].unique(maintain_order=True).to_list() if "benchmark" in questions.columns else []
    if len(names) > 1:
        raise AggregateError(f"the questions come from {len(names)} benchmarks ({', '.join(names)}); a run set is "
                             "one benchmark's (one dataset config)")
    return BENCHMARKS.load(names[0] if names else "senri")


def plain_categories(categories: Sequence[str] | None, task_type: str) -> list[str]:
    """A question's categories that a column counts: its categories without the ``key=value`` facets, or its
    task type where it lists none (a question table written before categories were recorded)."""
    plain = [c for c in categories or [] if FACET not in c]
    return plain or ([task_type] if task_type else [])


def verdicts(predictions: pl.DataFrame, questions: pl.DataFrame, scorer_names: Sequence[str]) -> pl.DataFrame:
    """Every run's every question under every scorer in ``scorer_names``: the raw reply, the letter the scorer's
    tool compared, its verdict (correct / wrong / skipped) and the exception the tool's code raised on the reply
    (``raised``). Questions without a prediction are there too (``missing``), judged by the scorer's rule for
    absent questions (for Video-MME's scorers: every question of that video left out)."""
    from senri.benchmarks.scoring import OPTION_COLUMNS, Scorer, question_options, scorer as load_scorer

    grid = score(predictions, questions)  # the same checks and run × question grid as every other table
    extra = [c for c in ("split", "categories", *OPTION_COLUMNS) if c in questions.columns]
    rows = grid.join(questions.select("qid", *extra), on="qid", how="left").join(
        predictions.select(*RUN_KEYS, "qid", "raw_output"), on=[*RUN_KEYS, "qid"], how="left")
    scorers: list[Scorer] = [load_scorer(name) for name in scorer_names]
    out: dict[str, list[Any]] = {k: [] for k in (*RUN_KEYS, "video_id", "qid", "split", "categories", "answer",
                                               "pred", "reply", "missing", "scorer", "letter", "verdict", "raised")}
    # A tool that leaves a whole video out when one of its questions has no prediction (Video-MME's skip_missing).
    # A reply that is None makes such a tool raise, so its video is left out the same way.
    videos_missing = {(*(row[k] for k in RUN_KEYS), row["video_id"]) for row in rows.iter_rows(named=True)
                      if row["missing"] or row["raw_output"] is None}
    for row in rows.iter_rows(named=True):
        options = question_options(row)
        categories = row.get("categories") or [row["task_type"]]
        reply = row["raw_output"]  # each tool reads the raw reply as it receives it
        video_missing = (*(row[k] for k in RUN_KEYS), row["video_id"]) in videos_missing
        for s in scorers:
            present = not row["missing"] and not (s.absent_scope == "video" and video_missing)
            outcome = s.score(row["pred"] if s.reads == "pred" else reply, row["answer"], options, present=present)
            for key, value in (*((k, row[k]) for k in RUN_KEYS), ("video_id", row["video_id"]), ("qid", row["qid"]),
                               ("split", row.get("split")), ("categories", list(categories)),
                               ("answer", row["answer"]), ("pred", row["pred"]), ("reply", reply),
                               ("missing", row["missing"]), ("scorer", s.name), ("letter", outcome.letter),
                               ("verdict", outcome.verdict), ("raised", outcome.raised)):
                out[key].append(value)
    schema = {**{k: pl.String for k in RUN_KEYS}, "video_id": pl.String, "qid": pl.String, "split": pl.String,
              "categories": pl.List(pl.String), "answer": pl.String, "pred": pl.String, "reply": pl.String,
              "missing": pl.Boolean, "scorer": pl.String, "letter": pl.String, "verdict": pl.String,
              "raised": pl.String}
    return pl.DataFrame(out, schema=schema)


def layout_scored(scored: pl.DataFrame, questions: pl.DataFrame, predictions: pl.DataFrame,
                  layout: Layout) -> pl.DataFrame:
    """:func:`score`'s grid with what the layout's tables count by: each question's ``split`` and plain
    ``categories`` (:func:`plain_categories`) and its ``verdict`` under the layout's main scorer (its first):
    the method's own letter (``method``: correct or wrong, a missing prediction wrong) or a named scorer's
    reading of the stored reply (:func:`verdicts`)."""
    extra = [c for c in ("split", "categories") if c in questions.columns and c not in scored.columns]
    table = scored.join(questions.select("qid", *extra), on="qid", how="left") if extra else scored
    if "split" not in table.columns:
        table = table.with_columns(split=pl.lit(None, pl.String))
    every = table["categories"].to_list() if "categories" in table.columns else [None] * table.height
    table = table.with_columns(categories=pl.Series([plain_categories(c, t) for c, t in
                                                     zip(every, table["task_type"].to_list())],
                                                    dtype=pl.List(pl.String)))
    main_scorer = layout.scorers[0]
    if main_scorer == "method":
        return table.with_columns(verdict=pl.when(pl.col("correct")).then(pl.lit("correct")).otherwise(pl.lit("wrong")))
    judged = verdicts(predictions, questions, (main_scorer,)).select(*RUN_KEYS, "qid", "verdict")
    return table.join(judged, on=[*RUN_KEYS, "qid"], how="left", maintain_order="left")


def main_table(scored: pl.DataFrame, decimals: int = 1, layout: Layout | None = None) -> pl.DataFrame:
    """One row per run: the layout's columns (SENRI-Bench's by default) as displayed accuracies, the integer
    counts behind each (``correct_<col>``, ``n_<col>``), N (the questions counted over the whole set) and the
    failure counts. ``scored``: :func:`layout_scored`'s table (a bare :func:`score` grid is read under the
    method's letter, its task type as its category)."""
    layout = layout or BENCHMARKS.load("senri").layout
    if "verdict" not in scored.columns or "categories" not in scored.columns:
        every = scored["categories"].to_list() if "categories" in scored.columns else [None] * scored.height
        scored = scored.with_columns(
            categories=pl.Series([plain_categories(c, t) for c, t in zip(every, scored["task_type"].to_list())],
                                 dtype=pl.List(pl.String)),
            verdict=pl.when(pl.col("correct")).then(pl.lit("correct")).otherwise(pl.lit("wrong")))
    if "split" not in scored.columns:
        scored = scored.with_columns(split=pl.lit(None, pl.String))
    runs = scored.group_by(RUN_KEYS, maintain_order=True).agg(
        parse_failures=pl.col("parse_failure").sum().cast(pl.Int64),
        errors=pl.col("backend_error").sum().cast(pl.Int64),
        timeouts=pl.col("timeout").sum().cast(pl.Int64),
        missing=pl.col("missing").sum().cast(pl.Int64),
        _split=pl.col("split"), _categories=pl.col("categories"), _verdict=pl.col("verdict"),
    )
    keys = layout.keys
    rows = []
    for run in runs.iter_rows(named=True):
        counts = column_counts(layout, zip(run["_split"], run["_categories"], run["_verdict"]))
        rows.append({**{k: run[k] for k in RUN_KEYS}, "n": column_counts_total(counts, layout)[1],
                     **{k: column_value(layout, counts, k, decimals) for k in keys},
                     **{f"{kind}_{k}": counts[k][i] for k in keys for i, kind in enumerate(("correct", "n"))},
                     **{c: run[c] for c in FAILURE_COLUMNS}})
    schema = {**{k: pl.String for k in RUN_KEYS}, "n": pl.Int64, **{k: pl.Float64 for k in keys},
              **{f"{kind}_{k}": pl.Int64 for k in keys for kind in ("correct", "n")},
              **{c: pl.Int64 for c in FAILURE_COLUMNS}}
    return pl.DataFrame(rows, schema=schema).sort(RUN_KEYS)


def column_labels(layout: Layout) -> dict[str, str]:
    """The printed header of each of the layout's columns."""
    return {c.key: c.label for c in layout.columns}


def per_video_table(scored: pl.DataFrame, decimals: int = 1) -> pl.DataFrame:
    return (
        scored.group_by([*RUN_KEYS, "video_id"])
        .agg(
            n=pl.len().cast(pl.Int64),
            correct=pl.col("correct").sum().cast(pl.Int64),
            parse_failures=pl.col("parse_failure").sum().cast(pl.Int64),
            errors=pl.col("backend_error").sum().cast(pl.Int64),
            timeouts=pl.col("timeout").sum().cast(pl.Int64),
            missing=pl.col("missing").sum().cast(pl.Int64),
        )
        .with_columns(accuracy=display_percent(pl.col("correct"), pl.col("n"), decimals))
        .select(*RUN_KEYS, "video_id", "n", "correct", "accuracy", *FAILURE_COLUMNS)
        .sort([*RUN_KEYS, "video_id"])
    )


#: Columns of the run-health table after the run keys, in print order: the run's size and accuracy, then every
#: way a question may have lost accuracy to the harness rather than to the method. ``parse_failures``,
#: ``errors`` and ``missing`` count questions (as in the main table); the HEALTH_COUNTS columns are the
#: prediction rows' own counts summed over the run (``timeouts`` there counts timed-out *calls*, not questions).
RUN_HEALTH_COLUMNS: tuple[str, ...] = (
    "questions", "correct", "accuracy", "forced_answers", "forced_recovered", "parse_failures", "errors",
    "timeouts", "context_trims", "truncated_captions", "failed_captions", "builder_losses", "capped_cells",
    "cell_s_requested", "cell_s_seen", "seen_share", "failed_memory_updates", "stripped_checks", "refused_checks",
    "repeated_queries", "failed_search_calls", "unparsed_tool_calls", "spent_steps", "rejected_tool_calls",
    "truncated_replies", "black_frames", "context_overflows", "defaulted_answers", "capped_llm_calls", "missing", *(
        # What the method did (BEHAVIOUR_COUNTS): per-question means of its steps, totals of the rare ones, and
        # the questions answered with nothing retrieved — a memory method that never searched shows here.
        "rounds_per_q", "searches_per_q", "memories_per_q", "qa_calls_per_q", "bypasses", "checks", "cells",
        "frames_seen", "tool_calls", "no_retrieval"),
)
#: Behaviour columns shown as per-question means (the rest of BEHAVIOUR_COUNTS are run totals).
BEHAVIOUR_MEANS = {"rounds_per_q": "rounds", "searches_per_q": "searches", "memories_per_q": "memories_returned",
                   "qa_calls_per_q": "qa_calls"}
RUN_HEALTH_LABELS = {**RUN_LABELS, "questions": "Questions", "correct": "Correct", "accuracy": "Accuracy",
                     "forced_answers": "Forced answers", "forced_recovered": "Forced, recovered by parser",
                     "parse_failures": "Parse failures", "errors": "Errors", "timeouts": "Timed-out calls",
                     "context_trims": "Context trims", "truncated_captions": "Truncated captions",
                     "failed_captions": "Failed captions", "builder_losses": "Builder losses",
                     "capped_cells": "Capped cells",
                     "cell_s_requested": "Cell s requested", "cell_s_seen": "Cell s seen",
                     "seen_share": "Seen %", "failed_memory_updates": "Failed memory updates",
                     "stripped_checks": "Stripped checks", "refused_checks": "Refused checks",
                     "repeated_queries": "Repeated queries", "failed_search_calls": "Failed search calls",
                     "unparsed_tool_calls": "Unparsed tool calls", "spent_steps": "Spent steps",
                     "rejected_tool_calls": "Rejected tool calls", "truncated_replies": "Truncated replies",
                     "black_frames": "Black frames", "context_overflows": "Context overflows",
                     "defaulted_answers": "Defaulted answers", "capped_llm_calls": "Capped at the call limit",
                     "missing": "Missing", "rounds_per_q": "Rounds / q", "searches_per_q": "Searches / q",
                     "memories_per_q": "Memories / q", "qa_calls_per_q": "QA calls / q", "bypasses": "Bypasses",
                     "checks": "Checks", "cells": "Cells", "frames_seen": "Frames seen", "tool_calls": "Tool calls",
                     "no_retrieval": "Answered without retrieval"}
RUN_HEALTH_NOTE = ("Counts are summed from the prediction files' columns, never from logs. Parse failures, errors "
                   "and missing count questions (each counted wrong, except an error row that keeps its "
                   "release's fallback letter); timed-out calls and the other counts are "
                   "events, several per question possible. Failed captions, truncated captions and builder losses (items a "
                   "persistent memory's builder left out: failed, unreadable or over-limit builder calls) count "
                   "what each memory store carries once per store the run read, plus what each question added "
                   "itself (VideoLucy's backtracking, a retrieved caption cut at its limit); the per-store table "
                   "lists every store's own counts. Seen % = cell seconds seen / cell "
                   "seconds requested by the checks (– when no check asked for any). Failed search calls are a "
                   "memory retriever's own model calls (fact filter, ranking, time range) that failed or came "
                   "back unreadable, so the search took its fallback. Unparsed tool calls are replies holding a "
                   "tool call that could not be read; spent steps are controller steps that neither ran a tool nor "
                   "answered; rejected tool calls were refused as invalid; truncated replies are model replies cut "
                   "at their token limit; black frames failed to decode and were sent black; capped at the call limit "
                   "counts questions whose agent calls reached the method's cap (VideoLucy's max_llm_calls), so "
                   "their answer was forced there. "
                   "The last columns say what the method did: "
                   "controller rounds, searches, memories returned and QA calls per answered question, time "
                   "bypasses, checks, verifier cells, frames seen and tool calls in all, and the questions answered with no "
                   "memory retrieved (a memory method that never searched, or found nothing).")


def run_health_table(predictions: pl.DataFrame, scored: pl.DataFrame, decimals: int = 1) -> pl.DataFrame:
    """One row per run: how much the harness may have cost its accuracy (issue 24's run-health counts).

    ``predictions`` are the rows :func:`load_predictions` read (they carry the HEALTH_COUNTS and
    BEHAVIOUR_COUNTS columns; files written before a column was added read it as 0);
    ``scored`` is :func:`score`'s grid, whose question counts include missing predictions.
    """
    per_store = {name: column for name, column in STORE_COUNTS.items() if column in predictions.columns}
    sums = predictions.group_by(RUN_KEYS).agg(
        *(pl.col(name).sum().cast(pl.Int64) for name in (*HEALTH_COUNTS, *BEHAVIOUR_COUNTS) if name not in per_store),
        # A store's share once per store the run read (one per video), the questions' own part summed.
        *((pl.col(name) - pl.col(column)).sum().cast(pl.Int64).alias(f"_own_{name}") for name, column in per_store.items()),
        answered=pl.len().cast(pl.Int64))
    if per_store:
        once = predictions.group_by(*RUN_KEYS, "video_id").agg(
            pl.col(column).max().alias(f"_store_{name}") for name, column in per_store.items()
        ).group_by(RUN_KEYS).agg(pl.col(f"_store_{name}").sum() for name in per_store)
        sums = sums.join(once, on=RUN_KEYS, how="left").with_columns(
            (pl.col(f"_own_{name}") + pl.col(f"_store_{name}").fill_null(0)).cast(pl.Int64).alias(name)
            for name in per_store).drop(*(f"_{part}_{name}" for name in per_store for part in ("own", "store")))
    per_run = scored.group_by(RUN_KEYS, maintain_order=True).agg(
        questions=pl.len().cast(pl.Int64),
        correct=pl.col("correct").sum().cast(pl.Int64),
        parse_failures=pl.col("parse_failure").sum().cast(pl.Int64),
        errors=pl.col("backend_error").sum().cast(pl.Int64),
        missing=pl.col("missing").sum().cast(pl.Int64),
    )
    table = per_run.join(sums, on=RUN_KEYS, how="left").with_columns(
        pl.col(n).fill_null(0) for n in (*HEALTH_COUNTS, *BEHAVIOUR_COUNTS, "answered"))
    means = {column: pl.when(pl.col("answered") > 0).then((pl.col(count) / pl.col("answered")).round(decimals))
             for column, count in BEHAVIOUR_MEANS.items()}
    return table.with_columns(
        accuracy=display_percent(pl.col("correct"), pl.col("questions"), decimals),
        seen_share=display_percent(pl.col("cell_s_seen"), pl.col("cell_s_requested"), decimals),
        no_retrieval=pl.col("answered_without_retrieval"), **means,
    ).select(*RUN_KEYS, *RUN_HEALTH_COLUMNS).sort(RUN_KEYS)


#: The model-call table's columns after the run keys (VideoLucy appendix A.8's efficiency measure, by role):
#: the agent model's calls per question (every call the method made itself, repairs and forced answers included)
#: and the captioner's, each as mean / median / max over the run's answered questions, and the run's call cap.
LLM_CALL_COLUMNS: tuple[str, ...] = ("questions", "agent_mean", "agent_median", "agent_max", "caption_mean",
                                     "caption_median", "caption_max", "max_llm_calls")
LLM_CALL_LABELS = {**RUN_LABELS, "questions": "Questions", "agent_mean": "Agent mean", "agent_median": "Agent median",
                   "agent_max": "Agent max", "caption_mean": "Captioner mean", "caption_median": "Captioner median",
                   "caption_max": "Captioner max", "max_llm_calls": "Call cap"}
#: The captioner whose captions are no model calls (measured text): its calls are not in ``n_vlm_calls``.
PERCEPTION_CAPTIONER = "perception"


def agent_calls() -> pl.Expr:
    """A prediction row's agent-model calls: its LLM and VLM calls less the captioner's. A VLM captioner's calls
    are booked in ``n_vlm_calls`` too (:meth:`senri.methods.base.CallTally.add_captions`); the perception
    captioner's (memory ``captions/perception``) are not."""
    captioner = pl.col("memory").str.split("/").list.last()  # ``captions/perception``; older files: ``perception``
    vlm_captions = pl.when(captioner == PERCEPTION_CAPTIONER).then(0).otherwise(pl.col("n_caption_calls"))
    return pl.col("n_llm_calls") + pl.col("n_vlm_calls") - vlm_captions


def llm_call_table(predictions: pl.DataFrame, caps: pl.DataFrame | None = None, decimals: int = 1) -> pl.DataFrame:
    """One row per run: model calls per answered question by role — the agent's (:func:`agent_calls`) and the
    captioner's (``n_caption_calls``; captions reused from the cache are no calls) — as mean, median and max.
    ``caps``: ``method``, ``model`` and ``max_llm_calls`` per run (from the runs' configs; null: uncapped)."""
    table = predictions.with_columns(_agent=agent_calls(), _caption=pl.col("n_caption_calls")).group_by(RUN_KEYS).agg(
        questions=pl.len().cast(pl.Int64),
        **{f"{role}_{stat}": getattr(pl.col(f"_{role}"), stat)() for role in ("agent", "caption")
           for stat in ("mean", "median", "max")})
    table = table.with_columns(
        *(pl.col(f"{role}_{stat}").cast(pl.Float64).round(decimals) for role in ("agent", "caption")
          for stat in ("mean", "median")),
        *(pl.col(f"{role}_max").cast(pl.Int64) for role in ("agent", "caption")))
    if caps is not None and "max_llm_calls" in caps.columns:
        table = table.join(caps.select("method", "model", pl.col("max_llm_calls").cast(pl.Int64)),
                           on=["method", "model"], how="left")
    else:
        table = table.with_columns(max_llm_calls=pl.lit(None, pl.Int64))
    return table.select(*RUN_KEYS, *LLM_CALL_COLUMNS).sort(RUN_KEYS)


#: The per-store table's columns after the memory and video: the counts each store carries once.
STORE_HEALTH_COLUMNS = ("runs", "questions", "failed_captions", "truncated_captions", "builder_losses")
STORE_HEALTH_LABELS = {"memory": "Memory", "video_id": "Video", "runs": "Runs reading it",
                       "questions": "Questions asked of it", "failed_captions": "Failed captions",
                       "truncated_captions": "Truncated captions", "builder_losses": "Builder losses"}


def store_health_table(predictions: pl.DataFrame) -> pl.DataFrame:
    """One row per memory store (memory × video) that a run read: the failed and cut captions and the builder
    losses it carries, counted once — the run-health table's per-store share, not multiplied by questions."""
    columns = [c for c in STORE_COUNTS.values() if c in predictions.columns]
    reading = predictions.filter(pl.col("memory") != "none") if "memory" in predictions.columns else predictions.clear()
    schema = {"memory": pl.String, "video_id": pl.String, **{c: pl.Int64 for c in STORE_HEALTH_COLUMNS}}
    if reading.is_empty() or not columns:
        return pl.DataFrame(schema=schema)
    return reading.group_by("memory", "video_id").agg(
        runs=pl.struct("method", "model").n_unique().cast(pl.Int64),
        questions=pl.col("qid").n_unique().cast(pl.Int64),
        **{name: pl.col(column).max().cast(pl.Int64) for name, column in STORE_COUNTS.items() if column in columns},
    ).with_columns(pl.lit(0, pl.Int64).alias(n) for n in STORE_COUNTS if STORE_COUNTS[n] not in columns
                   ).select(list(schema)).sort("memory", "video_id")


def letter_columns(table_columns: Sequence[str]) -> list[str]:
    """The letter columns of a positions table (:func:`answer_positions`) as the letter figure draws them: SENRI's
    four letters always (its figure unchanged), E and F where the table has them, then unparsed answers."""
    return [*counted_letters(table_columns), "none"]


def answer_positions(scored: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """How often each letter is predicted per run, next to the ground truth's own distribution: A–D always
    (SENRI's four), E and F only where a question's answer or a prediction is one (a five- or six-option native
    benchmark), so a SENRI run's table and figure keep their four letter columns."""
    letters = counted_letters([*questions["answer"].unique().to_list(), *scored["pred"].unique().to_list()])

    def letter_counts(frame: pl.DataFrame, column: str) -> list[pl.Expr]:
        return [(pl.col(column) == letter).sum().cast(pl.Int64).alias(letter) for letter in letters] + [
            pl.col(column).is_null().sum().cast(pl.Int64).alias("none"),
            pl.len().cast(pl.Int64).alias("n"),
        ]

    truth = questions.select(letter_counts(questions, "answer")).select(
        pl.lit("(ground truth)").alias("method"), pl.lit("").alias("model"), pl.lit("").alias("memory"), pl.all()
    )
    runs = scored.group_by(RUN_KEYS, maintain_order=True).agg(letter_counts(scored, "pred")).sort(RUN_KEYS)
    return pl.concat([truth, runs], how="vertical")


def to_markdown(df: pl.DataFrame, headers: dict[str, str] | None = None, decimals: int = 1) -> str:
    """A GitHub-flavoured Markdown table; floats shown with ``decimals`` places, missing values as '–'."""
    headers = headers or {}

    def cell(value: object) -> str:
        if value is None:
            return "–"
        if isinstance(value, float):
            return f"{value:.{decimals}f}"
        return str(value).replace("|", "\\|")

    names = [headers.get(c, c) for c in df.columns]
    lines = ["| " + " | ".join(names) + " |", "|" + "|".join("---" for _ in names) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines) + "\n"


def _write(df: pl.DataFrame, out_dir: Path, name: str, markdown: str) -> None:
    df.write_parquet(out_dir / f"{name}.parquet")
    df.write_csv(out_dir / f"{name}.csv")
    (out_dir / f"{name}.md").write_text(markdown)


def has_failures() -> pl.Expr:
    return (pl.col("parse_failures") + pl.col("errors") + pl.col("missing")) > 0


def mark_failures(table: pl.DataFrame, column: str = "method") -> pl.DataFrame:
    """Append † to ``column`` in rows of runs with any failure (the table must carry the failure columns)."""
    return table.with_columns(
        pl.when(has_failures()).then(pl.col(column) + FAILURE_MARK).otherwise(pl.col(column)).alias(column)
    )


def native_benchmarks(questions: pl.DataFrame) -> list[str]:
    """The benchmarks read from their native files that the questions come from, in file order (none: only
    SENRI-format questions)."""
    if "benchmark" not in questions.columns:
        return []
    return [b for b in questions["benchmark"].unique(maintain_order=True).to_list() if b != "senri"]


def main_note(benchmark: Benchmark) -> str:
    """What the main table counts when its scorer is a named one (a native benchmark's official scorer), and
    where the published rows and every other scorer are; nothing for the method's own letter."""
    scorer = benchmark.layout.scorers[0]
    if scorer == "method":
        return ""
    name = benchmark.name
    return (f"Columns: {benchmark.layout.title}, scored with {name}'s official scorer ({scorer}); N = counted "
            f"questions. The published rows beside it: `results/report/tables/benchmark_{name}.md`; every scorer side "
            f"by side: `scorers_{name}.md`.")


def main_markdown(table: pl.DataFrame, decimals: int = 1, questions: pl.DataFrame | None = None) -> str:
    """The main table as Markdown: the layout's columns of the questions' benchmark (SENRI-Bench's Table 2
    without ``questions``), and what they count where its scorer is not the method's letter."""
    benchmark = run_set_benchmark(questions) if questions is not None else BENCHMARKS.load("senri")
    flagged = mark_failures(table)
    shown = flagged.select(*RUN_KEYS, "n", *benchmark.layout.keys, *FAILURE_COLUMNS)
    text = to_markdown(shown, {**column_labels(benchmark.layout), **RUN_LABELS, "n": "N", **FAILURE_LABELS}, decimals)
    if table.select(has_failures().any()).item():
        text += "\n" + FAILURE_NOTE + "\n"
    note = main_note(benchmark)
    return text + (f"\n{note}\n" if note else "")


def aggregate(prediction_paths: Sequence[str | Path], questions: pl.DataFrame, out_dir: str | Path,
              decimals: int = 1) -> dict[str, pl.DataFrame]:
    """Write ``main``, ``per_video`` and ``answer_positions`` as Parquet, CSV and Markdown under ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    predictions = load_predictions(prediction_paths)
    scored = score(predictions, questions)
    layout = run_set_benchmark(questions).layout
    tables = {
        "main": main_table(layout_scored(scored, questions, predictions, layout), decimals, layout),
        "per_video": per_video_table(scored, decimals),
        "answer_positions": answer_positions(scored, questions),
    }
    _write(tables["main"], out_dir, "main", main_markdown(tables["main"], decimals, questions))
    _write(tables["per_video"], out_dir, "per_video",
           to_markdown(tables["per_video"], {**RUN_LABELS, "video_id": "Video", "accuracy": "Accuracy"}, decimals))
    _write(tables["answer_positions"], out_dir, "answer_positions", to_markdown(tables["answer_positions"], RUN_LABELS))
    return tables

