"""Which probes measure a window (`measure:` in a plan), each declared once by name.

A plan may turn an optional probe off or on (`measure: {profiles: false, audit: false}`). A probe whose figures
the SLO and saturation verdicts stand on stays on and says why when asked to go. The probes' code lives in
measure/probes.py (its registry holds the same names: a unit test keeps the two lists equal); config names them
only, as it names scenarios without importing their code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtests.errors import PlanError


@dataclass(frozen=True)
class ProbeName:
    """One probe as a plan names it: on by default or not, and, where it cannot be turned off, why."""

    name: str
    about: str
    needed_for: str = ""  # non-empty: always on, for this
    default: bool = True


# In the order the probes start (measure/probes.PROBES): the window opens with the apiserver's scrape.
PROBES: tuple[ProbeName, ...] = (
    ProbeName("audit", "who sent each request, from the apiserver's audit log (where it is kept)"),
    ProbeName("etcd", "etcd's /metrics at the window's open and close: size, keys, disk latency"),
    ProbeName("apiserver", "the apiserver's /metrics at the window's open and close: server latency, codes",
              needed_for="the SLO verdicts on API latency"),
    ProbeName("flow_control", "API Priority and Fairness per priority level: dispatched, queued, rejected, wait"),
    ProbeName("objects", "objects per resource when the window closes, counted by a LIST each"),
    ProbeName("processes", "CPU and memory of every component, the load generator and the harness",
              needed_for="saying when the load generator or the harness was the bottleneck"),
    ProbeName("pod_startup", "create to Running of the churn's pods, seen by a watch",
              needed_for="the pod startup SLO verdict"),
    ProbeName("watch_delay", "write to event at a watcher, from a probe's own writes"),
    ProbeName("controlled", "asked to done of each object the objects scenario controls pods with"),
    ProbeName("health", "nodes, Leases, pods, queues and CPU sampled through the window",
              needed_for="the saturation verdict (nodes NotReady, Leases late)"),
    ProbeName("profiles", "pprof profiles of kube-apiserver and etcd (CPU over the window, heap at its close)"),
)
BY_NAME = {probe.name: probe for probe in PROBES}


def running(asked: dict[str, bool]) -> tuple[str, ...]:
    """The probes that run, in their order: those a plan asked for (`measure:`), the rest by their default."""
    return tuple(probe.name for probe in PROBES if asked.get(probe.name, probe.default))


def parse(source: str, value: Any) -> dict[str, bool]:
    """`measure:` as a mapping of probe name to true/false; one line for an unknown name (naming the choices) or
    for a probe the verdicts need."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(source, "measure", f"must be a mapping of probe name to true or false (got {value!r})")
    for name, on in value.items():
        if name not in BY_NAME:
            raise _error(source, f"measure.{name}", f"is not a probe; the probes are: {', '.join(BY_NAME)}")
        if not isinstance(on, bool):
            raise _error(source, f"measure.{name}", f"must be true or false (got {on!r})")
        if not on and (needed := BY_NAME[name].needed_for):
            raise _error(source, f"measure.{name}", f"cannot be turned off: it is needed for {needed}")
    return dict(value)


def _error(source: str, path: str, reason: str) -> PlanError:
    return PlanError(f"{source}: {path}: {reason}")  # as config.plan.field_error words it (plan imports this)
