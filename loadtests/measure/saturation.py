"""Why a ramp did not converge: the evidence of a saturated step, taken when its budget runs out.

Counted from the API (nodes NotReady and the taints the node lifecycle controller added, how late the Leases
were renewed), and from the processes (each component's, the harness's own and the machine's CPU over the ramp),
so the line says which part ran out: "312 nodes NotReady; Leases renewed 47 s late (40 s lease); kwok 98 % of a
core; machine 196 % (2 cores)", and says so when the harness itself was at its one core's limit.
"""

from __future__ import annotations

import os
import time

import psutil

from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient
from loadtests.measure.cluster_objects import LeaseLists, name_of, node_figures, node_state
from loadtests.measure.processes import HARNESS, CpuMeter, harness_limit


def _state(pid: int) -> str:
    try:
        return psutil.Process(pid).status()
    except psutil.Error:
        return "gone"


class RampWitness:
    """Started with a step's ramp; `evidence()` when it did not converge."""

    def __init__(self, info: TargetInfo, client: RestClient) -> None:
        self.client = client
        self.pids = info.pids
        # the harness too: it creates the nodes and pods of the ramp, so it can be what ran out
        self.cpu = CpuMeter({**info.pids, HARNESS: [os.getpid()]})
        self.cpu.read()  # the baseline: the next reading covers the ramp

    def evidence(self) -> str:
        parts: list[str] = []
        try:
            nodes = {name_of(n): node_state(n) for n in self.client.list_items("nodes",
                                                                                label_selector=objects.NODE_SELECTOR)}
            refreshed = LeaseLists(self.client).refresh()
            figures = node_figures(nodes, refreshed[0] if refreshed else None, now=time.time())
            parts.append(f"{figures['nodes_not_ready']} of {figures['nodes']} nodes NotReady "
                         f"({figures['taint_unreachable']} tainted unreachable)")
            if figures.get("lease_lag_s") is not None:
                parts.append(f"oldest Lease renewed {figures['lease_lag_s']:.0f} s ago "
                             f"({figures['leases_expired']} past their duration)")
            parts.append(self._fleet_pods())
        except ApiError as error:
            parts.append(f"the API did not answer ({error.reason})")
        cpu = {key.removeprefix("cpu."): value for key, value in self.cpu.read().items() if value is not None}
        machine = cpu.pop("machine", None)
        cpu.pop("iowait", None)
        ranked = sorted(cpu.items(), key=lambda kv: -kv[1])
        if ranked:
            parts.append("CPU over the ramp, % of a core: " + ", ".join(
                f"{name} {value:.0f}{' (process stopped)' if self._stopped(name) else ''}" for name, value in ranked))
        if machine is not None:
            parts.append(f"machine {machine:.0f} % of {os.cpu_count()} cores")
        if limit := harness_limit(cpu.get(HARNESS), "the ramp"):
            parts.append(limit)
        return "; ".join(parts)

    def _fleet_pods(self) -> str:
        """Where the steady pods are stuck: not created (the controller-manager's ReplicaSet), created but
        not scheduled (the scheduler), scheduled but not Running (kwok), or Running."""
        pods = self.client.list_items("pods", objects.NS_FLEET)
        unscheduled = sum(not (p.get("spec") or {}).get("nodeName") for p in pods)
        running = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
        return (f"fleet pods: {len(pods)} created, {unscheduled} not scheduled, "
                f"{len(pods) - unscheduled - running} scheduled but not Running, {running} Running")

    def _stopped(self, component: str) -> bool:
        return any(_state(pid) == psutil.STATUS_STOPPED for pid in self.pids.get(component, ()))
