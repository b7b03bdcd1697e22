"""A benchmark's tables from the prediction files: every reply scored by every scorer of its layout, the
benchmark's own table under its official scorer with the published rows beside it, the scorer-variant table,
the flips between scorers and the per-column paired statistics.

The benchmark, its official scorer and its layout come from the registries (:data:`senri.benchmarks.BENCHMARKS`:
each benchmark module declares its :class:`~senri.benchmarks.layouts.Layout`; :data:`~senri.benchmarks.scoring.SCORERS`)
through the questions' ``benchmark`` column; nothing here names one.

- ``verdicts``: one row per run × question × scorer: the raw reply, the letter the scorer's tool compared, its
  verdict (correct / wrong / skipped) and the exception the tool's code raised on the reply (``raised``);
  questions without a prediction are there too (``missing``), judged by the scorer's rule for absent questions
  (for Video-MME's scorers: every question of that video left out).
- ``benchmark``: one row per run under the official scorer, the layout's columns with ``correct_<col>`` and
  ``n_<col>`` behind each, then the published rows (``source`` = ``published``).
- ``scorers``: one row per run × scorer: the headline under that scorer, the micro accuracy over all counted
  questions, the replies its tool raised on, correct / counted / skipped / unreadable, and how many questions it
  flips against the official one. Every number is printed as the scorer's tool prints it
  (:func:`senri.benchmarks.scoring.layout_value`).
- ``flips``: one row per run × question × scorer whose verdict differs from the official scorer's.
- ``breakdowns``: the benchmark's own breakdown tables (its layout's ``breakdowns``: Video-MME per domain,
  sub-category and task type within each split and over all of them, as its official scorer prints them; LVBench
  per category; MLVU per task; EgoMem per type and Event subtype), under the official scorer: one row per run ×
  split block × value with the correct and counted questions.
- ``stats``: every run against the ``random`` run (chance), then per configured pair, per layout column, :func:`senri.stats.compare` on the questions both runs had
  counted under the official scorer (the same long schema as the SENRI report's paired statistics).
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from senri.aggregate import RUN_KEYS, plain_categories, verdicts
from senri.benchmarks.base import FACET
from senri.benchmarks.layouts import Breakdown, Layout, column_counts, column_counts_total
from senri.benchmarks.scoring import layout_value, scorer as load_scorer
from senri.percent import percent_value
from senri.report.coverage import source_label, subset_notes
from senri.report.published import PUBLISHED_DIR  # VideoLucy's published rows beside the benchmark tables
from senri.report.tables import CHANCE_METHOD, STATS_SCHEMA, run_filter
from senri.stats import PairedComparison, compare

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
    breakdowns: dict[str, pl.DataFrame] = field(default_factory=dict)


def _run_counts(part: pl.DataFrame, table: Layout) -> dict[str, tuple[int, int]]:
    return column_counts(table, zip(part["split"].to_list(), part["categories"].to_list(), part["verdict"].to_list()))


def layout_table(scored: pl.DataFrame, table: Layout, scorer_name: str, decimals: int = 1) -> pl.DataFrame:
    """One row per run under ``scorer_name``: the layout's columns, then ``correct_<col>`` and ``n_<col>`` for
    each, the skipped replies and the missing predictions."""
    rows = []
    s = load_scorer(scorer_name)
    for run, part in scored.filter(pl.col("scorer") == scorer_name).group_by(RUN_KEYS, maintain_order=True):
        counts = _run_counts(part, table)
        row: dict[str, Any] = dict(zip(RUN_KEYS, run))
        row["scorer"] = scorer_name
        row.update({key: layout_value(s, table, counts, key, decimals) for key in table.keys})
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
        s = load_scorer(name)
        rows.append({**dict(zip(RUN_KEYS, run)), "scorer": name, "official": name == official,
                     "headline": layout_value(s, table, counts, table.headline, decimals),
                     "micro": s.column_percent(*column_counts_total(counts, table), decimals),
                     "raised": int(part["raised"].is_not_null().sum()),
                     "correct": int((part["verdict"] == "correct").sum()),
                     "counted": int((part["verdict"] != "skipped").sum()),
                     "skipped": int((part["verdict"] == "skipped").sum()),
                     "unreadable": int((part["letter"].is_null() & ~part["missing"]).sum()),
                     "gained": int(((joined["verdict"] == "correct") & (joined["_official"] != "correct")).sum()),
                     "lost": int(((joined["verdict"] != "correct") & (joined["_official"] == "correct")).sum()),
                     "flips": int((joined["verdict"] != joined["_official"]).sum())})
    order = {name: i for i, name in enumerate(table.scorers)}
    schema = {**{k: pl.String for k in RUN_KEYS}, "scorer": pl.String, "official": pl.Boolean,
              "headline": pl.Float64, "micro": pl.Float64, "raised": pl.Int64,
              **{k: pl.Int64 for k in ("correct", "counted", "skipped", "unreadable", "gained", "lost", "flips")}}
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
    table: Layout = benchmark.layout
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
        stats=pl.DataFrame(stats_rows, schema=STATS_SCHEMA),
        breakdowns={b.name: breakdown_table(scored.filter(pl.col("scorer") == official), b, benchmark.splits, decimals,
                                            official)
                    for b in table.breakdowns})


#: The split block of a breakdown that counts every split (Video-MME's "entire dataset").
ALL_SPLITS = "all"
BREAKDOWN_SCHEMA = {**{k: pl.String for k in RUN_KEYS}, "split": pl.String, "value": pl.String, "correct": pl.Int64,
                    "n": pl.Int64, "accuracy": pl.Float64}


def breakdown_values(categories: list[str] | None, by: str) -> list[str]:
    """The values a question has for a breakdown: its plain categories (``by="category"``) or the values of its
    ``by=value`` facets."""
    if by == "category":
        return plain_categories(categories, "")
    prefix = f"{by}{FACET}"
    return [c[len(prefix):] for c in categories or [] if c.startswith(prefix)]


def breakdown_table(judged: pl.DataFrame, breakdown: Breakdown, splits: tuple[str, ...],
                    decimals: int = 1, scorer_name: str = "method") -> pl.DataFrame:
    """One breakdown under one scorer (``judged``: :func:`senri.aggregate.verdicts` rows of that scorer): per run,
    per split block (each split label in the benchmark's order, then ``all``, when ``by_split``; else ``all``
    only) and per value in the tool's order (values no question has are left out; unknown ones follow, sorted):
    the correct and counted questions (a skipped reply is in neither, as the official tools count "answered")
    and the accuracy."""
    counts: dict[tuple, list[int]] = {}
    present: set[str] = set()
    for row in judged.select(*RUN_KEYS, "split", "categories", "verdict").iter_rows(named=True):
        values = breakdown_values(row["categories"], breakdown.by)
        present.update(values)
        blocks = [row["split"] or "", ALL_SPLITS] if breakdown.by_split else [ALL_SPLITS]
        for block in blocks:
            for value in values:
                cell = counts.setdefault((*(row[k] for k in RUN_KEYS), block, value), [0, 0])
                if row["verdict"] != "skipped":
                    cell[1] += 1
                    cell[0] += row["verdict"] == "correct"
    order = [v for v in breakdown.order if v in present] + sorted(present - set(breakdown.order))
    block_order = [*splits, ALL_SPLITS]
    tool = load_scorer(scorer_name)
    percent = tool.column_percent if tool.percent or tool.macro else percent_value  # as the tool prints it
    rows = [{**dict(zip(RUN_KEYS, key[:len(RUN_KEYS)])), "split": key[-2], "value": key[-1], "correct": c, "n": n,
             "accuracy": percent(c, n, decimals)} for key, (c, n) in counts.items()]
    rank_block = {b: i for i, b in enumerate(block_order)}
    rank_value = {v: i for i, v in enumerate(order)}
    rows.sort(key=lambda r: (*(r[k] for k in RUN_KEYS), rank_block.get(r["split"], len(block_order)), r["split"],
                             rank_value[r["value"]]))
    return pl.DataFrame(rows, schema=BREAKDOWN_SCHEMA)


# --- files and page ----------------------------------------------------------------------------------------------

SCORER_HEADERS = {"method": "Method", "model": "Model", "memory": "Memory", "scorer": "Scorer",
                  "official": "Official", "headline": "Headline", "micro": "Micro (all counted)",
                  "raised": "Tool raised",
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


def breakdown_headers(breakdown: Breakdown) -> dict[str, str]:
    return {"method": "Method", "model": "Model", "memory": "Memory", "split": "Split", "value": breakdown.title,
            "correct": "Correct", "n": "Counted", "accuracy": "Accuracy"}


def breakdown_note(tables: BenchmarkTables, breakdown: Breakdown) -> str:
    blocks = ("each split, then all splits together (split \"all\")" if breakdown.by_split else "all questions")
    return (f"{breakdown.title} of {tables.layout.title} under its official scorer ({tables.official}), as the tool "
            f"computes them: over {blocks}; a question counts in every value it has; Counted leaves out the replies "
            "the scorer skips. Values no question of this run set has are left out.")


def breakdown_markdown(tables: BenchmarkTables, key: str, decimals: int = 1) -> str:
    breakdown = next(b for b in tables.layout.breakdowns if b.name == key)
    from senri.aggregate import to_markdown

    return (f"**{tables.layout.title}: {breakdown.title}**\n\n"
            + to_markdown(tables.breakdowns[key], breakdown_headers(breakdown), decimals)
            + "\n" + breakdown_note(tables, breakdown) + "\n")


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
             f"benchmark_stats_{name}": (tables.stats, to_markdown(tables.stats, decimals=decimals)),
             **{f"breakdown_{name}_{key}": (frame, breakdown_markdown(tables, key, decimals))
                for key, frame in tables.breakdowns.items()}}
    for stem, (frame, markdown) in files.items():
        frame.write_parquet(out_dir / f"{stem}.parquet")
        frame.write_csv(out_dir / f"{stem}.csv")
        (out_dir / f"{stem}.md").write_text(markdown)


def benchmark_html(tables: BenchmarkTables, browser: str, decimals: int = 1) -> list[tuple[str, str]]:
    """The page's sections for one benchmark: its table with the published rows, the scorer variants, the
    flips (each question linked into the browser), its breakdowns and the paired statistics."""
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
        *((f"{tables.layout.title}: {b.title}",
           table_html(tables.breakdowns[b.name], breakdown_headers(b),
                      decimals=decimals) + f'<p class="note">{html.escape(breakdown_note(tables, b))}</p>')
          for b in tables.layout.breakdowns),
        (f"{tables.layout.title}: paired statistics", table_html(tables.stats, decimals=decimals) if tables.stats.height
         else '<p class="note">No random run and no configured pair (report.pairs) with both runs in this run set.</p>'),
    ]
