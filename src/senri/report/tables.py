"""The papers' table layouts, computed from scored predictions, with paired statistics beside every delta.

- ``main``: one row per method × model grouped by approach (Table 2);
- ``pairs``: baseline and treatment rows per configured pair, then a Δ row (Table 3);
- ``ablations``: a reference run and its variants, each with its Δ to the reference (Table 4);
- ``no_visual``: expected random guessing and the configured settings (Table 11);
- ``stats``: the long table behind every Δ: category, n, Δ, bootstrap CI, discordant counts, McNemar p;
- ``chance``: every run's Total paired with the ``random`` run, and whether that interval covers zero.

Every table's accuracy columns are the main table's: the layout the run set's benchmark declares
(:class:`senri.benchmarks.layouts.Layout`), its questions counted per column and judged by the layout's main
scorer (``verdict``: :func:`senri.aggregate.layout_scored`).

Runs are named ``method/model`` or, where one method and model ran over two memories,
``method/model/memory`` (the memory system and its captioner, ``captions/perception``, a column of every
table). A configured pair or setting whose
runs are not in this run set is skipped and listed in ``skipped`` — the report says what it could not show
rather than showing something else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import polars as pl

from senri.aggregate import FAILURE_COLUMNS, RUN_KEYS
from senri.benchmarks.layouts import Column, Layout
from senri.percent import percent_value, round_half_up
from senri.stats import PairedComparison, compare

APPROACH_ORDER = ("baseline", "direct_perception", "evidence_seeking", "persistent_memory")
APPROACH_LABELS = {"baseline": "Baselines", "direct_perception": "Direct Perception",
                   "evidence_seeking": "Evidence Seeking", "persistent_memory": "Persistent Memory"}


def run_name(method: str, model: str, memory: str | None = None) -> str:
    return f"{method}/{model}" if memory is None else f"{method}/{model}/{memory}"


def run_filter(run: str) -> pl.Expr:
    """Rows of a run named ``method/model`` or ``method/model/memory``."""
    method, model, *memory = run.split("/", 2)
    expr = (pl.col("method") == method) & (pl.col("model") == model)
    return expr & (pl.col("memory") == memory[0]) if memory else expr


def every_question(layout: Layout) -> Column:
    """The layout's column over every question, or one made for it where the layout has none (a macro headline):
    what the chance table pairs."""
    return next((c for c in layout.columns if c.over == "all"), Column("all", "All", "all"))


def expected_chance(questions: pl.DataFrame, layout: Layout, decimals: int = 1) -> dict[str, float | None]:
    """Per column, the accuracy expected of uniform guessing: the mean over its questions of 1 / their number of
    options (25.0 on four-option questions), a macro column the mean of its members'."""
    from fractions import Fraction

    from senri.aggregate import plain_categories
    from senri.benchmarks.scoring import question_options

    rows = [(q.get("split"), plain_categories(q.get("categories"), q["task_type"]), len(question_options(q)))
            for q in questions.iter_rows(named=True)]
    exact: dict[str, Fraction | None] = {}
    for column in layout.columns:
        if column.over == "macro":
            continue
        shares = [Fraction(100, n) for split, categories, n in rows if n and column.counts(split, categories)]
        exact[column.key] = sum(shares, Fraction(0)) / len(shares) if shares else None
    for column in layout.columns:
        if column.over == "macro":
            parts = [exact[m] for m in column.members if exact.get(m) is not None]
            exact[column.key] = sum(parts, Fraction(0)) / len(parts) if parts else None
    return {key: None if value is None else round_half_up(value, decimals) for key, value in exact.items()}


#: The long table behind every Δ: one row per comparison × category (the SENRI categories or a benchmark
#: layout's columns), with :class:`senri.stats.PairedComparison`'s fields.
STATS_SCHEMA = {"comparison": pl.String, "baseline": pl.String, "treatment": pl.String, "category": pl.String,
                **{k: (pl.Float64 if k in ("delta_pp", "ci_low_pp", "ci_high_pp", "mcnemar_p") else pl.Int64)
                   for k in PairedComparison.__dataclass_fields__}}


@dataclass
class ReportTables:
    main: pl.DataFrame
    pairs: pl.DataFrame
    ablations: pl.DataFrame
    no_visual: pl.DataFrame
    stats: pl.DataFrame
    chance: pl.DataFrame
    skipped: list[str] = field(default_factory=list)


def main_by_approach(main: pl.DataFrame, runs: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Table 2: the aggregate's main table with each run's approach, ordered by approach then name."""
    order = {a: i for i, a in enumerate(APPROACH_ORDER)}
    table = main.join(runs.select("method", "model", "approach"), on=["method", "model"], how="left").with_columns(
        pl.col("approach").fill_null("baseline"))
    return (table.with_columns(_order=pl.col("approach").replace_strict(order, default=len(order)))
            .sort("_order", *RUN_KEYS).drop("_order")
            .select("approach", *RUN_KEYS, "n", *keys, *FAILURE_COLUMNS))


def paired_stats(scored: pl.DataFrame, baseline: str, treatment: str, label: str, resamples: int,
                 confidence: float, seed: int, decimals: int, columns: Sequence[Column]) -> list[dict[str, Any]]:
    """Per column (macro columns aside), the paired comparison of two runs over the questions both were asked and
    both had counted (a skipped verdict leaves the question out, as it leaves it out of the accuracy)."""
    def outcomes(run: str) -> pl.DataFrame:
        return scored.filter(run_filter(run))

    base = outcomes(baseline).select("qid", "video_id", "split", "categories", pl.col("verdict").alias("a"))
    both = base.join(outcomes(treatment).select("qid", pl.col("verdict").alias("t")), on="qid", how="inner").filter(
        (pl.col("a") != "skipped") & (pl.col("t") != "skipped"))
    questions = list(both.iter_rows(named=True))
    rows = []
    for column in columns:
        if column.over == "macro":
            continue
        part = [q for q in questions if column.counts(q["split"], q["categories"])]
        if not part:
            continue
        result: PairedComparison = compare([q["a"] == "correct" for q in part], [q["t"] == "correct" for q in part],
                                           [q["video_id"] for q in part], resamples=resamples, confidence=confidence,
                                           seed=seed, decimals=decimals)
        rows.append({"comparison": label, "baseline": baseline, "treatment": treatment, "category": column.key,
                     **asdict(result)})
    return rows


def _run_row(main: pl.DataFrame, run: str) -> dict[str, Any] | None:
    """The run's main-table row; None when absent or when the name fits runs over two memories."""
    found = main.filter(run_filter(run))
    return None if found.height != 1 else found.row(0, named=True)


def _delta_row(stats: Sequence[Mapping[str, Any]], label: str) -> dict[str, Any]:
    """The Δ row of a pair: per category "Δ [low, high] p" as text."""
    row: dict[str, Any] = {"label": label}
    for s in stats:
        row[s["category"]] = (f"{s['delta_pp']:+.1f} [{s['ci_low_pp']:+.1f}, {s['ci_high_pp']:+.1f}] "
                              f"p={s['mcnemar_p']:.2g}")
    return row


def ablation_variants(ablation: Mapping[str, Any]) -> list[tuple[str, str]]:
    """An ablation's (label, run) pairs in display order. ``variants`` is a list of ``{label, run}`` (shown in
    list order: a paper's row order) or a mapping label → run, which reaches the report through the stage's
    canonical-JSON config slice and so is shown by label."""
    variants = ablation.get("variants") or {}
    if isinstance(variants, Mapping):
        return [(str(label), str(run)) for label, run in variants.items()]
    return [(str(v["label"]), str(v["run"])) for v in variants]


def build_tables(scored: pl.DataFrame, main: pl.DataFrame, runs: pl.DataFrame, config: Mapping[str, Any],
                 seed: int, decimals: int = 1, layout: Layout | None = None,
                 chance: Mapping[str, float | None] | None = None) -> ReportTables:
    """Every table of the report's layout family from ``scored`` (:func:`senri.aggregate.layout_scored`) and the
    main table; ``layout``: the run set's (SENRI-Bench's by default); ``chance``: each column's expected accuracy
    of uniform guessing (:func:`expected_chance`; 25.0 everywhere by default, four options)."""
    if layout is None:
        from senri.benchmarks import BENCHMARKS

        layout = BENCHMARKS.load("senri").layout
    keys = layout.keys
    chance = chance if chance is not None else {key: 25.0 for key in keys}
    resamples, confidence = int(config["bootstrap_resamples"]), float(config["confidence"])
    skipped: list[str] = []
    stats_rows: list[dict[str, Any]] = []

    def present(*names: str) -> bool:
        ambiguous = [n for n in names if main.filter(run_filter(n)).height > 1]
        if ambiguous:
            skipped.append(f"{', '.join(ambiguous)}: ran over more than one memory; name it method/model/memory")
        return all(_run_row(main, n) is not None for n in names)

    def shown(run: str) -> dict[str, Any]:
        row = _run_row(main, run)
        assert row is not None
        return {"memory": row["memory"], **{c: row[c] for c in (*keys, *FAILURE_COLUMNS)}}

    pair_rows: list[dict[str, Any]] = []
    for pair in config.get("pairs") or []:
        base, treat, group = pair["baseline"], pair["treatment"], pair.get("group", "")
        if not present(base, treat):
            skipped.append(f"pair {group or base + ' → ' + treat}: run(s) not in this run set")
            continue
        label = f"{group}: {base} → {treat}" if group else f"{base} → {treat}"
        stats = paired_stats(scored, base, treat, label, resamples, confidence, seed, decimals, layout.columns)
        stats_rows += stats
        pair_rows.append({"group": group, "run": base, "label": pair.get("baseline_label", "Original"),
                          **shown(base)})
        pair_rows.append({"group": group, "run": treat, "label": pair.get("treatment_label", treat.split("/")[0]),
                          **shown(treat)})
        pair_rows.append({"group": group, "run": "", "memory": "", **_delta_row(stats, "Δ [95% CI] McNemar p")})

    ablation_rows: list[dict[str, Any]] = []
    for ablation in config.get("ablations") or []:
        reference, variants = ablation["reference"], ablation_variants(ablation)
        if not present(reference):
            skipped.append(f"ablations of {reference}: reference run not in this run set")
            continue
        ablation_rows.append({"reference": reference, "variant": ablation.get("label", reference), "run": reference,
                              **shown(reference)})
        for variant_label, run in variants:
            if not present(run):
                skipped.append(f"ablation {variant_label!r} ({run}): run not in this run set")
                continue
            stats = paired_stats(scored, reference, run, f"{reference} → {variant_label}", resamples, confidence,
                                 seed, decimals, layout.columns)
            stats_rows += stats
            ablation_rows.append({"reference": reference, "variant": variant_label, "run": run, **shown(run)})
            delta = _delta_row(stats, "")
            delta.pop("label")
            ablation_rows.append({"reference": reference, "run": "", "memory": "",
                                  "variant": "Δ vs reference [95% CI] McNemar p", **delta})

    no_visual_rows: list[dict[str, Any]] = [{"setting": "Random guessing (expected)", "run": "", "memory": "none",
                                             **{c: chance.get(c) for c in keys}}]
    for setting in config.get("no_visual_input") or []:
        if not present(setting["run"]):
            skipped.append(f"setting {setting['label']!r} ({setting['run']}): run not in this run set")
            continue
        no_visual_rows.append({"setting": setting["label"], "run": setting["run"], **shown(setting["run"])})

    return ReportTables(
        main=main_by_approach(main, runs, keys),
        chance=chance_table(scored, main, resamples, confidence, seed, decimals, layout),
        pairs=_frame(pair_rows, ["group", "run", "memory", "label"], keys),
        ablations=_frame(ablation_rows, ["reference", "variant", "run", "memory"], keys),
        no_visual=_frame(no_visual_rows, ["setting", "run", "memory"], keys),
        stats=pl.DataFrame(stats_rows, schema=STATS_SCHEMA),
        skipped=skipped,
    )


#: The method whose run is chance: seeded uniform guessing (method ``random``, model ``none``).
CHANCE_METHOD = "random"
CHANCE_SCHEMA = {"run": pl.String, "chance_run": pl.String, "n": pl.Int64, "correct": pl.Int64,
                 "total": pl.Float64, "delta_pp": pl.Float64, "ci_low_pp": pl.Float64, "ci_high_pp": pl.Float64,
                 "mcnemar_p": pl.Float64, "covers_zero": pl.Boolean}


def chance_table(scored: pl.DataFrame, main: pl.DataFrame, resamples: int, confidence: float, seed: int,
                 decimals: int = 1, layout: Layout | None = None) -> pl.DataFrame:
    """Per run, its accuracy over every question (the layout's all-questions column; ``total``) paired with the
    ``random`` run over the same questions (issue 28).

    ``covers_zero`` is true when the paired bootstrap interval of Δ = run − random contains 0: on these
    questions the run cannot be told apart from guessing, whatever its accuracy reads. Empty when the run set
    has no ``random`` run (the report then says so).
    """
    chance_runs = main.filter(pl.col("method") == CHANCE_METHOD).sort(RUN_KEYS)
    if chance_runs.is_empty():
        return pl.DataFrame(schema=CHANCE_SCHEMA)
    def name(run: Mapping[str, Any]) -> str:
        """``method/model``, with ``/memory`` only where that method and model ran over two memories."""
        short = run_name(run["method"], run["model"])
        return short if main.filter(run_filter(short)).height == 1 else run_name(run["method"], run["model"],
                                                                                  run["memory"])

    chance = name(chance_runs.row(0, named=True))
    if layout is None:
        from senri.benchmarks import BENCHMARKS

        layout = BENCHMARKS.load("senri").layout
    everything = every_question(layout)
    rows = []
    for run in main.filter(pl.col("method") != CHANCE_METHOD).sort(RUN_KEYS).iter_rows(named=True):
        run_label = name(run)
        (total,) = paired_stats(scored, chance, run_label, f"{chance} → {run_label}", resamples, confidence, seed,
                                decimals, (everything,))
        accuracy = run[everything.key] if everything.key in run else percent_value(total["treatment_correct"],
                                                                                   total["n"], decimals)
        rows.append({"run": run_label, "chance_run": chance, "n": total["n"], "correct": total["treatment_correct"],
                     "total": accuracy, "delta_pp": total["delta_pp"], "ci_low_pp": total["ci_low_pp"],
                     "ci_high_pp": total["ci_high_pp"], "mcnemar_p": total["mcnemar_p"],
                     "covers_zero": total["ci_low_pp"] <= 0.0 <= total["ci_high_pp"]})
    return pl.DataFrame(rows, schema=CHANCE_SCHEMA)


def _frame(rows: list[dict[str, Any]], keys: list[str], categories: Sequence[str]) -> pl.DataFrame:
    """Rows mixing numeric runs and text Δ rows: every category cell as text, failures as integers."""
    columns = [*keys, *categories, *FAILURE_COLUMNS]
    def text(value: Any) -> str | None:
        if value is None:
            return None
        return f"{value:.1f}" if isinstance(value, float) else str(value)
    data = {c: [text(r.get(c)) if c in categories or c in keys else r.get(c) for r in rows] for c in columns}
    schema = {c: (pl.Int64 if c in FAILURE_COLUMNS else pl.String) for c in columns}
    return pl.DataFrame(data, schema=schema)
