"""Every figure a report charts or a comparison weighs, read out of a RunResult in one place.

A figure is a named series with one value per step (None where the step did not measure it), filed under the
chart it belongs to. The run report draws each chart from these series; compare matches series of two runs by
chart and name and applies the regression rule the series carries. Keeping the list here means the report and
the comparison can never disagree about what was measured or where it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from loadtests.analysis.promql import plan_queries
from loadtests.analysis.slo import classify, thresholds
from loadtests.config.topology import component_of
from loadtests.results import RunResult, StepResult

# Components in the order a reader expects them (the control plane, kwok, the load generator, then the harness's
# own process: last, so the components before it keep their colours); anything else follows alphabetically.
COMPONENT_ORDER = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "loadgen",
                   "harness")


@dataclass(frozen=True)
class Chart:
    """What a chart shows and where its numbers come from (every figure says its source)."""

    id: str
    short: str  # prefix of a figure's name in tables and JUnit ("server p99", "CPU", ...)
    title: str
    source: str  # "client side", "apiserver", "etcd" or "process", with the metric
    unit: str  # base unit of the values: "s", "bytes", "%", "count"
    kind: str = "line"  # "line" (against nodes) or "bar" (grouped per step)
    log_y: bool = False


@dataclass
class Series:
    """One figure across steps. `rule` names the regression rule compare applies; None means shown only."""

    chart: str
    name: str
    values: list[float | None]
    rule: str | None = None  # "latency" | "memory" | "cpu" | "errors_5xx" | "throttled_429"
    slo_line: bool = False  # a threshold drawn as a dashed horizontal line, not a measurement
    # per step, as values: "<" or ">" where the value is only a histogram bound (ServerLatency.bounds)
    bounds: list[str] = field(default_factory=list)
    projected: bool = False  # a figure that grows with scale: the report projects it (analysis/projection.py)
    slo_key: str | None = None  # the plan's SLO threshold this figure is judged against (slo.thresholds' key)

    def bound(self, position: int) -> str:
        return self.bounds[position] if position < len(self.bounds) else ""

    @property
    def key(self) -> str:
        return f"{self.chart}: {self.name}"


_PROMQL = ("prometheus · the plan's queries, instant at each window's close over its length (the part of the "
           "window Prometheus's scrapes cover is in each step's details)")
_SLI = "apiserver · apiserver_request_sli_duration_seconds (p99 over the step)"
_SCOPE = "Server-side p99 latency — reads {} (scope {})"
CHARTS: dict[str, Chart] = {c.id: c for c in (
    Chart("server_mutating", "server p99", "Server-side p99 latency — mutating calls", _SLI, "s", log_y=True),
    Chart("server_read_resource", "server p99", _SCOPE.format("of single objects", "resource"), _SLI, "s",
          log_y=True),
    Chart("server_read_namespace", "server p99", _SCOPE.format("in a namespace", "namespace"), _SLI, "s",
          log_y=True),
    Chart("server_read_cluster", "server p99", _SCOPE.format("across the cluster", "cluster"), _SLI, "s",
          log_y=True),
    Chart("client_p99", "client p99", "Client-side p99 latency per request kind",
          "client side · Locust request statistics", "s", log_y=True),
    Chart("pod_startup", "pod startup", "Pod startup latency (create → Running)",
          "client side · watch receive times", "s"),
    Chart("watch_delay", "watch delay", "Watch delay (write → event at a watcher)", "client side · watch probe",
          "s"),
    Chart("etcd_size", "etcd", "etcd database size",
          "etcd · etcd_mvcc_db_total_size_in_bytes, etcd_mvcc_db_total_size_in_use_in_bytes", "bytes"),
    Chart("etcd_keys", "etcd", "etcd keys", "etcd · etcd_debugging_mvcc_keys_total (end of step)", "count"),
    Chart("apiserver_memory", "kube-apiserver", "kube-apiserver memory",
          "process · RSS (psutil, max over the step); apiserver · Go heap in use", "bytes"),
    Chart("cpu", "CPU", "CPU per component (100 % = one core)", "process · psutil, average over the step", "%",
          kind="bar"),
    Chart("errors", "responses", "Throttled (429) and server-error (5xx) responses",
          "apiserver · apiserver_request_total (delta over the step)", "count"),
    Chart("storage_objects", "stored", "Objects in storage",
          "LIST limit=1 per resource at the window's close (items + remainingItemCount); older runs: "
          "apiserver · apiserver_storage_objects (end of step, refreshed lazily)",
          "count"),
    # the plan's own PromQL figures (config/promql.py), a chart per unit they give
    *(Chart(chart, "PromQL", f"The plan's PromQL figures{title}", _PROMQL, unit)
      for chart, (unit, title) in {"promql_s": ("s", " — seconds"), "promql_bytes": ("bytes", " — bytes"),
                                   "promql_percent": ("percent", " — percent"), "promql_count": ("count", " — counts"),
                                   "promql": ("", "")}.items()),
)}


def _objects(step: StepResult) -> dict[str, float]:
    """Objects per resource: counted exactly at the window's close where the step did, else the apiserver's
    gauge (older results)."""
    return dict(step.objects) if step.objects else step.storage_objects


def _per_step(run: RunResult, read: Callable[[StepResult], float | None]) -> list[float | None]:
    return [read(step) for step in run.steps]


def _ordered_components(run: RunResult) -> list[str]:
    seen = {p.component for step in run.steps for p in step.processes}
    known = [c for c in COMPONENT_ORDER if c in seen]
    return known + sorted(seen - set(known))


def _component_sum(step: StepResult, component: str, attribute: str) -> float | None:
    """A component's figure for the cluster: the sum over its instances (kube-apiserver, kube-apiserver-2)."""
    found = [getattr(p, attribute) for p in step.processes if component_of(p.component) == component]
    return float(sum(found)) if found else None


def _apiserver_key(run: RunResult, needle: str) -> str | None:
    """The apiserver gauge whose name contains `needle` (e.g. heap), if the probe recorded one."""
    names = sorted({k for step in run.steps for k in step.apiserver if needle in k})
    return names[0] if names else None


def _code_sum(step: StepResult, match: Callable[[str], bool]) -> float:
    return float(sum(n for code, n in step.requests_by_code.items() if match(str(code))))


def _server_series(run: RunResult) -> list[Series]:
    """p99 per SLO'd verb/resource/scope, on the chart of its SLO class, with the class threshold drawn."""
    by_name: dict[str, tuple[str, list[float | None], list[str]]] = {}
    for i, step in enumerate(run.steps):
        for entry in step.server:
            kind = classify(entry)
            if kind is None:
                continue
            name, slo_class, _ = kind
            chart = "server_" + slo_class.replace(" ", "_")
            _, values, bounds = by_name.setdefault(name, (chart, [None] * len(run.steps), [""] * len(run.steps)))
            values[i] = entry.p99
            bounds[i] = entry.bounds.get("p99", "")
    limits = thresholds(run)
    found = [Series(chart, name.split(" ", 1)[1], values, rule="latency", bounds=bounds, projected=True,
                    slo_key=_server_slo_key(chart))
             for name, (chart, values, bounds) in by_name.items()]
    for chart in sorted({s.chart for s in found}):
        key = _server_slo_key(chart)
        found.append(Series(chart, f"SLO {float(limits[key]):g} s", [float(limits[key])] * len(run.steps),
                            slo_line=True, slo_key=key))
    return found


def _server_slo_key(chart: str) -> str:
    """The SLO key of a server-latency chart: server_mutating -> mutating_p99_s (slo.py's classes)."""
    return chart.removeprefix("server_") + "_p99_s"


def _client_series(run: RunResult) -> list[Series]:
    by_name: dict[str, list[float | None]] = {}
    for i, step in enumerate(run.steps):
        for stat in step.client:
            # request names usually start with their verb already ("POST pods"); say it once
            name = stat.name if stat.name.startswith(f"{stat.type} ") else f"{stat.type} {stat.name}".strip()
            values = by_name.setdefault(name, [None] * len(run.steps))
            values[i] = None if stat.p99_ms is None else stat.p99_ms / 1000.0
    return [Series("client_p99", name, values, rule="latency") for name, values in by_name.items()]


def _distribution_series(run: RunResult, chart: str, attribute: str) -> list[Series]:
    found = [
        Series(chart, quantile, _per_step(run, lambda s, q=quantile: getattr(getattr(s, attribute), q)),
               rule="latency" if quantile == "p99" else None, projected=quantile == "p99",
               slo_key="pod_startup_p99_s" if chart == "pod_startup" and quantile == "p99" else None)
        for quantile in ("p50", "p90", "p99")
    ]
    if chart == "pod_startup":
        limit = float(thresholds(run)["pod_startup_p99_s"])
        found.append(Series(chart, f"SLO {limit:g} s", [limit] * len(run.steps), slo_line=True))
    return found


def _memory_series(run: RunResult) -> list[Series]:
    rss_key = _apiserver_key(run, "resident_memory")

    def rss(step: StepResult) -> float | None:
        value = _component_sum(step, "kube-apiserver", "rss_max_bytes")
        return step.apiserver.get(rss_key) if value is None and rss_key else value

    found = [Series("apiserver_memory", "RSS", _per_step(run, rss), rule="memory", projected=True)]
    heap_key = _apiserver_key(run, "heap")
    if heap_key:
        found.append(Series("apiserver_memory", "Go heap in use", _per_step(run, lambda s: s.apiserver.get(heap_key))))
    return found


PROMQL_CHARTS = {"s": "promql_s", "bytes": "promql_bytes", "%": "promql_percent", "count": "promql_count",
                 "": "promql"}


def _promql_series(run: RunResult) -> list[Series]:
    """The plan's PromQL figures (not its checks), on the chart of their unit, compared by the rule the plan
    gives them (none: shown only)."""
    found = []
    for query in plan_queries(run, "figures"):
        values = [next((f.value for f in step.promql if f.kind == "figure" and f.name == query.name), None)
                  for step in run.steps]
        found.append(Series(PROMQL_CHARTS[query.unit], query.name, values, rule=query.rule or None))
    return found


def chart_sources(run: RunResult) -> dict[str, str]:
    """Sources recorded per step (distribution probes, etcd or its apiserver fallback), overriding CHARTS."""
    found = {}
    for chart in ("pod_startup", "watch_delay"):
        recorded = list(dict.fromkeys(getattr(s, chart).source for s in run.steps if getattr(s, chart).source))
        if recorded:
            found[chart] = "client side · " + "; ".join(recorded)
    etcd = list(dict.fromkeys(step.etcd.source for step in run.steps if step.etcd.source))
    if etcd and etcd != ["etcd /metrics"]:
        found["etcd_size"] = "; ".join(f"{'apiserver' if src.startswith('apiserver') else 'etcd'} · {src}"
                                       for src in etcd)
    return found


def series(run: RunResult) -> list[Series]:
    """Every figure of the run, grouped by chart in CHARTS order; series with no value at all are dropped."""
    found = _server_series(run) + _client_series(run)
    found += _distribution_series(run, "pod_startup", "pod_startup")
    found += _distribution_series(run, "watch_delay", "watch_delay")
    found += [
        Series("etcd_size", "DB size (total)", _per_step(run, lambda s: s.etcd.db_size_bytes), rule="memory",
               projected=True),
        Series("etcd_size", "DB size (in use)", _per_step(run, lambda s: s.etcd.db_size_in_use_bytes)),
        Series("etcd_keys", "keys", _per_step(run, lambda s: s.etcd.keys_total), projected=True),
    ]
    found += _memory_series(run)
    found += [
        Series("cpu", component, _per_step(run, lambda s, c=component: _component_sum(s, c, "cpu_percent")),
               rule="cpu", projected=True)
        for component in _ordered_components(run)
    ]
    found += [
        Series("errors", "429 throttled", _per_step(run, lambda s: _code_sum(s, lambda c: c == "429")),
               rule="throttled_429"),
        Series("errors", "5xx server errors", _per_step(run, lambda s: _code_sum(s, lambda c: c.startswith("5"))),
               rule="errors_5xx"),
    ]
    resources = sorted({r for step in run.steps for r in _objects(step)})
    found += [Series("storage_objects", r, _per_step(run, lambda s, r=r: _objects(s).get(r)), projected=True)
              for r in resources]
    found += _promql_series(run)
    order = list(CHARTS)
    kept = [s for s in found if any(v is not None for v in s.values)]
    # measurements first within a chart, threshold lines last (drawn over them)
    return sorted(kept, key=lambda s: (order.index(s.chart), s.slo_line))


# ---- cluster health over time, one chart per step ---------------------------------------------------------


@dataclass(frozen=True)
class HealthRow:
    """One row of a step's health chart: figures of one unit over the step. A key ending in "." takes every
    sampled figure with that prefix (e.g. "cpu." for the machine and each component)."""

    title: str
    unit: str  # as Chart.unit, or "s_long" for seconds shown as seconds
    lines: tuple[tuple[str, str], ...]  # (label, sample key)
    log_y: bool = False
    threshold: str = ""  # a summary figure drawn as a dashed line (the lease duration)


HEALTH_ROWS = (
    HealthRow("Nodes and pods", "count", (
        ("NotReady nodes", "nodes_not_ready"), ("unreachable nodes", "nodes_unreachable"),
        ("not-ready taint", "taint_not_ready"), ("unreachable taint", "taint_unreachable"),
        ("pods Pending", "pods_pending"), ("pods not Running", "pods_not_running"),
        ("pods evicted", "pods_evicted"), ("scheduler queues", "scheduler_pending_pods"))),
    HealthRow("Oldest node Lease renewal", "s_long", (("lease lag", "lease_lag_s"),),
              threshold="lease_duration_s"),
    HealthRow("Queues (now)", "count", (
        ("work queues, all", "workqueue_depth"), ("deepest work queue", "workqueue_depth_max"),
        ("apiserver in flight: ", "apiserver_inflight."), ("APF in queue", "apf_inqueue"))),
    HealthRow("Waits (p99 over each interval)", "s", (
        ("slowest work queue", "workqueue_queue_p99_max_s"), ("APF queue wait", "apf_wait_p99_s"),
        ("etcd WAL fsync", "etcd_wal_fsync_p99_s"), ("etcd backend commit", "etcd_backend_commit_p99_s")),
        log_y=True),
    HealthRow("Events (per interval)", "count", (
        ("unschedulable attempts", "scheduler_attempts.unschedulable"),
        ("scheduling errors", "scheduler_attempts.error"),
        ("APF rejections", "apf_rejected"), ("taint-manager evictions", "evictions_taint_manager"),
        ("node evictions", "evictions_node_collector"), ("etcd slow applies", "etcd_slow_applies"),
        ("etcd leader changes", "etcd_leader_changes"))),
    HealthRow("CPU (100 % = one core)", "%", (("", "cpu."),)),
)
HEALTH_SOURCE = ("API watches of the kwok nodes, their Leases and the harness's pods; /metrics of kube-apiserver, "
                 "kube-scheduler, kube-controller-manager and etcd; psutil (machine and components)")


@dataclass
class HealthLine:
    label: str
    values: list[float | None]
    threshold: bool = False  # drawn dashed, as SLO lines are


def _health_keys(step: StepResult, key: str) -> list[str]:
    if not key.endswith("."):
        return [key]
    found = list(dict.fromkeys(k for s in step.health.samples for k in s.values if k.startswith(key)))
    ordered = [key + c for c in ("machine", "iowait", *COMPONENT_ORDER) if key + c in found]
    return ordered + sorted(set(found) - set(ordered))


def health_rows(step: StepResult) -> list[tuple[HealthRow, list[HealthLine]]]:
    """The lines of each row of the step's health chart; lines never measured, and rows left empty, are dropped."""
    samples = step.health.samples
    found = []
    for row in HEALTH_ROWS:
        lines = []
        for label, key in row.lines:
            for name in _health_keys(step, key):
                values = [s.values.get(name) for s in samples]
                if any(v is not None for v in values):
                    lines.append(HealthLine(label + name.removeprefix(key) if key.endswith(".") else label, values))
        limit = step.health.summary.figure(row.threshold) if row.threshold else None
        if lines and isinstance(limit, int | float):
            lines.append(HealthLine(f"{row.threshold.removesuffix('_s').replace('_', ' ')} {limit:g} s",
                                    [float(limit)] * len(samples), threshold=True))
        if lines:
            found.append((row, lines))
    return found
