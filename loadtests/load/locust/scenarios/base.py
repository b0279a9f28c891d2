"""The Locust user every scenario builds on: a FastHttpUser that talks to the apiserver of the run.

Scenario modules make concrete classes with `user_class`, which fixes the exact user count (fixed_count),
the target's address, TLS and credentials, so a scenario only writes its behaviour.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

from locust import FastHttpUser
from locust.exception import StopUser

from loadtests.kube.access import ClusterAccess
from loadtests.kube.names import request_name
from loadtests.kube.objects import namespace_manifest
from loadtests.load.contract import LoadConfig
from loadtests.load.locust.transport import JSON, KubeApi, ssl_contexts


class KubeUser(FastHttpUser):
    """A user with a KubeApi on its own connection pool, like one client process of a real cluster."""

    abstract = True
    config: LoadConfig
    params: dict[str, Any]
    scenario = ""
    connection_timeout = 10.0
    network_timeout = 60.0

    access: ClusterAccess  # who this scenario's users are: its tenant's user, or the load's (LoadConfig.access_for)

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        # no cookie jar: the apiserver sets no cookies, and the jar's lock and URL parsing cost every request
        self.client.client.cookiejar = None
        self.api = KubeApi(self.client, self.access)

    def past_deadline(self) -> bool:
        """Whether the run's stop time has passed."""
        return self.config.stop_at is not None and time.time() >= self.config.stop_at

    def stop_if_past_deadline(self) -> None:
        """Users end themselves after the run's stop time, even if Locust failed to stop them."""
        if self.past_deadline():
            raise StopUser()

    def ensure_namespace(self, namespace: str) -> None:
        """The namespace the scenario writes to (the runner normally made it already: then one GET)."""
        status, _ = self.api.get("namespaces", "", namespace, request_name("GET", "namespaces"), missing_ok=True)
        if status == 404:
            body = json_bytes(namespace_manifest(namespace))
            self.api.create("namespaces", "", body, request_name("POST", "namespaces"), ok=(200, 201, 202, 409))


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def user_class(base: type[KubeUser], name: str, config: LoadConfig, params: dict[str, Any], count: int,
               **attributes: Any) -> type[KubeUser]:
    """A concrete user class of `base` with exactly `count` users, bound to the run's target."""
    access = config.access_for(base.scenario or name)
    headers = {"Accept": JSON, "User-Agent": f"k8s-loadtest/{base.scenario or name}"}  # KubeApi adds credentials
    proxy = urlsplit(access.proxy_url) if access.proxy_url else None
    namespace = {
        "abstract": False,
        "fixed_count": count,
        "host": access.server.rstrip("/"),
        "insecure": access.insecure_skip_verify,
        "ssl_context_factory": ssl_contexts(access),
        "default_headers": headers,
        "proxy_host": proxy.hostname if proxy else None,
        "proxy_port": (proxy.port or 80) if proxy else None,
        "config": config,
        "access": access,
        "params": params,
        "__module__": base.__module__,
        **attributes,
    }
    return type(name, (base,), namespace)
