"""Reading what hollow nodes' agents sent: recorded audit events and client-go log lines in, counts out."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks import hollow_audit as ha
from loadtests.controlplane.audit import POLICY

REFERENCE = Path(__file__).resolve().parents[2] / "loadtests" / "data" / "node_agents_reference.yaml"
T0 = 1_800_000_000.0


def at(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(T0 + seconds, datetime.UTC).isoformat().replace("+00:00", "Z")


def request_events(audit_id: str, second: float, *, user: str, agent: str, verb: str, resource: str,
                   uri: str, namespace: str = "", name: str = "", subresource: str = "", group: str = "",
                   ends: float | None = 0.01, code: int = 200, groups: tuple[str, ...] = ("system:nodes",),
                   ) -> list[dict[str, Any]]:
    base = {"auditID": audit_id, "requestReceivedTimestamp": at(second), "verb": verb, "requestURI": uri,
            "user": {"username": user, "groups": [*groups, "system:authenticated"]}, "userAgent": agent,
            "objectRef": {"resource": resource, "namespace": namespace, "name": name, "subresource": subresource,
                          "apiGroup": group}}
    events = []
    if verb == "watch":  # a watch refused by authorization has its ResponseStarted stage too
        events.append({**base, "stage": "ResponseStarted", "stageTimestamp": at(second)})
    if ends is not None:
        events.append({**base, "stage": "ResponseComplete", "stageTimestamp": at(second + ends),
                       "responseStatus": {"code": code}})
    return events


NODE0, NODE1 = "system:node:hollow-node-0", "system:node:hollow-node-1"
PROXY_USER = "system:serviceaccount:kube-system:kube-proxy"


def recorded() -> list[dict[str, Any]]:
    events = []
    # each kubelet renews its Lease every 10 s through the window [60, 180)
    for node, user in (("hollow-node-0", NODE0), ("hollow-node-1", NODE1)):
        for k in range(12):
            events += request_events(f"{node}-lease-{k}", 60 + 10 * k, user=user, agent="hollow-kubelet",
                                     verb="update", resource="leases", group="coordination.k8s.io",
                                     namespace="kube-node-lease", name=node,
                                     uri=f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")
    # node 0's pod watch: a streaming list at 0 s with timeoutSeconds=100, ended by the server at 100 s, renewed
    events += request_events("pods-0", 0, user=NODE0, agent="hollow-kubelet", verb="watch", resource="pods",
                             ends=100, uri="/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D"
                                           "hollow-node-0&resourceVersionMatch=NotOlderThan&sendInitialEvents=true"
                                           "&timeoutSeconds=100&watch=true")
    events += request_events("pods-0b", 100.2, user=NODE0, agent="hollow-kubelet", verb="watch", resource="pods",
                             ends=None, uri="/api/v1/pods?allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D"
                                            "hollow-node-0&resourceVersion=42&timeoutSeconds=500&watch=true")
    # node 1's per-object ConfigMap watch, held through the window
    events += request_events("cm-1", 30, user=NODE1, agent="hollow-kubelet", verb="watch", resource="configmaps",
                             namespace="w", name="hollow-config", ends=None,
                             uri="/api/v1/namespaces/w/configmaps?allowWatchBookmarks=true&fieldSelector=metadata."
                                 "name%3Dhollow-config&sendInitialEvents=true&timeoutSeconds=2000&watch=true")
    # the two proxies (one identity) each hold an EndpointSlice watch; one Service watch was refused
    for k in range(2):
        events += request_events(f"eps-{k}", 5, user=PROXY_USER, agent="hollow-proxy", verb="watch",
                                 resource="endpointslices", group="discovery.k8s.io", ends=None,
                                 groups=("system:serviceaccounts", "system:serviceaccounts:kube-system"),
                                 uri="/apis/discovery.k8s.io/v1/endpointslices?allowWatchBookmarks=true&labelSelector"
                                     "=%21service.kubernetes.io%2Fheadless&timeoutSeconds=400&watch=true")
    events += request_events("svc-x", 70, user=PROXY_USER, agent="hollow-proxy", verb="watch", resource="services",
                             code=403, groups=("system:serviceaccounts",), uri="/api/v1/services?watch=true")
    # node 0's Secret watch refused (the Node authorizer had not seen its pod yet): the reflector lists, then watches
    secret = "/api/v1/namespaces/w/secrets?fieldSelector=metadata.name%3Ds"
    events += request_events("sec-0", 20, user=NODE0, agent="hollow-kubelet", verb="watch", resource="secrets",
                             namespace="w", name="s", code=403,
                             uri=f"{secret}&sendInitialEvents=true&timeoutSeconds=2000&watch=true")
    events += request_events("sec-0-list", 20.01, user=NODE0, agent="hollow-kubelet", verb="list",
                             resource="secrets", namespace="w", name="s", uri=f"{secret}&limit=500&resourceVersion=0")
    # someone else's request is no agent's
    events += request_events("admin", 70, user="kubernetes-admin", agent="k8s-loadtest/benchmark", verb="list",
                             resource="nodes", uri="/api/v1/nodes", groups=("system:masters",))
    return events


@pytest.fixture
def requests() -> list[ha.Request]:
    return ha.requests_of(recorded())


def test_requests_are_audit_ids_with_their_start_end_and_code(requests: list[ha.Request]) -> None:
    by_id = {r.audit_id: r for r in requests}
    assert len(by_id) == 24 + 2 + 1 + 2 + 1 + 2 + 1
    watch = by_id["pods-0"]
    assert watch.key == ("WATCH", "pods", "", "cluster") and watch.started and watch.ended == pytest.approx(T0 + 100)
    assert by_id["hollow-node-0-lease-0"].key == ("PUT", "leases", "", "resource")
    assert by_id["cm-1"].key == ("WATCH", "configmaps", "", "namespace")  # one name: still its collection
    assert by_id["svc-x"].code == 403 and by_id["svc-x"].refused and not by_id["svc-x"].held_at(T0 + 70)
    assert by_id["admin"].agent is None and by_id["eps-0"].agent == ha.PROXY and by_id["eps-0"].node == ha.EVERY_NODE


def test_rates_per_node_and_the_proxies_share(requests: list[ha.Request]) -> None:
    rates = ha.per_node_rates(requests, T0 + 60, T0 + 180, ["hollow-node-0", "hollow-node-1"])
    lease = ("PUT", "leases", "", "resource")
    assert rates[(ha.KUBELET, lease)] == {"hollow-node-0": 6.0, "hollow-node-1": 6.0}
    assert rates[(ha.KUBELET, ("WATCH", "pods", "", "cluster"))] == {"hollow-node-0": 0.5}
    assert rates[(ha.PROXY, ("WATCH", "services", "", "cluster"))] == {ha.EVERY_NODE: 0.25}
    assert ha.codes(requests, T0 + 60, T0 + 180) == {(ha.PROXY, ("WATCH", "services", "", "cluster"), 403): 1}
    series = ha.per_minute(requests, T0 + 60, T0 + 180)
    assert series["kubelet hollow-node-0 PUT leases  resource"] == [6, 6]


def test_watches_held_renewals_due_and_shapes(requests: list[ha.Request]) -> None:
    shapes = ha.held_by_shape(requests, T0 + 180)
    pods = next(s for s in shapes if s.resource == "pods")
    assert pods.field_selector == "spec.nodeName=<node>" and pods.bookmarks == "true" and shapes[pods] == {
        "hollow-node-0": 1}
    cm = next(s for s in shapes if s.resource == "configmaps")
    assert cm.field_selector == "metadata.name=<name>" and shapes[cm] == {"hollow-node-1": 1}
    eps = next(s for s in shapes if s.resource == "endpointslices")
    assert eps.label_selector == "!service.kubernetes.io/headless" and shapes[eps] == {ha.EVERY_NODE: 2}
    opened = ha.opened_by_shape(requests)
    assert sum(n for s, n in opened.items() if s.resource == "pods" and s.initial_events == "true") == 1
    # held at 60 s: the pod watch (due at 100 s), the ConfigMap's (2,030 s) and the slices' (405 s)
    due = ha.renewals_due(requests, T0 + 60, T0 + 180)
    assert due == {(ha.KUBELET, "hollow-node-0", ("WATCH", "pods", "", "cluster")): 1}
    assert ha.timeouts(requests)["kubelet pods"] == (100, 500)
    assert not any(r.resource == "secrets" for r in ha.held(requests, T0 + 21))  # the refused one is not held


def test_a_list_after_a_refused_streaming_list_is_its_fallback(requests: list[ha.Request]) -> None:
    ((listed, refused),) = ha.fallbacks(requests)
    assert (listed.audit_id, refused.audit_id if refused else None) == ("sec-0-list", "sec-0")
    assert ha.codes(requests, T0, T0 + 60) == {(ha.KUBELET, ("WATCH", "secrets", "", "namespace"), 403): 1}


def test_identities_name_the_node_as_a_placeholder(requests: list[ha.Request]) -> None:
    found = ha.identities(requests)
    assert found[(ha.KUBELET, "system:node:<node>", ("system:nodes", "system:authenticated"), "hollow-kubelet")] == 29
    assert sum(n for (agent, user, _, _), n in found.items() if agent == ha.PROXY and user == PROXY_USER) == 3


def test_the_reference_rows_reproduce_its_own_table() -> None:
    reference = yaml.safe_load(REFERENCE.read_text())
    pods, configmaps, secrets = 3, 2, 1
    table = ha.reference_table(reference, pods, configmaps, secrets)
    real = ha.reference_rates(reference, ("kubelet", "kube-proxy"), pods, configmaps, secrets)
    assert set(real) == set(table)
    for key, value in table.items():
        assert real[key] == pytest.approx(value, abs=1e-3), key
    hollow = ha.reference_rates(reference, ("hollow-kubelet", "hollow-proxy"), pods, configmaps, secrets)
    assert hollow[("WATCH", "nodes", "", "cluster")] == pytest.approx(60 / 450)  # no Node watch in the hollow proxy
    assert hollow[("PUT", "leases", "", "resource")] == 6.0


LOG = """I1202 10:00:00.000001    7 round_trippers.go:527] "Request" verb="PUT" url="https://127.0.0.1:1/x" headers=<
\tAccept: application/vnd.kubernetes.protobuf, */*
\tContent-Type: application/vnd.kubernetes.protobuf
\tUser-Agent: hollow-kubelet
 >
I1202 10:00:00.000900    7 round_trippers.go:632] "Response" status="200 OK" headers=<
\tAudit-Id: hollow-node-0-lease-0
\tContent-Type: application/vnd.kubernetes.protobuf
\tDate: Wed, 02 Dec 2026 10:00:00 GMT
 > milliseconds=1
I1202 10:00:01.000000    7 some_other.go:1] "unrelated" key="value"
"""


def test_client_headers_and_the_responses_the_audit_log_names(requests: list[ha.Request]) -> None:
    headers = ha.client_headers(LOG)
    assert headers.requests == {("PUT", "application/vnd.kubernetes.protobuf, */*",
                                 "application/vnd.kubernetes.protobuf"): 1}
    assert headers.responses == {"hollow-node-0-lease-0": "application/vnd.kubernetes.protobuf"}
    assert ha.answered(requests, headers.responses) == {
        (ha.KUBELET, "PUT", "leases", "application/vnd.kubernetes.protobuf"): 1}


def test_the_metric_and_the_audit_log_count_alike(requests: list[ha.Request]) -> None:
    samples = [({"verb": "PUT", "resource": "leases", "subresource": "", "scope": "resource", "code": "200",
                 "component": "apiserver"}, 24.0),
               ({"verb": "WATCH", "resource": "pods", "subresource": "", "scope": "cluster", "code": "200"}, 1.0),
               ({"verb": "PUT", "resource": "leases", "subresource": "", "scope": "resource", "code": "409"}, 3.0)]
    metric = ha.metric_totals(samples)
    assert metric[("PUT", "leases", "", "resource")] == 24
    audit = ha.audit_totals(requests, T0, T0 + 1000)
    assert audit[("PUT", "leases", "", "resource")] == 24 and ("WATCH", "pods", "", "cluster") not in audit


def test_the_audit_policy_records_every_resource_request_watches_included() -> None:
    """The harness's policy: Metadata (user, groups, user agent, verb, objectRef, requestURI) for every resource
    request; only non-resource URLs (health, metrics, discovery) are left out."""
    policy = yaml.safe_load(POLICY)
    *dropped, last = policy["rules"]
    assert last == {"level": "Metadata"}
    assert all(set(rule) == {"level", "nonResourceURLs"} and rule["level"] == "None" for rule in dropped)
    assert "ResponseStarted" not in policy.get("omitStages", [])  # a watch is recorded when it is established


def _measured(failure: str = "") -> Any:
    from benchmarks.hollow_node import Measured

    measured = Measured(nodes=["hollow-node-0", "hollow-node-1"], pods_per_node=3, failure=failure)
    measured.timeline = {"control_plane_started": T0 - 40, "nodes_started": T0 - 5, "nodes_ready": T0 + 20,
                         "pods_running": T0 + 40, "window_opened": T0 + 60, "window_closed": T0 + 180,
                         "stopped": T0 + 190}
    measured.logs = {"hollow-node-0-kubelet": LOG, "hollow-node-0-proxy": "E1202 10:00:00.1 1 x.go:1] it broke\n"}
    measured.cpu = {"hollow-node-0-kubelet": {"cpu_percent": 3.5, "rss_mib": 60.0}}
    measured.argv = {"hollow-node-0-kubelet": ["kubemark", "--morph=kubelet"]}
    return measured


def test_the_results_file_has_every_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            requests: list[ha.Request]) -> None:
    from benchmarks import hollow_report

    kept: dict[str, Any] = {}
    monkeypatch.setattr(hollow_report, "keep_raw", lambda name, data: kept.setdefault(name, data))
    reference = yaml.safe_load(REFERENCE.read_text())
    out = tmp_path / "hollow_node.md"
    measured = _measured()
    measured.headers = hollow_report.headers_of(requests, measured.logs)
    measured.metric_before = [({"verb": "PUT", "resource": "leases", "subresource": "", "scope": "resource",
                                "code": "200"}, 10.0)]
    measured.metric_after = [({"verb": "PUT", "resource": "leases", "subresource": "", "scope": "resource",
                               "code": "200"}, 34.0)]
    measured.check = hollow_report.check_rows(requests, measured)
    assert measured.check == [["PUT", "leases", "", "resource", 24, 24]]
    hollow_report.write(out, "cmd", "v1.37.2", None, measured, requests, reference)
    text = out.read_text()
    for section in ("## Watches held at the window's end", "## Who they are", "## What they send and are answered",
                    "## Before the window", "## The audit log against apiserver_request_total",
                    "## What each process used", "Differences from the reference"):
        assert section in text, section
    lease = next(line for line in text.splitlines() if line.startswith("| PUT | leases |"))
    assert "| kubelet | 6 | 6 | **6** |" in lease, lease
    assert "`application/vnd.kubernetes.protobuf` × 1" in text
    assert "hollow_node/summary.json.gz" in kept
    assert "| kubelet | WATCH | secrets |  | 403 | 1 | 25.0 |" in text
    assert "LIST secrets `metadata.name=s` (resourceVersion=0) after its streaming list was refused (403" in text
    assert "logs" not in kept["hollow_node/summary.json.gz"]["measured"]


def test_a_run_that_could_not_hold_its_nodes_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import hollow_report

    monkeypatch.setattr(hollow_report, "keep_raw", lambda name, data: None)
    out = tmp_path / "hollow_node.md"
    measured = _measured("every hollow node Ready: hollow-node-0-proxy exited (code 1): it broke")
    hollow_report.write(out, "cmd", "v1.37.2", 300.0, measured, [], {})
    text = out.read_text()
    assert "could not be held here**: every hollow node Ready: hollow-node-0-proxy exited" in text
    assert "E1202 10:00:00.1 1 x.go:1] it broke" in text and "`kubemark --morph=kubelet`" in text
    assert "built in this run in 5.0 min" in text


def test_the_results_file_is_written_again_from_its_raw_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               requests: list[ha.Request]) -> None:
    from benchmarks import hollow_report
    from benchmarks.hollow_node import Measured
    from benchmarks.markdown import _plain

    kept: dict[str, Any] = {}
    monkeypatch.setattr(hollow_report, "keep_raw", lambda name, data: kept.__setitem__(name, data))
    reference = yaml.safe_load(REFERENCE.read_text())
    measured = _measured()
    measured.headers = hollow_report.headers_of(requests, measured.logs)
    first, again = tmp_path / "first.md", tmp_path / "again.md"
    hollow_report.write(first, "cmd", "v1.37.2", 51.0, measured, requests, reference)
    summary = json.loads(json.dumps(kept["hollow_node/summary.json.gz"], default=_plain))  # as keep_raw stores it
    hollow_report.write(again, summary["command"], summary["version"], summary["build_s"],
                        Measured(**summary["measured"]), requests, reference)
    assert again.read_text() == first.read_text()
