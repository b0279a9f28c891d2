"""A /metrics page read paced (kube/paced.PACE_S): a server that writes its page in small chunks as it
renders it, on loopback; the page comes whole, in a few reads rather than one per chunk."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests.kube.access import ClusterAccess
from loadtests.kube.rest import RestClient
from loadtests.measure import prometheus
from tests.loopback import CountingHandler, CountingServer, serving

CHUNKS = 60
CHUNK = b"x_total{n=\"%d\"} 1\n"


def item(index: int) -> bytes:
    """A LIST's part: its head, an item, or its end with the last item."""
    return (b'{"items": [' if index == 0 else b"") + b'{"n": %d}' % index + (b"]}" if index == CHUNKS - 1 else b",")


class _Server(CountingServer):
    cut_after: int | None = None  # chunks written before the connection is dropped mid-body


class _Handler(CountingHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        listed = self.path.startswith("/api/")  # a LIST, written a JSON item at a time
        for index in range(CHUNKS):  # as a Go component renders its page: a chunk, then a pause
            if self.server.cut_after is not None and index == self.server.cut_after:
                self.close_connection = True
                return
            data = item(index) if listed else CHUNK % index
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            time.sleep(0.002)
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture()
def server() -> Iterator[_Server]:
    with serving(_Server, _Handler) as found:
        yield found


def wakeups() -> int:
    """This thread's voluntary context switches so far (Linux): each one a sleep it woke from."""
    status = Path("/proc/thread-self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("voluntary_ctxt_switches"))


def test_a_page_written_in_small_chunks_comes_whole_with_few_wakeups(server: _Server) -> None:
    page = prometheus.page(f"http://127.0.0.1:{server.server_port}/metrics", timeout_s=10)
    expected = "".join((CHUNK % index).decode() for index in range(CHUNKS))
    for _ in range(2):  # over the same kept connection
        before = wakeups()
        assert page.text() == expected
        # 60 chunks 2 ms apart (120 ms): a reader blocking on each wakes about 60 times; paced, about once per
        # 10 ms (the first wait, for the answer, included)
        assert wakeups() - before <= CHUNKS // 3
    assert server.connections == 1
    page.close()


def test_a_page_cut_off_mid_body_is_an_error_not_a_shorter_page(server: _Server) -> None:
    server.cut_after = 10
    page = prometheus.page(f"http://127.0.0.1:{server.server_port}/metrics", timeout_s=10)
    with pytest.raises(Exception) as raised:
        page.text()
    assert "IncompleteRead" in repr(raised.value) or "ProtocolError" in repr(raised.value), raised.value
    page.close()


def test_a_paced_clients_answer_written_in_small_chunks_comes_whole_with_few_wakeups(server: _Server) -> None:
    """The health sampler's LIST of every Lease, which the apiserver writes as it encodes it, comes the same way."""
    access = ClusterAccess(server=f"http://127.0.0.1:{server.server_port}", kubeconfig="")
    client = RestClient(access, pool_size=1, paced=True)
    before = wakeups()
    assert client.request("GET", "/api/v1/leases") == {"items": [{"n": index} for index in range(CHUNKS)]}
    assert wakeups() - before <= CHUNKS // 3
    client.close()


class _ClosingHandler(CountingHandler):
    """A server that closes its connection after each answer (Connection: close), its body sent after a pause."""

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = b"".join(CHUNK % index for index in range(CHUNKS))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        time.sleep(0.001)  # the head first: the body comes after the client learnt the connection closes
        self.wfile.write(body)
        self.close_connection = True


def test_a_page_from_a_server_that_closes_after_each_answer_comes_whole() -> None:
    """http.client closes a connection as soon as an answer's head says it will close; the paced reader still
    reads the body (it once read from the closed descriptor: 15 of 300 such reads failed)."""
    with serving(CountingServer, _ClosingHandler) as closing:
        expected = "".join((CHUNK % index).decode() for index in range(CHUNKS))
        for _ in range(20):
            page = prometheus.page(f"http://127.0.0.1:{closing.server_port}/metrics", timeout_s=10)
            try:
                assert page.text() == expected
            finally:
                page.close()
        assert closing.connections == 20
