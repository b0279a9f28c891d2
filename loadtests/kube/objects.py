"""The Kubernetes objects the harness creates, built from the templates in kwok-configs/.

Everything it creates carries the managed-by label and lives in its own namespaces (nodes aside), so churn
and clean-up never touch anything else.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
from pathlib import Path
from typing import Any

import yaml

from loadtests import PACKAGE_DIR

# Package data, so an installed wheel has it too; the top-level kwok-configs/ of a checkout links here.
KWOK_CONFIGS = PACKAGE_DIR / "kwok_configs"
MANAGED_BY = {"app.kubernetes.io/managed-by": "k8s-loadtest"}
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=k8s-loadtest"
NODE_SELECTOR = "type=kwok,app.kubernetes.io/managed-by=k8s-loadtest"
NODE_PREFIX = "kwok-node-"

NS_FLEET = "loadtest-fleet"  # the steady population of pods per step (a Deployment)
NS_CHURN = "loadtest-churn"  # pods and Deployments created and deleted by the load
NS_PROBE = "loadtest-probe"  # objects written by the watch-delay probe
NAMESPACES = (NS_FLEET, NS_CHURN, NS_PROBE)
# the names of the cluster-scoped RBAC the harness grants its own users (kube-proxy's binding, the load's and
# kwok's, a tenant's role and binding): a capture of a cluster takes them as the harness's, not the cluster's
HARNESS_RBAC_PREFIX = "k8s-loadtest:"
NS_OBJECTS_PREFIX = "loadtest-objects-"  # the objects scenario's namespaces, one per N nodes: -0, -1, ...

# Each fake node's pod addresses: a /24 by node index out of 10.128.0.0/9, clear of kwok's own default range
# (loadtests.controlplane.kwok, 10.0.0.0/16) and of the Service range (10.96.0.0/16); kwok allocates a pod's IP
# from its node's spec.podCIDR, so addresses are unique across the fleet and tell which node a pod is on.
NODE_POD_CIDRS = ipaddress.IPv4Network("10.128.0.0/9")
NODE_POD_PREFIX = 24
SERVICE_PORT = 80  # the port of the harness's Services (nothing listens: kwok pods run nothing)


def kwok_configs_dir() -> Path:
    """The kwok templates, Stages and in-cluster manifests shipped inside the package (loadtests/kwok_configs/)."""
    return KWOK_CONFIGS


@functools.cache
def _template(name: str) -> dict[str, Any]:
    return yaml.safe_load((kwok_configs_dir() / name).read_text())


def node_name(index: int) -> str:
    return f"{NODE_PREFIX}{index:05d}"


def node_pod_cidr(index: int) -> str:
    """The index-th node's pod range: the index-th /24 of NODE_POD_CIDRS (32,768 nodes at most)."""
    size = 2 ** (32 - NODE_POD_PREFIX)
    count = NODE_POD_CIDRS.num_addresses // size
    if not 0 <= index < count:
        raise ValueError(f"node index {index} is outside the {count} pod ranges of {NODE_POD_CIDRS}")
    return f"{NODE_POD_CIDRS.network_address + index * size}/{NODE_POD_PREFIX}"


SHAPE_LABEL_PREFIX = "k8s-loadtest/shape-label-"  # neutral labels that give a node a shape's label count
SHAPE_TAINT_VALUE = "replayed"  # the value of a shape's taints (a profile never holds taint values)


def node_manifest(name: str, index: int | None = None, *, capacity: dict[str, str] | None = None,
                  allocatable: dict[str, str] | None = None, taints: tuple[tuple[str, str], ...] = (),
                  labels: int = 0) -> dict[str, Any]:
    """A fake node; given its index in the fleet, with its own pod range (spec.podCIDR and podCIDRs), from
    which kwok gives its pods their IPs. A shape (config/fleet.py) sets its status figures over the template's,
    adds its taints (key, effect) after the fake nodes' own (one the fake nodes have already, as a replay of
    nodes of this harness has, is not added twice: the API refuses it), and neutral labels up to `labels` in all
    (a node keeps the labels kwok's selection and the harness need, so it never has fewer than those)."""
    node = copy.deepcopy(_template("node-template.yaml"))
    node["metadata"]["name"] = name
    # as a kubelet labels its node: topology rules (pod anti-affinity on hostname) need it
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    if index is not None:
        cidr = node_pod_cidr(index)
        node["spec"]["podCIDR"] = cidr
        node["spec"]["podCIDRs"] = [cidr]
    node["status"]["capacity"].update(capacity or {})
    node["status"]["allocatable"].update(allocatable or {})
    present = {(taint["key"], taint["effect"]) for taint in node["spec"]["taints"]}
    node["spec"]["taints"] += [{"key": key, "value": SHAPE_TAINT_VALUE, "effect": effect}
                               for key, effect in dict.fromkeys(taints) if (key, effect) not in present]
    own = node["metadata"]["labels"]
    if labels:  # the apiserver copies os and arch to their beta labels: counted among the node's
        own.update({f"beta.{key}": own[key] for key in ("kubernetes.io/os", "kubernetes.io/arch")})
    own.update({f"{SHAPE_LABEL_PREFIX}{i}": "" for i in range(max(0, labels - len(own)))})
    return node


def pod_manifest(name: str | None, namespace: str, labels: dict[str, str] | None = None,
                 generate_name: str | None = None) -> dict[str, Any]:
    pod = copy.deepcopy(_template("pod-template.yaml"))
    meta = pod["metadata"]
    if name:
        meta["name"] = name
    if generate_name:
        meta["generateName"] = generate_name
    meta["namespace"] = namespace
    meta["labels"] = {**meta.get("labels", {}), **(labels or {})}
    return pod


def deployment_manifest(name: str, namespace: str, replicas: int,
                        tolerations: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """A Deployment of the harness's pods; `tolerations` (key, effect) beside the fake nodes' own taint's."""
    pod = pod_manifest(None, namespace, labels={"app": name})
    pod["spec"]["tolerations"] += [{"key": key, "operator": "Exists", "effect": effect} for key, effect in tolerations]
    template = {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": "100%"}},
        },
    }


def namespace_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(MANAGED_BY)}}


def service_manifest(name: str, namespace: str) -> dict[str, Any]:
    """A ClusterIP Service selecting every harness pod of its namespace (all carry the managed-by label), so
    the controller-manager keeps its Endpoints and EndpointSlices current as those pods come and go."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "type": "ClusterIP",
            "selector": dict(MANAGED_BY),
            "ports": [{"name": "http", "protocol": "TCP", "port": SERVICE_PORT, "targetPort": SERVICE_PORT}],
        },
    }
