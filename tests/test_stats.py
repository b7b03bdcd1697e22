"""Paired statistics: hand-computed cases, and agreement with statsmodels / scipy where they run the same test."""

import math

import numpy as np
import pytest

from senri.stats import compare, mcnemar_exact, paired_bootstrap


def outcomes(pairs):
    """Per-question (baseline, treatment) outcomes from counts {(a, t): n}."""
    a, t = [], []
    for (x, y), n in pairs.items():
        a += [x] * n
        t += [y] * n
    return a, t


def test_mcnemar_hand_computed():
    # b = 3 (treatment only), c = 1 (baseline only): p = 2·P[X ≤ 1], X ~ Bin(4, ½) = 2·(1 + 4)/16 = 0.625
    a, t = outcomes({(False, True): 3, (True, False): 1, (True, True): 5, (False, False): 2})
    assert mcnemar_exact(a, t) == (3, 1, pytest.approx(0.625))
    # No discordant question: no evidence either way.
    assert mcnemar_exact([True, False], [True, False]) == (0, 0, 1.0)
    # All 6 discordant questions favour the treatment: p = 2/64.
    assert mcnemar_exact([False] * 6, [True] * 6)[2] == pytest.approx(2 / 64)


@pytest.mark.parametrize("b, c, both, neither", [(10, 3, 40, 20), (0, 5, 7, 1), (25, 25, 100, 50), (1, 0, 0, 0),
                                                 (60, 41, 200, 199)])
def test_mcnemar_matches_statsmodels_and_scipy(b, c, both, neither):
    from scipy.stats import binomtest  # imported here: 2 s of CPU that collecting the suite need not pay
    from statsmodels.stats.contingency_tables import mcnemar

    a, t = outcomes({(False, True): b, (True, False): c, (True, True): both, (False, False): neither})
    _, _, p = mcnemar_exact(a, t)
    table = [[both, c], [b, neither]]
    assert p == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    assert p == pytest.approx(min(1.0, binomtest(b, b + c, 0.5).pvalue) if b + c else 1.0, rel=1e-9)


def test_bootstrap_of_identical_runs_is_a_point_at_zero():
    a = [True, False, True, True]
    assert paired_bootstrap(a, a, ["v1", "v1", "v2", "v2"], resamples=500) == (0.0, 0.0)


def test_bootstrap_resamples_within_videos():
    # Video v1: treatment always right where baseline is wrong (+1 per question); v2: no change.
    # Resampling within videos keeps v1's 2 questions in every draw: every delta is exactly 2/4.
    a = [False, False, True, True]
    t = [True, True, True, True]
    low, high = paired_bootstrap(a, t, ["v1", "v1", "v2", "v2"], resamples=1000, seed=3)
    assert (low, high) == (0.5, 0.5)


def test_bootstrap_interval_is_seeded_covers_the_estimate_and_matches_the_normal_width():
    rng = np.random.default_rng(0)
    n = 400
    a = rng.random(n) < 0.40
    t = np.where(rng.random(n) < 0.8, a, rng.random(n) < 0.55)
    groups = [f"v{i % 8}" for i in range(n)]
    first = paired_bootstrap(a, t, groups, resamples=10_000, seed=11)
    assert first == paired_bootstrap(a, t, groups, resamples=10_000, seed=11)
    estimate = t.mean() - a.mean()
    assert first[0] < estimate < first[1]
    # For paired differences the standard error is sd(d)/√n; the 95% percentile interval is close to ±1.96 SE.
    d = t.astype(int) - a.astype(int)
    half_width = 1.96 * d.std(ddof=0) / math.sqrt(n)
    assert (first[1] - first[0]) / 2 == pytest.approx(half_width, rel=0.1)


def test_compare_reports_delta_from_displayed_accuracies():
    # 1/3 → 2/3: displayed 33.3 and 66.7, so the printed delta is 33.4 (not 33.3).
    result = compare([True, False, False], [True, True, False], ["v", "v", "v"], resamples=200, seed=0)
    assert result.delta_pp == 33.4 and result.n == 3
    assert (result.b_treatment_only, result.c_baseline_only) == (1, 0)
    assert result.resamples == 200 and result.seed == 0


def test_compare_reports_the_bootstrap_interval_in_percentage_points_and_mcnemar_of_the_same_pairs():
    """The interval printed beside a Δ is the bootstrap's (fractions) times 100, rounded as the table prints it;
    b, c and p are McNemar's on the same per-question pairs (bench/mutation.py found ``100 + low`` unnoticed)."""
    a, t = outcomes({(True, True): 10, (False, True): 6, (True, False): 2, (False, False): 12})
    groups = [f"v{i % 5}" for i in range(len(a))]
    low, high = paired_bootstrap(a, t, groups, resamples=500, seed=3)
    result = compare(a, t, groups, resamples=500, seed=3)
    assert (result.ci_low_pp, result.ci_high_pp) == (round(100 * low, 1), round(100 * high, 1))
    assert -100 < result.ci_low_pp < result.delta_pp < result.ci_high_pp < 100
    assert (result.b_treatment_only, result.c_baseline_only, result.mcnemar_p) == mcnemar_exact(a, t)
    for first, second in (([True, False], [True]), ([True], [True, False])):
        with pytest.raises(ValueError):
            mcnemar_exact(first, second)
    with pytest.raises(ValueError):
        paired_bootstrap([True], [True], ["v", "w"])
