"""client-go's reflector loop, once for every watcher of the harness: the load's kubelets and informers
(gevent, in Locust), the fleet's node watch and the probes' watches (threads, in the runner).

LIST (or not), WATCH from the list's resourceVersion with bookmarks, resume each ended watch from the last
resourceVersion seen, LIST again (a consistent read) on 410 Gone, back off with jitter after failures. An
informer may instead get its state by API streaming (WatchList: one WATCH whose initial events are the state),
and says when it is back in sync after losing it (SyncClock).
The transport is anything with `list_all` and `watch` as below; failures come back as None (the load's
client, which records them as Locust failures) or as ApiError / WatchError (the harness's client).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from loadtests.kube.errors import ApiError, Gone, WatchError
from loadtests.kube.names import ListNames, WatchNames
from loadtests.kube.watch import WATCH_TIMEOUT_MIN_S, ListPage, WatchEvent, WatchStream, ends_initial_events

FAILURES = (ApiError, WatchError)
# the jitter of every watcher in the process, unless given its own: a generator's state is 2.5 KiB, and a Locust
# process holds a reflector and a backoff per watch, tens of thousands of them
SHARED_RNG = random.Random()


class ListWatchApi(Protocol):
    def list_all(self, resource: str, namespace: str, names: ListNames, *, resource_version: str = "0",
                 limit: int = 0, field_selector: str = "", label_selector: str = "",
                 all_pages: bool = True, encoding: str = "json", fields: tuple[str, ...] = ()) -> ListPage | None: ...

    def watch(self, resource: str, namespace: str, name: str, *, resource_version: str = "",
              field_selector: str = "", label_selector: str = "", timeout_s: float = WATCH_TIMEOUT_MIN_S,
              bookmarks: bool = True, initial_events: bool = False, encoding: str = "json",
              fields: tuple[str, ...] = (), batch_s: float = 0.0) -> WatchStream | None: ...


class Backoff:
    """Exponential backoff with jitter, so a failing apiserver is not hammered by every watcher at once: each wait
    is the current delay times a random factor in `jitter` (low, high), the delay doubling up to max_s.

    By default a success starts it over (reset()). With `reset_after_s` it follows client-go@v0.37.2's reflector
    instead (`tools/cache/reflector.go`, `NewReflectorWithOptions`: `wait.Backoff{...}.DelayWithReset(clock,
    defaultBackoffReset)`; apimachinery `wait/backoff.go`, `backoffManager.Step`): a success changes nothing, and
    the delay starts over once more than reset_after_s has passed since it last started over (its creation, or
    the previous start-over), failures or not. See client_go()."""

    def __init__(self, first_s: float = 0.5, max_s: float = 10.0, sleep: Callable[[float], Any] = time.sleep,
                 rng: random.Random | None = None, *, jitter: tuple[float, float] = (0.5, 1.5),
                 reset_after_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.first_s, self.max_s, self._sleep = first_s, max_s, sleep
        self.jitter, self.reset_after_s, self._clock = jitter, reset_after_s, clock
        self._rng = rng or SHARED_RNG
        self._next = first_s
        self._started = clock()

    @classmethod
    def client_go(cls, sleep: Callable[[float], Any] = time.sleep, rng: random.Random | None = None,
                  clock: Callable[[], float] = time.monotonic) -> Backoff:
        """client-go's reflector backoff (`reflector.go`: defaultBackoffInit 800 ms, defaultBackoffMax 30 s,
        defaultBackoffFactor 2, defaultBackoffJitter 1.0, defaultBackoffReset 2 min): waits of 0.8-1.6 s,
        1.6-3.2 s, ... doubling, then 30-60 s (`wait.Jitter`: the delay plus up to once more), starting over
        2 minutes after it last did."""
        return cls(0.8, 30.0, sleep, rng, jitter=(1.0, 2.0), reset_after_s=120.0, clock=clock)

    def wait(self) -> None:
        if self.reset_after_s is not None and self._clock() - self._started > self.reset_after_s:
            self._next, self._started = self.first_s, self._clock()
        low, high = self.jitter
        self._sleep(self._next * (low + (high - low) * self._rng.random()))
        self._next = min(self.max_s, self._next * 2)

    def reset(self) -> None:
        """A success: the next wait is the first again, unless only time starts this backoff over."""
        if self.reset_after_s is None:
            self._next = self.first_s

    def spread(self, most_s: float) -> None:
        """A random wait in [0, most_s): reconnects of many clients spread over that long."""
        self._sleep(most_s * self._rng.random())


class SyncClock:
    """When a watcher lost its state and when it had it again, on its own clock: out of sync from the moment
    its watch was cut early (its apiserver went away) or answered 410 Gone, until synced again (a LIST
    returned, a resumed watch was established, or a watch-list stream sent its last initial event). `synced`
    gives the seconds out of sync, the seconds of the attempt that succeeded (from its start, after any
    backoff, to synced), so the time the apiserver was away and the time the sync itself took can be told
    apart, and the bytes received to get there (LIST pages, watch-list streams, cut ones included)."""

    def __init__(self) -> None:
        self.cut_at: float | None = None
        self.attempt_at: float | None = None
        self.bytes = 0

    def cut(self, at: float) -> None:
        if self.cut_at is None:  # still out of sync from the first cut: a failed attempt changes nothing
            self.cut_at = at

    def attempt(self, at: float) -> None:
        self.attempt_at = at

    def received(self, nbytes: int) -> None:
        if self.cut_at is not None:  # what the first sync received is the load's start, not a recovery
            self.bytes += nbytes

    def synced(self, at: float) -> tuple[float, float, int] | None:
        """(out of sync s, the successful attempt s, bytes received meanwhile), or None when the watcher was in
        sync already."""
        if self.cut_at is None:
            return None
        started = self.attempt_at if self.attempt_at is not None and self.attempt_at >= self.cut_at else self.cut_at
        found = (max(0.0, at - self.cut_at), max(0.0, at - started), self.bytes)
        self.cut_at = self.attempt_at = None
        self.bytes = 0
        return found


class Reflector:
    """One watcher of one collection. Runs until `deadline` (clock time) or stop(); Locust may also kill a
    user's greenlet at the end of a run. `on_list` sees each LIST (its items when the transport decodes
    them), `on_event` each watch event (BOOKMARKs included), `on_synced` each time it is in sync again after
    losing its state (SyncClock.synced's durations and bytes).

    `watch_list`: the state comes from one WATCH with sendInitialEvents (API streaming) instead of a LIST
    (it needs a watcher with LIST names, i.e. an informer). `relist_on_cut`: a watch cut early starts over
    from nothing (a LIST, or a watch-list stream), as the informers of a client that restarts with its
    apiserver, or whose resourceVersion the restarted apiserver no longer serves; otherwise it resumes.
    `encoding`: what its LISTs and WATCHes ask for, JSON or protobuf (as kubelets and kube-proxy do); the
    events are the same WatchEvents either way. `fields`: all that is read of each object (dotted JSON paths),
    so protobuf converts only those (JSON is read whole); () for the transport's default. `batch_s`: its events
    decoded in batches, held up to that long (WatchStream; a transport may ignore it); `on_delivered` is told
    each time the watch handed on all it held (`stream` says what it holds)."""

    def __init__(self, api: ListWatchApi, resource: str, names: WatchNames, *, namespace: str = "",
                 field_selector: str = "", label_selector: str = "", page_limit: int = 500,
                 all_pages: bool = True, deadline: float | None = None,
                 on_event: Callable[[WatchEvent], None] | None = None,
                 on_list: Callable[[ListPage], None] | None = None, backoff: Backoff | None = None,
                 clock: Callable[[], float] = time.time, rng: random.Random | None = None,
                 reconnect_spread_s: float = 0.0, watch_list: bool = False, relist_on_cut: bool = False,
                 on_synced: Callable[[float, float, int], None] | None = None, encoding: str = "json",
                 watch_timeout_s: tuple[float, float] = (WATCH_TIMEOUT_MIN_S, 2 * WATCH_TIMEOUT_MIN_S),
                 list_fallback: bool = False, fields: tuple[str, ...] = (), batch_s: float = 0.0,
                 on_delivered: Callable[[], None] | None = None) -> None:
        self.api, self.resource, self.names = api, resource, names
        self.batch_s, self.on_delivered = batch_s, on_delivered
        self.fields = fields
        self.watch_timeout_s = watch_timeout_s
        # client-go's reflector: a streaming list that fails is followed at once by a LIST and a WATCH from it
        # (ListAndWatchWithContext's fallbackToList); the next loss of state tries streaming again
        self.list_fallback = list_fallback and names.initial_list is not None
        self._list_next = False
        self.encoding = encoding
        self.watch_list = watch_list and names.initial_list is not None
        self.relist_on_cut = relist_on_cut
        self.on_synced = on_synced
        self.sync = SyncClock()
        # a watch cut before its own timeout (its apiserver restarted) is resumed after a random wait below this,
        # so that many informers do not all reconnect, and relist, in the same instant; 0: at once, as client-go
        self.reconnect_spread_s = reconnect_spread_s
        self.namespace, self.field_selector, self.label_selector = namespace, field_selector, label_selector
        self.page_limit, self.all_pages = page_limit, all_pages
        self.deadline, self.on_event, self.on_list, self._clock = deadline, on_event, on_list, clock
        self._backoff = backoff or Backoff()
        self._rng = rng or SHARED_RNG
        self.resource_version: str | None = None  # None: LIST (or watch from "now") next
        self.watches = 0
        self.lists = 0
        self.gone = 0
        self.errors = 0
        self.last_error: str | None = None
        self._stopping = False
        self._stream: WatchStream | None = None

    @property
    def stream(self) -> WatchStream | None:
        """The watch being read now, if any."""
        return self._stream

    def _remaining(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - self._clock()

    def _watch_timeout(self) -> float:
        low, high = self.watch_timeout_s
        jittered = low + (high - low) * self._rng.random()
        return max(1.0, min(jittered, self._remaining()))

    def list_now(self) -> bool:
        """LIST and remember its resourceVersion; False when the transport reported a failure. The first
        LIST uses the initial names (rv=0, the watch cache), later ones a consistent read (after a 410)."""
        names = self.names.relist if self.lists else self.names.initial_list
        assert names is not None, "a watcher without LIST names watches from now"
        page = self.api.list_all(self.resource, self.namespace, names, resource_version="" if self.lists else "0",
                                 limit=self.page_limit, field_selector=self.field_selector,
                                 label_selector=self.label_selector, all_pages=self.all_pages,
                                 encoding=self.encoding, fields=self.fields)
        if page is None:
            return False
        self.lists += 1
        self.resource_version = page.resource_version
        self.sync.received(page.size_bytes)
        if self.on_list is not None:
            self.on_list(page)
        return True

    def step(self) -> None:
        """One LIST-if-needed and one watch to its end."""
        try:
            self._step()
        except Gone:
            self.gone += 1
            self.resource_version = None
            self.sync.cut(self._clock())  # the apiserver no longer serves this resourceVersion: the state is lost
        except FAILURES as error:
            self._failed(error)

    def _synced(self) -> None:
        found = self.sync.synced(self._clock())  # None: in sync already (its first sync is the load's start)
        if found is not None and self.on_synced is not None:
            self.on_synced(*found)

    def _failed(self, error: BaseException | None) -> None:
        if self._stopping:
            return  # the watch this loop was asked to stop broke because of that: no failure
        self.errors += 1
        if error is not None:
            self.last_error = f"{type(error).__name__}: {error}"
        if not self._stopping:
            self._backoff.wait()

    def _open(self, streaming: bool, timeout_s: float) -> WatchStream | None:
        """This reflector's next WATCH, from its resourceVersion (or its state first, when `streaming`)."""
        name = self.names.again if self.watches else self.names.first
        return self.api.watch(self.resource, self.namespace, name, resource_version=self.resource_version or "",
                              field_selector=self.field_selector, label_selector=self.label_selector,
                              timeout_s=timeout_s, initial_events=streaming, encoding=self.encoding,
                              fields=self.fields, batch_s=self.batch_s)

    def _step(self) -> None:
        self.sync.attempt(self._clock())
        streaming = self.watch_list and self.resource_version is None and not self._list_next  # state by a stream
        if self.resource_version is None and self.names.initial_list is not None and not streaming:
            if not self.list_now():
                self._failed(None)
                return
            self._list_next = False
            self._synced()  # the LIST returned: the state is there (client-go's HasSynced), the watch follows
        timeout_s = self._watch_timeout()
        stream = self._open(streaming, timeout_s)
        if stream is None:
            if streaming and self.list_fallback:
                self._list_next = True  # refused or failed: a LIST next, at once, as client-go falls back
                return
            self._failed(None)
            return
        self.watches += 1
        stream.on_delivered = self.on_delivered
        if not streaming:
            self._synced()  # a resumed watch is established: nothing was lost
        self._stream = stream
        complete = not streaming  # a watch-list stream holds the state only once its initial events ended
        try:
            for event in stream:
                if complete:
                    self.resource_version = stream.resource_version or self.resource_version
                if self.on_event is not None:
                    self.on_event(event)
                if not complete and ends_initial_events(event):
                    complete = True
                    self.resource_version = stream.resource_version
                    self.sync.received(stream.bytes)
                    self._synced()
                if self._stopping:
                    break
        except WatchError:
            if complete:
                self.resource_version = stream.resource_version or self.resource_version
            if not self._stopping:
                self._cut()
            raise
        finally:
            self._stream = None
            if not complete:
                self.sync.received(stream.bytes)  # a watch-list stream cut before its state was whole
        if complete:
            self.resource_version = stream.resource_version or self.resource_version
        lasted = self._clock() - stream.opened_at
        if stream.broken is not None or (stream.events == 0 and lasted < 1.0):
            self._failed(stream.broken)  # a watch that ends at once must not turn into a request loop
        else:
            self._backoff.reset()
        cut = not self._stopping and (stream.broken is not None or lasted < timeout_s - 1.0)
        if cut:
            self._cut()
        if cut and self.reconnect_spread_s:
            self._backoff.spread(self.reconnect_spread_s)

    def _cut(self) -> None:
        """The watch ended early: out of sync until synced again; starting over from nothing if so asked."""
        self.sync.cut(self._clock())
        if self.relist_on_cut:
            self.resource_version = None

    def run(self) -> None:
        while not self._stopping and self._remaining() > 0:
            self.step()

    def cut(self) -> None:
        """From another thread: end the watch being read as a broken connection would, the loop going on (it
        resumes from the last resourceVersion it saw, a bookmark's included)."""
        stream = self._stream
        if stream is not None:
            stream.abort()

    def stop(self) -> None:
        """From another thread: end the loop, and the watch it is reading, now."""
        self._stopping = True
        stream = self._stream
        if stream is not None:
            stream.abort()


class BackgroundReflector:
    """A Reflector in a daemon thread, for the runner's own watchers (fleet, probes): start() LISTs first in
    the caller's thread, so a failure to list surfaces there, then watches until stop()."""

    JOIN_TIMEOUT_S = 5.0

    def __init__(self, api: ListWatchApi, resource: str, names: WatchNames, **options: Any) -> None:
        self._stop = threading.Event()
        options.setdefault("backoff", Backoff(first_s=0.2, max_s=5.0, sleep=self._stop.wait))
        self.reflector = Reflector(api, resource, names, **options)
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Started and not stopped."""
        return self._thread is not None and not self._stop.is_set()

    def start(self) -> None:
        if self.reflector.names.initial_list is not None and not self.reflector.list_now():
            raise ApiError(0, f"LIST {self.reflector.resource} failed")
        self._thread = threading.Thread(target=self._run, name=f"watch {self.reflector.resource}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reflector.run()
            except Exception as error:  # a watcher thread must survive anything, and retry
                self.reflector.errors += 1
                self.reflector.last_error = f"{type(error).__name__}: {error}"
                self._stop.wait(1.0)
            else:
                return

    def stop(self) -> None:
        """End the watch now and join the thread; idempotent."""
        self._stop.set()
        self.reflector.stop()
        if self._thread is not None:
            self._thread.join(timeout=self.JOIN_TIMEOUT_S)
            self._thread = None
