"""LIST pollers: agents that LIST a resource periodically instead of watching it — the pattern that once
made apiservers read hundreds of MB/s from etcd. resource_version "0" is served from the watch cache as it
is; "" asks for a consistent read."""

from __future__ import annotations

from typing import Any

from locust import constant_throughput, task

from loadtests.config.scenarios import poller_names
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, user_class


class ListPollerUser(KubeUser):
    """One LIST (through all its pages when `limit` cuts it) per task run; the pacing gives rate/users."""

    abstract = True
    scenario = "list_pollers"

    @task
    def poll(self) -> None:
        self.stop_if_past_deadline()
        params = self.params
        self.api.list_all(params["resource"], params["namespace"], poller_names(params),
                          resource_version=str(params["resource_version"]), limit=int(params["limit"]),
                          encoding=str(params["encoding"]))


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    count = counts.get("ListPoller", 0)
    if not count:
        return []
    return [user_class(ListPollerUser, "ListPoller", config, params, count,
                       wait_time=constant_throughput(float(params["rate"]) / count))]
