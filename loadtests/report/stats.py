"""Small-sample statistics for comparing repeated runs, in the manner of Go's benchstat.

Each side of a comparison is a handful of runs; every figure then has a few values per side. A side is
summarised by its median and its spread (min-max, and the larger distance from the median to either end, as a
percentage of the median: benchstat's "± x %"). Whether two sides differ beyond noise is decided by a two-sided
Mann-Whitney U test, which assumes nothing about the shape of the distributions: the exact distribution of U
for small samples without ties, the normal approximation with tie and continuity correction otherwise.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The exact distribution is counted in int64; C(60, 30) < 2**63, so sample sizes up to 60 in all are exact.
EXACT_MAX_TOTAL = 60
# Fewer samples than this on a side and no test is made (benchstat's rule of thumb as well).
MIN_SAMPLES = 3


@dataclass(frozen=True)
class Summary:
    """The values of one figure on one side: how many, their median and their range."""

    n: int
    median: float
    low: float
    high: float

    @property
    def spread_pct(self) -> float:
        """The larger distance from the median to the lowest or highest value, in % of the median
        (0 for a single value; infinite when the median is 0 and the values are not all 0)."""
        spread = max(self.median - self.low, self.high - self.median)
        if spread == 0:
            return 0.0
        if self.median == 0:
            return math.inf
        return spread / abs(self.median) * 100


def summarize(values: Sequence[float]) -> Summary:
    """Median and range of at least one value."""
    if not values:
        raise ValueError("summarize needs at least one value")
    return Summary(n=len(values), median=float(statistics.median(values)), low=float(min(values)),
                   high=float(max(values)))


def spread_text(summary: Summary) -> str:
    """"± 3 %" as benchstat prints it; empty for a single value."""
    if summary.n < 2:
        return ""
    pct = summary.spread_pct
    if math.isinf(pct):
        return "± ∞"
    return f"± {pct:.0f} %" if pct >= 1 or pct == 0 else f"± {pct:.1f} %"


def p_text(p: float) -> str:
    """"p=0.008" ("p<0.001" below that)."""
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


@dataclass(frozen=True)
class UTest:
    """The outcome of a two-sided Mann-Whitney U test of x against y."""

    u: float  # U of x: how often a value of x exceeds one of y (ties count one half)
    p: float  # two-sided p-value
    exact: bool  # from the exact distribution (no ties, small samples) or the normal approximation


def _ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks (ties get their average rank) and the size of every group of tied values."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    ties = []
    ordered = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or ordered[end] != ordered[start]:
            ranks[order[start:end]] = (start + 1 + end) / 2  # the average of ranks start+1 .. end
            ties.append(end - start)
            start = end
    return ranks, np.array(ties, dtype=float)


@functools.lru_cache(maxsize=256)
def _u_counts(m: int, n: int) -> tuple[int, ...]:
    """For samples of sizes m and n without ties: how many of the C(m+n, m) equally likely rank assignments
    give U = 0, 1, ..., m*n. Dynamic programming over ranks: ways[k][s] counts the ways to give k of the ranks
    seen so far to the first sample with rank sum s."""
    total = m + n
    top = sum(range(n + 1, total + 1))  # the largest rank sum of the first sample
    ways = np.zeros((m + 1, top + 1), dtype=np.int64)
    ways[0][0] = 1
    for rank in range(1, total + 1):
        for k in range(min(rank, m), 0, -1):
            ways[k][rank:] += ways[k - 1][: top + 1 - rank]
    lowest = m * (m + 1) // 2  # U = rank sum - its smallest possible value
    return tuple(int(c) for c in ways[m][lowest: lowest + m * n + 1])


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the exact test can give for these sample sizes (fully separated)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def samples_needed(alpha: float) -> int:
    """The fewest samples per side (equal sides) with which a difference can be significant at `alpha`."""
    n = MIN_SAMPLES
    while min_p_value(n, n) >= alpha and n < EXACT_MAX_TOTAL // 2:
        n += 1
    return n


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> UTest:
    """Two-sided Mann-Whitney U test: do x and y come from the same distribution?"""
    if not x or not y:
        raise ValueError("the U test needs at least one value on each side")
    m, n = len(x), len(y)
    ranks, ties = _ranks(np.array([*x, *y], dtype=float))
    u = float(ranks[:m].sum() - m * (m + 1) / 2)
    if (ties == 1).all() and m + n <= EXACT_MAX_TOTAL:
        counts = _u_counts(m, n)
        whole = int(round(u))
        below = sum(counts[: whole + 1])  # P(U <= u) * total
        above = sum(counts[whole:])  # P(U >= u) * total
        p = min(1.0, 2 * min(below, above) / math.comb(m + n, m))
        return UTest(u=u, p=p, exact=True)
    total = m + n
    mean = m * n / 2
    variance = m * n / 12 * ((total + 1) - float((ties**3 - ties).sum()) / (total * (total - 1)))
    if variance <= 0:  # every value the same: no evidence of any difference
        return UTest(u=u, p=1.0, exact=False)
    z = max(0.0, abs(u - mean) - 0.5) / math.sqrt(variance)
    return UTest(u=u, p=min(1.0, math.erfc(z / math.sqrt(2))), exact=False)
