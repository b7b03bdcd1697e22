"""Percentages for display, made from integer counts: the one rounding rule of every senri table.

Counts stay integers to the end; a percentage is made from them only to print, rounded half-up to a fixed
number of decimals in exact arithmetic (6.25 → 6.3, where Python's ``round`` of the float gives 6.2). It lives
below every stage (aggregate, the benchmark layouts, the report, the paired statistics) so that each reads the
same rule without importing another stage.
"""

from __future__ import annotations

from fractions import Fraction

import polars as pl


def display_percent(correct: pl.Expr, n: pl.Expr, decimals: int = 1) -> pl.Expr:
    """100·correct/n rounded half-up to ``decimals``, computed in integers (no float rounding surprises)."""
    scale = 10**decimals
    scaled = (2 * 100 * scale * correct.cast(pl.Int64) + n.cast(pl.Int64)) // (2 * n.cast(pl.Int64))
    # Polars may divide by multiplying with the reciprocal (474 * 0.1 = 47.400000000000006); rounding the
    # already-exact quotient snaps it to the nearest float, so 474 / 10 reads back as 47.4.
    return pl.when(n > 0).then((scaled / scale).round(decimals)).otherwise(None)


def percent_value(correct: int, n: int, decimals: int = 1) -> float | None:
    """The same rounding for plain integers (used by reports and tests)."""
    if n == 0:
        return None
    scale = 10**decimals
    return ((2 * 100 * scale * correct + n) // (2 * n)) / scale


def round_half_up(value: Fraction, decimals: int) -> float:
    """An exact fraction rounded half-up for display, as :func:`percent_value` rounds counts."""
    scale = 10**decimals
    return float((2 * value * scale + 1) // 2) / scale
