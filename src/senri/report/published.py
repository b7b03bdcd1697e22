"""Papers' published numbers the report prints beside senri's, marked as published.

They are read from the copies shipped inside the package (``src/senri/report/published/``, copies of the vendored
``tests/reference/`` files that ``tests/test_reference.py`` holds equal), never from ``tests/``: an installed
senri has no tests folder.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from senri.aggregate import LLM_CALL_COLUMNS, RUN_KEYS

PUBLISHED_DIR = Path(__file__).resolve().parent / "published"
#: VideoLucy appendix A.8: mean LLM calls per question of VideoLucy, VideoAgent and VideoTree (42 random EgoMem
#: questions, at most 20 calls).
A8_LLM_CALLS = "videolucy_a8_llm_calls.csv"
A8_COLUMNS = ("Method", "Mean LLM calls per question", "Questions", "Benchmark", "Cap on LLM calls")
#: The ``source`` cell of senri's own rows and the mark of the published ones.
THIS_RUN_SET = "this run set"
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
    ours = calls.with_columns(source=pl.lit(THIS_RUN_SET))
    columns = [*RUN_KEYS, *LLM_CALL_COLUMNS, "source"]
    return pl.concat([ours.select(columns), a8_llm_call_rows().select(columns)], how="vertical_relaxed")
