"""Which objects the control plane made at bootstrap: the objects a cluster holds once whatever its size (the
apiserver's default RBAC, flow-control configuration, built-in APIServices, `system-` PriorityClasses, the
`kubernetes` Service and its ServiceCIDR and IPAddress...), so a replay at × k expects them once and not k times.

Decided by public Kubernetes markers only: labels and annotations the control plane sets on what it makes, names
Kubernetes reserves, and (in the system namespaces) the field managers its components write as, or none. The
defaults the controller-manager makes with every namespace (kube-root-ca.crt, the default ServiceAccount) are
counted apart (namespace_default), but for the system namespaces' own, made once. A marker's value or an object's
name is compared here, in memory, and never written; the profile holds only how many of a kind's objects matched
(docs/profile.md, `control_plane`, `namespace_defaults`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadtests.capture.clients import CONTROL_PLANE_PRODUCTS

RBAC = "rbac.authorization.k8s.io"
FLOWCONTROL = "flowcontrol.apiserver.k8s.io"
# the namespaces the apiserver makes as it starts (its system namespaces controller) and refuses to delete
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
# what the controller-manager makes in every namespace as it appears, by name: the root CA's ConfigMap (its
# root-ca-cert-publisher) and the default ServiceAccount (its serviceaccount controller)
NAMESPACE_DEFAULTS = {("", "ConfigMap"): "kube-root-ca.crt", ("", "ServiceAccount"): "default"}
# the field managers of the control plane's own components: their user agents' products
CONTROL_PLANE_MANAGERS = CONTROL_PLANE_PRODUCTS
# the `kubernetes` Service of the `default` namespace, the apiserver's own
APISERVER_SERVICE = {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}


def _label(key: str, value: str | None = None) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """A label the control plane sets on what it makes (with this value, if given)."""
    def marked(meta: dict[str, Any], _obj: dict[str, Any]) -> bool:
        labels = meta.get("labels") or {}
        return key in labels and (value is None or labels[key] == value)
    return marked


def _annotation(key: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    def marked(meta: dict[str, Any], _obj: dict[str, Any]) -> bool:
        return key in (meta.get("annotations") or {})
    return marked


def _apiserver_service(meta: dict[str, Any], _obj: dict[str, Any]) -> bool:
    labels = meta.get("labels") or {}
    return (meta.get("namespace"), meta.get("name")) == ("default", "kubernetes") and (
        labels.get("provider"), labels.get("component")) == ("kubernetes", "apiserver")


def _apiserver_service_ip(_meta: dict[str, Any], obj: dict[str, Any]) -> bool:
    parent = (obj.get("spec") or {}).get("parentRef") or {}
    return isinstance(parent, dict) and all(parent.get(k, "") == v for k, v in APISERVER_SERVICE.items())


def _system_default(meta: dict[str, Any], _obj: dict[str, Any]) -> bool:
    """A namespace's default of a system namespace: made with it at bootstrap, once whatever the cluster's size."""
    return meta.get("namespace") in SYSTEM_NAMESPACES and meta.get("name") in NAMESPACE_DEFAULTS.values()


def _control_planes_own(meta: dict[str, Any], obj: dict[str, Any]) -> bool:
    """A system namespace's object no one but the control plane's components wrote: every manager its
    managedFields name is one of theirs (the apiserver's extension-apiserver-authentication ConfigMap), or it
    names none, as no client's write through the API leaves it (kube-controller-manager's controllers'
    ServiceAccounts in kube-system); the system namespaces' defaults besides. Once whatever the cluster's size,
    and no object a replay makes."""
    if _system_default(meta, obj):
        return True
    managers = {str(entry.get("manager", "")) for entry in meta.get("managedFields") or () if isinstance(entry, dict)}
    return meta.get("namespace") in SYSTEM_NAMESPACES and managers <= CONTROL_PLANE_MANAGERS


_RBAC_DEFAULTS = _label("kubernetes.io/bootstrapping", "rbac-defaults")
_APF_BOOTSTRAP = _annotation("apf.kubernetes.io/autoupdate-spec")
# (group, kind) -> whether one object of it was made by the control plane at bootstrap
MARKERS: dict[tuple[str, str], Callable[[dict[str, Any], dict[str, Any]], bool]] = {
    # the apiserver's default roles and bindings (its rbac/bootstrap-roles post-start hook)
    (RBAC, "ClusterRole"): _RBAC_DEFAULTS,
    (RBAC, "ClusterRoleBinding"): _RBAC_DEFAULTS,
    (RBAC, "Role"): _RBAC_DEFAULTS,
    (RBAC, "RoleBinding"): _RBAC_DEFAULTS,
    # API Priority and Fairness's mandatory and suggested configuration, whatever its auto-update says
    (FLOWCONTROL, "FlowSchema"): _APF_BOOTSTRAP,
    (FLOWCONTROL, "PriorityLevelConfiguration"): _APF_BOOTSTRAP,
    # the built-in groups' APIServices ("onstart"; a custom resource's group is "true": it follows its CRD)
    ("apiregistration.k8s.io", "APIService"): _label("kube-aggregator.kubernetes.io/automanaged", "onstart"),
    # system-cluster-critical and system-node-critical: the apiserver refuses any other name of the prefix
    ("scheduling.k8s.io", "PriorityClass"): lambda meta, _obj: str(meta.get("name", "")).startswith("system-"),
    ("", "Namespace"): lambda meta, _obj: meta.get("name") in SYSTEM_NAMESPACES,
    ("", "Service"): _apiserver_service,
    # the system namespaces' kube-root-ca.crt and default ServiceAccount (every other namespace's: namespace_default),
    # and those the control plane's components wrote there (kube-controller-manager's controllers' ServiceAccounts)
    ("", "ConfigMap"): _control_planes_own,
    ("", "ServiceAccount"): _control_planes_own,
    # the default ServiceCIDR (the apiserver's service cluster IP range) and the IPAddress of the `kubernetes` Service
    ("networking.k8s.io", "ServiceCIDR"): lambda meta, _obj: meta.get("name") == "kubernetes",
    ("networking.k8s.io", "IPAddress"): _apiserver_service_ip,
    # the apiserver's serving CA, published by the controller-manager
    ("certificates.k8s.io", "ClusterTrustBundle"):
        lambda _meta, obj: (obj.get("spec") or {}).get("signerName") == "kubernetes.io/kube-apiserver-serving",
    # the apiserver's view of its components (kube-scheduler, kube-controller-manager, etcd), computed as read
    ("", "ComponentStatus"): lambda _meta, _obj: True,
    # each apiserver's identity Lease: one per apiserver, whatever the cluster's size
    ("coordination.k8s.io", "Lease"): _label("apiserver.kubernetes.io/identity", "kube-apiserver"),
}


def made_at_bootstrap(group: str, kind: str, obj: dict[str, Any]) -> bool:
    """Whether the control plane made this object of (group, kind) at bootstrap, by the kind's public marker; a
    kind without one: never."""
    marker = MARKERS.get((group, kind))
    return marker is not None and marker(obj.get("metadata") or {}, obj)


def namespace_default(group: str, kind: str, obj: dict[str, Any]) -> bool:
    """Whether the controller-manager made this object as a default of its namespace (NAMESPACE_DEFAULTS), one
    of a namespace other than the system ones: those come and go with the cluster's users' namespaces, × k with
    them in a replay, and a replay's control plane makes them with its own; a system namespace's is
    made_at_bootstrap's."""
    meta = obj.get("metadata") or {}
    return (NAMESPACE_DEFAULTS.get((group, kind)) == meta.get("name")
            and meta.get("namespace") not in SYSTEM_NAMESPACES)
