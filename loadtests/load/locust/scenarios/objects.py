"""Objects of any kind from templates: each user creates objects at its share of the rate, round-robin over
the step's namespaces and the plan's templates (each `replicas` times per iteration), and a second greenlet
of the user updates, scales and finally deletes each one on its own schedule, so none of that waits for or
holds up the creations.

- update: a merge patch of an annotation (`k8s-loadtest/update`), also on the pod template of Deployments,
  StatefulSets and DaemonSets, which makes their controllers roll every pod;
- scale: the /scale subresource (kinds that have one) to a random size in [0.5x, 1.5x] of the template's;
- delete: after `lifetime_s`; when the run ends a user deletes what it still owns (a namespace's deletion
  by the runner catches whatever a stopped user could not).

The kinds were resolved by the runner against the apiserver's discovery (`params["kinds"]`, one per template),
so every path is the one the apiserver serves, custom resources included.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust import constant_throughput, task

from loadtests.config.scenarios import objects_namespaces, objects_request
from loadtests.config.templates import ObjectTemplate
from loadtests.kube.discovery import Kind
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, json_bytes, user_class
from loadtests.load.locust.transport import MERGE_PATCH

UPDATE_ANNOTATION = "k8s-loadtest/update"
ROLLING_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})  # a pod template change rolls their pods
CLEANUP_S = 30.0  # the most a user spends deleting what it still owns when the run ends
SCALE_RANGE = (0.5, 1.5)


@dataclass(order=True)
class Owned:
    """One object a user made, ordered by when its next action is due (its next update, scale or deletion)."""

    due: float
    seq: int
    template: int = field(compare=False)
    namespace: str = field(compare=False)
    name: str = field(compare=False)
    delete_at: float = field(compare=False)
    next_update: float = field(compare=False, default=math.inf)
    next_scale: float = field(compare=False, default=math.inf)
    replicas: int | None = field(compare=False, default=None)  # the template's own size, for scaling

    @property
    def action(self) -> str:
        return "delete" if self.due >= self.delete_at else "update" if self.due == self.next_update else "scale"


def object_name(label: str, token: str, number: int) -> str:
    """A name valid for every kind (a DNS-1035 label: Services need one): the template's label, the user's
    token and the object's number."""
    base = re.sub(r"[^a-z0-9-]+", "-", label.lower()).strip("-")[:24] or "object"
    return f"{base if base[0].isalpha() else 'o-' + base}-{token}-{number}"


class ObjectsUser(KubeUser):
    abstract = True
    scenario = "objects"
    users_started = 0  # each user starts the round-robin over the templates at its own place

    def on_start(self) -> None:
        self._templates = [ObjectTemplate.from_dict(t) for t in self.params["templates"]]
        self._kinds = [Kind(**k) for k in self.params["kinds"]]
        self._namespaces = objects_namespaces(self.config.nodes, int(self.params["nodes_per_namespace"]),
                                              int(self.params.get("namespaces", 0)))
        slots = [i for i, t in enumerate(self._templates) for _ in range(t.replicas)]
        offset = type(self).users_started
        type(self).users_started += 1
        self._slots = itertools.islice(itertools.cycle(slots), offset % len(slots), None)
        self._numbers = itertools.count()
        self._token = uuid.uuid4().hex[:6]  # names unique across users and Locust processes
        self._run = self.config.run_label()
        self._lifetime_s = float(self.params["lifetime_s"])
        self._update_s = float(self.params["update_every_s"])
        self._scale_s = float(self.params["scale_every_s"])
        self._owned: list[Owned] = []  # a heap by due time
        self._seq = itertools.count()
        self._worker = gevent.spawn(self._act)

    @task
    def create(self) -> None:
        self.stop_if_past_deadline()
        slot = next(self._slots)
        template, kind = self._templates[slot], self._kinds[slot]
        number = next(self._numbers)
        namespace = self._namespaces[number % len(self._namespaces)] if kind.namespaced else ""
        name = object_name(template.label, self._token, number)
        obj = template.render(name=name, namespace=namespace, index=number, run=self._run)
        now = time.monotonic()
        replicas = (obj.get("spec") or {}).get("replicas")
        entry = Owned(0.0, 0, slot, namespace, name, now + self._lifetime_s,
                      now + self._update_s if self._update_s > 0 else math.inf,
                      now + self._scale_s if self._scale_s > 0 and kind.scalable else math.inf,
                      replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None)
        self._push(entry)  # owned before it is sent: a user stopped mid-request still deletes it
        response = self.api.call("POST", "POST", kind.collection(namespace), objects_request("POST", kind.kind),
                                 body=json_bytes(obj), ok=(200, 201, 202))
        if 400 <= response.status_code < 500:  # refused: nothing to delete
            self._owned.remove(entry)
            heapq.heapify(self._owned)

    def _push(self, entry: Owned) -> None:
        entry.due, entry.seq = min(entry.next_update, entry.next_scale, entry.delete_at), next(self._seq)
        heapq.heappush(self._owned, entry)

    def _act(self) -> None:
        while True:
            now = time.monotonic()
            if not self._owned or self._owned[0].due > now:
                gevent.sleep(min(0.5, self._owned[0].due - now) if self._owned else 0.5)
                continue
            entry = self._owned[0]
            action = entry.action
            if action == "delete":
                self._delete(entry)
                if self._owned and self._owned[0] is entry:  # only now: stopped mid-request, it is retried
                    heapq.heappop(self._owned)
                continue
            if action == "update":
                self._update(entry)
                entry.next_update += self._update_s
            else:
                self._scale(entry)
                entry.next_scale += self._scale_s
            if self._owned and self._owned[0] is entry:
                heapq.heappop(self._owned)
                self._push(entry)

    def _patch(self, entry: Owned, patch: dict[str, Any], subresource: str = "") -> None:
        kind = self._kinds[entry.template]
        self.api.call("PATCH", "PATCH", kind.path(entry.namespace, entry.name, subresource),
                      objects_request("PATCH", kind.kind, subresource), body=json.dumps(patch).encode(),
                      content_type=MERGE_PATCH)

    def _update(self, entry: Owned) -> None:
        stamp = {"metadata": {"annotations": {UPDATE_ANNOTATION: str(time.time_ns())}}}
        rolling = self._kinds[entry.template].kind in ROLLING_KINDS
        self._patch(entry, {**stamp, "spec": {"template": stamp}} if rolling else stamp)

    def _scale(self, entry: Owned) -> None:
        """To a random size in SCALE_RANGE of the template's own (0 where the template set none)."""
        low, high = SCALE_RANGE
        size = max(0, round(entry.replicas * random.uniform(low, high))) if entry.replicas else 0
        self._patch(entry, {"spec": {"replicas": size}}, "scale")

    def _delete(self, entry: Owned, missing_ok: bool = False) -> None:
        kind = self._kinds[entry.template]
        body = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}).encode()
        self.api.call("DELETE", "DELETE", kind.path(entry.namespace, entry.name),
                      objects_request("DELETE", kind.kind), body=body,
                      ok=(200, 202, 404) if missing_ok else (200, 202))

    def on_stop(self) -> None:
        self._worker.kill(block=True)
        with gevent.Timeout(CLEANUP_S, False):
            while self._owned:
                self._delete(self._owned[0], missing_ok=True)
                heapq.heappop(self._owned)


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    users = counts.get("ObjectsUser", 0)
    if not users:
        return []
    return [user_class(ObjectsUser, "ObjectsUser", config, params, users,
                       wait_time=constant_throughput(float(params["rate"]) / users))]
