"""Node agents: every fake node's kubelet and kube-proxy as the apiserver sees a real node's
(docs/node-agents.md, loadtests/config/node_agents.py). Each node has two users, one per agent, each on its own
connections and, on a local control plane, as its own identity: the kubelet as `system:node:<node>` (so the
Node authorizer and NodeRestriction judge its every request), kube-proxy as kubeadm's kube-proxy ServiceAccount.

Each agent holds the reference's watches (client-go reflectors: a streaming list, bookmarks, renewal at a
timeoutSeconds drawn from the reference's range, a LIST when a streaming list is refused, client-go's backoff)
in the plan's encoding. The kubelet also follows its pods: a watch per ConfigMap and Secret they reference
(kept while a pod's volumes or image pull secrets name it; one named only by environment variables is dropped
the reference's 5-6 minutes after the pod started), a ServiceAccount token request per pod start (bound to the
pod, as a projected token volume asks), and the events of its containers' start and stop.

What stays kwok's: the heartbeats (Lease, node status) and pod status, sent by kwok's one client for every node.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import gevent
from gevent.pool import Group
from locust import task
from locust.exception import StopUser

from loadtests.config.node_agents import KUBE_PROXY, KUBELET, PER_OBJECT, AgentWatch, node_watches, object_watch
from loadtests.config.scenarios import (
    RECEIVED,
    node_agent_event_names,
    node_agent_received,
    node_agent_token_name,
)
from loadtests.kube.pod_references import referenced_objects
from loadtests.kube.reflector import Backoff, Reflector
from loadtests.kube.watch import WatchEvent, ends_initial_events
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, json_bytes, user_class
from loadtests.load.locust.transport import JSON, ssl_contexts

# the kubelet drops a watch on an object only environment variables name 5 x syncFrequency after its last use,
# checked every minute: 5-6 minutes (pkg/kubelet/util/manager/watch_based_manager.go); here the middle of that
TRANSIENT_KEEP_S = 330.0
# the kubelet's volume manager: its desired-state populator and its reconciler each loop every 100 ms
# (pkg/kubelet/volumemanager/volume_manager.go), so a pod's volumes are mounted 0-200 ms after it is seen; a failed
# mount is tried again after 0.5 s, doubling up to 2 min 2 s (pkg/util/goroutinemap/exponentialbackoff:
# initialDurationBeforeRetry, maxDurationBeforeRetry)
VOLUME_LOOP_S = 0.1
MOUNT_RETRY_S = (0.5, 122.0)
# a per-object watch may stay silent for its whole timeoutSeconds (up to an hour): reads wait that long
OBJECT_READ_TIMEOUT_S = 2 * 1800.0 + 60.0


@dataclass
class TrackedPod:
    """What the kubelet keeps of one of its pods: the objects it references, when it was seen, and whether its
    containers' stop was sent."""

    kept: frozenset[tuple[str, str, str]]  # (resource, namespace, name) its volumes and image pull secrets name
    transient: frozenset[tuple[str, str, str]]
    started_at: float
    stopping: bool = False


class NodeAgentUser(KubeUser):
    """One agent of one node; `agent` says which. Its node is chosen before its connections are made, so that
    they carry the node's own certificate."""

    abstract = True
    scenario = "node_agents"
    network_timeout = OBJECT_READ_TIMEOUT_S
    concurrency = 64  # one connection per watch (HTTP/1.1), where a real agent multiplexes them over HTTP/2
    agent = KUBELET
    _slots: itertools.count[int]

    def __init__(self, environment: Any) -> None:
        runner = environment.runner
        worker = max(0, getattr(runner, "worker_index", 0) or 0)  # worker i takes nodes i, i+W, i+2W, ...
        self.node = self.config.node(worker + next(self._slots) * max(1, self.config.workers))
        identities = self.config.node_identities
        if identities is not None:  # a local control plane: the agent is the node (or kube-proxy) itself
            kubelet = self.agent == KUBELET
            self.access = identities.node_access(self.node) if kubelet else identities.proxy_access(self.node)
            self.host = self.access.server.rstrip("/")  # the node's apiserver (NodeIdentities.server_for)
            self.ssl_context_factory = ssl_contexts(self.access)  # every kube-proxy of one apiserver: one
        super().__init__(environment)
        self.encoding = str(self.params["encoding"])
        self.children = Group()  # its greenlets: the watches, and what a pod's change makes it send
        self.pods: dict[str, TrackedPod] = {}
        # the pods its first streaming list brought are ones a running kubelet already started: their objects are
        # watched, their start is not sent again
        self.pods_synced = False
        # the per-object reflectors: (resource, namespace, name) -> (reflector, its greenlet)
        self.objects: dict[tuple[str, str, str], tuple[Reflector, Any]] = {}

    def _fire(self, kind: str, name: str, length: int) -> None:
        self.environment.events.request.fire(request_type=kind, name=name, response_time=0,
                                             response_length=length, exception=None, context={})

    def reflector(self, watch: AgentWatch, *, namespace: str = "", name: str = "", **options: Any) -> Reflector:
        received = node_agent_received(watch)
        on_event = options.pop("on_event", None)

        def each(event: WatchEvent) -> None:
            self._fire(RECEIVED, received, event.size)
            if on_event is not None:
                on_event(event)

        return Reflector(self.api, watch.resource, watch.names, namespace=namespace,
                         field_selector=watch.field_selector_for(self.node, name),
                         label_selector=watch.label_selector, deadline=self.config.stop_at,
                         watch_list=watch.watch_list, list_fallback=True, encoding=self.encoding,
                         watch_timeout_s=watch.timeout_s, backoff=Backoff.client_go(),
                         on_event=each, **options)

    def spawn(self, reflector: Reflector) -> Any:
        return self.children.spawn(reflector.run)

    @task
    def hold(self) -> None:
        """Every watch of the agent, each in its greenlet, until the run's stop time."""
        self.stop_if_past_deadline()
        for watch in node_watches(self.agent):
            handler = {"on_event": self.pod_event} if self.agent == KUBELET and watch.resource == "pods" else {}
            self.spawn(self.reflector(watch, **handler))
        while not self.past_deadline():
            gevent.sleep(min(30.0, max(0.1, (self.config.stop_at or time.time() + 30) - time.time())))
            self.release_transient()
        raise StopUser()

    def on_stop(self) -> None:
        for reflector, _ in self.objects.values():
            reflector.stop()
        self.children.kill(block=False)

    # --- the kubelet's pods ----------------------------------------------------------------------------

    def pod_event(self, event: WatchEvent) -> None:
        if ends_initial_events(event):
            self.pods_synced = True
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        pod = event.object
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        gone = event.type == "DELETED" or bool(meta.get("deletionTimestamp"))
        tracked = self.pods.get(uid)
        if gone:
            if tracked is not None and not tracked.stopping:
                tracked.stopping = True
                self._later(self.container_events, pod, "Killing")
            if event.type == "DELETED":
                self.pods.pop(uid, None)
        elif tracked is None:
            kept, transient = pod_references(pod)
            self.pods[uid] = TrackedPod(frozenset(kept), frozenset(transient), time.time())
            if self.pods_synced:
                self._later(self.pod_started, pod)
        self.refresh_object_watches()

    def _later(self, function: Any, *args: Any) -> None:
        """Requests a pod change causes are sent beside the pods watch, which keeps reading."""
        self.children.spawn(function, *args)

    def pod_started(self, pod: dict[str, Any]) -> None:
        """What the kubelet asks at a pod's start: once its volume manager has the pod (its populator and its
        reconciler each run every 100 ms), a token for each projected ServiceAccount token volume, bound to the pod
        as NodeRestriction requires of a node, resent as a failed mount is while the pod is there; then its
        containers' start events."""
        gevent.sleep(VOLUME_LOOP_S * (random.random() + random.random()))
        for source in _token_sources(pod.get("spec") or {}):
            self.request_token(pod, source)
        for reason in ("Pulled", "Created", "Started"):
            self.container_events(pod, reason)

    def request_token(self, pod: dict[str, Any], source: dict[str, Any]) -> None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        body = json_bytes({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {
            "audiences": [source["audience"]] if source.get("audience") else None,
            "expirationSeconds": int(source.get("expirationSeconds") or 3607),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")}}})
        path = _token_path(str(meta.get("namespace")), str(spec.get("serviceAccountName") or "default"))
        wait_s = MOUNT_RETRY_S[0]
        while True:
            status = self.api.call("POST", "POST", path, node_agent_token_name(), body=body, content_type=JSON,
                                   ok=(200, 201)).status_code
            tracked = self.pods.get(str(meta.get("uid") or ""))
            if status in (200, 201) or tracked is None or tracked.stopping or self.past_deadline():
                return
            gevent.sleep(wait_s)
            wait_s = min(MOUNT_RETRY_S[1], 2 * wait_s)

    def container_events(self, pod: dict[str, Any], reason: str) -> None:
        """One event per container, as the kubelet's recorder writes them (core/v1 Events, JSON here)."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        name = node_agent_event_names()[reason]
        for container in (pod.get("spec") or {}).get("containers") or [{"name": "c"}]:
            body = _event(pod, str(container.get("name") or "c"), reason, self.node)
            self.api.create("events", namespace, json_bytes(body), name, ok=(200, 201))

    def refresh_object_watches(self) -> None:
        """A watch per object the node's pods reference (started at once, as the kubelet's first read starts its
        reflector), stopped when no pod of the node references it any more (an object only environment
        variables name: TRANSIENT_KEEP_S after its pod started)."""
        now = time.time()
        wanted: set[tuple[str, str, str]] = set()
        for pod in self.pods.values():
            wanted |= pod.kept
            if now < pod.started_at + TRANSIENT_KEEP_S:
                wanted |= pod.transient
        for key in set(self.objects) - wanted:
            reflector, _ = self.objects.pop(key)
            reflector.stop()
        for key in wanted - set(self.objects):
            resource, namespace, name = key
            reflector = self.reflector(object_watch(resource), namespace=namespace, name=name)
            self.objects[key] = (reflector, self.spawn(reflector))

    def release_transient(self) -> None:
        if self.agent == KUBELET and any(pod.transient for pod in self.pods.values()):
            self.refresh_object_watches()


def pod_references(pod: dict[str, Any]) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(kept, transient) (resource, namespace, name) of the ConfigMaps and Secrets a pod names, as its kubelet
    watches them (kube/pod_references.py)."""
    kept: set[tuple[str, str, str]] = set()
    transient: set[tuple[str, str, str]] = set()
    for resource in PER_OBJECT.values():
        held, dropped = referenced_objects(pod, resource)
        kept |= {(resource, namespace, name) for namespace, name in held}
        transient |= {(resource, namespace, name) for namespace, name in dropped}
    return kept, transient


def _token_sources(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The serviceAccountToken sources of a pod's projected volumes (the ServiceAccount admission adds one)."""
    found = []
    for volume in spec.get("volumes") or []:
        for source in (volume.get("projected") or {}).get("sources") or []:
            if source.get("serviceAccountToken") is not None:
                found.append(source["serviceAccountToken"] or {})
    return found


def _token_path(namespace: str, account: str) -> str:
    return f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"


def _event(pod: dict[str, Any], container: str, reason: str, node: str) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kind = "Warning" if reason == "Failed" else "Normal"
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": meta.get("namespace")},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"),
                               "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                               "fieldPath": f"spec.containers{{{container}}}"},
            "reason": reason, "message": f"{reason} container {container}", "type": kind,
            "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet",
            "reportingInstance": node, "firstTimestamp": now, "lastTimestamp": now, "count": 1}


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    classes = []
    for agent, cls in ((KUBELET, "NodeKubelet"), (KUBE_PROXY, "NodeProxy")):
        headers = {"Accept": JSON, "User-Agent": f"k8s-loadtest/node_agents/{agent}"}
        classes.append(user_class(NodeAgentUser, cls, config, params, counts.get(cls, 0), agent=agent,
                                  default_headers=headers, _slots=itertools.count()))
    return classes

