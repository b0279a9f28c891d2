"""The load generator's client mechanics without a server: watch decoding whatever the chunking, the
watch stream's bookkeeping, LIST metadata, paths, and the reflector's LIST/WATCH/410 loop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loadtests.kubeapi import (
    Backoff,
    Gone,
    ListPage,
    Reflector,
    WatchDecoder,
    WatchError,
    WatchEvent,
    WatchStream,
    iter_watch_events,
    list_metadata,
    resource_path,
)
from loadtests.scenarios import KUBELET_WATCH, WatchNames


def line(kind: str, rv: str, name: str = "p", **extra: Any) -> bytes:
    obj = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "resourceVersion": rv,
                                                           "labels": {"a": "é"}}, **extra}
    return json.dumps({"type": kind, "object": obj}, ensure_ascii=False).encode() + b"\n"


GONE = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"too old resource version: 5 (20)","reason":"Expired","code":410}}\n')
RECORDED = line("ADDED", "11", "a") + line("MODIFIED", "12", "a", status={"phase": "Running"}) + \
    line("BOOKMARK", "15", "") + line("DELETED", "16", "a")


def decode(chunks: list[bytes]) -> list[tuple[str, str]]:
    return [(e.type, e.resource_version) for e in iter_watch_events(chunks, clock=lambda: 1.0)]


EXPECTED = [("ADDED", "11"), ("MODIFIED", "12"), ("BOOKMARK", "15"), ("DELETED", "16")]


class TestDecoding:
    def test_one_chunk_with_every_event(self) -> None:
        assert decode([RECORDED]) == EXPECTED

    def test_every_split_point(self) -> None:
        for cut in range(1, len(RECORDED)):
            assert decode([RECORDED[:cut], RECORDED[cut:]]) == EXPECTED, cut

    def test_byte_by_byte_including_inside_a_multibyte_character(self) -> None:
        assert decode([RECORDED[i:i + 1] for i in range(len(RECORDED))]) == EXPECTED

    def test_uneven_chunks_with_empty_ones(self) -> None:
        chunks, i, size = [], 0, 1
        while i < len(RECORDED):
            chunks += [RECORDED[i:i + size], b""]
            i += size
            size = size * 3 % 97 + 1
        assert decode(chunks) == EXPECTED

    def test_events_are_stamped_with_the_time_their_last_byte_arrived(self) -> None:
        first, second = line("ADDED", "1"), line("ADDED", "2")
        times = iter([10.0, 20.0, 30.0, 40.0])
        events = list(iter_watch_events([first[:5], first[5:] + second[:5], second[5:]], clock=lambda: next(times)))
        assert [e.received_at for e in events] == [20.0, 30.0]

    def test_last_event_without_newline_at_the_end(self) -> None:
        assert decode([RECORDED[:-1]]) == EXPECTED

    def test_blank_lines_are_skipped(self) -> None:
        assert decode([b"\n\r\n" + RECORDED + b"\n"]) == EXPECTED

    def test_410_error_raises_gone_after_the_events_before_it(self) -> None:
        seen: list[str] = []
        with pytest.raises(Gone, match="410 Expired"):
            for event in iter_watch_events([RECORDED[:30], RECORDED[30:] + GONE[:7], GONE[7:]]):
                seen.append(event.type)
        assert seen == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]

    def test_other_errors_raise_watch_error(self) -> None:
        error = b'{"type":"ERROR","object":{"kind":"Status","code":500,"reason":"InternalError","message":"x"}}\n'
        with pytest.raises(WatchError, match="500 InternalError"):
            decode([error])

    def test_garbage_is_a_watch_error_not_a_crash(self) -> None:
        with pytest.raises(WatchError, match="not a watch event"):
            decode([b"<html>oops</html>\n"])

    def test_decoder_keeps_the_partial_line(self) -> None:
        decoder = WatchDecoder()
        assert decoder.feed(RECORDED[:10], 0.0) == []
        assert len(decoder.feed(RECORDED[10:], 0.0)) == 4
        assert decoder.finish(0.0) == []


class FakeRaw:
    """geventhttpclient's streaming response as WatchStream uses it: readline(b"\\n"), release()."""

    def __init__(self, body: bytes, error: Exception | None = None) -> None:
        self.lines = body.splitlines(keepends=True)
        self.error = error
        self.released = 0

    def readline(self, sep: bytes) -> bytes:
        assert sep == b"\n"
        if self.lines:
            return self.lines.pop(0)
        if self.error:
            raise self.error
        return b""

    def release(self) -> None:
        self.released += 1


class FakeEvent:
    def __init__(self) -> None:
        self.fired: list[dict[str, Any]] = []

    def fire(self, **kwargs: Any) -> None:
        self.fired.append(kwargs)


class FakeResponse:
    def __init__(self, raw: FakeRaw) -> None:
        self._response = raw


class TestWatchStream:
    def test_follows_resource_versions_and_counts_bookmarks(self) -> None:
        raw, events = FakeRaw(RECORDED), FakeEvent()
        stream = WatchStream(FakeResponse(raw), "WATCH pods", events)  # type: ignore[arg-type]
        assert [e.type for e in stream] == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]
        assert (stream.resource_version, stream.events, stream.bookmarks) == ("16", 4, 1)
        assert stream.broken is None and events.fired == []  # a normal end is no failure
        assert raw.released == 1

    def test_a_broken_connection_ends_the_stream_and_is_reported_once(self) -> None:
        raw, events = FakeRaw(RECORDED[: RECORDED.index(b"BOOKMARK") + 200], TimeoutError("timed out")), FakeEvent()
        stream = WatchStream(FakeResponse(raw), "WATCH pods (node)", events)  # type: ignore[arg-type]
        assert [e.type for e in stream] == ["ADDED", "MODIFIED", "BOOKMARK"]
        assert stream.resource_version == "15" and isinstance(stream.broken, TimeoutError)
        assert len(events.fired) == 1
        assert events.fired[0]["name"] == "WATCH pods (node) stream" and events.fired[0]["request_type"] == "WATCH"

    def test_gone_propagates_and_still_releases_the_connection(self) -> None:
        raw = FakeRaw(line("ADDED", "3") + GONE)
        stream = WatchStream(FakeResponse(raw), "WATCH pods", FakeEvent())  # type: ignore[arg-type]
        with pytest.raises(Gone):
            list(stream)
        assert stream.resource_version == "3" and raw.released == 1


class TestListMetadata:
    def test_read_from_the_head_only(self) -> None:
        body = (b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1742","continue":"abc",'
                b'"remainingItemCount":3},"items":[' + b'{"metadata":{"resourceVersion":"9"}},' * 5000 + b"{}]}")
        assert list_metadata(body) == {"resourceVersion": "1742", "continue": "abc", "remainingItemCount": 3}

    def test_falls_back_to_a_full_decode(self) -> None:
        body = b'{"items":[], "metadata": {"resourceVersion": "7"}}'
        assert list_metadata(body)["resourceVersion"] == "7"


def test_resource_paths() -> None:
    assert resource_path("pods") == "/api/v1/pods"
    assert resource_path("pods", "ns1", "p1") == "/api/v1/namespaces/ns1/pods/p1"
    assert resource_path("nodes", "ignored", "n1") == "/api/v1/nodes/n1"
    assert resource_path("deployments", "ns", "d", "scale") == "/apis/apps/v1/namespaces/ns/deployments/d/scale"
    assert resource_path("leases", "lease-ns") == "/apis/coordination.k8s.io/v1/namespaces/lease-ns/leases"
    assert (resource_path("pods", query={"watch": "1", "fieldSelector": "spec.nodeName=n-1"})
            == "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn-1")
    with pytest.raises(ValueError, match="widgets"):
        resource_path("widgets")


class FakeStream:
    def __init__(self, events: list[WatchEvent], end: Exception | None = None, rv: str = "") -> None:
        self._events, self._end = events, end
        self.resource_version, self.events, self.broken, self.opened_at = rv, len(events), None, 0.0

    def __iter__(self) -> Any:
        yield from self._events
        if self._end:
            raise self._end


class FakeApi:
    """Scripted answers; records (verb, name, resourceVersion) of each call."""

    def __init__(self, watches: list[Any]) -> None:
        self.watches = watches
        self.calls: list[tuple[str, str, str]] = []

    def list_all(self, resource: str, namespace: str, names: Any, *, resource_version: str, limit: int,
                 field_selector: str) -> ListPage:
        self.calls.append(("LIST", names.first, resource_version))
        return ListPage(resource_version="100", continue_token="", size_bytes=10)

    def watch(self, resource: str, namespace: str, name: str, *, resource_version: str, field_selector: str,
              timeout_s: float) -> Any:
        self.calls.append(("WATCH", name, resource_version))
        assert timeout_s >= 1
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def event(kind: str, rv: str) -> WatchEvent:
    return WatchEvent(kind, {"metadata": {"resourceVersion": rv}}, 0.0)


class TestReflector:
    def test_informer_lists_watches_resumes_and_relists_on_gone(self) -> None:
        names = WatchNames.of("pods", "", "informer", list_rv="0")
        api = FakeApi([
            FakeStream([event("ADDED", "101"), event("BOOKMARK", "150")], rv="150"),
            FakeStream([event("MODIFIED", "151")], end=Gone("410"), rv="151"),
            Gone("410 at the start"),
            FakeStream([event("ADDED", "160")], rv="160"),
        ])
        seen: list[str] = []
        reflector = Reflector(api, "pods", names, on_event=lambda e: seen.append(e.type),  # type: ignore[arg-type]
                              backoff=Backoff(sleep=lambda _s: None))
        for _ in range(4):
            reflector.step()
        assert api.calls == [
            ("LIST", "LIST pods (informer, rv=0)", "0"),
            ("WATCH", "WATCH pods (informer)", "100"),
            ("WATCH", "WATCH pods (informer, rewatch)", "150"),
            ("LIST", "LIST pods (informer, consistent)", ""),
            ("WATCH", "WATCH pods (informer, rewatch)", "100"),
            ("LIST", "LIST pods (informer, consistent)", ""),
            ("WATCH", "WATCH pods (informer, rewatch)", "100"),
        ]
        assert seen == ["ADDED", "BOOKMARK", "MODIFIED", "ADDED"]
        assert (reflector.watches, reflector.gone, reflector.resource_version) == (3, 2, "160")

    def test_kubelet_watcher_never_lists_and_starts_over_on_gone(self) -> None:
        api = FakeApi([FakeStream([event("ADDED", "7")], rv="7"), FakeStream([], end=Gone("410")),
                       FakeStream([], rv="")])
        reflector = Reflector(api, "pods", KUBELET_WATCH, field_selector="spec.nodeName=n",  # type: ignore[arg-type]
                              backoff=Backoff(sleep=lambda _s: None))
        for _ in range(3):
            reflector.step()
        assert api.calls == [("WATCH", "WATCH pods (node)", ""), ("WATCH", "WATCH pods (node, rewatch)", "7"),
                             ("WATCH", "WATCH pods (node, rewatch)", "")]

    def test_failed_watch_backs_off_and_a_quick_empty_end_too(self) -> None:
        slept: list[float] = []
        api = FakeApi([None, FakeStream([], rv=""), FakeStream([event("ADDED", "1")], rv="1")])
        clock = iter([0.0] * 20)
        reflector = Reflector(api, "pods", KUBELET_WATCH, backoff=Backoff(sleep=slept.append),  # type: ignore[arg-type]
                              clock=lambda: next(clock))
        for _ in range(3):
            reflector.step()
        assert len(slept) == 2 and slept[1] > slept[0] * 0.5  # failed, then ended at once with nothing

    def test_stops_at_the_deadline(self) -> None:
        now = [0.0]
        api = FakeApi([FakeStream([event("ADDED", "1")], rv="1")] * 50)

        def watch(*args: Any, **kwargs: Any) -> Any:
            now[0] += 10
            return FakeApi.watch(api, *args, **kwargs)

        api.watch = watch  # type: ignore[method-assign]
        Reflector(api, "pods", KUBELET_WATCH, deadline=35.0, clock=lambda: now[0],  # type: ignore[arg-type]
                  backoff=Backoff(sleep=lambda _s: None)).run()
        assert len(api.calls) == 4
