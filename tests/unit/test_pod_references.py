"""The ConfigMaps and Secrets a pod names, split as a kubelet watches them: kept while the pod exists (volumes,
imagePullSecrets) or only until idle (env, other volume plugins' secretRefs); from a pod's JSON form, a recorded
one, and the summary a protobuf watcher decodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadtests.kube.pod_references import referenced_objects
from loadtests.kube.watch_protobuf import decode_object

RECORDED = Path(__file__).resolve().parent / "data" / "kube-apiserver_v1.37.2_pod"
NS = "shop"


def web_pod() -> dict[str, Any]:
    """A Deployment's pod as the apiserver stores it: the ServiceAccount admission plugin added the kube-api-access
    projected volume (a token, the kube-root-ca.crt ConfigMap, the namespace); the pod mounts a ConfigMap and a
    Secret, pulls from a private registry and reads some settings into its environment."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9f8-x2b8q", "namespace": NS, "uid": "u-1", "resourceVersion": "812"},
        "spec": {
            "serviceAccountName": "web", "nodeName": "kwok-node-00003",
            "imagePullSecrets": [{"name": "registry-creds"}],
            "volumes": [
                {"name": "kube-api-access-wrqql", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace",
                                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ]}},
                {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
                {"name": "tls", "secret": {"secretName": "web-tls", "defaultMode": 420}},
                {"name": "cache", "emptyDir": {}},
            ],
            "initContainers": [{"name": "migrate", "image": "migrate:1",
                                "envFrom": [{"secretRef": {"name": "db-credentials"}}]}],
            "containers": [{
                "name": "web", "image": "web:1",
                "env": [{"name": "MODE", "value": "production"},
                        {"name": "LOG_LEVEL", "valueFrom": {"configMapKeyRef": {"name": "web-env", "key": "level"}}},
                        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "api-key", "key": "key",
                                                                           "optional": True}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        # named by a volume too: kept
                        {"name": "TLS_CERT", "valueFrom": {"secretKeyRef": {"name": "web-tls", "key": "tls.crt"}}}],
                "envFrom": [{"prefix": "FEATURE_", "configMapRef": {"name": "feature-flags"}}],
                "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
            }],
        },
    }


def test_volumes_and_pull_secrets_are_kept_and_env_only_names_transient() -> None:
    pod = web_pod()
    assert referenced_objects(pod, "configmaps") == (
        {(NS, "kube-root-ca.crt"), (NS, "web-config")}, {(NS, "web-env"), (NS, "feature-flags")})
    assert referenced_objects(pod, "secrets") == (
        {(NS, "registry-creds"), (NS, "web-tls")}, {(NS, "db-credentials"), (NS, "api-key")})


def test_the_recorded_pod_names_only_the_root_ca_configmap_its_service_account_admission_added() -> None:
    as_json = json.loads(Path(f"{RECORDED}.json").read_bytes())
    namespace = as_json["metadata"]["namespace"]
    assert referenced_objects(as_json, "configmaps") == ({(namespace, "kube-root-ca.crt")}, set())
    assert referenced_objects(as_json, "secrets") == (set(), set())
    summary = decode_object(Path(f"{RECORDED}.pb").read_bytes())  # what a protobuf watcher of pods holds
    assert [referenced_objects(summary, r) for r in ("configmaps", "secrets")] == [
        referenced_objects(as_json, r) for r in ("configmaps", "secrets")]


def test_ephemeral_containers_are_visited_and_empty_names_skipped() -> None:
    pod = web_pod()
    pod["spec"]["ephemeralContainers"] = [{"name": "debug", "env": [
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "debug-token", "key": "t"}}},
        {"name": "U", "valueFrom": {"secretKeyRef": {"name": "", "key": "u"}}}]}]
    pod["spec"]["imagePullSecrets"].append({})
    kept, transient = referenced_objects(pod, "secrets")
    assert (NS, "debug-token") in transient and (NS, "") not in kept | transient


@pytest.mark.parametrize(("source", "reference"), [
    ("csi", {"driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": {"name": "store-creds"}}),
    ("azureFile", {"secretName": "store-creds", "shareName": "share"}),
    ("cephfs", {"monitors": ["10.0.0.1"], "secretRef": {"name": "store-creds"}}),
    ("iscsi", {"targetPortal": "10.0.0.1", "iqn": "iqn", "lun": 0, "secretRef": {"name": "store-creds"}}),
])
def test_other_volume_plugins_secrets_are_watched_until_idle(source: str, reference: dict[str, Any]) -> None:
    """VisitPodSecretNames names them, so a watch starts; their plugins read them with a client of their own."""
    pod = web_pod()
    pod["spec"]["volumes"].append({"name": "store", source: reference})
    kept, transient = referenced_objects(pod, "secrets")
    assert (NS, "store-creds") in transient and (NS, "store-creds") not in kept


def test_only_configmaps_and_secrets_are_asked_of() -> None:
    assert referenced_objects({"metadata": {"namespace": NS}}, "configmaps") == (set(), set())
    with pytest.raises(ValueError, match="expected one of: configmaps, secrets"):
        referenced_objects(web_pod(), "serviceaccounts")
