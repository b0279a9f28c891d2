"""API Priority and Fairness per priority level over a step's window (the flow-control probe; absent in older
files), and who the run's clients were to it (measured once a run; absent in older files).

Step keys (results.json):

    flow_control: list of FlowControlLevel, one per priority level that dispatched, queued or rejected anything
        in the window, from apiserver_flowcontrol_* deltas between the window's two scrapes: dispatched,
        queued (waited longer than queued_over_s, the wait histogram's first bound above 0: every request
        through a queue waits microseconds, so only one past that bound found its seats taken), rejected (all
        reasons; null where APF is off), waited (requests the wait histogram counted), wait_p99_s and
        wait_bound ("<" or ">" where the p99 is only a histogram bound), in_queue_at_close (the gauge at the
        window's close). Every request the apiservers served counts, whoever sent it; [] where APF is off.
        flow_schemas: the same figures per FlowSchema that sent the level requests (FlowControlSchema, by
        requests dispatched, most first; [] in files written before they were kept).

Run keys (results.json):

    clients: list of ClientClass, one per class of the harness's clients (the harness itself, the load, nodes
        joining, each tenant's scenarios), as the apiserver answered one SelfSubjectReview sent as each at the
        start of the run: the user and groups it authenticated, and the FlowSchema and priority level flow
        control chose (the response headers X-Kubernetes-PF-FlowSchema-UID and -PriorityLevel-UID, named from
        the cluster's flowschemas and prioritylevelconfigurations), exempt when that level's type is Exempt.
        [] where not measured (files written before it).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FlowControlSchema:
    """One FlowSchema's requests within its priority level in the window (None: not measured)."""

    flow_schema: str
    dispatched: int | None = None
    queued: int | None = None  # waited longer than the level's queued_over_s
    rejected: int | None = None
    waited: int | None = None
    wait_p99_s: float | None = None
    wait_bound: str = ""
    in_queue_at_close: int | None = None


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
    flow_schemas: list[FlowControlSchema] = field(default_factory=list)  # []: not kept (older files)


@dataclass
class FlowControlSection:
    """The step's flow-control rows (empty: not measured, or APF off)."""

    flow_control: list[FlowControlLevel] = field(default_factory=list)


@dataclass
class ClientClass:
    """Who one class of the harness's clients is to the apiserver, as it answered a request sent as them
    ("": not learnt; note says why)."""

    client: str  # the class: "harness", "load", "nodes joining", a tenant's scenarios
    user: str = ""
    groups: list[str] = field(default_factory=list)
    flow_schema: str = ""
    priority_level: str = ""
    exempt: bool | None = None  # the priority level's type is Exempt (None: its type was not read)
    note: str = ""  # what could not be learnt, and why
