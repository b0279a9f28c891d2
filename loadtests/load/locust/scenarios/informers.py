"""Informers: LIST then WATCH from the list's resourceVersion, as every controller and operator does for
each resource it follows; `count` of them on one resource, cluster-wide or in one namespace."""

from __future__ import annotations

from typing import Any

from locust import task
from locust.exception import StopUser

from loadtests.config.scenarios import informer_names
from loadtests.kube.reflector import Reflector
from loadtests.kube.watch import WATCH_READ_TIMEOUT_S
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, user_class


class InformerUser(KubeUser):
    """The reflector loop: first LIST with resourceVersion=0 (watch cache, paginated by 500 like client-go),
    WATCH with bookmarks, resume from the last resourceVersion, re-LIST (consistent read) on 410 Gone."""

    abstract = True
    scenario = "informers"
    network_timeout = WATCH_READ_TIMEOUT_S

    @task
    def inform(self) -> None:
        self.stop_if_past_deadline()
        Reflector(self.api, self.params["resource"], informer_names(self.params), namespace=self.params["namespace"],
                  deadline=self.config.stop_at, reconnect_spread_s=float(self.params["reconnect_spread_s"])).run()
        raise StopUser()


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    return [user_class(InformerUser, "Informer", config, params, counts.get("Informer", 0))]
