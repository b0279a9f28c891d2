"""What each component's own /metrics page says of its health, per interval between two scrapes: the
scheduler's queues and attempts, the controller-manager's work queues and evictions, the apiserver's in-flight
requests and API Priority and Fairness, etcd's slow applies, leader changes and disk latency."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.analysis import etcd
from loadtests.analysis.metrics import (
    Quantile,
    Snapshot,
    counter_delta,
    counter_delta_by,
    histogram_delta,
    histogram_deltas,
)
from loadtests.config.topology import CONTROLLER_MANAGER, SCHEDULER, component_of
from loadtests.controlplane.base import TargetInfo
from loadtests.kube.access import ClusterAccess, unverified_context
from loadtests.kube.rest import TRANSPORT_ERRORS, short_error
from loadtests.measure.prometheus import MergedPage, MetricsPage, apiserver_page, one_page, page
from loadtests.results.health import WorkQueue

Figures = dict[str, float | None]
USER_AGENT = "k8s-loadtest/health"  # every request of the health sampler: the apiserver's logs tell it apart


# the work queues (by their `name` label) of the controllers that Deployments, StatefulSets, DaemonSets, Jobs
# and Services drive: ClusterLoader2's load test is their work
CONTROLLER_QUEUES = ("deployment", "replicaset", "statefulset", "daemonset", "job", "endpoint_slice")
OTHER_QUEUES = 4  # beside those, the queues with the most items added over the window


# figure -> metric names to look for, newest first (the first one on the page is used and recorded)
METRICS: dict[str, tuple[str, ...]] = {
    "scheduler_pending_pods": ("scheduler_pending_pods",),
    "scheduler_attempts": ("scheduler_schedule_attempts_total",),
    "workqueue_depth": ("workqueue_depth",),
    "workqueue_queue_p99": ("workqueue_queue_duration_seconds",),
    "workqueue_work_p99": ("workqueue_work_duration_seconds",),
    "workqueue_adds": ("workqueue_adds_total",),
    "workqueue_retries": ("workqueue_retries_total",),
    "evictions_node_collector": ("node_collector_evictions_total", "node_collector_evictions_number"),
    "evictions_taint_manager": ("taint_eviction_controller_pod_deletions_total",),
    "apiserver_inflight": ("apiserver_current_inflight_requests",),
    "apf_inqueue": ("apiserver_flowcontrol_current_inqueue_requests",),
    "apf_rejected": ("apiserver_flowcontrol_rejected_requests_total",),
    "apf_wait_p99": ("apiserver_flowcontrol_request_wait_duration_seconds",),
    "etcd_slow_applies": ("etcd_server_slow_apply_total",),
    "etcd_leader_changes": ("etcd_server_leader_changes_seen_total",),
    "etcd_wal_fsync_p99": (etcd.WAL_FSYNC,),
    "etcd_backend_commit_p99": (etcd.BACKEND_COMMIT,),
}


HISTOGRAMS = frozenset({"workqueue_queue_p99", "workqueue_work_p99", "apf_wait_p99", "etcd_wal_fsync_p99",
                        "etcd_backend_commit_p99"})


# which source serves which figures; the scrapes keep only these families
SOURCE_FIGURES: dict[str, tuple[str, ...]] = {
    "kube-apiserver": ("apiserver_inflight", "apf_inqueue", "apf_rejected", "apf_wait_p99"),
    SCHEDULER: ("scheduler_pending_pods", "scheduler_attempts"),
    CONTROLLER_MANAGER: ("workqueue_depth", "workqueue_queue_p99", "workqueue_work_p99", "workqueue_adds",
                         "workqueue_retries", "evictions_node_collector", "evictions_taint_manager"),
    "etcd": ("etcd_slow_applies", "etcd_leader_changes", "etcd_wal_fsync_p99", "etcd_backend_commit_p99"),
}


# APF counts rejections in a counter that appears with the first one; this family shows APF is on at all
APF_PRESENT = "apiserver_flowcontrol_dispatched_requests_total"


def _families(source: str) -> frozenset[str]:
    return frozenset(name for figure in SOURCE_FIGURES[source] for name in METRICS[figure]) | {APF_PRESENT}


def _first_present(snapshot: Snapshot, figure: str) -> tuple[str, str] | None:
    """(the metric as the page names it, the name to read it by): the parser names a counter's samples *_total
    even where the page does not (older components' counters, e.g. node_collector_evictions_number)."""
    histogram = figure in HISTOGRAMS
    for name in METRICS[figure]:
        if histogram:
            if snapshot.has(f"{name}_bucket"):
                return name, name
            continue
        for series in (name, f"{name}_total"):
            if snapshot.has(series):
                return name, series
    return None


class MetricReader:
    """Reads figures off a pair of scrapes (the previous one may be None) and records which metric served each."""

    def __init__(self, used: dict[str, str], bounds: dict[str, str] | None = None) -> None:
        self.used = used
        self.bounds = bounds if bounds is not None else {}  # figure key -> "<" or ">" where a p99 is only a bound

    def name(self, snapshot: Snapshot, figure: str) -> str | None:
        found = _first_present(snapshot, figure)
        if found is None:
            return None
        self.used[figure] = found[0]  # over an earlier "no series yet"
        return found[1]

    def counter(self, previous: Snapshot | None, current: Snapshot, figure: str) -> float | None:
        """Increase since `previous` (None without one). A counter with no series yet has counted nothing: 0."""
        name = self.name(current, figure)
        if previous is None:
            return None
        if name is None:
            self.used.setdefault(figure, f"{METRICS[figure][0]} (no series on the page: counted as 0)")
            return 0.0
        return counter_delta(previous, current, name) or 0.0

    def p99(self, previous: Snapshot | None, current: Snapshot, figure: str) -> float | None:
        """p99 over the interval under the key `figure`_s, as a bound (in `bounds`) where the histogram gives
        no more; None when nothing was counted."""
        name = self.name(current, figure)
        if previous is None or name is None:
            return None
        delta = histogram_delta(previous, current, name)
        return self.honest(f"{figure}_s", delta.p99() if delta is not None else Quantile(None))

    def honest(self, key: str, quantile: Quantile) -> float | None:
        """The quantile's figure (its bound where it is only one), noting the bound under `key`."""
        if quantile.bound:
            self.bounds[key] = quantile.bound
        return quantile.honest


def scheduler_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str],
                      bounds: dict[str, str] | None = None) -> Figures:
    """Pods waiting per scheduler queue (now), scheduling attempts per result (since the previous scrape)."""
    read = MetricReader(used, bounds)
    figures: Figures = {}
    name = read.name(current, "scheduler_pending_pods")
    if name is not None:
        by_queue = current.sum_by(name, "queue")
        figures["scheduler_pending_pods"] = sum(by_queue.values())
        figures.update({f"scheduler_pending_pods.{queue}": value for queue, value in sorted(by_queue.items())})
    attempts = read.name(current, "scheduler_attempts")
    if previous is not None:
        # no series yet: no pod was tried since the scheduler started
        by_result = counter_delta_by(previous, current, attempts, "result") if attempts else {}
        for result in sorted({"scheduled", "unschedulable", "error", *by_result}):
            figures[f"scheduler_attempts.{result}"] = by_result.get(result, 0.0)
    return figures


@dataclass
class QueueFigures:
    """The controller-manager's work queues in one interval: figures plus which queues stood out."""

    figures: Figures
    depth: dict[str, float]  # per queue, now
    wait_p99: dict[str, float]  # per queue with work in the interval


def controller_manager_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str],
                               bounds: dict[str, str] | None = None) -> QueueFigures:
    read = MetricReader(used, bounds)
    figures: Figures = {}
    depth: dict[str, float] = {}
    name = read.name(current, "workqueue_depth")
    if name is not None:
        depth = current.sum_by(name, "name")
        figures["workqueue_depth"] = sum(depth.values())
        figures["workqueue_depth_max"] = max(depth.values(), default=0.0)
    waits: dict[str, float] = {}
    wait_name = read.name(current, "workqueue_queue_p99")
    if previous is not None and wait_name is not None:
        quantiles = {dict(labels)["name"]: histogram.p99()
                     for labels, histogram in histogram_deltas(previous, current, wait_name, ("name",)).items()}
        waits = {queue: q.honest for queue, q in quantiles.items() if q.honest is not None}
        slowest = max(waits, key=lambda queue: waits[queue], default=None)
        figures["workqueue_queue_p99_max_s"] = (
            read.honest("workqueue_queue_p99_max_s", quantiles[slowest]) if slowest is not None else None)
    for figure in ("evictions_node_collector", "evictions_taint_manager"):
        figures[figure] = read.counter(previous, current, figure)
    return QueueFigures(figures, depth, waits)


def controller_queues(first: Snapshot, last: Snapshot, depth_max: dict[str, float], used: dict[str, str],
                      named: tuple[str, ...] = CONTROLLER_QUEUES, others: int = OTHER_QUEUES) -> dict[str, WorkQueue]:
    """The named queues (each one, measured or not), then the `others` with the most items added, over the
    window between two scrapes; `depth_max` is the deepest each queue was in a health sample."""
    read = MetricReader(used)
    adds_name, retries_name = read.name(last, "workqueue_adds"), read.name(last, "workqueue_retries")
    adds = counter_delta_by(first, last, adds_name, "name") if adds_name else {}
    retries = counter_delta_by(first, last, retries_name, "name") if retries_name else {}
    p99s: dict[str, dict[str, Quantile]] = {}
    for figure in ("workqueue_queue_p99", "workqueue_work_p99"):
        name = read.name(last, figure)
        deltas = histogram_deltas(first, last, name, ("name",)) if name else {}
        p99s[figure] = {dict(labels)["name"]: histogram.p99() for labels, histogram in deltas.items()}
    busiest = sorted((q for q in adds if q not in named and adds[q]), key=lambda q: -adds[q])[:others]
    found = {}
    for queue in (*named, *busiest):
        wait, work = p99s["workqueue_queue_p99"].get(queue), p99s["workqueue_work_p99"].get(queue)
        bounds = {key: q.bound for key, q in (("wait_p99_s", wait), ("work_p99_s", work)) if q and q.bound}
        found[queue] = WorkQueue(
            adds=adds.get(queue) if adds_name else None, retries=retries.get(queue) if retries_name else None,
            depth_max=depth_max.get(queue), wait_p99_s=wait.honest if wait else None,
            work_p99_s=work.honest if work else None, bounds=bounds)
    return found


def apiserver_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str],
                      bounds: dict[str, str] | None = None) -> Figures:
    """In-flight requests per kind (the apiserver reports the maximum of the last second), APF queues."""
    read = MetricReader(used, bounds)
    figures: Figures = {}
    name = read.name(current, "apiserver_inflight")
    if name is not None:
        figures.update({f"apiserver_inflight.{kind or 'all'}": value
                        for kind, value in sorted(current.sum_by(name, "request_kind").items())})
    inqueue = read.name(current, "apf_inqueue")
    if inqueue is not None:
        figures["apf_inqueue"] = current.total(inqueue)
    if current.has(APF_PRESENT):  # APF on: an absent rejection counter means none yet
        figures["apf_rejected"] = read.counter(previous, current, "apf_rejected")
    figures["apf_wait_p99_s"] = read.p99(previous, current, "apf_wait_p99")
    return figures


def etcd_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str],
                 bounds: dict[str, str] | None = None) -> Figures:
    read = MetricReader(used, bounds)
    return {
        "etcd_slow_applies": read.counter(previous, current, "etcd_slow_applies"),
        "etcd_leader_changes": read.counter(previous, current, "etcd_leader_changes"),
        "etcd_wal_fsync_p99_s": read.p99(previous, current, "etcd_wal_fsync_p99"),
        "etcd_backend_commit_p99_s": read.p99(previous, current, "etcd_backend_commit_p99"),
    }


class MetricsSource:
    """One /metrics page scraped once per sample over a kept-alive connection; remembers the first and the
    previous scrape, for figures over each interval and over the whole window."""

    def __init__(self, name: str, page: MetricsPage | MergedPage, families: frozenset[str] | None = None) -> None:
        self.name, self.page = name, page
        self.families = _families(name) if families is None else families
        self.first: Snapshot | None = None
        self.previous: Snapshot | None = None
        self.latest: Snapshot | None = None
        self.scrapes = 0
        self.failures = 0
        self.last_error = ""

    def scrape(self) -> Snapshot | None:
        """The page now (None when it could not be had); the last good scrape becomes `previous`."""
        self.scrapes += 1
        try:
            snapshot = Snapshot(self.page.samples(self.families))
        except (*TRANSPORT_ERRORS, OSError, ValueError) as error:
            self.failures += 1
            self.last_error = short_error(error)
            return None
        self.previous, self.latest = self.latest, snapshot
        if self.first is None:
            self.first = snapshot
        return snapshot

    def note(self) -> str | None:
        missed = self.page.missed if isinstance(self.page, MergedPage) else {}
        if missed and not self.failures:  # a merged page read without one of its instances
            return (f"{self.name} /metrics: " + ", ".join(missed) + " not read at the last scrape, its figures "
                    "cover the others")
        if not self.failures:
            return None
        return (f"{self.name} /metrics: {self.failures} of {self.scrapes} scrapes failed, their figures are "
                f"missing (last: {self.last_error})")

    def close(self) -> None:
        self.page.close()


def _client_context(access: ClusterAccess) -> Any:
    """TLS for a component's own serving certificate (self-signed on loopback), presenting the admin client cert."""
    context = unverified_context()
    if access.cert_file and access.key_file:
        context.load_cert_chain(access.cert_file, access.key_file)
    return context


def metrics_sources(info: TargetInfo, timeout_s: float, families: Mapping[str, frozenset[str]] | None = None,
                    ) -> tuple[list[MetricsSource], list[str]]:
    """A source per /metrics page the target exposes (a component's replicas merged into one: the one that
    leads does the work, and a page per replica would say nothing of the cluster), and a note per page it
    does not; `families`: the metric families each component's scrapes keep (default: the health figures')."""
    access = info.access
    kept = families or {}

    timeouts = {"timeout_s": timeout_s, "user_agent": USER_AGENT}
    sources = [MetricsSource("kube-apiserver", apiserver_page(access, info.apiservers, **timeouts),
                             kept.get("kube-apiserver"))]
    notes = []
    for component in (SCHEDULER, CONTROLLER_MANAGER):
        urls = {instance: url for instance, url in info.metrics_urls.items() if component_of(instance) == component}
        pages = {instance: page(url, access, tls=_client_context(access), **timeouts) for instance, url in urls.items()}
        if pages:
            sources.append(MetricsSource(component, one_page(pages), kept.get(component)))
        else:
            notes.append(f"{component} /metrics: not reachable on this target, its figures are missing")
    if info.etcd_metrics_url:
        sources.append(MetricsSource("etcd", page(info.etcd_metrics_url, **timeouts), kept.get("etcd")))
    else:
        notes.append("etcd /metrics: not reachable on this target, its figures are missing")
    return sources, notes
