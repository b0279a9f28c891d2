"""The traffic compiler: a profile's `traffic:` section (built here) → the `requests` and `node_agents` scenarios
of the replay's plan, rates × k, node rows apart, and what is not replayed with its share."""

from __future__ import annotations

import pytest

from loadtests.capture.profile import Profile
from loadtests.capture.replay import plan_data, plan_of
from loadtests.capture.replay_traffic import topped_up
from loadtests.config import sizing
from loadtests.config.scenarios import demands, requests_user, requests_users
from tests.unit.test_replay_plan import profile

WINDOW_S = 100.0


def rate(verb: str, resource: str, client: str, count: int, *, group: str = "", subresource: str = "",
         scope: str = "namespace", path: str | None = None, product: str = "x") -> dict:
    row = {"verb": verb, "group": group, "resource": resource, "subresource": subresource, "scope": scope,
           "client_class": client, "product": product, "component": None, "code": 200, "count": count,
           "per_second": count / WINDOW_S}
    return {**row, "path": path} if path else row


def traffic() -> dict:
    rates = [rate("list", "configmaps", "serviceaccount", 300), rate("list", "configmaps", "serviceaccount", 100),
             rate("get", "widgets", "user", 200, group="example.com"),
             rate("create", "configmaps", "serviceaccount", 50), rate("delete", "configmaps", "serviceaccount", 50),
             rate("list", "pods", "node", 40, scope="cluster"),
             rate("update", "leases", "node", 400, group="coordination.k8s.io"),  # the fleet's heartbeats
             rate("watch", "pods", "node", 8, scope="cluster"),
             rate("get", "pods", "user", 20, subresource="log"),
             rate("get", "", "user", 30, scope="", path="/apis"),
             rate("list", "events", "controller", 2),
             # a controller of kube-controller-manager, under its own ServiceAccount: the control plane's own
             rate("list", "configmaps", "serviceaccount", 70, product="kube-controller-manager"),
             rate("get", "nodes", "user", 0)]
    shape = {"verb": "list", "client_class": "serviceaccount", "group": "", "resource": "configmaps", "count": 400,
             "resource_version": {"": 0.25, "0": 0.75}, "continued": 0.0, "with_limit": 0.5,
             "limit": {"p50": 250}, "label_selector": 0.5, "field_selector": 0.1,
             "field_keys": {"metadata.name": 0.1}}
    watches = [{"group": "", "resource": "pods", "client_class": "node", "product": "kubelet", "mean_open": 4.0},
               {"group": "", "resource": "configmaps", "client_class": "serviceaccount", "product": "op",
                "mean_open": 2.6, "open_at_end": 3},
               # the control plane's own (by class, or a controller of kube-controller-manager under its own
               # ServiceAccount) and the fake fleet's kwok: the replaying cluster's hold theirs, once
               {"group": "", "resource": "configmaps", "client_class": "controller", "product": "kube-scheduler",
                "mean_open": 3.0},
               {"group": "", "resource": "configmaps", "client_class": "serviceaccount",
                "product": "kube-controller-manager", "mean_open": 5.0},
               {"group": "", "resource": "pods", "client_class": "user", "product": "kwok", "mean_open": 1.0}]
    return {"source": "audit", "window": {"seconds": WINDOW_S}, "requests": sum(r["count"] for r in rates),
            "rates": rates, "request_shapes": [shape], "watches": watches}


def with_traffic() -> Profile:
    found = profile()
    found.traffic = traffic()
    return found


@pytest.mark.parametrize("scale", [1, 2])
def test_each_replayable_class_is_a_row_at_its_rate_times_k(scale: int) -> None:
    params = plan_data(with_traffic(), scale, source="prod.yaml")["load"]["scenarios"]["requests"]
    rows = {(r["verb"], r["resource"], r["client_class"]): r for r in params["rows"]}
    assert set(rows) == {("list", "configmaps", "serviceaccount"), ("get", "widgets", "user"),
                         ("create", "configmaps", "serviceaccount"), ("delete", "configmaps", "serviceaccount"),
                         ("list", "pods", "node")}
    assert rows[("list", "configmaps", "serviceaccount")]["rate"] == pytest.approx(4.0 * scale)  # codes summed
    assert rows[("get", "widgets", "user")]["rate"] == pytest.approx(2.0 * scale)
    widget = with_traffic().kind("Widget", "example.com")
    assert widget is not None and rows[("get", "widgets", "user")]["version"] == widget.version
    assert rows[("get", "widgets", "user")]["namespaced"]
    assert rows[("create", "configmaps", "serviceaccount")]["template"]["text"].count("kind: ConfigMap") == 1
    assert rows[("list", "configmaps", "serviceaccount")]["name"] == "LIST configmaps (replay, serviceaccount, ns)"
    # the operator's watch: its mean open count × k, a held watcher; the nodes' watches: the fake nodes' agents;
    # the control plane's and kwok's: none (the replaying cluster's own components hold theirs)
    assert params["watches"] == [{"resource": "configmaps", "client_class": "serviceaccount",
                                  "count": round(2.6 * scale)}]
    assert plan_data(with_traffic(), scale, source="p.yaml")["load"]["scenarios"]["node_agents"] == {"per_node": 1.0}


def test_a_list_keeps_its_captured_shape() -> None:
    params = plan_data(with_traffic(), 1, source="prod.yaml")["load"]["scenarios"]["requests"]
    shape = next(r for r in params["rows"] if r["resource"] == "configmaps" and r["verb"] == "list")["list"]
    assert shape == {"resource_version": {"": 0.25, "0": 0.75}, "with_limit": 0.5, "limit": 250,
                     "label_selector": 0.5, "field_selector": 0.1, "field_key": "metadata.name"}
    pods = next(r for r in params["rows"] if r["resource"] == "pods")["list"]
    assert pods["resource_version"] == {"": 1.0} and pods["with_limit"] == 0  # no captured shape: a plain LIST


def test_what_is_not_replayed_is_listed_with_its_share_and_the_rest_is_the_replayed_share() -> None:
    data = plan_data(with_traffic(), 1, source="prod.yaml")
    total = traffic()["requests"]
    left = {r["what"]: r for r in data["replay"]["not_replayed"] if "what" in r}
    assert set(left) == {"get pods/log", "get /apis", "list events", "list configmaps"}
    assert "control plane's own" in left["list configmaps"]["reason"] and left["list configmaps"]["requests"] == 70
    assert left["get pods/log"]["share"] == round(20 / total, 4) and left["get pods/log"]["requests"] == 20
    assert "stream" in left["get pods/log"]["reason"] and "no resource" in left["get /apis"]["reason"]
    assert data["replay"]["replayed_share"] == round((total - 52 - 70) / total, 4)
    plan = plan_of(with_traffic(), 1, source="prod.yaml")  # the plan's reader takes it, results keep it
    assert plan.replay is not None and plan.replay.requests == total
    assert {n.what for n in plan.replay.not_replayed if hasattr(n, "what")} == set(left)


def test_each_class_goes_to_users_of_its_identity_and_a_users_rate_is_bounded() -> None:
    params = plan_data(with_traffic(), 100, source="prod.yaml")["load"]["scenarios"]["requests"]
    users = requests_users(params)
    assert users["ReplayNodeRequests"] == 2  # 40 node LISTs per 100 s × 100 = 40/s, at most 20/s a user
    for name in ("ReplayUserRequests", "ReplayServiceAccountRequests"):
        rate = sum(r["rate"] for r in params["rows"] if requests_user(r) == name)
        assert users[name] * 20 >= rate > (users[name] - 1) * 20, name
    assert {requests_user(r) for r in params["rows"] if r["client_class"] == "serviceaccount"} == {
        "ReplayServiceAccountRequests"}
    # a user's class as a user of its own, no class left to the load's identity
    assert {requests_user(r) for r in params["rows"] if r["client_class"] == "user"} == {"ReplayUserRequests"}
    assert users["ReplayRequests"] == 0
    demand = demands({"requests": params}, 10)["requests"]
    assert demand.asked == pytest.approx(sum(r["rate"] for r in params["rows"]))


def test_a_profile_without_traffic_has_no_traffic_scenarios() -> None:
    data = plan_data(profile(), 1, source="prod.yaml")
    assert "requests" not in data["load"]["scenarios"] and data["replay"]["traffic"] == "not replayed"


def test_the_sizing_counts_the_replayed_requests() -> None:
    costs = {sizing.LEASE_CORES: {"cores": 0.0}, sizing.REQUEST_CPU: {"create_ms": 10.0, "list_ms": 20.0}}
    small = sizing.estimate(plan_of(with_traffic(), 1, source="p.yaml"), costs)
    large = sizing.estimate(plan_of(with_traffic(), 1000, source="p.yaml"), costs)
    assert small.steady_cores == pytest.approx((4 * 20 + 2 * 10 + 0.5 * 10 + 0.5 * 10 + 0.4 * 20) / 1000)
    assert large.requests_per_s == pytest.approx(7400) and large.problems(2, 1e12)
    assert "replayed 7,400 requests/s" in large.problems(2, 1e12)[0]
    unmeasured = sizing.estimate(plan_of(with_traffic(), 1, source="p.yaml"), {})
    assert any("replayed requests" in u for u in unmeasured.unmeasured)


def test_watches_from_metrics_are_topped_up_by_those_the_replaying_cluster_holds() -> None:
    """A profile from /metrics does not say whose a watch is: its counts are every client's, the control plane's
    among them, so a replay holds only what the cluster lacks as its load starts (the replaying cluster's own
    components hold theirs); watches whose class is known are held whole, and the gauge is read only when needed."""
    found = with_traffic()
    found.traffic = {**traffic(), "watches": [
        {"group": "", "resource": "configmaps", "client_class": None, "product": None, "open_at_end": 9},
        {"group": "", "resource": "namespaces", "client_class": None, "product": None, "open_at_end": 3},
        {"group": "", "resource": "secrets", "client_class": "serviceaccount", "product": "op", "mean_open": 2.0}]}
    scenarios = plan_data(found, 2, source="prod.yaml")["load"]["scenarios"]
    assert scenarios["requests"]["watches"] == [
        {"resource": "configmaps", "client_class": "unknown", "count": 18, "top_up": True},
        {"resource": "namespaces", "client_class": "unknown", "count": 6, "top_up": True},
        {"resource": "secrets", "client_class": "serviceaccount", "count": 4}]
    asked: list[int] = []

    def open_now() -> dict[tuple[str, str], int]:
        asked.append(1)
        return {("", "configmaps"): 9, ("", "namespaces"): 7, ("", "secrets"): 3, ("example.com", "widgets"): 1}

    held = topped_up(scenarios, open_now)["requests"]["watches"]
    assert held == [{"resource": "configmaps", "client_class": "unknown", "count": 9, "top_up": True},
                    {"resource": "secrets", "client_class": "serviceaccount", "count": 4}]
    assert asked == [1] and scenarios["requests"]["watches"][0]["count"] == 18  # the plan's own left as it was
    plain = plan_data(with_traffic(), 2, source="prod.yaml")["load"]["scenarios"]
    assert topped_up(plain, open_now) == plain and asked == [1]  # no row to top up: the gauge not read


def test_the_run_waits_for_the_control_planes_watches_on_what_it_installs() -> None:
    found = with_traffic()
    assert found.traffic is not None
    found.traffic["client_classes"] = []  # an audit log's: whose each watch is, known
    found.traffic["watches"] += [
        {"group": "example.com", "resource": "widgets", "client_class": "controller",
         "product": "kube-controller-manager", "open_at_end": 2},
        {"group": "example.com", "resource": "widgets", "client_class": "serviceaccount", "product": "op",
         "open_at_end": 4}]  # an operator's: not the control plane's, not waited for
    data = plan_data(found, 2, source="prod.yaml")
    assert data["replay"]["control_plane_watches"] == [{"group": "example.com", "resource": "widgets", "open": 2}]
    settings = plan_of(found, 2, source="prod.yaml").replay
    assert settings is not None and [(w.resource, w.open) for w in settings.control_plane_watches] == [("widgets", 2)]
    # from /metrics, whose a watch is unknown: the control plane's first watch says it found the resource
    del found.traffic["client_classes"]
    assert plan_data(found, 2, source="prod.yaml")["replay"]["control_plane_watches"] == [
        {"group": "example.com", "resource": "widgets", "open": 1}]
    # no watch of an installed resource in the original: nothing to wait for, and the section says nothing of it
    assert "control_plane_watches" not in plan_data(with_traffic(), 2, source="prod.yaml")["replay"]


def test_a_fake_fleets_controller_sending_as_the_nodes_is_the_fleet_not_node_agents() -> None:
    """A cluster of fake nodes captured (kwok in system:nodes): kwok's watches and requests are the replaying
    fleet's own, held once by its kwok, neither node agents for every node nor rows of the load."""
    found = profile()
    found.traffic = {"source": "audit", "window": {"seconds": WINDOW_S}, "requests": 230, "client_classes": [],
                     "rates": [rate("update", "leases", "node", 200, group="coordination.k8s.io", product="kwok"),
                               rate("list", "nodes", "node", 10, scope="cluster", product="kwok"),
                               rate("watch", "pods", "node", 20, scope="cluster", product="kwok")],
                     "watches": [{"group": "", "resource": "pods", "client_class": "node", "product": "kwok",
                                  "mean_open": 1.0, "open_at_end": 1}]}
    scenarios = plan_data(found, 2, source="prod.yaml")["load"]["scenarios"]
    assert "node_agents" not in scenarios and "requests" not in scenarios
    assert plan_of(found, 2, source="prod.yaml").replay.replayed_share == 1.0  # type: ignore[union-attr]
    # a kubelet's watch, as the nodes: their agents
    found.traffic["watches"].append({"group": "", "resource": "pods", "client_class": "node", "product": "kubelet",
                                     "mean_open": 3.0, "open_at_end": 3})
    assert "node_agents" in plan_data(found, 2, source="prod.yaml")["load"]["scenarios"]
