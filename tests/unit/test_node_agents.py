"""The node_agents scenario's declaration: every watch a real kubelet and kube-proxy hold per node, read from the
reference, asked of the load generator one per node and agent, and counted by rows of their own."""

from __future__ import annotations

import yaml

from loadtests.config import node_agents
from loadtests.config.scenarios import SCENARIOS, demands, user_plan


def test_each_agent_holds_the_references_watches_with_their_selectors() -> None:
    reference = yaml.safe_load(node_agents.REFERENCE.read_text())
    for agent in node_agents.AGENTS:
        watches = node_agents.agent_watches(agent)
        assert [w.resource for w in watches] == [w["resource"] for w in reference["agents"][agent]["watches"]]
    kubelet = {w.resource: w for w in node_agents.node_watches("kubelet")}
    assert kubelet["pods"].field_selector_for("kwok-node-00007") == "spec.nodeName=kwok-node-00007"
    assert kubelet["pods"].timeout_s == (300.0, 600.0) and kubelet["pods"].watch_list
    secret = node_agents.object_watch("secrets")
    assert secret.field_selector_for("n", "token") == "metadata.name=token" and secret.timeout_s == (1800.0, 3600.0)
    assert secret.names.first == "WATCH secrets (kubelet, ns)"
    proxy = {w.resource: w for w in node_agents.node_watches("kube-proxy")}
    assert proxy["endpointslices"].label_selector == "!service.kubernetes.io/headless"
    assert proxy["services"].names.first == "WATCH services (kube-proxy)" != kubelet["services"].names.first


def test_the_demand_is_every_node_watch_of_both_agents_per_node() -> None:
    per_node = len(node_agents.node_watches("kubelet")) + len(node_agents.node_watches("kube-proxy"))
    demand = demands({"node_agents": {}}, 30)["node_agents"]
    assert demand.users == {"NodeKubelet": 30, "NodeProxy": 30}
    assert demand.asked == 30 * per_node and not demand.per_second
    counted = {demand.counted_by, *demand.also_counted_by}
    assert len(counted) == per_node and ("WATCH", "WATCH pods (kubelet)") in counted
    without_proxy = demands({"node_agents": {"kube_proxy": False, "max_nodes": 10}}, 30)["node_agents"]
    assert without_proxy.users == {"NodeKubelet": 10} and without_proxy.asked == 10 * (per_node - 4)
    assert user_plan({"node_agents": {}}, 5).total == 10
    assert SCENARIOS["node_agents"].defaults["encoding"] == "protobuf"
