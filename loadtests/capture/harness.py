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
from loadtests.config.templates import RUN_LABEL, SCENARIO_LABEL, TEMPLATE_LABEL
from loadtests.kube.objects import HARNESS_RBAC_PREFIX, MANAGED_BY, NAMESPACES, NODE_PREFIX

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


def _harness_label(key: str, value: Any) -> bool:
    """One of the labels the harness puts on every object it makes (config/templates.py): its own keys, and the
    managed-by label with its own value (a Helm chart's managed-by is the cluster's)."""
    return key in (RUN_LABEL, SCENARIO_LABEL, TEMPLATE_LABEL) or MANAGED_BY.get(key) == value


def without_harness_labels(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as it would be served without the harness's labels and their managedFields entries (the object
    itself where it carries none): what a replay's object is beside the original's it stands for, whose labels
    are its own. A copy of what changes; the object is not touched."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not isinstance(labels, dict) or not any(_harness_label(k, v) for k, v in labels.items()):
        return obj
    ours = {f"f:{k}" for k, v in labels.items() if _harness_label(k, v)}
    kept = {k: v for k, v in labels.items() if not _harness_label(k, v)}
    meta = {**meta, "labels": kept} if kept else {k: v for k, v in meta.items() if k != "labels"}
    if isinstance(meta.get("managedFields"), list):
        meta["managedFields"] = [_unmanaged(entry, ours) for entry in meta["managedFields"]]
    return {**obj, "metadata": meta}


def _unmanaged(entry: Any, keys: set[str]) -> Any:
    """A managedFields entry without the label keys `keys` (f:labels left out when nothing else is in it, and
    f:metadata likewise)."""
    fields = entry.get("fieldsV1") if isinstance(entry, dict) else None
    meta = fields.get("f:metadata") if isinstance(fields, dict) else None
    labels = meta.get("f:labels") if isinstance(meta, dict) else None
    if not isinstance(labels, dict) or not keys & labels.keys():
        return entry
    rest = {k: v for k, v in labels.items() if k not in keys}
    meta = {k: v for k, v in meta.items() if k != "f:labels"} | ({"f:labels": rest} if set(rest) - {"."} else {})
    fields = {k: v for k, v in fields.items() if k != "f:metadata"} | ({"f:metadata": meta} if meta else {})
    return {**entry, "fieldsV1": fields}
