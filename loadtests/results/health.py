"""Cluster health's section of a step (measure/cluster_health.py, the health sampler through the window).

Step keys (results.json):

    health: ClusterHealth, sampled every few seconds through the measured window (absent in older files:
        an empty ClusterHealth):
        interval_s: the sampling interval
        samples: list of {t_s: seconds since the window opened, values: {figure: number or null}};
            figures (null where the source was unreachable; "_s" seconds, "cpu.*" 100 = one core):
            nodes, nodes_not_ready (Ready not True), nodes_unreachable (Ready Unknown), taint_not_ready,
            taint_unreachable (kwok nodes carrying node.kubernetes.io/not-ready or /unreachable);
            leases, lease_lag_s (the longest a kwok node's Lease went unrenewed: its age now, or the gap
            between its last two renewals if renewed since the previous sample), leases_expired (lag over
            its leaseDurationSeconds); pods, pods_pending, pods_not_running, pods_evicted
            (the harness's namespaces; evicted counts every pod seen evicted since the window opened);
            scheduler_pending_pods (all queues) and scheduler_pending_pods.<queue>;
            scheduler_attempts.<result>, apf_rejected, evictions_node_collector, evictions_taint_manager,
            etcd_slow_applies, etcd_leader_changes (increase since the previous sample);
            workqueue_depth (all controller-manager queues), workqueue_depth_max (the deepest queue),
            workqueue_queue_p99_max_s (the worst queue's wait p99 over the interval);
            apiserver_inflight.<kind>, apf_inqueue, apf_wait_p99_s, etcd_wal_fsync_p99_s,
            etcd_backend_commit_p99_s (p99 over the interval); cpu.machine, cpu.iowait, cpu.<component>
        summary: HealthSummary (its fields are the keys): maxima over the samples (*_max), increases
            over the window (counts), p99 over the window, the deepest and slowest work queues, machine CPU
            average and maximum
        metrics_used: {figure: the metric (or API collection) it was read from}
        notes: list of strings (sources that could not be reached, and why)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class HealthSample:
    """Cluster health at one moment of a step: figure -> value (None where its source did not answer)."""

    t_s: float  # seconds since the measured window opened
    values: dict[str, float | None] = field(default_factory=dict)
    bounds: dict[str, str] = field(default_factory=dict)  # "<" or ">" per quantile value that is only a bound

@dataclass
class WorkQueue:
    """One of the controller-manager's work queues over a step's window (its workqueue_* metrics): what its
    controller was given to do, and how long an item waited and took. None where the page had no such series
    (not measured); a p99 with nothing counted in the window is None too."""

    adds: float | None = None  # items added over the window
    retries: float | None = None  # items put back after a failed sync, over the window
    depth_max: float | None = None  # the deepest a health sample saw it
    wait_p99_s: float | None = None  # an item's wait in the queue before a worker took it, p99 over the window
    work_p99_s: float | None = None  # one item's processing, p99 over the window
    bounds: dict[str, str] = field(default_factory=dict)  # "<" or ">" per p99 that is only a histogram bound

@dataclass
class HealthSummary:
    """What a step's cluster health came to over its window. Each figure is None where its source was not
    measured (a component whose /metrics could not be read, a step without health samples), never 0."""

    samples: int = 0  # health samples taken in the window
    # maxima over the samples: nodes, NotReady and unreachable nodes, the lifecycle controller's taints, the
    # oldest Lease's renewal lag and Leases past their duration, pods Pending and not Running, the scheduler's
    # queues, the controller-manager's work queues (depth, the worst queue's wait p99), API Priority and
    # Fairness (requests in queue, wait p99), etcd's fsync and commit p99, the machine's CPU (% of one core)
    nodes_max: float | None = None
    nodes_not_ready_max: float | None = None
    nodes_unreachable_max: float | None = None
    taint_not_ready_max: float | None = None
    taint_unreachable_max: float | None = None
    lease_lag_max_s: float | None = None
    leases_expired_max: float | None = None
    pods_pending_max: float | None = None
    pods_not_running_max: float | None = None
    scheduler_pending_pods_max: float | None = None
    workqueue_depth_max: float | None = None
    workqueue_queue_p99_max_s: float | None = None
    apf_inqueue_max: float | None = None
    apf_wait_p99_max_s: float | None = None
    etcd_wal_fsync_p99_max_s: float | None = None
    etcd_backend_commit_p99_max_s: float | None = None
    cpu_machine_max: float | None = None
    apiserver_inflight_max: dict[str, float | None] = field(default_factory=dict)  # per request kind
    lease_duration_s: float | None = None  # the Leases' own duration, to read the lag against
    pods_evicted: float | None = None
    workqueue_deepest: dict[str, float] = field(default_factory=dict)  # the deepest queues, deepest first
    # increases over the window, from each source's first and last scrape
    apf_rejected: float | None = None
    evictions_node_collector: float | None = None
    evictions_taint_manager: float | None = None
    etcd_slow_applies: float | None = None
    etcd_leader_changes: float | None = None
    scheduler_attempts: dict[str, float] = field(default_factory=dict)  # per result: scheduled, error, ...
    apf_wait_p99_s: float | None = None
    workqueue_slowest_p99_s: dict[str, float] = field(default_factory=dict)  # the slowest queues' wait p99
    # the queues of the controllers a workload of Deployments, StatefulSets, DaemonSets, Jobs and Services
    # drives (measure/component_metrics.CONTROLLER_QUEUES), then the other queues that had the most work
    workqueues: dict[str, WorkQueue] = field(default_factory=dict)
    cpu_machine_avg: float | None = None  # the machine's CPU over the whole window, % of one core
    cpus: int | None = None  # the machine's cores
    # "<" or ">" per p99 figure above that is only a histogram bound (its value is that bound)
    bounds: dict[str, str] = field(default_factory=dict)

    def figure(self, name: str) -> Any:
        """A figure by its name in results.json (tables of rows name their figures so); a name that is not a
        figure is a KeyError, never a silent None."""
        if name not in _HEALTH_FIGURES:
            raise KeyError(f"{name!r} is not a figure of the health summary")
        return getattr(self, name)

_HEALTH_FIGURES = frozenset(f.name for f in dataclasses.fields(HealthSummary))

@dataclass
class ClusterHealth:
    """Cluster health sampled through a step: the time series, its summary, and where each figure came from."""

    interval_s: float | None = None
    samples: list[HealthSample] = field(default_factory=list)
    summary: HealthSummary = field(default_factory=HealthSummary)
    metrics_used: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

@dataclass
class HealthSection:
    """Cluster health through the window (an empty ClusterHealth: not sampled)."""

    health: ClusterHealth = field(default_factory=ClusterHealth)
