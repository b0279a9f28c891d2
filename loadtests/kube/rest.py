"""The harness's own thread-safe REST client (fleet, probes, clean-up, checks): plain JSON over a pooled
urllib3 connection. Creating thousands of nodes must cost the harness far less CPU than it costs the
apiserver, which the kubernetes client's model classes would not.

It speaks the same LIST/WATCH interface as the load's gevent client, so the same Reflector drives both, and
it counts what it sent per (verb, resource), so the runner can take the harness's own requests off the
apiserver's counts (every attempt: the apiserver counts each). It resends as client-go does (kube/retry.py: a 429
or 5xx with Retry-After, a GET whose connection broke), and counts the resends. Every failure is an ApiError
(status 0: no answer).
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import urllib3

from loadtests.kube import jsonbody
from loadtests.kube.access import ClusterAccess
from loadtests.kube.encoding import decoder_for, object_of, status_of
from loadtests.kube.errors import ApiError, Gone, status_message
from loadtests.kube.kept import KEPT_RESET_ERRORS, KeptConnection, Reply, Streamed, open_stream
from loadtests.kube.names import ListNames
from loadtests.kube.paced import paced as paced_pool
from loadtests.kube.paths import resource_path
from loadtests.kube.retry import CLIENT_GO, Retried, RetryPolicy
from loadtests.kube.watch import (
    WATCH_READ_TIMEOUT_S,
    WATCH_TIMEOUT_MIN_S,
    Decoder,
    ListPage,
    WatchStream,
    accept,
    is_protobuf,
    watch_query,
)

USER_AGENT = "k8s-loadtest"
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
# A pooled connection the apiserver closed (it restarted, or the load balancer cut it) fails the next request on
# it: client-go resends a GET after such a reset or EOF (kube/retry.py), and so does this client.
# the same on a kept connection (kube/kept.py: closed by the server while it waited)
RESET_ERRORS = (urllib3.exceptions.ProtocolError, *KEPT_RESET_ERRORS)

# The scheduler's and controller-manager's serving certificates are self-signed on loopback: health checks and
# scrapes of them skip verification on purpose, so urllib3 need not say so (for loopback only).
warnings.filterwarnings("ignore", message="Unverified HTTPS request is being made to host '127.0.0.1'",
                        category=urllib3.exceptions.InsecureRequestWarning)


def short_error(error: BaseException) -> str:
    """The gist of a connection error, on one line."""
    text = " ".join(str(getattr(error, "reason", None) or error).split())
    return f"{type(error).__name__}: {text[:200]}"


def verb_and_resource(method: str, path: str) -> tuple[str, str]:
    """The apiserver's verb and resource for a request path, as apiserver_request_total labels them."""
    split = urlsplit(path)
    parts = split.path.strip("/").split("/")
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) > 2 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] if rest else ""
    verb = method.upper()
    if verb == "GET":
        verb = "WATCH" if "watch=" in split.query else ("GET" if len(rest) > 1 else "LIST")
    return verb, resource


def send_once(method: str, url: str, *, tls: ssl.SSLContext | None = None, body: bytes | None = None,
              headers: Mapping[str, str] | None = None, timeout_s: float = 10.0) -> urllib3.BaseHTTPResponse:
    """One request on a connection of its own, over the same urllib3 as every other request of the harness
    (health checks, etcd's JSON gateway): no retries, the body read; a failure to connect is one of
    TRANSPORT_ERRORS."""
    pool = urllib3.PoolManager(num_pools=1, maxsize=1, ssl_context=tls)
    try:
        return pool.request(method, url, body=body, headers=dict(headers or {}), retries=False,
                            timeout=urllib3.Timeout(connect=min(5.0, timeout_s), read=timeout_s))
    finally:
        pool.clear()


def pool_manager(access: ClusterAccess, **pool_options: Any) -> urllib3.PoolManager:
    """A urllib3 pool for the access's server: through its proxy when the kubeconfig names one."""
    if access.proxy_url:
        return urllib3.ProxyManager(access.proxy_url, ssl_context=access.ssl_context(), **pool_options)
    return urllib3.PoolManager(ssl_context=access.ssl_context(), **pool_options)


def pooled_stream(response: urllib3.BaseHTTPResponse, decoder: Decoder) -> WatchStream:
    """A watch answered on a pooled connection, read as it comes."""
    chunks = response.stream(65536, decode_content=True)
    connection = response.connection

    def abort() -> None:
        # the plain socket's shutdown, so the TLS state the reading thread uses is left alone
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def release() -> None:
        with contextlib.suppress(Exception):  # an unfinished body: the connection is closed, never reused
            response.close()
        response.release_conn()

    return WatchStream(lambda: next(chunks, b""), release, broken_errors=TRANSPORT_ERRORS, abort=abort,
                       clock=time.monotonic, decoder=decoder)


def answer_status(body: bytes, content_type: str | None) -> str:
    """The message of an answer that is not the one asked for: its Status, JSON or protobuf, or its start."""
    return status_message(status_of(body, content_type) or body)


@dataclass(frozen=True)
class Answer:
    """One answered request: its status, its JSON body ({} for none, or for a status asked to be taken) and its
    headers (urllib3's, looked up without regard to case)."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]


class RestClient:
    """`retry`: when a request is sent again (client-go's rule unless said otherwise); `sleep`: how it waits;
    `paced`: answers read in few large reads (kube/paced.py), for a reader of large answers every few seconds;
    `kept`: plain requests (not a watch, nor one with a timeout of its own) over one KeptConnection, in turn, for
    a probe that sends a small request every so often, where urllib3's pool costs twice the CPU; not through a
    kubeconfig's proxy, which only the pool speaks."""

    def __init__(self, access: ClusterAccess, *, pool_size: int = 32, timeout_s: float = 30.0,
                 user_agent: str = USER_AGENT, retry: RetryPolicy = CLIENT_GO,
                 sleep: Callable[[float], Any] = time.sleep, paced: bool = False, kept: bool = False) -> None:
        self.access = access
        self.timeout_s = timeout_s
        self.retry, self._sleep = retry, sleep
        self.pool = pool_manager(access, num_pools=4, maxsize=pool_size, block=True,
                                 timeout=urllib3.Timeout(connect=5.0, read=timeout_s), retries=False)
        if paced:  # never for a watch's client
            self.pool = paced_pool(self.pool)
        self._kept = KeptConnection(access.ssl_context()) if kept and not access.proxy_url else None
        self._kept_lock = threading.Lock()  # one request at a time on the kept connection
        self._tls: ssl.SSLContext | None = None  # for watches on connections of their own, made when first needed
        self.headers = {"Accept": "application/json", "User-Agent": user_agent}  # credentials: per request
        self._lock = threading.Lock()
        self._sent: collections.Counter[tuple[str, str]] = collections.Counter()
        self._retried: dict[tuple[str, str], Retried] = {}

    # --- bookkeeping ------------------------------------------------------------------------------------

    def _count(self, method: str, path: str) -> None:
        key = verb_and_resource(method, path)
        with self._lock:
            self._sent[key] += 1

    def sent(self) -> dict[tuple[str, str], int]:
        """Requests sent so far per (apiserver verb, resource), every resend included."""
        with self._lock:
            return dict(self._sent)

    def _count_retry(self, method: str, path: str, wait_s: float) -> None:
        key = verb_and_resource(method, path)
        with self._lock:
            count, waited_s = self._retried.get(key, Retried(0, 0.0))
            self._retried[key] = Retried(count + 1, waited_s + wait_s)

    def retried(self) -> dict[tuple[str, str], Retried]:
        """Resends so far per (apiserver verb, resource), and the seconds waited before them."""
        with self._lock:
            return dict(self._retried)

    # --- plain requests ---------------------------------------------------------------------------------

    def _send(self, method: str, url: str, headers: dict[str, str], **options: Any
              ) -> urllib3.BaseHTTPResponse | Reply | Streamed:
        """One request with the current credentials; a 401 to a token that has since been refreshed (or
        that the refresh replaces) is sent once more with the new one."""
        sent = {**headers, **self.access.auth_headers()}
        response = self._transport(method, url, sent, options)
        if response.status != 401 or not self.access.rejected(sent):
            return response
        response.drain_conn()
        response.release_conn()
        return self._transport(method, url, {**headers, **self.access.auth_headers()}, options)

    def _transport(self, method: str, url: str, headers: dict[str, str], options: dict[str, Any]
                   ) -> urllib3.BaseHTTPResponse | Reply | Streamed:
        """A streamed answer on a connection of its own when asked (options: `own` = (connect, read) timeouts),
        the kept connection for a plain request (options: at most a body) where there is one, else the pool; the
        kept one's resets are left to the retry policy, as the pool's are."""
        if "own" in options:
            if self._tls is None and urlsplit(url).scheme == "https":
                self._tls = self.access.ssl_context()
            connect_s, read_s = options["own"]
            return open_stream(method, url, headers, self._tls, connect_timeout_s=connect_s, read_timeout_s=read_s)
        if self._kept is None or not set(options) <= {"body"}:
            return self.pool.request(method, url, headers=headers, **options)
        with self._kept_lock:
            return self._kept.send(method, url, body=options.get("body"), headers=headers,
                                   timeout_s=self.timeout_s, resend_reset=False)

    def request(self, method: str, path: str, body: Any = None, *, params: dict[str, Any] | None = None,
                content_type: str = "application/json", ok: tuple[int, ...] = ()) -> dict[str, Any]:
        """Send one request; statuses in `ok` (besides 2xx) return {} instead of raising."""
        return self.answer(method, path, body, params=params, content_type=content_type, ok=ok).body

    def answer(self, method: str, path: str, body: Any = None, *, params: dict[str, Any] | None = None,
               content_type: str = "application/json", ok: tuple[int, ...] = ()) -> Answer:
        """request(), with the answer's status and headers too (what the apiserver says of the request beside
        its body, such as the flow-control headers)."""
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        target = path + (f"?{urlencode(params)}" if params else "")
        response = self._exchange(method, target, headers, (method, path), body=data)
        if 200 <= response.status < 300:
            return Answer(response.status, jsonbody.loads(response.data) if response.data else {}, response.headers)
        if response.status in ok:
            return Answer(response.status, {}, response.headers)
        raise ApiError(response.status, status_message(response.data), method, path)

    def _exchange(self, method: str, target: str, headers: dict[str, str], failure: tuple[str, str],
                  **options: Any) -> urllib3.BaseHTTPResponse | Reply | Streamed:
        """One request (`target`: its path and query) and its resends by the retry policy, each counted; the last
        answer is returned. A connection error that is not resent is an ApiError of status 0 with `failure`'s
        verb and path."""
        url = self.access.server + target
        retries = 0
        while True:
            self._count(method, target)
            try:
                response = self._send(method, url, headers, **options)
            except RESET_ERRORS as error:
                wait_s = self.retry.after_broken_connection(method, retries)
                if wait_s is None:
                    raise ApiError(0, short_error(error), *failure) from None
            except TRANSPORT_ERRORS as error:
                raise ApiError(0, short_error(error), *failure) from None
            else:
                wait_s = self.retry.after_answer(response.status, response.headers, retries)
                if wait_s is None:
                    return response
                response.drain_conn()  # read to its end, so that the connection goes back to the pool
                response.release_conn()
            self._count_retry(method, target, wait_s)
            self._sleep(wait_s)
            retries += 1

    def answers(self, path: str, timeout_s: float = 2.0) -> bool:
        """Whether a plain GET (a health endpoint such as /livez) is answered 200 within timeout_s."""
        try:
            response = self._send("GET", self.access.server + path, self.headers,
                                  timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s))
        except TRANSPORT_ERRORS:
            return False
        return response.status == 200

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=params or None)

    def create(self, path: str, body: dict[str, Any], *, exist_ok: bool = False) -> dict[str, Any]:
        return self.request("POST", path, body, ok=(409,) if exist_ok else ())

    def delete(self, path: str, *, missing_ok: bool = True, **params: Any) -> dict[str, Any]:
        return self.request("DELETE", path, params=params or None, ok=(404,) if missing_ok else ())

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    # --- LIST and WATCH (the Reflector's interface) -----------------------------------------------------

    def list_all(self, resource: str, namespace: str = "", names: ListNames | None = None, *,
                 resource_version: str | None = None, limit: int = 500, field_selector: str = "",
                 label_selector: str = "", all_pages: bool = True, encoding: str = "json",
                 fields: tuple[str, ...] = ()) -> ListPage:
        """A LIST with its items, followed through all its pages unless all_pages is False; the result
        carries the list's resourceVersion (to WATCH from). `encoding` protobuf asks as a kubelet does; the
        items come as dicts either way, from protobuf only their `fields` when named."""
        query: dict[str, Any] = {"limit": limit} if limit else {}
        if resource_version is not None:
            query["resourceVersion"] = resource_version
        if field_selector:
            query["fieldSelector"] = field_selector
        if label_selector:
            query["labelSelector"] = label_selector
        pages = self.list_pages(resource_path(resource, namespace), query, encoding=encoding, fields=fields)
        result = next(pages)
        meta = result.get("metadata", {})
        page = ListPage(str(meta.get("resourceVersion", "")), str(meta.get("continue", "")), 0,
                        items=list(result.get("items", [])))
        for result in pages if all_pages else ():
            page.items = [*(page.items or []), *result.get("items", [])]
            page.continue_token = str(result.get("metadata", {}).get("continue", ""))
            page.pages += 1
        return page

    def list_pages(self, path: str, query: dict[str, Any], *, encoding: str = "json",
                   fields: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
        """Each page of a LIST at `path` (any resource, discovery's too) as it arrives, its continue tokens followed
        to the last: a reader that reduces each page before asking for the next holds one page, never the whole
        collection. The first page is asked with `query`; the next ones with its continue token instead of a
        resourceVersion (a continuation carries its own)."""
        more = {k: v for k, v in query.items() if k != "resourceVersion"}
        result = self._list(path, query, encoding, fields)
        while True:
            token = str(result.get("metadata", {}).get("continue", ""))
            yield result
            del result  # the reader's page is let go before the next one is read
            if not token:
                return
            result = self._list(path, {**more, "continue": token}, encoding, fields)

    def _list(self, path: str, query: dict[str, Any], encoding: str, fields: tuple[str, ...]) -> dict[str, Any]:
        """One LIST page as a dict, asked for in `encoding`."""
        if encoding == "json":
            return self.get(path, **query)
        body, content_type = self._list_body(path, query, encoding)
        return object_of(body, content_type, fields)  # a custom resource: JSON

    def _list_body(self, path: str, query: dict[str, Any], encoding: str) -> tuple[bytes, str | None]:
        """One LIST page's body as it came, and its Content-Type."""
        headers = {**self.headers, "Accept": accept(encoding)}
        response = self._exchange("GET", f"{path}?{urlencode(query)}", headers, ("GET", path))
        if response.status != 200:
            raise ApiError(response.status, answer_status(response.data, response.headers.get("Content-Type")),
                           "GET", path)
        return response.data, response.headers.get("Content-Type")

    def list_messages(self, resource: str, namespace: str = "", *, resource_version: str | None = None
                      ) -> list[Any]:
        """One unpaginated LIST asked for in protobuf, its items as the protobuf messages themselves (a reader of
        thousands of objects every few seconds reads their attributes: no dict is built); a kind answered in
        JSON (none of the built-in ones is) comes as dicts, which the reader tells apart."""
        query: dict[str, Any] = {} if resource_version is None else {"resourceVersion": resource_version}
        body, content_type = self._list_body(resource_path(resource, namespace), query, "protobuf")
        if not is_protobuf(content_type):
            return list(object_of(body, content_type).get("items") or [])
        from loadtests.kube.watch_protobuf import list_messages

        return list_messages(body)

    def list_items(self, resource: str, namespace: str = "", *, label_selector: str = "") -> list[dict[str, Any]]:
        return self.list_all(resource, namespace, label_selector=label_selector).items or []

    def watch(self, resource: str, namespace: str = "", name: str = "", *, resource_version: str = "",
              field_selector: str = "", label_selector: str = "", timeout_s: float = WATCH_TIMEOUT_MIN_S,
              bookmarks: bool = True, initial_events: bool = False, encoding: str = "json",
              fields: tuple[str, ...] = (), batch_s: float = 0.0) -> WatchStream:
        """Open a watch (with `initial_events`, one that first sends the collection's state: see watch_query)
        in `encoding` (protobuf: as a kubelet asks, decoded by the answer's Content-Type, only `fields` of each
        object when named); raises Gone on 410 and ApiError when it cannot be established.

        `batch_s` > 0: what it reads is decoded in batches, once the first chunk held waited that long
        (WatchStream), on a connection of its own read here (kept.Streamed, which tells when more bytes are
        there); not through a kubeconfig's proxy, which only the pool speaks, where it is read as it comes."""
        query = watch_query(timeout_s=timeout_s, resource_version=resource_version, bookmarks=bookmarks,
                            field_selector=field_selector, label_selector=label_selector,
                            initial_events=initial_events)
        path = resource_path(resource, namespace, query=query)
        read_s = min(WATCH_READ_TIMEOUT_S, timeout_s + 60)
        own = batch_s > 0 and not self.access.proxy_url
        options: dict[str, Any] = ({"own": (5.0, read_s)} if own else
                                   {"preload_content": False, "timeout": urllib3.Timeout(connect=5.0, read=read_s)})
        response = self._exchange("GET", path, {**self.headers, "Accept": accept(encoding)}, ("WATCH", path),
                                  **options)
        assert not isinstance(response, Reply)  # streamed: the pool's or a connection of its own
        if response.status != 200:
            body = response.read()
            response.release_conn()
            message = answer_status(body, response.headers.get("Content-Type"))
            if response.status == 410:
                raise Gone(message)
            raise ApiError(response.status, message, "WATCH", path)
        decoder = decoder_for(response.headers.get("Content-Type"), fields=fields)
        if isinstance(response, Streamed):
            return WatchStream(response.read_chunk, response.release_conn, broken_errors=TRANSPORT_ERRORS,
                               abort=response.abort, clock=time.monotonic, decoder=decoder, ready=response.ready,
                               batch_s=batch_s)
        return pooled_stream(response, decoder)

    def close(self) -> None:
        self.pool.clear()
        if self._kept is not None:
            with self._kept_lock:
                self._kept.close()
