"""A local control plane's tenants (config/tenants.py): their client certificates and kubeconfigs, the RBAC that
grants each what it may do, and the flow-control objects of those with a FlowSchema of their own.

Everything is made once the apiservers answer and before kwok and the steps start, so the first window
already sees it; nothing is removed one by one, since it all goes with the cluster (its folder holds the
certificates, its etcd the objects). A FlowSchema counts as made only once the apiserver's flow-control
controller has taken it up: it writes the schema's `Dangling` condition (False: its priority level exists).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtests.config.tenants import FlowSchemaSpec, Tenant
from loadtests.controlplane.pki import Authority, CertPair, write_kubeconfig
from loadtests.errors import TargetError
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.objects import HARNESS_RBAC_PREFIX, MANAGED_BY
from loadtests.polling import poll_until

RBAC = "/apis/rbac.authorization.k8s.io/v1"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
TAKEN_UP_S = 30.0  # the flow-control controller digests a new FlowSchema within a second or two
PLURALS = {"ClusterRole": f"{RBAC}/clusterroles", "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
           "PriorityLevelConfiguration": f"{FLOWCONTROL}/prioritylevelconfigurations",
           "FlowSchema": f"{FLOWCONTROL}/flowschemas"}


def role_name(user: str) -> str:
    return f"{HARNESS_RBAC_PREFIX}tenant:{user}"


def cert_stem(user: str) -> str:
    """The tenant's files in the cluster's pki folder (and its kubeconfig beside the cluster's)."""
    return f"tenant-{user}"


def _metadata(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(MANAGED_BY)}


def rbac_manifests(user: str, tenant: Tenant) -> list[dict[str, Any]]:
    """A ClusterRole of the tenant's rules and its binding to the user: what the tenant may do, and no more."""
    name = role_name(user)
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _metadata(name),
         "rules": [dict(rule) for rule in tenant.rules]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _metadata(name),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]


def flow_manifests(user: str, spec: FlowSchemaSpec) -> list[dict[str, Any]]:
    """The tenant's own priority level (Limited: `shares` of the seats, what it lends and borrows, its queues or
    rejection) and the FlowSchema that sends every request of the user there, one flow per user; both named
    after the user, so the flow-control metrics' priority_level and flow_schema labels say whose it is."""
    if spec.queues:
        response: dict[str, Any] = {"type": "Queue", "queuing": {
            "queues": spec.queues, "handSize": spec.hand_size, "queueLengthLimit": spec.queue_length}}
    else:
        response = {"type": "Reject"}
    limited: dict[str, Any] = {"nominalConcurrencyShares": spec.shares, "lendablePercent": spec.lendable_percent,
                               "limitResponse": response}
    if spec.borrowing_limit_percent is not None:
        limited["borrowingLimitPercent"] = spec.borrowing_limit_percent
    return [
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
         "metadata": _metadata(user), "spec": {"type": "Limited", "limited": limited}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": _metadata(user),
         "spec": {"priorityLevelConfiguration": {"name": user}, "matchingPrecedence": spec.precedence,
                  "distinguisherMethod": {"type": "ByUser"},
                  "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                             "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                "clusterScope": True, "namespaces": ["*"]}],
                             "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}},
    ]


def manifests(tenants: dict[str, Tenant]) -> list[dict[str, Any]]:
    """Every object the tenants need, in the order they are made (a FlowSchema after its priority level)."""
    found = []
    for user, tenant in tenants.items():
        found += rbac_manifests(user, tenant)
        if tenant.flow_schema is not None:
            found += flow_manifests(user, tenant.flow_schema)
    return found


def issue_certificates(pki_dir: Path, tenants: dict[str, Tenant]) -> dict[str, CertPair]:
    """A client certificate per tenant, signed by the cluster's CA: CN the user, O its groups (mode 0600)."""
    if not tenants:
        return {}
    authority = Authority.load(pki_dir)
    return {user: authority.issue(cert_stem(user), user, organization=tuple(tenant.groups))
            for user, tenant in tenants.items()}


def kubeconfig_path(cluster_dir: Path, user: str) -> Path:
    return cluster_dir / f"{cert_stem(user)}.kubeconfig"


def tenant_access(cluster_dir: Path, server: str, user: str) -> ClusterAccess:
    """The tenant's access: its certificate and key in the cluster's pki folder, and a kubeconfig of them."""
    pki = cluster_dir / "pki"
    return ClusterAccess(server=server, kubeconfig=str(kubeconfig_path(cluster_dir, user)),
                         ca_file=str(pki / "ca.crt"), cert_file=str(pki / f"{cert_stem(user)}.crt"),
                         key_file=str(pki / f"{cert_stem(user)}.key"))


def scenario_access(cluster_dir: Path, server: str, tenants: dict[str, Tenant]) -> dict[str, ClusterAccess]:
    """Scenario name -> the access of the tenant it sends as (the load's other scenarios keep the load's)."""
    return {scenario: tenant_access(cluster_dir, server, user)
            for user, tenant in tenants.items() for scenario in tenant.scenarios}


def set_up(admin: ClusterAccess, cluster_dir: Path, tenants: dict[str, Tenant],
           log: Callable[[str], None] = print) -> None:
    """Certificates, kubeconfigs (mode 0600, beside the cluster's) and objects of every tenant, made as the
    admin; returns once every tenant's FlowSchema is in effect. A refusal is one line naming the object."""
    from loadtests.kube.rest import RestClient

    if not tenants:
        return
    pairs = issue_certificates(cluster_dir / "pki", tenants)
    for user, pair in pairs.items():
        write_kubeconfig(kubeconfig_path(cluster_dir, user), admin.server, cluster_dir / "pki" / "ca.crt", pair,
                         user)
    client = RestClient(admin, timeout_s=30.0)
    try:
        make_objects(client, tenants, log)
    finally:
        client.close()


def make_objects(client: Any, tenants: dict[str, Tenant], log: Callable[[str], None] = print) -> None:
    """Create the tenants' objects through `client` (a RestClient) and wait for their FlowSchemas."""
    made = manifests(tenants)
    for manifest in made:
        try:
            client.create(PLURALS[manifest["kind"]], manifest, exist_ok=True)
        except ApiError as error:
            raise TargetError(f"tenants: the apiserver refused {manifest['kind']} {manifest['metadata']['name']}: "
                              f"{error}; fix target.tenants in the plan") from None
    schemas = [m["metadata"]["name"] for m in made if m["kind"] == "FlowSchema"]
    if schemas:
        log(f"tenants: {', '.join(tenants)}; own flow schemas: {', '.join(schemas)}")
    else:
        log(f"tenants: {', '.join(tenants)}")
    for name in schemas:
        if not poll_until(lambda n=name: taken_up(client.get(f"{FLOWCONTROL}/flowschemas/{n}")), TAKEN_UP_S,
                          interval_s=0.2):
            raise TargetError(f"tenants: kube-apiserver did not take up FlowSchema {name} within {TAKEN_UP_S:g} s "
                              "(its status never said it is not dangling); is API Priority and Fairness off?")


def taken_up(flow_schema: dict[str, Any]) -> bool:
    """Whether the flow-control controller has digested this FlowSchema: it writes Dangling (False when the
    priority level it names exists)."""
    conditions = (flow_schema.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Dangling" and c.get("status") == "False" for c in conditions)
