"""One endpoint asked again and again over one kept connection, in HTTP/1.1 written and read here.

The asks are small and frequent (a component's health each few seconds, a probe's write twice a second), each in
a thread that slept in between, so what an ask costs is mostly the Python it walks through cold: http.client
parses every answer's headers with the email package (a feed parser, a policy, a message object), which made an
ask cost more than the request. Here a request is one write and an answer a few finds in what one read brought:
a /livez over TLS on loopback costs 463 µs of the harness's CPU where http.client took 692, a probe's PATCH 510 µs
where it took 785 (medians, each after half a second asleep, the 2-core machine busy: benchmarks/kept_cost.py).
What HTTP/1.1 allows an answer to be (a length, chunks, a body to the connection's end, no body for HEAD, 1xx, 204
and 304) is read; errors are those http.client raises, so callers tell a reset apart as before.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

import urllib3
import urllib3.util.wait

# what a kept connection the server closed in between raises on the next ask (it is asked again once, on a new one)
KEPT_RESET_ERRORS = (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionResetError,
                     BrokenPipeError, ConnectionAbortedError)
READ_SIZE = 1 << 16
MAX_HEAD = 1 << 16  # an answer's status line and headers longer than this are not an answer
NO_BODY = (204, 304)


@dataclass(frozen=True)
class Reply:
    """A kept connection's answer: its status, its body and its headers (looked up without regard to case)."""

    status: int
    data: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    def drain_conn(self) -> None:
        """Nothing to drain: the body was read (the interface urllib3's answers have, for RestClient)."""

    def release_conn(self) -> None:
        """Nothing to give back: the connection is kept (as above)."""


class Headers(dict[str, str]):
    """An answer's headers, their names in lower case and looked up in any case (a name sent twice: its values
    joined by commas, as HTTP allows)."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name.lower() if isinstance(name, str) else name)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


class _Answer:
    """What one connection brought, read from as an answer is taken apart: the bytes already read, and more as
    they are needed."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._at = 0

    def _fill(self) -> bool:
        data = self._sock.recv(READ_SIZE)
        if not data:
            return False
        self._buffer = self._buffer[self._at:] + data
        self._at = 0
        return True

    def line(self, limit: int = MAX_HEAD) -> bytes | None:
        """The next line without its CRLF; None when the connection ended before one."""
        while (end := self._buffer.find(b"\r\n", self._at)) < 0:
            if len(self._buffer) - self._at > limit:
                raise http.client.LineTooLong("header line")
            if not self._fill():
                return None
        found = self._buffer[self._at:end]
        self._at = end + 2
        return found

    def exactly(self, size: int) -> bytes:
        while len(self._buffer) - self._at < size:
            if not self._fill():
                raise http.client.IncompleteRead(self._buffer[self._at:], size - (len(self._buffer) - self._at))
        found = self._buffer[self._at:self._at + size]
        self._at += size
        return found

    def rest(self) -> bytes:
        """Everything up to the connection's end (a body with neither a length nor chunks)."""
        while self._fill():
            pass
        found = self._buffer[self._at:]
        self._at = len(self._buffer)
        return found

    def head(self) -> tuple[int, Headers]:
        """The status and headers of the next final answer (a 1xx before it is read past)."""
        while True:
            status_line = self.line()
            if status_line is None:
                raise http.client.RemoteDisconnected("Remote end closed connection without response")
            version, _, rest = status_line.partition(b" ")
            code = rest[:3]
            if not version.startswith(b"HTTP/") or not code.isdigit():
                raise http.client.BadStatusLine(status_line.decode("latin-1"))
            headers = Headers()
            while line := self.line():
                name, _, value = line.decode("latin-1").partition(":")
                name, value = name.strip().lower(), value.strip()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
            if not 100 <= int(code) < 200:
                return int(code), headers

    def next_chunk(self) -> bytes:
        """The next chunk of a chunked body as it came (a watch's events are read one chunk at a time); b"" at
        the body's end, its trailer read past."""
        size_line = self.line(1024)
        if size_line is None:
            raise http.client.IncompleteRead(b"")
        try:
            size = int(size_line.partition(b";")[0].strip(), 16)
        except ValueError:
            raise http.client.IncompleteRead(b"") from None
        if size == 0:
            while self.line():  # the trailer, to its empty line
                pass
            return b""
        found = self.exactly(size)
        self.exactly(2)  # the CRLF after a chunk's data
        return found

    def chunked(self) -> bytes:
        found = []
        try:
            while chunk := self.next_chunk():
                found.append(chunk)
        except http.client.IncompleteRead as error:
            raise http.client.IncompleteRead(b"".join(found) + error.partial) from None
        return b"".join(found)

    def ready(self, timeout_s: float) -> bool:
        """Whether bytes can be read without blocking, waiting up to timeout_s for them: unread ones already here,
        decrypted ones TLS holds, or the socket's within the wait."""
        if self._at < len(self._buffer):
            return True
        pending = getattr(self._sock, "pending", None)
        if pending is not None and pending():
            return True
        return bool(urllib3.util.wait.wait_for_read(self._sock, timeout=max(0.0, timeout_s)))

    def body(self, method: str, status: int, headers: Mapping[str, str]) -> tuple[bytes, bool]:
        """The answer's body, and whether the connection ends with it."""
        closes = "close" in headers.get("Connection", "").lower()
        if method == "HEAD" or status in NO_BODY:
            return b"", closes
        if "chunked" in headers.get("Transfer-Encoding", "").lower():
            return self.chunked(), closes
        length = headers.get("Content-Length")
        if length is not None and length.strip().isdigit():
            return self.exactly(int(length)), closes
        return self.rest(), True


class KeptConnection:
    """One endpoint asked again and again: its connection is kept between asks, so an ask costs a request, not a
    TLS handshake on both sides. A kept connection the server closed in between is seen closed before the ask and
    opened again, as urllib3's pool does; one closed while the ask was under way is asked again once on a new one
    (`resend_reset`), as send_once would have asked; a timeout or a refused connect is not. Its errors are OSError
    or http.client.HTTPException, which RestClient's TRANSPORT_ERRORS covers."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls
        self._sock: socket.socket | None = None
        self._endpoint: tuple[str, str, int | None] = ("", "", None)

    def _connect(self, url: SplitResult, timeout_s: float) -> socket.socket:
        endpoint = (url.scheme, url.hostname or "", url.port)
        if self._sock is not None and (endpoint != self._endpoint or
                                       urllib3.util.wait.wait_for_read(self._sock, timeout=0.0)):
            self.close()  # another endpoint, or readable while idle: the server closed it (or sent unasked)
        if self._sock is None:
            self._sock, self._endpoint = connect(url, self._tls, timeout_s), endpoint
        self._sock.settimeout(timeout_s)
        return self._sock

    def _ask(self, method: str, url: SplitResult, body: bytes | None, headers: Mapping[str, str],
             timeout_s: float) -> Reply:
        sock = self._connect(url, timeout_s)
        try:
            sock.sendall(request_bytes(method, url, body, headers))
            answer = _Answer(sock)
            status, found = answer.head()
            data, closes = answer.body(method, status, found)
        except BaseException:
            self.close()  # in an unknown state: never asked again
            raise
        if closes:
            self.close()
        return Reply(status, data, found)

    def send(self, method: str, url: str, *, body: bytes | None = None, headers: Mapping[str, str] | None = None,
             timeout_s: float = 10.0, resend_reset: bool = True) -> Reply:
        parts = urlsplit(url)
        reused = self._sock is not None
        try:
            return self._ask(method, parts, body, headers or {}, timeout_s)
        except KEPT_RESET_ERRORS:
            if not (reused and resend_reset):
                raise
            return self._ask(method, parts, body, headers or {}, timeout_s)

    def get(self, url: str, timeout_s: float = 10.0) -> Reply:
        return self.send("GET", url, timeout_s=timeout_s)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def connect(url: SplitResult, tls: ssl.SSLContext | None, timeout_s: float) -> socket.socket:
    """A new connection to the URL's endpoint (TLS for https, with `tls` or the default context), no Nagle."""
    port = url.port or (443 if url.scheme == "https" else 80)
    host = url.hostname or ""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if url.scheme == "https":
            sock = (tls or ssl.create_default_context()).wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise
    return sock


class Streamed:
    """An answer on a connection of its own whose body is read as it comes, a chunk at a time (a watch): its status
    and headers are read, its body not. It has the interface RestClient reads urllib3's streamed answers by."""

    def __init__(self, sock: socket.socket, answer: _Answer, status: int, headers: Headers) -> None:
        self._sock, self._answer = sock, answer
        self.status, self.headers = status, headers
        self._chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        self._read = False

    def read_chunk(self) -> bytes:
        """The body's next chunk (b"": its end); a body not chunked comes whole, as one."""
        if self._chunked:
            return self._answer.next_chunk()
        if self._read:
            return b""
        self._read = True
        return self._answer.body("GET", self.status, self.headers)[0]

    def read(self) -> bytes:
        """The rest of the body, whole (an answer that is not the watch asked for)."""
        return b"".join(iter(self.read_chunk, b""))

    def ready(self, timeout_s: float) -> bool:
        return self._answer.ready(timeout_s)

    def abort(self) -> None:
        """From another thread: the plain socket's shutdown, so a blocked read returns and the TLS state the
        reading thread uses is left alone."""
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)

    def drain_conn(self) -> None:
        """Nothing to drain: the connection is never reused."""

    def release_conn(self) -> None:
        self._sock.close()


def open_stream(method: str, url: str, headers: Mapping[str, str], tls: ssl.SSLContext | None, *,
                connect_timeout_s: float, read_timeout_s: float) -> Streamed:
    """A request on a new connection of its own, its answer's head read and its body left to be streamed."""
    parts = urlsplit(url)
    sock = connect(parts, tls, connect_timeout_s)
    try:
        sock.settimeout(read_timeout_s)
        sock.sendall(request_bytes(method, parts, None, headers))
        answer = _Answer(sock)
        status, found = answer.head()
    except BaseException:
        sock.close()
        raise
    return Streamed(sock, answer, status, found)


def request_bytes(method: str, url: SplitResult, body: bytes | None, headers: Mapping[str, str]) -> bytes:
    """A request as it goes on the wire: its line, Host, the headers given, a Content-Length with any body."""
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {url.netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
