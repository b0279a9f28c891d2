"""The harness's clients resend what API Priority and Fairness refused (429 with Retry-After), as client-go does,
against the real apiserver of the shared control plane.

A user of its own is sent by a FlowSchema (precedence 100) to a priority level of its own with no seats: Limited,
nominalConcurrencyShares 0, nothing lent or borrowed, limitResponse Reject. No seats alone does not refuse every
request: a request that asks for more seats than the level has is let through when nothing else of the level is
executing (`canAccommodateSeatsLocked` in apiserver@v0.37.2 `pkg/util/flowcontrol/fairqueuing/queueset/queueset.go`),
so a lone GET is served. The level is therefore kept busy: one ConfigMap POST of the user is held in a validating
webhook of the test's own (matched to that user only) until the test lets it go, and while it executes every
other request of the user is refused at once, 429 with Retry-After, deterministically.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loadtests.config.tenants import FlowSchemaSpec, Tenant
from loadtests.controlplane import tenants
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane
from loadtests.controlplane.pki import Authority, write_kubeconfig
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient, send_once
from loadtests.kube.retry import RETRIED, Retried
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.measure.prometheus import scrape
from loadtests.polling import poll_until
from tests.checks import send_json

REJECTED = "apiserver_flowcontrol_rejected_requests_total"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
HELD = "k8s-loadtest/held-by-webhook"
_users = iter(range(1, 1000))


class HoldingWebhook:
    """An HTTPS admission webhook on loopback that holds every review until release() (or 25 s), then allows it."""

    def __init__(self, pki_dir: Path, stem: str) -> None:
        pair = Authority.load(pki_dir).issue(stem, stem, server_names=("127.0.0.1",), client=False)
        self.called, self.released = threading.Event(), threading.Event()
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                webhook.called.set()
                webhook.released.wait(25.0)
                send_json(self, 200, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                    "uid": review["request"]["uid"], "allowed": True}})

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(pair.cert, pair.key)
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="holding-webhook", daemon=True)
        self.thread.start()

    def configuration(self, name: str, user: str, ca_file: Path) -> dict[str, Any]:
        """A ValidatingWebhookConfiguration sending the user's ConfigMap creations (and nobody else's) here."""
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name}, "webhooks": [{
                    "name": "hold.k8s-loadtest.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                    "failurePolicy": "Ignore", "timeoutSeconds": 30,
                    "clientConfig": {"url": f"https://127.0.0.1:{self.server.server_address[1]}/hold",
                                     "caBundle": base64.b64encode(ca_file.read_bytes()).decode()},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                               "resources": ["configmaps"], "scope": "Namespaced"}],
                    "matchConditions": [{"name": "the-throttled-user",
                                         "expression": f"request.userInfo.username == '{user}'"}]}]}

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@dataclass
class Throttled:
    """A user whose every request is refused while `hold()` keeps its priority level busy."""

    user: str
    access: ClusterAccess
    admin: RestClient
    server: str
    webhook: HoldingWebhook
    holder: threading.Thread | None = None
    stopping: threading.Event = field(default_factory=threading.Event)

    def rejected(self) -> float:
        """The apiserver's count of the user's level's rejections so far."""
        page = scrape(self.server + "/metrics", self.admin.access, families=[REJECTED])
        return page.total(REJECTED, priority_level=self.user) or 0.0

    def _hold_loop(self) -> None:
        tls = self.access.ssl_context()
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "generateName": "held-", "labels": {HELD: self.user}}}).encode()
        while not self.stopping.is_set():  # a POST made before the webhook is in effect returns at once
            send_once("POST", f"{self.server}/api/v1/namespaces/default/configmaps", tls=tls, body=body,
                      headers={"Content-Type": "application/json"}, timeout_s=40)

    def hold(self) -> None:
        """Keep one request of the user's level executing (held in the webhook), from now until release()."""
        self.holder = threading.Thread(target=self._hold_loop, name="level-holder", daemon=True)
        self.holder.start()
        assert poll_until(self.webhook.called.is_set, 30), "the webhook never held the user's POST"

    def release(self) -> None:
        self.stopping.set()
        self.webhook.released.set()
        if self.holder is not None:
            self.holder.join(timeout=45)


@pytest.fixture()
def throttled(local_plane: LocalControlPlane, control_plane: TargetInfo, rest: RestClient) -> Iterator[Throttled]:
    cluster_dir = local_plane.directory
    user = f"retry-test-{next(_users)}"
    tenant = Tenant(rules=[{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
                    flow_schema=FlowSchemaSpec(shares=0, lendable_percent=0, borrowing_limit_percent=0, queues=0,
                                               precedence=100))
    pair = tenants.issue_certificates(cluster_dir / "pki", {user: tenant})[user]
    write_kubeconfig(tenants.kubeconfig_path(cluster_dir, user), control_plane.access.server,
                     cluster_dir / "pki" / "ca.crt", pair, user)
    webhook = HoldingWebhook(cluster_dir / "pki", f"{user}-webhook")
    made = tenants.manifests({user: tenant})
    found = Throttled(user, tenants.tenant_access(cluster_dir, control_plane.access.server, user), rest,
                      control_plane.access.server, webhook)
    try:
        tenants.make_objects(rest, {user: tenant}, log=lambda _m: None)  # returns once the FlowSchema is in effect
        rest.create(WEBHOOKS, webhook.configuration(user, user, cluster_dir / "pki" / "ca.crt"))
        yield found
    finally:
        found.release()  # no more held POSTs: then the webhook, its configuration and the user's objects go
        webhook.stop()
        rest.delete(f"{WEBHOOKS}/{user}")
        rest.delete("/api/v1/namespaces/default/configmaps", labelSelector=f"{HELD}={user}")
        for manifest in reversed(made):
            rest.delete(f"{tenants.PLURALS[manifest['kind']]}/{manifest['metadata']['name']}")


def test_a_get_refused_by_flow_control_is_resent_until_it_is_served(throttled: Throttled) -> None:
    client = RestClient(throttled.access)
    throttled.hold()
    before = throttled.rejected()
    outcome: dict[str, Any] = {}

    def get() -> None:
        try:
            outcome["answer"] = client.get("/api/v1/namespaces/default")
        except ApiError as error:
            outcome["error"] = error

    getter = threading.Thread(target=get, name="refused-get")
    getter.start()
    try:
        assert poll_until(lambda: throttled.rejected() > before, 30), "flow control never refused the GET"
        assert getter.is_alive(), outcome  # refused, and waiting to resend: not given up
        throttled.admin.delete(f"{tenants.FLOWCONTROL}/flowschemas/{throttled.user}")  # to global-default now
        getter.join(timeout=60)
    finally:
        throttled.release()
        getter.join(timeout=60)
        client.close()
    assert outcome.get("answer", {}).get("metadata", {}).get("name") == "default", outcome
    retried = client.retried()[("GET", "namespaces")]
    assert retried.count >= 1 and retried.waited_s >= retried.count  # APF's Retry-After: 1 s or more
    assert client.sent()[("GET", "namespaces")] == retried.count + 1
    assert isinstance(retried, Retried)


def test_the_loads_lists_refused_by_flow_control_are_retry_rows(throttled: Throttled, tmp_path: Path) -> None:
    load = {"list_pollers": {"rate": 2.0, "users": 1, "resource": "namespaces", "resource_version": "0"}}
    gen = LoadGenerator(StepLoad(load, nodes=0, duration_s=8, out_dir=tmp_path, run_id="it-retry"),
                        throttled.access)
    try:
        gen.start()
        assert gen.wait_spawned(60)
        before = throttled.rejected()
        throttled.hold()
        assert poll_until(lambda: throttled.rejected() > before, 30), "flow control never refused the LISTs"
        outcome = gen.wait(timeout=120)
    finally:
        gen.stop()
        throttled.release()
    retries = [c for c in outcome.client if c.type == RETRIED]
    lists = {c.name: c for c in outcome.client if c.type == "LIST"}
    assert retries and all(c.name in lists for c in retries), outcome.client
    assert sum(c.count for c in retries) >= 1
    assert all(c.p50_ms >= 1000.0 for c in retries)  # the server's Retry-After, 1 s or more
    assert sum(c.failures for c in lists.values()) >= 1  # each refused attempt is an entry of its own row
