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
    # the resource in the path, where the table's key is not it: two groups serving the same name (core's events
    # and events.k8s.io's) are told apart by `<resource>.<group>`, as kubectl names them
    plural: str = ""

    @property
    def api_version(self) -> str:
        return "v1" if self.prefix == "/api/v1" else self.prefix.removeprefix("/apis/")


RESOURCES: dict[str, ApiResource] = {
    "pods": ApiResource("/api/v1", "Pod"),
    "nodes": ApiResource("/api/v1", "Node", namespaced=False),
    "namespaces": ApiResource("/api/v1", "Namespace", namespaced=False),
    "configmaps": ApiResource("/api/v1", "ConfigMap"),
    "secrets": ApiResource("/api/v1", "Secret"),
    "services": ApiResource("/api/v1", "Service"),
    "endpoints": ApiResource("/api/v1", "Endpoints"),
    "events": ApiResource("/api/v1", "Event"),
    "serviceaccounts": ApiResource("/api/v1", "ServiceAccount"),  # and its token subresource (a TokenRequest)
    "endpointslices": ApiResource("/apis/discovery.k8s.io/v1", "EndpointSlice"),
    "leases": ApiResource("/apis/coordination.k8s.io/v1", "Lease"),
    "events.events.k8s.io": ApiResource("/apis/events.k8s.io/v1", "Event", plural="events"),
    "runtimeclasses": ApiResource("/apis/node.k8s.io/v1", "RuntimeClass", namespaced=False),
    "csidrivers": ApiResource("/apis/storage.k8s.io/v1", "CSIDriver", namespaced=False),
    "csinodes": ApiResource("/apis/storage.k8s.io/v1", "CSINode", namespaced=False),
    # GA in v1.37, served by default (its feature gate on, and certificates.k8s.io/v1 a stable version)
    "podcertificaterequests": ApiResource("/apis/certificates.k8s.io/v1", "PodCertificateRequest"),
    "servicecidrs": ApiResource("/apis/networking.k8s.io/v1", "ServiceCIDR", namespaced=False),
    "resourceslices": ApiResource("/apis/resource.k8s.io/v1", "ResourceSlice", namespaced=False),
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
_BY_GROUP = {(r.plural or name, r.api_version.rpartition("/")[0]): name for name, r in RESOURCES.items()}


def resource_key(resource: str, group: str = "") -> str:
    """The table's key of a resource of an API group ("": the core group), as audit logs and
    loadtests/data/node_agents_reference.yaml name it: ("events", "events.k8s.io") is "events.events.k8s.io"."""
    try:
        return _BY_GROUP[(resource, group)]
    except KeyError:
        raise ValueError(f"no API path known for resource {resource!r} of group {group!r}") from None


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
    path += f"/{api.plural or resource}"
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
