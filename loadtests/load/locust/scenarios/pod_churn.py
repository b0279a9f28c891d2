"""Pod churn: bare pods created at a steady aggregate rate and deleted after a fixed lifetime, plus an
optional Deployment scaled up and down — the write load (scheduler, controllers, kubelets' status updates
via KWOK) that the SLOs on mutating calls and pod startup are about.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from typing import Any

import gevent
from locust import constant_pacing, constant_throughput, task

from loadtests.config.scenarios import CREATE_PODS, DELETE_PODS, SCALE_DEPLOYMENT
from loadtests.kube.names import request_name
from loadtests.kube.objects import NS_CHURN, deployment_manifest, pod_manifest
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, json_bytes, user_class

DEPLOYMENT = "churn-deploy"
SPREAD_LABEL = "k8s-loadtest/spread"  # the load's pods that require a node of their own (anti_affinity)
PAYLOAD_ANNOTATION = "k8s-loadtest/payload"
CLEANUP_S = 30.0  # the most a user spends deleting what it still owns when the run ends
_NAME_SLOT = "@@name@@"


def shaped(pod: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A pod (or pod template) with the scenario's payload annotation and anti-affinity, when asked for."""
    meta, spec = pod.setdefault("metadata", {}), pod.setdefault("spec", {})
    if params.get("payload_bytes"):
        meta.setdefault("annotations", {})[PAYLOAD_ANNOTATION] = "x" * int(params["payload_bytes"])
    if params.get("anti_affinity"):
        meta.setdefault("labels", {})[SPREAD_LABEL] = "pod-churn"
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {SPREAD_LABEL: "pod-churn"}},
            "topologyKey": "kubernetes.io/hostname"}]}}
    return pod


class PodChurnUser(KubeUser):
    """Creates one pod per task run (the pacing gives rate/users per user); a second greenlet of the user
    deletes each pod when its lifetime is over, so deletions neither wait for nor hold up the creations."""

    abstract = True
    scenario = "pod_churn"

    def on_start(self) -> None:
        self._namespace = str(self.params.get("namespace") or NS_CHURN)
        self.ensure_namespace(self._namespace)
        labels = {"k8s-loadtest/run": self.config.run_label(), "k8s-loadtest/scenario": "pod-churn"}
        # serialised once: each create only swaps the name in
        self._template = json_bytes(shaped(pod_manifest(_NAME_SLOT, self._namespace, labels=labels), self.params))
        self._prefix = f"churn-{self.config.run_label()}-"
        self._lifetime_s = float(self.params["lifetime_s"])
        self._owned: deque[tuple[float, str]] = deque()  # (delete at, name), oldest first
        self._reaper = gevent.spawn(self._reap)

    @task
    def create(self) -> None:
        self.stop_if_past_deadline()
        name = self._prefix + uuid.uuid4().hex[:12]
        entry = (time.monotonic() + self._lifetime_s, name)
        self._owned.append(entry)  # owned before it is sent: a user stopped mid-request still deletes it
        status = self.api.create("pods", self._namespace, self._template.replace(_NAME_SLOT.encode(), name.encode()),
                                 CREATE_PODS)
        if 400 <= status < 500:
            self._owned.remove(entry)  # refused: nothing to delete

    def _reap(self) -> None:
        while True:
            now = time.monotonic()
            if self._owned and self._owned[0][0] <= now:
                entry = self._owned[0]
                self.api.delete("pods", self._namespace, entry[1], DELETE_PODS)
                if self._owned and self._owned[0] is entry:  # only now: stopped mid-request, it is retried
                    self._owned.popleft()
                continue
            gevent.sleep(min(0.5, self._owned[0][0] - now) if self._owned else 0.5)

    def on_stop(self) -> None:
        self._reaper.kill(block=True)
        with gevent.Timeout(CLEANUP_S, False):
            while self._owned:
                self.api.delete("pods", self._namespace, self._owned[0][1], DELETE_PODS, missing_ok=True)
                self._owned.popleft()


class DeploymentScaleUser(KubeUser):
    """Every deployment_scale_every_s, scales Deployment churn-deploy to the other end of [min, max], so the
    controller-manager and scheduler create and delete pods in bursts."""

    abstract = True
    scenario = "pod_churn"

    def on_start(self) -> None:
        self._namespace = str(self.params.get("namespace") or NS_CHURN)
        self.ensure_namespace(self._namespace)
        self._low, self._high = int(self.params["deployment_min"]), int(self.params["deployment_max"])
        status, _ = self.api.get("deployments", self._namespace, DEPLOYMENT, request_name("GET", "deployments"),
                                 missing_ok=True)
        if status == 404:
            deployment = deployment_manifest(DEPLOYMENT, self._namespace, self._low)
            deployment["spec"]["template"] = shaped(deployment["spec"]["template"], self.params)
            body = json_bytes(deployment)
            self.api.create("deployments", self._namespace, body, request_name("POST", "deployments"),
                            ok=(200, 201, 202, 409))
        self._up = True

    def _scale(self, replicas: int) -> None:
        self.api.patch("deployments", self._namespace, DEPLOYMENT, {"spec": {"replicas": replicas}}, SCALE_DEPLOYMENT,
                       subresource="scale")

    @task
    def scale(self) -> None:
        self.stop_if_past_deadline()
        self._scale(self._high if self._up else self._low)
        self._up = not self._up

    def on_stop(self) -> None:
        with gevent.Timeout(CLEANUP_S, False):
            self._scale(self._low)  # leave it as it was made, not at the top of a burst


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    churners = counts.get("PodChurn", 0)
    classes = []
    if churners:
        per_user = float(params["rate"]) / churners
        classes.append(user_class(PodChurnUser, "PodChurn", config, params, churners,
                                  wait_time=constant_throughput(per_user)))
    if counts.get("DeploymentScaler", 0):
        every = float(params["deployment_scale_every_s"])
        classes.append(user_class(DeploymentScaleUser, "DeploymentScaler", config, params, 1,
                                  wait_time=constant_pacing(every)))
    return classes
