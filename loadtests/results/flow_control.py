"""API Priority and Fairness per priority level over a step's window (the flow-control probe; absent in older
files).

Step keys (results.json):

    flow_control: list of FlowControlLevel, one per priority level that dispatched, queued or rejected anything
        in the window, from apiserver_flowcontrol_* deltas between the window's two scrapes: dispatched,
        queued (waited longer than queued_over_s, the wait histogram's first bound above 0: every request
        through a queue waits microseconds, so only one past that bound found its seats taken), rejected (all
        reasons; null where APF is off), waited (requests the wait histogram counted), wait_p99_s and
        wait_bound ("<" or ">" where the p99 is only a histogram bound), in_queue_at_close (the gauge at the
        window's close). Every request the apiservers served counts, whoever sent it; [] where APF is off.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FlowControlLevel:
    """One priority level's requests in the window (None: not measured)."""

    priority_level: str
    dispatched: int | None = None
    queued: int | None = None  # waited longer than queued_over_s (its seats were taken): a bound's count
    queued_over_s: float | None = None  # the wait histogram's first bound above 0
    rejected: int | None = None
    waited: int | None = None
    wait_p99_s: float | None = None
    wait_bound: str = ""
    in_queue_at_close: int | None = None


@dataclass
class FlowControlSection:
    """The step's flow-control rows (empty: not measured, or APF off)."""

    flow_control: list[FlowControlLevel] = field(default_factory=list)
