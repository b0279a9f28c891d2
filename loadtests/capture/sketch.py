"""Quantiles of a stream in bounded memory: an audit log of millions of requests is summed, never kept.

The first EXACT values are kept as they are, so a small sample's quantiles are exact (nearest rank, as
results.distribution does); beyond that they are counted in buckets 1 % wide and a quantile is its bucket's upper
edge (the largest value seen caps it): at most 1 % above the value it stands for, never below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EXACT = 1000
RATIO = 1.01  # each bucket's upper edge is 1 % above its lower one
FLOOR = 1e-6  # values at or below it share the first bucket (a microsecond; a limit of 0)
_LOG_RATIO = math.log(RATIO)
FEW = 100  # below this many values, the p99 is their maximum


@dataclass(frozen=True)
class Quantiles:
    """p50, p90, p99 and the maximum of a sample; `exact` false where they are bucket edges (≤ 1 % above)."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float
    exact: bool = True

    def to_dict(self, digits: int = 6) -> dict[str, object]:
        """Rounded to `digits` (0: whole numbers, as a LIST's limit is)."""
        def rounded(value: float) -> float | int:
            return round(value) if digits == 0 else round(value, digits)

        out: dict[str, object] = {"count": self.count, "p50": rounded(self.p50), "p90": rounded(self.p90),
                                  "p99": rounded(self.p99), "max": rounded(self.max)}
        if self.count < FEW:
            out["p99_is_max"] = True  # of so few, the p99 is their slowest (largest), and says so
        if not self.exact:
            out["within"] = "1 % above"
        return out


class Sketch:
    """Values added one by one; their quantiles in memory that does not grow with their number past EXACT."""

    def __init__(self) -> None:
        self.count = 0
        self.max = -math.inf
        self._values: list[float] | None = []
        self._buckets: dict[int, int] = {}

    def add(self, value: float) -> None:
        self.count += 1
        self.max = max(self.max, value)
        if self._values is None:
            self._bucket(value)
            return
        self._values.append(value)
        if len(self._values) > EXACT:
            for kept in self._values:
                self._bucket(kept)
            self._values = None

    def _bucket(self, value: float) -> None:
        index = 0 if value <= FLOOR else math.ceil(math.log(value / FLOOR) / _LOG_RATIO)
        self._buckets[index] = self._buckets.get(index, 0) + 1

    def quantile(self, fraction: float) -> float | None:
        """The nearest-rank quantile: the smallest value with at least `fraction` of the values at or below it
        (its bucket's upper edge once the values are in buckets); None for no values."""
        if not self.count:
            return None
        rank = max(1, math.ceil(round(fraction * self.count, 9)))
        if self._values is not None:
            return sorted(self._values)[rank - 1]
        seen = 0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                return min(FLOOR * RATIO ** index, self.max)
        return self.max

    def quantiles(self) -> Quantiles | None:
        if not self.count:
            return None
        p50, p90, p99 = (self.quantile(q) or 0.0 for q in (0.50, 0.90, 0.99))
        return Quantiles(self.count, p50, p90, p99, self.max, exact=self._values is not None)
