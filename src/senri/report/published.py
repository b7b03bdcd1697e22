"""Papers' published numbers the report prints beside senri's, marked as published.

They are read from the copies shipped inside the package (``src/senri/report/published/``, copies of the vendored
``tests/reference/`` files that ``tests/test_reference.py`` holds equal), never from ``tests/``: an installed
senri has no tests folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import polars as pl

from senri.aggregate import LLM_CALL_COLUMNS, RUN_KEYS
from senri.report.coverage import OURS, ours_label, subset_note

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"
#: VideoLucy appendix A.8: mean LLM calls per question of VideoLucy, VideoAgent and VideoTree (42 random EgoMem
#: questions, at most 20 calls).
A8_LLM_CALLS = "videolucy_a8_llm_calls.csv"
A8_COLUMNS = ("Method", "Mean LLM calls per question", "Questions", "Benchmark", "Cap on LLM calls")
#: The mark of the published rows (senri's own are :data:`~senri.report.coverage.OURS`).
PUBLISHED = "published"


def published_csv(name: str, columns: tuple[str, ...]) -> pl.DataFrame:
    """A shipped published table; a missing file or column is an error naming the file and the column."""
    path = PUBLISHED_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the published numbers ship with the package (a copy of tests/reference/)")
    table = pl.read_csv(path)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: column(s) {', '.join(missing)} missing (has {', '.join(table.columns)})")
    return table


def a8_llm_call_rows() -> pl.DataFrame:
    """Appendix A.8's rows in the model-call table's layout: the published mean as the agent mean (the paper
    counts the reasoning model's calls), its question count and cap, the rest empty; ``source`` says where
    each number comes from."""
    raw = published_csv(A8_LLM_CALLS, A8_COLUMNS)
    rows = [{"method": f"{r['Method']} ({PUBLISHED})", "model": "", "memory": "", "questions": int(r["Questions"]),
             "agent_mean": float(r["Mean LLM calls per question"]), "max_llm_calls": int(r["Cap on LLM calls"]),
             "source": f"{PUBLISHED}: VideoLucy appendix A.8, {r['Benchmark']}"} for r in raw.iter_rows(named=True)]
    return pl.DataFrame(rows).with_columns(
        *(pl.lit(None, pl.Float64).alias(c) for c in ("agent_median", "caption_mean", "caption_median")),
        *(pl.lit(None, pl.Int64).alias(c) for c in ("agent_max", "caption_max")))


def with_a8_rows(calls: pl.DataFrame) -> pl.DataFrame:
    """The model-call table with a ``source`` column and appendix A.8's published rows under senri's own."""
    ours = calls.with_columns(source=pl.lit(OURS))
    columns = [*RUN_KEYS, *LLM_CALL_COLUMNS, "source"]
    return pl.concat([ours.select(columns), a8_llm_call_rows().select(columns)], how="vertical_relaxed")


# ------------------------------------------------------------------------------------- SENRI's Table 2
#: SENRI Table 2: the paper's 28 rows (approach, Method, Inference Model, Total and the eight task columns) over
#: SENRI-Bench's 500 questions (spec S-1: every cell is a count out of 500 or a task's share of it).
PAPER_TABLE2 = "paper_table2.csv"
PAPER_TABLE2_NAMES = ("approach", "method", "inference_model")
SENRI_BENCH_QUESTIONS = 500
#: The ``source`` of a published Table 2 row.
PUBLISHED_TABLE2 = f"{PUBLISHED}: SENRI Table 2"
#: ``report.published`` → the shipped file it names.
PUBLISHED_TABLES = {"paper_table2": PAPER_TABLE2}


def paper_rows_for(paper: pl.DataFrame, method: str | None, model: str | None) -> pl.DataFrame:
    """The paper's rows of one run, from its configs' paper names: the rows of its method's name (narrowed to the
    row of its model's name where the paper has that one among them: VideoARM on Qwen3.8-27B), or, for a method
    the paper does not name (``direct``), the direct-perception row its model's name is the Method of. No name:
    no row (the report lists the run as unmatched)."""
    if method:
        rows = paper.filter(pl.col("method") == method)
        narrowed = rows.filter(pl.col("inference_model") == model) if model else rows.clear()
        return narrowed if narrowed.height else rows
    if model:
        return paper.filter((pl.col("method") == model) & (pl.col("approach") == "Direct Perception"))
    return paper.clear()


def table2_beside_paper(main: pl.DataFrame, keys: list[str], names: Mapping[str, Mapping[str, str | None]],
                        ours_label: str, published: str = PAPER_TABLE2) -> tuple[pl.DataFrame, list[str]]:
    """The main table (``report.main``: approach, run keys, n, the layout's ``keys``) in the paper's layout with
    each run's published rows right after it (after the last run they belong to, once), ``source`` saying whose
    row it is (``ours_label`` for ours, :data:`PUBLISHED_TABLE2` for the paper's), and the runs no published row
    matched, named in a note. ``names``: ``"method/model"`` → the paper's names (``report.published_names``)."""
    paper = published_csv(published, (*PAPER_TABLE2_NAMES, *keys))
    columns = ["approach", *RUN_KEYS, "source", "n", *keys]
    schema = {**{c: pl.String for c in ("approach", *RUN_KEYS, "source")}, "n": pl.Int64,
              **{k: pl.Float64 for k in keys}}
    rows: list[dict[str, Any]] = []
    unmatched: list[str] = []
    ours = list(main.iter_rows(named=True))
    matched = []
    for row in ours:
        name = names.get(f"{row['method']}/{row['model']}") or {}
        found = paper_rows_for(paper, name.get("method"), name.get("model"))
        matched.append(tuple(tuple(r) for r in found.select(PAPER_TABLE2_NAMES).iter_rows()))
        if not found.height:
            unmatched.append(f"{row['method']}/{row['model']}")
    shown: set[tuple] = set()
    for i, row in enumerate(ours):
        rows.append({**{c: row.get(c) for c in columns if c != "source"}, "source": ours_label})
        last_of_its_rows = i + 1 == len(ours) or matched[i + 1] != matched[i]
        if not last_of_its_rows:
            continue
        for record in paper.iter_rows(named=True):
            key = tuple(record[c] for c in PAPER_TABLE2_NAMES)
            if key in matched[i] and key not in shown:
                shown.add(key)
                rows.append({"approach": row["approach"], "method": record["method"],
                             "model": record["inference_model"], "memory": "", "source": PUBLISHED_TABLE2, "n": None,
                             **{k: float(record[k]) for k in keys}})
    notes = [f"Rows marked “{PUBLISHED_TABLE2}” are the SENRI paper's Table 2 ({SENRI_BENCH_QUESTIONS} questions "
             f"of SENRI-Bench), not runs of this run set; a run's rows are found by the paper_name of its method "
             f"and model configs."]
    if unmatched:
        notes.append("No published row for " + ", ".join(unmatched) + " (neither its method nor its model config "
                     "names a row of the paper's table: paper_name).")
    return pl.DataFrame(rows, schema=schema).select(columns), notes


def table2_source_label(questions: int, partial: bool, coverage_line: str) -> tuple[str, list[str]]:
    """Our rows' source beside Table 2's published rows, marked (:func:`~senri.report.coverage.ours_label`, and
    the note saying why) when the run set is not SENRI-Bench's full 500 questions."""
    if not partial and questions == SENRI_BENCH_QUESTIONS:
        return ours_label(False), []
    return ours_label(True), [subset_note(f"{questions:,} questions", f"the {SENRI_BENCH_QUESTIONS} of SENRI-Bench",
                                          coverage_line)]
