"""Probes that watch the apiserver the way a controller would, and time what they see with the local clock.

API timestamps have one-second precision, so both probes time events by when this process receives them
(time.monotonic()), which also includes the watch delivery delay a real client would suffer.

- PodStartupProbe: pod creation -> Running and Ready, both as seen by one watch on the namespace.
- WatchDelayProbe: a ConfigMap written at a fixed interval; delay = event received - write sent.

They speak plain HTTPS (http.client) so that stop() can cut a blocked watch at once by shutting its socket.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from loadtests.objects import MANAGED_BY
from loadtests.results import Distribution
from loadtests.target.base import ClusterAccess

Json = dict[str, Any]
EventHandler = Callable[[str, Json, float], None]  # (event type, object, monotonic receive time)

REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0  # TCP + TLS handshake; a watch cannot be cut while it is still connecting
WATCH_READ_TIMEOUT_S = 120.0  # longer than the apiserver's bookmark period, so an idle watch is not cut
WATCH_SERVER_TIMEOUT_S = 300  # the apiserver ends each watch after this; it is resumed from the last version
JOIN_TIMEOUT_S = 5.0


class ApiError(Exception):
    """An apiserver answer other than the one expected, with its status code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Gone(Exception):
    """The resource version we resume from is too old (410): list again."""


class RequestLog:
    """Requests a probe sent, per (apiserver verb, resource), so the runner can tell them from the load's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def add(self, verb: str, resource: str) -> None:
        with self._lock:
            self._counts[(verb, resource)] += 1

    def counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)


def _connect(access: ClusterAccess, timeout_s: float) -> http.client.HTTPConnection:
    url = urllib.parse.urlsplit(access.server)
    if url.scheme == "https":
        return http.client.HTTPSConnection(url.hostname or "127.0.0.1", url.port or 443,
                                           timeout=timeout_s, context=access.ssl_context())
    return http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=timeout_s)


def _headers(access: ClusterAccess, content_type: str | None = None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "k8s-loadtest-probe", **access.auth_headers()}
    if content_type:
        headers["Content-Type"] = content_type
    return headers


class ApiClient:
    """Small JSON requests over one kept-alive connection; a broken one is replaced on the next call."""

    def __init__(self, access: ClusterAccess, log: RequestLog, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.access = access
        self.log = log
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._interrupted = False

    def request(self, method: str, path: str, body: Json | None = None, *, verb: str, resource: str,
                content_type: str = "application/json") -> tuple[int, Json]:
        payload = json.dumps(body).encode() if body is not None else None
        headers = _headers(self.access, content_type if payload else None)
        for attempt in (1, 2):
            if self._interrupted:
                raise ConnectionAbortedError("interrupted: the probe is stopping")
            reused = self._conn is not None
            if self._conn is None:
                self._conn = _connect(self.access, self.timeout_s)
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
                break
            except (OSError, http.client.HTTPException):
                self.close()
                # a kept-alive connection the server has closed meanwhile fails at once: retry on a new one
                if not reused or attempt == 2:
                    raise
        self.log.add(verb, resource)
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            decoded = {"message": data[:200].decode(errors="replace")}
        return response.status, decoded

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def interrupt(self) -> None:
        """From another thread: make a request blocked on a silent server fail now, and no more be sent."""
        self._interrupted = True
        _shut(self._conn)


def _shut(conn: http.client.HTTPConnection | None) -> None:
    """Shut a connection's socket so a read blocked on it returns; the plain socket's shutdown, so the TLS
    state the reading thread is using is left alone (the reader closes the connection itself)."""
    if conn is not None and conn.sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)


def _message(body: Json) -> str:
    return str(body.get("message") or body.get("reason") or body)[:300]


class Watch:
    """LIST for a resource version, then WATCH from it in a daemon thread; resumes where the stream ended,
    lists again after 410 Gone, backs off after errors, and stops at once when asked."""

    def __init__(self, access: ClusterAccess, path: str, resource: str, on_event: EventHandler,
                 log: RequestLog, field_selector: str | None = None) -> None:
        self.access = access
        self.path = path
        self.resource = resource
        self.on_event = on_event
        self.log = log
        self.field_selector = field_selector
        self.resource_version: str | None = None
        self.relists = 0
        self.reconnects = 0
        self.errors = 0
        self.last_error: str | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conn: http.client.HTTPConnection | None = None
        self._thread: threading.Thread | None = None

    def _query(self, **extra: str) -> str:
        params = {"fieldSelector": self.field_selector} if self.field_selector else {}
        params.update(extra)
        return f"{self.path}?{urllib.parse.urlencode(params)}"

    def list_version(self) -> str:
        """The collection's current resource version (one item is enough: the version is the list's)."""
        client = ApiClient(self.access, self.log)
        try:
            status, body = client.request("GET", self._query(limit="1"), verb="LIST", resource=self.resource)
        finally:
            client.close()
        if status != 200:
            raise ApiError(status, f"LIST {self.path}: {_message(body)}")
        return str(body["metadata"]["resourceVersion"])

    def start(self) -> None:
        """List now (so errors surface and 'after start' is well defined), then watch in a thread."""
        self.resource_version = self.list_version()
        self._thread = threading.Thread(target=self._run, name=f"watch {self.path}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backoff = 0.2
        while not self._stopping.is_set():
            try:
                if self.resource_version is None:
                    # events between the lost version and now are gone: the probes count what they miss
                    self.resource_version = self.list_version()
                    self.relists += 1
                began = time.monotonic()
                self._stream()
                self.reconnects += 1
                if time.monotonic() - began < 1.0:  # a server that ends watches at once: do not spin
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                else:
                    backoff = 0.2
            except Gone:
                self.resource_version = None
            except Exception as error:  # a probe thread must survive any failure, and retry
                if self._stopping.is_set():
                    break
                self.errors += 1
                self.last_error = f"{type(error).__name__}: {error}"
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _stream(self) -> None:
        conn = _connect(self.access, CONNECT_TIMEOUT_S)
        conn.connect()  # the socket must exist before stop() can see this connection, so it can shut it
        if conn.sock is not None:
            conn.sock.settimeout(WATCH_READ_TIMEOUT_S)
        with self._lock:
            if self._stopping.is_set():
                conn.close()
                return
            self._conn = conn
        try:
            query = self._query(watch="1", resourceVersion=self.resource_version or "",
                                allowWatchBookmarks="true", timeoutSeconds=str(WATCH_SERVER_TIMEOUT_S))
            conn.request("GET", query, headers=_headers(self.access))
            response = conn.getresponse()
            self.log.add("WATCH", self.resource)
            if response.status == 410:
                raise Gone()
            if response.status != 200:
                raise ApiError(response.status, response.read(300).decode(errors="replace"))
            while True:
                line = response.readline()
                received = time.monotonic()
                if not line or self._stopping.is_set():
                    return
                if line.strip():
                    self.dispatch(json.loads(line), received)
        finally:
            with self._lock:
                self._conn = None
            conn.close()

    def dispatch(self, event: Json, received: float) -> None:
        """Handle one decoded watch event: keep its resource version, hand it on, raise on ERROR."""
        kind, obj = event.get("type", ""), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiError(int(obj.get("code") or 0), _message(obj))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = version
        if kind != "BOOKMARK":
            self.on_event(kind, obj, received)

    def stop(self) -> None:
        """End the watch now (shut its socket so a blocked read returns) and join the thread; idempotent."""
        self._stopping.set()
        with self._lock:
            conn = self._conn
        _shut(conn)
        if self._thread is not None:
            self._thread.join(timeout=JOIN_TIMEOUT_S)
            self._thread = None


def pod_running_ready(pod: Json) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


class _WatchProbe:
    """What both watch probes share: the watch they read, and a distribution of their samples at the end."""

    SOURCE = ""
    _watch: Watch

    @property
    def watch(self) -> Watch:
        return self._watch

    def stop(self) -> None:
        raise NotImplementedError

    def samples(self) -> list[float]:
        raise NotImplementedError

    def gather(self) -> Distribution:
        self.stop()
        return Distribution.of(self.samples(), source=self.SOURCE)


class PodStartupProbe(_WatchProbe):
    """Creation -> Running+Ready per pod created after start(), both moments as received by one watch."""

    SOURCE = "watch receive times, create -> Running"

    def __init__(self, access: ClusterAccess, namespace: str) -> None:
        self.access = access
        self.namespace = namespace
        self.requests = RequestLog()
        self._lock = threading.Lock()
        self._added: dict[str, float] = {}
        self._running: dict[str, float] = {}
        self._watch = Watch(access, f"/api/v1/namespaces/{namespace}/pods", "pods", self.handle_event,
                            self.requests)

    def handle_event(self, kind: str, pod: Json, received: float) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        if not uid:
            return
        with self._lock:
            if kind == "ADDED" and uid not in self._added:
                self._added[uid] = received
            watched = uid in self._added and uid not in self._running
            if watched and kind != "DELETED" and pod_running_ready(pod):
                self._running[uid] = received

    def start(self) -> None:
        self._watch.start()

    def stop(self) -> None:
        self._watch.stop()

    def samples(self) -> list[float]:
        with self._lock:
            return [self._running[uid] - self._added[uid] for uid in self._running]

    @property
    def not_running(self) -> int:
        """Pods seen created but never Running+Ready while watched (deleted first, or still pending)."""
        with self._lock:
            return len(self._added) - len(self._running)

    def shortfall(self) -> str | None:
        """A note for the step when some pods were never seen Running."""
        if not self.not_running:
            return None
        return (f"pod startup: {self.not_running} pods created during the step were not seen Running+Ready "
                "(deleted first, or still starting)")



class WatchDelayProbe(_WatchProbe):
    """Writes a ConfigMap every `interval_s` and times how long each write takes to come back on a watch."""

    SOURCE = "write -> watch event"
    NAME = "watch-delay-probe"
    ANNOTATION = "k8s-loadtest/watch-delay-seq"

    def __init__(self, access: ClusterAccess, namespace: str, interval_s: float = 0.5, name: str = NAME,
                 grace_s: float = 2.0) -> None:
        self.access = access
        self.namespace = namespace
        self.interval_s = interval_s
        self.name = name
        self.grace_s = grace_s
        self.token = uuid.uuid4().hex[:8]  # tells this probe's writes from any earlier one's
        self.requests = RequestLog()
        self.write_errors = 0
        self.last_error: str | None = None
        self._client = ApiClient(access, self.requests)
        self._collection = f"/api/v1/namespaces/{namespace}/configmaps"
        self._cond = threading.Condition()
        self._sent: dict[int, float] = {}
        self._received: dict[int, float] = {}
        self._stopping = threading.Event()
        self._writer: threading.Thread | None = None
        self._watch = Watch(access, self._collection, "configmaps", self.handle_event, self.requests,
                            field_selector=f"metadata.name={name}")

    def handle_event(self, kind: str, configmap: Json, received: float) -> None:
        value = ((configmap.get("metadata") or {}).get("annotations") or {}).get(self.ANNOTATION, "")
        token, _, seq_text = value.partition(":")
        if token != self.token or not seq_text.isdigit():
            return
        seq = int(seq_text)
        with self._cond:
            if seq in self._sent and seq not in self._received:
                self._received[seq] = received
                self._cond.notify_all()

    def mark_sent(self, seq: int, at: float | None = None) -> None:
        """Remember when write `seq` left (now by default)."""
        with self._cond:
            self._sent[seq] = time.monotonic() if at is None else at

    def _ensure_configmap(self) -> None:
        # a short server-side timeout: with etcd gone, start() fails in seconds instead of holding up the step
        status, body = self._client.request("GET", f"{self._collection}/{self.name}?timeout=10s", verb="GET",
                                            resource="configmaps")
        if status == 200:
            return
        if status != 404:
            raise ApiError(status, f"GET configmap {self.namespace}/{self.name}: {_message(body)}")
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(MANAGED_BY)},
                    "data": {"purpose": "watch delay probe: write -> watch event"}}
        status, body = self._client.request("POST", f"{self._collection}?timeout=10s", manifest, verb="POST",
                                            resource="configmaps")
        if status not in (200, 201, 409):  # 409: created meanwhile by someone else, which is fine
            raise ApiError(status, f"create configmap {self.namespace}/{self.name}: {_message(body)}")

    def _write(self, seq: int) -> None:
        patch = {"metadata": {"annotations": {self.ANNOTATION: f"{self.token}:{seq}"}}}
        self.mark_sent(seq)  # just before the request leaves
        status, body = self._client.request("PATCH", f"{self._collection}/{self.name}", patch,
                                            verb="PATCH", resource="configmaps",
                                            content_type="application/merge-patch+json")
        if status == 404:
            self._ensure_configmap()
        if status != 200:
            raise ApiError(status, _message(body))

    def _write_loop(self) -> None:
        seq = 0
        due = time.monotonic()
        while not self._stopping.wait(max(0.0, due - time.monotonic())):
            seq += 1
            try:
                self._write(seq)
            except Exception as error:  # count it and keep probing
                self.write_errors += 1
                self.last_error = f"{type(error).__name__}: {error}"
            # keep the cadence, but never burst to catch up after a slow write
            due = max(due + self.interval_s, time.monotonic())

    def start(self) -> None:
        self._ensure_configmap()
        self._watch.start()
        self._writer = threading.Thread(target=self._write_loop, name="watch-delay-writer", daemon=True)
        self._writer.start()

    def stop(self) -> None:
        """Stop writing, let writes in flight arrive (up to grace_s), close the watch; idempotent."""
        if not self._stopping.is_set():
            self._stopping.set()
            deadline = time.monotonic() + self.grace_s  # for the last write, and for its event
            if self._writer is not None:
                self._writer.join(timeout=self.grace_s)
                if self._writer.is_alive():  # a write stuck on a silent apiserver: cut it
                    self._client.interrupt()
                    self._writer.join(timeout=JOIN_TIMEOUT_S)
            with self._cond:
                self._cond.wait_for(lambda: len(self._received) >= len(self._sent),
                                    timeout=max(0.0, deadline - time.monotonic()))
        self._watch.stop()
        self._client.close()

    def delays(self) -> list[float]:
        with self._cond:
            return [self._received[seq] - self._sent[seq] for seq in self._received]

    @property
    def lost(self) -> int:
        """Writes sent whose event never arrived (failed writes included)."""
        with self._cond:
            return len(self._sent) - len(self._received)

    def shortfall(self) -> str | None:
        """A note for the step when some writes never came back on the watch."""
        if not self.lost:
            return None
        failed = f" ({self.write_errors} failed; last: {self.last_error})" if self.write_errors else ""
        return f"watch delay: {self.lost} writes never came back on the watch{failed}"

    def samples(self) -> list[float]:
        return self.delays()
