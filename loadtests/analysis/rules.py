"""When a candidate's figure counts as worse than a baseline's: the regression rules and the cut-offs they give,
one place for every reader.

Every compared figure is lower-is-better. A rule gives, for a baseline value `a`, the value B must exceed to be
past the threshold (`threshold`): latency and CPU need both a relative and an absolute margin, so noise on tiny
numbers (3 ms -> 5 ms, 2 % -> 4 % CPU) is not a regression; memory a relative one; counts (5xx, 429) an absolute
one. The cut-offs (`cutoffs`) add to the threshold the recorded noise either way. The judge (judge.py: `loadtest
compare`, the baseline gate, the upgrade rehearsal, `loadtest history`) and the run report's own comparison with a
dropped second report (which applies the cut-offs computed here, never rules of its own) all decide through them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadtests.analysis.noise import Noise
from loadtests.config.plan import REGRESSION_DEFAULTS
from loadtests.errors import CompareError

RULES = ("latency", "memory", "cpu", "errors_5xx", "throttled_429")


def limits_from(thresholds: dict[str, Any] | None) -> dict[str, float]:
    """REGRESSION_DEFAULTS with overrides, refusing unknown keys and non-numbers in one line."""
    merged = dict(REGRESSION_DEFAULTS)
    for key, value in (thresholds or {}).items():
        if key not in REGRESSION_DEFAULTS:
            raise CompareError(f"compare thresholds: unknown key {key!r}; expected one of: "
                               f"{', '.join(REGRESSION_DEFAULTS)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
            raise CompareError(f"compare thresholds: {key} must be a finite number >= 0 (got {value!r})")
        if key == "alpha" and not 0 < value < 1:
            raise CompareError(f"compare thresholds: alpha must be between 0 and 1, e.g. 0.05 (got {value!r})")
        merged[key] = float(value)
    return merged


def rule_text(rule: str, limits: dict[str, float]) -> str:
    """The rule in words, for tables and JUnit messages."""
    return {
        "latency": f"worse by > {limits['latency_pct']:g} % and > {limits['latency_abs_s'] * 1000:g} ms",
        "memory": f"larger by > {limits['memory_pct']:g} %",
        "cpu": f"higher by > {limits['cpu_pct']:g} % and > {limits['cpu_abs_points']:g} points",
        "errors_5xx": f"more than {limits['errors_5xx_extra']:g} extra 5xx",
        "throttled_429": f"more than {limits['throttled_429_extra']:g} extra 429",
    }[rule]


def threshold(rule: str, a: float, limits: dict[str, float]) -> float:
    """The value B must exceed to be worse than `a` beyond the rule's margins."""
    if rule == "latency":
        return max(a * (1 + limits["latency_pct"] / 100), a + limits["latency_abs_s"])
    if rule == "memory":
        return a * (1 + limits["memory_pct"] / 100)
    if rule == "cpu":
        return max(a * (1 + limits["cpu_pct"] / 100), a + limits["cpu_abs_points"])
    if rule == "errors_5xx":
        return a + limits["errors_5xx_extra"]
    if rule == "throttled_429":
        return a + limits["throttled_429_extra"]
    raise ValueError(f"unknown regression rule {rule!r}")


def regressed(rule: str, a: float, b: float, limits: dict[str, float]) -> bool:
    """Whether B is worse than A beyond the rule's margins."""
    return b > threshold(rule, a, limits)


@dataclass(frozen=True)
class Cutoffs:
    """What a candidate's figure must pass for each verdict against a baseline's, computed from the baseline
    alone: the judge decides through these, and a report page compares itself with a dropped second report by
    applying the numbers its baseline page carries, never rules of its own. B is past the threshold when its
    lowest possible value exceeds `regress_above`; beyond the recorded noise upwards when its lowest exceeds
    `noise_above`, downwards when its highest is under `noise_below` (both None without a record)."""

    regress_above: float
    noise_above: float | None = None
    noise_below: float | None = None


def cutoffs(rule: str, a_low: float, a_high: float, limits: dict[str, float],
            floor: Noise | None = None) -> Cutoffs:
    """A baseline interval's cut-offs (bounds at their worst for a regression: A as high as it can be)."""
    if floor is None:
        return Cutoffs(threshold(rule, a_high, limits))
    return Cutoffs(threshold(rule, a_high, limits), floor.ceiling(a_high), floor.floor_of(a_low))
