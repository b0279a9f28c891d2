"""A soak: one step of a plan, its load held for hours and sampled every few seconds (`loadtest soak`).

The soak is the plan made into one step (the plan's first, or the one named) whose window lasts the soak's hours
(config/plan.soak_plan): the run walks it as any step, with one more part that samples it (run/parts.py
SoakSampling). Every check here refuses in one line, before anything starts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadtests.errors import PlanError

DEFAULT_INTERVAL_S = 30.0
MIN_INTERVAL_S = 1.0  # a sample of every page a second is already a load of its own
HOUR_S = 3600.0
# The first part of a soak is shown, not judged: the window opens with the step's probes starting (their threads,
# connections, pools and the allocator's arenas around them) and caches filling, so every process's memory steps up
# in its first minutes, which a slope over a short soak extrapolates to an hour. Unless asked otherwise, a tenth of
# the soak, at most SETTLE_MAX_S.
SETTLE_SHARE = 0.1
SETTLE_MAX_S = 900.0


@dataclass(frozen=True)
class SoakSettings:
    """What a soak asks: how long its load is held, how often it is sampled, and which of the plan's steps."""

    hours: float
    interval_s: float = DEFAULT_INTERVAL_S
    step: str = ""  # the plan's step of this name; "": its first
    settle_s: float | None = None  # seconds from the window's start not judged; None: SETTLE_SHARE, SETTLE_MAX_S

    @property
    def seconds(self) -> float:
        return self.hours * HOUR_S

    @property
    def settle_seconds(self) -> float:
        """The seconds from the window's start whose samples are shown, not judged."""
        return self.settle_s if self.settle_s is not None else min(SETTLE_SHARE * self.seconds, SETTLE_MAX_S)


# Below it a soak is run and judged, and said to be short: in four steady half-hour soaks at 5 nodes etcd's heap grew
# in all four, the apiserver's heap and CPU in two (benchmarks/results/soak_half_hour_*.md), cycles longer than the
# soak rather than leaks; the two-hour recorded soak judged none of them `grows`.
SHORT_SOAK_S = HOUR_S


def short_note(soak: SoakSettings) -> str | None:
    """The line a soak shorter than SHORT_SOAK_S gets (said as it starts and kept with its verdicts); None for one
    long enough."""
    if soak.seconds >= SHORT_SOAK_S:
        return None
    return (f"a soak of {soak.seconds / 60:.4g} min is shorter than an hour: the control plane's slow cycles (etcd's "
            "heap grew in each of four steady half-hour soaks) can be judged `grows` here; soak an hour or more "
            "before calling a growth a leak")


def hours_problem(hours: float) -> str | None:
    """Why `hours` is no soak's length (None: it is one)."""
    if not math.isfinite(hours) or hours <= 0:
        return f"the soak's hours must be a positive finite number, e.g. 2 or 0.5 (got {hours!r})"
    if hours * HOUR_S < 2 * MIN_INTERVAL_S:
        return f"a soak of {hours:g} h is shorter than two samples: give at least {2 * MIN_INTERVAL_S / HOUR_S:.4f} h"
    return None


def interval_problem(interval_s: float) -> str | None:
    """Why `interval_s` is no sampling interval (None: it is one)."""
    if not math.isfinite(interval_s) or interval_s < MIN_INTERVAL_S:
        return f"the sampling interval must be at least {MIN_INTERVAL_S:g} s (got {interval_s!r})"
    return None


def settle_problem(settle_s: float, hours: float | None = None) -> str | None:
    """Why `settle_s` is no settling time (of a soak of `hours`, when known; None: it is one)."""
    if not math.isfinite(settle_s) or settle_s < 0:
        return f"the settling time must be 0 or more seconds (got {settle_s!r})"
    if hours is not None and settle_s > hours * HOUR_S / 2:
        return (f"a settling time of {settle_s:g} s leaves less than half of a soak of {hours * HOUR_S:g} s judged: "
                "settle for less or soak longer")
    return None


def settings(hours: float, interval_s: float = DEFAULT_INTERVAL_S, step: str = "",
             settle_s: float | None = None) -> SoakSettings:
    """The soak's settings, checked: a PlanError in one line for what cannot be a soak."""
    for problem in (hours_problem(hours), interval_problem(interval_s)):
        if problem:
            raise PlanError(problem)
    if settle_s is not None and (problem := settle_problem(settle_s, hours)):
        raise PlanError(problem)
    if interval_s * 2 > hours * HOUR_S:
        raise PlanError(f"a soak of {hours * HOUR_S:g} s sampled every {interval_s:g} s has fewer than two samples: "
                        "sample more often or soak longer")
    return SoakSettings(hours, interval_s, step, settle_s)


def asked(section: SoakSettings | None, hours: float | None = None, interval_s: float | None = None,
          step: str | None = None, settle_s: float | None = None) -> SoakSettings:
    """The soak a command asks for: each flag given, else the plan's `soak:` section, else the default; hours
    must come from one of them."""
    if hours is None and section is None:
        raise PlanError("a soak needs its hours: give --hours H, or a `soak:` section with `hours` in the plan")
    return settings(hours if hours is not None else section.hours if section else 0.0,
                    interval_s if interval_s is not None else section.interval_s if section else DEFAULT_INTERVAL_S,
                    step if step is not None else section.step if section else "",
                    settle_s if settle_s is not None else section.settle_s if section else None)
