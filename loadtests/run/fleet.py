"""The fake fleet: kwok nodes scaled up or down concurrently, and a steady population of pods on them.

Readiness is observed through a watch (not by re-LISTing thousands of nodes), and the ramp is timed so a
report can say how long the control plane took to absorb the new nodes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psutil

from loadtests.config.fleet import FleetShapes
from loadtests.controlplane.processes import wait_for
from loadtests.errors import Saturated, TargetError
from loadtests.kube import objects
from loadtests.kube.errors import ApiError
from loadtests.kube.names import WatchNames
from loadtests.kube.paths import resource_path
from loadtests.kube.reflector import BackgroundReflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import ListPage, WatchEvent
from loadtests.polling import poll_until

CREATE_CONCURRENCY = 16  # enough to keep the apiserver busy, few enough to spread joins over seconds
FLEET_USER_AGENT = "k8s-loadtest/fleet"  # the fleet's own requests, told apart from the load's and the probes'


@dataclass
class RampResult:
    nodes: int
    seconds: float  # from the first create to all nodes Ready
    created: int
    deleted: int
    harness_cpu_s: float  # CPU the harness process spent during the ramp


def _is_ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions", []))


class NodeWatch:
    """Keeps the set of Ready kwok nodes current from a LIST then WATCH, in a background thread."""

    NAMES = WatchNames.of("nodes", "", "fleet", list_rv="0")

    def __init__(self, client: RestClient) -> None:
        self.ready: set[str] = set()
        self.present: set[str] = set()
        self._cond = threading.Condition()
        self._watch = BackgroundReflector(client, "nodes", self.NAMES, label_selector=objects.NODE_SELECTOR,
                                          on_list=self._replace, on_event=self._apply)

    def start(self) -> NodeWatch:
        try:
            self._watch.start()
        except ApiError as error:
            raise TargetError(f"could not list nodes: {error}") from None
        return self

    def _replace(self, page: ListPage) -> None:
        items: list[dict[str, Any]] = page.items or []
        with self._cond:
            self.present = {n["metadata"]["name"] for n in items}
            self.ready = {n["metadata"]["name"] for n in items if _is_ready(n)}
            self._cond.notify_all()

    def _apply(self, event: WatchEvent) -> None:
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        node = event.object
        name = node["metadata"]["name"]
        with self._cond:
            if event.type == "DELETED":
                self.present.discard(name)
                self.ready.discard(name)
            else:
                self.present.add(name)
                (self.ready.add if _is_ready(node) else self.ready.discard)(name)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[NodeWatch], bool], timeout_s: float, what: str,
             progress: Callable[[str], None] | None = None, goal: int | None = None) -> None:
        """Until `predicate` holds; progress every 2 s counts Ready nodes against the `goal` asked for (not
        against the nodes that happen to exist so far)."""
        deadline = time.monotonic() + timeout_s
        last_report = 0.0
        with self._cond:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Saturated(what, f"not reached within {timeout_s:.0f} s ({len(self.ready)} Ready of "
                                          f"{len(self.present)} nodes)")
                self._cond.wait(min(remaining, 1.0))
                if progress and time.monotonic() - last_report >= 2:
                    last_report = time.monotonic()
                    seen = len(self.present)
                    of = f"{goal} ({seen} created so far)" if goal is not None and seen != goal else str(seen)
                    progress(f"{len(self.ready)}/{of} nodes Ready")

    def stop(self) -> None:
        self._watch.stop()


def ensure_namespaces(client: RestClient, names: Iterable[str], timeout_s: float = 60.0) -> None:
    """Create the harness's namespaces (labelled as its own) and wait for their default ServiceAccounts: pods
    created before those exist are refused, and the ReplicaSet controller then backs off for many seconds."""
    names = list(names)
    for name in names:
        client.create(resource_path("namespaces"), objects.namespace_manifest(name), exist_ok=True)
    for name in names:
        path = resource_path("serviceaccounts", name, "default")
        wait_for(lambda p=path: bool(client.request("GET", p, ok=(404,))), timeout_s,
                 f"default ServiceAccount in namespace {name}", interval_s=0.1)


REMOVE_TIMEOUT_S = 180.0  # what a scenario made gone at the end (a namespace takes its objects with it)


def remove_owned(client: RestClient, paths: Iterable[str], timeout_s: float = REMOVE_TIMEOUT_S) -> list[str]:
    """Delete each object at `paths` that is the harness's (it carries the managed-by label; a namespace or
    CRD of the same name someone else made stays), in order, and wait until none of them is there. Problems
    come back as lines, never raised: the run's own outcome stands; [] means every one is gone."""
    paths, problems = list(paths), []
    for path in paths:
        try:
            found = client.request("GET", path, ok=(404,))
            labels = (found.get("metadata") or {}).get("labels") or {}
            if found and all(labels.get(key) == value for key, value in objects.MANAGED_BY.items()):
                client.delete(path)
        except ApiError as error:
            problems.append(f"{path}: {error}")
    if not poll_until(lambda: not any(client.request("GET", p, ok=(404,)) for p in paths), timeout_s,
                      interval_s=0.5):
        still = [p for p in paths if client.request("GET", p, ok=(404,))]
        problems.append(f"still there after {timeout_s:.0f} s: {', '.join(still)}")
    return problems


class Fleet:
    """Scale the fake nodes (of the plan's shapes, if it has any) and the steady pod population of a step."""

    def __init__(self, client: RestClient, shapes: FleetShapes | None = None) -> None:
        self.client = client
        self.shapes = shapes or FleetShapes()

    def node(self, name: str, index: int) -> dict[str, Any]:
        """The index-th node of the fleet, of its shape."""
        shape = self.shapes.of(index)
        if shape is None:
            return objects.node_manifest(name, index)
        return objects.node_manifest(name, index, capacity=shape.capacity, allocatable=shape.allocatable,
                                     taints=shape.taints, labels=shape.labels)

    def ensure_namespaces(self, timeout_s: float = 60.0) -> None:
        """The harness's own namespaces, ready for pods."""
        ensure_namespaces(self.client, objects.NAMESPACES, timeout_s)

    def scale_nodes(self, count: int, *, timeout_s: float = 300.0,
                    progress: Callable[[str], None] | None = None) -> RampResult:
        """Create or delete kwok nodes until exactly `count` exist, then wait until all are Ready."""
        cpu_before = sum(psutil.Process().cpu_times()[:2])
        watch = NodeWatch(self.client).start()
        try:
            started = time.monotonic()
            indices = {objects.node_name(i): i for i in range(count)}  # a node's index gives its pod range
            wanted = set(indices)
            existing = set(watch.present)
            to_create = sorted(wanted - existing)
            to_delete = sorted(existing - wanted, reverse=True)
            pool = ThreadPoolExecutor(CREATE_CONCURRENCY, thread_name_prefix="fleet")
            try:
                list(pool.map(lambda n: self.client.create(resource_path("nodes"), self.node(n, indices[n]),
                                                           exist_ok=True), to_create))
                list(pool.map(lambda n: self.client.delete(resource_path("nodes", name=n)), to_delete))
            finally:
                # interrupted (a hung apiserver, Ctrl-C): the queued requests are dropped, not sent one by one
                pool.shutdown(wait=False, cancel_futures=True)
            watch.wait(lambda w: wanted <= w.ready and not (w.present - wanted), timeout_s,
                       f"{count} nodes Ready", progress, goal=count)
            seconds = time.monotonic() - started
        finally:
            watch.stop()
        cpu_after = sum(psutil.Process().cpu_times()[:2])
        return RampResult(count, seconds, len(to_create), len(to_delete), cpu_after - cpu_before)

    def scale_pods(self, replicas: int, *, timeout_s: float = 300.0,
                   progress: Callable[[str], None] | None = None) -> float:
        """Set the fleet Deployment to `replicas` Running pods; returns the seconds it took."""
        started = time.monotonic()
        path = resource_path("deployments", objects.NS_FLEET)
        fleet = objects.deployment_manifest("fleet", objects.NS_FLEET, replicas, tolerations=self.shapes.taints)
        self.client.create(path, fleet, exist_ok=True)
        self.client.patch(f"{path}/fleet", {"spec": {"replicas": replicas}})
        deadline = started + timeout_s
        last_report = 0.0
        while True:
            deployment = self.client.get(f"{path}/fleet")
            status = deployment.get("status", {})
            ready = status.get("readyReplicas", 0) or 0
            total = status.get("replicas", 0) or 0
            if (deployment["metadata"].get("generation") == status.get("observedGeneration")
                    and ready == replicas and total == replicas):
                return time.monotonic() - started
            if time.monotonic() > deadline:
                raise Saturated(f"{replicas} fleet pods Running", f"{ready} of {replicas} Running after "
                                                                  f"{timeout_s:.0f} s")
            if progress and time.monotonic() - last_report >= 2:
                last_report = time.monotonic()
                progress(f"{ready}/{replicas} fleet pods Running")
            time.sleep(0.25)  # polling one small object; the condition above is what we wait on
