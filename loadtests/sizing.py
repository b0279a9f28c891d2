"""Will a plan fit this machine? An estimate from measured per-node costs, checked before anything starts.

The costs were measured here (benchmarks/results/node_ramp.md and the default plan's report in the README):
kubelet-cadence Lease renewals keep about 0.26 cores busy per 1,000 idle nodes (1.3 cores at 5,000), and
kube-apiserver's memory grew from 0.39 to 1.13 GB between 100 and 1,000 nodes with 3 pods each (about 0.8 MB
per node with its pods). A plan whose steady node load alone needs more cores than the machine has, or whose
memory would not fit, cannot measure anything but the machine: it is refused unless forced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from loadtests.plan import Plan

LEASE_CORES_PER_1000_NODES = 0.26  # heartbeat factor 1
APISERVER_BASE_BYTES = 0.3e9
APISERVER_BYTES_PER_NODE = 0.8e6  # with ~3 pods per node
BYTES_PER_EXTRA_POD = 0.1e6  # pods beyond 3 per node
OTHER_COMPONENTS_BYTES = 1.0e9  # etcd, scheduler, controller-manager, kwok, Locust at small scale
MEMORY_SHARE = 0.8  # of the machine's memory a plan may plan on


@dataclass(frozen=True)
class Estimate:
    nodes: int
    steady_cores: float  # Lease renewals of the largest step alone, before any load
    memory_bytes: float

    def problems(self, cores: int, memory_bytes: float) -> list[str]:
        found = []
        if self.steady_cores > cores:
            found.append(f"its {self.nodes:,} nodes alone need about {self.steady_cores:.1f} cores to keep their "
                         f"Leases fresh; this machine has {cores}")
        if self.memory_bytes > MEMORY_SHARE * memory_bytes:
            found.append(f"it needs about {self.memory_bytes / 1e9:.1f} GB of memory; this machine has "
                         f"{memory_bytes / 1e9:.1f} GB")
        return found


def estimate(plan: Plan) -> Estimate:
    """The largest step's steady needs, from the measured per-node costs above."""
    step = max(plan.steps, key=lambda s: (s.nodes, s.nodes * s.pods_per_node))
    factor = max(plan.target.heartbeat_factor, 0.1)
    cores = LEASE_CORES_PER_1000_NODES * step.nodes / 1000 / factor
    pods = step.nodes * step.pods_per_node
    memory = (OTHER_COMPONENTS_BYTES + APISERVER_BASE_BYTES + APISERVER_BYTES_PER_NODE * step.nodes
              + BYTES_PER_EXTRA_POD * max(0, pods - 3 * step.nodes))
    return Estimate(step.nodes, cores, memory)


def beyond_this_machine(plan: Plan) -> str | None:
    """Why the plan cannot run here (one line, with the estimate), or None."""
    if plan.target.kind != "local":
        return None  # the control plane runs elsewhere: only the harness's share runs here
    problems = estimate(plan).problems(os.cpu_count() or 1, psutil.virtual_memory().total)
    if not problems:
        return None
    return (f"plan {plan.name!r} is beyond this machine: {'; '.join(problems)} (estimated from measured "
            "per-node costs, loadtests/sizing.py); use a plan with fewer nodes, a larger heartbeat_factor, or "
            "--force to run it anyway")
