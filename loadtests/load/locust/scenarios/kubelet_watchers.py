"""Kubelet-like watchers: one WATCH per fake node on the pods bound to it (all namespaces), as every kubelet
keeps one. Their number grows with the cluster, which is the load this scenario exists to show. A plan's
`encoding: protobuf` makes them ask as a real kubelet does (docs/node-agents.md), JSON by default."""

from __future__ import annotations

import itertools
from typing import Any

from locust import task
from locust.exception import StopUser

from loadtests.config.scenarios import KUBELET_WATCH
from loadtests.kube.reflector import Reflector
from loadtests.kube.watch import WATCH_READ_TIMEOUT_S
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, user_class


class KubeletWatcherUser(KubeUser):
    """Watches pods with fieldSelector=spec.nodeName=<its node>, bookmarks on, resuming from the last
    resourceVersion each time a watch ends (timeoutSeconds 5-10 min, jittered like client-go), in the plan's
    encoding."""

    abstract = True
    scenario = "kubelet_watchers"
    network_timeout = WATCH_READ_TIMEOUT_S
    _slots: itertools.count[int]

    def on_start(self) -> None:
        # distinct nodes across worker processes: worker i takes nodes i, i+W, i+2W, ...
        runner = self.environment.runner
        worker = max(0, getattr(runner, "worker_index", 0) or 0)
        stride = max(1, self.config.workers)
        self.node = self.config.node(worker + next(self._slots) * stride)

    @task
    def watch(self) -> None:
        self.stop_if_past_deadline()
        Reflector(self.api, "pods", KUBELET_WATCH, field_selector=f"spec.nodeName={self.node}",
                  deadline=self.config.stop_at, encoding=str(self.params["encoding"])).run()
        raise StopUser()


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    count = counts.get("KubeletWatcher", 0)
    return [user_class(KubeletWatcherUser, "KubeletWatcher", config, params, count, _slots=itertools.count())]
