"""Quantiles of a sample of durations: the vocabulary of several sections (pod startup and watch delay, the
controlled pods' time to running, ClusterLoader2's phases)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Distribution:
    """Quantiles of a sample of durations, in seconds."""

    count: int = 0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    source: str = ""

    @classmethod
    def of(cls, samples: list[float], source: str) -> Distribution:
        if not samples:
            return cls(count=0, source=source)
        ordered = sorted(samples)

        def q(fraction: float) -> float:
            # nearest-rank: the smallest sample with at least `fraction` of the samples at or below it
            rank = max(1, math.ceil(round(fraction * len(ordered), 9)))
            return ordered[min(len(ordered), rank) - 1]

        return cls(count=len(ordered), p50=q(0.50), p90=q(0.90), p99=q(0.99), max=ordered[-1], source=source)
