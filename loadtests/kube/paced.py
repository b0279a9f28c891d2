"""Responses read in few large reads rather than as they trickle in, for readers of large answers every few
seconds: a /metrics page, a LIST of every Lease."""

from __future__ import annotations

import http.client
import io
import select
import time
from typing import Any

import urllib3
import urllib3.connection

# A page is read in few large reads rather than as it trickles in: a component writes its page in 2 KB chunks
# while it renders it (a 1,000-node step's kube-apiserver, 3 MB over tens of ms), and a reader that blocks on each
# wakes for each, every time cold: the health sampler woke 80-128 times a second at 1,000 nodes. Whenever nothing
# more has arrived yet, the read waits PACE_S first; a page's end comes at most that much later.
PACE_S = 0.01


class _PacedReader(io.RawIOBase):
    """The raw reads of one response (see PACE_S): straight from the socket while the server has sent more,
    after a PACE_S wait when it has not (a TLS socket's decrypted bytes, `pending`, count as sent). Asked by
    poll, which any file descriptor's number suits (select's stop at 1,024)."""

    def __init__(self, sock: Any) -> None:
        super().__init__()
        self._sock = sock
        # read through a file of the socket's own, as http.client's reader was: the socket counts it, so a
        # connection closed once its answer's head says it will close (a server that closes after each
        # answer) keeps its descriptor until the body is read
        self._file = sock.makefile("rb", buffering=0)
        self._arrived = select.poll()
        self._arrived.register(sock, select.POLLIN)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        pending = getattr(self._sock, "pending", None)
        if not (pending is not None and pending()) and not self._arrived.poll(0):
            time.sleep(PACE_S)
        return self._file.readinto(buffer)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._file.close()
        super().close()


class _PacedResponse(http.client.HTTPResponse):
    """http.client's response, its body read through a _PacedReader (as much as has come, in reads of 256 KB)."""

    def __init__(self, sock: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()  # the plain reader made above, before it read anything
        self.fp = io.BufferedReader(_PacedReader(sock), 256 << 10)


class _PacedHTTPConnection(urllib3.connection.HTTPConnection):
    response_class = _PacedResponse


class _PacedHTTPSConnection(urllib3.connection.HTTPSConnection):
    response_class = _PacedResponse


class _PacedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _PacedHTTPConnection


class _PacedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _PacedHTTPSConnection


def paced(manager: urllib3.PoolManager) -> urllib3.PoolManager:
    """The pool's connections read their responses paced (PACE_S)."""
    manager.pool_classes_by_scheme = {"http": _PacedHTTPPool, "https": _PacedHTTPSPool}
    return manager
