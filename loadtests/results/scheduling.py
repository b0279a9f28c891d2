"""The scheduler-throughput section of a step (run/cl2.py: ClusterLoader2's scheduler-throughput phase).

Step keys (results.json):

    scheduling: SchedulingThroughput or null (no such phase in the step): pods scheduled per second in each
        interval, their quantiles, and the verdict on the best interval
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SchedulingThroughput:
    """Pods scheduled per second in each interval of a scheduler-throughput phase (as ClusterLoader2's
    SchedulingThroughput: pods with a node, counted every interval_s), from the pods' creation until every one
    had a node; nearest-rank quantiles of the intervals, and the verdict on the best one (as ClusterLoader2)."""

    pods: int = 0
    interval_s: float = 5.0
    samples: list[float] = field(default_factory=list)  # pods per second, one per interval, in order
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    threshold: float | None = None
    passed: bool | None = None  # None: not every pod was scheduled (nothing to judge the best interval on)
    seconds: float | None = None  # from the Deployment's creation until every pod had a node
    source: str = ""

@dataclass
class SchedulingSection:
    """The scheduler-throughput phase's figures (None: the step had no such phase)."""

    scheduling: SchedulingThroughput | None = None
