"""ClusterLoader2's load test as phases of a run: create every object of its mix (config/cl2.py) at the load
throughput, then scale and update each to a random size in [0.5x, 1.5x] (every Deployment rolls), then delete
them; each phase one window of the run, measured like a step, its end when the cluster has done what the phase
asked (every controlled pod running, every object gone) or the step's duration_s has passed.

As ClusterLoader2's RandomizedTimeLimitedLoad, each object's operation happens at a random moment within the
phase's time limit: total pods / throughput for creation and deletion, a quarter of it for scaling (on average a
quarter of the pods change). The operations go out from a pool of the harness's REST client threads, counted in
the harness's own CPU; what was asked and achieved is the phase's rate (pods per second).
"""

from __future__ import annotations

import concurrent.futures
import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadtests.config.cl2 import (
    CREATE,
    DELETE,
    MIN_SCHEDULER_PODS,
    POD_STARTUP,
    RANDOM_SCALE_FACTOR,
    SCALE,
    SCHEDULER,
    Group,
    LoadMix,
    load_mix,
)
from loadtests.config.templates import RUN_LABEL, ObjectTemplate, read
from loadtests.errors import TargetError
from loadtests.kube import objects
from loadtests.kube.discovery import Kind, resolve
from loadtests.kube.errors import ApiError
from loadtests.kube.names import WatchNames
from loadtests.kube.paths import resource_path
from loadtests.kube.reflector import BackgroundReflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import WatchEvent
from loadtests.measure.controlled import CONTROLLERS, done
from loadtests.polling import poll_until
from loadtests.results.distribution import Distribution
from loadtests.results.loadgen import RateResult
from loadtests.results.scheduling import SchedulingThroughput
from loadtests.run.fleet import ensure_namespaces, remove_owned

SCHEDULER_NAMESPACE = f"{objects.NS_OBJECTS_PREFIX}scheduler"  # the scheduler-throughput phase's Deployment
LATENCY_NAMESPACE = f"{objects.NS_OBJECTS_PREFIX}latency"  # the pod-startup phase's latency Deployments
SCHEDULING_INTERVAL_S = 5.0
SCHEDULING_SOURCE = ("a watch of the phase's pods, each bound when first seen with spec.nodeName; per 5 s from the "
                     "Deployment's creation, the last interval ending at the last binding")
THREADS = 16  # concurrent operations at most: ClusterLoader2's client is not one request at a time either
TEMPLATES = {"Deployment": "deployment.yaml", "StatefulSet": "statefulset.yaml", "Job": "job.yaml",
             "DaemonSet": "daemonset.yaml", "Service": "service.yaml", "ConfigMap": "configmap.yaml",
             "Secret": "secret.yaml"}
PRIORITY_CLASS = "priorityclass.yaml"
MOUNTING = frozenset({"big-deployment", "medium-deployment", "small-deployment"})  # the mix's, with their own
# ConfigMap and Secret; the scheduler-throughput and latency Deployments mount nothing
UPDATE_ANNOTATION = "k8s-loadtest/update"


@dataclass
class Cl2Object:
    """One object of the mix in one namespace, and the size it asks for now."""

    group: Group
    namespace: str
    name: str
    size: int

    @property
    def kind(self) -> str:
        return self.group.kind


@dataclass
class PhaseOutcome:
    rates: list[RateResult]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0  # from the first operation to the cluster having done them all (or the limit)
    scheduling: SchedulingThroughput | None = None


def scheduling_throughput(bound_at: list[float], started: float, pods: int, threshold: float, complete: bool,
                          interval_s: float = SCHEDULING_INTERVAL_S) -> SchedulingThroughput:
    """Pods bound per second in each interval from `started` (the Deployment's creation); the last interval ends
    at the last binding, so a burst shorter than an interval is its pods over its own time, not over a whole
    interval. The verdict is on the best interval (ClusterLoader2's); none where not every pod was bound."""
    samples: list[float] = []
    if bound_at:
        end = bound_at[-1]
        edge, i = started, 0
        while edge < end:
            upper = min(edge + interval_s, end)
            count = 0
            while i < len(bound_at) and bound_at[i] <= upper:
                count, i = count + 1, i + 1
            samples.append(round(count / max(upper - edge, 1e-6), 3))
            edge = upper
    q = Distribution.of(samples, "")
    return SchedulingThroughput(
        pods=pods, interval_s=interval_s, samples=samples, p50=q.p50, p90=q.p90, p99=q.p99, max=q.max,
        threshold=threshold, passed=(q.max is not None and q.max >= threshold) if complete else None,
        seconds=round(bound_at[-1] - started, 3) if complete and bound_at else None, source=SCHEDULING_SOURCE)


class Cl2Load:
    """The mix of one scale, made, changed and removed phase by phase; what it made it removes at the end."""

    def __init__(self, client: RestClient, params: dict[str, Any], run: str,
                 say: Callable[[str], None] = lambda _line: None) -> None:
        self.client, self.params, self.run, self.say = client, params, run, say
        self.kinds: dict[str, Kind] = {}
        self.mix: LoadMix | None = None
        self.made: list[Cl2Object] = []
        self.namespaces: list[str] = []
        self.priority_class = f"loadtest-{run}-daemonset"[:63]
        self._priority_made = False

    @functools.cached_property
    def templates(self) -> dict[str, ObjectTemplate]:
        """The mix's templates, read when a phase first needs them (a run without phases never does)."""
        return {kind: read("cl2", kind, {"template": file}) for kind, file in TEMPLATES.items()}

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.run}"

    def controlled(self) -> list[str]:
        return sorted(k for k in TEMPLATES if k in CONTROLLERS)

    def counted(self) -> dict[str, str]:
        """The mix's kinds as collections to count at each window's close (by their plural)."""
        return {self._kind(kind).plural: self._kind(kind).collection() for kind in TEMPLATES}

    def _kind(self, kind: str) -> Kind:
        if kind not in self.kinds:
            template = self.templates[kind]
            self.kinds[kind] = resolve(self.client, template.api_version, template.kind)
        return self.kinds[kind]

    # ---------------------------------------------------------------------------------------- phases
    def run_phase(self, phase: str, nodes: int, limit_s: float, interrupt: Callable[[], None]) -> PhaseOutcome:
        """One phase, to its end; `interrupt` is called while waiting (the runner's checks may raise there)."""
        if phase == CREATE:
            return self._create(nodes, limit_s, interrupt)
        if phase == SCHEDULER:
            return self._scheduler(nodes, limit_s, interrupt)
        if phase == POD_STARTUP:
            return self._pod_startup(limit_s, interrupt)
        if not self.made:
            raise TargetError(f"{phase} needs a {CREATE} phase before it (nothing of the mix exists)")
        if phase == SCALE:
            return self._scale(limit_s, interrupt)
        return self._delete(limit_s, interrupt)

    def _throughput(self, key: str = "throughput") -> float:
        return float(self.params.get(key) or self.params["throughput"])

    def _create(self, nodes: int, limit_s: float, interrupt: Callable[[], None]) -> PhaseOutcome:
        self.mix = mix = load_mix(nodes, int(self.params["pods_per_node"]), int(self.params["nodes_per_namespace"]))
        mixed = [f"{objects.NS_OBJECTS_PREFIX}{i}" for i in range(mix.namespaces)]
        self.namespaces += [name for name in mixed if name not in self.namespaces]  # removed at the end
        ensure_namespaces(self.client, mixed)
        self._priority()
        made = [Cl2Object(group, namespace, f"{group.basename}-{i}", group.size)
                for namespace in self.namespaces for group in mix.groups for i in range(group.per_namespace)]
        # what the Deployments mount and the Services select exist first, as ClusterLoader2 makes them first
        first = [o for o in made if o.kind in ("ConfigMap", "Secret", "Service")]
        controllers = [o for o in made if o.kind not in ("ConfigMap", "Secret", "Service")]
        self.made = made
        started = time.monotonic()
        self._spread(first, 0.0, self._create_one, interrupt)
        pods = sum(o.size for o in controllers if o.kind != "DaemonSet")
        time_limit = pods / self._throughput()
        self._spread(controllers, time_limit, self._create_one, interrupt)
        asked_s = time.monotonic() - started
        notes = self._converge(limit_s - asked_s, interrupt, "running")
        return PhaseOutcome([RateResult(CREATE, self._throughput(), round(pods / max(asked_s, 1e-9), 3), "pods")],
                            notes, time.monotonic() - started)

    def _scale(self, limit_s: float, interrupt: Callable[[], None]) -> PhaseOutcome:
        changing = [o for o in self.made if o.kind in ("Deployment", "StatefulSet", "Job", "DaemonSet")]
        for obj in changing:
            if obj.kind != "DaemonSet":
                low, high = 1 - RANDOM_SCALE_FACTOR, 1 + RANDOM_SCALE_FACTOR
                obj.size = max(1, round(obj.group.size * random.uniform(low, high)))
        pods = sum(o.group.size for o in changing if o.kind != "DaemonSet")
        time_limit = pods / self._throughput() / 4  # a quarter of the pods change, on average
        started = time.monotonic()
        self._spread(changing, time_limit, self._scale_one, interrupt)
        asked_s = time.monotonic() - started
        notes = self._converge(limit_s - asked_s, interrupt, "running")
        changed = sum(abs(o.size - o.group.size) for o in changing if o.kind != "DaemonSet")
        notes.append(f"cl2-scale: {len(changing)} objects changed, {changed} pods added or removed (of {pods}; "
                     "a quarter expected), every pod template updated")
        # the pace kept: the expected quarter of the pods over the time the changes took (asked: throughput)
        pace = pods / 4 / max(asked_s, 1e-9)
        return PhaseOutcome([RateResult(SCALE, self._throughput(), round(pace, 3), "pods")], notes,
                            time.monotonic() - started)

    def _delete(self, limit_s: float, interrupt: Callable[[], None]) -> PhaseOutcome:
        controllers = [o for o in self.made if o.kind not in ("ConfigMap", "Secret", "Service")]
        rest = [o for o in self.made if o.kind in ("ConfigMap", "Secret", "Service")]
        pods = sum(o.size for o in controllers if o.kind != "DaemonSet")
        time_limit = pods / self._throughput("delete_throughput")
        started = time.monotonic()
        self._spread(controllers, time_limit, self._delete_one, interrupt)
        self._spread(rest, 0.0, self._delete_one, interrupt)
        asked_s = time.monotonic() - started
        notes = self._converge(limit_s - asked_s, interrupt, "gone")
        self.made = []
        return PhaseOutcome([RateResult(DELETE, self._throughput("delete_throughput"),
                                        round(pods / max(asked_s, 1e-9), 3), "pods")], notes,
                            time.monotonic() - started)

    def prepare(self, phase: str) -> None:
        """Before a phase's window: the pods of the phase before it that are not of the mix gone (the
        scheduler-throughput Deployment before the latency pods, as ClusterLoader2 deletes it first), and the
        namespace the phase writes to made."""
        for namespace in (SCHEDULER_NAMESPACE, LATENCY_NAMESPACE):
            if namespace in self.namespaces:
                self._empty(namespace)
        if phase in (SCHEDULER, POD_STARTUP):
            self._namespace(SCHEDULER_NAMESPACE if phase == SCHEDULER else LATENCY_NAMESPACE)

    def pod_namespace(self, phase: str) -> str | None:
        """Where a phase's pods are timed from creation to Running by the step's pod startup probe."""
        return LATENCY_NAMESPACE if phase == POD_STARTUP else None

    def _namespace(self, name: str) -> None:
        if name not in self.namespaces:
            self.namespaces.append(name)  # removed at the end
        ensure_namespaces(self.client, [name])

    def _empty(self, namespace: str) -> None:
        """Every Deployment of the run in the namespace deleted, and its pods gone."""
        kind = self._kind("Deployment")
        self.client.request("DELETE", kind.collection(namespace), params={"labelSelector": self.selector})

        def gone() -> bool:
            pods = self.client.get(resource_path("pods", namespace), labelSelector=self.selector)
            return not pods.get("items")

        if not poll_until(gone, 180, interval_s=0.5):
            raise TargetError(f"the pods of namespace {namespace} were not gone within 180 s")

    def _scheduler(self, nodes: int, limit_s: float, interrupt: Callable[[], None]) -> PhaseOutcome:
        """max(1000, nodes) pods at once in one Deployment; each pod's binding seen by a watch (its first event
        with a node), counted per interval from the Deployment's creation to the last binding."""
        pods = int(self.params.get("scheduler_pods") or max(MIN_SCHEDULER_PODS, nodes))
        threshold = float(self.params["scheduler_threshold"])
        obj = Cl2Object(Group("Deployment", "scheduler-throughput-deployment", 1, pods), SCHEDULER_NAMESPACE,
                        "scheduler-throughput-deployment-0", pods)
        bound: dict[str, float] = {}

        def on_event(event: WatchEvent) -> None:
            meta, spec = event.object.get("metadata") or {}, event.object.get("spec") or {}
            if event.type != "DELETED" and spec.get("nodeName") and meta.get("uid"):
                bound.setdefault(str(meta["uid"]), event.received_at)

        watch = BackgroundReflector(self.client, "pods", WatchNames.of("pods", SCHEDULER_NAMESPACE, "cl2", list_rv="0"),
                                    namespace=SCHEDULER_NAMESPACE, label_selector=self.selector, page_limit=1,
                                    all_pages=False, on_event=on_event)
        def all_bound() -> bool:
            interrupt()
            return len(bound) >= pods

        watch.start()
        try:
            started = time.monotonic()
            self._create_one(obj)
            complete = poll_until(all_bound, limit_s, interval_s=0.2)
        finally:
            watch.stop()
        notes = [] if complete else [
            f"scheduler-throughput: {len(bound)} of {pods} pods had a node when the phase's duration_s ran out"]
        found = scheduling_throughput(sorted(bound.values()), started, pods, threshold, complete)
        notes += self._converge_one(obj, started + limit_s - time.monotonic(), interrupt)
        asked = RateResult(SCHEDULER, float(pods), float(len(bound)), "pods", per_second=False)
        return PhaseOutcome([asked], notes, time.monotonic() - started, found)

    def _converge_one(self, obj: Cl2Object, left_s: float, interrupt: Callable[[], None]) -> list[str]:
        kind = self._kind(obj.kind)

        def running() -> bool:
            interrupt()
            found = self.client.request("GET", kind.path(obj.namespace, obj.name), ok=(404,))
            return bool(found) and done(obj.kind, found)

        if poll_until(running, max(0.0, left_s), interval_s=1.0):
            return []
        return [f"{obj.kind} {obj.namespace}/{obj.name}: not every pod running when the phase's duration_s ran out"]

    def _pod_startup(self, limit_s: float, interrupt: Callable[[], None]) -> PhaseOutcome:
        """latency_pods Deployments of one pod each, created latency_qps a second; the step's pod startup probe
        times each pod from creation to Running (judged against the pod startup SLO, 5 s at p99)."""
        count, qps = int(self.params["latency_pods"]), float(self.params["latency_qps"])
        latency = [Cl2Object(Group("Deployment", "latency-deployment", count, 1), LATENCY_NAMESPACE,
                             f"latency-deployment-{i}", 1) for i in range(count)]
        started = time.monotonic()
        self._paced(latency, qps, self._create_one, interrupt)
        asked_s = time.monotonic() - started
        notes = []
        for obj in latency:
            short = self._converge_one(obj, started + limit_s - time.monotonic(), interrupt)
            if short:
                notes.append(f"pod-startup: latency Deployments not running when the phase's duration_s ran out "
                             f"(first: {obj.name})")
                break
        achieved = (count - 1) / asked_s if count > 1 and asked_s > 0 else float(count)
        return PhaseOutcome([RateResult(POD_STARTUP, qps, round(achieved, 3), "creates")], notes,
                            time.monotonic() - started)

    def _paced(self, work: list[Cl2Object], qps: float, operation: Callable[[Cl2Object], None],
               interrupt: Callable[[], None]) -> None:
        """One operation every 1/qps seconds, in order (ClusterLoader2's qpsLoad)."""
        start = time.monotonic()
        for i, obj in enumerate(work):
            time.sleep(max(0.0, start + i / qps - time.monotonic()))
            interrupt()
            try:
                operation(obj)
            except ApiError as error:
                raise TargetError(f"create {obj.kind} {obj.namespace}/{obj.name}: {error}") from None

    # ---------------------------------------------------------------------------------------- operations
    def _priority(self) -> None:
        if self._priority_made:
            return
        template = read("cl2", "install", {"template": PRIORITY_CLASS,
                                           "input_vars": {"class_name": self.priority_class}})
        obj = template.render(name=self.priority_class, namespace="", index=0, run=self.run, keep_name=True)
        kind = resolve(self.client, template.api_version, template.kind)
        self.client.create(kind.collection(), obj, exist_ok=True)
        self._priority_made = True

    def _manifest(self, obj: Cl2Object) -> dict[str, Any]:
        input_vars: dict[str, Any] = {"replicas": obj.size}
        if obj.kind == "Deployment" and obj.group.basename in MOUNTING:  # its own ConfigMap and Secret, mounted
            input_vars.update(configmap=obj.name, secret=obj.name)
        elif obj.kind == "Job":
            input_vars.update(parallelism=obj.size, completions=obj.group.completions)
        elif obj.kind == "DaemonSet":
            input_vars.update(priority_class=self.priority_class)
        elif obj.kind == "Service":  # the Deployment of the same size and number
            input_vars.update(selects=obj.name.replace("-service-", "-deployment-"))
        template = self.templates[obj.kind]
        found = ObjectTemplate(template.template, template.text, 1, input_vars, template.api_version, template.kind)
        return found.render(name=obj.name, namespace=obj.namespace, index=0, run=self.run)

    def _create_one(self, obj: Cl2Object) -> None:
        kind = self._kind(obj.kind)
        self.client.create(kind.collection(obj.namespace), self._manifest(obj), exist_ok=True)

    def _scale_one(self, obj: Cl2Object) -> None:
        """Its new size and an updated pod template, in one change (a DaemonSet's template only)."""
        kind = self._kind(obj.kind)
        stamp = {"metadata": {"annotations": {UPDATE_ANNOTATION: str(time.time_ns())}}}
        spec: dict[str, Any] = {}
        if obj.kind in ("Deployment", "StatefulSet"):
            spec = {"replicas": obj.size, "template": stamp}
        elif obj.kind == "DaemonSet":
            spec = {"template": stamp}
        elif obj.kind == "Job":  # a Job's pod template cannot change: its parallelism does
            spec = {"parallelism": obj.size}
        self.client.patch(kind.path(obj.namespace, obj.name), {"spec": spec})

    def _delete_one(self, obj: Cl2Object) -> None:
        kind = self._kind(obj.kind)
        self.client.request("DELETE", kind.path(obj.namespace, obj.name),
                            {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"},
                            ok=(404,))

    def _spread(self, work: list[Cl2Object], time_limit: float, operation: Callable[[Cl2Object], None],
                interrupt: Callable[[], None]) -> None:
        """Each operation at a random moment within time_limit (at once when 0), THREADS at a time."""
        if not work:
            return
        start = time.monotonic()
        due = sorted((start + random.uniform(0, time_limit), i) for i in range(len(work)))

        def at(moment: float, obj: Cl2Object) -> None:
            time.sleep(max(0.0, moment - time.monotonic()))
            try:
                operation(obj)
            except ApiError as error:
                raise TargetError(f"{operation.__name__.strip('_').replace('_one', '')} {obj.kind} "
                                  f"{obj.namespace}/{obj.name}: {error}") from None

        pool = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="cl2")
        try:
            pending = {pool.submit(at, moment, work[i]) for moment, i in due}
            while pending:
                finished, pending = concurrent.futures.wait(pending, timeout=1.0)
                for future in finished:
                    future.result()  # an operation the apiserver refused stops the phase, in one line
                interrupt()
        finally:  # an aborted phase does not wait for the operations not yet due
            pool.shutdown(wait=False, cancel_futures=True)

    def _converge(self, left_s: float, interrupt: Callable[[], None], target: str) -> list[str]:
        """Until the controllers are done with every object (or every object and its pods are gone)."""
        def settled() -> bool:
            interrupt()
            return not self._outstanding(target)

        if poll_until(settled, max(0.0, left_s), interval_s=1.0):
            return []
        short = self._outstanding(target)
        return [f"{len(short)} object(s) not {target} when the phase's duration_s ran out: {', '.join(short[:5])}"]

    def _outstanding(self, target: str) -> list[str]:
        """The objects (and, once deleting, pods) not yet where the phase asked them to be."""
        kinds = {o.kind for o in self.made}
        kinds = kinds | {"Pod"} if target == "gone" else kinds & set(CONTROLLERS)
        found = []
        for kind in sorted(kinds):
            path = resource_path("pods") if kind == "Pod" else self._kind(kind).collection()
            items = self.client.get(path, labelSelector=self.selector).get("items") or []
            found += [f"{kind} {i['metadata'].get('namespace')}/{i['metadata']['name']}" for i in items
                      if i["metadata"].get("namespace") in self.namespaces and (target == "gone" or not done(kind, i))]
        return found

    def remove(self) -> list[str]:
        """The mix's namespaces and the PriorityClass gone; problems as lines, never raised."""
        paths = [resource_path("namespaces", name=name) for name in self.namespaces]
        if self._priority_made:
            paths.append(f"/apis/scheduling.k8s.io/v1/priorityclasses/{self.priority_class}")
        problems = remove_owned(self.client, paths)
        if not problems:
            self.namespaces, self._priority_made, self.made = [], False, []
        return problems
