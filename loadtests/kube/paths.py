"""The one table of REST paths: which API group/version serves a resource, and whether it is namespaced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode


@dataclass(frozen=True)
class ApiResource:
    prefix: str  # /api/v1 or /apis/<group>/<version>
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return "v1" if self.prefix == "/api/v1" else self.prefix.removeprefix("/apis/")


RESOURCES: dict[str, ApiResource] = {
    "pods": ApiResource("/api/v1", "Pod"),
    "nodes": ApiResource("/api/v1", "Node", namespaced=False),
    "namespaces": ApiResource("/api/v1", "Namespace", namespaced=False),
    "configmaps": ApiResource("/api/v1", "ConfigMap"),
    "services": ApiResource("/api/v1", "Service"),
    "endpoints": ApiResource("/api/v1", "Endpoints"),
    "events": ApiResource("/api/v1", "Event"),
    "serviceaccounts": ApiResource("/api/v1", "ServiceAccount"),
    "endpointslices": ApiResource("/apis/discovery.k8s.io/v1", "EndpointSlice"),
    "leases": ApiResource("/apis/coordination.k8s.io/v1", "Lease"),
    "deployments": ApiResource("/apis/apps/v1", "Deployment"),
    "replicasets": ApiResource("/apis/apps/v1", "ReplicaSet"),
    "statefulsets": ApiResource("/apis/apps/v1", "StatefulSet"),
    "daemonsets": ApiResource("/apis/apps/v1", "DaemonSet"),
    "jobs": ApiResource("/apis/batch/v1", "Job"),
    "priorityclasses": ApiResource("/apis/scheduling.k8s.io/v1", "PriorityClass", namespaced=False),
    "clusterroles": ApiResource("/apis/rbac.authorization.k8s.io/v1", "ClusterRole", namespaced=False),
    "clusterrolebindings": ApiResource("/apis/rbac.authorization.k8s.io/v1", "ClusterRoleBinding",
                                       namespaced=False),
    "selfsubjectaccessreviews": ApiResource("/apis/authorization.k8s.io/v1", "SelfSubjectAccessReview",
                                            namespaced=False),
    "flowschemas": ApiResource("/apis/flowcontrol.apiserver.k8s.io/v1", "FlowSchema", namespaced=False),
    "prioritylevelconfigurations": ApiResource("/apis/flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration",
                                               namespaced=False),
}
_BY_KIND = {(r.api_version, r.kind): name for name, r in RESOURCES.items()}


def resource_path(resource: str, namespace: str = "", name: str = "", subresource: str = "",
                  query: dict[str, Any] | None = None) -> str:
    """The REST path of a resource, a namespaced collection, an object or one of its subresources."""
    try:
        api = RESOURCES[resource]
    except KeyError:
        raise ValueError(f"no API path known for resource {resource!r}") from None
    path = api.prefix
    if namespace and api.namespaced:
        path += f"/namespaces/{namespace}"
    path += f"/{resource}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    if query:
        path += "?" + urlencode(query)
    return path


def resource_of(obj: dict[str, Any]) -> str:
    """The resource name of a manifest, from its apiVersion and kind."""
    try:
        return _BY_KIND[(obj["apiVersion"], obj["kind"])]
    except KeyError:
        raise ValueError(f"no API path known for {obj.get('apiVersion')} {obj.get('kind')}") from None


def object_path(obj: dict[str, Any]) -> str:
    """The REST path of the object a manifest describes."""
    meta = obj["metadata"]
    return resource_path(resource_of(obj), meta.get("namespace", ""), meta["name"])
