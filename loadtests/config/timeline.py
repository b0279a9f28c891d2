"""A replayed class's rate over time (`workload.shape: timeline`): the captured per-minute curve, fitted to the
step's measured window, as a multiple of the class's mean rate at each moment.

The curve's minutes keep their order and their relative lengths (a partial first or last minute is shorter).
A window shorter than the captured span holds one pass of the whole curve, compressed; a longer one holds the
fewest whole passes that are no longer than the captured span (the curve looped, each pass compressed by less
than half, never stretched). Whole passes keep the class's mean over the window its captured mean × k,
which the replay's fidelity judges. Before the window opens (the load's start) and after its passes, the rate is
the mean.

The times of a class's requests come from its count: the j-th request is due when the count reaches j + ½, the
count being the mean rate × `mean_count` of the time since the window opened (`time_of` its inverse), so every
user of a class keeps its turns as it does at a constant rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from loadtests.errors import PlanError


@dataclass(frozen=True)
class Timeline:
    """One pass of a curve as (seconds, factor) segments, each factor a multiple of the mean rate (the factors
    average 1 over the pass, weighted by seconds), played `passes` times from the window's opening."""

    segments: tuple[tuple[float, float], ...]
    passes: int = 1

    @property
    def pass_s(self) -> float:
        return sum(seconds for seconds, _ in self.segments)

    @property
    def peak(self) -> float:
        """The largest factor: the users a class needs are its mean rate × this (config/scenarios.py)."""
        return max([1.0, *(factor for _, factor in self.segments)])

    def mean_count(self, t: float) -> float:
        """Requests by `t` seconds after the window opened, in seconds of the mean rate (t itself at the mean:
        before the window and after its passes)."""
        span = self.pass_s * self.passes
        if t <= 0 or span <= 0:
            return t
        if t >= span:
            return t  # whole passes average the mean: the count is the mean's
        whole, rest = divmod(t, self.pass_s)
        count = whole * self.pass_s
        for seconds, factor in self.segments:
            part = min(rest, seconds)
            count, rest = count + part * factor, rest - part
            if rest <= 0:
                break
        return count

    def time_of(self, count: float) -> float:
        """When (seconds after the window opened) the mean-rate count reaches `count`: mean_count's inverse."""
        span = self.pass_s * self.passes
        if count <= 0 or span <= 0 or count >= span:
            return count
        whole, rest = divmod(count, self.pass_s)  # a pass counts its own length
        t = whole * self.pass_s
        for seconds, factor in self.segments:
            part = seconds * factor
            if factor > 0 and rest <= part:
                return t + rest / factor
            rest, t = rest - part, t + seconds
        return t

    def to_dict(self) -> dict[str, Any]:
        return {"segments": [[round(s, 3), round(f, 4)] for s, f in self.segments], "passes": self.passes}

    @classmethod
    def from_dict(cls, value: Any, where: str = "timeline") -> Timeline:
        """A row's `timeline` as the plan holds it; PlanError in one line where it is not one."""
        try:
            segments = tuple((float(s), float(f)) for s, f in value["segments"])
            passes = int(value["passes"])
        except (TypeError, KeyError, ValueError):
            raise PlanError(f"{where}: must be {{segments: [[seconds, factor], ...], passes}} (got {value!r:.80})")\
                from None
        if passes < 1 or not segments or any(not (math.isfinite(s) and math.isfinite(f)) or s < 0 or f < 0
                                              for s, f in segments):
            raise PlanError(f"{where}: segments of seconds and factors that are not negative, and 1 or more passes "
                            f"(got {value!r:.80})")
        return cls(segments, passes)


def fit(curve: Iterable[tuple[float, float]], window_s: float) -> Timeline | None:
    """The captured curve ((seconds, requests) per minute) fitted to a window of `window_s`: whole passes, each
    the window's share and no longer than captured, the factors each minute's rate over the curve's mean. None
    for a curve with no request or no length (the mean it is)."""
    minutes = [(s, n) for s, n in curve if s > 0]
    span, total = sum(s for s, _ in minutes), sum(n for _, n in minutes)
    if span <= 0 or total <= 0 or window_s <= 0:
        return None
    passes = max(1, math.ceil(window_s / span - 1e-9))
    stretch, mean = window_s / (passes * span), total / span
    return Timeline(tuple((s * stretch, n / s / mean) for s, n in minutes), passes)


def requests_by(timeline: Timeline | None, rate: float, opened: float | None, at: float) -> float:
    """A class's requests due by `at` (epoch seconds) at `rate` on average: rate × at without a timeline or before
    the window `opened`, then its timeline's count."""
    if timeline is None or opened is None:
        return at * rate
    return (opened + timeline.mean_count(at - opened)) * rate


def due_at(timeline: Timeline | None, rate: float, opened: float | None, j: int) -> float:
    """When a class's j-th request is due (epoch seconds): requests_by's inverse at j + ½."""
    if timeline is None or opened is None:
        return (j + 0.5) / rate
    return opened + timeline.time_of((j + 0.5) / rate - opened)


def first_due(timeline: Timeline | None, rate: float, opened: float | None, now: float) -> int:
    """The first of a class's requests due at or after `now`: a schedule taken anew (the window opening) sends
    none that was already due, so none twice."""
    return math.ceil(requests_by(timeline, rate, opened, now) - 0.5)
