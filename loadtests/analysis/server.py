"""What the apiserver says about a step: server latency per verb/resource, response codes, gauges, objects.

Everything here reads two /metrics scrapes (step start and end) and nothing else, so recorded text will do.
Metric names differ across Kubernetes versions; each figure names the metric it came from or falls back to the
older one (see the constants below).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtests.analysis.metrics import (
    Histogram,
    Snapshot,
    counter_delta,
    counter_delta_by,
    histogram_delta,
    histogram_deltas,
)
from loadtests.results.apiserver import ServerLatency

SLI_LATENCY = "apiserver_request_sli_duration_seconds"  # excludes webhooks and APF queueing (the SLO metric)
FULL_LATENCY = "apiserver_request_duration_seconds"  # before the SLI metric existed
REQUESTS = "apiserver_request_total"
OBJECTS = ("apiserver_resource_objects", "apiserver_storage_objects")  # newest first
LATENCY_LABELS = ("verb", "group", "resource", "subresource", "scope")
STREAMING_VERBS = frozenset({"WATCH", "WATCHLIST", "CONNECT"})  # long-running: their duration is no latency
QUANTILES = (0.50, 0.90, 0.99)
QUANTILE_NAMES = ("p50", "p90", "p99")


def _quantiles(histogram: Histogram) -> tuple[list[float | None], dict[str, str]]:
    """p50, p90, p99 as the data supports them (a bound where a quantile sits in the first or the open last
    bucket), and which of them are bounds."""
    found = {name: histogram.bounded_quantile(q) for name, q in zip(QUANTILE_NAMES, QUANTILES, strict=True)}
    return [q.honest for q in found.values()], {name: q.bound for name, q in found.items() if q.bound}


def server_latencies(start: Snapshot | None, end: Snapshot) -> list[ServerLatency]:
    """p50/p90/p99 per verb+group+resource+subresource+scope over the step (versions, components summed).

    From the SLI histogram (which leaves out webhook and priority-and-fairness waits, as the SLOs do); beside it
    the same requests in apiserver_request_duration_seconds, whose finer low buckets (5 and 25 ms) can say more
    than "under 50 ms" where the SLI histogram cannot."""
    metric = SLI_LATENCY if end.has(f"{SLI_LATENCY}_bucket") else FULL_LATENCY
    # resource requests only: /healthz, /openapi and the like carry resource="" and are no API call
    deltas = histogram_deltas(start, end, metric, LATENCY_LABELS,
                              verb=lambda verb: verb not in STREAMING_VERBS, resource=bool)
    finer = {} if metric == FULL_LATENCY else histogram_deltas(
        start, end, FULL_LATENCY, LATENCY_LABELS, verb=lambda verb: verb not in STREAMING_VERBS, resource=bool)
    out: list[ServerLatency] = []
    for labels, histogram in deltas.items():
        count = int(round(histogram.count))
        if count <= 0:
            continue
        label = dict(labels)
        (p50, p90, p99), bounds = _quantiles(histogram)
        entry = ServerLatency(verb=label["verb"], resource=label["resource"], scope=label["scope"],
                              subresource=label["subresource"], group=label["group"], count=count,
                              p50=p50, p90=p90, p99=p99, metric=metric, bounds=bounds)
        if labels in finer and finer[labels].count > 0:
            values, fine_bounds = _quantiles(finer[labels])
            entry.finer = {"metric": FULL_LATENCY, "count": int(round(finer[labels].count)),
                           **dict(zip(QUANTILE_NAMES, values, strict=True)), "bounds": fine_bounds}
        out.append(entry)
    out.sort(key=lambda s: (s.group, s.resource, s.subresource, s.verb, s.scope))
    return out


def requests_by_code(start: Snapshot | None, end: Snapshot) -> dict[str, int]:
    """Requests finished during the step per HTTP code (429 = throttled by APF, 5xx = server trouble)."""
    by_code = counter_delta_by(start, end, REQUESTS, "code")
    return {code: int(round(n)) for code, n in sorted(by_code.items()) if round(n) > 0}


def count_requests(start: Snapshot | None, end: Snapshot, verb: str, resource: str,
                   subresource: str = "") -> int:
    """Requests of one verb+resource the apiserver finished during the step, all codes and scopes together.

    Lets the runner check what the load generator says it sent against what the server counted.
    """
    delta = counter_delta(start, end, REQUESTS, verb=verb.upper(), resource=resource, subresource=subresource)
    return int(round(delta or 0.0))


# figure name -> (metric, label filter): the value at the end of the step
GAUGES: dict[str, tuple[str, dict[str, str]]] = {
    "watchers": ("apiserver_longrunning_requests", {"verb": "WATCH"}),  # watches open at the end of the step
    "registered_watchers": ("apiserver_registered_watchers", {}),  # older apiservers
    "resident_memory_bytes": ("process_resident_memory_bytes", {}),
    "heap_inuse_bytes": ("go_memstats_heap_inuse_bytes", {}),
    "goroutines": ("go_goroutines", {}),
}
# figure name -> metric: its increase over the step
COUNTERS: dict[str, str] = {
    "watch_events": "apiserver_watch_events_total",
    "flowcontrol_rejected": "apiserver_flowcontrol_rejected_requests_total",
    "cpu_seconds": "process_cpu_seconds_total",
}
# what the apiserver sent to watchers: each event's encoded size, observed per event sent (every watcher's, in
# the encoding it asked for); its sum over the step is the watch traffic in bytes
WATCH_EVENT_SIZES = "apiserver_watch_events_sizes"
INFLIGHT = "apiserver_current_inflight_requests"  # one figure per request_kind (mutating, readOnly)
# LISTs served from etcd vs from the watch cache. Newer apiservers count both in the storage metrics with a
# `storage` label (etcd / watchcache); older ones count etcd LISTs there and cache LISTs in the cache metrics.
LIST_SOURCES = {"lists_from": "list_total", "list_fetched_objects_from": "list_fetched_objects_total"}
STORAGE_SIZE = "apiserver_storage_size_bytes"  # etcd's database size as the apiserver sees it

# every family the functions here read: a scrape can keep just these, which parses several times faster
FAMILIES = frozenset({
    SLI_LATENCY, FULL_LATENCY, REQUESTS, *OBJECTS, INFLIGHT, STORAGE_SIZE, WATCH_EVENT_SIZES,
    *(metric for metric, _ in GAUGES.values()), *COUNTERS.values(),
    *(f"apiserver_{store}_{suffix}" for suffix in LIST_SOURCES.values() for store in ("storage", "cache")),
})


def apiserver_scalars(start: Snapshot | None, end: Snapshot) -> dict[str, float]:
    """Gauges at the end of the step and counter increases over it; a figure with no metric is left out."""
    figures: dict[str, float | None] = {name: end.total(metric, **match) for name, (metric, match) in GAUGES.items()}
    figures.update({name: counter_delta(start, end, metric) for name, metric in COUNTERS.items()})
    sizes = histogram_delta(start, end, WATCH_EVENT_SIZES)
    figures["watch_event_bytes"] = sizes.sum if sizes is not None else None
    for kind, value in end.sum_by(INFLIGHT, "request_kind").items():
        figures[f"inflight_{kind or 'all'}"] = value
    figures.update(_list_sources(start, end))
    return {key: value for key, value in figures.items() if value is not None}


def _list_sources(start: Snapshot | None, end: Snapshot) -> dict[str, float | None]:
    """LISTs (and objects read for them) from etcd vs from the watch cache: the cost that grows with size."""
    figures: dict[str, float | None] = {}
    labelled = any("storage" in labels for labels, _ in end.select("apiserver_storage_list_total"))
    for prefix, suffix in LIST_SOURCES.items():
        if labelled:
            for backend, delta in counter_delta_by(start, end, f"apiserver_storage_{suffix}", "storage").items():
                figures[f"{prefix}_{backend or 'unknown'}"] = delta
        else:
            figures[f"{prefix}_etcd"] = counter_delta(start, end, f"apiserver_storage_{suffix}")
            figures[f"{prefix}_watchcache"] = counter_delta(start, end, f"apiserver_cache_{suffix}")
    return figures


def resource_key(group: str, resource: str) -> str:
    """`pods` for the core group, `deployments.apps` otherwise (the form kubectl and the old metric use)."""
    return f"{resource}.{group}" if group else resource


def storage_objects(end: Snapshot, metrics: Sequence[str] = OBJECTS) -> dict[str, float]:
    """Objects stored per resource at the end of the step; -1 (the apiserver could not count) is left out."""
    for metric in metrics:
        if not end.has(metric):
            continue
        out: dict[str, float] = {}
        for labels, value in end.select(metric):
            if value < 0:
                continue
            # apiserver_resource_objects has group+resource; apiserver_storage_objects has "resource.group"
            key = resource_key(labels.get("group", ""), labels.get("resource", ""))
            out[key] = max(out.get(key, value), value)  # every apiserver of a merged page counts the same objects
        return dict(sorted(out.items()))
    return {}
