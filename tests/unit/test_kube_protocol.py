"""The protocol layer without a server: watch decoding whatever the chunking, the watch stream's
bookkeeping, LIST metadata, paths, request verbs, and the reflector's LIST/WATCH/410 loop."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from loadtests.config.scenarios import KUBELET_WATCH
from loadtests.kube.errors import ApiError, Gone, WatchError
from loadtests.kube.names import WatchNames
from loadtests.kube.paths import object_path, resource_key, resource_path
from loadtests.kube.reflector import BackgroundReflector, Backoff, Reflector
from loadtests.kube.rest import verb_and_resource
from loadtests.kube.watch import ListPage, WatchDecoder, WatchEvent, WatchStream, iter_watch_events, list_metadata


def line(kind: str, rv: str, name: str = "p", **extra: Any) -> bytes:
    obj = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "resourceVersion": rv,
                                                           "labels": {"a": "é"}}, **extra}
    return json.dumps({"type": kind, "object": obj}, ensure_ascii=False).encode() + b"\n"


GONE = (b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"too old resource version: 5 (20)","reason":"Expired","code":410}}\n')
RECORDED = line("ADDED", "11", "a") + line("MODIFIED", "12", "a", status={"phase": "Running"}) + \
    line("BOOKMARK", "15", "") + line("DELETED", "16", "a")


def decode(chunks: list[bytes]) -> list[tuple[str, str]]:
    return [(e.type, e.resource_version) for e in iter_watch_events([(chunk, 1.0) for chunk in chunks])]


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
        chunks = [first[:5], first[5:] + second[:5], second[5:]]
        events = list(iter_watch_events(zip(chunks, [10.0, 20.0, 30.0], strict=True)))
        assert [e.received_at for e in events] == [20.0, 30.0]

    def test_last_event_without_newline_at_the_end(self) -> None:
        assert decode([RECORDED[:-1]]) == EXPECTED

    def test_blank_lines_are_skipped(self) -> None:
        assert decode([b"\n\r\n" + RECORDED + b"\n"]) == EXPECTED

    def test_410_error_raises_gone_after_the_events_before_it(self) -> None:
        seen: list[str] = []
        with pytest.raises(Gone, match="410 Expired"):
            chunks = [RECORDED[:30], RECORDED[30:] + GONE[:7], GONE[7:]]
            for event in iter_watch_events((chunk, 0.0) for chunk in chunks):
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
    """A streaming response as a transport hands it to WatchStream: readline(b"\\n"), release()."""

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


def stream_of(raw: FakeRaw, broken: list[BaseException] | None = None) -> WatchStream:
    return WatchStream(lambda: raw.readline(b"\n"), raw.release,
                       on_broken=lambda _stream, error: (broken if broken is not None else []).append(error))


class TestWatchStream:
    def test_follows_resource_versions_and_counts_bookmarks(self) -> None:
        raw, broken = FakeRaw(RECORDED), []
        stream = stream_of(raw, broken)
        assert [e.type for e in stream] == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]
        assert (stream.resource_version, stream.events, stream.bookmarks) == ("16", 4, 1)
        assert stream.bytes == len(RECORDED)
        assert stream.broken is None and broken == []  # a normal end is no failure
        assert raw.released == 1

    def test_a_broken_connection_ends_the_stream_and_is_reported_once(self) -> None:
        raw, broken = FakeRaw(RECORDED[: RECORDED.index(b"BOOKMARK") + 200], TimeoutError("timed out")), []
        stream = stream_of(raw, broken)
        assert [e.type for e in stream] == ["ADDED", "MODIFIED", "BOOKMARK"]
        assert stream.resource_version == "15" and isinstance(stream.broken, TimeoutError)
        assert len(broken) == 1 and broken[0] is stream.broken

    def test_gone_propagates_and_still_releases_the_connection(self) -> None:
        raw = FakeRaw(line("ADDED", "3") + GONE)
        stream = stream_of(raw)
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


def test_a_node_agents_resources_have_paths_and_two_groups_events_their_own_keys() -> None:
    assert (resource_path("podcertificaterequests", query={"fieldSelector": "spec.nodeName=n"})
            == "/apis/certificates.k8s.io/v1/podcertificaterequests?fieldSelector=spec.nodeName%3Dn")
    assert resource_path("runtimeclasses", "ignored") == "/apis/node.k8s.io/v1/runtimeclasses"
    assert resource_path("csinodes", name="n") == "/apis/storage.k8s.io/v1/csinodes/n"
    assert resource_path("servicecidrs") == "/apis/networking.k8s.io/v1/servicecidrs"
    assert resource_path("secrets", "ns", "s") == "/api/v1/namespaces/ns/secrets/s"
    assert resource_path("events", "ns") == "/api/v1/namespaces/ns/events"
    assert resource_path("events.events.k8s.io", "ns") == "/apis/events.k8s.io/v1/namespaces/ns/events"
    assert [resource_key("events", group) for group in ("", "events.k8s.io")] == ["events", "events.events.k8s.io"]
    assert resource_key("csidrivers", "storage.k8s.io") == "csidrivers"
    with pytest.raises(ValueError, match="'csidrivers' of group ''"):
        resource_key("csidrivers")
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"}}
    assert object_path(event) == "/apis/events.k8s.io/v1/namespaces/ns/events/e"


def test_object_paths_come_from_the_same_table() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}
    assert object_path(deployment) == "/apis/apps/v1/namespaces/n/deployments/d"
    assert object_path(role) == "/apis/rbac.authorization.k8s.io/v1/clusterroles/r"
    with pytest.raises(ValueError, match="Widget"):
        object_path({"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "w"}})


def test_request_verbs_are_the_apiservers() -> None:
    assert verb_and_resource("GET", "/api/v1/namespaces/x/pods") == ("LIST", "pods")
    assert verb_and_resource("GET", "/api/v1/namespaces/x/pods?watch=1&resourceVersion=5") == ("WATCH", "pods")
    assert verb_and_resource("GET", "/api/v1/namespaces/x/configmaps/c") == ("GET", "configmaps")
    assert verb_and_resource("PATCH", "/apis/apps/v1/namespaces/x/deployments/d") == ("PATCH", "deployments")
    assert verb_and_resource("GET", "/api/v1/namespaces/loadtest-fleet") == ("GET", "namespaces")
    assert verb_and_resource("POST", "/api/v1/nodes") == ("POST", "nodes")


class FakeStream:
    def __init__(self, events: list[WatchEvent], end: Exception | None = None, rv: str = "") -> None:
        self._events, self._end = events, end
        self.resource_version, self.events, self.broken, self.opened_at = rv, len(events), None, 0.0
        self.aborted = False
        self.bytes = 0

    def __iter__(self) -> Any:
        yield from self._events
        if self._end:
            raise self._end

    def abort(self) -> None:
        self.aborted = True


class FakeApi:
    """Scripted answers; records (verb, name, resourceVersion) of each call."""

    def __init__(self, watches: list[Any]) -> None:
        self.watches = watches
        self.calls: list[tuple[str, str, str]] = []
        self.initial_events: list[bool] = []  # each watch: whether it asked for the state first (WatchList)
        self.encodings: list[str] = []  # each call's encoding
        self.fields: list[tuple[str, ...]] = []  # each call's fields

    def list_all(self, resource: str, namespace: str, names: Any, *, resource_version: str, limit: int,
                 field_selector: str, label_selector: str, all_pages: bool, encoding: str = "json",
                 fields: tuple[str, ...] = ()) -> ListPage:
        self.calls.append(("LIST", names.first, resource_version))
        self.encodings.append(encoding)
        self.fields.append(fields)
        return ListPage(resource_version="100", continue_token="", size_bytes=10, items=[{"metadata": {}}])

    def watch(self, resource: str, namespace: str, name: str, *, resource_version: str, field_selector: str,
              label_selector: str, timeout_s: float, initial_events: bool = False, encoding: str = "json",
              fields: tuple[str, ...] = (), batch_s: float = 0.0) -> Any:
        self.calls.append(("WATCH", name, resource_version))
        self.initial_events.append(initial_events)
        self.encodings.append(encoding)
        self.fields.append(fields)
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
        assert api.encodings == ["json"] * 3  # what the load's kubelets did before a plan could ask for protobuf

    def test_every_list_and_watch_of_a_reflector_asks_in_its_encoding(self) -> None:
        names = WatchNames.of("pods", "", "informer", list_rv="0")
        api = FakeApi([FakeStream([event("ADDED", "101")], end=Gone("410"), rv="101"), FakeStream([], rv="")])
        reflector = Reflector(api, "pods", names, backoff=Backoff(sleep=lambda _s: None),  # type: ignore[arg-type]
                              encoding="protobuf", fields=("status.phase",))
        for _ in range(2):
            reflector.step()
        assert [verb for verb, _, _ in api.calls] == ["LIST", "WATCH", "LIST", "WATCH"]
        assert api.encodings == ["protobuf"] * 4
        assert api.fields == [("status.phase",)] * 4  # what of each object is read, asked of every call

    def test_failed_watch_backs_off_and_a_quick_empty_end_too(self) -> None:
        slept: list[float] = []
        api = FakeApi([None, FakeStream([], rv=""), FakeStream([event("ADDED", "1")], rv="1")])
        clock = iter([0.0] * 20)
        reflector = Reflector(api, "pods", KUBELET_WATCH, backoff=Backoff(sleep=slept.append),  # type: ignore[arg-type]
                              clock=lambda: next(clock))
        for _ in range(3):
            reflector.step()
        assert len(slept) == 2 and slept[1] > slept[0] * 0.5  # failed, then ended at once with nothing

    def test_a_watch_cut_early_resumes_after_a_random_wait_within_the_spread_and_one_that_timed_out_at_once(
            self) -> None:
        slept: list[float] = []
        now = [0.0]
        api = FakeApi([FakeStream([event("ADDED", "1")], rv="1"), FakeStream([event("ADDED", "2")], rv="2")])

        def watch(*args: Any, **kwargs: Any) -> Any:
            stream = FakeApi.watch(api, *args, **kwargs)
            stream.opened_at = now[0]
            now[0] += 30.0 if len(api.calls) == 1 else kwargs["timeout_s"]  # cut after 30 s, then its full time
            return stream

        api.watch = watch  # type: ignore[method-assign]
        reflector = Reflector(api, "pods", KUBELET_WATCH, backoff=Backoff(sleep=slept.append),  # type: ignore[arg-type]
                              clock=lambda: now[0], reconnect_spread_s=20.0)
        reflector.step()
        assert len(slept) == 1 and 0 <= slept[0] < 20.0
        reflector.step()
        assert len(slept) == 1  # a watch that lasted its own timeout is resumed at once

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

    def test_api_errors_count_and_back_off_without_ending_the_loop(self) -> None:
        slept: list[float] = []
        api = FakeApi([ApiError(0, "connection refused"), WatchError("not a watch event"),
                       FakeStream([event("ADDED", "5")], rv="5")])
        reflector = Reflector(api, "pods", KUBELET_WATCH, backoff=Backoff(sleep=slept.append))  # type: ignore[arg-type]
        for _ in range(3):
            reflector.step()
        assert reflector.errors == 2 and len(slept) == 2
        assert reflector.last_error == "WatchError: not a watch event"
        assert reflector.resource_version == "5"


class TestBackgroundReflector:
    def test_lists_in_the_callers_thread_then_watches_until_stopped(self) -> None:
        names = WatchNames.of("nodes", "", "fleet", list_rv="0")
        release = threading.Event()
        lists: list[int] = []
        seen: list[str] = []

        class Blocking(FakeStream):
            def __iter__(self) -> Any:
                yield from self._events
                release.wait(10)  # a watch with nothing to say, until stop() aborts it

            def abort(self) -> None:
                release.set()

        api = FakeApi([Blocking([event("ADDED", "101")], rv="101")] + [FakeStream([], rv="101")] * 100)
        watch = BackgroundReflector(api, "nodes", names, on_list=lambda page: lists.append(len(page.items or [])),
                                    on_event=lambda e: seen.append(e.type))
        watch.start()
        assert lists == [1] and api.calls[0] == ("LIST", "LIST nodes (fleet, rv=0)", "0")
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            release.wait(0.01)
        watch.stop()
        assert seen[0] == "ADDED" and release.is_set()
        assert watch._thread is None  # joined


class TestNodeAgentReflector:
    def test_a_refused_streaming_list_falls_back_to_a_list_at_once_and_streams_again_after_the_next_loss(
            self) -> None:
        """client-go's ListAndWatch: a failed watch-list is followed, without a backoff, by a LIST and a WATCH from
        its resourceVersion; state lost again (410) tries streaming first again."""
        slept: list[float] = []
        names = WatchNames.of("configmaps", "ns", "kubelet", list_rv="0")
        bookmark = WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "120", "annotations": {
            "k8s.io/initial-events-end": "true"}}}, 0.0)
        api = FakeApi([None, FakeStream([event("MODIFIED", "110")], end=Gone("410"), rv="110"),
                       FakeStream([bookmark], rv="120")])
        reflector = Reflector(api, "configmaps", names, namespace="ns", watch_list=True,  # type: ignore[arg-type]
                              list_fallback=True, backoff=Backoff(sleep=slept.append))
        for _ in range(3):
            reflector.step()
        assert api.calls == [("WATCH", "WATCH configmaps (kubelet, ns)", ""),
                             ("LIST", "LIST configmaps (kubelet, ns, rv=0)", "0"),
                             ("WATCH", "WATCH configmaps (kubelet, ns)", "100"),
                             ("WATCH", "WATCH configmaps (kubelet, ns, rewatch)", "")]
        assert api.initial_events == [True, False, True]
        assert slept == [] and reflector.resource_version == "120"

    def test_without_the_fallback_a_refused_streaming_list_backs_off_and_streams_again(self) -> None:
        slept: list[float] = []
        names = WatchNames.of("pods", "", "informer", list_rv="0")
        api = FakeApi([None, FakeStream([], rv="")])
        reflector = Reflector(api, "pods", names, watch_list=True,  # type: ignore[arg-type]
                              backoff=Backoff(sleep=slept.append))
        reflector.step()
        reflector.step()
        assert [verb for verb, _, _ in api.calls] == ["WATCH", "WATCH"] and len(slept) >= 1

    def test_each_watch_asks_a_timeout_drawn_from_its_own_range(self) -> None:
        asked: list[float] = []
        api = FakeApi([FakeStream([event("ADDED", str(i))], rv=str(i)) for i in range(1, 40)])

        def watch(*args: Any, **kwargs: Any) -> Any:
            asked.append(kwargs["timeout_s"])
            return FakeApi.watch(api, *args, **kwargs)

        api.watch = watch  # type: ignore[method-assign]
        reflector = Reflector(api, "secrets", KUBELET_WATCH, watch_timeout_s=(1800.0, 3600.0),  # type: ignore[arg-type]
                              backoff=Backoff(sleep=lambda _s: None))
        for _ in range(39):
            reflector.step()
        assert all(1800.0 <= t <= 3600.0 for t in asked) and max(asked) - min(asked) > 600
