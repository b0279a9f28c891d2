"""The load generator against a real control plane: every scenario for a few seconds, what it achieved,
what it left behind, and how refused requests show up."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.processes import wait_for
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.load.contract import LoadConfig
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.run.fleet import Fleet
from tests.checks import run_load

NODES = 10
LOAD = {
    "pod_churn": {"rate": 5.0, "users": 2, "lifetime_s": 4.0, "deployment_scale_every_s": 5.0,
                  "deployment_max": 6},
    "kubelet_watchers": {"per_node": 1.0},
    "informers": {"count": 2},
    "list_pollers": {"rate": 2.0, "users": 2, "resource_version": "0", "limit": 100},
}


@pytest.fixture()
def fleet(rest: RestClient) -> Fleet:
    fleet = Fleet(rest)
    fleet.ensure_namespaces()
    fleet.scale_nodes(NODES, timeout_s=120)
    return fleet


def churn_pods_left(rest: RestClient, run_id: str) -> int:
    label = LoadConfig(access=rest.access, scenarios={}, nodes=0, run_id=run_id).run_label()
    pods = rest.get(f"/api/v1/namespaces/{objects.NS_CHURN}/pods", labelSelector=f"k8s-loadtest/run={label}")
    return len(pods.get("items", []))


def test_every_scenario_achieves_what_it_asks(control_plane: TargetInfo, rest: RestClient, fleet: Fleet,
                                              tmp_path: Path) -> None:
    outcome = run_load(StepLoad(LOAD, nodes=NODES, duration_s=15, out_dir=tmp_path, run_id="it-load"),
                       control_plane.access)

    stats = {c.name: c for c in outcome.client}
    rates = {r.scenario: r for r in outcome.rates}
    assert sum(c.failures for c in outcome.client) == 0, outcome.failures
    assert rates["pod_churn"].achieved_per_s >= 0.7 * 5.0, outcome.notes
    assert rates["list_pollers"].achieved_per_s >= 0.7 * 2.0, outcome.notes
    assert rates["kubelet_watchers"].achieved_per_s == NODES  # one established watch per node
    assert rates["informers"].achieved_per_s == 2
    assert stats["LIST pods (informer, rv=0)"].count == 2
    assert stats["PATCH deployments/scale"].count >= 2
    # lifetime over, or deleted on stop (a create cut short by the end of the run too: one per user at most)
    assert 0 <= stats["DELETE pods"].count - stats["POST pods"].count <= 2
    # apiserver-side latency of creates is sub-second here; Locust's client view agrees within reason
    assert stats["POST pods"].p50_ms is not None and stats["POST pods"].p50_ms < 1000

    # deletions go through kwok's pod-delete stage
    wait_for(lambda: churn_pods_left(rest, "it-load") == 0, 30, "churn pods deleted", interval_s=0.5)
    deployment = rest.get(f"/apis/apps/v1/namespaces/{objects.NS_CHURN}/deployments/churn-deploy")
    assert deployment["spec"]["replicas"] == 0  # scaled back to deployment_min when the user stopped


def test_refused_requests_are_failures_not_crashes(control_plane: TargetInfo, fleet: Fleet,
                                                   tmp_path: Path) -> None:
    anonymous = dataclasses.replace(control_plane.access, cert_file=None, key_file=None, token=None)
    gen = LoadGenerator(StepLoad({"pod_churn": {"rate": 4.0, "users": 1}, "informers": {"count": 1}},
                                 nodes=NODES, duration_s=4, out_dir=tmp_path), anonymous)
    try:
        gen.start()
        outcome = gen.wait(timeout=90)
    finally:
        gen.stop()
    stats = {c.name: c for c in outcome.client}
    assert stats["POST pods"].failures == stats["POST pods"].count > 0
    assert {f.error for f in outcome.failures} <= {"CatchResponseError('HTTP 401 Unauthorized')",
                                                   "CatchResponseError('HTTP 403 Forbidden')"}
    assert any("requests failed" in n for n in outcome.notes)
    assert {r.scenario: r.achieved_per_s for r in outcome.rates} == {"pod_churn": 0.0, "informers": 0.0}
