"""The statistics behind noise-aware comparisons: Mann-Whitney U against known values and against every split of
the pooled values counted by hand, median and spread."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy import stats as scipy_stats

from loadtests.analysis.stats import (
    EXACT_MAX_PAIRS,
    mann_whitney_u,
    min_p_value,
    p_text,
    samples_needed,
    spread_text,
    summarize,
)


def test_three_against_three_fully_separated_is_exact_p_one_tenth() -> None:
    test = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert test.exact
    assert test.u == 0
    assert test.p == pytest.approx(0.1)


def test_five_against_five_fully_separated_is_exact_p_0_0079() -> None:
    test = mann_whitney_u([1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0])
    assert test.exact
    assert test.p == pytest.approx(2 / 252)
    assert round(test.p, 4) == 0.0079


def test_the_test_is_two_sided_and_symmetric() -> None:
    low, high = [1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]
    assert mann_whitney_u(high, low).p == mann_whitney_u(low, high).p == pytest.approx(2 / 70)
    assert mann_whitney_u(high, low).u == 16


def test_interleaved_samples_are_far_from_significant() -> None:
    # U = 6 of 16; P(U <= 6) = 24/70 for 4 against 4
    assert mann_whitney_u([1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]).p == pytest.approx(48 / 70)


def test_unequal_sizes_exact() -> None:
    # U = 4 of 20; P(U <= 4) = 12/126 for 4 against 5
    test = mann_whitney_u([1.1, 2.2, 3.3, 4.4], [0.5, 5.5, 6.6, 7.7, 8.8])
    assert test.exact and test.u == 4
    assert test.p == pytest.approx(24 / 126)


@pytest.mark.parametrize("sample", [[1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [0.1, 0.2, 0.2, 0.4, 0.5]])
def test_identical_samples_give_p_one(sample: list[float]) -> None:
    assert mann_whitney_u(sample, list(sample)).p == 1.0


def _twice_u(side: list[float], other: list[float]) -> int:
    """2 U of `side`, pair by pair: a win counts 2, a tie 1."""
    return sum(2 * (a > b) + (a == b) for a in side for b in other)


def _by_enumeration(x: list[float], y: list[float]) -> tuple[float, float]:
    """U of x and the two-sided p-value over every split of the pooled values into sides of x's and y's sizes:
    the share of splits with |U - mn/2| at least the observed one."""
    pooled, m, n = [*x, *y], len(x), len(y)
    observed = abs(_twice_u(x, y) - m * n)
    far = total = 0
    for chosen in itertools.combinations(range(m + n), m):
        side = [pooled[i] for i in chosen]
        rest = [pooled[i] for i in range(m + n) if i not in chosen]
        far += abs(_twice_u(side, rest) - m * n) >= observed
        total += 1
    assert total == math.comb(m + n, m)
    return _twice_u(x, y) / 2, far / total


def _cases() -> list[tuple[list[float], list[float]]]:
    """Samples of every size pair up to 5 a side: whole numbers from ranges of 1 to 5 values (ties on most
    draws, all values equal on some) and values without ties."""
    rng = random.Random(18)
    found = []
    for m, n in itertools.product(range(1, 6), repeat=2):
        for levels in (1, 2, 3, 5, None):
            for _ in range(8):
                if levels is None:
                    draw = [rng.random() for _ in range(m + n)]
                else:
                    draw = [float(rng.randrange(levels)) for _ in range(m + n)]
                found.append((draw[:m], draw[m:]))
    return found


def test_p_values_equal_the_enumeration_of_every_split_up_to_five_a_side() -> None:
    cases = _cases()
    tied = 0
    for x, y in cases:
        test = mann_whitney_u(x, y)
        u, p = _by_enumeration(x, y)
        assert test.exact, (x, y)
        assert test.u == u, (x, y)
        assert test.p == pytest.approx(p, abs=1e-9), (x, y)
        # never below the observed split's own weight; never below min_p_value when the sides are equal
        assert test.p >= 1 / math.comb(len(x) + len(y), len(x)) - 1e-12
        assert len(x) != len(y) or test.p >= min_p_value(len(x), len(y)) - 1e-12
        tied += len(set(x + y)) < len(x + y)
    assert len(cases) == 25 * 40 and tied > 600  # most cases have ties, and each size pair has some without


@pytest.mark.parametrize(("x", "y", "p"), [
    ([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], 2 / 70),  # only the observed split and its mirror are as far
    ([1.0, 2.0, 2.0, 3.0], [3.0, 4.0, 5.0, 6.0], 4 / 70),
    ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], 0.1),
])
def test_ties_in_small_samples_are_exact(x: list[float], y: list[float], p: float) -> None:
    # the normal approximation gave 0.013, 0.041 and 0.047 here: significant where the exact test is not
    test = mann_whitney_u(x, y)
    assert test.exact
    assert test.p == pytest.approx(p, abs=1e-12)
    assert mann_whitney_u(y, x).p == pytest.approx(p, abs=1e-12)


def test_constant_unequal_sides_reach_below_the_untied_smallest_p() -> None:
    # No split puts the three values above the four, so only the observed split is as far from mn/2 as it is
    test = mann_whitney_u([0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0])
    assert test.exact and test.u == 0
    assert test.p == pytest.approx(1 / 35, abs=1e-12) and test.p < min_p_value(3, 4) == pytest.approx(2 / 35)


def test_ties_at_five_a_side_are_exact() -> None:
    # the normal approximation (R's wilcox.test with continuity correction) gives 0.03445 here
    x, y = [1.0, 2.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 5.0, 6.0]
    test = mann_whitney_u(x, y)
    assert test.exact and test.u == 2
    assert test.p == pytest.approx(_by_enumeration(x, y)[1], abs=1e-12)
    assert test.p == pytest.approx(10 / 252, abs=1e-12)


def test_two_values_at_forty_a_side_are_exact_where_the_normal_approximation_is_not() -> None:
    # With two distinct values U is affine in the number of high values in x, which is hypergeometric
    x = [0.0] * 26 + [1.0] * 14
    y = [0.0] * 16 + [1.0] * 24
    test = mann_whitney_u(x, y)
    assert test.exact
    high, m, total = 38, 40, 80
    mean = m * high / total
    exact = sum(scipy_stats.hypergeom.pmf(j, total, high, m) for j in range(m + 1)
                if abs(j - mean) >= abs(14 - mean) - 1e-9)
    assert test.p == pytest.approx(exact, abs=1e-9)
    normal = scipy_stats.mannwhitneyu(x, y, method="asymptotic").pvalue
    assert abs(normal - exact) > 0.005  # U moves in steps of 40: the approximation would have been off


def test_large_samples_use_the_normal_approximation_close_to_the_exact_p() -> None:
    x = [float(i) for i in range(110)]
    y = [float(i) + 0.5 for i in range(10, 120)]  # 110 * 110 pairs: past the exact distribution's bound
    assert len(x) * len(y) > EXACT_MAX_PAIRS
    test = mann_whitney_u(x, y)
    assert not test.exact
    u = sum(a > b for a in x for b in y)  # U counted pair by pair; no ties, so the variance is m*n*(N+1)/12
    assert test.u == u
    mean = 110 * 110 / 2
    z = (abs(u - mean) - 0.5) / math.sqrt(110 * 110 * 221 / 12)
    assert test.p == pytest.approx(math.erfc(z / math.sqrt(2)))
    exact = scipy_stats.mannwhitneyu(x, y, method="exact").pvalue
    assert 0.001 < exact < 0.5 and test.p == pytest.approx(exact, abs=0.002)


def test_large_samples_with_fine_ties_use_the_normal_approximation_close_to_the_permutation_p() -> None:
    rng = random.Random(7)
    x = [float(rng.randrange(40)) for _ in range(70)]
    y = [float(rng.randrange(40) + 4) for _ in range(70)]
    test = mann_whitney_u(x, y)
    assert not test.exact
    pooled = x + y
    tie_term = sum(t**3 - t for t in (pooled.count(v) for v in set(pooled)))
    sd = math.sqrt(70 * 70 / 12 * (141 - tie_term / (140 * 139)))
    assert test.u == _twice_u(x, y) / 2
    assert test.p == pytest.approx(math.erfc((abs(test.u - 2450) - 0.5) / sd / math.sqrt(2)))

    def distance(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return np.abs(scipy_stats.mannwhitneyu(a, b, axis=axis, method="asymptotic").statistic - 2450)

    sampled = scipy_stats.permutation_test((x, y), distance, permutation_type="independent", vectorized=True,
                                           n_resamples=20_000, alternative="greater", rng=3).pvalue
    assert 0.005 < sampled < 0.3 and test.p == pytest.approx(sampled, abs=0.01)


@pytest.mark.parametrize(("x", "y"), [([5.0], [5.0]), ([2.0] * 3, [2.0] * 4), ([0.0] * 80, [0.0] * 150)])
def test_all_equal_values_give_p_one(x: list[float], y: list[float]) -> None:
    test = mann_whitney_u(x, y)
    assert test.p == 1.0 and test.u == len(x) * len(y) / 2


def test_exact_and_normal_agree_roughly_on_moderate_samples() -> None:
    x = [1.0, 2.5, 3.1, 4.7, 5.2, 6.9, 7.3, 8.8, 9.4, 10.6]
    y = [3.3, 5.9, 6.1, 8.0, 9.9, 11.2, 12.5, 13.1, 14.8, 15.0]
    exact = mann_whitney_u(x, y)
    assert exact.exact
    mean, sd = 50, math.sqrt(100 * 21 / 12)
    normal = math.erfc((abs(exact.u - mean) - 0.5) / sd / math.sqrt(2))
    assert exact.p == pytest.approx(normal, abs=0.01)


def test_the_smallest_reachable_p_and_the_samples_a_difference_needs() -> None:
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(4, 4) == pytest.approx(2 / 70)
    assert min_p_value(1, 1) == 1.0
    assert samples_needed(0.05) == 4
    assert samples_needed(0.2) == 3
    assert samples_needed(0.01) == 5


def test_median_and_spread() -> None:
    found = summarize([0.97, 1.0, 1.03, 1.2])
    assert (found.n, found.low, found.high) == (4, 0.97, 1.2)
    assert found.median == pytest.approx(1.015)
    assert found.spread_pct == pytest.approx((1.2 - 1.015) / 1.015 * 100)
    assert spread_text(found) == "± 18 %"
    assert spread_text(summarize([2.0])) == ""
    assert spread_text(summarize([2.0, 2.0, 2.0])) == "± 0 %"
    assert spread_text(summarize([0.0, 0.0, 1.0])) == "± ∞"
    assert spread_text(summarize([100.0, 100.5, 99.8])) == "± 0.5 %"
    with pytest.raises(ValueError):
        summarize([])


def test_p_text() -> None:
    assert p_text(0.0079) == "p=0.008"
    assert p_text(1.0) == "p=1.000"
    assert p_text(0.0001) == "p<0.001"
