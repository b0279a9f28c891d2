"""Who the harness's clients are to flow control (measure/client_classes.py): the response headers' UIDs named from
the cluster's flow-control objects, and the classes a run's target gives."""

from __future__ import annotations

from loadtests.controlplane.base import TargetInfo
from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.rest import Answer
from loadtests.measure.client_classes import (
    FLOW_SCHEMA_UID,
    PRIORITY_LEVEL_UID,
    FlowNames,
    classify,
    flow_names,
    run_clients,
)
from loadtests.results.flow_control import ClientClass

# items as a 1.37 apiserver lists them (only the fields read), UIDs as it made them
SCHEMAS = [{"metadata": {"name": name, "uid": uid}, "spec": {"priorityLevelConfiguration": {"name": level}}}
           for name, uid, level in (("exempt", "b73a0d47", "exempt"), ("global-default", "79eb5b02", "global-default"),
                                    ("system-nodes", "378c8a59", "system"))]
LEVELS = [{"metadata": {"name": "exempt", "uid": "c8256ccf"}, "spec": {"type": "Exempt"}},
          {"metadata": {"name": "global-default", "uid": "b6d63138"}, "spec": {"type": "Limited"}},
          {"metadata": {"name": "system", "uid": "61ad5d46"}, "spec": {"type": "Limited"}},
          {"metadata": {"name": "no-uid"}, "spec": {"type": "Limited"}}]


def review(user: str, groups: list[str], schema_uid: str, level_uid: str, status: int = 201) -> Answer:
    body = {"kind": "SelfSubjectReview", "status": {"userInfo": {"username": user, "groups": groups}}}
    return Answer(status, body if status == 201 else {}, {FLOW_SCHEMA_UID: schema_uid, PRIORITY_LEVEL_UID: level_uid})


def test_uids_are_named_and_a_level_is_exempt_by_its_type() -> None:
    names = flow_names(SCHEMAS, LEVELS)
    assert names.flow_schemas == {"b73a0d47": "exempt", "79eb5b02": "global-default", "378c8a59": "system-nodes"}
    assert names.priority_levels == {"c8256ccf": "exempt", "b6d63138": "global-default", "61ad5d46": "system"}
    assert names.exempt_levels == {"exempt"}
    admin = classify("harness", review("kubernetes-admin", ["system:masters", "system:authenticated"], "b73a0d47",
                                       "c8256ccf"), names)
    assert admin == ClientClass("harness", user="kubernetes-admin", groups=["system:masters", "system:authenticated"],
                                flow_schema="exempt", priority_level="exempt", exempt=True)
    node = classify("nodes joining", review("system:node:n1", ["system:nodes", "system:authenticated"], "378c8a59",
                                            "61ad5d46"), names)
    assert (node.flow_schema, node.priority_level, node.exempt, node.note) == ("system-nodes", "system", False, "")


def test_what_cannot_be_named_says_why() -> None:
    names = flow_names(SCHEMAS, LEVELS)
    refused = classify("load", review("", [], "79eb5b02", "b6d63138", status=403), names)
    assert (refused.user, refused.flow_schema, refused.priority_level) == ("", "global-default", "global-default")
    assert "refused (HTTP 403)" in refused.note
    stranger = classify("load", review("u", [], "0000", "b6d63138"), names)
    assert stranger.flow_schema == "" and stranger.priority_level == "global-default"
    assert "flow schema uid 0000" in stranger.note
    off = classify("load", Answer(201, review("u", [], "", "").body, {}), names)
    assert (off.flow_schema, off.exempt) == ("", None) and "API Priority and Fairness is off" in off.note
    unread = FlowNames({}, {}, frozenset(), "flow schemas and priority levels not read: HTTP 403: forbidden")
    blind = classify("load", review("u", [], "79eb5b02", "b6d63138"), unread)
    assert (blind.flow_schema, blind.exempt) == ("", None) and blind.note == unread.note


def test_a_run_asks_as_each_access_its_target_gives_one_class_a_tenant() -> None:
    def access(name: str) -> ClusterAccess:
        return ClusterAccess(server="https://127.0.0.1:6443", kubeconfig=f"/k/{name}")

    admin = TargetInfo(access=access("admin"), etcd_metrics_url=None)
    assert run_clients(admin) == {"harness": access("admin"), "load": access("admin"),
                                  "nodes joining": access("admin")}
    production = TargetInfo(access=access("admin"), etcd_metrics_url=None, load_access=access("load"),
                            node_access=access("kwok"), scenario_access={
                                "list_pollers": access("noisy"), "informers": access("noisy"),
                                "creates": access("quiet")})
    assert run_clients(production) == {
        "harness": access("admin"), "load": access("load"), "nodes joining": access("kwok"),
        "load: informers, list_pollers": access("noisy"), "load: creates": access("quiet")}
    # a replay's service-account and user classes as the identities the target issued them, else as the load
    issued = NodeIdentities(server="https://127.0.0.1:6443", ca_file="/p/ca.crt", kubeconfig="/k/load",
                            folder="/p/nodes", key_file="/p/nodes/node.key", proxy_cert_file="/p/proxy.crt",
                            proxy_key_file="/p/proxy.key", service_account_cert_file="/p/sa.crt",
                            service_account_key_file="/p/sa.key", user_cert_file="/p/user.crt",
                            user_key_file="/p/user.key")
    replayed = run_clients(production, issued, agents_asked=True, replay=True)
    assert replayed["replay: user"].cert_file == "/p/user.crt"
    assert replayed["replay: serviceaccount"].cert_file == "/p/sa.crt"
    assert run_clients(production, None, replay=True)["replay: user"] == access("load")
