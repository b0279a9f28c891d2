"""A health check's kept connection, against a small HTTP/1.1 server on loopback that counts its connections."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator

import pytest

from loadtests.controlplane.processes import http_ok
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError, Gone
from loadtests.kube.kept import KeptConnection, open_stream
from loadtests.kube.rest import TRANSPORT_ERRORS, RestClient
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

    def do_HEAD(self) -> None:  # noqa: N802 - the standard library's name
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")  # the length GET's body would have

    def do_PUT(self) -> None:  # noqa: N802 - the standard library's name
        """Each way HTTP/1.1 allows an answer to be written, raw, by the path asked."""
        self.rfile.read(int(self.headers["Content-Length"]))
        self.wfile.write(WIRE[self.path])
        if self.path in CLOSING:
            self.close_connection = True

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


# answers written raw (to PUT /<path>), and what a kept connection reads of each: (status, body)
WIRE = {
    "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\n",
    "/continue": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nCONTENT-LENGTH: 2\r\n\r\nok",
    "/no-content": b"HTTP/1.1 204 No Content\r\n\r\n",
    "/to-the-end": b"HTTP/1.0 200 OK\r\n\r\nall of it",
    "/announced": b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye",
    "/cut": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
    "/cut-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort",
    "/not-http": b"SSH-2.0-OpenSSH\r\n\r\n",
}
READ = {"/chunked": (200, b"hello, world"), "/continue": (201, b"ok"), "/no-content": (204, b""),
        "/to-the-end": (200, b"all of it"), "/announced": (200, b"bye")}
CLOSING = {"/to-the-end", "/announced", "/cut", "/cut-chunk", "/not-http"}


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


def test_every_way_an_answer_may_be_written_is_read_and_the_connection_kept_only_where_it_can_be(
        server: _Server) -> None:
    kept = KeptConnection()
    url = f"http://127.0.0.1:{server.server_port}"
    for path, (status, body) in READ.items():
        reply = kept.send("PUT", url + path, body=b"{}")
        assert (reply.status, reply.data) == (status, body), path
    assert kept.send("HEAD", url + "/").data == b""  # a HEAD's answer has no body, whatever its length says
    assert kept.send("PUT", url + "/continue", body=b"").headers["content-length"] == "2"  # any case
    # /to-the-end and /announced each ended their connection, the others shared theirs: three in all
    assert server.connections == 3


@pytest.mark.parametrize("path", ["/cut", "/cut-chunk", "/not-http"])
def test_an_answer_cut_short_or_not_http_is_a_transport_error_and_the_connection_is_dropped(
        server: _Server, path: str) -> None:
    kept = KeptConnection()
    url = f"http://127.0.0.1:{server.server_port}"
    with pytest.raises(TRANSPORT_ERRORS):
        kept.send("PUT", url + path, body=b"{}")
    assert kept.get(f"{url}/healthz").data == b"ok"  # asked on a new connection
    assert server.connections == 2


class _WatchServer(CountingServer):
    """Answers /api/v1/namespaces/<ns>/pods?watch=1 as the apiserver does, in chunks: its first ones in one write,
    the rest once `more` is set (or 5 s passed); namespace "gone" is answered 410, "broken" 500."""

    first: list[bytes] = []
    rest: list[bytes] = []
    more = threading.Event()
    asked: list[tuple[str, dict[str, str]]] = []  # each request's path and headers


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class _WatchHandler(CountingHandler):
    server: _WatchServer

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.server.asked.append((self.path, dict(self.headers)))
        status = {"/api/v1/namespaces/gone/pods": 410, "/api/v1/namespaces/broken/pods": 500}.get(
            self.path.partition("?")[0], 200)
        if status != 200:
            body = json.dumps({"kind": "Status", "code": status, "message": f"said {status}"}).encode()
            self.wfile.write(f"HTTP/1.1 {status} No\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            return
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + b"".join(_chunk(part) for part in self.server.first))
        self.wfile.flush()
        self.server.more.wait(5.0)
        with contextlib.suppress(OSError):  # the client may have gone
            self.wfile.write(b"".join(_chunk(part) for part in self.server.rest) + b"0\r\n\r\n")
        self.close_connection = True


@pytest.fixture()
def watch_server() -> Iterator[_WatchServer]:
    with serving(_WatchServer, _WatchHandler) as found:
        found.first, found.rest, found.more, found.asked = [], [], threading.Event(), []
        yield found


def test_a_streamed_answer_is_read_chunk_by_chunk_and_says_when_more_is_there(watch_server: _WatchServer) -> None:
    watch_server.first, watch_server.rest = [b"a", b"bb"], [b"ccc"]
    answer = open_stream("GET", f"http://127.0.0.1:{watch_server.server_port}/api/v1/namespaces/w/pods?watch=1",
                         {}, None, connect_timeout_s=2.0, read_timeout_s=5.0)
    assert answer.status == 200
    assert answer.read_chunk() == b"a"
    assert answer.ready(0.0)  # the next chunk came in the same read
    assert answer.read_chunk() == b"bb"
    assert not answer.ready(0.05)  # nothing more until the server writes it
    watch_server.more.set()
    assert answer.ready(5.0)
    assert answer.read_chunk() == b"ccc"
    assert answer.read_chunk() == b""  # the body's end
    answer.release_conn()


def _watch_client(server: _WatchServer) -> RestClient:
    access = ClusterAccess(server=f"http://127.0.0.1:{server.server_port}", kubeconfig="", token="secret")
    return RestClient(access, user_agent="k8s-loadtest/test", sleep=lambda _: None)


def test_a_batched_watch_goes_on_a_connection_of_its_own_with_the_pools_headers_and_query(
        watch_server: _WatchServer) -> None:
    events = [b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}\n',
              b'{"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"3"}}}\n']
    watch_server.first, watch_server.rest = events[:1], events[1:]
    watch_server.more.set()
    client = _watch_client(watch_server)
    stream = client.watch("pods", "w", resource_version="1", timeout_s=30, batch_s=0.25)
    assert [(e.type, e.resource_version) for e in stream] == [("ADDED", "2"), ("DELETED", "3")]
    assert stream.broken is None and stream.batch_s == 0.25
    pooled = client.watch("pods", "w", resource_version="1", timeout_s=30)  # batch_s 0: the pool's, as before
    assert [e.type for e in pooled] == ["ADDED", "DELETED"] and pooled.batch_s == 0.0
    (own_path, own), (pool_path, pool) = watch_server.asked
    assert own_path == pool_path and "watch=1" in own_path and "resourceVersion=1" in own_path
    for name in ("Authorization", "Accept", "User-Agent"):
        assert own[name] == pool[name], name
    assert own["Authorization"] == "Bearer secret" and own["User-Agent"] == "k8s-loadtest/test"
    assert client.sent() == {("WATCH", "pods"): 2}
    client.close()


def test_a_batched_watch_refused_raises_as_the_pools_and_abort_ends_a_blocked_read(
        watch_server: _WatchServer) -> None:
    client = _watch_client(watch_server)
    with pytest.raises(Gone, match="said 410"):
        client.watch("pods", "gone", batch_s=0.25)
    with pytest.raises(ApiError, match="said 500") as refused:
        client.watch("pods", "broken", batch_s=0.25)
    assert refused.value.status == 500
    watch_server.first = [b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}}\n']
    stream = client.watch("pods", "w", batch_s=0.25)
    events = iter(stream)
    assert next(events).type == "ADDED"  # then the server says nothing more
    aborted = threading.Timer(0.2, stream.abort)
    aborted.start()
    assert list(events) == []  # the read blocked on the silent server returned: the stream ended
    assert isinstance(stream.broken, TRANSPORT_ERRORS)  # as a broken connection, which the reflector tells
    aborted.join()
    client.close()
