"""Scenario registry: a plan's scenario name -> the Locust user classes that play it, sized from its params.

This package's top level never imports Locust: the runner imports it to size a step and to judge what the
load achieved, and importing Locust monkey-patches the whole process for gevent. Each scenario module
(imported only inside the Locust processes) provides `build(config, params, counts) -> list[type[User]]`.

What a scenario asks for and which request measures what it achieved is declared here, next to the
request names, so the load generator and the user classes cannot disagree about either.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from loadtests.objects import node_name
from loadtests.plan import SCENARIO_DEFAULTS
from loadtests.target.base import ClusterAccess

CONFIG_ENV = "LOADTEST_LOAD_CONFIG"
FINAL_STATS_SUFFIX = "_final_stats.csv"  # the locustfile's stats at quit, complete (see locustfile.py)
FINAL_FAILURES_SUFFIX = "_final_failures.csv"

# client-go's reflector picks a watch timeout in [5 min, 10 min) so that watches do not all end at once
WATCH_TIMEOUT_MIN_S = 300.0
# a watch read may block for a whole timeoutSeconds when nothing changes (a node without pods)
WATCH_READ_TIMEOUT_S = 2 * WATCH_TIMEOUT_MIN_S + 60.0


@dataclass(frozen=True)
class LoadConfig:
    """What every Locust process needs to build its users: handed over as a JSON file named by CONFIG_ENV."""

    access: ClusterAccess
    scenarios: dict[str, dict[str, Any]]
    nodes: int
    node_names: list[str] | None = None  # None: the KWOK fleet's names, kwok-node-00000..
    run_id: str = ""
    workers: int = 0  # Locust worker processes (0 = one local process); node watchers stride over them
    stop_at: float | None = None  # wall-clock time after which users end themselves, whatever Locust does
    # The measured window: once this file exists, Locust's statistics restart from zero and the run ends
    # window_s later, so the step's figures exclude the users' start-up (a burst of new connections).
    window_file: str | None = None
    window_s: float | None = None

    def node(self, index: int) -> str:
        """The name of the index-th node (wrapping around), so watchers spread over the fleet."""
        count = len(self.node_names) if self.node_names else self.nodes
        index %= max(1, count)
        return self.node_names[index] if self.node_names else node_name(index)

    def run_label(self) -> str:
        """The run id as a label value and name fragment: lowercase alphanumerics and '-', at most 20."""
        label = re.sub(r"[^a-z0-9-]+", "-", self.run_id.lower()).strip("-")[-20:].strip("-")
        return label or "run"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadConfig:
        data = dict(data)
        access = ClusterAccess(**data.pop("access"))
        names = data.pop("node_names", None)
        if isinstance(names, dict):  # {"prefix": "kwok-node-", "count": N}: zero-padded like the fleet's
            names = [f"{names['prefix']}{i:05d}" for i in range(int(names["count"]))]
        return cls(access=access, node_names=names, **data)

    @classmethod
    def from_env(cls) -> LoadConfig:
        path = os.environ.get(CONFIG_ENV)
        if not path:
            raise RuntimeError(f"{CONFIG_ENV} is not set: the locustfile is started by loadtests.load")
        with open(path) as handle:
            return cls.from_dict(json.load(handle))


# --- request names: one Locust stats row per kind of request -------------------------------------------


def request_name(verb: str, resource: str, *qualifiers: str) -> str:
    """`VERB resource (q1, q2)`: the verb is the apiserver's (LIST and WATCH are not GET), so client rows
    line up with the server's per-verb metrics."""
    kept = [q for q in qualifiers if q]
    return f"{verb} {resource} ({', '.join(kept)})" if kept else f"{verb} {resource}"


def rv_qualifier(resource_version: str) -> str:
    """How a LIST is served: rv=0 from the watch cache as it is; "" is a consistent (quorum) read."""
    return "consistent" if resource_version == "" else f"rv={resource_version}"


def scope_qualifier(namespace: str) -> str:
    return "ns" if namespace else ""


@dataclass(frozen=True)
class ListNames:
    """Names of a paginated LIST: the first page (what pollers count) and the continuation pages."""

    first: str
    more: str

    @classmethod
    def of(cls, resource: str, namespace: str, resource_version: str, *qualifiers: str) -> ListNames:
        scope = scope_qualifier(namespace)
        return cls(
            first=request_name("LIST", resource, *qualifiers, scope, rv_qualifier(resource_version)),
            more=request_name("LIST", resource, *qualifiers, scope, "continue"),
        )


@dataclass(frozen=True)
class WatchNames:
    """Names of a user's first watch (its successes count established watches) and of its re-watches."""

    first: str
    again: str
    relist: ListNames | None = None  # informers: the LIST after a 410 Gone (a consistent read)
    initial_list: ListNames | None = None

    @classmethod
    def of(cls, resource: str, namespace: str, *qualifiers: str, list_rv: str | None = None) -> WatchNames:
        scope = scope_qualifier(namespace)
        lists = list_rv is not None
        return cls(
            first=request_name("WATCH", resource, *qualifiers, scope),
            again=request_name("WATCH", resource, *qualifiers, scope, "rewatch"),
            initial_list=ListNames.of(resource, namespace, list_rv, *qualifiers) if lists else None,
            relist=ListNames.of(resource, namespace, "", *qualifiers) if lists else None,
        )


CREATE_PODS = request_name("POST", "pods")
DELETE_PODS = request_name("DELETE", "pods")
SCALE_DEPLOYMENT = request_name("PATCH", "deployments/scale")
KUBELET_WATCH = WatchNames.of("pods", "", "node")


def informer_names(params: dict[str, Any]) -> WatchNames:
    return WatchNames.of(params["resource"], params["namespace"], "informer", list_rv="0")


def poller_names(params: dict[str, Any]) -> ListNames:
    return ListNames.of(params["resource"], params["namespace"], str(params["resource_version"]))


# --- sizing: how many users each scenario needs, and what it asks for ----------------------------------


@dataclass(frozen=True)
class Demand:
    """What a scenario asks of the load generator for one step, and how to tell what it achieved."""

    users: dict[str, int]  # user class name -> exact number of users (Locust fixed_count)
    asked: float  # per second, or a number of watches when per_second is False
    unit: str
    counted_by: tuple[str, str]  # (Type, Name) of the Locust row whose successes are what was achieved
    per_second: bool = True


def _users_for(rate: float, users: int) -> int:
    return max(1, int(users)) if rate > 0 else 0


def _pod_churn(params: dict[str, Any], nodes: int) -> Demand:
    users = {"PodChurn": _users_for(params["rate"], params["users"])}
    if params["deployment_scale_every_s"] > 0:
        users["DeploymentScaler"] = 1
    return Demand(users=users, asked=float(params["rate"]), unit="creates", counted_by=("POST", CREATE_PODS))


def kubelet_watcher_count(params: dict[str, Any], nodes: int) -> int:
    """One watcher per node (times per_node), capped at max_watchers."""
    return max(0, min(int(params["max_watchers"]), round(params["per_node"] * nodes)))


def _kubelet_watchers(params: dict[str, Any], nodes: int) -> Demand:
    count = kubelet_watcher_count(params, nodes)
    return Demand(users={"KubeletWatcher": count}, asked=float(count), unit="watches",
                  counted_by=("WATCH", KUBELET_WATCH.first), per_second=False)


def _informers(params: dict[str, Any], nodes: int) -> Demand:
    count = int(params["count"])
    return Demand(users={"Informer": count}, asked=float(count), unit="watches",
                  counted_by=("WATCH", informer_names(params).first), per_second=False)


def _list_pollers(params: dict[str, Any], nodes: int) -> Demand:
    users = {"ListPoller": _users_for(params["rate"], params["users"])}
    return Demand(users=users, asked=float(params["rate"]), unit="lists",
                  counted_by=("LIST", poller_names(params).first))


@dataclass(frozen=True)
class Scenario:
    """A registry entry: how to size the scenario, and the module whose `build` makes its user classes."""

    name: str
    module: str
    demand: Callable[[dict[str, Any], int], Demand]

    def factory(self) -> Callable[..., list[Any]]:
        """The module's user class factory; imported only when asked, since it imports Locust."""
        return importlib.import_module(self.module).build


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("pod_churn", "loadtests.scenarios.pod_churn", _pod_churn),
        Scenario("kubelet_watchers", "loadtests.scenarios.kubelet_watchers", _kubelet_watchers),
        Scenario("informers", "loadtests.scenarios.informers", _informers),
        Scenario("list_pollers", "loadtests.scenarios.list_pollers", _list_pollers),
    )
}


def scenario_params(load: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The scenarios of a plan's load section, defaults filled in; accepts {"scenarios": {...}} or the
    mapping itself. Unknown names are refused (the plan validation already does; this is for direct use)."""
    scenarios = load["scenarios"] if isinstance(load.get("scenarios"), dict) else load
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        raise ValueError(f"unknown load scenario {unknown[0]!r}; expected one of: {', '.join(sorted(SCENARIOS))}")
    return {name: {**SCENARIO_DEFAULTS[name], **(params or {})} for name, params in scenarios.items()}


def demands(load: dict[str, Any], nodes: int) -> dict[str, Demand]:
    """Every configured scenario's demand for a step with `nodes` nodes."""
    return {name: SCENARIOS[name].demand(params, nodes) for name, params in scenario_params(load).items()}


@dataclass
class UserPlan:
    """The exact user allocation of one step (Locust --users must be their sum)."""

    by_class: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_class.values())


def user_plan(load: dict[str, Any], nodes: int) -> UserPlan:
    plan = UserPlan()
    for demand in demands(load, nodes).values():
        for cls, count in demand.users.items():
            plan.by_class[cls] = plan.by_class.get(cls, 0) + count
    return plan


def build_user_classes(config: LoadConfig) -> list[Any]:
    """The Locust user classes of every configured scenario, each with its exact fixed_count; classes
    with no users are left out (Locust would spawn weight-based users of them otherwise)."""
    classes: list[Any] = []
    for name, params in scenario_params(config.scenarios).items():
        demand = SCENARIOS[name].demand(params, config.nodes)
        built = SCENARIOS[name].factory()(config, params, demand.users)
        classes.extend(cls for cls in built if cls.fixed_count > 0)
    return classes
