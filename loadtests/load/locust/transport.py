"""The load's transport: raw JSON (or protobuf, where a scenario asks as kubelets do) over geventhttpclient,
on Locust's FastHttpSession.

Every call fires a Locust request event (one stats row per request kind, named by the caller). The
kubernetes client's model classes are far too slow for this path. A watch fires one event when its response
headers arrive (the time to establish it); its events are then read one by one as they come (JSON lines, or
protobuf frames) and decoded by loadtests.kube.watch or watch_protobuf, each stamped with its receive time.
Paths, names, decoding, the LIST+WATCH loop and when to resend (loadtests.kube.retry: client-go's rule) are
the shared ones of loadtests.kube; only the gevent I/O is here. A resend waits with gevent.sleep (it yields to
the process's other users) and is a count of a RETRY row of the request's name.

Nothing here imports Locust (the session is handed in): importing Locust monkey-patches the whole process
for gevent, which tests and the runner must not suffer.
"""

from __future__ import annotations

import functools
import json
import re
import ssl
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import gevent
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed

from loadtests.kube import jsonbody
from loadtests.kube.access import ClusterAccess
from loadtests.kube.encoding import decoder_for, list_metadata, status_of
from loadtests.kube.errors import Gone, WatchError
from loadtests.kube.names import ListNames
from loadtests.kube.paths import resource_path
from loadtests.kube.retry import CLIENT_GO, RETRIED, RetryPolicy
from loadtests.kube.watch import (
    WATCH_TIMEOUT_MIN_S,
    ListPage,
    WatchStream,
    accept,
    is_protobuf,
    watch_query,
)

if TYPE_CHECKING:
    from locust.contrib.fasthttp import FastHttpSession, ResponseContextManager

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"

_URL = re.compile(r"\w+://\S+")
# a connection that broke under a request (geventhttpclient resends an idempotent one at once on a pooled
# connection the server had closed, as many times as its pool is large, before it says so): a GET is resent
BROKEN_CONNECTION = (ConnectionResetError, BrokenPipeError, HTTPConnectionClosed)


class SslContexts:
    """The ssl_context_factory FastHttpSession calls per connection pool: one context per identity, built from
    the cluster's CA and the identity's client certificate on first use (loading the key for each of thousands of
    users is wasted CPU, and each context holds its own copy of the CA and the certificate).

    geventhttpclient passes its default CA bundle as `cafile`; the cluster's CA replaces it.
    """

    def __init__(self, access: ClusterAccess) -> None:
        self._access = access
        self._context: ssl.SSLContext | None = None

    def __call__(self, cafile: str | None = None) -> ssl.SSLContext:
        if self._context is None:
            self._context = self._access.ssl_context()
        return self._context


@functools.cache
def ssl_contexts(access: ClusterAccess) -> SslContexts:
    """The process's one SslContexts of `access` (an identity: its server, CA and credentials): every user that
    is the same client (all the nodes' kube-proxies, a scenario's users) shares one SSLContext."""
    return SslContexts(access)


def describe_failure(response: Any) -> str:
    """A failure message of few distinct values (Locust groups failures by message): the status code and
    the Status reason, or the connection error without its URL."""
    status = response.status_code
    if not status:
        error = getattr(response, "error", None)
        return _URL.sub("<url>", f"{type(error).__name__}: {error}")[:200]
    reason = str(status_of(response.content or b"{}", _content_type(response)).get("reason") or "")
    return f"HTTP {status} {reason}".strip()


def _content_type(response: Any) -> str | None:
    headers = getattr(response, "headers", None)  # none on a response that never came
    return headers.get("Content-Type") if headers else None


class KubeApi:
    """Kubernetes REST calls on a Locust FastHttpSession. Calls return the status code (0: no response) or
    None on failure rather than raising, so a failing apiserver shows up as failures in the stats, not as
    task exceptions."""

    def __init__(self, session: FastHttpSession, access: ClusterAccess | None = None, *,
                 retry: RetryPolicy = CLIENT_GO, sleep: Callable[[float], Any] = gevent.sleep) -> None:
        self.session = session
        self.access = access  # its credentials go with every request (a refreshing token changes)
        self.retry, self._sleep = retry, sleep

    def call(self, verb: str, method: str, path: str, name: str, *, body: bytes | None = None,
             content_type: str = JSON, ok: Collection[int] = (200,), stream: bool = False,
             headers: dict[str, str] | None = None) -> ResponseContextManager:
        """One request, recorded under `name` with the apiserver's verb as its type, and resent as the retry
        policy says (client-go's: a 429 or 5xx with Retry-After, a GET whose connection broke): every attempt is
        an entry of that row, each resend a count of the RETRY row of the same name (its time: the wait before
        it). The last answer is the caller's: a 429 still refused after the last resend is a failure."""
        request_headers = {"Content-Type": content_type} if body is not None else {}
        request_headers.update(headers or {})
        retries = 0
        while True:
            response = self._attempt(verb, method, path, name, body, request_headers, ok, stream)
            wait_s = self._retry_wait(method, response, retries)
            if wait_s is None:
                return response
            if stream and response.status_code:
                response._response.release()  # geventhttpclient's streaming response: give its connection back
            self._sleep(wait_s)
            self.session.request_event.fire(request_type=RETRIED, name=name, response_time=wait_s * 1000.0,
                                            response_length=0, exception=None, context={})
            retries += 1

    def _attempt(self, verb: str, method: str, path: str, name: str, body: bytes | None, headers: dict[str, str],
                 ok: Collection[int], stream: bool) -> ResponseContextManager:
        """One attempt, recorded; a 401 to a token that has since been refreshed is recorded, then sent once more
        with the new token."""
        response, sent = self._send(verb, method, path, name, body, headers, ok, stream)
        if response.status_code == 401 and self.access is not None and self.access.rejected(sent):
            if stream:
                response._response.release()  # geventhttpclient's streaming response: give its connection back
            response, _ = self._send(verb, method, path, name, body, headers, ok, stream)
        return response

    def _retry_wait(self, method: str, response: Any, retries: int) -> float | None:
        """Seconds before resending, by the retry policy, or None: this answer (or error) is the caller's."""
        if response.status_code:
            return self.retry.after_answer(response.status_code, response.headers, retries)
        if isinstance(getattr(response, "error", None), BROKEN_CONNECTION):
            return self.retry.after_broken_connection(method, retries)
        return None

    def _send(self, verb: str, method: str, path: str, name: str, body: bytes | None, headers: dict[str, str],
              ok: Collection[int], stream: bool) -> tuple[ResponseContextManager, dict[str, str]]:
        """The request as recorded, and the headers it went with (to tell which token a 401 refused)."""
        sent = {**headers, **(self.access.auth_headers() if self.access is not None else {})}
        with self.session.request(method, path, name=name, data=body, headers=sent,
                                  catch_response=True, stream=stream) as response:
            response.request_meta["request_type"] = verb
            if response.status_code in ok:
                response.success()
            else:
                response.failure(describe_failure(response))
        return response, sent

    def create(self, resource: str, namespace: str, body: bytes, name: str,
               ok: Collection[int] = (200, 201, 202)) -> int:
        path = resource_path(resource, namespace)
        return self.call("POST", "POST", path, name, body=body, ok=ok).status_code

    def delete(self, resource: str, namespace: str, object_name: str, name: str, missing_ok: bool = False) -> int:
        ok = (200, 202, 404) if missing_ok else (200, 202)
        path = resource_path(resource, namespace, object_name)
        return self.call("DELETE", "DELETE", path, name, ok=ok).status_code

    def get(self, resource: str, namespace: str, object_name: str, name: str,
            missing_ok: bool = False) -> tuple[int, dict[str, Any] | None]:
        ok = (200, 404) if missing_ok else (200,)
        response = self.call("GET", "GET", resource_path(resource, namespace, object_name), name, ok=ok)
        return response.status_code, (jsonbody.loads(response.content) if response.status_code == 200 else None)

    def patch(self, resource: str, namespace: str, object_name: str, patch: dict[str, Any], name: str,
              subresource: str = "") -> int:
        path = resource_path(resource, namespace, object_name, subresource)
        body = json.dumps(patch).encode()
        return self.call("PATCH", "PATCH", path, name, body=body, content_type=MERGE_PATCH).status_code

    def list_page(self, resource: str, namespace: str, name: str, *, resource_version: str | None = None,
                  limit: int = 0, continue_token: str = "", field_selector: str = "",
                  label_selector: str = "", encoding: str = "json") -> ListPage | None:
        query: dict[str, Any] = {}
        if continue_token:
            query["continue"] = continue_token  # a continuation carries its own resourceVersion
        elif resource_version is not None:
            query["resourceVersion"] = resource_version
        if limit:
            query["limit"] = limit
        query.update(_selectors(field_selector, label_selector))
        response = self.call("LIST", "GET", resource_path(resource, namespace, query=query), name,
                             headers={"Accept": accept(encoding)})
        if response.status_code != 200:
            return None
        body = response.content or b""
        try:
            meta = list_metadata(body, _content_type(response))
        except (ValueError, WatchError):
            return None
        return ListPage(str(meta.get("resourceVersion") or ""), str(meta.get("continue") or ""), len(body))

    def list_all(self, resource: str, namespace: str, names: ListNames, *, resource_version: str = "0",
                 limit: int = 0, field_selector: str = "", label_selector: str = "",
                 all_pages: bool = True, encoding: str = "json", fields: tuple[str, ...] = ()) -> ListPage | None:
        """A LIST followed through all its pages (unless all_pages is False); the result carries the first
        page's resourceVersion (the list's) and the total size. None when any page failed. Its items are not
        decoded (the load reads none of them), so `fields` chooses nothing here."""
        first = self.list_page(resource, namespace, names.first, resource_version=resource_version,
                               limit=limit, field_selector=field_selector, label_selector=label_selector,
                               encoding=encoding)
        page = first
        while all_pages and first is not None and page is not None and page.continue_token:
            page = self.list_page(resource, namespace, names.more, limit=limit, continue_token=page.continue_token,
                                  field_selector=field_selector, label_selector=label_selector, encoding=encoding)
            if page is None:
                return None
            first.size_bytes += page.size_bytes
            first.pages += 1
        return first

    def watch(self, resource: str, namespace: str, name: str, *, resource_version: str = "",
              field_selector: str = "", label_selector: str = "", timeout_s: float = WATCH_TIMEOUT_MIN_S,
              bookmarks: bool = True, initial_events: bool = False, encoding: str = "json",
              fields: tuple[str, ...] = (), batch_s: float = 0.0) -> WatchStream | None:
        """Open a watch (with `initial_events`, one that first sends the collection's state: see watch_query)
        in `encoding` (protobuf: as a kubelet asks, decoded by the answer's Content-Type, only `fields` of each
        object when named); `batch_s` is ignored: the load's watchers hand on each event as it comes, as the
        clients they stand for do. None when it could not be established, Gone when the server answers 410. A
        connection that breaks or stalls past the read timeout later is reported once, as a failure named
        `<name> stream` (a normal end after timeoutSeconds is not a failure)."""
        query = watch_query(timeout_s=timeout_s, resource_version=resource_version, bookmarks=bookmarks,
                            field_selector=field_selector, label_selector=label_selector,
                            initial_events=initial_events)
        # identity: the stream is read event by event as it arrives
        response = self.call("WATCH", "GET", resource_path(resource, namespace, query=query), name,
                             stream=True, headers={"Accept-Encoding": "identity", "Accept": accept(encoding)})
        if response.status_code == 410:
            raise Gone(describe_failure(response))
        if response.status_code != 200:
            return None
        raw = response._response  # geventhttpclient's streaming response: headers read, body not
        request_event = self.session.request_event

        def report_broken(stream: WatchStream, error: BaseException) -> None:
            request_event.fire(request_type="WATCH", name=f"{name} stream", context={}, response=None,
                               response_time=stream.age_s() * 1000,
                               response_length=stream.bytes, exception=error)

        if is_protobuf(_content_type(response)):
            decoder = decoder_for(_content_type(response), fields=fields)
            # exactly the rest of the frame being read: each event is handed on as soon as it is complete
            return WatchStream(lambda: raw.read(decoder.wanted()), raw.release, on_broken=report_broken,
                               broken_errors=(OSError, HTTPParseError), decoder=decoder)
        # readline returns as soon as one event is complete
        return WatchStream(lambda: raw.readline(b"\n"), raw.release, broken_errors=(OSError, HTTPParseError),
                           on_broken=report_broken)


def _selectors(field_selector: str, label_selector: str) -> dict[str, str]:
    query = {"fieldSelector": field_selector} if field_selector else {}
    if label_selector:
        query["labelSelector"] = label_selector
    return query
