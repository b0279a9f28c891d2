"""A cluster's API traffic for its profile's `traffic:` section, from the apiserver's audit log (who sent what,
how, how fast it was served) or, without one, from two scrapes of its /metrics (what, not who).

Both give a TrafficProfile (traffic_types): requests per second per kind, watches held, and what a replay on fake
nodes cannot make; only the audit log says the client classes, the LIST shapes, the per-minute curve, the
latencies and the identities, which the metrics' profile says are "not measured" or "unknown".
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path

from loadtests.analysis.metrics import Snapshot, counter_deltas
from loadtests.analysis.server import REQUESTS
from loadtests.capture.audit_events import FIX, AuditEvent, read_events
from loadtests.capture.audit_tally import ENDS, AuditTally
from loadtests.capture.clients import path_of
from loadtests.capture.traffic_types import (
    AGGREGATED_GROUPS,
    NotReplayable,
    RequestRate,
    Rounds,
    TrafficProfile,
    WatchLoad,
    Window,
    not_replayable,
)
from loadtests.errors import LoadTestError, UnreadableFile
from loadtests.measure.audit import METRIC_VERBS

__all__ = ["AGGREGATED_GROUPS", "NotReplayable", "RequestRate", "TrafficProfile", "WatchLoad", "traffic_from_audit",
           "traffic_from_metrics"]

LONGRUNNING = "apiserver_longrunning_requests"  # a gauge: requests open now, per verb (WATCH) and resource
METRICS_SOURCE = f"apiserver /metrics, two scrapes ({REQUESTS}, {LONGRUNNING})"
# the request metrics' verbs in the audit log's words (a DELETE of a collection is a deletecollection)
AUDIT_VERBS = {metric: audit for audit, metric in METRIC_VERBS.items() if audit != "deletecollection"} | {
    "APPLY": "patch", "WATCHLIST": "watch", "CONNECT": "connect"}
RATE_LABELS = ("verb", "group", "resource", "subresource", "scope", "component", "code")
APISERVER_USER = "system:apiserver"  # the apiserver's own requests: at a first start, its system namespaces
NODE_LEASES = ("coordination.k8s.io", "leases", "kube-node-lease")  # a node's heartbeat Lease, made as it joins
START_UP_MAX_S = 600.0  # a first node later than this after the apiserver's start is a class of its own, not start-up
NO_START = ("none: the log does not begin with the cluster's first start (its apiserver making its system "
            "namespaces); the window is the whole log")


def start_up(events: Iterable[AuditEvent]) -> tuple[float | None, str]:
    """Where a cluster's start at the head of its audit log ends, and why: the first node's Lease made, after the
    apiserver made its system namespaces (a first start: a restart finds them made) and within START_UP_MAX_S.
    Before it the cluster had no node renewing a Lease, its apiserver and controllers were making their own
    objects, and counting that time would lower every steady class's rate (a node Lease renewal rate a fifth
    low over a minute's log). Only this cut moves the window: a class that starts later is counted over the
    whole window, not its own span. None where the log holds no such start."""
    first, booted = None, False
    for event in events:
        first = event.at if first is None else first
        if event.at - first > START_UP_MAX_S:
            break
        if event.verb != "create" or event.stage not in ENDS or event.code != 201:
            continue
        if event.resource == "namespaces" and event.username == APISERVER_USER:
            booted = True
        elif booted and (event.group, event.resource, event.namespace) == NODE_LEASES:
            return event.at, (f"the cluster's first start: its apiserver made its system namespaces, and its first "
                              f"node made its Lease {event.at - first:.1f} s into the log")
    if booted:
        return None, (f"none: the cluster started in the log, but no node made its Lease within {START_UP_MAX_S:.0f}"
                      " s; the window is the whole log")
    return None, NO_START


def lease_period(events: Iterable[AuditEvent]) -> tuple[float | None, float, float]:
    """The nodes' Lease renewal period, and the first and last event's time: per Lease, from its first write seen
    (made, or renewed) to its next renewal, the median over the Leases (None: no Lease renewed after a write seen).
    Nodes that joined together renew in rounds, once a period: the period says how long a window must be to count
    each round once."""
    seen: dict[str, float] = {}
    periods: dict[str, float] = {}
    first, last = math.inf, -math.inf
    for event in events:
        first, last = min(first, event.at), max(last, event.at)
        if (event.stage not in ENDS or event.code is None or not 200 <= event.code < 300 or event.verb not in
                ("create", "update") or (event.group, event.resource, event.namespace) != NODE_LEASES):
            continue
        if event.name not in seen:
            seen[event.name] = event.at
        elif event.verb == "update" and event.name not in periods:
            periods[event.name] = event.at - seen[event.name]
    return (statistics.median(periods.values()) if periods else None), first, last


def renewal_window(events: Iterable[AuditEvent], start: float = -math.inf, end: float = math.inf,
                   lead: float = 0.0) -> tuple[float, float, float] | None:
    """Whole renewal periods of the nodes' Leases (lease_period, measured on `events`), as many as fit from `start`
    plus `lead` periods to `end` (each clipped to the events'), and the period: (start, end, period). A window of
    part of a period counts a round of renewals too many or too few (a fifth of the nodes' rate over a 35 s log,
    a sixth over 60 s); whole periods count each round once wherever the window lies. None where no Lease was
    renewed, or less than one period fits."""
    period, first, last = lease_period(events)
    if period is None or period <= 0:
        return None
    begin = max(start, first) + lead * period
    whole = math.floor((min(end, last) - begin) / period)
    return (begin, begin + whole * period, period) if whole > 0 else None


def _start_up_window(paths: Sequence[Path]) -> tuple[float | None, float | None, str]:
    """The window of a log that holds the cluster's start (start_up): whole renewal periods from half a period
    after its first node's Lease, the log read twice; (None, None, why) where it holds none."""
    with closing(read_events(paths, [])) as head:
        cut, why = start_up(head)
    window = None if cut is None else renewal_window(read_events(paths, []), cut, lead=0.5)
    if window is None:
        return cut, None, why + ("; the window begins at that Lease (no node renewed its Lease a period after it)"
                                 if cut is not None else "")
    cut, until, period = window
    return cut, until, why + (f"; its nodes renew their Leases every {period:.1f} s, in rounds as they joined "
                              f"together: the window is {round((until - cut) / period)} whole periods from half "
                              "of one after that Lease")


def _between_window(paths: Sequence[Path], between: tuple[float, float]) -> tuple[float | None, float | None, Rounds]:
    """A given window cut to whole renewal periods of the nodes' Leases renewed in it (renewal_window, the rule
    of the start-up's window), from its first event, and how: the same window for every class."""
    inside = (event for event in read_events(paths, []) if between[0] <= event.at <= between[1])
    window = renewal_window(inside, *between)
    given = between[1] - between[0]
    if window is None:
        return None, None, Rounds(given, given, None, 0, "the whole window: no node Lease renewed in it, or it is "
                                  "shorter than their renewal period")
    cut, until, period = window
    whole = round((until - cut) / period)
    return cut, until, Rounds(given, until - cut, period, whole,
                              f"{whole} whole renewal period{'s' if whole != 1 else ''} of the nodes' Leases "
                              f"({period:.2f} s each: they renew "
                              f"in rounds) from the window's first event, {until - cut:.1f} s of its {given:.1f} s: "
                              "each round counted once, for every class alike")


def traffic_from_audit(paths: Sequence[Path], salt: bytes, *,
                       aggregated_groups: frozenset[str] = AGGREGATED_GROUPS,
                       between: tuple[float, float] | None = None) -> TrafficProfile:
    """The traffic in audit log files (one apiserver's and its rotated files, in any order), streamed: memory grows
    with the kinds of request, identities and watches open at once, not with the events. UnreadableFile, one
    line naming the file and line, for a file that is not an audit log (a last line cut short is skipped).
    `between`: only the events written from the first to the second time (epoch seconds), e.g. a run's window
    in its control plane's log, cut to whole renewal periods of its nodes' Leases (`rounds` says how; the log is
    read twice); without it, the cluster's start at the head of the log is left out (start_up), read from the
    log's head first, and the window is whole renewal periods of its nodes (renewal_window: a log that holds the
    cluster's start is read twice)."""
    if not paths:
        raise LoadTestError(f"no audit log given; {FIX}")
    notes: list[str] = []
    rounds, why = None, ""
    if between is None:
        cut, until, why = _start_up_window(paths)
    else:
        cut, until, rounds = _between_window(paths, between)
    tally = AuditTally(salt, -math.inf if cut is None else cut, math.inf if until is None else until)
    for event in read_events(paths, notes):
        if between is None or between[0] <= event.at <= between[1]:
            tally.add(event)
    if not tally.events:
        raise UnreadableFile(f"{', '.join(map(str, paths))}: no audit event in the file; {FIX}")
    return dataclasses.replace(tally.profile(notes, aggregated_groups, why), rounds=rounds)


def audit_verb(verb: str, scope: str) -> str:
    """A request metric's verb (LIST, POST, ...) as the audit log says it (list, create, ...)."""
    if verb == "DELETE" and scope != "resource":
        return "deletecollection"
    return AUDIT_VERBS.get(verb, verb.lower())


def _rates(before: Snapshot | None, after: Snapshot, window_s: float) -> list[RequestRate]:
    """apiserver_request_total's increase per verb, resource, scope, component and code (versions, dry runs
    and apiservers summed), per second of the window. A request to no resource has its path in the metric's
    subresource label (`/healthz`, `apis`): named as the audit log's are (clients.path_of)."""
    counts: dict[tuple[str, ...], float] = {}
    for labels, delta in counter_deltas(before, after, REQUESTS).items():
        label = dict(labels)
        key = tuple(label.get(name, "") for name in RATE_LABELS)
        counts[key] = counts.get(key, 0.0) + delta
    rows = [RequestRate(verb=audit_verb(verb, scope), group=group, resource=resource,
                        subresource=sub if resource else "", scope=scope, client_class=None, product=None,
                        component=component, code=int(code) if code.isdigit() else None, count=round(n),
                        per_second=n / window_s, path=None if resource else path_of("/" + sub.lstrip("/")))
            for (verb, group, resource, sub, scope, component, code), n in counts.items() if round(n) > 0]
    return sorted(rows, key=lambda r: (-r.count, r.verb, r.group, r.resource, r.subresource, r.component or ""))


def open_by_resource(page: Snapshot | None) -> dict[tuple[str, str], int]:
    """Watches open per (group, resource) as a scrape of the apiserver's /metrics saw them (LONGRUNNING's WATCH)."""
    found: dict[tuple[str, str], int] = {}
    for labels, value in (page.select(LONGRUNNING, verb="WATCH") if page is not None else ()):
        key = (labels.get("group", ""), labels.get("resource", ""))
        found[key] = found.get(key, 0) + round(value)
    return found


def _watches(before: Snapshot | None, after: Snapshot) -> list[WatchLoad]:
    """Watches open per resource at the window's start and end (the gauge's value at each scrape)."""
    start, end = open_by_resource(before), open_by_resource(after)
    rows = [WatchLoad(group=group, resource=resource, client_class=None, product=None, max_open=None,
                      mean_open=None, open_at_start=start.get((group, resource)) if before is not None else None,
                      open_at_end=end.get((group, resource)), opened=None, lifetime_s=None)
            for group, resource in start.keys() | end.keys()]
    return sorted(rows, key=lambda r: (-(r.open_at_end or 0), r.group, r.resource))


def traffic_from_metrics(before: Snapshot | None, after: Snapshot, window_s: float, *,
                         aggregated_groups: frozenset[str] = AGGREGATED_GROUPS) -> TrafficProfile:
    """The traffic two scrapes of the apiserver's /metrics `window_s` apart say: rates per kind of request and
    component, watches open at each end. Who sent the requests is unknown, said as such."""
    if not (math.isfinite(window_s) and window_s > 0):
        raise LoadTestError(f"a traffic window of {window_s} s: give a positive number of seconds")
    if not after.has(REQUESTS):
        raise LoadTestError(f"the apiserver's /metrics has no {REQUESTS}: it is no kube-apiserver's page, or the "
                            "metric is disabled")
    rates = _rates(before, after, window_s)
    return TrafficProfile(
        source=METRICS_SOURCE, window=Window(None, None, window_s), requests=sum(r.count for r in rates),
        rates=rates, watches=_watches(before, after), not_replayable=not_replayable(rates, aggregated_groups),
        client_classes=None, aggregated_groups=aggregated_groups,
        notes=["client classes unknown: the apiserver's metrics count requests per component, not per client; "
               "an audit log says who sent each",
               f"a request counts when it finished ({REQUESTS}): a watch when it ended, not when it opened",
               "LIST shapes, the per-minute curve, latencies and identities: not measured from two scrapes"])
