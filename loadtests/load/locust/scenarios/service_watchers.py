"""Kube-proxy-like watchers: one LIST+WATCH per fake node on what the controller-manager keeps for one Service,
its Endpoints (one object holding every address: each pod change behind the Service re-sends all of it to
every watcher) or its EndpointSlices (at most 100 endpoints each: a change re-sends one slice). Each watcher
counts the events and bytes it received, which is the difference this scenario exists to show."""

from __future__ import annotations

from typing import Any

from gevent.lock import Semaphore
from locust import task
from locust.exception import StopUser

from loadtests.config.scenarios import RECEIVED, ServiceWatch
from loadtests.kube.names import request_name
from loadtests.kube.objects import service_manifest
from loadtests.kube.reflector import Reflector
from loadtests.kube.watch import WATCH_READ_TIMEOUT_S, WatchEvent
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.scenarios.base import KubeUser, json_bytes, user_class


class ServiceSetup:
    """Makes the Service once per Locust process: the first watcher to start creates it if missing, the
    others wait for that instead of each asking the apiserver."""

    def __init__(self) -> None:
        self.lock = Semaphore()
        self.done = False


class ServiceWatcherUser(KubeUser):
    """Watches the Service's Endpoints (fieldSelector=metadata.name=<service>) or EndpointSlices
    (labelSelector=kubernetes.io/service-name=<service>) with the shared LIST+WATCH loop; every event it
    receives is reported as one request of type RECV, its size as the response length, so Locust sums the
    events and bytes over all watchers and workers."""

    abstract = True
    scenario = "service_watchers"
    network_timeout = WATCH_READ_TIMEOUT_S
    service_watch: ServiceWatch
    _setup: ServiceSetup

    def on_start(self) -> None:
        with self._setup.lock:
            if not self._setup.done:
                self.ensure_namespace(self.service_watch.namespace)
                self.ensure_service()
                self._setup.done = True

    def ensure_service(self) -> None:
        """The Service the watchers follow (normally made by an earlier step or process: then one GET)."""
        namespace, name = self.service_watch.namespace, self.params["service"]
        status, _ = self.api.get("services", namespace, name, request_name("GET", "services"), missing_ok=True)
        if status == 404:
            body = json_bytes(service_manifest(name, namespace))
            self.api.create("services", namespace, body, request_name("POST", "services"), ok=(200, 201, 202, 409))

    def received(self, event: WatchEvent) -> None:
        self.environment.events.request.fire(request_type=RECEIVED, name=self.service_watch.received,
                                             response_time=0, response_length=event.size, exception=None,
                                             context={})

    @task
    def watch(self) -> None:
        self.stop_if_past_deadline()
        spec = self.service_watch
        Reflector(self.api, spec.resource, spec.names, namespace=spec.namespace,
                  field_selector=spec.field_selector, label_selector=spec.label_selector,
                  deadline=self.config.stop_at, on_event=self.received).run()
        raise StopUser()


def build(config: LoadConfig, params: dict[str, Any], counts: dict[str, int]) -> list[type[KubeUser]]:
    return [user_class(ServiceWatcherUser, "ServiceWatcher", config, params, counts.get("ServiceWatcher", 0),
                       service_watch=ServiceWatch.of(params), _setup=ServiceSetup())]
