"""The controlled pods' section of a step (measure/controlled.py): per kind of pod-controlling object of the
objects scenario (Deployment, StatefulSet, DaemonSet, Job), asked -> all its pods running.

Step keys (results.json):

    controlled: {kind: ControlledPods}: running (a Distribution, seconds), the slowest generations, and those
        deleted first, superseded or unfinished when the window closed
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtests.results.distribution import Distribution


@dataclass
class ControlledPods:
    """One kind of pod-controlling object over a window (measure/controlled.py): how long each generation of
    each object took from asked (created, scaled, updated) to done (all its pods running; a Job complete)."""

    running: Distribution = field(default_factory=Distribution)
    slowest: dict[str, float] = field(default_factory=dict)  # object (generation) -> seconds, slowest first
    deleted_first: int = 0  # generations whose object was deleted before its controller was done
    superseded: int = 0  # generations replaced by a newer one (updated or scaled again) before done
    unfinished: int = 0  # generations still not done when the window closed
    unfinished_named: list[str] = field(default_factory=list)

@dataclass
class ControlledSection:
    """Controlled pods per kind (empty: no objects scenario measured them)."""

    controlled: dict[str, ControlledPods] = field(default_factory=dict)
