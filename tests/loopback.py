"""A small HTTP/1.1 server on loopback for the clients' own tests: it counts the connections it was given, so a
test can tell a kept connection from new ones; a test subclasses CountingServer and CountingHandler."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar


class CountingServer(ThreadingHTTPServer):
    daemon_threads = True
    connections = 0


class CountingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: CountingServer

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def log_message(self, *args: object) -> None:
        pass


S = TypeVar("S", bound=CountingServer)


@contextlib.contextmanager
def serving(server_class: type[S], handler_class: type[CountingHandler]) -> Iterator[S]:
    """The server on a free loopback port, answering in a thread until the block ends."""
    found = server_class(("127.0.0.1", 0), handler_class)
    thread = threading.Thread(target=found.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        found.shutdown()
        found.server_close()
