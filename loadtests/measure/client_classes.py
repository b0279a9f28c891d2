"""Who each class of the harness's clients is to the apiserver's flow control, measured rather than assumed from
the plan's identities: one SelfSubjectReview sent as each (a cheap POST that stores nothing, which every
authenticated user may send), whose answer says the user and groups the apiserver authenticated, and whose
headers X-Kubernetes-PF-FlowSchema-UID and X-Kubernetes-PF-PriorityLevel-UID say which FlowSchema and priority
level API Priority and Fairness chose. Exempt requests carry both headers too (schema and level "exempt" on a
1.37 apiserver); an apiserver with APF off sends neither. The UIDs are named from the cluster's flowschemas and
prioritylevelconfigurations, read with the admin access; a level is exempt where its type says Exempt.

The schema is the one that matched this request: a FlowSchema that matches by resource takes some of a class's
other requests (system-node-high takes a kubelet's nodes and leases, where its SelfSubjectReview is
system-nodes'). Only reads, so it works the same against a cluster someone else runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.controlplane.base import TargetInfo
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.objects import node_name
from loadtests.kube.rest import Answer, RestClient
from loadtests.results.flow_control import ClientClass

SELF_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
FLOW_SCHEMA_UID = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID = "X-Kubernetes-PF-PriorityLevel-UID"
USER_AGENT = "k8s-loadtest/probe-client-classes"
# a refused review still passed flow control, whose headers it carries: only the user and groups are unknown
REFUSED = (403, 404)


@dataclass(frozen=True)
class FlowNames:
    """The cluster's flow-control objects by UID, as the response headers name them."""

    flow_schemas: Mapping[str, str]  # uid -> FlowSchema name
    priority_levels: Mapping[str, str]  # uid -> PriorityLevelConfiguration name
    exempt_levels: frozenset[str]  # names of the levels whose type is Exempt
    note: str = ""  # why they are not known (the objects could not be read)


def flow_names(flow_schemas: Iterable[Mapping[str, Any]], priority_levels: Iterable[Mapping[str, Any]]) -> FlowNames:
    """Names by UID from the items of a flowschemas and a prioritylevelconfigurations list."""
    def by_uid(items: Iterable[Mapping[str, Any]]) -> dict[str, str]:
        return {str(meta["uid"]): str(meta.get("name", "")) for item in items
                if (meta := item.get("metadata") or {}).get("uid")}

    levels = list(priority_levels)
    exempt = frozenset(str((item.get("metadata") or {}).get("name", "")) for item in levels
                       if (item.get("spec") or {}).get("type") == "Exempt")
    return FlowNames(by_uid(flow_schemas), by_uid(levels), exempt)


def read_flow_names(client: RestClient) -> FlowNames:
    """The cluster's flow-control objects, or a note saying why they could not be read."""
    try:
        schemas, levels = client.list_items("flowschemas"), client.list_items("prioritylevelconfigurations")
    except ApiError as error:
        return FlowNames({}, {}, frozenset(), f"flow schemas and priority levels not read: {_said(error)}")
    return flow_names(schemas, levels)


def classify(client: str, answer: Answer, names: FlowNames) -> ClientClass:
    """A class as one answer of the apiserver says it is: its review's user and groups, and its flow-control
    headers named."""
    info = (answer.body.get("status") or {}).get("userInfo") or {}
    notes = [] if info else [f"the review was refused (HTTP {answer.status}): user and groups not known"]
    schema_uid, level_uid = answer.headers.get(FLOW_SCHEMA_UID, ""), answer.headers.get(PRIORITY_LEVEL_UID, "")
    if not schema_uid and not level_uid:
        notes.append("the apiserver named no flow schema: API Priority and Fairness is off")
    schema, level = names.flow_schemas.get(schema_uid, ""), names.priority_levels.get(level_uid, "")
    if names.note and (schema_uid or level_uid):
        notes.append(names.note)
    elif (schema_uid and not schema) or (level_uid and not level):
        notes.append(f"flow schema uid {schema_uid or '-'}, priority level uid {level_uid or '-'}: not among the "
                     "cluster's")
    return ClientClass(client=client, user=str(info.get("username", "")),
                       groups=[str(g) for g in info.get("groups") or []], flow_schema=schema,
                       priority_level=level, exempt=level in names.exempt_levels if level else None,
                       note="; ".join(notes))


def client_classes(accesses: Mapping[str, ClusterAccess], admin: ClusterAccess) -> list[ClientClass]:
    """Each named access as the apiserver sees it, in the order given; one that cannot be asked says why in its
    note (never raises for it)."""
    reader = RestClient(admin, pool_size=1, timeout_s=15.0, user_agent=USER_AGENT)
    try:
        names = read_flow_names(reader)
    finally:
        reader.close()
    return [_one(name, access, names) for name, access in accesses.items()]


def _one(name: str, access: ClusterAccess, names: FlowNames) -> ClientClass:
    try:
        client = RestClient(access, pool_size=1, timeout_s=15.0, user_agent=USER_AGENT)
    except (OSError, ValueError) as error:  # its certificate or key unreadable
        return ClientClass(client=name, note=f"not asked: {error}")
    try:
        answer = client.answer("POST", SELF_REVIEW, {"apiVersion": "authentication.k8s.io/v1",
                                                     "kind": "SelfSubjectReview"}, ok=REFUSED)
    except ApiError as error:
        return ClientClass(client=name, note=f"the review was not answered: {_said(error)}")
    finally:
        client.close()
    return classify(name, answer, names)


def run_clients(info: TargetInfo, node_agents: NodeIdentities | None = None,
                agents_asked: bool = False, replay: bool = False) -> dict[str, ClusterAccess]:
    """The classes a run's clients fall into, by what the target gives: the harness (probes, fleet, clean-up),
    the load, nodes that join, the load's node agents where it has them (`agents_asked`: each kubelet as its node
    and kube-proxy as its ServiceAccount, given `node_agents`; else the load's user), a replay's service-account
    and user classes (`replay`: each its own identity where the target issued one, else the load's), and the
    load's scenarios that send as a tenant of their own (one class a tenant)."""
    found = {"harness": info.access, "load": info.load_access or info.access,
             "nodes joining": info.node_access or info.access}
    if agents_asked:
        found["node agents: kubelet"] = node_agents.node_access(node_name(0)) if node_agents else found["load"]
        found["node agents: kube-proxy"] = node_agents.proxy_access() if node_agents else found["load"]
    if replay:
        found["replay: serviceaccount"] = (node_agents and node_agents.service_account_access()) or found["load"]
        found["replay: user"] = (node_agents and node_agents.user_access()) or found["load"]
    tenants: dict[ClusterAccess, list[str]] = {}
    for scenario, access in info.scenario_access.items():
        tenants.setdefault(access, []).append(scenario)
    for access, scenarios in tenants.items():
        found[f"load: {', '.join(sorted(scenarios))}"] = access
    return found


def _said(error: ApiError) -> str:
    return f"HTTP {error.status}: {error.reason}" if error.status else error.reason
