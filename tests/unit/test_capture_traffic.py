"""A cluster's traffic for its profile, from audit log files (plain and gzipped, read as a stream) and from two
/metrics scrapes: exact counts, rates and watches held for a hand-built log, nothing of the cluster's names or
values in the profile, and one line for a file that is no audit log."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from loadtests.analysis.metrics import Snapshot
from loadtests.capture.audit_events import read_events
from loadtests.capture.audit_tally import AuditTally
from loadtests.capture.clients import hashed
from loadtests.capture.request_shapes import field_keys
from loadtests.capture.sketch import EXACT, Quantiles, Sketch
from loadtests.capture.traffic import NO_START, audit_verb, traffic_from_audit, traffic_from_metrics
from loadtests.capture.traffic_types import StartUp, TrafficProfile
from loadtests.errors import LoadTestError, UnreadableFile

DATA = Path(__file__).parent / "data"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "profile.md"
T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
SALT = b"test-salt"
KUBELET = "kubelet/v1.37.2 (linux/amd64) kubernetes/abcdef0"
KUBECTL = "kubectl/v1.37.2 (linux/amd64) kubernetes/abcdef0"
OPERATOR = "acme-operator/1.4.0"
SCHEDULER = "kube-scheduler/v1.37.2 (linux/amd64) kubernetes/abcdef0/scheduler"
NODE_A, NODE_B = "system:node:planted-node-alpha", "system:node:planted-node-beta"
SA = "system:serviceaccount:planted-ns-secret:planted-sa-operator"
USER = "planted-user@example.com"
NS = "planted-ns-secret"


def _stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds").replace("+00:00", "Z")


def event(at: float, verb: str, resource: str, *, received: float | None = None, stage: str = "ResponseComplete",
          user: str = USER, groups: tuple[str, ...] = ("system:authenticated",), agent: str = KUBECTL,
          audit_id: str = "", code: int = 200, namespace: str = "", name: str = "", subresource: str = "",
          group: str = "", query: str = "") -> str:
    """One audit.k8s.io/v1 event line at Metadata level, `at` seconds after T0 (received then too unless said)."""
    ref = {key: value for key, value in (("resource", resource), ("namespace", namespace), ("name", name),
                                         ("subresource", subresource), ("apiGroup", group)) if value}
    path = f"/api/v1/{'namespaces/' + namespace + '/' if namespace else ''}{resource}" if resource else "/apis"
    body = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": audit_id or f"id-{at}-{verb}-{resource}", "stage": stage,
            "requestURI": path + (f"?{query}" if query else ""), "verb": verb,
            "user": {"username": user, "groups": list(groups)}, "sourceIPs": ["10.1.2.3"], "userAgent": agent,
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": _stamp(at if received is None else received), "stageTimestamp": _stamp(at)}
    if ref:
        body["objectRef"] = ref
    return json.dumps(body) + "\n"


NODES = ("system:nodes", "system:authenticated")
WATCH_A = dict(user=NODE_A, groups=NODES, agent=KUBELET, query="fieldSelector=spec.nodeName%3Dplanted-node-alpha")


def hand_built_log() -> tuple[list[str], list[str]]:
    """Two files' lines of one apiserver's log over 120 s: three kubelet watches (one opened before the log
    began), an operator's LISTs, a user's requests (one refused, one exec, one aggregated, one discovery), the
    scheduler's binding."""
    first = [
        event(0, "watch", "pods", received=-100, audit_id="w1", **WATCH_A),  # opened before the log began
        event(1, "watch", "pods", stage="ResponseStarted", audit_id="w2", **WATCH_A),
        event(2, "watch", "pods", stage="ResponseStarted", audit_id="w3", user=NODE_B, groups=NODES,
              agent=KUBELET, query="fieldSelector=spec.nodeName%3Dplanted-node-beta&resourceVersion=12345"),
        event(9.98, "list", "pods", stage="RequestReceived", user=SA, agent=OPERATOR, namespace=NS),
        event(10, "list", "pods", received=9.98, user=SA, agent=OPERATOR, namespace=NS,
              query="labelSelector=app%3Dplanted-label-value&limit=500"),
        event(20, "list", "pods", received=19.9, user=SA, agent=OPERATOR, query="resourceVersion=0"),
        event(30, "watch", "pods", received=1, audit_id="w2", **WATCH_A),
    ]
    second = [
        event(40, "create", "configmaps", received=39.95, namespace=NS, name="planted-object-name", code=201),
        event(50, "create", "pods", received=49.9, namespace=NS, name="planted-pod", subresource="exec", code=101),
        event(60, "get", "pods", received=59.99, group="metrics.k8s.io", namespace=NS, name="planted-pod"),
        event(70, "watch", "secrets", received=69.9, namespace=NS, code=403),  # refused: never streamed
        event(80, "create", "pods", received=79.99, user="system:kube-scheduler", agent=SCHEDULER, namespace=NS,
              name="planted-pod", subresource="binding", code=201),
        event(90, "get", "", received=89.999),  # discovery: no resource
        event(120, "get", "nodes", stage="RequestReceived", name="planted-node-alpha"),
    ]
    return first, second


def write_log(folder: Path) -> list[Path]:
    first, second = hand_built_log()
    plain, zipped = folder / "audit-1.log", folder / "audit.log.gz"  # the gzip told by its bytes, not its name
    plain.write_text("".join(first))
    zipped.write_bytes(gzip.compress("".join(second).encode()))
    return [plain, zipped]


@pytest.fixture
def profile(tmp_path: Path) -> dict:
    return traffic_from_audit(write_log(tmp_path), SALT).to_dict()


def test_requests_are_counted_once_at_the_stage_that_ends_them(profile: dict) -> None:
    assert profile["window"] == {"start": "2026-11-30T12:00:00.000Z", "end": "2026-11-30T12:02:00.000Z",
                                 "seconds": 120.0}
    # two watch opens, two LISTs, a create, an exec, an aggregated get, a refused watch, a binding, discovery
    assert profile["requests"] == 10 and profile["per_second"] == round(10 / 120, 6)
    rates = {(r["verb"], r["resource"], r["subresource"], r["client_class"], r["product"], r["code"]): r
             for r in profile["rates"]}
    assert rates[("watch", "pods", "", "node", "kubelet", 200)]["count"] == 2
    assert rates[("watch", "pods", "", "node", "kubelet", 200)]["per_second"] == round(2 / 120, 6)
    assert rates[("list", "pods", "", "serviceaccount", "acme-operator", 200)]["count"] == 1  # namespace scope
    assert rates[("watch", "secrets", "", "user", "kubectl", 403)]["count"] == 1
    assert rates[("create", "pods", "binding", "controller", "kube-scheduler", 201)]["scope"] == "resource"
    assert rates[("get", "", "", "user", "kubectl", 200)]["path"] == "/apis"
    assert sum(r["count"] for r in profile["rates"]) == 10
    assert profile["client_classes"] == ["controller", "node", "serviceaccount", "user"]
    assert [(m["minute"], m["total"], m["verbs"]) for m in profile["per_minute"]] == [
        (0, 6, {"create": 2, "list": 2, "watch": 2}), (1, 4, {"create": 1, "get": 2, "watch": 1})]


def test_watches_held_at_once_and_how_long_they_lived(profile: dict) -> None:
    (kubelet,) = [w for w in profile["watches"] if w["resource"] == "pods"]
    assert kubelet["client_class"] == "node" and kubelet["product"] == "kubelet"
    # w1 open before the log and ended at 0; w2 from 1 to 30; w3 from 2 past the end: two at once, at most
    assert kubelet["max_open"] == 2 and kubelet["open_at_start"] == 1 and kubelet["open_at_end"] == 1
    assert kubelet["opened"] == 2
    assert kubelet["mean_open"] == round((0 + 29 + 118) / 120, 3)
    assert kubelet["lifetime_s"] == {"count": 2, "p50": 29.0, "p90": 100.0, "p99": 100.0, "max": 100.0,
                                     "p99_is_max": True}
    assert [w["resource"] for w in profile["watches"]] == ["pods"]  # the refused watch was never open


def test_list_shapes_latencies_and_what_cannot_be_replayed(profile: dict) -> None:
    shapes = {(s["verb"], s["client_class"], s["resource"]): s for s in profile["request_shapes"]}
    lists = shapes[("list", "serviceaccount", "pods")]
    assert lists["count"] == 2 and lists["resource_version"] == {"unset": 0.5, "0": 0.5, "other": 0.0}
    assert lists["with_limit"] == 0.5 and lists["limit"]["p50"] == 500 and lists["label_selector"] == 0.5
    assert lists["field_selector"] == 0.0 and lists["field_keys"] == {}
    watches = shapes[("watch", "node", "pods")]
    assert watches["field_selector"] == 1.0 and watches["field_keys"] == {"spec.nodeName": 1.0}
    assert watches["resource_version"] == {"unset": 0.5, "0": 0.0, "other": 0.5}
    latency = {(entry["verb"], entry["resource"], entry["scope"]): entry["seconds"] for entry in profile["latencies"]}
    assert latency[("list", "pods", "namespace")] == {"count": 1, "p50": 0.02, "p90": 0.02, "p99": 0.02,
                                                      "max": 0.02, "p99_is_max": True}
    assert latency[("create", "configmaps", "resource")]["max"] == 0.05
    assert not any(entry["subresource"] == "exec" for entry in profile["latencies"])  # a stream, no latency
    unplayable = profile["not_replayable"]
    assert unplayable["requests"] == 2 and unplayable["share"] == 0.2
    assert {kind["what"]: kind["share"] for kind in unplayable["kinds"]} == {
        "pods/exec": 0.1, "aggregated API metrics.k8s.io": 0.1}
    assert "metrics.k8s.io" in unplayable["aggregated_groups_known"] and "webhooks" in unplayable["not_visible"][0]


def test_the_profile_holds_no_name_or_value_of_the_cluster(profile: dict) -> None:
    text = yaml.safe_dump(profile)
    for planted in ("planted", "example.com", "12345", "10.1.2.3", "audit-1", "id-"):
        assert planted not in text
    identities = {(i["client_class"], i["product"]): i for i in profile["identities"]}
    assert identities[("node", "kubelet")] == {"client_class": "node", "product": "kubelet", "distinct": 2,
                                               "requests": 2}  # nodes counted, never named
    assert identities[("serviceaccount", "acme-operator")]["busiest"] == {hashed(SALT, SA): 2}
    assert identities[("user", "kubectl")]["busiest"] == {hashed(SALT, USER): 5}
    assert len(hashed(SALT, SA)) == 12 and hashed(SALT, SA) != hashed(b"other-salt", SA)


def test_a_last_line_cut_short_is_skipped_and_said(tmp_path: Path) -> None:
    paths = write_log(tmp_path)
    with paths[0].open("a") as handle:
        handle.write(event(31, "get", "pods")[:70])  # no line end: the apiserver was writing it
    cut = tmp_path / "cut.log.gz"
    whole = gzip.compress("".join(event(121 + i, "get", "pods") for i in range(50)).encode())
    cut.write_bytes(whole[:len(whole) * 2 // 3])
    traffic = traffic_from_audit([*paths, cut], SALT)
    assert any("audit file 1 of 3: its last line is cut short" in note for note in traffic.notes)
    assert any("audit file 3 of 3: its gzip stream ends early" in note for note in traffic.notes)
    assert 10 < traffic.requests < 60  # what the cut gzip held before its cut is read


@pytest.mark.parametrize(("line", "why"), [
    ("this is no json\n", "not JSON"),
    ('{"kind": "Pod", "apiVersion": "v1"}\n', "kind 'Pod', apiVersion 'v1': not an audit.k8s.io/v1 Event"),
    ('["a list"]\n', "a JSON list, not an object"),
    ('{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "stage": "ResponseComplete"}\n',
     "an Event without auditID, verb, requestReceivedTimestamp, stageTimestamp"),
    (event(5, "get", "pods").replace(_stamp(5), "yesterday", 1), "not an RFC 3339 time"),
])
def test_a_bad_line_is_refused_naming_the_file_and_line(tmp_path: Path, line: str, why: str) -> None:
    log = tmp_path / "audit.log"
    log.write_text(event(1, "get", "pods") + line + event(6, "get", "pods"))
    with pytest.raises(UnreadableFile) as raised:
        traffic_from_audit([log], SALT)
    said = str(raised.value)
    assert said.startswith(f"{log}: line 2: not an audit log line: ") and why in said
    assert "\n" not in said and "give audit.k8s.io/v1 Event JSON lines" in said


def test_a_file_with_no_event_or_not_text_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("\n")
    with pytest.raises(UnreadableFile, match="no audit event"):
        traffic_from_audit([empty], SALT)
    binary = tmp_path / "binary.log"
    binary.write_bytes(bytes(range(11, 256)))  # no line end: a first line is never taken as cut short
    with pytest.raises(UnreadableFile, match="line 1: not an audit log line: not JSON"):
        traffic_from_audit([binary], SALT)
    with pytest.raises(UnreadableFile, match="cannot read the audit log"):
        traffic_from_audit([tmp_path / "missing.log"], SALT)


def test_traffic_from_two_scrapes_says_who_is_unknown() -> None:
    before = Snapshot.parse((DATA / "apiserver_metrics_start.txt").read_text())
    after = Snapshot.parse((DATA / "apiserver_metrics_end.txt").read_text())
    profile = traffic_from_metrics(before, after, 100.0).to_dict()
    assert profile["client_classes"] == "unknown"
    for section in ("request_shapes", "per_minute", "latencies", "identities"):
        assert profile[section] == "not measured"
    assert profile["window"] == {"start": None, "end": None, "seconds": 100.0}
    # increases worked out by hand from the two pages (a series new at the end counts from zero; 0 left out)
    rates = {(r["verb"], r["group"], r["resource"], r["subresource"], r["code"]): (r["count"], r["per_second"])
             for r in profile["rates"]}
    assert rates == {
        ("get", "", "", "", 200): (60, 0.6), ("list", "", "events", "", 200): (10, 0.1),
        ("list", "", "pods", "", 200): (40, 0.4), ("watch", "", "pods", "", 200): (2, 0.02),
        ("delete", "", "pods", "", 200): (150, 1.5), ("patch", "", "pods", "status", 200): (200, 2.0),
        ("get", "coordination.k8s.io", "leases", "", 200): (500, 5.0),
        ("update", "coordination.k8s.io", "leases", "", 200): (500, 5.0),
        ("create", "", "configmaps", "", 201): (3, 0.03), ("create", "", "pods", "", 201): (200, 2.0),
        ("delete", "", "pods", "", 404): (4, 0.04), ("create", "", "pods", "", 429): (7, 0.07)}
    assert profile["requests"] == 1676
    healthz = next(r for r in profile["rates"] if r["resource"] == "")
    assert healthz["path"] == "/healthz" and healthz["client_class"] is None and healthz["product"] is None
    watches = {w["resource"]: (w["open_at_start"], w["open_at_end"], w["max_open"]) for w in profile["watches"]}
    assert watches == {"pods": (6, 12, None), "nodes": (4, 5, None), "leases": (1, 1, None)}  # CONNECT left out
    assert profile["not_replayable"]["requests"] == 0


def test_a_window_that_is_no_length_or_a_page_of_another_component_is_refused() -> None:
    after = Snapshot.parse((DATA / "apiserver_metrics_end.txt").read_text())
    for window in (0.0, -5.0, float("nan"), float("inf")):
        with pytest.raises(LoadTestError, match="give a positive number of seconds"):
            traffic_from_metrics(None, after, window)
    etcd = Snapshot.parse((DATA / "etcd_metrics_end.txt").read_text())
    with pytest.raises(LoadTestError, match="no apiserver_request_total"):
        traffic_from_metrics(None, etcd, 60.0)


def test_metric_verbs_and_field_keys() -> None:
    assert [audit_verb(v, s) for v, s in (("LIST", "namespace"), ("POST", "resource"), ("PUT", "resource"),
                                          ("DELETE", "resource"), ("DELETE", "namespace"), ("APPLY", "resource"),
                                          ("WATCHLIST", "cluster"), ("CONNECT", "resource"))] == [
        "list", "create", "update", "delete", "deletecollection", "patch", "watch", "connect"]
    assert field_keys("spec.nodeName=n1,status.phase!=Failed,metadata.name==x") == [
        "spec.nodeName", "status.phase", "metadata.name"]
    assert field_keys("secret value=1") == ["(unreadable)"]
    # a value's escaped comma does not end its term: the tail is the value's, never a key
    assert field_keys(r"metadata.name=planted\,secretname,spec.nodeName=n1") == ["metadata.name", "spec.nodeName"]
    assert field_keys("secretname") == ["(unreadable)"]  # no operator: no field's


def test_quantiles_are_exact_for_few_values_and_within_one_percent_for_many() -> None:
    few = Sketch()
    for value in (3.0, 1.0, 2.0):
        few.add(value)
    assert few.quantiles().to_dict() == {"count": 3, "p50": 2.0, "p90": 3.0, "p99": 3.0, "max": 3.0,
                                         "p99_is_max": True}
    many = Sketch()
    for i in range(1, 10 * EXACT + 1):
        many.add(i / 1000)
    found = many.quantiles()
    assert not found.exact and found.max == 10.0
    for got, true in ((found.p50, 5.0), (found.p90, 9.0), (found.p99, 9.9)):
        assert true <= got <= true * 1.01


def test_watches_whose_open_the_policy_omits_are_counted_at_their_end(tmp_path: Path) -> None:
    """A policy that omits ResponseStarted: each watch has its ResponseComplete only. One that began inside the
    window is a request and an open there; one that began before it is neither, but was open at its start."""
    log = tmp_path / "audit.log"
    log.write_text(event(0, "get", "nodes", user=NODE_A, groups=NODES, agent=KUBELET)
                   + event(10, "watch", "pods", received=-50, audit_id="early", **WATCH_A)
                   + event(40, "watch", "pods", received=15, audit_id="late", **WATCH_A)
                   + event(60, "get", "nodes", user=NODE_A, groups=NODES, agent=KUBELET))
    traffic = traffic_from_audit([log], SALT)
    (watches,) = traffic.watches
    assert (watches.opened, watches.open_at_start, watches.open_at_end) == (1, 1, 0)
    assert watches.max_open == 2  # the late one taken as open since the start: a bound, one at a time in truth
    assert watches.mean_open == pytest.approx((10 + 25) / 60)
    assert traffic.requests == 3 and any("without their ResponseStarted" in note for note in traffic.notes)


def _scalars(value: object) -> set[str]:
    """Every string of a profile's dict, keys and values."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {s for v in value.values() for s in _scalars(v)}
    if isinstance(value, list):
        return {s for v in value for s in _scalars(v)}
    return {value} if isinstance(value, str) else set()


def test_a_real_apiservers_log_is_read_stage_by_stage() -> None:
    """kube-apiserver v1.37.2's audit log of a harness run (its last 1,000 lines, gzipped: most watches opened
    before them): every request counted at the stage that says it, every watch's open and end paired, and none
    of its users, namespaces or object names in the profile."""
    path = DATA / "kube-apiserver_v1.37.2_audit.log.gz"
    events = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    traffic = traffic_from_audit([path], SALT)
    watches = [e for e in events if e["verb"] == "watch"]
    opened = {e["auditID"] for e in watches if e["stage"] == "ResponseStarted"}
    ended_unopened = [e for e in watches if e["stage"] == "ResponseComplete" and e["auditID"] not in opened]
    assert all(e["requestReceivedTimestamp"] < events[0]["stageTimestamp"] for e in ended_unopened)  # before
    requests = sum(e["verb"] != "watch" and e["stage"] == "ResponseComplete" for e in events) + len(opened)
    assert traffic.requests == requests and len(opened) > 20 and len(ended_unopened) > 100
    assert sum(w.opened or 0 for w in traffic.watches) == len(opened)
    ended = sum(e["stage"] == "ResponseComplete" for e in watches)
    assert sum(w.lifetime_s.count for w in traffic.watches if w.lifetime_s) == ended
    assert sum(w.open_at_end or 0 for w in traffic.watches) == len(opened) - (ended - len(ended_unopened))
    assert set(traffic.client_classes or ()) == {"controller", "serviceaccount", "user"}
    assert {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "k8s-loadtest"} <= {
        r.product for r in traffic.rates}
    names = {e["user"]["username"] for e in events} | {
        (e.get("objectRef") or {}).get(key, "") for e in events for key in ("namespace", "name")}
    assert not (names - {""}) & _scalars(traffic.to_dict())


def test_files_are_read_oldest_first_in_whatever_order_they_are_named(tmp_path: Path) -> None:
    """A rotated file named after the live one is still read first: a watch opened in it and ended in the live
    one is one watch that lived 49 s, not one open before the window and another never closed."""
    rotated, live = tmp_path / "audit.log", tmp_path / "audit-rotated.log.gz"
    rotated.write_text(event(1, "watch", "pods", stage="ResponseStarted", audit_id="w", **WATCH_A))
    live.write_bytes(gzip.compress(event(50, "watch", "pods", received=1, audit_id="w", **WATCH_A).encode()))
    (watches,) = traffic_from_audit([live, rotated], SALT).watches
    assert (watches.opened, watches.open_at_start, watches.open_at_end, watches.max_open) == (1, 0, 0, 1)
    assert watches.lifetime_s is not None and watches.lifetime_s.max == 49.0



def test_a_clusters_start_at_the_head_of_its_log_is_left_out_of_the_window() -> None:
    """kube-apiserver v1.37.2's audit log of benchmarks/production.py's cluster from its first request: 20 fake
    nodes joined together (renewing their Leases every 10 s, all 20 at once), then a node, a service account and
    a user sent 6, 6 and 8 + 6 requests a second for 30 s. The window is whole renewal periods from half a period
    after the first node's Lease: each class's rate is the one it kept (the nodes' 2/s, the traffic's own rates),
    where the whole log's are a fifth low; the traffic, which began later, is counted over the same window; a
    watch opened in the start-up and still open is open at the window's start, one that ended after the window
    open at its end."""
    path = DATA / "kube-apiserver_v1.37.2_audit_start.log.gz"
    events = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    at = {e["auditID"] + e["stage"]: _seconds(e["stageTimestamp"]) for e in events}

    def when(e: dict) -> float:
        return at[e["auditID"] + e["stage"]]

    def requests(e: dict) -> bool:
        return e["stage"] == "ResponseStarted" if e["verb"] == "watch" else e["stage"] == "ResponseComplete"

    whole, traffic = _uncut(path), traffic_from_audit([path], SALT)
    assert traffic.start_up is not None and traffic.start_up.end == traffic.window.start
    assert "first node made its Lease 2.0 s into the log" in traffic.start_up.why
    assert "renew their Leases every 10.3 s" in traffic.start_up.why and "2 whole periods" in traffic.start_up.why
    cut, until = _seconds(traffic.window.start), _seconds(traffic.window.end)
    assert until - cut == pytest.approx(2 * 10.3, abs=0.1)
    # the window's ends as the profile writes them, to the millisecond: each count between the two readings
    early = [sum(when(e) < t and requests(e) for e in events) for t in (cut, cut + 0.001)]
    late = [sum(when(e) > t and requests(e) for e in events) for t in (until + 0.001, until)]
    assert early[0] <= traffic.start_up.requests <= early[1] and late[0] <= traffic.start_up.requests_after <= late[1]
    assert traffic.requests == whole.requests - traffic.start_up.requests - traffic.start_up.requests_after > 0

    def rates(found: TrafficProfile) -> dict[tuple[str, str, str], float]:
        return {(r.verb, r.resource, r.client_class or ""): r.per_second or 0.0 for r in found.rates}

    kept = {("update", "leases", "node"): 2.0, ("list", "pods", "node"): 6.0,
            ("list", "configmaps", "serviceaccount"): 6.0, ("get", "configmaps", "user"): 8.0}
    for key, rate in kept.items():
        assert rates(traffic)[key] == pytest.approx(rate, rel=0.05), key
        assert rates(whole)[key] < rate * 0.9, key  # the whole log's: its start, and a partial round, counted
    opened = {e["auditID"] for e in events if e["verb"] == "watch" and e["stage"] == "ResponseStarted"
              and when(e) < cut}
    ended = {e["auditID"] for e in events if e["stage"] == "ResponseComplete" and when(e) < cut}
    held = len(opened - ended)  # the control plane's, opened as it started
    assert sum(w.open_at_start or 0 for w in traffic.watches) == held > 50
    open_at_end = sum(w.open_at_end or 0 for w in whole.watches) + sum(
        e["verb"] == "watch" and e["stage"] == "ResponseComplete" and when(e) > until for e in events)
    assert sum(w.open_at_end or 0 for w in traffic.watches) == open_at_end


def _uncut(path: Path) -> TrafficProfile:
    """The whole log's traffic, no window cut: the reference a cut window is judged against."""
    tally = AuditTally(SALT)
    for found in read_events([path], []):
        tally.add(found)
    return tally.profile([])


@pytest.mark.parametrize(("opened", "rounds_inside"), [(10.0, 3), (4.0, 2)])
def test_a_given_window_is_cut_to_whole_renewal_periods_for_every_class(opened: float, rounds_inside: int) -> None:
    """The recorded start's 20 nodes renew their Leases in rounds about 10.2 s apart (12, 22 and 32 s into the
    log). A window of 2.5 periods holds 3 rounds or 2, as it lies: uncut, the nodes' rate is 2.35/s or 1.57/s
    against the 2/s they keep. Cut to its 2 whole periods (measured in it, renewal to renewal), it is 2/s either
    way, and every class is counted over that same window."""
    path = DATA / "kube-apiserver_v1.37.2_audit_start.log.gz"
    t0 = _seconds(json.loads(gzip.decompress(path.read_bytes()).splitlines()[0])["stageTimestamp"])
    between = (t0 + opened, t0 + opened + 2.5 * 10.2)
    traffic = traffic_from_audit([path], SALT, between=between)
    leases = [r for r in traffic.rates if (r.verb, r.resource, r.client_class) == ("update", "leases", "node")]
    assert sum(r.count for r in leases) == 40 and sum(r.per_second or 0 for r in leases) == pytest.approx(2.0, rel=0.03)
    uncut = 20 * rounds_inside / (between[1] - between[0])
    assert abs(uncut - 2.0) > 0.35  # the half round the cut leaves out
    assert traffic.rounds is not None and (traffic.rounds.periods, traffic.rounds.given_s) == (2, 25.5)
    assert traffic.rounds.period_s == pytest.approx(10.2, abs=0.1)
    assert traffic.window.seconds == pytest.approx(traffic.rounds.kept_s, abs=0.1)
    assert all(r.per_second == pytest.approx(r.count / traffic.window.seconds) for r in traffic.rates)
    assert traffic.to_dict()["rounds"]["kept_seconds"] == round(traffic.rounds.kept_s, 3)


def test_a_given_window_without_a_whole_renewal_period_is_kept_whole(tmp_path: Path) -> None:
    """No Lease renewed in the window (or a window shorter than a period): nothing to cut by, the window stays."""
    t0 = T0.timestamp()
    traffic = traffic_from_audit(write_log(tmp_path), SALT, between=(t0, t0 + 60))
    assert traffic.rounds is not None and traffic.rounds.period_s is None and traffic.rounds.periods == 0
    assert traffic.rounds.kept_s == traffic.rounds.given_s == 60.0
    short = DATA / "kube-apiserver_v1.37.2_audit_start.log.gz"
    first = _seconds(json.loads(gzip.decompress(short.read_bytes()).splitlines()[0])["stageTimestamp"])
    assert traffic_from_audit([short], SALT, between=(first + 10, first + 18)).rounds.period_s is None


def test_a_log_without_a_clusters_first_start_is_its_own_window(tmp_path: Path) -> None:
    """Neither a log that begins mid-life nor a start whose nodes never joined moves the window."""
    assert traffic_from_audit(write_log(tmp_path), SALT).start_up == StartUp(None, None, 0.0, 0, NO_START)
    log = tmp_path / "nodeless.log"
    apiserver = dict(user="system:apiserver", groups=("system:masters",), code=201)
    log.write_text(event(0, "create", "namespaces", name="kube-system", **apiserver) +
                   event(30, "create", "leases", group="coordination.k8s.io", namespace="kube-system", **apiserver)
                   + event(60, "get", "pods", namespace=NS))
    traffic = traffic_from_audit([log], SALT)
    assert traffic.window.seconds == 60.0 and traffic.requests == 3
    assert traffic.start_up is not None and traffic.start_up.why.startswith("none: the cluster started in the log")


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# mappings keyed by the traffic's own words (verbs, field paths, hashes), not by field names
KEYED_BY_VALUE = frozenset({"resource_version", "field_keys", "verbs", "busiest"})


def _keys(value: object) -> set[str]:
    """Every field name of a traffic section, nested ones too, but not the keys of KEYED_BY_VALUE's mappings."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {key for k, v in value.items() if k not in KEYED_BY_VALUE
                                          for key in _keys(v)}
    if isinstance(value, list):
        return {key for v in value for key in _keys(v)}
    return set()


def test_every_field_either_source_writes_is_named_in_the_docs(profile: dict) -> None:
    """docs/profile.md says what each field of the traffic section is: a field added to it, from the audit log or
    from /metrics, is one the page must name (in code) before this passes."""
    before = Snapshot.parse((DATA / "apiserver_metrics_start.txt").read_text())
    after = Snapshot.parse((DATA / "apiserver_metrics_end.txt").read_text())
    metrics = traffic_from_metrics(before, after, 100.0).to_dict()
    bucketed = Quantiles(EXACT + 1, 1.0, 1.0, 1.0, 1.0, exact=False).to_dict()  # `within`, past EXACT values
    written = _keys(profile) | _keys(metrics) | set(bucketed)
    assert {"path", "component", "busiest", "limit", "p99_is_max", "within"} <= written
    prose = re.sub(r"```.*?```", "", DOCS.read_text(), flags=re.S)  # its tables and text, not its examples
    named = {word for span in re.findall(r"`([^`]+)`", prose) for word in re.findall(r"\w+", span)}
    assert not written - named, f"traffic fields docs/profile.md does not name: {sorted(written - named)}"
