"""The statistics behind noise-aware comparisons: Mann-Whitney U against known values, median and spread."""

from __future__ import annotations

import math

import pytest

from loadtests.report.stats import (
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


def test_ties_use_the_normal_approximation_with_tie_correction() -> None:
    # R: wilcox.test(c(1, 2, 2, 3, 4), c(3, 4, 5, 5, 6)) -> W = 2, p-value = 0.03445 (with continuity correction)
    test = mann_whitney_u([1.0, 2.0, 2.0, 3.0, 4.0], [3.0, 4.0, 5.0, 5.0, 6.0])
    assert not test.exact
    assert test.u == 2
    assert test.p == pytest.approx(0.03445, abs=5e-5)


def test_large_samples_use_the_normal_approximation() -> None:
    x = [float(i) for i in range(40)]
    y = [float(i) + 0.5 for i in range(10, 50)]  # 80 values in all: beyond the exact table
    test = mann_whitney_u(x, y)
    assert not test.exact
    u = sum(a > b for a in x for b in y)  # U counted pair by pair; no ties, so the variance is m*n*(N+1)/12
    assert test.u == u
    z = (abs(u - 800) - 0.5) / math.sqrt(40 * 40 * 81 / 12)
    assert test.p == pytest.approx(math.erfc(z / math.sqrt(2)))


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
