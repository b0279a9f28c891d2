"""Small-sample statistics for comparing repeated runs, in the manner of Go's benchstat.

Each side of a comparison is a handful of runs; every figure then has a few values per side. A side is
summarised by its median and its spread (min-max, and the larger distance from the median to either end, as a
percentage of the median: benchstat's "± x %"). Whether two sides differ beyond noise is decided by a two-sided
Mann-Whitney U test, which assumes nothing about the shape of the distributions.

Its p-value is exact at the sizes repeats have (EXACT_MAX_PAIRS, EXACT_MAX_WORK): under the null hypothesis
each of the C(m+n, m) ways to split the pooled values into sides of sizes m and n is equally likely, ties staying
as observed, and p = P(|U - mn/2| >= |u - mn/2|) over those splits. Without ties that is scipy's exact
distribution of U. With ties (common here: values on the same histogram bucket bound, zero counts) scipy's exact
method does not apply and its permutation test visits the splits one by one (seconds at 10 a side), so the splits
are counted per group of tied values instead (_split_counts). Past those costs, the normal approximation with tie
and continuity correction (scipy's asymptotic method).

The few other distributions analysis needs (Student's t for the intervals of a slope, a growth's shape and a
projection's band) are asked of scipy here too, so that scipy is imported in this one module.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

# Exact p-values are computed while they are cheap, which covers any comparison of runs (a handful a side): without
# ties scipy's exact distribution of U costs about (mn/2)**2 steps (mn <= 10000: under 0.1 s, e.g. 100 a side); with
# ties, counting the splits costs _split_work additions (<= 5e7: under 0.1 s, e.g. 50 a side). Past them, the
# normal approximation with tie and continuity correction. Without ties it is within 0.002 of the exact p once the
# smaller side has 20 values (a smaller side reaches it only against 500 values or more). With ties it is as close
# when the values are fine (10 or more distinct: within 0.001 at 30 a side); with two or three distinct values U
# moves in wide steps that it smooths over, and it is up to 0.05 off near p = 0.05 at any size (measured to 75 a
# side): that is the price of not counting past 5e7.
EXACT_MAX_PAIRS = 10_000
EXACT_MAX_WORK = 50_000_000


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported when first asked: importing it takes about a second, which every `loadtest`
    command paid at its start (this module is imported to build the command line) though most never ask it."""
    from scipy import stats

    return stats


def _scipy_special() -> ModuleType:
    from scipy import special

    return special
# samples_needed advises at most this many runs a side (2 / C(60, 30) ~ 2e-17: any alpha is reached by then).
MOST_SAMPLES_NEEDED = 30
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
    exact: bool  # from the exact distribution of U given the ties, or (False) the normal approximation


def _split_counts(k: int, ties: Sequence[int]) -> np.ndarray:
    """How many of the C(N, k) ways to pick k of the N pooled values give each rank sum: entry s counts the picks
    whose ranks sum to s / 2 (tied values share their average rank, so twice the sum is whole). `ties` are the
    sizes of the groups of equal values, lowest values first. A pick takes j values of a group of t in C(t, j)
    ways, all adding the same rank; groups are added one at a time, ways[i][s] counting picks of i values so far.
    Floats: exact up to 2**53 ways, a relative error of 1e-16 beyond."""
    top = k * (2 * sum(ties) - k + 1)  # twice the largest rank sum of k values
    ways = np.zeros((k + 1, top + 1))
    ways[0, 0] = 1.0
    below = 0  # values in the groups added so far
    for t in ties:
        twice_rank = 2 * below + t + 1  # twice the group's average rank
        grown = ways.copy()  # picks taking none of this group
        for j in range(1, min(t, k) + 1):
            shift = j * twice_rank  # never past top: j values of a group rank no higher than the k highest ranks
            grown[j:, shift:] += math.comb(t, j) * ways[: k + 1 - j, : top + 1 - shift]
        ways = grown
        below += t
    return ways[k]


def _split_work(k: int, ties: Sequence[int]) -> int:
    """The additions _split_counts(k, ties) makes: one table of (k + 1) rows by its rank sums per value taken."""
    return sum(min(t, k) for t in ties) * (k + 1) * (k * (2 * sum(ties) - k + 1) + 1)


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the exact test gives these sample sizes without ties (fully separated).
    Ties never lower it for equal sizes (a split and its swap are equally far from mn/2). For unequal sizes they
    can, down to 1 / C(n1 + n2, n1), the weight of the observed split alone: [0, 0, 0] against [1, 1, 1, 1] gives
    1/35, since no split puts the smaller side all above the other."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def samples_needed(alpha: float) -> int:
    """The fewest samples per side (equal sides) with which a difference can be significant at `alpha`."""
    n = MIN_SAMPLES
    while min_p_value(n, n) >= alpha and n < MOST_SAMPLES_NEEDED:
        n += 1
    return n


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> UTest:
    """Two-sided Mann-Whitney U test: do x and y come from the same distribution?"""
    if not x or not y:
        raise ValueError("the U test needs at least one value on each side")
    m, n = len(x), len(y)
    pooled = np.array([*x, *y], dtype=float)
    ranks = _scipy_stats().rankdata(pooled)
    u = float(ranks[:m].sum() - m * (m + 1) / 2)
    ties = np.unique(pooled, return_counts=True)[1]
    if len(ties) == 1:  # every value the same: every split gives U = mn/2, no evidence of any difference
        return UTest(u=u, p=1.0, exact=True)
    # |U - mn/2| is the same for either side, so the smaller one is counted (cheaper), in half units of U
    k, side = (m, ranks[:m]) if m <= n else (n, ranks[m:])
    if (ties == 1).all() and m * n <= EXACT_MAX_PAIRS:  # scipy's exact distribution holds only without ties
        return UTest(u=u, p=float(_scipy_stats().mannwhitneyu(x, y, method="exact").pvalue), exact=True)
    if (ties > 1).any() and _split_work(k, ties.tolist()) <= EXACT_MAX_WORK:
        counts = _split_counts(k, ties.tolist())
        offset = k * (k + 1) + m * n  # twice the rank sum at which U = mn/2
        observed = abs(round(2 * float(side.sum())) - offset)
        far = np.abs(np.arange(len(counts)) - offset) >= observed
        return UTest(u=u, p=min(1.0, float(counts[far].sum() / counts.sum())), exact=True)
    p = _scipy_stats().mannwhitneyu(x, y, method="asymptotic", use_continuity=True).pvalue
    return UTest(u=u, p=float(p), exact=False)


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile: the value a t-distributed variable with `dof` degrees of freedom falls below with
    probability p (0.975 gives the half-width factor of a 95 % interval)."""
    return float(_scipy_stats().t.ppf(p, dof))


def t_cdf(dof: float, x: np.ndarray | float) -> np.ndarray | float:
    """Student's t distribution function at x (scipy.special.stdtr), elementwise for an array."""
    return _scipy_special().stdtr(dof, x)


def slope_interval(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, tuple[float, float] | None]:
    """Least-squares slope and its 95 % interval (t with n-2 degrees of freedom); no interval from 2 points."""
    fitted = _scipy_stats().linregress(xs, ys)
    if len(xs) < 3:
        return float(fitted.slope), None
    t = t_quantile(0.975, len(xs) - 2)
    return float(fitted.slope), (float(fitted.slope - t * fitted.stderr), float(fitted.slope + t * fitted.stderr))


def theil_sen(xs: Sequence[float], ys: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float, float]:
    """Theil-Sen slope (the median of the pairwise slopes: a few outliers move it little), its intercept and Sen's
    `confidence` interval of the slope (from Kendall's tau; it assumes independent points)."""
    slope, intercept, low, high = _scipy_stats().theilslopes(ys, xs, alpha=confidence)
    return float(slope), float(intercept), float(low), float(high)


# The single-run noise floor's level: a second run of one build rises above (or falls below) a first beyond its
# prediction interval 1 % of the time, if the figure's run-to-run values are log-normal.
PREDICTION_ALPHA = 0.01


def prediction_ratio(values: Sequence[float], alpha: float = PREDICTION_ALPHA) -> float:
    """How many times a first run's value a second run of the same build may reach, from `values` (the same
    figure in several runs of one build, all > 0): exp(t(1 - alpha/2, n - 1) · s · √2), s the standard deviation
    of their logs. A two-sided prediction interval for the log ratio of two new runs, each a draw with the runs'
    spread: wider than the runs' own max / min, as a sixth run lands outside the range of five one time in three,
    and wider still the fewer the runs (the t quantile)."""
    if len(values) < 2 or min(values) <= 0:
        raise ValueError("a prediction interval needs two or more values, all > 0")
    logs = np.log(np.asarray(values, dtype=float))
    return math.exp(t_quantile(1 - alpha / 2, len(values) - 1) * float(np.std(logs, ddof=1)) * math.sqrt(2))
