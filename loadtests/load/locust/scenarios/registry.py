"""The code of every scenario, by the name config/scenarios.py declares it under: name -> the function that
builds its Locust user classes. config/ names scenarios by string and never imports their code (that would be
an arrow from config/ into load/, and would import Locust into the runner); the locustfile looks them up here.
Each scenario module is imported explicitly, so the layout test sees every arrow."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios import (
    informers,
    kubelet_watchers,
    list_pollers,
    node_agents,
    objects,
    pod_churn,
    requests,
    service_watchers,
)
from loadtests.load.locust.scenarios.base import KubeUser

# (the step's config, the scenario's parameters with defaults filled in, users per class) -> its user classes
Build = Callable[[LoadConfig, dict[str, Any], dict[str, int]], list[type[KubeUser]]]

BUILDS: Mapping[str, Build] = MappingProxyType({
    "pod_churn": pod_churn.build,
    "kubelet_watchers": kubelet_watchers.build,
    "node_agents": node_agents.build,
    "service_watchers": service_watchers.build,
    "informers": informers.build,
    "list_pollers": list_pollers.build,
    "objects": objects.build,
    "requests": requests.build,
})
