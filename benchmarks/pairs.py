"""Runs side by side in pairs, A then B, then B then A, ..., and the exact test of their differences: how the cost
benchmarks (audit_cost, profiling_cost, node_agents_cost) tell an effect from the machine's drift. A steady drift
falls on both sides of a pair; a pair's difference cancels it."""

from __future__ import annotations

import statistics

from scipy import stats as scipy_stats


def second_first(index: int) -> bool:
    """Whether the index-th run (0-based) is the pair's B side: A-B, B-A, A-B, ..."""
    return (index % 2 == 1) != (index // 2 % 2 == 1)


def signed(value: float) -> str:
    return f"{0.0 if abs(value) < 0.05 else value:+.1f}"


def test_line(points: list[float], what: str, unit: str, effect: str) -> str:
    """The pairs' differences (B − A) tested against zero with the exact Wilcoxon signed-rank test, in a line that
    says when there are too few pairs to reach p < 0.05 at all (fewer than 6)."""
    if len(points) < 2 or all(p == 0 for p in points):
        return f"{what}: too few pairs (or no difference) for a test."
    p_value = float(scipy_stats.wilcoxon(points, alternative="two-sided", method="exact").pvalue)
    smallest = 2 / 2 ** len(points)
    verdict = f"{effect}: the pairs differ from zero" if p_value < 0.05 else (
        "not distinguishable from zero at this many pairs" + (
            f" ({len(points)} pairs cannot reach p < 0.05: the smallest p is {smallest:.3f})" if smallest >= 0.05
            else ""))
    return (f"{what}: per pair {', '.join(signed(p) for p in points)} {unit} (median "
            f"{signed(statistics.median(points))}); Wilcoxon signed-rank test (exact, two-sided) p = {p_value:.3f}: "
            f"{verdict}.")
