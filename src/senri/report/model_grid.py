"""VideoLucy's Table 13 layout: accuracy of each (captioner, reasoning model) pair, ours beside the paper's.

Runs of ``report.model_grid.method`` over several captioners are named ``<method>+<captioner>`` (one run per
captioner, :func:`senri.config.expand_captioners`); each is one cell of the grid: the captioner (the run's
``memory`` column, ``captions/<captioner>``) × the reasoning model (the run's model). ``names`` maps model
config names to the paper's model names, which puts the paper's published cell (a CSV shipped in
``senri/report/published/``) beside ours. A published cell without our run is still shown, marked published,
with our cell empty; nothing is filled in that was not measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import polars as pl

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"
#: The source column written in every row: ours are measured here, published ones are the paper's.
OURS, PUBLISHED = "ours", "published"

GRID_COLUMNS = {"captioner": pl.String, "reasoner": pl.String, "source": pl.String, "n": pl.Int64,
                "accuracy": pl.Float64, "method": pl.String, "model": pl.String, "memory": pl.String}


def published_table(name: str) -> pl.DataFrame:
    """A published table shipped with the package (``senri/report/published/<name>.csv``)."""
    path = PUBLISHED_DIR / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"report.model_grid.published: no published table {path}")
    return pl.read_csv(path)


def captioner_of(memory: str) -> str:
    """The captioner named by a ``memory`` column value (``captions/qwen25vl7b_vllm`` → ``qwen25vl7b_vllm``)."""
    return memory.rsplit("/", 1)[-1]


def model_grid_table(main: pl.DataFrame, spec: Mapping[str, Any]) -> pl.DataFrame:
    """One row per grid cell and source: our Total accuracy of every run of ``spec["method"]`` (its
    ``<method>+<captioner>`` runs, or the method itself over one captioner), then every published cell
    (``spec["published"]``), captioner and reasoner written with the paper's names where ``names`` has them."""
    method, names = str(spec["method"]), dict(spec.get("names") or {})
    ours = main.filter((pl.col("method") == method) | pl.col("method").str.starts_with(f"{method}+"))
    rows = [{"captioner": names.get(captioner_of(r["memory"]), captioner_of(r["memory"])),
             "reasoner": names.get(r["model"], r["model"]), "source": OURS, "n": r["n"], "accuracy": r["total"],
             "method": r["method"], "model": r["model"], "memory": r["memory"]} for r in ours.iter_rows(named=True)]
    if spec.get("published"):
        paper = published_table(str(spec["published"]))
        rows += [{"captioner": r["MLLMs"], "reasoner": r["LLMs"], "source": PUBLISHED, "n": None,
                  "accuracy": float(r["Acc."]), "method": None, "model": None, "memory": None}
                 for r in paper.iter_rows(named=True)]
    return pl.DataFrame(rows, schema=GRID_COLUMNS)


def model_grid_display(grid: pl.DataFrame) -> pl.DataFrame:
    """The grid as printed: per captioner, one column per reasoning model holding ``ours (published)``
    (``–`` where a side has no number), the paper's row order first."""
    if grid.is_empty():
        return pl.DataFrame()
    reasoners = list(dict.fromkeys(grid["reasoner"].to_list()))
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in grid.iter_rows(named=True):
        cells.setdefault((r["captioner"], r["reasoner"]), {})[r["source"]] = r["accuracy"]
    rows = []
    for captioner in dict.fromkeys(grid["captioner"].to_list()):
        row: dict[str, Any] = {"MLLM (captioner)": captioner}
        for reasoner in reasoners:
            cell = cells.get((captioner, reasoner), {})
            ours = f"{cell[OURS]:.1f}" if OURS in cell else "–"
            paper = f"{cell[PUBLISHED]:.1f}" if PUBLISHED in cell else "–"
            row[reasoner] = f"{ours} (published {paper})"
        rows.append(row)
    return pl.DataFrame(rows)


def model_grid_markdown(grid: pl.DataFrame) -> str:
    shown = model_grid_display(grid)
    if shown.is_empty():
        return "No run of the configured method in this run set.\n"
    header = "| " + " | ".join(shown.columns) + " |\n|" + "---|" * len(shown.columns) + "\n"
    body = "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in shown.iter_rows())
    return header + body + ("\nEach cell: our accuracy (%) on this run set's questions, then the paper's published "
                            "number (VideoLucy Table 13, 200 random LVBench questions).\n")
