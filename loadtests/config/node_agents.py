"""What the node_agents scenario gives every fake node, read from the reference of a real node's agents
(loadtests/data/node_agents_reference.yaml, docs/node-agents.md): the watches of its kubelet and kube-proxy,
with their selectors, renewal times and the client rows that count them. Declared once here, so that the plan's
demand (config/scenarios.py), the Locust users (load/locust/scenarios/node_agents.py) and the benchmark that
compares them with real hollow nodes read the same rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from loadtests.kube.names import WatchNames

REFERENCE = Path(__file__).resolve().parent.parent / "data" / "node_agents_reference.yaml"
KUBELET, KUBE_PROXY = "kubelet", "kube-proxy"
AGENTS = (KUBELET, KUBE_PROXY)
NODE = "<node>"  # the reference's stand-in for the node's own name in a selector
PER_NODE = "node"  # a watch every node's agent holds; the others are held per object a pod of the node names
# the resources of the kubelet's per-object watches (one per ConfigMap or Secret its pods reference)
PER_OBJECT = {"pod-configmap": "configmaps", "pod-secret": "secrets"}


@dataclass(frozen=True)
class AgentWatch:
    """One watch of a node's agent, as the reference says it: what it follows, how it selects, how long each of
    its watch requests is asked to last (client-go draws timeoutSeconds uniformly in that range), and the names of
    its client rows (`WATCH <resource> (<agent>)`; the per-object ones `(..., ns)`)."""

    agent: str
    resource: str
    namespaced: bool
    field_selector: str  # with NODE (or <name>, per object) where the node's own name goes
    label_selector: str
    per: str
    timeout_s: tuple[float, float]
    watch_list: bool

    @property
    def names(self) -> WatchNames:
        # "watch-list" LIST names: the fallback LIST client-go sends when a streaming list is refused
        return WatchNames.of(self.resource, "ns" if self.namespaced else "", self.agent, list_rv="0")

    @property
    def per_object(self) -> bool:
        return self.per in PER_OBJECT

    def field_selector_for(self, node: str, name: str = "") -> str:
        return self.field_selector.replace(NODE, node).replace("<name>", name)


@functools.cache
def _reference() -> dict[str, Any]:
    return yaml.safe_load(REFERENCE.read_text())


def _watch(agent: str, entry: dict[str, Any]) -> AgentWatch:
    low, high = entry["timeout_s"]
    return AgentWatch(agent=agent, resource=entry["resource"], namespaced=entry["scope"] == "namespace",
                      field_selector=entry["field_selector"] or "", label_selector=entry["label_selector"] or "",
                      per=entry["per"], timeout_s=(float(low), float(high)), watch_list=bool(entry["watch_list"]))


@functools.cache
def agent_watches(agent: str) -> tuple[AgentWatch, ...]:
    """Every watch of one real agent (kubelet, kube-proxy), per node and per object, in the reference's order."""
    if agent not in AGENTS:
        raise ValueError(f"unknown node agent {agent!r}; expected one of: {', '.join(AGENTS)}")
    return tuple(_watch(agent, entry) for entry in _reference()["agents"][agent]["watches"])


def node_watches(agent: str) -> tuple[AgentWatch, ...]:
    """The watches an agent holds whatever its pods: what every node asks for, one each."""
    return tuple(w for w in agent_watches(agent) if w.per == PER_NODE)


def object_watch(resource: str) -> AgentWatch:
    """The kubelet's per-object watch of a ConfigMap or a Secret."""
    return next(w for w in agent_watches(KUBELET) if w.per_object and PER_OBJECT[w.per] == resource)


def kubernetes_version() -> str:
    """The release the reference was read from."""
    return str(_reference()["kubernetes_version"])
