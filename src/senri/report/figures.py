"""The report's figures (matplotlib, written as PNG and SVG): Fig. 5, Fig. 6 and two diagnostics.

Each function takes tables, writes ``<name>.png`` and ``<name>.svg`` under ``out_dir`` and returns the PNG
path, or None when the run set holds nothing to draw (the report then says why).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from senri.aggregate import letter_columns  # noqa: E402
from senri.benchmarks.layouts import Layout  # noqa: E402

# Deterministic SVGs: fixed hash salt for element ids, no creation date.
plt.rcParams["svg.hashsalt"] = "senri"
plt.rcParams["font.size"] = 9


def _save(fig, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{name}.png"
    fig.savefig(png, dpi=120, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(out_dir / f"{name}.svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return png


def frame_budget_curve(main: pl.DataFrame, runs: pl.DataFrame, out_dir: Path) -> Path | None:
    """Fig. 5: direct perception's Total accuracy against its frame budget, one line per model."""
    direct = (main.join(runs, on=["method", "model"])
              .filter((pl.col("approach") == "direct_perception") & pl.col("frames").is_not_null()))
    if direct.is_empty() or direct["frames"].n_unique() < 2:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for model, part in sorted(direct.group_by("model"), key=lambda kv: kv[0][0]):
        part = part.sort("frames")
        ax.plot(part["frames"], part["total"], marker="o", label=model[0])
    budgets = sorted(direct["frames"].unique().to_list())
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.axhline(25.0, color="grey", lw=0.8, ls="--", label="random (25.0)")
    ax.set_xlabel("frames sampled uniformly over the whole video")
    ax.set_ylabel("Total accuracy (%)")
    ax.set_title("Direct perception: accuracy vs frame budget")
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "frame_budget")


def paired_change_heatmap(per_video: pl.DataFrame, pairs: list[tuple[str, str, str]], out_dir: Path) -> Path | None:
    """Fig. 6: per-video accuracy change (points) of each treatment over its baseline; blue better, red worse."""
    def accuracy(run: str) -> dict[str, float]:
        method, model = run.split("/", 1)
        part = per_video.filter((pl.col("method") == method) & (pl.col("model") == model))
        return dict(zip(part["video_id"], part["accuracy"]))

    rows, labels = [], []
    videos = sorted(per_video["video_id"].unique().to_list())
    for label, base, treat in pairs:
        a, t = accuracy(base), accuracy(treat)
        if not a or not t:
            continue
        rows.append([t.get(v, np.nan) - a.get(v, np.nan) for v in videos])
        labels.append(label)
    if not rows:
        return None
    values = np.array(rows, dtype=float)
    limit = max(1.0, float(np.nanmax(np.abs(values))))
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(videos), 0.8 + 0.55 * len(rows)))
    image = ax.imshow(values, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        dark = not np.isnan(value) and abs(value) > 0.6 * limit
        ax.text(j, i, "–" if np.isnan(value) else f"{value:+.1f}", ha="center", va="center", fontsize=8,
                color="white" if dark else "black")
    ax.set_xticks(range(len(videos)), videos, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    fig.colorbar(image, ax=ax, label="accuracy change (points)")
    ax.set_title("Per-video paired change")
    return _save(fig, out_dir, "paired_change")


def task_type_bars(main: pl.DataFrame, out_dir: Path, layout: Layout) -> Path | None:
    """The layout's bar figure (:attr:`~senri.benchmarks.layouts.Layout.figure`): accuracy per chosen column, one
    bar per run, with the chance line where the layout gives one (SENRI-Bench: by task type, 25 %). Nothing is
    drawn for a layout without a figure. Written as ``task_types``, the name it has always had."""
    if main.is_empty() or layout.figure is None:
        return None
    keys = list(layout.figure.columns)
    labels = {c.key: c.label for c in layout.columns}
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / main.height
    for k, row in enumerate(main.iter_rows(named=True)):
        values = [row[t] if row[t] is not None else 0.0 for t in keys]
        ax.bar(np.arange(len(keys)) + k * width, values, width, label=f"{row['method']}/{row['model']}")
    ax.set_xticks(np.arange(len(keys)) + width * (main.height - 1) / 2, [labels[t] for t in keys])
    if layout.figure.chance is not None:
        ax.axhline(layout.figure.chance, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(layout.figure.title)
    ax.legend(fontsize=7, ncols=2)
    return _save(fig, out_dir, "task_types")


def letter_distribution(positions: pl.DataFrame, out_dir: Path) -> Path | None:
    """Predicted-letter shares per run next to the ground truth's (exposes 'always A' models)."""
    if positions.is_empty():
        return None
    columns = letter_columns(positions.columns)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    width = 0.8 / positions.height
    for k, row in enumerate(positions.iter_rows(named=True)):
        shares = [100 * row[c] / row["n"] if row["n"] else 0.0 for c in columns]
        name = row["method"] if not row["model"] else f"{row['method']}/{row['model']}"
        ax.bar(np.arange(len(columns)) + k * width, shares, width, label=name,
               color="black" if row["method"] == "(ground truth)" else None)
    ax.set_xticks(np.arange(len(columns)) + width * (positions.height - 1) / 2, columns)
    ax.set_ylabel("share of questions (%)")
    ax.set_title("Predicted answer letters vs ground truth")
    ax.legend(fontsize=7, ncols=2)
    return _save(fig, out_dir, "letters")


NEEDLE_AXES = (("haystack_s", "haystack length (s)"), ("needle_position", "needle position (0 = beginning)"))


def needle_accuracy(scored: pl.DataFrame, needles: pl.DataFrame) -> pl.DataFrame:
    """Accuracy of every run on the needle questions, by haystack length and by needle position, with the
    integer counts behind each point (``axis``, ``value``, ``correct``, ``n``, ``accuracy``)."""
    joined = scored.join(needles.select("video_id", "qid", "haystack_s", "needle_position", "needle_fraction"),
                         on=["video_id", "qid"], how="inner")
    parts = []
    for axis, _ in NEEDLE_AXES:
        parts.append(joined.group_by("method", "model", axis).agg(
            correct=pl.col("correct").sum().cast(pl.Int64), n=pl.len().cast(pl.Int64))
            .rename({axis: "value"}).with_columns(axis=pl.lit(axis), value=pl.col("value").cast(pl.Float64)))
    if not parts:
        return pl.DataFrame()
    table = pl.concat(parts).with_columns(accuracy=100 * pl.col("correct") / pl.col("n"))
    return table.select("method", "model", "axis", "value", "correct", "n", "accuracy").sort(
        "axis", "method", "model", "value")


def needle_curves(table: pl.DataFrame, out_dir: Path) -> Path | None:
    """VideoLucy's Fig. 4 layout: needle accuracy against haystack length and against needle position, one
    line per method × model, each point labelled with its counts (correct/n)."""
    if table.is_empty():
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, (axis, label) in zip(axes, NEEDLE_AXES):
        part = table.filter(pl.col("axis") == axis)
        for (method, model), run in sorted(part.group_by("method", "model"), key=lambda kv: kv[0]):
            run = run.sort("value")
            line, = ax.plot(run["value"], run["accuracy"], marker="o", label=f"{method}/{model}")
            for x, y, c, n in zip(run["value"], run["accuracy"], run["correct"], run["n"]):
                ax.annotate(f"{c}/{n}", (x, y), textcoords="offset points", xytext=(0, 5), ha="center",
                            fontsize=7, color=line.get_color())
        values = sorted(part["value"].unique().to_list())
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.axhline(25.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(label)
        ax.set_ylim(-5, 110)
    axes[0].set_ylabel("accuracy on needle questions (%)")
    axes[1].legend(fontsize=7)
    fig.suptitle("Needle in a video haystack (points: correct/n; dashed: chance)")
    return _save(fig, out_dir, "needle")


def richness_relevance_curves(curves: pl.DataFrame, out_dir: Path) -> Path | None:
    """VideoLucy Fig. 5: per memory level, the mean Shannon entropy of the memory texts (information richness)
    and the evaluator's mean relevance score, one line per run, over the questions that reached the deepest
    level (the richness analysis's ``curves`` table)."""
    if curves.is_empty():
        return None
    levels = ["coarse", "fine", "ultra_fine"]
    fig, (rich, rel) = plt.subplots(1, 2, figsize=(8, 3.2))
    for (method, model, memory), part in sorted(curves.group_by("method", "model", "memory"), key=lambda kv: kv[0]):
        x = [levels.index(level) for level in part["level"]]
        label = f"{method}/{model}"
        rich.plot(x, part["entropy_bits"], marker="o", label=label)
        rel.plot(x, part["relevance"], marker="o", label=label)
    for ax, title, ylabel in ((rich, "Information richness", "Shannon entropy (bits)"),
                              (rel, "Relevance to the question", "mean relevance score")):
        ax.set_xticks(range(len(levels)), ["coarse", "fine", "ultra-fine"])
        ax.set_xlabel("memory level")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    rel.legend(fontsize=7)
    return _save(fig, out_dir, "richness_relevance")
