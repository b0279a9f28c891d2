"""Which objects of a cluster the load tester itself made: its own namespaces (`loadtest-fleet`, `loadtest-churn`,
`loadtest-probe`) and everything in them, the cluster-scoped RBAC it grants its users (named `k8s-loadtest:`), and
the Events of its fleet's nodes (`kwok-node-`). They are no part of the cluster a profile stands for: a capture of
a cluster the harness made counts them apart (`harness`), a replay neither makes them again nor judges its own.

Decided by the harness's own names only, compared in memory and never written (docs/profile.md, `harness`). The
objects scenario's namespaces (`loadtest-objects-`) are not among them: in a replay they stand for the original's
namespaces."""

from __future__ import annotations

from typing import Any

from loadtests.capture.bootstrap import RBAC
from loadtests.kube.objects import HARNESS_RBAC_PREFIX, NAMESPACES, NODE_PREFIX

# the user agents of the harness's own parts (not its load's): its fleet, its health watch and sampler, its probes
HARNESS_USER_AGENTS = ("k8s-loadtest/fleet", "k8s-loadtest/health", "k8s-loadtest/probe", "k8s-loadtest/benchmark")
CLUSTER_RBAC = frozenset({(RBAC, "ClusterRole"), (RBAC, "ClusterRoleBinding")})


def made_by_harness(group: str, kind: str, obj: dict[str, Any]) -> bool:
    """Whether the load tester made this object of (group, kind), by the names it gives what it makes."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    if meta.get("namespace") in NAMESPACES or ((group, kind) == ("", "Namespace") and name in NAMESPACES):
        return True
    if (group, kind) in CLUSTER_RBAC:
        return name.startswith(HARNESS_RBAC_PREFIX)
    if (group, kind) == ("", "Event"):
        involved = obj.get("involvedObject") or {}
        return isinstance(involved, dict) and involved.get("kind") == "Node" and str(
            involved.get("name", "")).startswith(NODE_PREFIX)
    return False
