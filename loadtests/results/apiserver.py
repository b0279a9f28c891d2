"""The apiserver's section of a step (its /metrics, read by the probes at the window's edges): latency per
request kind, requests by code and by verb+resource, gauges and stored objects.

Step keys (results.json), latencies in seconds:

    server: list of ServerLatency (apiserver_request_sli_duration_seconds deltas per verb/resource/scope);
        bounds: {quantile: "<" | ">"} where the histogram gives only a bound (the value is that bound);
        finer: the same requests' apiserver_request_duration_seconds quantiles, {} where unavailable
    requests_by_code: {"200": n, "429": n, ...} from apiserver_request_total deltas
    server_requests: {"POST pods": n, ...} apiserver_request_total deltas for each verb+resource the load
        sent (the probes' own requests taken off), to set against the client-side counts
    apiserver: scalar gauges and counters (watchers, inflight, watch events, ...)
    storage_objects: {"pods": n, ...} from apiserver_resource_objects (or apiserver_storage_objects): the
        apiserver's gauge, refreshed lazily (it can lag by minutes)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ServerLatency:
    """Server-side latency of one verb+resource+scope over the step, from apiserver histogram deltas."""

    verb: str
    resource: str
    scope: str
    subresource: str
    group: str
    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    metric: str = "apiserver_request_sli_duration_seconds"
    # quantiles that are only bounds: {"p99": "<"} when its rank fell in the first bucket (the value is that
    # bucket's upper bound: "under 50 ms"), ">" in the open last bucket (the highest finite bound: "over 60 s")
    bounds: dict[str, str] = field(default_factory=dict)
    # the same requests in apiserver_request_duration_seconds (finer low buckets; it includes priority-and-
    # fairness waits): {metric, count, p50, p90, p99, bounds}, or {} where it is the only histogram
    finer: dict[str, Any] = field(default_factory=dict)

@dataclass
class ApiserverSection:
    """The apiserver's part of a step (empty: its /metrics were not read)."""

    server: list[ServerLatency] = field(default_factory=list)
    requests_by_code: dict[str, int] = field(default_factory=dict)
    server_requests: dict[str, int] = field(default_factory=dict)
    apiserver: dict[str, float] = field(default_factory=dict)
    storage_objects: dict[str, float] = field(default_factory=dict)
