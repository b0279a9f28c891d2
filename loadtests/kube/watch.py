"""Watch streams and LIST results as the apiserver sends them: newline-delimited JSON events, list metadata
(protobuf's frames: watch_protobuf.py, behind the same decoder interface).

Nothing here does I/O: every transport (the load's gevent client, the harness's thread client) feeds the
bytes it read, so decoding and its edge cases (events split across chunks, a truncated last event, ERROR
events) are handled once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from loadtests.kube import jsonbody
from loadtests.kube.errors import Gone, WatchError

# client-go's reflector picks a watch timeout in [5 min, 10 min) so that watches do not all end at once
WATCH_TIMEOUT_MIN_S = 300.0
# a watch read may block for a whole timeoutSeconds when nothing changes (a node without pods)
WATCH_READ_TIMEOUT_S = 2 * WATCH_TIMEOUT_MIN_S + 60.0
# API streaming (WatchList, KEP-3157): the BOOKMARK that ends a watch's initial events carries this annotation
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
# how a watch or LIST asks for its answer: JSON, or protobuf as kubelets and kube-proxy do (watch_protobuf.py)
ENCODINGS = ("json", "protobuf")
# protobuf's Accept is a kubelet's (setContentTypeForClient: protobuf first, JSON for the kinds without protobuf,
# custom resources); the answer's Content-Type says which one came
ACCEPT = {"json": JSON, "protobuf": f"{PROTOBUF},{JSON}"}


def accept(encoding: str) -> str:
    """The Accept header of a request in `encoding` (one of ENCODINGS)."""
    if encoding not in ACCEPT:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of: {', '.join(ENCODINGS)}")
    return ACCEPT[encoding]


def is_protobuf(content_type: str | None) -> bool:
    """Whether a response's Content-Type is Kubernetes's protobuf (a watch's carries `;stream=watch`)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == PROTOBUF


def watch_query(*, timeout_s: float, resource_version: str = "", bookmarks: bool = True, field_selector: str = "",
                label_selector: str = "", initial_events: bool = False) -> dict[str, Any]:
    """The query of a WATCH, for every transport. With `initial_events` (API streaming, WatchList) the watch
    first sends the collection's state, each object as an ADDED event from the watch cache, then a BOOKMARK
    annotated INITIAL_EVENTS_END: one stream instead of a LIST and a WATCH. The apiserver requires
    resourceVersionMatch=NotOlderThan and bookmarks with it; resourceVersion "" asks for a state at least as
    new as etcd's (a consistent read), as client-go's informers do."""
    query: dict[str, Any] = {"watch": "1", "timeoutSeconds": max(1, int(timeout_s))}
    if bookmarks or initial_events:
        query["allowWatchBookmarks"] = "true"
    if initial_events:
        query["sendInitialEvents"] = "true"
        query["resourceVersionMatch"] = "NotOlderThan"
    if resource_version:
        query["resourceVersion"] = resource_version
    if field_selector:
        query["fieldSelector"] = field_selector
    if label_selector:
        query["labelSelector"] = label_selector
    return query


def ends_initial_events(event: WatchEvent) -> bool:
    """Whether an event is the BOOKMARK after a watch's initial events: from it on, the watcher has the state."""
    if event.type != "BOOKMARK":
        return False
    annotations = (event.object.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(INITIAL_EVENTS_END, "")).lower() == "true"


@dataclass(slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK | ERROR
    object: dict[str, Any]
    received_at: float  # clock time when the bytes ending this event were read (watch-delay measurements)
    size: int = 0  # bytes of the body this event came in (its line and newline): what the watcher received

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


def status_error(status: dict[str, Any]) -> Exception:
    """The exception an ERROR event's Status stands for: Gone for 410 (Expired / Gone), else WatchError."""
    code = status.get("code")
    text = f"{code} {status.get('reason', '')}: {status.get('message', '')}"
    return Gone(text) if code == 410 else WatchError(f"watch ended with an error: {text}")


def _parse_event(line: bytes, received_at: float, size: int) -> WatchEvent:
    try:
        data = jsonbody.loads(line)
        return WatchEvent(str(data["type"]), data.get("object") or {}, received_at, size)
    except (ValueError, KeyError, TypeError) as error:
        raise WatchError(f"not a watch event ({error}): {line[:120]!r}") from None


class Decoder(Protocol):
    """What a watch body is split into events by, whatever its encoding."""

    def feed(self, chunk: bytes, received_at: float) -> list[WatchEvent]: ...

    def finish(self, received_at: float) -> list[WatchEvent]: ...


class WatchDecoder:
    """Splits a JSON watch body into events whatever the chunking: keeps the partial last line for the next
    chunk."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, chunk: bytes, received_at: float) -> list[WatchEvent]:
        self._pending += chunk
        end = self._pending.rfind(b"\n")
        if end < 0:
            return []
        complete = bytes(self._pending[:end])
        del self._pending[: end + 1]
        return [_parse_event(line, received_at, len(line) + 1) for line in complete.split(b"\n") if line.strip()]

    def finish(self, received_at: float) -> list[WatchEvent]:
        """An event the stream ended without a newline after; a truncated one (the connection broke in the
        middle of it, which the stream reports itself) is dropped."""
        rest, self._pending = bytes(self._pending).strip(), bytearray()
        try:
            return [_parse_event(rest, received_at, len(rest))] if rest else []
        except WatchError:
            return []


def iter_watch_events(chunks: Iterable[tuple[bytes, float]], decoder: Decoder | None = None) -> Iterator[WatchEvent]:
    """Events of a watch body as they arrive (JSON lines unless another decoder is given), each chunk with the
    time it was read, which its events carry; an ERROR event raises Gone (410) or WatchError instead."""
    decoder = decoder or WatchDecoder()
    at = 0.0
    for chunk, at in chunks:
        for event in decoder.feed(chunk, at):
            if event.type == "ERROR":
                raise status_error(event.object)
            yield event
    for event in decoder.finish(at):
        if event.type == "ERROR":
            raise status_error(event.object)
        yield event


class WatchStream:
    """An established watch over any transport: iterate its events (BOOKMARKs included); `resource_version`
    follows them, so a new watch can resume where this one ended. Iterating to the end (or breaking off)
    releases the connection.

    The transport gives `read` (the next bytes of the body; b"" when the server ended the watch), the
    errors that mean the connection broke or stalled (recorded in `broken` and passed to `on_broken`, once;
    a normal end after timeoutSeconds is not one), `release` (drop the connection), `abort` (from another
    thread: make a blocked read return now) and the `decoder` of its body's encoding (JSON lines by default).

    Batched (`batch_s` > 0, with the transport's `ready`: whether bytes can be read within a wait): a chunk read
    is stamped and held, and so is every chunk read before the first held one is batch_s old; then they are
    decoded together, each with its own stamp, and their events handed on. A thread that slept decodes an event
    cold (its caches gone): one wake and one decode for many events costs far less than one for each. With
    nothing held a read blocks as it would unbatched. `held_since` is the stamp of the first chunk read whose
    events were not all handed on yet (None: none), `delivered_at` that of the last chunk whose events were;
    `on_delivered` (if set) is called after each batch was handed on, so that a reader can wait for it.
    """

    def __init__(self, read: Callable[[], bytes], release: Callable[[], None], *,
                 broken_errors: tuple[type[BaseException], ...] = (OSError,),
                 on_broken: Callable[[WatchStream, BaseException], None] | None = None,
                 abort: Callable[[], None] | None = None, clock: Callable[[], float] = time.time,
                 decoder: Decoder | None = None, ready: Callable[[float], bool] | None = None,
                 batch_s: float = 0.0) -> None:
        self.decoder = decoder or WatchDecoder()
        self._read = read
        self._release = release
        self._broken_errors = broken_errors
        self._on_broken = on_broken
        self._abort = abort
        self._clock = clock
        self._ready = ready
        self.batch_s = batch_s if ready is not None else 0.0
        self.opened_at = clock()
        self.resource_version = ""
        self.events = 0
        self.bookmarks = 0
        self.bytes = 0
        self.broken: BaseException | None = None
        self.held_since: float | None = None
        self.delivered_at = self.opened_at
        self.on_delivered: Callable[[], None] | None = None

    def _read_one(self) -> tuple[bytes, float] | None:
        """The next chunk and when it was read; None at the body's end or when the connection broke."""
        try:
            chunk = self._read()
        except self._broken_errors as error:  # reset, read timeout, connection closed mid-chunk
            self.broken = error
            if self._on_broken is not None:
                self._on_broken(self, error)
            return None
        if not chunk:
            return None
        self.bytes += len(chunk)
        return chunk, self._clock()

    def _batches(self) -> Iterator[list[tuple[bytes, float]]]:
        """The chunks read, in batches: one chunk each unbatched; batched, each with the chunks that could be read
        before its first was batch_s old (a quiet stream's batch is handed on then, a broken one's at once)."""
        while (first := self._read_one()) is not None:
            self.held_since = first[1]
            batch = [first]
            due = first[1] + self.batch_s
            while self.batch_s > 0 and (left := due - self._clock()) > 0 and self._ready is not None \
                    and self._ready(left):
                found = self._read_one()
                if found is None:
                    yield batch
                    return
                batch.append(found)
            yield batch

    def _chunks(self) -> Iterator[tuple[bytes, float]]:
        """Every chunk read, with its stamp; a batch's last one counts as handed on once the next is asked for
        (its events were, and whatever the reader did with them returned)."""
        for batch in self._batches():
            yield from batch
            self._delivered(batch[-1][1])

    def _delivered(self, at: float | None) -> None:
        if at is not None:
            self.delivered_at = at
        self.held_since = None
        if self.on_delivered is not None:
            self.on_delivered()

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            for event in iter_watch_events(self._chunks(), self.decoder):
                if event.type == "BOOKMARK":
                    self.bookmarks += 1
                self.events += 1
                self.resource_version = event.resource_version or self.resource_version
                yield event
        finally:
            if self.held_since is not None:
                self._delivered(None)  # broken off (or an ERROR event): nothing more will be handed on
            self.close()

    def age_s(self) -> float:
        return self._clock() - self.opened_at

    def close(self) -> None:
        """Drop the connection (an unfinished body is never reused); safe to call twice."""
        self._release()

    def abort(self) -> None:
        """From another thread: end a read blocked on a silent server."""
        if self._abort is not None:
            self._abort()


@dataclass
class ListPage:
    """A LIST (all its pages, or one): the list's resourceVersion, its size, and its items when decoded."""

    resource_version: str
    continue_token: str
    size_bytes: int
    pages: int = 1
    items: list[dict[str, Any]] | None = None  # None: the transport did not decode them (the load's LISTs)


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
    return dict(jsonbody.loads(body).get("metadata") or {})
