"""`loadtest run` with kube-proxy-like watchers on a Service over churned pods: every Running pod has its own IP
inside its node's pod range (kwok's pod-ready Stage), and the watchers count the events and bytes they receive
(results.json: steps[].rates[scenario=service_watchers].events and .received_bytes)."""

from __future__ import annotations

import ipaddress
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from loadtests import results
from loadtests.config.scenarios import RECEIVED, ServiceWatch, scenario_params
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.kube import objects
from loadtests.kube.names import WatchNames
from loadtests.kube.reflector import BackgroundReflector
from loadtests.kube.rest import RestClient
from loadtests.kube.watch import ListPage, WatchEvent
from tests.watched import WatchedRun

NODES = 10
PODS_PER_NODE = 2
# the churn's pods (2 a second, each gone after 5 s) come and go twice over within it, so a pod IP kwok frees is
# handed out again while it is watched: a reused IP still held by a live pod shows up as a problem
WINDOW_S = 10


def write_plan(path: Path, resource: str) -> Path:
    path.write_text(f"""
name: service-{resource}
gate: false
steps:
  - {{nodes: {NODES}, pods_per_node: {PODS_PER_NODE}, warmup_s: 2, duration_s: {WINDOW_S}}}
load:
  scenarios:
    pod_churn: {{rate: 2, lifetime_s: 5, users: 1}}
    service_watchers: {{resource: {resource}}}
""")
    return path


class PodAddresses:
    """Every harness pod as one watch sees it: each Running pod must name one IP (podIP and podIPs alike),
    inside its node's pod range, held by no other pod that still exists (kwok frees an IP when the pod is
    gone)."""

    NAMES = WatchNames.of("pods", "", "test", list_rv="0")

    def __init__(self, client: RestClient) -> None:
        self.running: set[str] = set()
        self.problems: list[str] = []
        self._holder: dict[str, str] = {}  # IP -> uid of the live pod holding it
        self._ip_of: dict[str, str] = {}  # uid -> its IP
        self._lock = threading.Lock()
        self._watch = BackgroundReflector(client, "pods", self.NAMES, label_selector=objects.MANAGED_BY_SELECTOR,
                                          on_list=self._listed, on_event=self._event)

    def _listed(self, page: ListPage) -> None:
        for pod in page.items or []:
            self._seen(pod)

    def _event(self, event: WatchEvent) -> None:
        if event.type == "DELETED":
            with self._lock:
                ip = self._ip_of.pop(event.object["metadata"]["uid"], None)
                if ip is not None and self._holder.get(ip) == event.object["metadata"]["uid"]:
                    del self._holder[ip]
        elif event.type in ("ADDED", "MODIFIED"):
            self._seen(event.object)

    def _seen(self, pod: dict[str, Any]) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        if status.get("phase") != "Running":
            return
        uid, name, node = meta["uid"], f"{meta['namespace']}/{meta['name']}", pod["spec"].get("nodeName", "")
        ip = status.get("podIP")
        ips = [entry.get("ip") for entry in status.get("podIPs") or []]
        with self._lock:
            self.running.add(uid)
            if not ip or ips != [ip]:
                self.problems.append(f"{name}: podIP {ip!r}, podIPs {ips}")
                return
            cidr = ipaddress.ip_network(objects.node_pod_cidr(int(node.removeprefix(objects.NODE_PREFIX))))
            if ipaddress.ip_address(ip) not in cidr:
                self.problems.append(f"{name}: {ip} outside {node}'s {cidr}")
            holder = self._holder.setdefault(ip, uid)
            if holder != uid:
                self.problems.append(f"{name}: {ip} is also the IP of a live pod (uid {holder})")
            previous = self._ip_of.get(uid)
            if previous is not None and previous != ip and self._holder.get(previous) == uid:
                del self._holder[previous]
            self._ip_of[uid] = ip

    def start(self) -> None:
        self._watch.start()

    def stop(self) -> None:
        self._watch.stop()


@pytest.mark.parametrize("resource", ["endpoints", "endpointslices"])
def test_service_watchers_receive_the_service_s_changes(bins, tmp_path: Path, resource: str) -> None:
    run = WatchedRun(tmp_path, plan=write_plan(tmp_path / "plan.yaml", resource), out=tmp_path / f"svc-{resource}")
    addresses: PodAddresses | None = None
    client: RestClient | None = None
    try:
        run.wait_line("nodes Ready", timeout_s=120)  # the run's control plane is up: watch its pods
        plane = LocalControlPlane(LocalOptions(name=run.state_file.parent.name, directory=run.state_file.parent))
        client = RestClient(plane.access())
        addresses = PodAddresses(client)
        addresses.start()
        assert run.finish(timeout_s=150) == 0, run.stdout[-3000:] + run.stderr[-3000:]
    finally:
        if addresses is not None:
            addresses.stop()
        if client is not None:
            client.close()
        run.finish(timeout_s=60)

    assert addresses.problems == [], addresses.problems[:10]
    assert len(addresses.running) > NODES * PODS_PER_NODE  # the fleet's pods and the churn's

    (step,) = results.load(run.out).steps
    watch = ServiceWatch.of(scenario_params({"service_watchers": {"resource": resource}})["service_watchers"])
    (rate,) = [r for r in step.rates if r.scenario == "service_watchers"]
    assert rate.achieved_per_s == NODES  # one established watch per node
    assert rate.events and rate.events > 0 and rate.received_bytes and rate.received_bytes > 0, rate
    (row,) = [c for c in step.client if (c.type, c.name) == (RECEIVED, watch.received)]
    assert (row.count, row.content_bytes) == (rate.events, rate.received_bytes)
    assert not [c for c in step.client if c.failures], step.client

    # kwok applied every pod's Stage: the apiserver refused none of its pod status patches
    refused = [line for line in (run.out / "control-plane-logs" / "kwok.log").read_text().splitlines()
               if '"ERROR"' in line and json.loads(line).get("stage") == "pod-ready"]
    assert refused == [], refused[:5]
