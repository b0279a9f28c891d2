"""A captured profile's traffic, replayed (config/scenarios.py `requests`, capture/replay_traffic.py): every row a
class of requests at its rate, on the replay's own objects.

Each row's requests are due at fixed times of the wall clock (the j-th at (j + ½) / rate), and the users of an
identity take turns (user i of n the j-th where j ≡ i mod n): the rate is kept whichever user starts first, and
a user that falls behind sends at once until it is on time again. A row with a `timeline` (the captured
per-minute curve, config/timeline.py) has its j-th due when its count reaches j + ½, the count following the
curve from the window's opening (window.WINDOW; the mean before it): a user that learns of the opening takes
its turns from the curve from then on. Each class under an identity of its kind, so
flow control sees what it saw: node rows go out as the fake nodes (each user as the node of its number, as node
agents are), service-account rows as a ServiceAccount (node_identity.SERVICE_ACCOUNT_USER), user rows as a user
of their own in no group (node_identity.REPLAY_USER), where the target issues them (a local control plane); the
others, and every row elsewhere, as the load's identity (or its tenant's).

What each verb acts on, never an object the harness did not make:
- get, update, patch: the harness's objects of the kind (labelled app.kubernetes.io/managed-by=k8s-loadtest: the
  prefilled ones, read once by a LIST named "(replay supply)"), or else the ones this user created;
- create: a new object of the kind's prefill template (pods: the harness's pod), in the replay's namespaces,
  labelled with the run; delete: one this user created (one made for it first, "(replay supply)", if none);
- list: in the captured shape (resourceVersion "", "0" or the last list's, a limit, a label selector on the
  run's label and a field selector on the object's namespace or a pod's node, as shares of the requests).
Every object a user created is deleted when it stops.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import random
import time
import uuid
from typing import Any

import gevent
from locust import task
from locust.exception import StopUser

from loadtests.config.scenarios import (
    LOAD_REQUESTS_USER,
    NODE_CLASS,
    REQUESTS_USERS,
    SERVICE_ACCOUNT_CLASS,
    USER_CLASS,
    objects_namespace,
    requests_user,
    requests_users,
)
from loadtests.config.templates import RUN_LABEL, ObjectTemplate
from loadtests.config.timeline import Timeline, due_at, first_due
from loadtests.kube.access import ClusterAccess
from loadtests.kube.discovery import Kind
from loadtests.kube.names import WatchNames, request_name
from loadtests.kube.objects import MANAGED_BY, MANAGED_BY_SELECTOR, NS_FLEET, pod_manifest
from loadtests.kube.reflector import Reflector
from loadtests.kube.watch import WATCH_READ_TIMEOUT_S
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, json_bytes, user_class
from loadtests.load.locust.transport import MERGE_PATCH, ssl_contexts
from loadtests.load.locust.window import WINDOW

CLEANUP_S = 30.0
POOL = 50  # the harness's objects a user reads once per kind, for its gets, updates and patches
UPDATE_ANNOTATION = "k8s-loadtest/replay"
MADE_LABEL = "k8s-loadtest/replay-made"  # on what the load creates: never in a pool, which another user may delete
POOL_SELECTOR = f"{MANAGED_BY_SELECTOR},!{MADE_LABEL}"


def kind_of(row: dict[str, Any]) -> Kind:
    version = f"{row['group']}/{row['version']}" if row["group"] else row["version"]
    return Kind(version, row["kind"], row["resource"], bool(row["namespaced"]))


def supply_name(verb: str, row: dict[str, Any]) -> str:
    return request_name(verb, row["resource"], "replay supply")


class RequestsUser(KubeUser):
    """One user of one identity: its turn of every row of that identity, at the rows' times."""

    abstract = True
    scenario = "requests"
    sends = LOAD_REQUESTS_USER  # the user class: whose rows it sends (config/scenarios.py requests_user)
    _slots: itertools.count[int]

    def __init__(self, environment: Any) -> None:
        worker = max(0, getattr(environment.runner, "worker_index", 0) or 0)
        users = requests_users(self.params)[self.sends]
        self.turn, self.turns = worker + next(self._slots) * max(1, self.config.workers), max(1, users)
        self.node = self.config.node(self.turn) if self.sends == REQUESTS_USERS[NODE_CLASS] else None
        access = self.identity()
        if access is not None:  # a local control plane: sent as the node of its turn, or as a ServiceAccount
            self.access = access
            self.host = self.access.server.rstrip("/")
            self.ssl_context_factory = ssl_contexts(self.access)
        super().__init__(environment)
        self.rows = [r for r in self.params["rows"] if requests_user(r) == self.sends]
        self.timelines = [Timeline.from_dict(r["timeline"]) if r.get("timeline") else None for r in self.rows]
        self.anchored: float | None = None  # the window's opening the schedule's times were taken from
        self.owned: dict[str, list[tuple[str, str]]] = {}  # resource -> (namespace, name) this user created
        self.pool: dict[str, list[dict[str, Any]]] = {}  # resource -> the harness's objects read once
        self.last_rv: dict[str, str] = {}
        self.numbers = itertools.count()
        self.token = uuid.uuid4().hex[:6]

    def identity(self) -> ClusterAccess | None:
        """The identity of this user's client class the target issued (None: the load's own sends)."""
        identities = self.config.node_identities
        if identities is None:
            return None
        if self.node is not None:
            return identities.node_access(self.node)
        if self.sends == REQUESTS_USERS[SERVICE_ACCOUNT_CLASS]:
            return identities.service_account_access()
        if self.sends == REQUESTS_USERS[USER_CLASS]:
            return identities.user_access()
        return None

    def namespace(self, row: dict[str, Any], reading: bool = False) -> str:
        if not row["namespaced"]:
            return ""
        if reading and row["resource"] == "pods" and row["group"] == "":
            return NS_FLEET  # the fleet's pods
        return objects_namespace(next(self.numbers) % max(1, int(self.params["namespaces"])))

    def schedule(self) -> list[tuple[float, int, int]]:
        """(due, row, j) of each row's first turn of this user due from now: none sent again when the schedule is
        taken anew as the window opens."""
        now = time.time()
        self.anchored = WINDOW.opened_at
        heap = []
        for index, row in enumerate(self.rows):
            if float(row["rate"]) <= 0:
                continue
            j = first_due(self.timelines[index], float(row["rate"]), self.anchored, now)
            j += (self.turn - j) % self.turns
            heap.append((self.due(index, j), index, j))
        heapq.heapify(heap)
        return heap

    def due(self, index: int, j: int) -> float:
        """When the row's j-th request is due."""
        return due_at(self.timelines[index], float(self.rows[index]["rate"]), self.anchored, j)

    @task
    def replay(self) -> None:
        self.stop_if_past_deadline()
        heap = self.schedule()
        while heap and not self.past_deadline():
            due, index, j = heapq.heappop(heap)
            wait = due - time.time()
            if wait > 0:
                gevent.sleep(wait)
            if self.past_deadline():
                break
            row = self.rows[index]
            getattr(self, f"send_{row['verb']}")(row)
            if self.anchored != WINDOW.opened_at and any(self.timelines):  # the timelines' turns from now on
                heap = self.schedule()
                continue
            j += self.turns
            heapq.heappush(heap, (self.due(index, j), index, j))
        raise StopUser()

    def send_get(self, row: dict[str, Any]) -> None:
        target = self.target(row)
        if target is not None:
            self.api.call("GET", "GET", kind_of(row).path(*target), row["name"], ok=(200,))

    def send_list(self, row: dict[str, Any]) -> None:
        shape, kind = row["list"], kind_of(row)
        namespace = self.namespace(row, reading=True) if row["scope"] == "namespace" else ""
        query: dict[str, Any] = {}
        rv = _choose(shape["resource_version"])
        if rv == "0":
            query["resourceVersion"] = "0"
        elif rv not in ("", None) and self.last_rv.get(row["name"]):
            query["resourceVersion"] = self.last_rv[row["name"]]
        if random.random() < shape["with_limit"]:
            query["limit"] = int(shape["limit"]) or 500
        if random.random() < shape["label_selector"]:
            query["labelSelector"] = MANAGED_BY_SELECTOR
        if random.random() < shape["field_selector"]:
            query["fieldSelector"] = _field_selector(shape["field_key"], row, namespace, self.config, self.node)
        response = self.api.call("LIST", "GET", kind.collection(namespace, query or None), row["name"], ok=(200,))
        if response.status_code == 200:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self.last_rv[row["name"]] = str(json.loads(response.content)["metadata"]["resourceVersion"])

    def make(self, row: dict[str, Any], name: str) -> None:
        """A new object of the row's kind, owned before it is sent (a stopped user still deletes it)."""
        namespace = self.namespace(row)
        obj = self.manifest(row, namespace)
        self.owned.setdefault(row["resource"], []).append((namespace, obj["metadata"]["name"]))
        response = self.api.call("POST", "POST", kind_of(row).collection(namespace), name, body=json_bytes(obj),
                                 ok=(200, 201, 202))
        if 400 <= response.status_code < 500:
            self.owned[row["resource"]].pop()

    def manifest(self, row: dict[str, Any], namespace: str) -> dict[str, Any]:
        name = f"replay-{self.token}-{next(self.numbers)}"
        labels = {**MANAGED_BY, RUN_LABEL: self.config.run_label(), MADE_LABEL: "true"}
        if row.get("template") is None:  # pods: the harness's own
            return pod_manifest(name, namespace, labels=labels)
        obj = ObjectTemplate.from_dict(row["template"]).render(name=name, namespace=namespace,
                                                               index=next(self.numbers), run=self.config.run_label())
        obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), **labels}
        return obj

    def send_create(self, row: dict[str, Any]) -> None:
        self.make(row, row["name"])

    def send_delete(self, row: dict[str, Any]) -> None:
        if not self.owned.get(row["resource"]):
            self.make(row, supply_name("POST", row))
        owned = self.owned.get(row["resource"])
        if owned:
            namespace, name = owned.pop(0)
            self.api.call("DELETE", "DELETE", kind_of(row).path(namespace, name), row["name"], ok=(200, 202))

    def send_patch(self, row: dict[str, Any]) -> None:
        target = self.target(row)
        if target is not None:
            patch = {"metadata": {"annotations": {UPDATE_ANNOTATION: str(time.time_ns())}}}
            self.api.call("PATCH", "PATCH", kind_of(row).path(*target), row["name"], body=json_bytes(patch),
                          content_type=MERGE_PATCH)

    def send_update(self, row: dict[str, Any]) -> None:
        """A PUT of the object as last read, an annotation changed (read again after a conflict)."""
        target = self.target(row)
        if target is None:
            return
        kind, objects = kind_of(row), self.pool[row["resource"]]
        obj = next((o for o in objects if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) == target),
                   None)
        if obj is None:
            got = self.api.call("GET", "GET", kind.path(*target), supply_name("GET", row), ok=(200,))
            if got.status_code != 200:
                return
            obj = json.loads(got.content)
            objects.append(obj)
        obj["metadata"].setdefault("annotations", {})[UPDATE_ANNOTATION] = str(time.time_ns())
        response = self.api.call("PUT", "PUT", kind.path(*target), row["name"], body=json_bytes(obj), ok=(200,))
        objects.remove(obj)
        if response.status_code == 200:
            objects.append(json.loads(response.content))

    def target(self, row: dict[str, Any]) -> tuple[str, str] | None:
        """An object of the harness's to read or change: one of the kind's read once, else one this user made."""
        resource = row["resource"]
        if resource not in self.pool:
            namespace = self.namespace(row, reading=row["verb"] == "get")
            query = {"labelSelector": POOL_SELECTOR, "limit": POOL}
            response = self.api.call("LIST", "GET", kind_of(row).collection(namespace, query),
                                     supply_name("LIST", row), ok=(200,))
            items = json.loads(response.content).get("items") or [] if response.status_code == 200 else []
            self.pool[resource] = items
        objects = self.pool[resource]
        if objects:
            meta = random.choice(objects)["metadata"]
            return str(meta.get("namespace") or ""), str(meta["name"])
        owned = self.owned.get(resource)
        return random.choice(owned) if owned else None

    def on_stop(self) -> None:
        with gevent.Timeout(CLEANUP_S, False):
            for row in self.rows:
                for namespace, name in self.owned.pop(row["resource"], []):
                    self.api.call("DELETE", "DELETE", kind_of(row).path(namespace, name), supply_name("DELETE", row),
                                  ok=(200, 202, 404))


def _choose(shares: dict[str, float]) -> str:
    """A resourceVersion drawn by the captured shares ("other": the last list's)."""
    keys = list(shares)
    return random.choices(keys, weights=[max(0.0, float(shares[k])) for k in keys])[0] if keys else ""


def _field_selector(key: str, row: dict[str, Any], namespace: str, config: LoadConfig, node: str | None) -> str:
    """A field selector on the captured key where the replay can fill it (a pod's node: the sending node's own, as
    the Node authorizer requires of a node; a name; a namespace), else on the object's namespace."""
    if key == "spec.nodeName" and row["resource"] == "pods":
        return f"spec.nodeName={node or config.node(random.randrange(max(1, config.nodes)))}"
    if key == "metadata.namespace" or (key != "metadata.name" and namespace):
        return f"metadata.namespace={namespace or objects_namespace(0)}"
    return "metadata.name=replay-absent"


class ReplayWatcherUser(KubeUser):
    """One held watch of a watch row (its turn over the rows' counts): a reflector until the run's end."""

    abstract = True
    scenario = "requests"
    network_timeout = WATCH_READ_TIMEOUT_S
    _slots: itertools.count[int]

    @task
    def watch(self) -> None:
        self.stop_if_past_deadline()
        worker = max(0, getattr(self.environment.runner, "worker_index", 0) or 0)
        turn = worker + next(self._slots) * max(1, self.config.workers)
        held = [w for w in self.params["watches"] for _ in range(int(w["count"]))]
        if held:
            watch = held[turn % len(held)]
            names = WatchNames.of(watch["resource"], "", "replay", watch["client_class"], list_rv="0")
            Reflector(self.api, watch["resource"], names, deadline=self.config.stop_at).run()
        raise StopUser()


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    classes = []
    for cls in (LOAD_REQUESTS_USER, *REQUESTS_USERS.values()):
        if counts.get(cls):
            headers = {"Accept": "application/json", "User-Agent": f"k8s-loadtest/requests/{cls}"}
            classes.append(user_class(RequestsUser, cls, config, params, counts[cls], sends=cls,
                                      default_headers=headers, _slots=itertools.count()))
    if counts.get("ReplayWatcher"):
        classes.append(user_class(ReplayWatcherUser, "ReplayWatcher", config, params, counts["ReplayWatcher"],
                                  _slots=itertools.count()))
    return classes

