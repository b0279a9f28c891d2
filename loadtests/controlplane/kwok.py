"""The kwok controller as every target runs it: one configuration, one set of Stages, one set of flags.

A local control plane and an existing cluster must simulate nodes and pods the same way, or their results
could not be compared; so the configuration, the Stages from kwok-configs/stages, the flags that choose
which nodes kwok manages, and the manifests of a kwok run inside a cluster are built here once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from loadtests.config.versions import KWOK_VERSION
from loadtests.controlplane.processes import LOOPBACK, http_ok
from loadtests.kube.access import unverified_context
from loadtests.kube.kept import KeptConnection
from loadtests.kube.objects import kwok_configs_dir

NODE_LEASE_SECONDS = 40  # kubelet default; kwok renews at a quarter of it, like a kubelet
POD_CIDR = "10.0.0.1/16"  # addresses kwok writes into pod status; never contacted
# kwok manages only nodes with this annotation (set by kwok-configs/node-template.yaml), never anyone else's
MANAGE_ANNOTATION = "kwok.x-k8s.io/node=fake"


def scaled(seconds: float, heartbeat_factor: float) -> int:
    """Whole seconds of a heartbeat-related interval stretched by the plan's factor (at least 1)."""
    return max(1, round(seconds * heartbeat_factor))


def config_documents(heartbeat_factor: float) -> list[dict[str, Any]]:
    """kwok's configuration plus the Stages from kwok-configs/stages, heartbeat delays scaled by the factor."""
    docs: list[dict[str, Any]] = [{
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "nodeLeaseDurationSeconds": scaled(NODE_LEASE_SECONDS, heartbeat_factor),
            # kwok's own defaults (4) fall behind renewing thousands of leases every 10 s
            "nodeLeaseParallelism": 16,
            "nodePlayStageParallelism": 8,
            "podPlayStageParallelism": 8,
            "podsOnNodeSyncParallelism": 4,
        },
    }]
    for stage_file in sorted((kwok_configs_dir() / "stages").glob("*.yaml")):
        stage = yaml.safe_load(stage_file.read_text())
        delay = stage.get("spec", {}).get("delay")
        if delay and stage["metadata"]["name"].startswith("node-heartbeat"):
            for key in ("durationMilliseconds", "jitterDurationMilliseconds"):
                if key in delay:
                    delay[key] = int(delay[key] * heartbeat_factor)
        docs.append(stage)
    return docs


def config_text(heartbeat_factor: float) -> str:
    return yaml.safe_dump_all(config_documents(heartbeat_factor), sort_keys=False)


def write_config(path: Path, heartbeat_factor: float) -> Path:
    path.write_text(config_text(heartbeat_factor))
    return path


def common_flags(heartbeat_factor: float) -> list[str]:
    """Flags every kwok controller of the harness gets, wherever it runs."""
    return [
        "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={MANAGE_ANNOTATION}",
        f"--cidr={POD_CIDR}",
        f"--node-lease-duration-seconds={scaled(NODE_LEASE_SECONDS, heartbeat_factor)}",
    ]


def local_argv(binary: Path, kubeconfig: Path, config: Path, port: int, heartbeat_factor: float,
               tls: tuple[Path, Path] | None = None) -> list[str]:
    """argv of a kwok controller run as a process of ours: its server (health, kubelet API) on loopback only."""
    argv = [str(binary), f"--kubeconfig={kubeconfig}", f"--config={config}", *common_flags(heartbeat_factor),
            f"--node-ip={LOOPBACK}", f"--server-address={LOOPBACK}:{port}", f"--node-port={port}"]
    if tls is not None:
        argv += [f"--tls-cert-file={tls[0]}", f"--tls-private-key-file={tls[1]}"]
    return argv


def healthy(port: int, kept: tuple[KeptConnection, KeptConnection] | None = None) -> bool:
    """Whether a local kwok answers /healthz (over HTTPS when it was given a certificate, else HTTP); `kept`:
    the plain and the TLS connection a health watch keeps between its checks."""
    plain, tls = kept or (None, None)
    return (http_ok(f"http://{LOOPBACK}:{port}/healthz", kept=plain)
            or http_ok(f"https://{LOOPBACK}:{port}/healthz", None if tls else unverified_context(), kept=tls))


def in_cluster_manifests(heartbeat_factor: float) -> list[dict[str, Any]]:
    """kwok-configs/cluster/ with the kwok configuration, the shared flags and the pinned image tag filled in."""
    docs: list[dict[str, Any]] = []
    for path in sorted((kwok_configs_dir() / "cluster").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    config = config_text(heartbeat_factor)
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            doc["data"]["kwok.yaml"] = config
        elif doc["kind"] == "Deployment":
            template = doc["spec"]["template"]
            container = template["spec"]["containers"][0]
            container["image"] = f"{container['image']}:{KWOK_VERSION}"
            container["args"] = [*container["args"], *common_flags(heartbeat_factor)]
            # a changed configuration rolls the pod, since the mounted file alone would not restart kwok
            template["metadata"].setdefault("annotations", {})["k8s-loadtest/kwok-config-sha256"] = (
                hashlib.sha256(config.encode()).hexdigest())
    return docs
