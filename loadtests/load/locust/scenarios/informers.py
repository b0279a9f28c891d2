"""Informers: LIST then WATCH from the list's resourceVersion, as every controller and operator does for
each resource it follows; `count` of them on one resource, cluster-wide or in one namespace. With `watch_list`
each gets its state by API streaming instead (one WATCH whose initial events are the state). Every informer
reports the watch events it received (one RECV per event, its bytes; its LISTs' bytes are their own rows) and,
each time it is in sync again after losing its state, how long that took (SYNC rows: its first return from
the cut, with the bytes it received to get there, and the sync itself; any later one in a row of its own)."""

from __future__ import annotations

from typing import Any

from locust import task
from locust.exception import StopUser

from loadtests.config.scenarios import (
    RECEIVED,
    SYNCED,
    InformerSyncNames,
    informer_names,
    informer_received,
    informer_sync_names,
)
from loadtests.kube.reflector import Reflector
from loadtests.kube.watch import WATCH_READ_TIMEOUT_S, WatchEvent
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, user_class


class InformerUser(KubeUser):
    """The reflector loop: first LIST with resourceVersion=0 (watch cache, paginated by 500 like client-go),
    WATCH with bookmarks, resume from the last resourceVersion, re-LIST (consistent read) on 410 Gone; or, with
    watch_list, one WATCH with sendInitialEvents=true (a consistent state, resourceVersionMatch=NotOlderThan)."""

    abstract = True
    scenario = "informers"
    network_timeout = WATCH_READ_TIMEOUT_S
    received_name: str
    sync_names: InformerSyncNames
    recoveries = 0  # returns to sync after losing its state, so far

    def _fire(self, kind: str, name: str, response_time_ms: float, length: int) -> None:
        self.environment.events.request.fire(request_type=kind, name=name, response_time=response_time_ms,
                                             response_length=length, exception=None, context={})

    def received(self, event: WatchEvent) -> None:
        self._fire(RECEIVED, self.received_name, 0, event.size)

    def synced(self, out_of_sync_s: float, sync_s: float, nbytes: int) -> None:
        self.recoveries += 1
        for name, took_ms, length in self.sync_names.rows(self.recoveries, out_of_sync_s, sync_s, nbytes):
            self._fire(SYNCED, name, took_ms, length)

    @task
    def inform(self) -> None:
        self.stop_if_past_deadline()
        Reflector(self.api, self.params["resource"], informer_names(self.params), namespace=self.params["namespace"],
                  deadline=self.config.stop_at, reconnect_spread_s=float(self.params["reconnect_spread_s"]),
                  watch_list=bool(self.params["watch_list"]), relist_on_cut=bool(self.params["relist_on_cut"]),
                  on_event=self.received, on_synced=self.synced).run()
        raise StopUser()


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    return [user_class(InformerUser, "Informer", config, params, counts.get("Informer", 0),
                       received_name=informer_received(params), sync_names=informer_sync_names(params))]
