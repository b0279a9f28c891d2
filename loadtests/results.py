"""The results of a run: the one format every later stage reads (report, JUnit, compare).

A results folder holds `results.json`. It is rewritten after every finished step (write to a temp file, then
rename), so a crash loses no finished step. Only measurements are stored; verdicts and charts are computed
from them by the report, so nothing is stored twice.

Schema (version 1), all times in seconds, sizes in bytes, rates per second:

    schema_version: 1
    run_id, status ("running" | "complete" | "aborted"), error (one line or null)
    started_at, finished_at: ISO-8601 UTC
    plan: the validated plan as a mapping (see loadtests/config/plan.py); plan_digest: sha256 of its steps+load
    environment: versions (kubernetes, etcd, kwok, locust, python), target, machine (cpus, memory, platform)
    steps: list of StepResult, in order:
        index, name, nodes, pods_per_node, started_at, duration_s (measured window)
        ramp: nodes_ready_s, pods_running_s (time to reach the step's scale), harness_cpu_s (the harness's CPU
            during the node ramp), load_spawn_s (time until every load user ran, before the window opened)
        client: list of ClientStat (Locust, per request type+name); content_bytes: the bytes of all its
            responses (absent in older files). A watcher scenario that counts what it receives (service_watchers)
            has a row of type RECV, named after its watch: one count per watch event, content_bytes their bytes;
            informers add rows of type SYNC, its "response time" the ms it took: each informer's first return to
            sync after a cut watch (from the cut, with the bytes received meanwhile; and the attempt that
            succeeded), one count an informer, and any later return (cut again after it was back in sync)
        rates: list of RateResult (per scenario: asked vs achieved per second); a watcher scenario that counts
            what it receives adds events and received_bytes: the watch events (BOOKMARKs included) and their
            bytes (the response body, newlines included) all its watchers received in the measured window
        server: list of ServerLatency (apiserver_request_sli_duration_seconds deltas per verb/resource/scope);
            bounds: {quantile: "<" | ">"} where the histogram gives only a bound (the value is that bound);
            finer: the same requests' apiserver_request_duration_seconds quantiles, {} where unavailable
        requests_by_code: {"200": n, "429": n, ...} from apiserver_request_total deltas
        server_requests: {"POST pods": n, ...} apiserver_request_total deltas for each verb+resource the load
            sent (the probes' own requests taken off), to set against the client-side counts
        apiserver: scalar gauges and counters (watchers, inflight, watch events, ...)
        storage_objects: {"pods": n, ...} from apiserver_resource_objects (or apiserver_storage_objects): the
            apiserver's gauge, refreshed lazily (it can lag by minutes)
        objects: {"pods": n, ...} counted when the window closed by a LIST with limit=1 (its items plus
            remainingItemCount): right at that moment (absent in older files)
        etcd: db_size_bytes, db_size_in_use_bytes, keys_total, quota_bytes, fsync/commit p99
        pod_startup: Distribution (create -> Running, seen by a watch)
        watch_delay: Distribution (write -> event at a watcher)
        processes: list of ProcessStat (CPU and RSS per component, for the load generator (loadgen: the Locust
            processes) and for the harness's own process (harness: its own CPU, not its children's; absent in
            older files))
        machine_cpu_percent, machine_cpu_seconds: the whole machine's busy CPU (psutil.cpu_times(), all cores,
            100 = one core) over the same interval as processes, so the rows can be set against it (null in older
            files)
        workers: list of WorkerStat: each Locust worker's share of the window as its master counted it
            (worker: its address or host and pid; remote: from another machine (`loadtest worker`); requests,
            failures; cpu_seconds and cpu_percent (100 = one core) from its own reports around the window;
            lost_after_s: it disconnected or stopped answering this long after the window opened, else null)
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
        audit: who sent the step's requests, from the apiserver's audit log (local control planes with
            auditing on; absent in older files): source, events (requests counted), unreadable (lines that
            did not parse), notes, and
            requests: list of {client, verb, resource, scope, group, count, apiserver_s (summed latency),
                p99_s, codes}; client is the user agent's product, or k8s-loadtest/<part> for the harness's
                own parts (a scenario, fleet, probe-*, health), with the controller's service account beside
                kube-controller-manager; a watch counts when it starts and adds no latency
            slowest: the slowest requests one by one: {client, verb, resource, namespace, name, latency_s,
                code, at_s (since the window opened), user}
        window: {opened_at, closed_at}: the measured window in UTC (ISO-8601)
        profiles: list of ComponentProfile, pprof profiles of kube-apiserver and etcd (absent in older files; empty:
            not profiled): component, kind ("cpu" over the window, "heap" at its close), files (the raw profiles,
            relative to the run folder), sample_type and unit, total, offset_s and seconds (which seconds of the
            window), functions [{name, flat_pct, cum_pct}] and groups [{group, flat_pct, cum_pct}] in % of total
        notes: list of strings (warnings measured during the step, e.g. load generator CPU-bound)
        status: "measured", or "saturated" when nodes or pods did not converge within ramp_timeout_s (the
            breaking point: the run stops growing); saturation: {condition, evidence} of a saturated step
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import types
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadtests.errors import UnreadableFile, unreadable

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
# A process this busy (100 = one core) is the limit of what it drives, not the control plane: a Locust worker,
# the harness (one Python process), the load generator's processes each
CPU_BOUND_PERCENT = 90.0


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def utc_at(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


@dataclass
class Distribution:
    """Quantiles of a sample of durations, in seconds."""

    count: int = 0
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    source: str = ""

    @classmethod
    def of(cls, samples: list[float], source: str) -> Distribution:
        if not samples:
            return cls(count=0, source=source)
        ordered = sorted(samples)

        def q(fraction: float) -> float:
            # nearest-rank: the smallest sample with at least `fraction` of the samples at or below it
            rank = max(1, math.ceil(round(fraction * len(ordered), 9)))
            return ordered[min(len(ordered), rank) - 1]

        return cls(count=len(ordered), p50=q(0.50), p90=q(0.90), p99=q(0.99), max=ordered[-1], source=source)


@dataclass
class ControlledPods:
    """One kind of pod-controlling object over a window (measure/controlled.py): how long each generation of
    each object took from asked (created, scaled, updated) to done (all its pods running; a Job complete)."""

    running: Distribution = field(default_factory=Distribution)
    slowest: dict[str, float] = field(default_factory=dict)  # object (generation) -> seconds, slowest first
    deleted_first: int = 0  # generations whose object was deleted before its controller was done
    superseded: int = 0  # generations replaced by a newer one (updated or scaled again) before done
    unfinished: int = 0  # generations still not done when the window closed
    unfinished_named: list[str] = field(default_factory=list)


@dataclass
class SchedulingThroughput:
    """Pods scheduled per second in each interval of a scheduler-throughput phase (as ClusterLoader2's
    SchedulingThroughput: pods with a node, counted every interval_s), from the pods' creation until every one
    had a node; nearest-rank quantiles of the intervals, and the verdict on the best one (as ClusterLoader2)."""

    pods: int = 0
    interval_s: float = 5.0
    samples: list[float] = field(default_factory=list)  # pods per second, one per interval, in order
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    threshold: float | None = None
    passed: bool | None = None  # None: not every pod was scheduled (nothing to judge the best interval on)
    seconds: float | None = None  # from the Deployment's creation until every pod had a node
    source: str = ""


@dataclass
class ClientStat:
    """Client-side latency of one request kind, as Locust measured it (milliseconds, as Locust reports)."""

    type: str
    name: str
    count: int
    failures: int
    rps: float
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    avg_ms: float | None = None
    content_bytes: int | None = None  # all its responses' bytes (Locust's count x average content size)


@dataclass
class RateResult:
    """What a scenario was asked to do per second, and what it achieved."""

    scenario: str
    asked_per_s: float | None
    achieved_per_s: float
    unit: str = "requests"
    per_second: bool = True  # False: a count (watches established), not a rate
    events: int | None = None  # watch events its watchers received in the window (scenarios that count them)
    received_bytes: int | None = None  # the bytes of those events


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
class ProcessStat:
    """CPU and memory of one process (or process group) over the step, measured with psutil."""

    component: str
    cpu_percent: float  # average over the step, 100 = one full core
    cpu_seconds: float
    rss_max_bytes: int
    rss_end_bytes: int
    pids: list[int] = field(default_factory=list)


@dataclass
class WorkerStat:
    """One Locust worker's share of the measured window: a worker on another machine has no pid here to
    measure, so its master counts what it reports."""

    worker: str
    remote: bool = False
    requests: int = 0
    failures: int = 0
    cpu_seconds: float | None = None
    cpu_percent: float | None = None
    lost_after_s: float | None = None


@dataclass
class EtcdMember:
    """One member of an etcd cluster of several over a step (its own /metrics): whether it led at the window's
    close, its copy of the database, its disk's latency."""

    leader: bool | None = None
    db_size_bytes: float | None = None
    wal_fsync_p99_s: float | None = None
    backend_commit_p99_s: float | None = None
    bounds: dict[str, str] = field(default_factory=dict)  # "<" or ">" per p99 that is only a histogram bound


@dataclass
class EtcdStats:
    source: str = "etcd /metrics"
    db_size_bytes: float | None = None
    db_size_in_use_bytes: float | None = None
    keys_total: float | None = None
    quota_bytes: float | None = None
    wal_fsync_p99_s: float | None = None
    backend_commit_p99_s: float | None = None
    # "<" or ">" per p99 above that is only a histogram bound (the first bucket's top, the highest finite bound)
    bounds: dict[str, str] = field(default_factory=dict)
    # asked of the main etcd itself at the window's close (local control planes): its raised alarms
    # (e.g. NOSPACE) and its keys per prefix ({"events": n, "pods": n, "leases": n})
    alarms: list[str] = field(default_factory=list)
    keys_by_prefix: dict[str, int] = field(default_factory=dict)
    # an etcd of several members: each one's figures by member name (the figures above are the cluster's: its
    # database as the largest member holds it, every member's fsyncs and commits together)
    members: dict[str, EtcdMember] = field(default_factory=dict)


@dataclass
class HealthSample:
    """Cluster health at one moment of a step: figure -> value (None where its source did not answer)."""

    t_s: float  # seconds since the measured window opened
    values: dict[str, float | None] = field(default_factory=dict)
    bounds: dict[str, str] = field(default_factory=dict)  # "<" or ">" per quantile value that is only a bound


@dataclass
class StepEvent:
    """Something that happened to the control plane during a step that the cluster went on without: an etcd
    member or an apiserver of several lost, and later back (the health watch's; see controlplane/health.py)."""

    at: str  # UTC, ISO-8601
    t_s: float  # seconds since the step started (its ramp included)
    what: str


@dataclass
class RollMark:
    """One instance a rolling upgrade replaced, in seconds since the step's window opened: when it left the
    load balancer's rotation (an apiserver; the others when they were stopped), when it answered as ready on
    its new version, and when it was back in rotation."""

    instance: str
    version: str
    out_at_s: float
    ready_at_s: float
    back_at_s: float
    stop_s: float  # SIGTERM until it exited (finishing its requests, closing its watches)
    start_to_ready_s: float  # started on the new version until /readyz (/healthz) answered
    # the new process's peak resident set from its start to the window's close (the kernel's VmHWM, read at the
    # close); None: not read (an older file, or no /proc)
    peak_rss_bytes: int | None = None

    @property
    def stop_to_ready_s(self) -> float:
        return self.stop_s + self.start_to_ready_s


@dataclass
class ProbeSecond:
    """One second of the availability probe: its requests sent in that second, those served (2xx), the slowest
    answered one (of so few a second, the p99 is the maximum), and the others by code ("503", "connection")."""

    t: int  # whole seconds since the window opened
    sent: int
    served: int
    slowest_s: float | None = None  # None: no request of this second was answered
    failed: dict[str, int] = field(default_factory=dict)


@dataclass
class RollResult:
    """A rolling upgrade during a step (`loadtest rehearse --rolling`): what was replaced when, and what the
    availability probe saw through it, second by second; the verdicts are derived (analysis/roll.py)."""

    from_version: str
    to_version: str
    started_at_s: float  # into the window: the steady seconds before it are the step's steady range
    finished_at_s: float | None = None  # the last instance back in rotation; None: the roll did not finish
    marks: list[RollMark] = field(default_factory=list)
    seconds: list[ProbeSecond] = field(default_factory=list)
    probe: str = ""  # what one probe request is, e.g. "GET /api/v1/namespaces/default through the load balancer"
    probe_qps: float = 0.0
    hosts_ready: dict[str, float] = field(default_factory=dict)  # apiserver -> share of seconds /readyz answered
    thresholds: dict[str, float] = field(default_factory=dict)  # availability_pct, recovery_s (the plan's)
    error: str | None = None  # why the roll stopped before its last instance
    notes: list[str] = field(default_factory=list)


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
class AuditRow:
    """Requests of one client, verb, resource and scope in a step, from the apiserver's audit log."""

    client: str
    verb: str  # as the apiserver's request metrics name it (POST, LIST, WATCH, ...)
    resource: str  # with its subresource, e.g. "nodes/status"
    scope: str  # "resource" | "namespace" | "cluster"
    group: str
    count: int
    apiserver_s: float  # the sum of the requests' latencies (0 for watches: their duration is their life)
    p99_s: float | None
    codes: dict[str, int] = field(default_factory=dict)


@dataclass
class AuditRequest:
    """One of a step's slowest requests, with the client that sent it."""

    client: str
    verb: str
    resource: str
    namespace: str
    name: str
    latency_s: float
    code: str
    at_s: float  # seconds after the measured window opened
    user: str = ""


@dataclass
class AuditSummary:
    """Who sent which requests during a step (empty where no audit log was read)."""

    source: str = ""
    events: int = 0
    unreadable: int = 0
    requests: list[AuditRow] = field(default_factory=list)
    slowest: list[AuditRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class ProfileFunction:
    """One function of a pprof profile: its own share (flat: samples where it was running) and its share with
    what it called (cum), each in % of the profile's total."""

    name: str
    flat_pct: float
    cum_pct: float


@dataclass
class ProfileGroup:
    """A group of functions (serialisation, watch cache, GC, ...; analysis/profiles.GROUPS): flat_pct are the
    samples whose innermost grouped frame is one of the group's, so the groups and "other" add up to 100;
    cum_pct the samples with any frame of the group on their stack (groups overlap there)."""

    group: str
    flat_pct: float
    cum_pct: float


@dataclass
class ComponentProfile:
    """A pprof profile of one component over the step's window (CPU) or at its close (heap), kept raw in the
    step's folder (files: paths relative to the run folder, gzipped protobuf as served: `go tool pprof` opens
    them), with its top functions and groups computed when the step was gathered."""

    component: str  # the instance: kube-apiserver (kube-apiserver-2 of several), etcd
    kind: str  # "cpu" | "heap"
    files: list[str] = field(default_factory=list)
    sample_type: str = ""  # the profile's value summed: "cpu" (nanoseconds), "inuse_space" (bytes)
    unit: str = ""
    total: float | None = None  # the sum of that value over every sample (CPU: nanoseconds on a CPU)
    offset_s: float | None = None  # seconds after the window opened that the profile began (heap: was taken)
    seconds: float | None = None  # seconds profiled (CPU); None for a heap profile
    functions: list[ProfileFunction] = field(default_factory=list)  # by flat share, largest first
    groups: list[ProfileGroup] = field(default_factory=list)  # by flat share, largest first; "other" included


@dataclass
class StepResult:
    index: int
    name: str
    nodes: int
    pods_per_node: int
    started_at: str
    duration_s: float
    ramp: dict[str, float | None] = field(default_factory=dict)
    client: list[ClientStat] = field(default_factory=list)
    rates: list[RateResult] = field(default_factory=list)
    server: list[ServerLatency] = field(default_factory=list)
    requests_by_code: dict[str, int] = field(default_factory=dict)
    server_requests: dict[str, int] = field(default_factory=dict)
    apiserver: dict[str, float] = field(default_factory=dict)
    storage_objects: dict[str, float] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)
    etcd: EtcdStats = field(default_factory=EtcdStats)
    pod_startup: Distribution = field(default_factory=Distribution)
    watch_delay: Distribution = field(default_factory=Distribution)
    # per kind (Deployment, StatefulSet, DaemonSet, Job) of the objects scenario: asked -> all pods running
    controlled: dict[str, ControlledPods] = field(default_factory=dict)
    scheduling: SchedulingThroughput | None = None  # the scheduler-throughput phase's
    processes: list[ProcessStat] = field(default_factory=list)
    # the machine's CPU over the same interval as processes (None: not measured, e.g. older results)
    machine_cpu_percent: float | None = None
    machine_cpu_seconds: float | None = None
    workers: list[WorkerStat] = field(default_factory=list)
    health: ClusterHealth = field(default_factory=ClusterHealth)
    audit: AuditSummary = field(default_factory=AuditSummary)
    # when the measured window opened and closed (UTC, ISO-8601), to line it up with other monitoring
    window: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    events: list[StepEvent] = field(default_factory=list)  # what the cluster survived during the step
    roll: RollResult | None = None  # a rolling upgrade during this step's window
    # the step's apiservers restarted on the same version in its window (steps[].restart_apiserver_at_s): a roll
    # of the apiservers only, without the availability probe, and none of a roll's verdicts
    restart: RollResult | None = None
    # pprof profiles of kube-apiserver and etcd (empty: not profiled; absent in older files)
    profiles: list[ComponentProfile] = field(default_factory=list)
    # "measured", or "saturated": the control plane did not converge (the run's breaking point); then
    # saturation says what did not ({"condition": ..., "evidence": ...}) and the figures above are empty
    status: str = "measured"
    saturation: dict[str, str] = field(default_factory=dict)


@dataclass
class RunResult:
    run_id: str
    plan: dict[str, Any]
    environment: dict[str, Any]
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    status: str = "running"
    error: str | None = None
    steps: list[StepResult] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @property
    def plan_digest(self) -> str:
        return plan_digest(self.plan)


def plan_digest(plan: dict[str, Any]) -> str:
    """Identity of what a plan asks for (steps and load), ignoring the target, gating and name.

    Two runs with the same digest can be compared figure by figure, even across Kubernetes versions.
    """
    relevant = {"steps": plan.get("steps"), "load": plan.get("load")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def to_dict(run: RunResult) -> dict[str, Any]:
    data = dataclasses.asdict(run)
    data["plan_digest"] = run.plan_digest
    return data


def _build(cls: Any, data: Any) -> Any:
    """Rebuild a dataclass tree from JSON data (unknown keys are ignored, so newer files still load)."""
    if dataclasses.is_dataclass(cls) and isinstance(data, dict):
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                kwargs[f.name] = _build(hints[f.name], data[f.name])
        return cls(**kwargs)
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType) and isinstance(data, dict):  # X | None: the dataclass X
        members = [arg for arg in typing.get_args(cls) if dataclasses.is_dataclass(arg)]
        return _build(members[0], data) if members else data
    if origin is list and isinstance(data, list):
        (item,) = typing.get_args(cls)
        return [_build(item, x) for x in data]
    if origin is dict and isinstance(data, dict):
        _, item = typing.get_args(cls)
        return {key: _build(item, value) for key, value in data.items()}
    return data


def from_dict(data: dict[str, Any]) -> RunResult:
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UnreadableFile(f"results schema version {version!r} is not supported (this tool reads "
                             f"{SCHEMA_VERSION})")
    return _build(RunResult, data)


def save(run: RunResult, folder: Path) -> Path:
    """Write results.json atomically, so a reader, a crash or a full disk never leaves half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / RESULTS_FILE
    tmp = folder / f".{RESULTS_FILE}.tmp"
    try:
        tmp.write_text(json.dumps(to_dict(run), indent=1))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)  # the last good file stays as it was
        raise
    return target


REPORT_SUFFIXES = (".html", ".htm")


def load(folder: Path) -> RunResult:
    """A run folder's results (or a results.json named itself). What is not readable results is refused in one
    line naming the file (UnreadableFile, exit 2); a report page given for its folder says what to give."""
    if Path(folder).suffix.lower() in REPORT_SUFFIXES and not Path(folder).is_dir():
        raise UnreadableFile(f"{folder} is a report page, not a run folder: give the folder it was written into "
                             f"(the one that holds {RESULTS_FILE} beside it, e.g. reports/<run-id>)")
    path = folder / RESULTS_FILE if folder.is_dir() else folder
    try:
        text = path.read_bytes()
    except FileNotFoundError as error:
        raise FileNotFoundError(f"no {RESULTS_FILE} in {folder}: is it a run folder (reports/<run-id>)?") from error
    except IsADirectoryError as error:
        raise unreadable(path, "results file", error) from None
    if text.lstrip()[:1] == b"<":
        raise UnreadableFile(f"{path} holds a web page, not results: give the run folder (reports/<run-id>)")
    try:
        data = json.loads(text)
    except ValueError as error:  # UnicodeDecodeError and json's JSONDecodeError both
        raise unreadable(path, "results file", error, "it is not JSON; rerun the run, or restore the file") from None
    if not isinstance(data, dict):
        raise UnreadableFile(f"{path}: not a readable results file (a JSON {type(data).__name__}, not a mapping)")
    try:
        return from_dict(data)
    except UnreadableFile as error:
        raise UnreadableFile(f"{path}: {error}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise unreadable(path, "results file", error) from None


# A report page carries the results it was built from, so the HTML that travels (a CI artifact, a ticket's
# attachment) can be compared, put in a history or turned back into a run folder without the folder itself.
EMBEDDED_ID = "loadtest-results"  # the <script type="application/json"> element holding them
EMBEDDED_FORMAT = 1
_EMBEDDED_START = f'<script type="application/json" id="{EMBEDDED_ID}">'


@dataclass
class EmbeddedRun:
    """One run a page carries: its name in the page ("" for a run report's own run, "repeat-2" for a repeat,
    "A/repeat-1" for a comparison's side), and its results as results.json holds them (secrets left out)."""

    name: str
    results: dict[str, Any]


def encode_embedded(kind: str, runs: list[EmbeddedRun], extra: dict[str, Any] | None = None) -> str:
    """The page's data element body: JSON naming the page's kind, with the runs gzipped and base64-encoded
    (results compress about tenfold, and base64 keeps them safe inside a <script> element)."""
    import base64
    import gzip

    packed = gzip.compress(json.dumps([dataclasses.asdict(r) for r in runs], separators=(",", ":")).encode(),
                           mtime=0)
    return json.dumps({"format": EMBEDDED_FORMAT, "kind": kind, "runs": base64.b64encode(packed).decode(),
                       **(extra or {})})


def _embedded_body(html: str, path: Path) -> dict[str, Any]:
    start = html.find(_EMBEDDED_START)
    if start < 0:
        raise UnreadableFile(f"{path}: the page carries no results (written by an older version, or not a "
                             "loadtest report): give its run folder instead, or rebuild the page with "
                             "`loadtest report RUN_DIR`")
    start += len(_EMBEDDED_START)
    end = html.find("</script>", start)
    try:
        data = json.loads(html[start:end])
    except ValueError as error:
        raise unreadable(path, "report's embedded results", error, "the page was cut short or edited") from None
    if not isinstance(data, dict) or data.get("format") != EMBEDDED_FORMAT:
        raise UnreadableFile(f"{path}: its embedded results are in format {data.get('format')!r} where this "
                             f"tool reads {EMBEDDED_FORMAT}" if isinstance(data, dict) else
                             f"{path}: not a readable report's embedded results (not a mapping)")
    return data


def embedded(path: Path) -> tuple[str, list[EmbeddedRun]]:
    """A report page's kind ("run", "repeats", "compare", "lesson") and the runs it carries, or one line saying
    why there are none (UnreadableFile)."""
    import base64
    import binascii
    import gzip
    import zlib

    path = Path(path)
    try:
        html = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UnreadableFile(f"{path}: no such report page") from None
    except OSError as error:
        raise unreadable(path, "report page", error) from None
    data = _embedded_body(html, path)
    try:
        runs = json.loads(gzip.decompress(base64.b64decode(data.get("runs", ""), validate=True)))
        found = [EmbeddedRun(name=str(r["name"]), results=r["results"]) for r in runs]
    except (binascii.Error, OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as error:
        raise unreadable(path, "report's embedded results", error, "the page was cut short or edited") from None
    return str(data.get("kind", "")), found


def runs_from_html(path: Path) -> list[tuple[str, RunResult]]:
    """The runs a run report or a report of repeats carries, each with its name in the page; a comparison or a
    lesson page, or a page with none, is refused in one line (UnreadableFile)."""
    kind, runs = embedded(path)
    if kind not in ("run", "repeats"):
        raise UnreadableFile(f"{path} is a {kind or 'loadtest'} page, not a run's report: give the run reports "
                             "(report.html) or run folders it was built from")
    out = []
    for run in runs:
        try:
            out.append((run.name, from_dict(run.results)))
        except UnreadableFile as error:
            raise UnreadableFile(f"{path}: {error}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise unreadable(path, "report's embedded results", error) from None
    if not out:
        raise UnreadableFile(f"{path}: the page carries no run")
    return out
