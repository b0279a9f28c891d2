"""The pair design of the cost benchmarks: the order alternates A-B, B-A, and the exact rank test says when its
pairs are too few to show anything at all."""

from __future__ import annotations

from benchmarks import pairs


def test_the_order_alternates_within_and_across_pairs() -> None:
    assert [pairs.second_first(i) for i in range(8)] == [False, True, True, False, False, True, True, False]


def test_three_pairs_can_never_reach_significance_and_six_can() -> None:
    few = pairs.test_line([5.0, 6.0, 7.0], "CPU", "points", "it costs")
    assert "3 pairs cannot reach p < 0.05: the smallest p is 0.250" in few and "p = 0.250" in few
    six = pairs.test_line([5.0, 6.0, 7.0, 4.0, 8.0, 5.5], "CPU", "points", "it costs")
    assert "p = 0.031: it costs: the pairs differ from zero" in six
    assert pairs.test_line([1.0], "CPU", "points", "it costs") == "CPU: too few pairs (or no difference) for a test."
