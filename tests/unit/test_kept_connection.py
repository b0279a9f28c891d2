"""A health check's kept connection, against a small HTTP/1.1 server on loopback that counts its connections."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loadtests.controlplane.processes import http_ok
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import TRANSPORT_ERRORS, KeptConnection, RestClient
from tests.loopback import CountingHandler, CountingServer, serving
from tests.unit.test_measure_probes import closed_port


class _Server(CountingServer):
    close_after_next = False  # the connection is closed after the next answer, unannounced (a restarting server)
    drop_next = False  # the next request is read and its connection closed with no answer
    bodies: list[bytes] = []  # the bodies of the requests that came with one


class _Handler(CountingHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        if self.server.drop_next:
            self.server.drop_next = False
            self.close_connection = True
            return
        body = b'{"health":"true"}' if self.path == "/health?exclude=NOSPACE" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.server.close_after_next:
            self.server.close_after_next = False
            self.close_connection = True  # no "Connection: close": the client learns of it on its next ask
        self.end_headers()
        self.wfile.write(body)

    def do_PATCH(self) -> None:  # noqa: N802 - the standard library's name
        self.server.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.drop_next:
            self.server.drop_next = False
            self.close_connection = True
            return
        body = b'{"kind":"ConfigMap"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def server() -> Iterator[_Server]:
    with serving(_Server, _Handler) as found:
        yield found


def test_asks_share_one_connection_and_a_closed_one_is_replaced_once(server: _Server) -> None:
    kept = KeptConnection()
    url = f"http://127.0.0.1:{server.server_port}"
    for _ in range(3):
        assert http_ok(f"{url}/healthz", kept=kept)
    assert server.connections == 1
    assert http_ok(f"{url}/health?exclude=NOSPACE", expect=b'"health":"true"', kept=kept)  # the query is sent
    assert not http_ok(f"{url}/healthz", expect=b'"health":"true"', kept=kept)
    server.close_after_next = True
    assert http_ok(f"{url}/healthz", kept=kept)  # answered, then closed by the server
    assert http_ok(f"{url}/healthz", kept=kept)  # the kept one is seen closed: asked on a new one
    assert server.connections == 2
    kept.close()


def test_a_refused_connect_is_a_transport_error_and_a_failed_check() -> None:
    kept = KeptConnection()
    url = f"http://127.0.0.1:{closed_port()}/healthz"
    with pytest.raises(TRANSPORT_ERRORS):
        kept.get(url, timeout_s=1.0)
    assert not http_ok(url, kept=kept)


def test_a_rest_clients_plain_requests_go_over_one_kept_connection_and_its_resets_follow_the_retry_rule(
        server: _Server) -> None:
    """A probe's writes (RestClient's `kept`): one connection for every request, each counted; a connection
    dropped under a write is not resent (client-go resends only a GET), under a GET it is, on a new one."""
    server.bodies = []
    client = RestClient(ClusterAccess(server=f"http://127.0.0.1:{server.server_port}", kubeconfig=""), kept=True,
                        sleep=lambda _: None)
    path = "/api/v1/namespaces/probe/configmaps/watch-delay-probe"
    for seq in range(3):
        assert client.patch(path, {"metadata": {"annotations": {"seq": str(seq)}}}) == {"kind": "ConfigMap"}
    assert server.connections == 1 and server.bodies[-1] == b'{"metadata": {"annotations": {"seq": "2"}}}'
    server.drop_next = True
    with pytest.raises(ApiError) as raised:
        client.patch(path, {"metadata": {}})
    assert raised.value.status == 0
    server.drop_next = True
    assert client.get("/health", exclude="NOSPACE") == {"health": "true"}  # asked again, on a third connection
    assert server.connections == 3
    assert client.sent() == {("PATCH", "configmaps"): 4, ("LIST", ""): 2}
    client.close()
