"""The API's view of a cluster's health, reduced to what a sample needs: kwok nodes (Ready, the taints the node
lifecycle controller puts on them), their Leases' renewals, and the harness's pods (Running, evicted), kept
current by watches (ClusterView: one LIST when the run's first window opens, then only the changes, shared by
every window and by the pod-startup probe) or, for Leases, one LIST per sample.

All of it is asked for in protobuf and only the fields each reduction reads are converted (NODE_FIELDS,
POD_FIELDS): a step's LIST of 3,000 pods cost the harness 275 ms of CPU read whole from JSON and 123 ms
projected, as the pods' managed fields, labels and specs are never read. The Leases, listed whole every sample,
are read from their protobuf messages without any conversion (lease_message_state)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from loadtests.kube import objects
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError, WatchError
from loadtests.kube.names import WatchNames
from loadtests.kube.reflector import BackgroundReflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import ListPage, WatchEvent
from loadtests.measure.component_metrics import USER_AGENT, Figures

Json = dict[str, Any]


S = TypeVar("S")


LEASE_NAMESPACE = "kube-node-lease"


TAINT_NOT_READY = "node.kubernetes.io/not-ready"


TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"


@dataclass(frozen=True)
class NodeState:
    ready: str  # the Ready condition's status: "True", "False", "Unknown" ("" when it has none yet)
    taints: frozenset[str]  # keys of the node lifecycle controller's taints it carries


class LeaseState(NamedTuple):
    """A node Lease as the samples read it (a tuple: 1,000 are made every sample, and a frozen dataclass's
    __init__ is dearer than the tuple's)."""

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


# what each reduction reads of its objects (besides their name, uid and resourceVersion): asked for in protobuf,
# only these are converted (watch_protobuf.projector); JSON answers are read whole and reduced alike
NODE_FIELDS = ("status.conditions.type", "status.conditions.status", "spec.taints.key")
POD_FIELDS = ("status.phase", "status.reason", "status.conditions.type", "status.conditions.status")
ENCODING = "protobuf"
# The view's watches decode what they read in batches, each held up to this long (WatchStream's batch_s): at
# 1,000 nodes the churn's pods' watch woke ~23 times a second, each event costing a TLS wake and a decode with the
# caches gone cold after each sleep; 360 µs of its thread's CPU an event handed on as read, 237 held 0.25 s
# (benchmarks/results/watch_event_cost.md). A sample every few seconds and the pod-startup probe (stamped when read,
# not when handed on) lose nothing to a quarter of a second: a window's end waits for what was read before it
# (Watched.settle).
HEALTH_BATCH_S = 0.25
SETTLE_MARGIN_S = 1.0  # how much longer than its batch_s a window's end waits for a watch to hand on what it read


def node_state(node: Json) -> NodeState:
    conditions = (node.get("status") or {}).get("conditions") or ()
    ready = next((str(c.get("status", "")) for c in conditions if c.get("type") == "Ready"), "")
    keys = {t.get("key") for t in (node.get("spec") or {}).get("taints") or ()}
    return NodeState(ready, frozenset(keys & {TAINT_NOT_READY, TAINT_UNREACHABLE}))


def lease_state(lease: Json) -> LeaseState:
    """A Lease in its JSON form (lease_message_state reads the protobuf message the same)."""
    spec = lease.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseState(_epoch(spec.get("renewTime")), float(duration) if duration is not None else None)


def lease_message_state(lease: Any) -> LeaseState:
    """A coordination.k8s.io/v1 Lease message, read as lease_state reads its JSON: renewTime's seconds and
    microseconds (the JSON form's precision) straight to epoch seconds, with no text between (1,000 Leases every
    sample: read as text and parsed back, they were the sampler's largest cost).

    An unset field reads as zero, which no Lease holds: a renewTime of the epoch is never written and the API
    refuses a duration that is not positive; so zero is "not set" without a HasField per field (half the cost)."""
    spec = lease.spec
    renew = spec.renewTime
    seconds, duration = renew.seconds, spec.leaseDurationSeconds
    return LeaseState(seconds + (renew.nanos // 1000) / 1e6 if seconds else None,
                      float(duration) if duration else None)


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


def pod_figures(tally: Mapping[PodState, int], evicted: int) -> Figures:
    """The pods by state (Watched.tally: how many pods are in each, a handful of states for thousands of pods)."""
    return {
        "pods": sum(tally.values()),
        "pods_pending": sum(count for p, count in tally.items() if p.phase == "Pending"),
        "pods_not_running": sum(count for p, count in tally.items() if p.phase != "Running"),
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


@dataclass(frozen=True)
class WatchMark:
    """Where a watch stood when a window opened: its trouble since then is the window's."""

    lists: int
    errors: int


class Watched(Generic[S]):
    """One collection kept current by LIST+WATCH, each object reduced to the little the samples read; its events
    also go to whoever listens (the pod-startup probe times pods on the same watch).

    `flag` marks states worth remembering after the object is gone (an evicted pod is deleted soon after), with
    the monotonic time each key was first flagged (as its event was read), so a window counts those of its own
    time. `batch_s`: its watch hands events on in batches (HEALTH_BATCH_S); settle() waits for what it read.
    """

    def __init__(self, client: RestClient, resource: str, reduce: Callable[[Json], S], fields: tuple[str, ...], *,
                 namespace: str = "", label_selector: str = "", key: Callable[[Json], str] | None = None,
                 flag: Callable[[S], bool] | None = None, batch_s: float = 0.0) -> None:
        self.resource, self.namespace = resource, namespace
        self.batch_s = batch_s
        self._reduce, self._flag = reduce, flag
        self._key = key or name_of
        self._lock = threading.Lock()
        self._items: dict[str, S] = {}
        self._tally: collections.Counter[S] = collections.Counter()  # how many items are in each state
        self._flagged: dict[str, float] = {}
        self._listeners: tuple[Callable[[WatchEvent], None], ...] = ()
        self.synced = False
        self._delivered = threading.Condition()
        names = WatchNames.of(resource, namespace, "health", list_rv="0")
        self._watch = _NoListFirst(client, resource, names, namespace=namespace, label_selector=label_selector,
                                   on_list=self._replace, on_event=self._apply, encoding=ENCODING, fields=fields,
                                   batch_s=batch_s, on_delivered=self._on_delivered)
        self._started = False

    @property
    def label(self) -> str:
        return f"{self.resource} in {self.namespace}" if self.namespace else self.resource

    def _store(self, key: str, state: S, at: float | None = None) -> None:
        self._drop(key)
        self._items[key] = state
        self._tally[state] += 1
        if self._flag is not None and key not in self._flagged and self._flag(state):
            self._flagged[key] = time.monotonic() if at is None else at

    def _drop(self, key: str) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._tally[old] -= 1
            if not self._tally[old]:
                del self._tally[old]

    def _replace(self, page: ListPage) -> None:
        with self._lock:
            self._items, self._tally = {}, collections.Counter()
            for obj in page.items or ():
                self._store(self._key(obj), self._reduce(obj))
            self.synced = True

    def _apply(self, event: WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        key = self._key(event.object)
        with self._lock:
            if event.type == "DELETED":
                self._drop(key)
            else:
                self._store(key, self._reduce(event.object), event.received_at)  # monotonic: RestClient's watch
        for listener in self._listeners:
            listener(event)

    def _on_delivered(self) -> None:
        with self._delivered:
            self._delivered.notify_all()

    def _holds(self, until: float) -> bool:
        """Whether the running watch read something at or before `until` that it has not handed on yet."""
        stream = self._watch.reflector.stream
        if not self._watch.running or stream is None:
            return False
        held_since = stream.held_since
        return held_since is not None and held_since <= until

    def settle(self, until: float | None = None, timeout_s: float | None = None) -> bool:
        """Wait until the watch has handed on every event it read up to `until` (monotonic; now by default), for
        a window's end that reads the state, or at most `timeout_s` (batch_s + SETTLE_MARGIN_S by default);
        at once when the watch holds nothing or is not running. False when it timed out."""
        until = time.monotonic() if until is None else until
        deadline = time.monotonic() + (self.batch_s + SETTLE_MARGIN_S if timeout_s is None else timeout_s)
        with self._delivered:
            while self._holds(until):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._delivered.wait(left)
        return True

    def listen(self, listener: Callable[[WatchEvent], None]) -> None:
        """Hand `listener` every ADDED, MODIFIED and DELETED event from now on (in the watch's thread)."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def unlisten(self, listener: Callable[[WatchEvent], None]) -> None:
        with self._lock:
            self._listeners = tuple(known for known in self._listeners if known is not listener)

    def items(self) -> dict[str, S] | None:
        """A copy of the current states; None until the first LIST arrived."""
        with self._lock:
            return dict(self._items) if self.synced else None

    def tally(self) -> dict[S, int] | None:
        """How many items are in each state now, kept as they change (a sample reads a handful of counts, not
        thousands of items); None until the first LIST arrived."""
        with self._lock:
            return dict(self._tally) if self.synced else None

    def flagged(self, since: float, present: frozenset[str] = frozenset()) -> int:
        """Keys flagged at or after `since` (monotonic), together with `present` (flagged ones there already)."""
        with self._lock:
            return len(present.union(key for key, at in self._flagged.items() if at >= since))

    def flagged_now(self) -> frozenset[str]:
        """The keys present now whose state is flagged."""
        with self._lock:
            return frozenset(key for key in self._items if key in self._flagged)

    def mark(self) -> WatchMark:
        """Where the watch stands now (its first LIST, done or not, is never a relist)."""
        reflector = self._watch.reflector
        return WatchMark(max(1, reflector.lists), reflector.errors)

    def note(self, since: WatchMark = WatchMark(1, 0)) -> str | None:
        """What went wrong with the watch, if anything did (since `since`: a window's share of a run-long watch)."""
        reflector = self._watch.reflector
        relists, errors = reflector.lists - since.lists, reflector.errors - since.errors
        if errors or relists > 0 or not self.synced:
            state = "never listed" if not self.synced else f"{relists} relists"
            return (f"watch of {self.label}: {state}, {errors} errors"
                    + (f" (last: {reflector.last_error})" if errors and reflector.last_error else ""))
        return None

    def start(self) -> None:
        """Start the LIST+WATCH once (a view shared by windows is started by the first)."""
        if not self._started:
            self._started = True
            self._watch.start()

    def stop(self) -> None:
        self._watch.stop()


class ClusterView:
    """The nodes and the harness's pods as a run's windows read them: one watch of each collection, listed once
    and kept current, shared by every window's health sampler and pod-startup probe (a window of its own LISTs
    and a second watch of the churn's pods were the harness's largest costs at 1,000 nodes).

    A run makes one and stops it when its steps end; a window given none makes its own. A namespace is watched
    from the first time a window asks for its pods (ClusterLoader2's phases each churn in their own).
    """

    POOL_SIZE = 16  # connections made only when used: the nodes' watch and one per namespace asked for

    def __init__(self, access: ClusterAccess, pod_namespaces: Sequence[str] = ()) -> None:
        self.client = RestClient(access, pool_size=self.POOL_SIZE, user_agent=USER_AGENT)
        self.nodes: Watched[NodeState] = Watched(self.client, "nodes", node_state, NODE_FIELDS,
                                                 label_selector=objects.NODE_SELECTOR, batch_s=HEALTH_BATCH_S)
        self._pods: dict[str, Watched[PodState]] = {}
        self._lock = threading.Lock()
        self._started = False
        for namespace in pod_namespaces:
            self.pods_in(namespace)

    def pods_in(self, namespace: str) -> Watched[PodState]:
        """The pods of one namespace, watched from now on if the view runs (else from its start)."""
        with self._lock:
            watched = self._pods.get(namespace)
            if watched is None:
                watched = self._pods[namespace] = Watched(self.client, "pods", pod_state, POD_FIELDS,
                                                          namespace=namespace, key=uid_of, flag=lambda p: p.evicted,
                                                          batch_s=HEALTH_BATCH_S)
                if self._started:
                    watched.start()
            return watched

    def watches(self) -> list[Watched[Any]]:
        with self._lock:
            return [self.nodes, *self._pods.values()]

    def start(self) -> None:
        """Start every watch (again: nothing); their first LISTs run in their own threads."""
        with self._lock:
            self._started = True
        for watched in self.watches():
            watched.start()

    def sent(self) -> dict[tuple[str, str], int]:
        """Requests the view sent so far per (verb, resource)."""
        return self.client.sent()

    def stop(self) -> None:
        for watched in self.watches():
            watched.stop()
        self.client.close()


def _lease_entry(lease: Any) -> tuple[str, LeaseState]:
    """A listed Lease's name and state, from its protobuf message or (answered in JSON) its dict."""
    if isinstance(lease, dict):
        return name_of(lease), lease_state(lease)
    return lease.metadata.name, lease_message_state(lease)


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
            items = self.client.list_messages("leases", LEASE_NAMESPACE, resource_version="0")
        except (ApiError, WatchError) as error:
            self.errors += 1
            self.last_error = str(error)
            return None
        self.lists += 1
        states = dict(_lease_entry(lease) for lease in items)
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
