"""The report stage: paper-layout tables, figures and paired statistics from the prediction files.

:func:`build_report` writes ``<out>/report.html`` (self-contained) and, under ``<out>/report/``, every
table as Parquet, CSV and Markdown and every figure as PNG and SVG. Each run's approach and frame budget
come from the config it ran with (the ``.config.yaml`` next to its predictions), so the report describes
what was run, not what the current config says.
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl
import yaml

from senri.aggregate import (FAILURE_COLUMNS, FAILURE_LABELS, FAILURE_NOTE, LLM_CALL_LABELS, RUN_HEALTH_COLUMNS,
                             RUN_HEALTH_LABELS, RUN_HEALTH_NOTE, RUN_KEYS, STORE_HEALTH_LABELS, answer_positions,
                             column_labels, layout_scored, llm_call_table, load_predictions, main_note, main_table,
                             mark_failures, native_benchmarks, per_video_table, run_health_table, run_set_benchmark,
                             score, store_health_table, to_markdown)
from senri.methods import deviations_from_release
from senri.release_prompts import RELEASES, prompt_source
from senri.report import figures
from senri.benchmarks import BENCHMARKS
from senri.coverage import coverage as question_coverage
from senri.paths import sidecar_path
from senri.records import IngestQuirk, to_frame
from senri.report.benchmark import benchmark_html, benchmark_tables, write_benchmark_tables
from senri.report.coverage import coverage_html, mark_subset
from senri.report.published import (PUBLISHED_TABLES, table2_beside_paper, table2_source_label,
                                    with_a8_rows)
from senri.report.browser import build_browser, discordant_html, run_labels
from senri.report.model_grid import model_grid_display, model_grid_markdown, model_grid_table
from senri.report.render import figure_html, page, table_html
from senri.report.tables import APPROACH_LABELS, ReportTables, ablation_variants, build_tables, expected_chance

log = logging.getLogger(__name__)

#: Headers of every table's run and failure columns; the accuracy columns' are the layout's
#: (:func:`senri.aggregate.column_labels`).
HEADERS = {**FAILURE_LABELS, "method": "Method", "model": "Model", "n": "N",
           "approach": "Approach", "group": "Memory system / pair", "label": "Workflow", "run": "Run",
           "reference": "Reference", "variant": "Variant", "setting": "Setting", "memory": "Memory"}


def run_metadata(prediction_paths: Sequence[str | Path]) -> pl.DataFrame:
    """Per run: approach, implementation, frame budget and call cap, read from each prediction file's config
    sidecar."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    parsed: dict[str, Any] = {}  # a run's sidecars are one text (its slice names no video): parsed once per run,
    # not once per video (12,600 YAML parses for a 900-video benchmark's 14 runs; issue 53)
    for path in map(Path, prediction_paths):
        sidecar = sidecar_path(path)
        if not sidecar.is_file():
            continue
        text = sidecar.read_text()
        if text not in parsed:
            parsed[text] = yaml.safe_load(text) or {}
        stage = parsed[text].get("config", {})
        method, model = stage.get("method", {}), stage.get("model", {})
        key = (method.get("name"), model.get("name"))
        rows.setdefault(key, {"method": key[0], "model": key[1], "approach": method.get("approach", "baseline"),
                              "implementation": method.get("implementation"), "frames": method.get("frames"),
                              "prompts": prompt_source(method), "prompt_family": method.get("prompts"),
                              "deviations": "; ".join(f"{name}={value!r} (the release: {release!r})" for name,
                                                      (value, release) in deviations_from_release(method).items()),
                              "max_llm_calls": method.get("max_llm_calls")})
    schema = {"method": pl.String, "model": pl.String, "approach": pl.String, "implementation": pl.String,
              "frames": pl.Int64, "prompts": pl.String, "prompt_family": pl.String, "deviations": pl.String,
              "max_llm_calls": pl.Int64}
    return pl.DataFrame(list(rows.values()), schema=schema)


def published_beside_main(main: pl.DataFrame, layout: Any, benchmark: str, config: Mapping[str, Any],
                          questions: int, cover: Any) -> tuple[pl.DataFrame | None, list[str]]:
    """``report.published`` (``paper_table2``): the main table with each run's published rows after it
    (:func:`senri.report.published.table2_beside_paper`), ours marked ◊ when not SENRI-Bench's full set; None
    without the setting. A run set of another benchmark gets no Table 2 rows, and a sentence saying so."""
    name = config.get("published")
    if not name:
        return None, []
    if benchmark != "senri":
        return None, [f"report.published: {name} holds SENRI-Bench numbers; this run set is {benchmark}: not shown."]
    label, notes = table2_source_label(questions, bool(cover.partial), cover.line())
    keys = [c.key for c in layout.columns]
    table, beside = table2_beside_paper(main, keys, config.get("published_names") or {}, label,
                                        PUBLISHED_TABLES[name])
    return table, beside + notes


def _write_table(df: pl.DataFrame, out_dir: Path, name: str, markdown: str) -> None:
    df.write_parquet(out_dir / f"{name}.parquet")
    df.write_csv(out_dir / f"{name}.csv")
    (out_dir / f"{name}.md").write_text(markdown)


def _markdown_grouped(df: pl.DataFrame, group: str, decimals: int, headers: Mapping[str, str] = HEADERS) -> str:
    parts = []
    for (value,), part in df.group_by(group, maintain_order=True):
        parts.append(f"**{APPROACH_LABELS.get(value, value)}**\n\n" + to_markdown(part.drop(group), dict(headers),
                                                                                  decimals))
    return "\n".join(parts)


#: What the report says about a run whose paired interval against ``random`` covers zero, and where to look next.
EVIDENCE_POINTER = ("For a model that reads the memory, run `make evidence`: the memory methods against blind on "
                    "a reading model, each run with its own report under results/evidence/.")
CHANCE_HEADERS = {"run": "Run", "n": "N", "total": "Total", "delta": "Δ vs random [95% CI]", "mcnemar_p": "McNemar p",
                  "verdict": "Against chance"}


def _chance_rows(chance: pl.DataFrame) -> pl.DataFrame:
    """The chance table as shown: Δ with its interval as one cell, and the verdict in words."""
    rows = [{"run": r["run"], "n": r["n"], "total": r["total"],
             "delta": f"{r['delta_pp']:+.1f} [{r['ci_low_pp']:+.1f}, {r['ci_high_pp']:+.1f}]",
             "mcnemar_p": f"{r['mcnemar_p']:.2g}",
             "verdict": "cannot be told apart from chance" if r["covers_zero"] else "differs from chance"}
            for r in chance.iter_rows(named=True)]
    schema = {"run": pl.String, "n": pl.Int64, "total": pl.Float64, "delta": pl.String, "mcnemar_p": pl.String,
              "verdict": pl.String}
    return pl.DataFrame(rows, schema=schema)


def chance_sentences(chance: pl.DataFrame) -> list[str]:
    """The words next to the main table: which runs are indistinguishable from ``random``, and what to run."""
    if chance.is_empty():
        return ["No `random` run in this run set, so no run is compared with chance (add `random` to `method`)."]
    baseline = chance["chance_run"][0]
    covering = chance.filter(pl.col("covers_zero"))
    if covering.is_empty():
        return [f"Every run's 95% paired interval against {baseline} (the same questions) excludes zero."]
    sentences = [f"{row['run']}: its 95% paired interval against {baseline} on the same {row['n']} questions, "
                 f"{row['ci_low_pp']:+.1f} to {row['ci_high_pp']:+.1f} points, covers zero; this run cannot be "
                 f"told apart from chance." for row in covering.iter_rows(named=True)]
    return sentences + [EVIDENCE_POINTER]


def chance_markdown(chance: pl.DataFrame, decimals: int) -> str:
    table = to_markdown(_chance_rows(chance), CHANCE_HEADERS, decimals) if chance.height else ""
    return table + "\n" + "\n".join(chance_sentences(chance)) + "\n"


def chance_html(chance: pl.DataFrame, decimals: int) -> str:
    table = table_html(_chance_rows(chance), CHANCE_HEADERS, decimals=decimals) if chance.height else ""
    def words(sentence: str) -> str:  # `code` as <code>, the rest escaped
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(sentence))

    return (table + '<div class="chance">' + "".join(f'<p class="note">{words(s)}</p>'
                                                     for s in chance_sentences(chance)) + "</div>")


#: The run-health table on the page, in parts of at most about ten columns each so that it fits the page width
#: (what went wrong, then what the method did);
#: the files under report/tables/ hold the whole table.
RUN_HEALTH_HTML_PARTS: tuple[tuple[str, ...], ...] = (
    ("questions", "correct", "accuracy", "parse_failures", "errors", "missing", "forced_answers",
     "forced_recovered", "timeouts", "context_trims", "truncated_captions"),
    ("failed_captions", "builder_losses", "capped_cells", "cell_s_requested", "cell_s_seen", "seen_share",
     "failed_memory_updates", "stripped_checks", "refused_checks", "repeated_queries", "failed_search_calls"),
    ("unparsed_tool_calls", "spent_steps", "rejected_tool_calls", "truncated_replies", "black_frames",
     "context_overflows", "defaulted_answers", "capped_llm_calls"),
    ("rounds_per_q", "searches_per_q", "memories_per_q", "qa_calls_per_q", "bypasses", "checks", "cells",
     "frames_seen", "tool_calls", "no_retrieval"),
)
assert sorted(c for part in RUN_HEALTH_HTML_PARTS for c in part) == sorted(RUN_HEALTH_COLUMNS)


#: Run-health columns always shown: what the counts are counted against.
RUN_HEALTH_TOTALS = ("questions", "correct", "accuracy")


def zero_in_every_run(table: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The ``columns`` that are 0 in every row of ``table`` (a table with no row has none: nothing to show)."""
    return [c for c in columns if table.height and table[c].is_not_null().all() and (table[c] == 0).all()]


def run_health_html(run_health: pl.DataFrame, decimals: int) -> str:
    """The run-health table on the page, read at a glance: a count that is 0 in every run collapses into one line
    under the table naming those counts; every other column stays, and the report's files keep all of them."""
    zero = set(zero_in_every_run(run_health, [c for part in RUN_HEALTH_HTML_PARTS for c in part
                                              if c not in RUN_HEALTH_TOTALS]))
    parts = [kept for part in RUN_HEALTH_HTML_PARTS if (kept := [c for c in part if c not in zero])]
    tables = "".join(table_html(run_health.select(*RUN_KEYS, *part), RUN_HEALTH_LABELS, decimals=decimals)
                     for part in parts)
    collapsed = [RUN_HEALTH_LABELS.get(c, c) for part in RUN_HEALTH_HTML_PARTS for c in part if c in zero]
    line = f'<p class="note">0 in every run: {html.escape("; ".join(collapsed))}.</p>' if collapsed else ""
    return tables + line + f'<p class="note">{html.escape(RUN_HEALTH_NOTE)}</p>'


#: The paired-statistics table on the page: one group per comparison (its label names both runs), the interval
#: as one cell; the seed and resample count are the same for every row and stated in the note. The Parquet,
#: CSV and Markdown files keep every column.
STATS_HEADERS = {"category": "Category", "n": "N", "baseline_correct": "Baseline correct",
                 "treatment_correct": "Treatment correct", "delta_pp": "Δ (points)", "ci": "95% CI",
                 "b_treatment_only": "Only treatment right", "c_baseline_only": "Only baseline right",
                 "mcnemar_p": "McNemar p"}


def stats_display(stats: pl.DataFrame, labels: Mapping[str, str]) -> pl.DataFrame:
    rows = [{"comparison": r["comparison"], "category": labels.get(r["category"], r["category"]),
             "n": r["n"], "baseline_correct": r["baseline_correct"], "treatment_correct": r["treatment_correct"],
             "delta_pp": r["delta_pp"], "ci": f"[{r['ci_low_pp']:+.1f}, {r['ci_high_pp']:+.1f}]",
             "b_treatment_only": r["b_treatment_only"], "c_baseline_only": r["c_baseline_only"],
             "mcnemar_p": f"{r['mcnemar_p']:.3g}"} for r in stats.iter_rows(named=True)]
    schema = {"comparison": pl.String, "category": pl.String, "n": pl.Int64, "baseline_correct": pl.Int64,
              "treatment_correct": pl.Int64, "delta_pp": pl.Float64, "ci": pl.String, "b_treatment_only": pl.Int64,
              "c_baseline_only": pl.Int64, "mcnemar_p": pl.String}
    return pl.DataFrame(rows, schema=schema)


#: What the model-call table counts.
LLM_CALLS_NOTE = ("Model calls per answered question, by role: agent calls are the calls the method's own model made "
                  "(repairs, summaries and forced answers included), captioner calls those of the memory's captioner "
                  "on this question (captions reused from the cache are no calls; a memory built before the "
                  "questions is not counted). Call cap: the method's max_llm_calls (– uncapped); questions that "
                  "reached it are counted in the run-health table. Rows marked (published) are the numbers VideoLucy's "
                  "appendix A.8 reports (mean LLM calls per question), shown when a VideoLucy run is in the run set.")


#: What the per-store table counts.
STORES_NOTE = ("One row per memory store (memory system and captioner × video) a run read: its failed captions, "
               "captions kept although cut at their token limit, and builder losses, each counted once however many "
               "questions and runs read it. The run-health table adds each store once per run that read it.")


#: A memory run is marked in the main table when more than this share of its answered questions retrieved
#: no memory item: its accuracy then says little about its memory.
NO_RETRIEVAL_SHARE = 0.5
NO_RETRIEVAL_MARK = " ‡"
RESTATED_MARK = " §"
DEVIATION_MARK = " ¶"


def restated_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs (method, model) of a release-trained model that ran on senri's restated prompts."""
    return runs.filter(pl.col("prompts") == "restated").select("method", "model", "prompt_family")


def mark_restated(table: pl.DataFrame, restated: pl.DataFrame) -> pl.DataFrame:
    """Append § to the method of each run in ``restated`` (:func:`restated_runs`)."""
    return mark_runs(table, restated, ["method", "model"], RESTATED_MARK)


def restated_sentences(restated: pl.DataFrame) -> list[str]:
    sentences = []
    for r in restated.iter_rows(named=True):
        release = RELEASES[r["prompt_family"]]
        sentences.append(
            f"{r['method']}/{r['model']} ran on senri's restatement of its release's prompts "
            f"(config/prompts/{r['prompt_family']}/), not the exact strings its model was trained on: "
            f"method.{r['method']}.prompts_from_release=<a checkout of {release.repository} @{release.commit}> "
            "runs those.")
    return sentences


def deviating_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs (method, model) that set an option departing from their method's release
    (:data:`senri.methods.DEVIATIONS`)."""
    return runs.filter(pl.col("deviations").fill_null("") != "").select("method", "model", "deviations")


def deviation_sentences(runs: pl.DataFrame) -> list[str]:
    return [f"{r['method']}/{r['model']} departs from its release by option: {r['deviations']}."
            for r in runs.iter_rows(named=True)]


def no_retrieval_runs(run_health: pl.DataFrame) -> pl.DataFrame:
    """The memory runs (memory other than ``none``) that answered most of their questions without retrieving
    anything: run keys, questions and the count."""
    return run_health.filter((pl.col("memory") != "none")
                             & (pl.col("no_retrieval") > NO_RETRIEVAL_SHARE * pl.col("questions"))
                             ).select(*RUN_KEYS, "questions", "no_retrieval")


def mark_no_retrieval(table: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Append ‡ to the method of each run in ``runs`` (:func:`no_retrieval_runs`)."""
    return mark_runs(table, runs, list(RUN_KEYS), NO_RETRIEVAL_MARK)


def mark_runs(table: pl.DataFrame, runs: pl.DataFrame, keys: list[str], mark: str) -> pl.DataFrame:
    """Append ``mark`` to the method of each row of ``table`` whose ``keys`` match a row of ``runs``."""
    if runs.is_empty():
        return table
    marked = runs.select(*keys).with_columns(pl.lit(True).alias("_marked"))
    return (table.join(marked, on=keys, how="left", maintain_order="left")
            .with_columns(pl.when(pl.col("_marked")).then(pl.col("method") + mark)
                          .otherwise(pl.col("method")).alias("method")).drop("_marked"))


def no_retrieval_sentences(runs: pl.DataFrame) -> list[str]:
    return [f"{r['method']}/{r['model']} ({r['memory']}) answered {r['no_retrieval']} of its {r['questions']} "
            "questions without retrieving any memory item: its accuracy says little about its memory."
            for r in runs.iter_rows(named=True)]


def no_retrieval_html(runs: pl.DataFrame, browser: str, labels: Mapping[tuple[str, str, str], str]) -> str:
    """The ‡ sentences under the main table, each linking to the run's questions without retrieval in the
    question browser (``labels``: :func:`senri.report.browser.run_labels`)."""
    if runs.is_empty():
        return ""
    lines = "".join(
        f'<p class="note no-retrieval">‡ {html.escape(sentence)} <a href="{browser}index.html?run='
        f'{html.escape(labels[(r["method"], r["model"], r["memory"])], quote=True)}&amp;flag=no-retrieval">'
        "Those questions</a>.</p>"
        for sentence, r in zip(no_retrieval_sentences(runs), runs.iter_rows(named=True)))
    return f'<div class="no-retrieval">{lines}</div>'


def build_report(prediction_paths: Sequence[str | Path], questions: pl.DataFrame, out: str | Path,
                 config: Mapping[str, Any], seed: int, decimals: int = 1,
                 needles: pl.DataFrame | None = None, videos: pl.DataFrame | None = None,
                 richness: pl.DataFrame | None = None, ingest_report: pl.DataFrame | None = None) -> Path:
    """``needles``: the needle stage's per-question table (dataset=needle), for the needle figure; ``videos``:
    the videos table, whose files give the question browser its thumbnails and time strips their length;
    ``richness``: the richness analysis's curves (VideoLucy Fig. 5); ``ingest_report``: ingest's report (the
    left-out questions and flags), for the coverage block and the subset mark (:mod:`senri.report.coverage`)."""
    out = Path(out)
    tables_dir, figures_dir = out / "report" / "tables", out / "report" / "figures"
    tables_dir.mkdir(parents=True, exist_ok=True)
    predictions = load_predictions(prediction_paths)
    scored = score(predictions, questions)
    benchmark = run_set_benchmark(questions)
    layout = benchmark.layout
    headers = {**column_labels(layout), **HEADERS}
    build_browser(scored, predictions, questions, videos, out / "report" / "questions", report_href="../index.html",
                  glossary=benchmark.glossary)
    scored = layout_scored(scored, questions, predictions, layout)
    main = main_table(scored, decimals, layout)
    run_health = run_health_table(predictions, scored, decimals)
    stores = store_health_table(predictions)
    per_video = per_video_table(scored, decimals)
    positions = answer_positions(scored, questions)
    runs = run_metadata(prediction_paths)
    calls = llm_call_table(predictions, runs, decimals)
    if runs.filter(pl.col("implementation") == "videolucy").height:
        calls = with_a8_rows(calls)
    report: ReportTables = build_tables(scored, main, runs, config, seed, decimals, layout,
                                        expected_chance(questions, layout, decimals))
    # A benchmark read from its native files gets its own table (official scorer, published rows), every scorer
    # side by side, the flips between them and its breakdowns; the tables below have its layout's columns.
    benchmarks = native_benchmarks(questions)
    bench_tables = [benchmark_tables(predictions, questions.filter(pl.col("benchmark") == b), BENCHMARKS.load(b),
                                     config, seed, decimals) for b in benchmarks]
    ingest_report = ingest_report if ingest_report is not None else to_frame([], IngestQuirk)
    cover = question_coverage(questions, ingest_report)
    bench_tables = [mark_subset(tables, cover) for tables in bench_tables]  # ◊ beside the published rows
    for tables in bench_tables:
        write_benchmark_tables(tables, tables_dir, decimals)

    flagged_pairs = mark_failures(report.pairs, "label")
    flagged_ablations = mark_failures(report.ablations, "variant")
    flagged_no_visual = mark_failures(report.no_visual, "setting")
    no_retrieval = no_retrieval_runs(run_health)
    restated = restated_runs(runs)
    deviating = deviating_runs(runs)
    shown_main = mark_failures(mark_runs(mark_restated(mark_no_retrieval(report.main, no_retrieval), restated),
                                         deviating, ["method", "model"], DEVIATION_MARK))
    note = main_note(benchmark)
    _write_table(report.main, tables_dir, "main",
                 _markdown_grouped(shown_main, "approach", decimals, headers)
                 + (f"\n{note}\n" if note else "")
                 + "".join(f"\n‡ {sentence}\n" for sentence in no_retrieval_sentences(no_retrieval))
                 + "".join(f"\n§ {sentence}\n" for sentence in restated_sentences(restated))
                 + "".join(f"\n¶ {sentence}\n" for sentence in deviation_sentences(deviating)))
    beside_paper, beside_notes = published_beside_main(report.main, layout, benchmark.name, config, questions.height,
                                                       cover)
    if beside_paper is None:
        report.skipped.extend(beside_notes)  # a published table named for a run set of another benchmark
    else:
        _write_table(beside_paper, tables_dir, "main_beside_paper",
                     _markdown_grouped(beside_paper, "approach", decimals, {**headers, "source": "Source"})
                     + "".join(f"\n{sentence}\n" for sentence in beside_notes))
    _write_table(report.pairs, tables_dir, "pairs", to_markdown(flagged_pairs, headers, decimals))
    _write_table(report.ablations, tables_dir, "ablations", to_markdown(flagged_ablations, headers, decimals))
    _write_table(report.no_visual, tables_dir, "no_visual_input", to_markdown(flagged_no_visual, headers, decimals))
    _write_table(report.stats, tables_dir, "paired_stats", to_markdown(report.stats, decimals=decimals))
    _write_table(run_health, tables_dir, "run_health",
                 to_markdown(run_health, RUN_HEALTH_LABELS, decimals) + "\n" + RUN_HEALTH_NOTE + "\n")
    _write_table(report.chance, tables_dir, "chance", chance_markdown(report.chance, decimals))
    _write_table(calls, tables_dir, "llm_calls",
                 to_markdown(calls, {**LLM_CALL_LABELS, "source": "Source"}, decimals) + "\n" + LLM_CALLS_NOTE + "\n")
    _write_table(stores, tables_dir, "stores", to_markdown(stores, STORE_HEALTH_LABELS, decimals) + "\n" + STORES_NOTE + "\n")

    pair_specs = [(p.get("group") or f"{p['baseline']} → {p['treatment']}", p["baseline"], p["treatment"])
                  for p in config.get("pairs") or []]
    pair_specs += [(f"{a['reference']} → {label}", a["reference"], run)
                   for a in config.get("ablations") or [] for label, run in ablation_variants(a)]
    pngs = {
        "frame_budget": figures.frame_budget_curve(main, runs, figures_dir),
        "paired_change": figures.paired_change_heatmap(per_video, pair_specs, figures_dir),
        "task_types": figures.task_type_bars(main, figures_dir, layout),
        "letters": figures.letter_distribution(positions, figures_dir),
    }

    needle_table = figures.needle_accuracy(scored, needles) if needles is not None else pl.DataFrame()
    if needle_table.height:
        _write_table(needle_table, tables_dir, "needle", to_markdown(needle_table, decimals=decimals))
    pngs["needle"] = figures.needle_curves(needle_table, figures_dir)
    # VideoLucy Table 13 (captioner × reasoning model, beside the published numbers) and Fig. 5 (richness)
    grid = model_grid_table(main, config["model_grid"]) if config.get("model_grid") else None
    if grid is not None:
        _write_table(grid, tables_dir, "model_grid", model_grid_markdown(grid))
    richness = richness if richness is not None else pl.DataFrame()
    if richness.height:
        _write_table(richness, tables_dir, "richness", to_markdown(richness, decimals=decimals))
    pngs["richness"] = figures.richness_relevance_curves(richness, figures_dir)

    resamples = int(config["bootstrap_resamples"])
    stats_note = (f"Δ = treatment − baseline in points, from the displayed accuracies; 95% paired bootstrap CI "
                  f"({resamples:,} resamples of questions within videos, seed {seed}); exact McNemar p on the "
                  f"discordant questions.")
    pairs = report.stats.select("baseline", "treatment").unique(maintain_order=True).rows()

    def sections(base: str) -> list[tuple[str, str]]:
        """The page's sections, its links relative to ``base`` (the folder of ``questions/``)."""
        discordant = "".join(discordant_html(scored, a, t, f"{base}questions/") for a, t in pairs)
        bench_sections = [section for tables in bench_tables
                          for section in benchmark_html(tables, f"{base}questions/", decimals)]
        return [
        ("Questions covered", coverage_html(questions, ingest_report)),
        ("Questions", f'<p><a href="{base}questions/index.html">Question browser</a>: every run\'s answer to every '
                      "question, with its trace, the model calls and a time strip of where the method looked; "
                      f'<a href="{base}questions/grid.html">the question × run grid</a>: which runs got which '
                      "question right.</p>"),
        *bench_sections,
        ("Main results (Table 2 layout)", table_html(shown_main.with_columns(
            pl.col("approach").replace(APPROACH_LABELS)), headers, group_by="approach", decimals=decimals)
         + (f'<p class="note">{html.escape(note)}</p>' if note else "")
         + no_retrieval_html(no_retrieval, f"{base}questions/", run_labels(scored))
         + "".join(f'<p class="note restated">§ {html.escape(s)}</p>' for s in restated_sentences(restated))
         + "".join(f'<p class="note deviation">¶ {html.escape(s)}</p>' for s in deviation_sentences(deviating))
         + chance_html(report.chance, decimals)),
        *([("Main results beside the paper's Table 2", table_html(beside_paper.with_columns(
            pl.col("approach").replace(APPROACH_LABELS)), {**headers, "source": "Source"}, group_by="approach",
            decimals=decimals) + "".join(f'<p class="note">{html.escape(s)}</p>' for s in beside_notes))]
          if beside_paper is not None else []),
        ("Run health", run_health_html(run_health, decimals)
         + "<h3>Memory stores</h3>" + (table_html(stores, STORE_HEALTH_LABELS, decimals=decimals) if stores.height
                                       else '<p class="note">No run of this run set read a memory store.</p>')
         + f'<p class="note">{html.escape(STORES_NOTE)}</p>'),
        ("Model calls per question (VideoLucy A.8 layout)",
         table_html(calls, {**LLM_CALL_LABELS, "source": "Source"}, decimals=decimals)
         + f'<p class="note">{html.escape(LLM_CALLS_NOTE)}</p>'),
        ("Paired comparisons (Table 3 layout)", table_html(flagged_pairs, headers, group_by="group", decimals=decimals)
         + f'<p class="note">{html.escape(stats_note)}</p>'
         + (f"<p>Discordant questions (won: the treatment right and the baseline wrong; lost: the reverse):</p>"
            f"{discordant}" if discordant else "")),
        ("Ablations (Table 4 layout)", table_html(flagged_ablations, headers, group_by="reference", decimals=decimals)
         if report.ablations.height else '<p class="note">No ablation is configured for the runs of this run set.</p>'),
        ("No visual input (Table 11 layout)", table_html(flagged_no_visual, headers, decimals=decimals)),
        ("Accuracy vs frame budget (Fig. 5 layout)", figure_html(
            pngs["frame_budget"], "Direct perception accuracy vs frame budget",
            "this run set has no direct-perception runs at two or more frame budgets "
            "(e.g. method=[direct] method.direct.frames=[32,128,512] with a vision-language model)")),
        ("Per-video paired change (Fig. 6 layout)", figure_html(
            pngs["paired_change"], "Accuracy change per video (points; blue better, red worse)",
            "no configured pair has both runs in this run set")),
        ("Needle in a video haystack (VideoLucy Fig. 4 layout)", figure_html(
            pngs["needle"], "Needle accuracy vs haystack length and needle position",
            "this run set is not a needle benchmark (dataset=needle)")
         + (table_html(needle_table, headers, decimals=decimals) if needle_table.height else "")),
        *([("Captioner × reasoning model (VideoLucy Table 13 layout)",
            table_html(model_grid_display(grid)) + '<p class="note">Each cell: our accuracy (%), then the paper\'s '
            "published number (VideoLucy Table 13, 200 random LVBench questions).</p>")] if grid is not None else []),
        ("Information richness and relevance per memory level (VideoLucy Fig. 5 layout)", figure_html(
            pngs["richness"], "Shannon entropy and relevance of the memory texts per level",
            "the richness analysis is not in this run set (analysis.richness.evaluator=<model> with a VideoLucy run)")
         + (table_html(richness, decimals=decimals) if richness.height else "")),
        *([(layout.figure.title, figure_html(pngs["task_types"], layout.figure.title, "no runs"))]
          if layout.figure else []),
        ("Answer letters", figure_html(pngs["letters"], "Predicted letters vs ground truth", "no runs")
         + table_html(positions, headers)),
        ("Per video", table_html(mark_failures(per_video), headers, decimals=decimals)),
        ("Paired statistics", table_html(stats_display(report.stats, column_labels(layout)), STATS_HEADERS, group_by="comparison",
                                         decimals=decimals) + f'<p class="note">{html.escape(stats_note)}</p>'),
        ] + ([("Not shown", "<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in report.skipped) + "</ul>")]
             if report.skipped else [])

    footer = html.escape(f"{FAILURE_NOTE} Failure columns: {', '.join(FAILURE_LABELS[c] for c in FAILURE_COLUMNS)} "
                         f"(timeouts are counted among errors too).")
    # The page twice: report/index.html beside the browser (copying report/ keeps every link) and report.html,
    # the one a run has always named, with its links into report/.
    for path, base in ((out / "report" / "index.html", ""), (out / "report.html", "report/")):
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(page("senri report", sections(base), footer))
        tmp.replace(path)
    report_path = out / "report.html"
    log.info("report: %d run(s), %d comparison(s), %d skipped; wrote %s", main.height,
             report.stats["comparison"].n_unique() if report.stats.height else 0, len(report.skipped), report_path)
    return report_path


__all__ = ["build_report", "chance_sentences", "run_metadata"]
