"""API Priority and Fairness over a window, per priority level, from the apiserver's two scrapes: how many
requests it dispatched, how many waited in a queue for their seats, how many it rejected, and how long they waited.

What the figures cover: every request the apiserver(s) served in the window, whoever sent it (the load, the
fleet's kwok, the controllers, the harness's probes), grouped by the priority level its FlowSchema chose. Exempt
requests (system:masters among them) are dispatched without a queue, so they never wait and are never rejected.
"""

from __future__ import annotations

import math

from loadtests.analysis.metrics import Histogram, Snapshot, counter_delta_by, histogram_deltas
from loadtests.results.flow_control import FlowControlLevel

DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
REJECTED = "apiserver_flowcontrol_rejected_requests_total"
WAIT = "apiserver_flowcontrol_request_wait_duration_seconds"
IN_QUEUE = "apiserver_flowcontrol_current_inqueue_requests"
# served by every apiserver with APF on, whether or not anything was rejected: a rejection counter that has no
# series then means none was rejected, where without it APF is off and rejections are not measured
NOMINAL_SEATS = "apiserver_flowcontrol_nominal_limit_seats"
FAMILIES = frozenset({DISPATCHED, REJECTED, WAIT, IN_QUEUE, NOMINAL_SEATS})
LEVEL = "priority_level"


def flow_control(start: Snapshot | None, end: Snapshot) -> list[FlowControlLevel]:
    """One row a priority level that dispatched, queued or rejected anything in the window (or still had
    requests queued at its close), by requests dispatched, most first; [] where APF is off (nothing measured)."""
    if not end.has(DISPATCHED) and not end.has(NOMINAL_SEATS):
        return []
    dispatched = counter_delta_by(start, end, DISPATCHED, LEVEL)
    rejected = counter_delta_by(start, end, REJECTED, LEVEL)
    apf_on = end.has(NOMINAL_SEATS) or end.has(REJECTED)
    waits = {dict(labels).get(LEVEL, ""): histogram
             for labels, histogram in histogram_deltas(start, end, WAIT, (LEVEL,)).items()}
    in_queue = end.sum_by(IN_QUEUE, LEVEL)
    rows = []
    for level in sorted(set(dispatched) | set(rejected) | set(waits) | set(in_queue)):
        wait = waits.get(level)
        # the le="0" bucket aside, a p99 among the first bucket's microsecond waits is the bound it is ("< 5 ms")
        p99 = Histogram(tuple(b for b in wait.buckets if b[0] > 0), wait.sum).p99() if wait is not None else None
        queued, over_s = _queued(wait)
        row = FlowControlLevel(
            priority_level=level, dispatched=_count(dispatched.get(level)), queued=queued, queued_over_s=over_s,
            rejected=_count(rejected.get(level, 0.0 if apf_on else None)),
            wait_p99_s=p99.honest if p99 is not None else None, wait_bound=p99.bound if p99 is not None else "",
            waited=round(wait.count) if wait is not None else None, in_queue_at_close=_count(in_queue.get(level)))
        if row.dispatched or row.queued or row.rejected or row.in_queue_at_close:
            rows.append(row)
    return sorted(rows, key=lambda r: (-(r.dispatched or 0), r.priority_level))


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
