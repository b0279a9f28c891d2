"""API Priority and Fairness over a window, per priority level and, within each, per FlowSchema, from the
apiserver's two scrapes: how many requests it dispatched, how many waited in a queue for their seats, how many it
rejected, and how long they waited.

What the figures cover: every request the apiserver(s) served in the window, whoever sent it (the load, the
fleet's kwok, the controllers, the harness's probes), grouped by the priority level its FlowSchema chose. Exempt
requests (system:masters among them) are dispatched without a queue, so they never wait and are never rejected.
Who the harness's own clients are to flow control is measured once a run (measure/client_classes.py);
clients_in_step puts each beside its FlowSchema's and priority level's figures of a step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.analysis.metrics import Histogram, LabelSet, Snapshot, counter_deltas, histogram_deltas
from loadtests.results.flow_control import ClientClass, FlowControlLevel, FlowControlSchema

DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
REJECTED = "apiserver_flowcontrol_rejected_requests_total"
WAIT = "apiserver_flowcontrol_request_wait_duration_seconds"
IN_QUEUE = "apiserver_flowcontrol_current_inqueue_requests"
# served by every apiserver with APF on, whether or not anything was rejected: a rejection counter that has no
# series then means none was rejected, where without it APF is off and rejections are not measured
NOMINAL_SEATS = "apiserver_flowcontrol_nominal_limit_seats"
FAMILIES = frozenset({DISPATCHED, REJECTED, WAIT, IN_QUEUE, NOMINAL_SEATS})
LEVEL = "priority_level"
SCHEMA = "flow_schema"

Key = tuple[str, ...]  # the values of the labels grouped by: (level,) or (level, flow schema)


@dataclass(frozen=True)
class _Window:
    """The APF families' deltas over a window, grouped by some of their labels."""

    dispatched: dict[Key, float]
    rejected: dict[Key, float]
    waits: dict[Key, Histogram]
    in_queue: dict[Key, float]
    apf_on: bool

    @classmethod
    def of(cls, start: Snapshot | None, end: Snapshot, by: tuple[str, ...]) -> _Window:
        def grouped(found: Mapping[LabelSet, Any]) -> dict[Key, Any]:
            out: dict[Key, Any] = {}
            for labels, value in found.items():
                key = tuple(dict(labels).get(label, "") for label in by)
                out[key] = out[key] + value if key in out else value
            return out

        return cls(dispatched=grouped(counter_deltas(start, end, DISPATCHED)),
                   rejected=grouped(counter_deltas(start, end, REJECTED)),
                   waits=grouped(histogram_deltas(start, end, WAIT, by)),
                   in_queue=grouped(dict(end.series(IN_QUEUE))),
                   apf_on=end.has(NOMINAL_SEATS) or end.has(REJECTED))

    def groups(self) -> list[Key]:
        return sorted(set(self.dispatched) | set(self.rejected) | set(self.waits) | set(self.in_queue))

    def figures(self, key: Key) -> dict[str, Any]:
        """The figures of one group, as FlowControlLevel's and FlowControlSchema's fields name them."""
        wait = self.waits.get(key)
        # the le="0" bucket aside, a p99 among the first bucket's microsecond waits is the bound it is ("< 5 ms")
        p99 = Histogram(tuple(b for b in wait.buckets if b[0] > 0), wait.sum).p99() if wait is not None else None
        queued, over_s = _queued(wait)
        return {"dispatched": _count(self.dispatched.get(key)), "queued": queued, "queued_over_s": over_s,
                "rejected": _count(self.rejected.get(key, 0.0 if self.apf_on else None)),
                "wait_p99_s": p99.honest if p99 is not None else None,
                "wait_bound": p99.bound if p99 is not None else "",
                "waited": round(wait.count) if wait is not None else None,
                "in_queue_at_close": _count(self.in_queue.get(key))}


def flow_control(start: Snapshot | None, end: Snapshot) -> list[FlowControlLevel]:
    """One row a priority level that dispatched, queued or rejected anything in the window (or still had
    requests queued at its close), with its flow schemas that did, each by requests dispatched, most first;
    [] where APF is off (nothing measured)."""
    if not end.has(DISPATCHED) and not end.has(NOMINAL_SEATS):
        return []
    levels, schemas = _Window.of(start, end, (LEVEL,)), _Window.of(start, end, (LEVEL, SCHEMA))
    by_level: dict[str, list[FlowControlSchema]] = {}
    for level, schema in schemas.groups():
        figures = schemas.figures((level, schema))
        del figures["queued_over_s"]  # the level's, the same for each of its schemas
        row = FlowControlSchema(flow_schema=schema, **figures)
        if _busy(row):
            by_level.setdefault(level, []).append(row)
    rows = [FlowControlLevel(priority_level=level, **levels.figures((level,)),
                             flow_schemas=sorted(by_level.get(level, []), key=_most_first))
            for (level,) in levels.groups()]
    return sorted((row for row in rows if _busy(row)), key=_most_first)


def _busy(row: FlowControlLevel | FlowControlSchema) -> bool:
    return bool(row.dispatched or row.queued or row.rejected or row.in_queue_at_close)


def _most_first(row: FlowControlLevel | FlowControlSchema) -> tuple[int, str]:
    """Rows by requests dispatched, most first, then by name."""
    return -(row.dispatched or 0), row.priority_level if isinstance(row, FlowControlLevel) else row.flow_schema


def _queued(wait: Histogram | None) -> tuple[int | None, float | None]:
    """Requests that waited longer than the wait histogram's first bound above 0 (5 ms on 1.3x apiservers), and
    that bound. Every request through a queue waits a few microseconds, dispatched at once or not, so "waited at
    all" (the le="0" bucket) counts them all; a request that waited past the first bucket found its level's seats
    taken. A bound, and said as one."""
    if wait is None:
        return None, None
    first = next(((bound, count) for bound, count in wait.buckets if 0 < bound < math.inf), None)
    if first is None:
        return None, None
    return round(wait.count - first[1]), first[0]


def _count(value: float | None) -> int | None:
    return None if value is None else round(value)


@dataclass(frozen=True)
class ClientInStep:
    """One class of the run's clients beside what flow control did in a step to its FlowSchema (its requests
    and everyone else's that schema matched) and to its priority level; None where that saw nothing."""

    client: ClientClass
    schema: FlowControlSchema | None
    level: FlowControlLevel | None


def clients_in_step(clients: list[ClientClass], levels: list[FlowControlLevel]) -> list[ClientInStep]:
    """Each client class joined with the step's per-level rows by its measured priority level and FlowSchema."""
    by_level = {row.priority_level: row for row in levels}
    out = []
    for client in clients:
        level = by_level.get(client.priority_level) if client.priority_level else None
        schema = next((s for s in level.flow_schemas if s.flow_schema == client.flow_schema), None) if level else None
        out.append(ClientInStep(client, schema, level))
    return out
