"""A watch read in batches (WatchStream's batch_s): what is read is held until the first chunk held is batch_s old,
then decoded in order, each event with the time its own chunk was read. Driven by a scripted transport on a clock
of its own: a read blocks until the next chunk's arrival, a ready() waits until it or for as long as it is given."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from loadtests.kube.errors import Gone
from loadtests.kube.watch import WatchEvent, WatchStream
from loadtests.measure import cluster_objects
from tests.unit.test_kube_protocol import GONE, line
from tests.unit.test_measure_probes import unreachable_target

BATCH_S = 0.25


class Script:
    """Chunks arriving at given times (None: the connection breaks then), on a clock only reads and waits move."""

    def __init__(self, arrivals: list[tuple[float, bytes | None]]) -> None:
        self.arrivals = list(arrivals)
        self.now = 0.0
        self.reads: list[float] = []  # when each read returned

    def clock(self) -> float:
        return self.now

    def read(self) -> bytes:
        if not self.arrivals:
            return b""
        at, chunk = self.arrivals.pop(0)
        self.now = max(self.now, at)  # blocked until it came
        self.reads.append(self.now)
        if chunk is None:
            raise ConnectionResetError("reset by peer")
        return chunk

    def ready(self, timeout_s: float) -> bool:
        if self.arrivals and self.arrivals[0][0] <= self.now + timeout_s:
            self.now = max(self.now, self.arrivals[0][0])
            return True
        self.now += timeout_s
        return False

    def stream(self, batch_s: float = BATCH_S) -> WatchStream:
        return WatchStream(self.read, lambda: None, clock=self.clock, ready=self.ready, batch_s=batch_s)


def handed_on(stream: WatchStream, script: Script) -> Iterator[tuple[str, float, float]]:
    """Each event's resourceVersion, its stamp, and the script's time when it was handed on."""
    for event in stream:
        yield event.resource_version, event.received_at, script.now


def test_chunks_read_before_the_first_is_batch_s_old_are_handed_on_together_each_with_its_own_stamp() -> None:
    script = Script([(1.0, line("ADDED", "1")), (1.1, line("MODIFIED", "2")), (1.2, line("ADDED", "3")[:10]),
                     (1.24, line("ADDED", "3")[10:] + line("ADDED", "4")), (2.0, line("DELETED", "5"))])
    found = list(handed_on(script.stream(), script))
    # the first four chunks came within 0.25 s of the first: handed on at 1.25, when it was batch_s old
    assert found[:4] == [("1", 1.0, 1.25), ("2", 1.1, 1.25), ("3", 1.24, 1.25), ("4", 1.24, 1.25)]
    assert found[4] == ("5", 2.0, 2.25)  # a quiet stream hands on what it holds once batch_s passed


def test_unbatched_or_without_ready_each_chunk_is_handed_on_as_it_is_read() -> None:
    for stream_of in (lambda s: s.stream(batch_s=0.0),
                      lambda s: WatchStream(s.read, lambda: None, clock=s.clock, batch_s=BATCH_S)):
        script = Script([(1.0, line("ADDED", "1")), (1.1, line("ADDED", "2"))])
        assert list(handed_on(stream_of(script), script)) == [("1", 1.0, 1.0), ("2", 1.1, 1.1)]


def test_held_since_and_delivered_at_follow_what_was_handed_on() -> None:
    script = Script([(1.0, line("ADDED", "1")), (1.1, line("ADDED", "2")), (3.0, line("ADDED", "3"))])
    stream = script.stream()
    told: list[tuple[float | None, float]] = []
    stream.on_delivered = lambda: told.append((stream.held_since, stream.delivered_at))
    seen = []
    for event in stream:
        seen.append((event.resource_version, stream.held_since, stream.delivered_at))
    # while a batch's events are handed on it is held since its first chunk was read
    assert seen == [("1", 1.0, 0.0), ("2", 1.0, 0.0), ("3", 3.0, 1.1)]
    assert told == [(None, 1.1), (None, 3.0)]  # once per batch, after its last event was handled
    assert stream.held_since is None


def test_an_error_event_still_raises_after_the_events_held_before_it() -> None:
    script = Script([(1.0, line("ADDED", "1")), (1.1, GONE), (1.2, line("ADDED", "3"))])
    stream = script.stream()
    seen: list[str] = []
    with pytest.raises(Gone, match="410 Expired"):
        for event in stream:
            seen.append(event.resource_version)
    assert seen == ["1"]
    assert stream.held_since is None  # nothing more will be handed on: no reader waits for it


def test_a_break_after_held_chunks_still_hands_them_on_first() -> None:
    script = Script([(1.0, line("ADDED", "1")), (1.1, line("ADDED", "2")), (1.2, None)])
    stream = script.stream()
    events: list[WatchEvent] = list(stream)
    assert [(e.resource_version, e.received_at) for e in events] == [("1", 1.0), ("2", 1.1)]
    assert isinstance(stream.broken, ConnectionResetError)
    assert script.now == 1.2  # handed on at the break, not batch_s after the first
    assert stream.delivered_at == 1.1 and stream.held_since is None


def _watched_reading(stream: WatchStream) -> cluster_objects.Watched[Any]:
    """A view's pods as if their watch ran and were reading `stream` (its HTTP side needs a cluster)."""
    watched = cluster_objects.ClusterView(unreachable_target({}).access).pods_in("churn")
    assert watched.batch_s == cluster_objects.HEALTH_BATCH_S > 0
    watched._watch._thread = threading.current_thread()  # running
    watched._watch.reflector._stream = stream
    stream.on_delivered = watched._on_delivered
    return watched


def test_a_windows_end_waits_for_what_its_watch_read_before_it_and_no_longer() -> None:
    script = Script([(1.0, line("ADDED", "1")), (1.1, line("ADDED", "2")), (1.2, line("ADDED", "3"))])
    stream = script.stream()
    watched = _watched_reading(stream)
    assert watched.settle(timeout_s=5.0)  # nothing read yet: at once
    events = iter(stream)
    seen = [next(events).resource_version]  # a batch is being handed on: held since 1.0
    assert not watched.settle(timeout_s=0.05)  # held, and no one hands it on: it gives up
    assert watched.settle(until=0.5, timeout_s=5.0)  # all it holds was read after `until`
    settled: list[tuple[bool, list[str]]] = []
    waiter = threading.Thread(target=lambda: settled.append((watched.settle(timeout_s=5.0), list(seen))))
    waiter.start()
    for event in events:
        seen.append(event.resource_version)  # each before the next is asked for, which ends the batch
    waiter.join()
    assert settled == [(True, ["1", "2", "3"])]  # woken once the batch was handed on, not before
    watched._watch._stop.set()
    stream.held_since = 1.0
    assert watched.settle(timeout_s=5.0)  # a watch that is not running is never waited for
