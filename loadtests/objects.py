"""The Kubernetes objects the harness creates, built from the templates in kwok-configs/.

Everything it creates carries the managed-by label and lives in its own namespaces (nodes aside), so churn
and clean-up never touch anything else.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

# Package data, so an installed wheel has it too; the top-level kwok-configs/ of a checkout links here.
KWOK_CONFIGS = Path(__file__).resolve().parent / "kwok_configs"
MANAGED_BY = {"app.kubernetes.io/managed-by": "k8s-loadtest"}
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=k8s-loadtest"
NODE_SELECTOR = "type=kwok,app.kubernetes.io/managed-by=k8s-loadtest"
NODE_PREFIX = "kwok-node-"

NS_FLEET = "loadtest-fleet"  # the steady population of pods per step (a Deployment)
NS_CHURN = "loadtest-churn"  # pods and Deployments created and deleted by the load
NS_PROBE = "loadtest-probe"  # objects written by the watch-delay probe
NAMESPACES = (NS_FLEET, NS_CHURN, NS_PROBE)


def kwok_configs_dir() -> Path:
    """The kwok templates, Stages and in-cluster manifests shipped inside the package (loadtests/kwok_configs/)."""
    return KWOK_CONFIGS


@functools.cache
def _template(name: str) -> dict[str, Any]:
    return yaml.safe_load((kwok_configs_dir() / name).read_text())


def node_name(index: int) -> str:
    return f"{NODE_PREFIX}{index:05d}"


def node_manifest(name: str) -> dict[str, Any]:
    node = copy.deepcopy(_template("node-template.yaml"))
    node["metadata"]["name"] = name
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


def deployment_manifest(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    pod = pod_manifest(None, namespace, labels={"app": name})
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
