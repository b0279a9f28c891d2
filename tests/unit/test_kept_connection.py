"""A health check's kept connection, against a small HTTP/1.1 server on loopback that counts its connections."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loadtests.controlplane.processes import http_ok
from loadtests.kube.rest import TRANSPORT_ERRORS, KeptConnection
from tests.loopback import CountingHandler, CountingServer, serving
from tests.unit.test_measure_probes import closed_port


class _Server(CountingServer):
    close_after_next = False  # the connection is closed after the next answer, unannounced (a restarting server)


class _Handler(CountingHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = b'{"health":"true"}' if self.path == "/health?exclude=NOSPACE" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if self.server.close_after_next:
            self.server.close_after_next = False
            self.close_connection = True  # no "Connection: close": the client learns of it on its next ask
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
    assert http_ok(f"{url}/healthz", kept=kept)  # the kept one fails: asked again on a new one
    assert server.connections == 2
    kept.close()


def test_a_refused_connect_is_a_transport_error_and_a_failed_check() -> None:
    kept = KeptConnection()
    url = f"http://127.0.0.1:{closed_port()}/healthz"
    with pytest.raises(TRANSPORT_ERRORS):
        kept.get(url, timeout_s=1.0)
    assert not http_ok(url, kept=kept)
