"""Paired statistics for two runs over the same questions: is the difference in accuracy real?

Two runs answered the same questions, so their per-question outcomes are paired. senri reports, for every
compared pair (overall and per task type):

- the difference in accuracy (treatment − baseline) in percentage points;
- a **paired bootstrap** confidence interval: questions are resampled with replacement *within each
  video* (a video is one recording; resampling inside it keeps each video's weight, as a re-recording of
  the same walks would), the same draw applied to both runs; percentile interval; the seed is recorded;
- an **exact McNemar test** on the discordant questions (baseline wrong & treatment right vs. the reverse):
  two-sided p = min(1, 2·P[X ≤ min(b, c)]) with X ~ Binomial(b + c, ½); p = 1 when there are none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


def mcnemar_exact(baseline_correct: Sequence[bool], treatment_correct: Sequence[bool]) -> tuple[int, int, float]:
    """(b, c, p): b = baseline wrong & treatment right, c = baseline right & treatment wrong, exact p."""
    a = np.asarray(baseline_correct, dtype=bool)
    t = np.asarray(treatment_correct, dtype=bool)
    if a.shape != t.shape:
        raise ValueError("McNemar needs the two runs' outcomes on the same questions")
    b = int(np.sum(~a & t))
    c = int(np.sum(a & ~t))
    n = b + c
    if n == 0:
        return b, c, 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return b, c, min(1.0, 2 * tail)


def paired_bootstrap(baseline_correct: Sequence[bool], treatment_correct: Sequence[bool], groups: Sequence[str],
                     resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of mean(treatment) − mean(baseline), resampling questions within each group (video).

    Returns the interval in the same unit as the means (fractions; multiply by 100 for points).
    """
    a = np.asarray(baseline_correct, dtype=np.int64)
    t = np.asarray(treatment_correct, dtype=np.int64)
    groups = np.asarray(groups)
    if not (a.shape == t.shape == groups.shape) or a.size == 0:
        raise ValueError("the bootstrap needs the same non-empty set of questions in both runs")
    rng = np.random.default_rng(seed)
    diff = t - a
    totals = np.zeros(resamples, dtype=np.int64)
    for group in sorted(set(groups.tolist())):
        members = diff[groups == group]
        draws = rng.integers(0, members.size, size=(resamples, members.size))
        totals += members[draws].sum(axis=1)
    deltas = totals / a.size
    alpha = (1 - confidence) / 2
    low, high = np.quantile(deltas, [alpha, 1 - alpha])
    return float(low), float(high)


@dataclass(frozen=True)
class PairedComparison:
    """One baseline → treatment comparison over one set of questions (all, or one task type)."""

    n: int
    baseline_correct: int
    treatment_correct: int
    delta_pp: float          # from the displayed (rounded) accuracies, as the papers print it
    ci_low_pp: float
    ci_high_pp: float
    b_treatment_only: int    # questions only the treatment got right
    c_baseline_only: int     # questions only the baseline got right
    mcnemar_p: float
    resamples: int
    seed: int


def compare(baseline_correct: Sequence[bool], treatment_correct: Sequence[bool], groups: Sequence[str],
            resamples: int = 10_000, confidence: float = 0.95, seed: int = 0, decimals: int = 1) -> PairedComparison:
    from senri.percent import percent_value

    n = len(baseline_correct)
    base, treat = int(np.sum(baseline_correct)), int(np.sum(treatment_correct))
    low, high = paired_bootstrap(baseline_correct, treatment_correct, groups, resamples, confidence, seed)
    b, c, p = mcnemar_exact(baseline_correct, treatment_correct)
    delta = round((percent_value(treat, n, decimals) or 0.0) - (percent_value(base, n, decimals) or 0.0), decimals)
    return PairedComparison(n=n, baseline_correct=base, treatment_correct=treat, delta_pp=delta,
                            ci_low_pp=round(100 * low, decimals), ci_high_pp=round(100 * high, decimals),
                            b_treatment_only=b, c_baseline_only=c, mcnemar_p=p, resamples=resamples, seed=seed)
