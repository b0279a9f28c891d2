"""A cluster's API traffic for its profile's `traffic:` section, from the apiserver's audit log (who sent what,
how, how fast it was served) or, without one, from two scrapes of its /metrics (what, not who).

Both give a TrafficProfile (traffic_types): requests per second per kind, watches held, and what a replay on fake
nodes cannot make; only the audit log says the client classes, the LIST shapes, the per-minute curve, the
latencies and the identities, which the metrics' profile says are "not measured" or "unknown".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from loadtests.analysis.metrics import Snapshot, counter_deltas
from loadtests.analysis.server import REQUESTS
from loadtests.capture.audit_events import FIX, read_events
from loadtests.capture.audit_tally import AuditTally
from loadtests.capture.clients import path_of
from loadtests.capture.traffic_types import (
    AGGREGATED_GROUPS,
    NotReplayable,
    RequestRate,
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


def traffic_from_audit(paths: Sequence[Path], salt: bytes, *,
                       aggregated_groups: frozenset[str] = AGGREGATED_GROUPS,
                       between: tuple[float, float] | None = None) -> TrafficProfile:
    """The traffic in audit log files (one apiserver's and its rotated files, in any order), streamed: memory grows
    with the kinds of request, identities and watches open at once, not with the events. UnreadableFile, one
    line naming the file and line, for a file that is not an audit log (a last line cut short is skipped).
    `between`: only the events written from the first to the second time (epoch seconds), e.g. a run's window
    in its control plane's log."""
    if not paths:
        raise LoadTestError(f"no audit log given; {FIX}")
    notes: list[str] = []
    tally = AuditTally(salt)
    for event in read_events(paths, notes):
        if between is None or between[0] <= event.at <= between[1]:
            tally.add(event)
    if not tally.events:
        raise UnreadableFile(f"{', '.join(map(str, paths))}: no audit event in the file; {FIX}")
    return tally.profile(notes, aggregated_groups)


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
