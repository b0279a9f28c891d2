"""The sizing check reads its per-node costs from what the benchmarks recorded, never from a typed constant."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.config import plan as plan_mod
from loadtests.config import sizing

COSTS = {
    sizing.LEASE_CORES: {"cores": 0.35},
    sizing.APISERVER_MEMORY: {"base_bytes": 0.3e9, "bytes_per_node": 0.8e6},
    sizing.OTHER_MEMORY: {"bytes": 1.0e9},
}


def _plan(nodes: int, pods_per_node: int = 3, heartbeat_factor: float = 1) -> plan_mod.Plan:
    return plan_mod.parse({"name": "p", "target": {"kind": "local", "heartbeat_factor": heartbeat_factor},
                           "steps": [{"nodes": nodes, "pods_per_node": pods_per_node}]}, source="p.yaml")


def test_the_estimate_follows_the_recorded_costs() -> None:
    found = sizing.estimate(_plan(5000), COSTS)
    assert found.steady_cores == pytest.approx(1.75)  # 0.35 cores per 1,000 nodes
    assert found.memory_bytes == pytest.approx(1.0e9 + 0.3e9 + 0.8e6 * 5000)
    assert found.problems(2, 24 * 2**30) == []
    gentler = sizing.estimate(_plan(10_000, heartbeat_factor=5), COSTS)
    assert gentler.steady_cores == pytest.approx(0.7)
    refused = sizing.estimate(_plan(7000), COSTS).problems(2, 24 * 2**30)
    assert refused == ["its 7,000 nodes alone need about 2.5 cores to keep their Leases fresh; this machine has 2"]
    # pods beyond the 3 a node of the measured run cost what the measured pods cost, each
    crowded = sizing.estimate(_plan(1000, pods_per_node=30), COSTS)
    assert crowded.memory_bytes == pytest.approx(1.3e9 + 0.8e9 + 0.8e6 / 3 * 27_000)


def test_a_cost_never_measured_is_left_out_and_named(tmp_path: Path) -> None:
    found = sizing.estimate(_plan(50_000), {})
    assert found.steady_cores is None and found.memory_bytes is None
    assert found.problems(2, 24 * 2**30) == []
    assert found.unmeasured == ["the Leases' CPU (run benchmarks/fleet_hold.py)",
                                "kube-apiserver's memory (run benchmarks/projection_check.py)"]
    record = tmp_path / "sizing.json"
    sizing.record(sizing.LEASE_CORES, {"cores": 0.4}, "bench --x", path=record)
    kept = sizing.measured_costs(record)
    assert kept[sizing.LEASE_CORES]["cores"] == 0.4 and kept[sizing.LEASE_CORES]["command"] == "bench --x"
    record.write_text("{not json")
    with pytest.raises(ValueError, match="not a readable sizing record"):
        sizing.measured_costs(record)


def test_the_shipped_record_says_what_measured_each_cost() -> None:
    costs = sizing.measured_costs()
    for section in (sizing.LEASE_CORES, sizing.APISERVER_MEMORY):
        assert section in costs, f"{section}: not recorded in {sizing.SIZING_FILE}"
        assert costs[section]["command"].startswith(".venv/bin/python benchmarks/")
        assert costs[section]["date"] and costs[section]["machine"]


def test_node_agents_add_their_measured_cost_per_node_with_agents() -> None:
    plan = plan_mod.parse({"name": "p", "target": {"kind": "local"}, "steps": [{"nodes": 3000}],
                           "load": {"scenarios": {"node_agents": {"max_nodes": 2000}}}}, source="p.yaml")
    costs = {**COSTS, sizing.NODE_AGENTS: {"cores_per_1000_nodes": 0.2, "bytes_per_node": 1.5e6}}
    found = sizing.estimate(plan, costs)
    assert found.steady_cores == pytest.approx(0.35 * 3 + 0.2 * 2)  # 2,000 nodes have agents (max_nodes)
    assert found.memory_bytes == pytest.approx(1.0e9 + 0.3e9 + 0.8e6 * 3000 + 1.5e6 * 2000)
    assert found.problems(1, 24 * 2**30) == [
        "its 3,000 nodes and their agents need about 1.5 cores to keep their Leases fresh; this machine has 1"]
    unknown = sizing.estimate(plan, COSTS)
    assert unknown.steady_cores == pytest.approx(1.05)
    assert unknown.unmeasured == ["the node agents' cost (run benchmarks/node_agents_cost.py)"]
