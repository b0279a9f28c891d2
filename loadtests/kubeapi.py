"""The hot-path Kubernetes API client of the Locust users: raw JSON over geventhttpclient.

Requests go through Locust's FastHttpSession, so every call fires a Locust request event (one stats row per
request kind, named by the caller). The kubernetes client's model classes are far too slow for this path.
A watch fires one event when its response headers arrive (the time to establish it); its newline-delimited
JSON events are then decoded incrementally as they come, each stamped with its receive time.

Nothing here imports Locust (the session is handed in): importing Locust monkey-patches the whole process
for gevent, which tests and the runner must not suffer.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import gevent
from geventhttpclient._parser import HTTPParseError

from loadtests.scenarios import WATCH_TIMEOUT_MIN_S, ListNames, WatchNames

if TYPE_CHECKING:
    from locust.contrib.fasthttp import FastHttpSession, ResponseContextManager

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"

_GROUP_VERSION = {
    "pods": "/api/v1",
    "nodes": "/api/v1",
    "namespaces": "/api/v1",
    "configmaps": "/api/v1",
    "services": "/api/v1",
    "endpoints": "/api/v1",
    "events": "/api/v1",
    "endpointslices": "/apis/discovery.k8s.io/v1",
    "leases": "/apis/coordination.k8s.io/v1",
    "deployments": "/apis/apps/v1",
}
_CLUSTER_SCOPED = {"nodes", "namespaces"}
_URL = re.compile(r"\w+://\S+")


def resource_path(resource: str, namespace: str = "", name: str = "", subresource: str = "",
                  query: dict[str, Any] | None = None) -> str:
    """The REST path of a resource, a namespaced collection, an object or one of its subresources."""
    try:
        path = _GROUP_VERSION[resource]
    except KeyError:
        raise ValueError(f"no API path known for resource {resource!r}") from None
    if namespace and resource not in _CLUSTER_SCOPED:
        path += f"/namespaces/{namespace}"
    path += f"/{resource}"
    if name:
        path += f"/{name}"
    if subresource:
        path += f"/{subresource}"
    if query:
        path += "?" + urlencode(query)
    return path


# --- watch stream decoding ------------------------------------------------------------------------------


class Gone(Exception):
    """The resourceVersion asked for is older than the server keeps (410): the caller must LIST again."""


class WatchError(Exception):
    """The server ended a watch with an ERROR event other than 410, or sent something that is not an event."""


@dataclass(slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
    object: dict[str, Any]
    received_at: float  # wall clock when the bytes ending this event were read (watch-delay measurements)

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


def status_error(status: dict[str, Any]) -> Exception:
    """The exception an ERROR event's Status stands for: Gone for 410 (Expired / Gone), else WatchError."""
    code = status.get("code")
    text = f"{code} {status.get('reason', '')}: {status.get('message', '')}"
    return Gone(text) if code == 410 else WatchError(f"watch ended with an error: {text}")


def _parse_event(line: bytes, received_at: float) -> WatchEvent:
    try:
        data = json.loads(line)
        return WatchEvent(str(data["type"]), data.get("object") or {}, received_at)
    except (ValueError, KeyError, TypeError) as error:
        raise WatchError(f"not a watch event ({error}): {line[:120]!r}") from None


class WatchDecoder:
    """Splits a watch body into events whatever the chunking: keeps the partial last line for the next chunk."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, chunk: bytes, received_at: float) -> list[WatchEvent]:
        self._pending += chunk
        end = self._pending.rfind(b"\n")
        if end < 0:
            return []
        complete = bytes(self._pending[:end])
        del self._pending[: end + 1]
        return [_parse_event(line, received_at) for line in complete.split(b"\n") if line.strip()]

    def finish(self, received_at: float) -> list[WatchEvent]:
        """An event the stream ended without a newline after; a truncated one (the connection broke in the
        middle of it, which the stream reports itself) is dropped."""
        rest, self._pending = bytes(self._pending).strip(), bytearray()
        try:
            return [_parse_event(rest, received_at)] if rest else []
        except WatchError:
            return []


def iter_watch_events(chunks: Iterable[bytes], clock: Callable[[], float] = time.time) -> Iterator[WatchEvent]:
    """Events of a watch body as they arrive; an ERROR event raises Gone (410) or WatchError instead."""
    decoder = WatchDecoder()
    for chunk in chunks:
        for event in decoder.feed(chunk, clock()):
            if event.type == "ERROR":
                raise status_error(event.object)
            yield event
    for event in decoder.finish(clock()):
        if event.type == "ERROR":
            raise status_error(event.object)
        yield event


class WatchStream:
    """An established watch: iterate its events (BOOKMARKs included); `resource_version` follows them, so a
    new watch can resume where this one ended. Iterating to the end (or breaking off) closes the connection.

    A connection that breaks or stalls past the read timeout ends the iteration and is reported once, as a
    failure named `<watch name> stream` (a normal end after timeoutSeconds is not a failure).
    """

    def __init__(self, response: ResponseContextManager, name: str, request_event: Any,
                 clock: Callable[[], float] = time.time) -> None:
        self._raw = response._response  # geventhttpclient's streaming response: headers read, body not
        self.name = name
        self._request_event = request_event
        self._clock = clock
        self.opened_at = clock()
        self.resource_version = ""
        self.events = 0
        self.bookmarks = 0
        self.bytes = 0
        self.broken: Exception | None = None

    def _lines(self) -> Iterator[bytes]:
        while True:
            try:
                line = self._raw.readline(b"\n")  # returns as soon as one event is complete
            except (OSError, HTTPParseError) as error:  # reset, read timeout, connection closed mid-chunk
                self._report_broken(error)
                return
            if not line:
                return  # the server ended the watch (timeoutSeconds)
            self.bytes += len(line)
            yield line

    def _report_broken(self, error: Exception) -> None:
        self.broken = error
        self._request_event.fire(
            request_type="WATCH", name=f"{self.name} stream", context={}, response=None,
            response_time=(self._clock() - self.opened_at) * 1000, response_length=self.bytes,
            exception=error,
        )

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            for event in iter_watch_events(self._lines(), self._clock):
                if event.type == "BOOKMARK":
                    self.bookmarks += 1
                self.events += 1
                self.resource_version = event.resource_version or self.resource_version
                yield event
        finally:
            self.close()

    def close(self) -> None:
        """Drop the connection (an unfinished body is never reused) — safe to call twice."""
        self._raw.release()


# --- LIST results ---------------------------------------------------------------------------------------


@dataclass
class ListPage:
    resource_version: str
    continue_token: str
    size_bytes: int
    pages: int = 1


def list_metadata(body: bytes) -> dict[str, Any]:
    """The list's metadata without decoding its items: the apiserver writes kind, apiVersion and metadata
    before items, so the head of the body is enough (a full decode of a big LIST costs the client dearly)."""
    head = body[:16384].decode("utf-8", errors="ignore")
    start = head.find('"metadata":')
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(head, start + len('"metadata":'))
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
    return dict(json.loads(body).get("metadata") or {})


# --- the client -----------------------------------------------------------------------------------------


def describe_failure(response: Any) -> str:
    """A failure message of few distinct values (Locust groups failures by message): the status code and
    the Status reason, or the connection error without its URL."""
    status = response.status_code
    if not status:
        error = getattr(response, "error", None)
        return _URL.sub("<url>", f"{type(error).__name__}: {error}")[:200]
    reason = ""
    try:
        data = json.loads(response.content or b"{}")
        reason = str(data.get("reason") or "") if isinstance(data, dict) else ""
    except (ValueError, TypeError):
        pass
    return f"HTTP {status} {reason}".strip()


class KubeApi:
    """Kubernetes REST calls on a Locust FastHttpSession. Calls return the status code (0: no response) or
    None on failure rather than raising, so a failing apiserver shows up as failures in the stats, not as
    task exceptions."""

    def __init__(self, session: FastHttpSession) -> None:
        self.session = session

    def call(self, verb: str, method: str, path: str, name: str, *, body: bytes | None = None,
             content_type: str = JSON, ok: Collection[int] = (200,), stream: bool = False,
             headers: dict[str, str] | None = None) -> ResponseContextManager:
        """One request, recorded under `name` with the apiserver's verb as its type."""
        request_headers = {"Content-Type": content_type} if body is not None else {}
        request_headers.update(headers or {})
        with self.session.request(method, path, name=name, data=body, headers=request_headers,
                                  catch_response=True, stream=stream) as response:
            response.request_meta["request_type"] = verb
            if response.status_code in ok:
                response.success()
            else:
                response.failure(describe_failure(response))
        return response

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
        return response.status_code, (json.loads(response.content) if response.status_code == 200 else None)

    def patch(self, resource: str, namespace: str, object_name: str, patch: dict[str, Any], name: str,
              subresource: str = "") -> int:
        path = resource_path(resource, namespace, object_name, subresource)
        body = json.dumps(patch).encode()
        return self.call("PATCH", "PATCH", path, name, body=body, content_type=MERGE_PATCH).status_code

    def list_page(self, resource: str, namespace: str, name: str, *, resource_version: str | None = None,
                  limit: int = 0, continue_token: str = "", field_selector: str = "") -> ListPage | None:
        query: dict[str, Any] = {}
        if continue_token:
            query["continue"] = continue_token  # a continuation carries its own resourceVersion
        elif resource_version is not None:
            query["resourceVersion"] = resource_version
        if limit:
            query["limit"] = limit
        if field_selector:
            query["fieldSelector"] = field_selector
        response = self.call("LIST", "GET", resource_path(resource, namespace, query=query), name)
        if response.status_code != 200:
            return None
        body = response.content or b""
        try:
            meta = list_metadata(body)
        except ValueError:
            return None
        return ListPage(str(meta.get("resourceVersion") or ""), str(meta.get("continue") or ""), len(body))

    def list_all(self, resource: str, namespace: str, names: ListNames, *, resource_version: str = "0",
                 limit: int = 0, field_selector: str = "") -> ListPage | None:
        """A LIST followed through all its pages; the result carries the first page's resourceVersion (the
        list's) and the total size. None when any page failed."""
        first = self.list_page(resource, namespace, names.first, resource_version=resource_version,
                               limit=limit, field_selector=field_selector)
        page = first
        while first is not None and page is not None and page.continue_token:
            page = self.list_page(resource, namespace, names.more, limit=limit,
                                  continue_token=page.continue_token, field_selector=field_selector)
            if page is None:
                return None
            first.size_bytes += page.size_bytes
            first.pages += 1
        return first

    def watch(self, resource: str, namespace: str, name: str, *, resource_version: str = "",
              field_selector: str = "", timeout_s: float = WATCH_TIMEOUT_MIN_S,
              bookmarks: bool = True) -> WatchStream | None:
        """Open a watch; None when it could not be established, Gone when the server answers 410."""
        query: dict[str, Any] = {"watch": "1", "timeoutSeconds": max(1, int(timeout_s))}
        if bookmarks:
            query["allowWatchBookmarks"] = "true"
        if resource_version:
            query["resourceVersion"] = resource_version
        if field_selector:
            query["fieldSelector"] = field_selector
        # identity: the stream is read line by line as it arrives
        response = self.call("WATCH", "GET", resource_path(resource, namespace, query=query), name,
                             stream=True, headers={"Accept-Encoding": "identity"})
        if response.status_code == 410:
            raise Gone(describe_failure(response))
        if response.status_code != 200:
            return None
        return WatchStream(response, name, self.session.request_event)


# --- the LIST + WATCH loop ------------------------------------------------------------------------------


class Backoff:
    """Exponential backoff with jitter, so a failing apiserver is not hammered by every watcher at once."""

    def __init__(self, first_s: float = 0.5, max_s: float = 10.0,
                 sleep: Callable[[float], Any] = gevent.sleep, rng: random.Random | None = None) -> None:
        self.first_s, self.max_s, self._sleep = first_s, max_s, sleep
        self._rng = rng or random.Random()
        self._next = first_s

    def wait(self) -> None:
        self._sleep(self._next * (0.5 + self._rng.random()))
        self._next = min(self.max_s, self._next * 2)

    def reset(self) -> None:
        self._next = self.first_s


class Reflector:
    """client-go's reflector loop: LIST (when names.initial_list is set) then WATCH from the list's
    resourceVersion with bookmarks, resume each ended watch from the last resourceVersion seen, LIST again
    (a consistent read) on 410 Gone. Without a LIST, a watch from "" starts with the current state.

    Runs until `deadline` (wall clock), or until Locust kills the user at the end of the run.
    """

    def __init__(self, api: KubeApi, resource: str, names: WatchNames, *, namespace: str = "",
                 field_selector: str = "", page_limit: int = 500, deadline: float | None = None,
                 on_event: Callable[[WatchEvent], None] | None = None, backoff: Backoff | None = None,
                 clock: Callable[[], float] = time.time, rng: random.Random | None = None) -> None:
        self.api, self.resource, self.names = api, resource, names
        self.namespace, self.field_selector, self.page_limit = namespace, field_selector, page_limit
        self.deadline, self.on_event, self._clock = deadline, on_event, clock
        self._backoff = backoff or Backoff()
        self._rng = rng or random.Random()
        self.resource_version: str | None = None  # None: LIST (or watch from "now") next
        self.watches = 0
        self.lists = 0
        self.gone = 0

    def _remaining(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - self._clock()

    def _watch_timeout(self) -> float:
        jittered = WATCH_TIMEOUT_MIN_S * (1.0 + self._rng.random())
        return max(1.0, min(jittered, self._remaining()))

    def _list(self) -> bool:
        names = self.names.relist if self.lists else self.names.initial_list
        assert names is not None
        page = self.api.list_all(self.resource, self.namespace, names, resource_version="" if self.lists else "0",
                                 limit=self.page_limit, field_selector=self.field_selector)
        if page is None:
            return False
        self.lists += 1
        self.resource_version = page.resource_version
        return True

    def step(self) -> None:
        """One LIST-if-needed and one watch to its end."""
        if self.resource_version is None and self.names.initial_list is not None and not self._list():
            self._backoff.wait()
            return
        name = self.names.again if self.watches else self.names.first
        try:
            stream = self.api.watch(self.resource, self.namespace, name, resource_version=self.resource_version or "",
                                    field_selector=self.field_selector, timeout_s=self._watch_timeout())
        except Gone:
            self._on_gone()
            return
        if stream is None:
            self._backoff.wait()
            return
        self.watches += 1
        try:
            for event in stream:
                if self.on_event is not None:
                    self.on_event(event)
        except Gone:
            self._on_gone()
            return
        except WatchError:
            self.resource_version = stream.resource_version or self.resource_version
            self._backoff.wait()
            return
        self.resource_version = stream.resource_version or self.resource_version
        if stream.broken is not None or (stream.events == 0 and self._clock() - stream.opened_at < 1.0):
            self._backoff.wait()  # a watch that ends at once must not turn into a request loop
        else:
            self._backoff.reset()

    def _on_gone(self) -> None:
        self.gone += 1
        self.resource_version = None

    def run(self) -> None:
        while self._remaining() > 0:
            self.step()
