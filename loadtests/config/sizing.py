"""Will a plan fit this machine? An estimate from measured per-node costs, checked before anything starts.

The per-node costs are not typed in here: the benchmarks that measure them record them in
loadtests/data/sizing.json (`record`), each with the command, date and machine that measured it:
benchmarks/fleet_hold.py the control plane's CPU for an idle fleet with kubelet-cadence Leases (cores per 1,000
nodes), benchmarks/projection_check.py kube-apiserver's memory per node under the default load (3 pods per
node), benchmarks/node_agents_cost.py what each node's agents add where a plan gives nodes agents. A plan whose
steady node load alone needs more cores than the machine has, or whose memory would not
fit, cannot measure anything but the machine: it is refused unless forced. A cost never measured is not
guessed: the estimate then leaves it out and says so.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from loadtests import PACKAGE_DIR
from loadtests.config.plan import Plan
from loadtests.config.scenarios import node_agent_count
from loadtests.errors import read_text, unreadable

SIZING_FILE = PACKAGE_DIR / "data" / "sizing.json"
LEASE_CORES = "lease_cores_per_1000_nodes"  # fleet_hold: every component's CPU over an idle hold, per 1,000 nodes
APISERVER_MEMORY = "apiserver_memory"  # projection_check: RSS = base_bytes + bytes_per_node · nodes (3 pods a node)
OTHER_MEMORY = "other_components_bytes"  # projection_check: etcd, scheduler, controller-manager, kwok, Locust
# node_agents_cost: what a node's agents (the node_agents scenario) add, per node, over the old single pod watch:
# the apiserver's and the load generator's CPU (cores per 1,000 nodes) and memory (bytes per node)
NODE_AGENTS = "node_agents_per_node"
# client_cost: the apiserver's and the load's CPU per create and per LIST of 500 pods (ms), what the replayed
# traffic (the requests scenario) costs per request/s: a LIST row at the LIST's, any other at the create's
REQUEST_CPU = "request_cpu_ms"
PODS_PER_NODE_MEASURED = 3  # the pods per node of the run the memory slope came from
MEMORY_SHARE = 0.8  # of the machine's memory a plan may plan on


_SIZING_FIX = "rerun benchmarks/fleet_hold.py and benchmarks/projection_check.py, or restore the file"


def measured_costs(path: Path = SIZING_FILE) -> dict[str, Any]:
    """The recorded per-node costs (an empty mapping when none was ever recorded)."""
    try:
        text = read_text(path, "sizing record", _SIZING_FIX)
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise unreadable(path, "sizing record", error, _SIZING_FIX) from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise unreadable(path, "sizing record", error, _SIZING_FIX) from None


def record(section: str, value: dict[str, Any], command: str, path: Path = SIZING_FILE) -> None:
    """Write one measured cost into the record, with what measured it (benchmarks call this)."""
    costs = measured_costs(path)
    costs[section] = {**value, "command": command, "date": time.strftime("%Y-%m-%d"),
                      "machine": f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
                                 f"{platform.platform()}"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(costs, indent=1, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Estimate:
    nodes: int
    steady_cores: float | None  # Lease renewals of the largest step alone, before any load (None: not measured)
    memory_bytes: float | None
    unmeasured: list[str] = field(default_factory=list)
    agents: bool = False  # the nodes have agents (node_agents): their cost is in the figures
    requests_per_s: float = 0.0  # replayed requests (the requests scenario): their cost is in the figures

    def problems(self, cores: int, memory_bytes: float) -> list[str]:
        found = []
        if self.steady_cores is not None and self.steady_cores > cores:
            what = "and their agents need" if self.agents else "alone need"
            if self.requests_per_s:
                what = f"and its replayed {self.requests_per_s:,.0f} requests/s need"
            found.append(f"its {self.nodes:,} nodes {what} about {self.steady_cores:.1f} cores to keep their "
                         f"Leases fresh; this machine has {cores}")
        if self.memory_bytes is not None and self.memory_bytes > MEMORY_SHARE * memory_bytes:
            found.append(f"it needs about {self.memory_bytes / 2**30:.1f} GiB of memory; this machine has "
                         f"{memory_bytes / 2**30:.1f} GiB")
        return found


def estimate(plan: Plan, costs: dict[str, Any] | None = None) -> Estimate:
    """The largest step's steady needs, from the recorded per-node costs."""
    costs = measured_costs() if costs is None else costs
    step = max(plan.steps, key=lambda s: (s.nodes, s.nodes * s.pods_per_node))
    unmeasured = []
    cores = None
    if LEASE_CORES in costs:
        factor = max(plan.target.heartbeat_factor, 0.1)
        cores = float(costs[LEASE_CORES]["cores"]) * step.nodes / 1000 / factor
    else:
        unmeasured.append("the Leases' CPU (run benchmarks/fleet_hold.py)")
    memory = None
    if APISERVER_MEMORY in costs:
        found = costs[APISERVER_MEMORY]
        per_node = float(found["bytes_per_node"])
        # pods beyond the measured 3 a node cost what a measured node's pods cost, per pod
        per_pod = per_node / PODS_PER_NODE_MEASURED
        pods = step.nodes * step.pods_per_node
        memory = (float(costs.get(OTHER_MEMORY, {}).get("bytes", 0.0)) + float(found["base_bytes"])
                  + per_node * step.nodes + per_pod * max(0, pods - PODS_PER_NODE_MEASURED * step.nodes))
    else:
        unmeasured.append("kube-apiserver's memory (run benchmarks/projection_check.py)")
    agents = plan.load.get("node_agents")
    if agents is not None:
        cores, memory = _with_node_agents(costs, node_agent_count(agents, step.nodes), cores, memory, unmeasured)
    replayed = plan.load.get("requests")
    cores, per_s = _with_requests(costs, (replayed or {}).get("rows") or [], cores, unmeasured)
    return Estimate(step.nodes, cores, memory, unmeasured, agents=agents is not None, requests_per_s=per_s)


def _with_requests(costs: dict[str, Any], rows: list[dict[str, Any]], cores: float | None,
                   unmeasured: list[str]) -> tuple[float | None, float]:
    """The estimate with what the replayed rows cost per request/s (the apiserver's and the load's CPU)."""
    per_s = sum(float(row["rate"]) for row in rows)
    if not rows:
        return cores, per_s
    if REQUEST_CPU not in costs:
        unmeasured.append("the replayed requests' CPU (run benchmarks/client_cost.py)")
        return cores, per_s
    found = costs[REQUEST_CPU]
    ms = sum(float(row["rate"]) * float(found["list_ms" if row["verb"] == "list" else "create_ms"]) for row in rows)
    return (None if cores is None else cores + ms / 1000.0), per_s


def _with_node_agents(costs: dict[str, Any], nodes: int, cores: float | None, memory: float | None,
                      unmeasured: list[str]) -> tuple[float | None, float | None]:
    """The estimate with what `nodes` nodes' agents add (their apiserver and load-generator CPU and memory)."""
    if NODE_AGENTS not in costs:
        unmeasured.append("the node agents' cost (run benchmarks/node_agents_cost.py)")
        return cores, memory
    found = costs[NODE_AGENTS]
    added_cores = float(found["cores_per_1000_nodes"]) * nodes / 1000
    added_bytes = float(found["bytes_per_node"]) * nodes
    return (None if cores is None else cores + added_cores), (None if memory is None else memory + added_bytes)


def beyond_this_machine(plan: Plan) -> str | None:
    """Why the plan cannot run here (one line, with the estimate), or None."""
    if plan.target.kind != "local":
        return None  # the control plane runs elsewhere: only the harness's share runs here
    problems = estimate(plan).problems(os.cpu_count() or 1, psutil.virtual_memory().total)
    if not problems:
        return None
    return (f"plan {plan.name!r} is beyond this machine: {'; '.join(problems)} (estimated from the per-node costs "
            f"measured in {SIZING_FILE.name}: loadtests/config/sizing.py); use a plan with fewer nodes, a larger "
            "heartbeat_factor, or --force to run it anyway")
