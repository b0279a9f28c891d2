"""A plan is validated before anything starts; a bad one is refused with the field's path and the reason."""

from __future__ import annotations

import math

import pytest
import yaml

from loadtests.config import plan as plan_mod
from loadtests.config.scenarios import SCENARIOS
from loadtests.errors import PlanError
from loadtests.results import DIGEST_NEUTRAL, plan_digest

GOOD = {
    "name": "t",
    "steps": [{"nodes": 10, "pods_per_node": 1, "duration_s": 5}],
    "load": {"scenarios": {"pod_churn": {"rate": 2}}},
}


def test_defaults_are_filled_in() -> None:
    plan = plan_mod.parse(GOOD, "t.yaml")
    assert plan.target.kind == "local" and plan.target.heartbeat_factor == 1.0
    assert plan.slo["mutating_p99_s"] == 1.0 and plan.slo["read_namespace_p99_s"] == 30.0
    assert plan.slo["pod_startup_p99_s"] == 5.0
    assert plan.load["pod_churn"]["rate"] == 2 and plan.load["pod_churn"]["lifetime_s"] == 10.0
    assert plan.steps[0].name == "10 nodes" and plan.gate is True


def test_kubelet_watchers_ask_in_json_unless_the_plan_says_protobuf() -> None:
    default = plan_mod.parse({**GOOD, "load": {"scenarios": {"kubelet_watchers": {}}}}, "t.yaml")
    assert default.load["kubelet_watchers"]["encoding"] == "json"
    protobuf = {"scenarios": {"kubelet_watchers": {"encoding": "protobuf"}}}
    assert plan_mod.parse({**GOOD, "load": protobuf}, "t.yaml").load["kubelet_watchers"]["encoding"] == "protobuf"


def test_a_parameter_added_at_what_runs_did_before_leaves_their_digest_as_it_was() -> None:
    """A run recorded before kubelet_watchers had `encoding` compares with one after (same digest), but not
    with one that asks for protobuf; every such parameter's neutral value is its declared default."""
    for scenario, params in DIGEST_NEUTRAL.items():
        assert {k: SCENARIOS[scenario].defaults[k] for k in params} == params, scenario
    now = plan_mod.parse({**GOOD, "load": {"scenarios": {"kubelet_watchers": {}}}}, "t.yaml").to_dict()
    before = {**now, "load": {"kubelet_watchers": {"per_node": 1.0, "max_watchers": 2000}}}
    assert plan_digest(now) == plan_digest(before)
    protobuf = {**now, "load": {"kubelet_watchers": {**now["load"]["kubelet_watchers"], "encoding": "protobuf"}}}
    assert plan_digest(protobuf) != plan_digest(now)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"steps": []}, "t.yaml: steps: must be a non-empty list"),
        ({"steps": [{"nodes": "many"}]}, "t.yaml: steps[0].nodes: must be an integer >= 1 (got 'many')"),
        ({"steps": [{"nodes": 5}, {"pods_per_node": 3}]}, "t.yaml: steps[1].nodes: is required"),
        ({"steps": [{"nodes": 5, "pods_per_node": 200}]}, "steps[0].pods_per_node: must be <= 110"),
        ({"steps": [{"nodes": 5, "nodez": 3}]}, "t.yaml: steps[0].nodez: unknown field"),
        ({"load": {"scenarios": {"pod_chrun": {}}}}, "load.scenarios.pod_chrun: unknown scenario"),
        ({"load": {"scenarios": {"pod_churn": {"rate": -1}}}}, "load.scenarios.pod_churn.rate: must be a number >= 0"),
        ({"load": {"scenarios": {"list_pollers": {"resource": "widgets"}}}}, "list_pollers.resource: must be one of"),
        ({"load": {"scenarios": {"kubelet_watchers": {"encoding": "proto"}}}},
         "t.yaml: load.scenarios.kubelet_watchers.encoding: must be one of: json, protobuf"),
        ({"target": {"kube_version": "1.37"}}, "target.kube_version: Kubernetes version '1.37' is not of the form"),
        ({"target": {"kind": "remote"}}, "target.kind: must be 'local' or 'cluster'"),
        ({"target": {"kind": "cluster"}}, "target.kubeconfig: required when target.kind is 'cluster'"),
        ({"slo": {"mutating_p99": 1}}, "t.yaml: slo.mutating_p99: unknown field"),
        ({"gate": "yes"}, "t.yaml: gate: must be true or false"),
        ({"compare": {"latency": 10}}, "t.yaml: compare.latency: unknown field"),
        ({"compare": {"latency_pct": "ten"}}, "t.yaml: compare.latency_pct: must be a number >= 0"),
        ({"project_to": ["many"]}, "t.yaml: project_to[0]: must be a whole number of nodes (got 'many')"),
        ({"project_to": [2]}, "t.yaml: project_to[0]: 2 nodes is not beyond the measured range"),
        ({"audit": {"enabled": "yes"}}, "t.yaml: audit.enabled: must be true or false"),
        ({"audit": {"path": "/tmp"}}, "t.yaml: audit.path: unknown field"),
        ({"target": {"identities": "kubelet"}}, "t.yaml: target.identities: must be one of: admin, production"),
        ({"load": {"scenarios": {"node_agents": {"encoding": "yaml"}}}},
         "t.yaml: load.scenarios.node_agents.encoding: must be one of: json, protobuf"),
        ({"load": {"scenarios": {"kubelet_watchers": {"encoding": "cbor"}}}},
         "t.yaml: load.scenarios.kubelet_watchers.encoding: must be one of: json, protobuf"),
        ({"target": {"kind": "cluster", "kubeconfig": "k", "identities": "admin"}},
         "t.yaml: target.identities: only a local control plane's components can be configured by a plan"),
        ({"target": {"kind": "cluster", "kubeconfig": "k", "etcd_storage": "memory"}},
         "t.yaml: target.etcd_storage: only a local control plane's"),
        # YAML reads .inf and .nan as floats: each number is finite and within range, wherever it is
        ({"steps": [{"nodes": 5, "duration_s": math.inf}]},
         "t.yaml: steps[0].duration_s: must be a finite number from 1 to 1e+09 (got inf)"),
        ({"steps": [{"nodes": 5, "warmup_s": math.nan}]}, "steps[0].warmup_s: must be a finite number"),
        ({"steps": [{"nodes": 5, "warmup_s": -math.inf}]}, "steps[0].warmup_s: must be a finite number"),
        ({"steps": [{"nodes": 10**10}]}, "steps[0].nodes: must be an integer from 1 to 1e+09"),
        ({"load": {"scenarios": {"pod_churn": {"rate": math.inf}}}}, "pod_churn.rate: must be a finite number"),
        ({"target": {"heartbeat_factor": math.nan}}, "target.heartbeat_factor: must be a finite number"),
        ({"slo": {"read_resource_p99_s": math.inf}}, "slo.read_resource_p99_s: must be a finite number"),
        ({"compare": {"latency_pct": math.nan}}, "compare.latency_pct: must be a finite number"),
        ({"capacity": {"growth": math.inf}}, "capacity.growth: must be a finite number"),
        ({"project_to": [math.inf]}, "project_to[0]: must be a whole number of nodes (got inf)"),
        ({"project_to": [math.nan]}, "project_to[0]: must be a whole number of nodes (got nan)"),
    ],
)
def test_bad_plans_name_the_field(change: dict, message: str) -> None:
    with pytest.raises(PlanError) as error:
        plan_mod.parse({**GOOD, **change}, "t.yaml")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_yaml_syntax_error_names_the_line(tmp_path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nsteps:\n  - nodes: [1\n")
    with pytest.raises(PlanError, match=r"broken.yaml: line \d+: not valid YAML"):
        plan_mod.load(path)


def test_missing_plan_lists_the_bundled_ones() -> None:
    with pytest.raises(PlanError, match="bundled plans: .*smoke"):
        plan_mod.load("no-such-plan")


@pytest.mark.parametrize("path", sorted(plan_mod.PLANS_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_bundled_plans_are_valid(path) -> None:
    plan = plan_mod.load(path)
    assert plan.steps and yaml.safe_dump(plan.to_dict())
    nodes = [s.nodes for s in plan.steps]
    assert nodes == sorted(nodes), "steps grow"


def test_another_kube_version_is_checked_and_leaves_the_plan_alone() -> None:
    plan = plan_mod.parse(GOOD, "t.yaml")
    other = plan.on_kube_version("v1.36.3")
    assert other.target.kube_version == "v1.36.3" and plan.target.kube_version != "v1.36.3"
    with pytest.raises(PlanError, match="t.yaml: target.kube_version: .*not of the form"):
        plan.on_kube_version("latest")
