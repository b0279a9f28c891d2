"""What a rolling upgrade came to: availability, recovery and the cluster's own losses, from what was recorded.

Nothing here is stored: `loadtest report` derives the same figures and verdicts from a step's RollResult and
its health summary. The steady range is measured, not assumed: the slowest probe of the seconds before the roll
began. Recovery is the time from the last instance back in rotation until the probe has been fully served, and
no slower than that steady range, for RECOVERY_HOLD_S seconds in a row.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from loadtests.results import RunResult, StepResult
from loadtests.results.roll import ProbeSecond, RollResult

RECOVERY_HOLD_S = 5  # seconds in a row within the steady range before the API counts as recovered
MIN_STEADY_SECONDS = 5  # fewer steady seconds than this give no range to recover to


@dataclass(frozen=True)
class RollFigures:
    """The probe's figures: over the roll (its start to the window's end) and over the steady seconds before."""

    roll_seconds: int
    seconds_served_pct: float | None  # seconds with every probe request served, % of the roll's seconds
    requests_served_pct: float | None  # probe requests served, % of those sent during the roll
    sent: int
    failed: dict[str, int] = field(default_factory=dict)  # by code or "connection"
    steady_seconds: int = 0
    steady_served_pct: float | None = None
    steady_slowest_s: float | None = None  # the steady range's top: the slowest probe before the roll
    roll_slowest_s: float | None = None
    recovery_s: float | None = None  # None: not back within the steady range before the window closed


@dataclass(frozen=True)
class RollVerdict:
    check: str  # "roll completed", "availability", "recovery", "nodes stayed Ready", "no pod evicted"
    passed: bool | None  # None: not measured
    value: str
    threshold: str


def _served_pct(seconds: list[ProbeSecond]) -> tuple[float | None, float | None]:
    if not seconds:
        return None, None
    full = sum(1 for s in seconds if s.served == s.sent)
    sent = sum(s.sent for s in seconds)
    return round(100.0 * full / len(seconds), 3), round(100.0 * sum(s.served for s in seconds) / sent, 3)


def _slowest(seconds: list[ProbeSecond]) -> float | None:
    found = [s.slowest_s for s in seconds if s.slowest_s is not None]
    return max(found) if found else None


def recovery_seconds(seconds: list[ProbeSecond], from_s: float, steady_top_s: float) -> float | None:
    """Seconds from `from_s` until RECOVERY_HOLD_S seconds in a row had every probe served no slower than
    `steady_top_s`; None when that did not happen among the seconds recorded."""
    after = [s for s in seconds if s.t >= int(from_s)]
    run_start: int | None = None
    previous: int | None = None
    for second in after:
        good = second.served == second.sent and second.slowest_s is not None and second.slowest_s <= steady_top_s
        contiguous = previous is not None and second.t == previous + 1
        if good:
            run_start = run_start if (run_start is not None and contiguous) else second.t
            if second.t - run_start + 1 >= RECOVERY_HOLD_S:
                return round(max(0.0, run_start - from_s), 3)
        else:
            run_start = None
        previous = second.t
    return None


def figures(roll: RollResult) -> RollFigures:
    steady = [s for s in roll.seconds if s.t < roll.started_at_s]
    during = [s for s in roll.seconds if s.t >= int(roll.started_at_s)]
    seconds_pct, requests_pct = _served_pct(during)
    steady_pct, _ = _served_pct(steady)
    failed: Counter[str] = Counter()
    for second in during:
        failed.update(second.failed)
    steady_top = _slowest(steady) if len(steady) >= MIN_STEADY_SECONDS else None
    recovery = None
    if steady_top is not None and roll.finished_at_s is not None:
        recovery = recovery_seconds(roll.seconds, roll.finished_at_s, steady_top)
    return RollFigures(roll_seconds=len(during), seconds_served_pct=seconds_pct, requests_served_pct=requests_pct,
                       sent=sum(s.sent for s in during), failed=dict(failed), steady_seconds=len(steady),
                       steady_served_pct=steady_pct, steady_slowest_s=steady_top, roll_slowest_s=_slowest(during),
                       recovery_s=recovery)


def _zero(value: float | None, what: str) -> tuple[bool | None, str]:
    if value is None:
        return None, f"not measured ({what})"
    return value == 0, f"{value:g}"


def verdicts(step: StepResult) -> list[RollVerdict]:
    """The roll's checks on one step; empty for a step without a roll."""
    roll = step.roll
    if roll is None:
        return []
    found = figures(roll)
    availability = roll.thresholds.get("availability_pct", 99.5)
    recovery_limit = roll.thresholds.get("recovery_s", 60.0)
    replaced = f"{len(roll.marks)} instances replaced" + (f"; stopped: {roll.error}" if roll.error else "")
    checks = [RollVerdict("roll completed", roll.finished_at_s is not None and roll.error is None, replaced,
                          "every instance on the new version")]
    if found.seconds_served_pct is None:
        checks.append(RollVerdict("availability", None, "not measured (no probe was sent during the roll)",
                                  f">= {availability:g} %"))
    else:
        checks.append(RollVerdict(
            "availability", found.seconds_served_pct >= availability,
            f"{found.seconds_served_pct:g} % of {found.roll_seconds} s fully served "
            f"({found.requests_served_pct:g} % of {found.sent} probe requests)", f">= {availability:g} % of seconds"))
    if found.steady_slowest_s is None:
        value, passed = f"not measured (fewer than {MIN_STEADY_SECONDS} steady seconds before the roll)", None
    elif roll.finished_at_s is None:
        value, passed = "not measured (the roll did not finish)", None
    elif found.recovery_s is None:
        value, passed = (f"not back within the steady range (slowest probe {found.steady_slowest_s * 1000:.0f} ms) "
                         "before the window closed"), False
    else:
        value, passed = f"{found.recovery_s:.1f} s", found.recovery_s <= recovery_limit
    checks.append(RollVerdict("recovery", passed, value, f"<= {recovery_limit:g} s"))
    summary = step.health.summary
    passed, value = _zero(summary.nodes_not_ready_max, "no health samples")
    checks.append(RollVerdict("nodes stayed Ready", passed, f"{value} NotReady at most", "0"))
    passed, value = _zero(summary.pods_evicted, "no health samples")
    checks.append(RollVerdict("no pod evicted", passed, value, "0"))
    return checks


def run_verdicts(run: RunResult) -> list[tuple[StepResult, RollVerdict]]:
    return [(step, verdict) for step in run.steps for verdict in verdicts(step)]

