"""A benchmark's tables from the prediction files: every reply scored by every scorer of its layout, the
benchmark's own table under its official scorer with the published rows beside it, the scorer-variant table,
the flips between scorers and the per-column paired statistics.

The benchmark, its official scorer and its layout come from the registries (:data:`senri.benchmarks.BENCHMARKS`,
:data:`~senri.benchmarks.layouts.LAYOUTS`, :data:`~senri.benchmarks.scoring.SCORERS`) through the questions'
``benchmark`` column; nothing here names one.

- ``verdicts``: one row per run × question × scorer: the letter the scorer read and its verdict
  (correct / wrong / skipped); questions without a prediction are there too (``missing``), judged by the
  scorer's rule for absent questions.
- ``benchmark``: one row per run under the official scorer, the layout's columns with ``correct_<col>`` and
  ``n_<col>`` behind each, then the published rows (``source`` = ``published``).
- ``scorers``: one row per run × scorer: the headline under that scorer, the micro accuracy over all counted
  questions, correct / counted / skipped / unreadable, and how many questions it flips against the official one.
- ``flips``: one row per run × question × scorer whose verdict differs from the official scorer's.
- ``stats``: every run against the ``random`` run (chance), then per configured pair, per layout column, :func:`senri.stats.compare` on the questions both runs had
  counted under the official scorer (the same long schema as the SENRI report's paired statistics).
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from senri.aggregate import RUN_KEYS, score
from senri.benchmarks.layouts import Layout, column_counts, column_value, layout as load_layout, micro_value
from senri.benchmarks.scoring import OPTION_COLUMNS, Scorer, question_options, scored_reply, scorer as load_scorer
from senri.report.coverage import source_label, subset_notes
from senri.report.tables import CHANCE_METHOD, STATS_SCHEMA, run_filter
from senri.stats import PairedComparison, compare

#: VideoLucy's published rows, copied from the paper's tables (tests check them against tests/reference/).
PUBLISHED_DIR = Path(__file__).resolve().parent / "published"
#: How long a reply is shown in the flips table (the question browser has it whole).
REPLY_CHARS = 120


@dataclass
class BenchmarkTables:
    benchmark: str
    layout: Layout
    official: str
    verdicts: pl.DataFrame
    table: pl.DataFrame
    published: pl.DataFrame
    scorers: pl.DataFrame
    flips: pl.DataFrame
    stats: pl.DataFrame


def verdicts(predictions: pl.DataFrame, questions: pl.DataFrame, scorer_names: tuple[str, ...]) -> pl.DataFrame:
    """Every run's every question under every scorer in ``scorer_names`` (see the module docstring)."""
    grid = score(predictions, questions)  # the same checks and run × question grid as the SENRI tables
    extra = [c for c in ("split", "categories", *OPTION_COLUMNS) if c in questions.columns]
    rows = grid.join(questions.select("qid", *extra), on="qid", how="left").join(
        predictions.select(*RUN_KEYS, "qid", "raw_output"), on=[*RUN_KEYS, "qid"], how="left")
    scorers: list[Scorer] = [load_scorer(name) for name in scorer_names]
    out: dict[str, list[Any]] = {k: [] for k in (*RUN_KEYS, "video_id", "qid", "split", "categories", "answer",
                                               "pred", "reply", "missing", "scorer", "letter", "verdict")}
    for row in rows.iter_rows(named=True):
        options = question_options(row)
        categories = row.get("categories") or [row["task_type"]]
        reply = scored_reply(row["raw_output"])
        for s in scorers:
            letter = s.extract(row["pred"] if s.reads == "pred" else reply, options) if not row["missing"] else None
            verdict = s.verdict(letter, row["answer"], options, present=not row["missing"])
            for key, value in (*((k, row[k]) for k in RUN_KEYS), ("video_id", row["video_id"]), ("qid", row["qid"]),
                               ("split", row.get("split")), ("categories", list(categories)),
                               ("answer", row["answer"]), ("pred", row["pred"]), ("reply", reply),
                               ("missing", row["missing"]), ("scorer", s.name), ("letter", letter),
                               ("verdict", verdict)):
                out[key].append(value)
    schema = {**{k: pl.String for k in RUN_KEYS}, "video_id": pl.String, "qid": pl.String, "split": pl.String,
              "categories": pl.List(pl.String), "answer": pl.String, "pred": pl.String, "reply": pl.String,
              "missing": pl.Boolean, "scorer": pl.String, "letter": pl.String, "verdict": pl.String}
    return pl.DataFrame(out, schema=schema)


def _run_counts(part: pl.DataFrame, table: Layout) -> dict[str, tuple[int, int]]:
    return column_counts(table, zip(part["split"].to_list(), part["categories"].to_list(), part["verdict"].to_list()))


def layout_table(scored: pl.DataFrame, table: Layout, scorer_name: str, decimals: int = 1) -> pl.DataFrame:
    """One row per run under ``scorer_name``: the layout's columns, then ``correct_<col>`` and ``n_<col>`` for
    each, the skipped replies and the missing predictions."""
    rows = []
    for run, part in scored.filter(pl.col("scorer") == scorer_name).group_by(RUN_KEYS, maintain_order=True):
        counts = _run_counts(part, table)
        row: dict[str, Any] = dict(zip(RUN_KEYS, run))
        row["scorer"] = scorer_name
        row.update({key: column_value(table, counts, key, decimals) for key in table.keys})
        for key in table.keys:
            row[f"correct_{key}"], row[f"n_{key}"] = counts[key]
        row["skipped"] = int((part["verdict"] == "skipped").sum())
        row["missing"] = int(part["missing"].sum())
        rows.append(row)
    schema = {**{k: pl.String for k in RUN_KEYS}, "scorer": pl.String, **{k: pl.Float64 for k in table.keys},
              **{f"{kind}_{k}": pl.Int64 for k in table.keys for kind in ("correct", "n")},
              "skipped": pl.Int64, "missing": pl.Int64}
    return pl.DataFrame(rows, schema=schema).sort(RUN_KEYS)


def published_rows(table: Layout) -> pl.DataFrame:
    """The layout's published rows (``source`` = published), their paper headers matched to the column labels;
    a column the paper does not print (MLVU's per-task accuracies) is empty."""
    schema = {"source": pl.String, "group": pl.String, "method": pl.String, "cite": pl.String,
              **{k: pl.Float64 for k in table.keys}}
    if table.published is None:
        return pl.DataFrame(schema=schema)
    by_label = {c.label: c.key for c in table.columns}
    path = PUBLISHED_DIR / table.published
    rows = []
    with path.open(newline="", encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            row: dict[str, Any] = {"source": "published", "group": record["Group"], "method": record["Method"],
                                   "cite": record["Cite"], **{k: None for k in table.keys}}
            for header, value in record.items():
                if header in by_label:
                    row[by_label[header]] = float(value) if value.strip() else None
                elif header not in ("Group", "Method", "Cite"):
                    raise ValueError(f"{path}: column {header!r} is not in layout {table.name!r}")
            rows.append(row)
    return pl.DataFrame(rows, schema=schema)


def scorer_table(scored: pl.DataFrame, table: Layout, official: str, decimals: int = 1) -> pl.DataFrame:
    """Every scorer side by side on the same replies (module docstring, ``scorers``)."""
    base = scored.filter(pl.col("scorer") == official).select(*RUN_KEYS, "qid", pl.col("verdict").alias("_official"))
    rows = []
    for (*run, name), part in scored.group_by([*RUN_KEYS, "scorer"], maintain_order=True):
        counts = _run_counts(part, table)
        joined = part.join(base, on=[*RUN_KEYS, "qid"])
        rows.append({**dict(zip(RUN_KEYS, run)), "scorer": name, "official": name == official,
                     "headline": column_value(table, counts, table.headline, decimals),
                     "micro": micro_value(counts, table, decimals),
                     "correct": int((part["verdict"] == "correct").sum()),
                     "counted": int((part["verdict"] != "skipped").sum()),
                     "skipped": int((part["verdict"] == "skipped").sum()),
                     "unreadable": int((part["letter"].is_null() & ~part["missing"]).sum()),
                     "gained": int(((joined["verdict"] == "correct") & (joined["_official"] != "correct")).sum()),
                     "lost": int(((joined["verdict"] != "correct") & (joined["_official"] == "correct")).sum()),
                     "flips": int((joined["verdict"] != joined["_official"]).sum())})
    order = {name: i for i, name in enumerate(table.scorers)}
    schema = {**{k: pl.String for k in RUN_KEYS}, "scorer": pl.String, "official": pl.Boolean,
              "headline": pl.Float64, "micro": pl.Float64, **{k: pl.Int64 for k in
                                                             ("correct", "counted", "skipped", "unreadable", "gained",
                                                              "lost", "flips")}}
    return (pl.DataFrame(rows, schema=schema).with_columns(_o=pl.col("scorer").replace_strict(order, default=99))
            .sort(*RUN_KEYS, "_o").drop("_o"))


def flips_table(scored: pl.DataFrame, official: str) -> pl.DataFrame:
    """The questions whose verdict changes between the official scorer and another (module docstring)."""
    base = scored.filter(pl.col("scorer") == official).select(
        *RUN_KEYS, "qid", pl.col("letter").alias("official_letter"), pl.col("verdict").alias("official_verdict"))
    return (scored.filter(pl.col("scorer") != official).join(base, on=[*RUN_KEYS, "qid"])
            .filter(pl.col("verdict") != pl.col("official_verdict"))
            .select(*RUN_KEYS, "qid", "answer", pl.col("reply").str.slice(0, REPLY_CHARS), "official_letter",
                    "official_verdict", "scorer", "letter", "verdict")
            .sort(*RUN_KEYS, "qid", "scorer"))


def layout_paired_stats(scored: pl.DataFrame, table: Layout, official: str, baseline: str, treatment: str,
                        label: str, resamples: int, confidence: float, seed: int, decimals: int) -> list[dict[str, Any]]:
    """Per non-macro column: the two runs' official verdicts on the questions both had counted, compared with
    :func:`senri.stats.compare` (resampled within videos)."""
    def outcomes(run: str, name: str) -> pl.DataFrame:
        return scored.filter(run_filter(run) & (pl.col("scorer") == official)).select(
            "qid", "video_id", "split", "categories", pl.col("verdict").alias(name))

    both = outcomes(baseline, "a").join(outcomes(treatment, "t").select("qid", "t"), on="qid", how="inner").filter(
        (pl.col("a") != "skipped") & (pl.col("t") != "skipped"))
    rows = []
    for column in table.columns:
        if column.over == "macro":
            continue
        part = [r for r in both.iter_rows(named=True) if column.counts(r["split"], r["categories"])]
        if not part:
            continue
        result: PairedComparison = compare([r["a"] == "correct" for r in part], [r["t"] == "correct" for r in part],
                                           [r["video_id"] for r in part], resamples=resamples,
                                           confidence=confidence, seed=seed, decimals=decimals)
        rows.append({"comparison": label, "baseline": baseline, "treatment": treatment, "category": column.key,
                     **asdict(result)})
    return rows


def benchmark_tables(predictions: pl.DataFrame, questions: pl.DataFrame, benchmark: Any,
                     config: Mapping[str, Any], seed: int, decimals: int = 1) -> BenchmarkTables:
    """All of one benchmark's tables. ``benchmark``: its registry object (name, layout, official scorer);
    ``config``: the report config (``pairs``, ``bootstrap_resamples``, ``confidence``)."""
    table = load_layout(benchmark.layout)
    official = benchmark.official_scorer
    names = (official, *(s for s in table.scorers if s != official))
    scored = verdicts(predictions, questions, names)
    stats_rows: list[dict[str, Any]] = []
    runs = sorted({f"{m}/{mo}" for m, mo in scored.select("method", "model").unique().iter_rows()})
    # Every run against chance (the seeded ``random`` run), as the SENRI report's chance table, then the pairs.
    chance = [r for r in runs if r.split("/")[0] == CHANCE_METHOD][:1]
    pairs = [{"group": "vs chance", "baseline": chance[0], "treatment": r} for r in runs if chance and r != chance[0]]
    for pair in pairs + list(config.get("pairs") or []):
        base, treat = pair["baseline"], pair["treatment"]
        if base in runs and treat in runs:
            label = f"{pair.get('group')}: {base} → {treat}" if pair.get("group") else f"{base} → {treat}"
            stats_rows += layout_paired_stats(scored, table, official, base, treat, label,
                                              int(config["bootstrap_resamples"]), float(config["confidence"]), seed,
                                              decimals)
    return BenchmarkTables(
        benchmark=benchmark.name, layout=table, official=official, verdicts=scored,
        table=layout_table(scored, table, official, decimals), published=published_rows(table),
        scorers=scorer_table(scored, table, official, decimals), flips=flips_table(scored, official),
        stats=pl.DataFrame(stats_rows, schema=STATS_SCHEMA))


# --- files and page ----------------------------------------------------------------------------------------------

SCORER_HEADERS = {"method": "Method", "model": "Model", "memory": "Memory", "scorer": "Scorer",
                  "official": "Official", "headline": "Headline", "micro": "Micro (all counted)",
                  "correct": "Correct", "counted": "Counted", "skipped": "Skipped", "unreadable": "Unreadable",
                  "gained": "Gained vs official", "lost": "Lost vs official", "flips": "Flips"}
FLIP_HEADERS = {"method": "Method", "model": "Model", "memory": "Memory", "qid": "Question", "answer": "Answer",
                "reply": "Reply", "official_letter": "Official letter", "official_verdict": "Official verdict",
                "scorer": "Scorer", "letter": "Letter", "verdict": "Verdict"}


def shown_table(tables: BenchmarkTables) -> pl.DataFrame:
    """The benchmark's table as shown: our runs (``source`` = this run set) under the official scorer, then the
    published rows (``source`` = published), the layout's columns in order, N = counted questions."""
    keys = tables.layout.keys
    total = next((c.key for c in tables.layout.columns if c.over == "all"), tables.layout.headline)
    ours = tables.table.select(
        pl.lit(source_label(tables.table)).alias("source"), pl.lit("").alias("group"), *RUN_KEYS, *keys,
        pl.col(f"n_{total}").alias("n"), "skipped", "missing")
    published = tables.published.select(
        "source", "group", "method", pl.lit("").alias("model"), pl.lit("").alias("memory"), *keys,
        pl.lit(None, pl.Int64).alias("n"), pl.lit(None, pl.Int64).alias("skipped"),
        pl.lit(None, pl.Int64).alias("missing"))
    return pl.concat([ours, published], how="vertical")


def table_headers(table: Layout) -> dict[str, str]:
    return {"source": "Source", "group": "Group", "method": "Method", "model": "Model", "memory": "Memory",
            "n": "N", "skipped": "Skipped", "missing": "Missing", **{c.key: c.label for c in table.columns}}


def notes(tables: BenchmarkTables) -> list[str]:
    official = load_scorer(tables.official)
    return [f"Scored with {tables.official} ({official.description}; spec {official.source}): a reply it cannot "
            f"read is {'left out of' if official.unreadable == 'skipped' else 'counted wrong in'} the denominator, "
            f"a question without a prediction {'left out' if official.absent == 'skipped' else 'counted wrong'}. "
            "N = counted questions; Skipped and Missing as counted by this scorer.",
            "Rows marked published are VideoLucy's paper numbers (senri/report/published/), not runs of this run set.",
            "Scorer variants: every scorer on the same stored replies; Gained/Lost/Flips compare each question's "
            "verdict with the official scorer's; the flips table lists those questions."] + subset_notes(tables.table)


def write_benchmark_tables(tables: BenchmarkTables, out_dir: Path, decimals: int = 1) -> None:
    """``benchmark_<name>``, ``scorers_<name>``, ``flips_<name>`` and ``benchmark_stats_<name>`` as Parquet,
    CSV and Markdown (Parquet/CSV keep the integer counts; the Markdown shows the table as printed)."""
    from senri.aggregate import to_markdown

    name = tables.benchmark
    shown = shown_table(tables)
    files = {f"benchmark_{name}": (pl.concat([tables.table.drop("scorer"), tables.published.drop("source", "group", "cite")],
                                             how="diagonal_relaxed"),
                                   f"**{tables.layout.title}**\n\n" + to_markdown(shown, table_headers(tables.layout),
                                                                                   decimals)
                                   + "\n" + "\n".join(notes(tables)) + "\n"),
             f"scorers_{name}": (tables.scorers, to_markdown(tables.scorers, SCORER_HEADERS, decimals)),
             f"flips_{name}": (tables.flips, to_markdown(tables.flips, FLIP_HEADERS, decimals)),
             f"benchmark_stats_{name}": (tables.stats, to_markdown(tables.stats, decimals=decimals))}
    for stem, (frame, markdown) in files.items():
        frame.write_parquet(out_dir / f"{stem}.parquet")
        frame.write_csv(out_dir / f"{stem}.csv")
        (out_dir / f"{stem}.md").write_text(markdown)


def benchmark_html(tables: BenchmarkTables, browser: str, decimals: int = 1) -> list[tuple[str, str]]:
    """The page's sections for one benchmark: its table with the published rows, the scorer variants, the
    flips (each question linked into the browser) and the paired statistics."""
    import html

    from senri.report.browser import question_slug
    from senri.report.render import table_html

    flips = tables.flips
    links = "".join(f'<a href="{browser}q/{question_slug(q)}.html">{html.escape(q)}</a> '
                    for q in flips["qid"].unique(maintain_order=True).to_list())
    note = "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes(tables))
    return [
        (tables.layout.title, table_html(shown_table(tables), table_headers(tables.layout), group_by="source",
                                         decimals=decimals) + note),
        (f"{tables.layout.title}: every scorer on the same replies",
         table_html(tables.scorers, SCORER_HEADERS, decimals=decimals)),
        (f"{tables.layout.title}: questions whose verdict flips between scorers",
         (table_html(flips, FLIP_HEADERS, decimals=decimals) + f"<p>{links}</p>") if flips.height
         else '<p class="note">Every scorer gives every question the official verdict.</p>'),
        (f"{tables.layout.title}: paired statistics", table_html(tables.stats, decimals=decimals) if tables.stats.height
         else '<p class="note">No random run and no configured pair (report.pairs) with both runs in this run set.</p>'),
    ]
