"""Cluster health through a step: what someone growing a cluster toward thousands of nodes watches under load.

A background thread samples every `interval_s` (5 s by default: at 5,000 nodes a LIST of every node each 100 ms
would be a load of its own) from the step probes' start to their gather:

- the API: kwok nodes NotReady or unreachable and the taints the node lifecycle controller put on them, and the
  pods of the harness's namespaces that are not Running or were evicted, kept current by watches (one LIST per
  step, then only the changes); how long the nodes' Leases went unrenewed, against the lease duration, from a
  LIST of the Leases per sample (they change 500 times a second at 5,000 nodes: a watch would cost more);
- /metrics, one scrape per source and sample: the scheduler's queues and attempts, the controller-manager's
  work queues and evictions, the apiserver's in-flight requests and API Priority and Fairness, etcd's slow
  applies, leader changes and disk latency over each interval;
- the kernel (psutil): the machine's CPU beside each component's.

A source that cannot be reached leaves its figures None and says why in the notes; it never fails the step.
Every request goes out as user agent "k8s-loadtest/health", so the apiserver's logs tell it from the load's.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import psutil
import urllib3

from loadtests.analysis import etcd
from loadtests.analysis.metrics import Snapshot, counter_delta, counter_delta_by, histogram_delta, histogram_deltas
from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.access import ClusterAccess, unverified_context
from loadtests.kube.errors import ApiError
from loadtests.kube.names import WatchNames
from loadtests.kube.reflector import BackgroundReflector
from loadtests.kube.rest import TRANSPORT_ERRORS, RestClient, pool_manager, short_error
from loadtests.kube.watch import ListPage, WatchEvent
from loadtests.measure.processes import CpuMeter
from loadtests.results import ClusterHealth, HealthSample

Json = dict[str, Any]
Figures = dict[str, float | None]
S = TypeVar("S")

USER_AGENT = "k8s-loadtest/health"
DEFAULT_INTERVAL_S = 5.0
LEASE_NAMESPACE = "kube-node-lease"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
SCHEDULER, CONTROLLER_MANAGER = "kube-scheduler", "kube-controller-manager"
_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

# figure -> metric names to look for, newest first (the first one on the page is used and recorded)
METRICS: dict[str, tuple[str, ...]] = {
    "scheduler_pending_pods": ("scheduler_pending_pods",),
    "scheduler_attempts": ("scheduler_schedule_attempts_total",),
    "workqueue_depth": ("workqueue_depth",),
    "workqueue_queue_p99": ("workqueue_queue_duration_seconds",),
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
HISTOGRAMS = frozenset({"workqueue_queue_p99", "apf_wait_p99", "etcd_wal_fsync_p99", "etcd_backend_commit_p99"})
# which source serves which figures; the scrapes keep only these families
SOURCE_FIGURES: dict[str, tuple[str, ...]] = {
    "kube-apiserver": ("apiserver_inflight", "apf_inqueue", "apf_rejected", "apf_wait_p99"),
    SCHEDULER: ("scheduler_pending_pods", "scheduler_attempts"),
    CONTROLLER_MANAGER: ("workqueue_depth", "workqueue_queue_p99", "evictions_node_collector",
                         "evictions_taint_manager"),
    "etcd": ("etcd_slow_applies", "etcd_leader_changes", "etcd_wal_fsync_p99", "etcd_backend_commit_p99"),
}
# APF counts rejections in a counter that appears with the first one; this family shows APF is on at all
APF_PRESENT = "apiserver_flowcontrol_dispatched_requests_total"


def _families(source: str) -> frozenset[str]:
    return frozenset(name for figure in SOURCE_FIGURES[source] for name in METRICS[figure]) | {APF_PRESENT}


# ---- the API's view: nodes, leases, pods ------------------------------------------------------------------


@dataclass(frozen=True)
class NodeState:
    ready: str  # the Ready condition's status: "True", "False", "Unknown" ("" when it has none yet)
    taints: frozenset[str]  # keys of the node lifecycle controller's taints it carries


@dataclass(frozen=True)
class LeaseState:
    renewed_at: float | None  # renewTime as epoch seconds
    duration_s: float | None


@dataclass(frozen=True)
class PodState:
    phase: str
    evicted: bool


def _epoch(stamp: Any) -> float | None:
    """An API timestamp (RFC 3339, MicroTime included) as epoch seconds."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def node_state(node: Json) -> NodeState:
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = next((str(c.get("status", "")) for c in conditions if c.get("type") == "Ready"), "")
    keys = {t.get("key") for t in (node.get("spec") or {}).get("taints") or ()}
    return NodeState(ready, frozenset(keys & {TAINT_NOT_READY, TAINT_UNREACHABLE}))


def lease_state(lease: Json) -> LeaseState:
    spec = lease.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseState(_epoch(spec.get("renewTime")), float(duration) if duration is not None else None)


def pod_state(pod: Json) -> PodState:
    """Evicted: the kubelet's reason, or the DisruptionTarget condition the API and the taint manager set."""
    status = pod.get("status") or {}
    disrupted = any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                    for c in status.get("conditions") or ())
    return PodState(str(status.get("phase", "")), status.get("reason") == "Evicted" or disrupted)


def node_figures(nodes: Mapping[str, NodeState], leases: Mapping[str, LeaseState] | None,
                 renewal_gaps: Mapping[str, float] | None = None, *, now: float) -> Figures:
    """NotReady, unreachable and tainted kwok nodes; how far behind their Leases' renewals fell (None: no leases).

    A Lease's lag is its age now or, if larger, the gap between its last two renewals when it was renewed since
    the previous sample (`renewal_gaps`): renewals come every 10 s, so ages read every 5 s alone would miss most
    peaks.
    Only the Leases of nodes present count: a deleted node's Lease waits for the garbage collector and would
    read as a node that stopped renewing.
    """
    figures: Figures = {
        "nodes": len(nodes),
        "nodes_not_ready": sum(n.ready != "True" for n in nodes.values()),
        "nodes_unreachable": sum(n.ready == "Unknown" for n in nodes.values()),
        "taint_not_ready": sum(TAINT_NOT_READY in n.taints for n in nodes.values()),
        "taint_unreachable": sum(TAINT_UNREACHABLE in n.taints for n in nodes.values()),
    }
    if leases is None:
        return figures
    gaps = renewal_gaps or {}
    lags = [(max(0.0, now - lease.renewed_at, gaps.get(name, 0.0)), lease.duration_s)
            for name, lease in leases.items() if name in nodes and lease.renewed_at is not None]
    figures["leases"] = len(lags)
    figures["lease_lag_s"] = round(max(lag for lag, _ in lags), 3) if lags else None
    figures["leases_expired"] = sum(duration is not None and lag > duration for lag, duration in lags)
    return figures


def pod_figures(pods: Mapping[str, PodState], evicted: int) -> Figures:
    return {
        "pods": len(pods),
        "pods_pending": sum(p.phase == "Pending" for p in pods.values()),
        "pods_not_running": sum(p.phase != "Running" for p in pods.values()),
        "pods_evicted": evicted,
    }


def name_of(obj: Json) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def uid_of(obj: Json) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or meta.get("name") or "")


class _NoListFirst(BackgroundReflector):
    """A BackgroundReflector whose first LIST runs in its thread: 5,000 nodes must not hold up the step's start."""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"health {self.reflector.resource}", daemon=True)
        self._thread.start()


class Watched(Generic[S]):
    """One collection kept current by LIST+WATCH, each object reduced to the little the samples read.

    `flag` marks states worth remembering after the object is gone (an evicted pod is deleted soon after).
    """

    def __init__(self, client: RestClient, resource: str, reduce: Callable[[Json], S], *, namespace: str = "",
                 label_selector: str = "", key: Callable[[Json], str] | None = None,
                 flag: Callable[[S], bool] | None = None) -> None:
        self.resource, self.namespace = resource, namespace
        self._reduce, self._flag = reduce, flag
        self._key = key or name_of
        self._lock = threading.Lock()
        self._items: dict[str, S] = {}
        self.flagged: set[str] = set()
        self.synced = False
        names = WatchNames.of(resource, namespace, "health", list_rv="0")
        self._watch = _NoListFirst(client, resource, names, namespace=namespace, label_selector=label_selector,
                                   on_list=self._replace, on_event=self._apply)

    @property
    def label(self) -> str:
        return f"{self.resource} in {self.namespace}" if self.namespace else self.resource

    def _store(self, key: str, state: S) -> None:
        self._items[key] = state
        if self._flag is not None and self._flag(state):
            self.flagged.add(key)

    def _replace(self, page: ListPage) -> None:
        with self._lock:
            self._items = {}
            for obj in page.items or ():
                self._store(self._key(obj), self._reduce(obj))
            self.synced = True

    def _apply(self, event: WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        key = self._key(event.object)
        with self._lock:
            if event.type == "DELETED":
                self._items.pop(key, None)
            else:
                self._store(key, self._reduce(event.object))

    def items(self) -> dict[str, S] | None:
        """A copy of the current states; None until the first LIST arrived."""
        with self._lock:
            return dict(self._items) if self.synced else None

    def note(self) -> str | None:
        """What went wrong with the watch, if anything did."""
        reflector = self._watch.reflector
        if reflector.errors or reflector.lists > 1 or not self.synced:
            state = "never listed" if not self.synced else f"{reflector.lists - 1} relists"
            return (f"watch of {self.label}: {state}, {reflector.errors} errors"
                    + (f" (last: {reflector.last_error})" if reflector.last_error else ""))
        return None

    def start(self) -> None:
        self._watch.start()

    def stop(self) -> None:
        self._watch.stop()


class LeaseLists:
    """The node Leases, LISTed (from the apiserver's watch cache) at every sample rather than watched: 5,000 nodes
    renew 500 times a second, which a watch would hand over one event at a time, for figures needed every 5 s.

    Two consecutive LISTs give each renewed Lease's gap between renewals, i.e. how old it got before it was
    renewed; exact as long as renewals come no more often than the samples (kubelets and kwok: every 10 s).
    """

    def __init__(self, client: RestClient) -> None:
        self.client = client
        self.states: dict[str, LeaseState] | None = None
        self.lists = 0
        self.errors = 0
        self.last_error = ""

    def refresh(self) -> tuple[dict[str, LeaseState], dict[str, float]] | None:
        """The Leases now and the renewal gaps since the previous LIST; None when the LIST failed."""
        try:
            page = self.client.list_all("leases", LEASE_NAMESPACE, resource_version="0", limit=0)
        except ApiError as error:
            self.errors += 1
            self.last_error = str(error)
            return None
        self.lists += 1
        states = {name_of(lease): lease_state(lease) for lease in page.items or ()}
        before = self.states or {}
        gaps = {}
        for name, state in states.items():
            old = before.get(name)
            renewed, previous = state.renewed_at, old.renewed_at if old is not None else None
            if renewed is not None and previous is not None and renewed > previous:
                gaps[name] = renewed - previous
        self.states = states
        return states, gaps

    def note(self) -> str | None:
        if not self.errors:
            return None
        return (f"LIST leases in {LEASE_NAMESPACE}: {self.errors} of {self.errors + self.lists} failed, the lease "
                f"figures are missing there (last: {self.last_error})")


# ---- /metrics ---------------------------------------------------------------------------------------------


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


class _Reader:
    """Reads figures off a pair of scrapes (the previous one may be None) and records which metric served each."""

    def __init__(self, used: dict[str, str]) -> None:
        self.used = used

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
        name = self.name(current, figure)
        if previous is None or name is None:
            return None
        delta = histogram_delta(previous, current, name)
        return delta.quantile(0.99) if delta is not None else None


def scheduler_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str]) -> Figures:
    """Pods waiting per scheduler queue (now), scheduling attempts per result (since the previous scrape)."""
    read = _Reader(used)
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


def controller_manager_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str]) -> QueueFigures:
    read = _Reader(used)
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
        for labels, histogram in histogram_deltas(previous, current, wait_name, ("name",)).items():
            p99 = histogram.quantile(0.99) if histogram.count > 0 else None
            if p99 is not None:
                waits[dict(labels)["name"]] = p99
        figures["workqueue_queue_p99_max_s"] = max(waits.values(), default=None)
    for figure in ("evictions_node_collector", "evictions_taint_manager"):
        figures[figure] = read.counter(previous, current, figure)
    return QueueFigures(figures, depth, waits)


def apiserver_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str]) -> Figures:
    """In-flight requests per kind (the apiserver reports the maximum of the last second), APF queues."""
    read = _Reader(used)
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


def etcd_figures(previous: Snapshot | None, current: Snapshot, used: dict[str, str]) -> Figures:
    read = _Reader(used)
    return {
        "etcd_slow_applies": read.counter(previous, current, "etcd_slow_applies"),
        "etcd_leader_changes": read.counter(previous, current, "etcd_leader_changes"),
        "etcd_wal_fsync_p99_s": read.p99(previous, current, "etcd_wal_fsync_p99"),
        "etcd_backend_commit_p99_s": read.p99(previous, current, "etcd_backend_commit_p99"),
    }


class MetricsSource:
    """One /metrics page scraped once per sample over a kept-alive connection; remembers the first and the
    previous scrape, for figures over each interval and over the whole window."""

    def __init__(self, name: str, url: str, pool: urllib3.PoolManager, auth: Callable[[], Mapping[str, str]],
                 timeout_s: float) -> None:
        self.name, self.url, self.pool, self.timeout_s = name, url, pool, timeout_s
        self.headers = {"Accept": _ACCEPT, "Accept-Encoding": "gzip", "User-Agent": USER_AGENT}
        self.auth = auth  # per scrape: a token from an exec plugin is refreshed during the run
        self.families = _families(name)
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
            response = self.pool.request("GET", self.url, headers={**self.headers, **self.auth()}, retries=False,
                                         timeout=urllib3.Timeout(connect=min(5.0, self.timeout_s),
                                                                 read=self.timeout_s))
            if response.status != 200:
                first_line = response.data.decode("utf-8", "replace").strip().splitlines()[:1]
                raise OSError(f"HTTP {response.status}: {' '.join(first_line)[:200]}")
            snapshot = Snapshot.parse(response.data.decode("utf-8"), families=self.families)
        except (*TRANSPORT_ERRORS, ValueError) as error:
            self.failures += 1
            self.last_error = short_error(error)
            return None
        self.previous, self.latest = self.latest, snapshot
        if self.first is None:
            self.first = snapshot
        return snapshot

    def note(self) -> str | None:
        if not self.failures:
            return None
        return (f"{self.name} /metrics: {self.failures} of {self.scrapes} scrapes failed, their figures are "
                f"missing (last: {self.last_error})")

    def close(self) -> None:
        self.pool.clear()


# The scheduler's and controller-manager's serving certificates are self-signed on loopback: scrapes of them
# skip verification on purpose (as the control plane's own health checks do), so urllib3 need not say so.
warnings.filterwarnings("ignore", message="Unverified HTTPS request is being made to host '127.0.0.1'",
                        category=urllib3.exceptions.InsecureRequestWarning)


def _client_context(access: ClusterAccess) -> Any:
    """TLS for a component's own serving certificate (self-signed on loopback), presenting the admin client cert."""
    context = unverified_context()
    if access.cert_file and access.key_file:
        context.load_cert_chain(access.cert_file, access.key_file)
    return context


def metrics_sources(info: TargetInfo, timeout_s: float) -> tuple[list[MetricsSource], list[str]]:
    """A source per /metrics page the target exposes, and a note per page it does not."""
    access = info.access

    def pool(context: Any) -> urllib3.PoolManager:
        return urllib3.PoolManager(num_pools=1, maxsize=1, ssl_context=context)

    apiserver_pool = pool_manager(access, num_pools=1, maxsize=1)  # through the kubeconfig's proxy, if any
    sources = [MetricsSource("kube-apiserver", access.server.rstrip("/") + "/metrics", apiserver_pool,
                             access.auth_headers, timeout_s)]
    notes = []
    for component in (SCHEDULER, CONTROLLER_MANAGER):
        url = info.metrics_urls.get(component)
        if url:
            sources.append(MetricsSource(component, url, pool(_client_context(access)), access.auth_headers,
                                         timeout_s))
        else:
            notes.append(f"{component} /metrics: not reachable on this target, its figures are missing")
    if info.etcd_metrics_url:
        sources.append(MetricsSource("etcd", info.etcd_metrics_url, pool(None), dict, timeout_s))
    else:
        notes.append("etcd /metrics: not reachable on this target, its figures are missing")
    return sources, notes


# ---- the sampler ------------------------------------------------------------------------------------------


def _maximum(samples: Sequence[HealthSample], key: str) -> float | None:
    found = [value for s in samples if (value := s.values.get(key)) is not None]
    return max(found) if found else None


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
                 origin: float | None = None) -> None:
        self.info = info
        self.interval_s = interval_s
        self.pod_namespaces = tuple(pod_namespaces)
        self.origin = origin  # monotonic time the window opened (start() when None)
        self.client = RestClient(info.access, pool_size=2 + len(self.pod_namespaces) + 2, user_agent=USER_AGENT)
        self.nodes: Watched[NodeState] = Watched(self.client, "nodes", node_state,
                                                 label_selector=objects.NODE_SELECTOR)
        self.leases = LeaseLists(self.client)
        self.pods = [Watched(self.client, "pods", pod_state, namespace=ns, key=uid_of, flag=lambda p: p.evicted)
                     for ns in self.pod_namespaces]
        self.scrape_timeout_s = min(10.0, max(2.0, interval_s))
        self.sources, self._source_notes = metrics_sources(info, timeout_s=self.scrape_timeout_s)
        self.cpu = CpuMeter(pids if pids is not None else info.pids)
        self.samples: list[HealthSample] = []
        self.metrics_used: dict[str, str] = {}
        self.notes: list[str] = []
        self._queue_depth_max: dict[str, float] = {}
        self._lock = threading.Lock()  # one sample at a time (the thread's, or the final one)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gathered: ClusterHealth | None = None

    # -- lifecycle --
    def _watches(self) -> list[Watched[Any]]:
        return [self.nodes, *self.pods]

    def start(self) -> None:
        if self.origin is None:
            self.origin = time.monotonic()
        for watched in self._watches():
            watched.start()
        self._thread = threading.Thread(target=self._run, name="cluster-health", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            try:
                self.sample()
            except Exception as error:  # a sampler thread must survive anything; say so once
                note = f"cluster health sample failed: {short_error(error)}"
                if note not in self.notes:
                    self.notes.append(note)
            # keep the cadence, never burst to catch up after a slow sample
            due = max(due + self.interval_s, time.monotonic())

    def _stop_thread(self, timeout_s: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def stop(self) -> None:
        """Stop sampling and watching without gathering (an aborted step); safe to call again."""
        self._stop_thread(timeout_s=2.0)  # an aborted step must not wait for a slow scrape
        for watched in self._watches():
            watched.stop()
        for source in self.sources:
            source.close()
        self.client.close()

    def requests(self) -> dict[tuple[str, str], int]:
        """API requests sent so far per (verb, resource), to take off the apiserver's counts."""
        return self.client.sent()

    def add(self, component: str, pids: Iterable[int]) -> None:
        self.cpu.add(component, pids)

    # -- sampling --
    def sample(self) -> HealthSample:
        """Take one sample now and keep it."""
        with self._lock:
            assert self.origin is not None
            values: Figures = {}
            nodes = self.nodes.items()
            leases = self.leases.refresh()
            if nodes is not None:
                values.update(node_figures(nodes, *(leases or (None, None)), now=time.time()))
            pods = [w.items() for w in self.pods]
            if all(p is not None for p in pods):
                merged = {key: state for p in pods if p is not None for key, state in p.items()}
                values.update(pod_figures(merged, sum(len(w.flagged) for w in self.pods)))
            for source in self.sources:
                values.update(self._source_figures(source))
            values.update(self.cpu.read())
            sample = HealthSample(t_s=round(time.monotonic() - self.origin, 3), values=values)
            self.samples.append(sample)
            return sample

    def _source_figures(self, source: MetricsSource) -> Figures:
        current = source.scrape()
        if current is None:
            return {}
        previous = source.previous
        if source.name == SCHEDULER:
            return scheduler_figures(previous, current, self.metrics_used)
        if source.name == CONTROLLER_MANAGER:
            queues = controller_manager_figures(previous, current, self.metrics_used)
            for queue, depth in queues.depth.items():
                self._queue_depth_max[queue] = max(depth, self._queue_depth_max.get(queue, 0.0))
            return queues.figures
        if source.name == "etcd":
            return etcd_figures(previous, current, self.metrics_used)
        return apiserver_figures(previous, current, self.metrics_used)

    def gather(self) -> ClusterHealth:
        """The final sample, then the time series with its summary; the sampler is stopped afterwards."""
        if self._gathered is not None:
            return self._gathered
        self._stop_thread(timeout_s=self.scrape_timeout_s * (len(self.sources) + 1))
        if self.origin is not None:
            self.sample()  # waits for a sample still under way
        summary = self._summary()
        notes = list(self._source_notes)
        notes += [n for n in (s.note() for s in self.sources) if n]
        notes += [n for n in (w.note() for w in (*self._watches(), self.leases)) if n]
        notes += self.notes
        used = dict(sorted(self.metrics_used.items()))
        used["nodes"] = API_SOURCES["nodes"]
        used["lease_lag_s"] = API_SOURCES["lease_lag_s"]
        used["pods"] = API_SOURCES["pods"].format(", ".join(self.pod_namespaces))
        used["cpu"] = API_SOURCES["cpu"]
        self.stop()
        self._gathered = ClusterHealth(interval_s=self.interval_s, samples=list(self.samples), summary=summary,
                                       metrics_used=used, notes=notes)
        return self._gathered

    def _summary(self) -> dict[str, Any]:
        samples = self.samples
        summary: dict[str, Any] = {"samples": len(samples)}
        summary.update({key: _maximum(samples, figure) for key, figure in MAXIMA.items()})
        inflight = sorted({k for s in samples for k in s.values if k.startswith("apiserver_inflight.")})
        summary["apiserver_inflight_max"] = {k.split(".", 1)[1]: _maximum(samples, k) for k in inflight}
        durations = [lease.duration_s for lease in (self.leases.states or {}).values() if lease.duration_s]
        summary["lease_duration_s"] = max(durations) if durations else None
        summary["pods_evicted"] = _maximum(samples, "pods_evicted")
        summary["workqueue_deepest"] = _top(self._queue_depth_max)
        summary.update(self._window_figures())
        summary["cpu_machine_avg"] = self.cpu.average()
        summary["cpus"] = psutil.cpu_count()
        return summary

    def _window_figures(self) -> dict[str, Any]:
        """Increases and p99s over the whole window, from each source's first and last scrape."""
        by_name = {s.name: s for s in self.sources}
        found: dict[str, Any] = {}
        used: dict[str, str] = {}
        read = _Reader(used)

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
        return found
