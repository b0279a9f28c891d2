"""Cluster health through a step: what someone growing a cluster toward thousands of nodes watches under load.

A background thread samples every `interval_s` (5 s by default: at 5,000 nodes a LIST of every node each 100 ms
would be a load of its own) from the step probes' start to their gather:

- the API: kwok nodes NotReady or unreachable and the taints the node lifecycle controller put on them, and the
  pods of the harness's namespaces that are not Running or were evicted, kept current by the run's watches
  (ClusterView: one LIST, then only the changes); how long the nodes' Leases went unrenewed, against the lease
  duration, from a LIST of the Leases per sample (they change 500 times a second at 5,000 nodes: a watch would
  cost more);
- /metrics, one scrape per source and sample: the scheduler's queues and attempts, the controller-manager's
  work queues and evictions, the apiserver's in-flight requests and API Priority and Fairness, etcd's slow
  applies, leader changes and disk latency over each interval;
- the kernel (psutil): the machine's CPU beside each component's.

A source that cannot be reached leaves its figures None and says why in the notes; it never fails the step.
Every request goes out as user agent "k8s-loadtest/health", so the apiserver's logs tell it from the load's."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import psutil

from loadtests.analysis.metrics import Snapshot
from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.rest import RestClient, short_error
from loadtests.measure.cluster_objects import (
    LEASE_NAMESPACE,
    ClusterView,
    LeaseLists,
    NodeState,
    PodState,
    Watched,
    WatchMark,
    node_figures,
    pod_figures,
)
from loadtests.measure.component_metrics import (
    CONTROLLER_MANAGER,
    SCHEDULER,
    USER_AGENT,
    Figures,
    MetricReader,
    MetricsSource,
    apiserver_figures,
    controller_manager_figures,
    controller_queues,
    etcd_figures,
    metrics_sources,
    scheduler_figures,
)
from loadtests.measure.processes import CpuMeter
from loadtests.polling import every
from loadtests.results.health import ClusterHealth, HealthSample, HealthSummary
from loadtests.results.spool import Spool

DEFAULT_INTERVAL_S = 5.0


def _maximum(samples: Sequence[HealthSample], key: str) -> float | None:
    found = [value for s in samples if (value := s.values.get(key)) is not None]
    return max(found) if found else None


def _maximum_bound(samples: Sequence[HealthSample], key: str) -> str:
    """Whether the maximum of a sampled quantile is only a bound: the bound of the sample that holds it (an
    interpolated value at the same height wins: it says more)."""
    top = _maximum(samples, key)
    bounds = {s.bounds.get(key, "") for s in samples if top is not None and s.values.get(key) == top}
    return "" if "" in bounds or not bounds else min(bounds)


def _top(values: Mapping[str, float], count: int = 5) -> dict[str, float]:
    """The largest non-zero values, largest first."""
    ranked = sorted(((v, k) for k, v in values.items() if v), reverse=True)[:count]
    return {k: round(v, 6) for v, k in ranked}


# figures summarised by their maximum over the samples: summary key -> sample key
MAXIMA = {
    "nodes_max": "nodes", "nodes_not_ready_max": "nodes_not_ready", "nodes_unreachable_max": "nodes_unreachable",
    "taint_not_ready_max": "taint_not_ready", "taint_unreachable_max": "taint_unreachable",
    "lease_lag_max_s": "lease_lag_s", "leases_expired_max": "leases_expired",
    "pods_pending_max": "pods_pending", "pods_not_running_max": "pods_not_running",
    "scheduler_pending_pods_max": "scheduler_pending_pods",
    "workqueue_depth_max": "workqueue_depth", "workqueue_queue_p99_max_s": "workqueue_queue_p99_max_s",
    "apf_inqueue_max": "apf_inqueue", "apf_wait_p99_max_s": "apf_wait_p99_s",
    "etcd_wal_fsync_p99_max_s": "etcd_wal_fsync_p99_s", "etcd_backend_commit_p99_max_s": "etcd_backend_commit_p99_s",
    "cpu_machine_max": "cpu.machine",
}


# figures summarised by their increase over the window: summary key -> figure of METRICS, source
WINDOW_COUNTERS = {
    "apf_rejected": ("apf_rejected", "kube-apiserver"),
    "evictions_node_collector": ("evictions_node_collector", CONTROLLER_MANAGER),
    "evictions_taint_manager": ("evictions_taint_manager", CONTROLLER_MANAGER),
    "etcd_slow_applies": ("etcd_slow_applies", "etcd"),
    "etcd_leader_changes": ("etcd_leader_changes", "etcd"),
}


API_SOURCES = {
    "nodes": f"API: LIST+WATCH nodes ({objects.NODE_SELECTOR}), Ready condition and spec.taints",
    "lease_lag_s": (f"API: LIST leases in {LEASE_NAMESPACE} (resourceVersion=0) every sample: now - spec.renewTime, "
                    "or the gap between two renewTimes"),
    "pods": "API: LIST+WATCH pods in {}, status.phase; evicted: status.reason Evicted or condition DisruptionTarget",
    "cpu": "process: psutil.cpu_times() (machine) and each component's pids",
}


class ClusterHealthSampler:
    """Samples cluster health every `interval_s` from start() to gather(); same shape as the other probes."""

    def __init__(self, info: TargetInfo, pids: Mapping[str, Iterable[int]] | None = None, *,
                 interval_s: float = DEFAULT_INTERVAL_S,
                 pod_namespaces: Sequence[str] = (objects.NS_FLEET, objects.NS_CHURN),
                 origin: float | None = None, view: ClusterView | None = None) -> None:
        self.info = info
        self.interval_s = interval_s
        self.pod_namespaces = tuple(dict.fromkeys(pod_namespaces))
        self.origin = origin  # monotonic time the window opened (start() when None)
        # the nodes and pods, watched: the run's view shared with other windows, else one of the window's own
        self.owns_view = view is None
        self.view = view if view is not None else ClusterView(info.access, self.pod_namespaces)
        self.pods = [self.view.pods_in(ns) for ns in self.pod_namespaces]
        # its LIST of every Lease comes paced: the apiserver writes one as it encodes it, a Lease at a time
        self.client = RestClient(info.access, pool_size=2, user_agent=USER_AGENT, paced=True)
        self.leases = LeaseLists(self.client)
        self._marks: dict[int, WatchMark] = {}  # each watch's trouble before the window is not the window's
        self._view_sent: dict[tuple[str, str], int] = {}
        self._evicted_before: list[frozenset[str]] = []  # evicted pods present as the window opened
        self.scrape_timeout_s = min(10.0, max(2.0, interval_s))
        self.sources, self._source_notes = metrics_sources(info, timeout_s=self.scrape_timeout_s)
        self.cpu = CpuMeter(pids if pids is not None else info.pids)
        # on disk until gather(): a window of hours must not grow the harness (results/spool.py)
        self.samples: Spool[HealthSample] = Spool(lambda found: HealthSample(**found))
        self.metrics_used: dict[str, str] = {}
        self.notes: list[str] = []
        self._queue_depth_max: dict[str, float] = {}
        self._lock = threading.Lock()  # one sample at a time (the thread's, or the final one)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gathered: ClusterHealth | None = None

    # -- lifecycle --
    @property
    def nodes(self) -> Watched[NodeState]:
        return self.view.nodes

    def _watches(self) -> list[Watched[Any]]:
        return [self.nodes, *self.pods]

    def start(self) -> None:
        if self.origin is None:
            self.origin = time.monotonic()
        self.view.start()
        self._marks = {id(watched): watched.mark() for watched in self._watches()}
        self._view_sent = self.view.sent()
        self._evicted_before = [watched.flagged_now() for watched in self.pods]
        self._thread = threading.Thread(target=self._run, name="cluster-health", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        every(self.interval_s, self._stop, self._sample_noted)

    def _sample_noted(self) -> None:
        try:
            self.sample()
        except Exception as error:  # a sampler thread must survive anything; say so once
            note = f"cluster health sample failed: {short_error(error)}"
            if note not in self.notes:
                self.notes.append(note)

    def _stop_thread(self, timeout_s: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def stop(self) -> None:
        """Stop sampling and watching without gathering (an aborted step); safe to call again."""
        self._stop_thread(timeout_s=2.0)  # an aborted step must not wait for a slow scrape
        if self.owns_view:
            self.view.stop()
        for source in self.sources:
            source.close()
        self.client.close()

    def requests(self) -> dict[tuple[str, str], int]:
        """API requests sent since start() per (verb, resource), the view's included, to take off the apiserver's
        counts."""
        sent = collections.Counter(self.client.sent())
        sent.update(self.view.sent())
        sent.subtract(self._view_sent)
        return {key: count for key, count in sent.items() if count}

    def add(self, component: str, pids: Iterable[int]) -> None:
        self.cpu.add(component, pids)

    # -- sampling --
    def sample(self) -> HealthSample:
        """Take one sample now and spool it."""
        with self._lock:
            assert self.origin is not None
            values: Figures = {}
            nodes = self.nodes.items()
            leases = self.leases.refresh()
            if nodes is not None:
                values.update(node_figures(nodes, *(leases or (None, None)), now=time.time()))
            tallies = [w.tally() for w in self.pods]
            if all(t is not None for t in tallies):
                merged: collections.Counter[PodState] = collections.Counter()  # namespaces' tallies add up
                for tally in tallies:
                    merged.update(tally or {})
                evicted = sum(watched.flagged(self.origin, before)
                              for watched, before in zip(self.pods, self._evicted_before, strict=False))
                values.update(pod_figures(merged, evicted))
            bounds: dict[str, str] = {}
            for source in self.sources:
                values.update(self._source_figures(source, bounds))
            values.update(self.cpu.read())
            sample = HealthSample(t_s=round(time.monotonic() - self.origin, 3), values=values, bounds=bounds)
            self.samples.append(sample)
            return sample

    def _source_figures(self, source: MetricsSource, bounds: dict[str, str]) -> Figures:
        current = source.scrape()
        if current is None:
            return {}
        previous = source.previous
        if source.name == SCHEDULER:
            return scheduler_figures(previous, current, self.metrics_used, bounds)
        if source.name == CONTROLLER_MANAGER:
            queues = controller_manager_figures(previous, current, self.metrics_used, bounds)
            for queue, depth in queues.depth.items():
                self._queue_depth_max[queue] = max(depth, self._queue_depth_max.get(queue, 0.0))
            return queues.figures
        if source.name == "etcd":
            return etcd_figures(previous, current, self.metrics_used, bounds)
        return apiserver_figures(previous, current, self.metrics_used, bounds)

    def gather(self) -> ClusterHealth:
        """The final sample, then the time series with its summary; the sampler is stopped afterwards."""
        if self._gathered is not None:
            return self._gathered
        self._stop_thread(timeout_s=self.scrape_timeout_s * (len(self.sources) + 1))
        if self.origin is not None:
            until = time.monotonic()
            for watched in self._watches():
                watched.settle(until)  # the final sample sees what the view's watches read before it
            self.sample()  # waits for a sample still under way
        samples = self.samples.items()
        self.samples.close()
        summary = self._summary(samples)
        notes = list(self._source_notes)
        notes += [n for n in (s.note() for s in self.sources) if n]
        notes += [n for n in (w.note(self._marks.get(id(w), WatchMark(1, 0))) for w in self._watches()) if n]
        notes += [n for n in [self.leases.note()] if n]
        notes += self.notes
        used = dict(sorted(self.metrics_used.items()))
        used["nodes"] = API_SOURCES["nodes"]
        used["lease_lag_s"] = API_SOURCES["lease_lag_s"]
        used["pods"] = API_SOURCES["pods"].format(", ".join(self.pod_namespaces))
        used["cpu"] = API_SOURCES["cpu"]
        self.stop()
        self._gathered = ClusterHealth(interval_s=self.interval_s, samples=samples, summary=summary,
                                       metrics_used=used, notes=notes)
        return self._gathered

    def _summary(self, samples: list[HealthSample]) -> HealthSummary:
        summary: dict[str, Any] = {"samples": len(samples)}
        summary.update({key: _maximum(samples, figure) for key, figure in MAXIMA.items()})
        bounds = {key: bound for key, figure in MAXIMA.items() if (bound := _maximum_bound(samples, figure))}
        inflight = sorted({k for s in samples for k in s.values if k.startswith("apiserver_inflight.")})
        summary["apiserver_inflight_max"] = {k.split(".", 1)[1]: _maximum(samples, k) for k in inflight}
        durations = [lease.duration_s for lease in (self.leases.states or {}).values() if lease.duration_s]
        summary["lease_duration_s"] = max(durations) if durations else None
        summary["pods_evicted"] = _maximum(samples, "pods_evicted")
        summary["workqueue_deepest"] = _top(self._queue_depth_max)
        summary.update(self._window_figures(bounds))
        summary["cpu_machine_avg"] = self.cpu.average()
        summary["cpus"] = psutil.cpu_count()
        return HealthSummary(**summary, bounds=bounds)

    def _window_figures(self, bounds: dict[str, str]) -> dict[str, Any]:
        """Increases and p99s over the whole window, from each source's first and last scrape."""
        by_name = {s.name: s for s in self.sources}
        found: dict[str, Any] = {}
        used: dict[str, str] = {}
        read = MetricReader(used, bounds)

        def pair(source: str) -> tuple[Snapshot, Snapshot] | None:
            entry = by_name.get(source)
            if entry is None or entry.first is None or entry.latest is None or entry.latest is entry.first:
                return None
            return entry.first, entry.latest

        for key, (figure, source) in WINDOW_COUNTERS.items():
            scrapes = pair(source)
            found[key] = read.counter(*scrapes, figure) if scrapes else None
        scheduler = pair(SCHEDULER)
        found["scheduler_attempts"] = {k.split(".", 1)[1]: v for k, v in
                                       scheduler_figures(*scheduler, used).items()
                                       if k.startswith("scheduler_attempts.")} if scheduler else {}
        apiserver = pair("kube-apiserver")
        found["apf_wait_p99_s"] = read.p99(*apiserver, "apf_wait_p99") if apiserver else None
        queues = pair(CONTROLLER_MANAGER)
        found["workqueue_slowest_p99_s"] = (
            _top(controller_manager_figures(*queues, used).wait_p99) if queues else {})
        found["workqueues"] = controller_queues(*queues, self._queue_depth_max, used) if queues else {}
        return found
