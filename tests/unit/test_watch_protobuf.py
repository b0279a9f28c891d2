"""Protobuf watch streams and bodies, decoded with Kubernetes's own messages into the WatchEvents the JSON path
makes: bytes made by the generated classes, split at every byte, truncated, ERROR and BOOKMARK events; and the
generated modules themselves (their protobuf version, their sources)."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from loadtests.config.versions import DEFAULT_KUBE_VERSION
from loadtests.kube.encoding import decoder_for
from loadtests.kube.errors import Gone, WatchError
from loadtests.kube.pb import core_v1_pb2, generate, meta_v1_pb2
from loadtests.kube.watch import (
    INITIAL_EVENTS_END,
    WatchDecoder,
    WatchStream,
    accept,
    ends_initial_events,
    iter_watch_events,
)
from loadtests.kube.watch_protobuf import (
    FRAME_HEADER,
    MAX_FRAME,
    ProtobufWatchDecoder,
    decode_object,
    encode_frame,
    encode_object,
    go_duration,
    list_metadata,
)

ROOT = Path(__file__).resolve().parents[2]
PB = ROOT / "loadtests" / "kube" / "pb"
# a Running pod (kwok's) as a local kube-apiserver v1.37.2 answered a GET of it in JSON and in protobuf
RECORDED = Path(__file__).resolve().parent / "data" / "kube-apiserver_v1.37.2_pod"
STAMP = 1_700_000_000  # 2023-11-14T22:13:20Z


def pod(rv: str = "101", phase: str = "Pending", node: str = "kwok-node-00001") -> core_v1_pb2.Pod:
    found = core_v1_pb2.Pod()
    meta = found.metadata
    meta.name, meta.namespace, meta.uid, meta.resourceVersion = "churn-1", "loadtest-churn", "u-1", rv
    meta.creationTimestamp.seconds = STAMP
    meta.generateName, meta.selfLink, meta.generation = "", "", 0  # Go writes them empty; JSON leaves them out
    meta.labels["app"] = "churn"
    meta.annotations["k8s-loadtest/run"] = "r1"
    managed = meta.managedFields.add(manager="k8s-loadtest", operation="Update", fieldsType="FieldsV1")
    managed.fieldsV1.Raw = b'{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}'
    managed.time.seconds = STAMP
    found.spec.nodeName = node
    container = found.spec.containers.add(name="c", image="registry.k8s.io/pause:3.10")
    container.resources.requests["cpu"].string = "100m"
    container.ports.add(containerPort=8080, protocol="TCP")
    get = container.readinessProbe.handler.httpGet  # ProbeHandler: embedded in Probe, inlined in its JSON
    get.path, get.port.type, get.port.strVal = "/ready", 1, "http"
    volume = found.spec.volumes.add(name="config")  # VolumeSource: embedded in Volume, inlined too
    volume.volumeSource.configMap.localObjectReference.name = "settings"
    found.status.phase = phase
    condition = found.status.conditions.add(type="Ready", status="True")
    condition.lastTransitionTime.seconds = STAMP + 2
    return found


def bookmark(rv: str, initial_end: bool = False) -> core_v1_pb2.Pod:
    found = core_v1_pb2.Pod()
    found.metadata.resourceVersion = rv
    if initial_end:
        found.metadata.annotations[INITIAL_EVENTS_END] = "true"
    return found


def status(code: int, reason: str, message: str) -> meta_v1_pb2.Status:
    return meta_v1_pb2.Status(status="Failure", code=code, reason=reason, message=message)


def stream() -> bytes:
    """A watch of one node's pods: its state, the end of its initial events, a change, a deletion."""
    return b"".join([
        encode_frame("ADDED", pod("101"), "v1", "Pod"),
        encode_frame("BOOKMARK", bookmark("101", initial_end=True), "v1", "Pod"),
        encode_frame("MODIFIED", pod("102", phase="Running"), "v1", "Pod"),
        encode_frame("DELETED", pod("103", phase="Running"), "v1", "Pod"),
    ])


def summary(events: list) -> list[tuple[str, str, str, str, str]]:
    return [(e.type, e.object.get("kind"), (e.object.get("metadata") or {}).get("name", ""),
             e.resource_version, (e.object.get("status") or {}).get("phase", "")) for e in events]


EXPECTED = [("ADDED", "Pod", "churn-1", "101", "Pending"), ("BOOKMARK", "Pod", "", "101", ""),
            ("MODIFIED", "Pod", "churn-1", "102", "Running"), ("DELETED", "Pod", "churn-1", "103", "Running")]


class TestEvents:
    def test_an_event_is_what_the_json_path_makes_of_the_same_pod(self) -> None:
        (event,) = ProtobufWatchDecoder().feed(encode_frame("ADDED", pod(), "v1", "Pod"), 5.0)
        assert (event.type, event.received_at) == ("ADDED", 5.0)
        assert event.size == len(encode_frame("ADDED", pod(), "v1", "Pod"))  # the bytes received, frame header too
        assert event.object == {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "churn-1", "namespace": "loadtest-churn", "uid": "u-1", "resourceVersion": "101",
                         "creationTimestamp": "2023-11-14T22:13:20Z", "labels": {"app": "churn"},
                         "annotations": {"k8s-loadtest/run": "r1"}},  # managedFields: not read, not converted
            "spec": {"nodeName": "kwok-node-00001"},
            "status": {"phase": "Pending",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2023-11-14T22:13:22Z"}]},
        }

    def test_full_objects_carry_every_field_in_the_json_form(self) -> None:
        (event,) = ProtobufWatchDecoder(full=True).feed(encode_frame("ADDED", pod(), "v1", "Pod"), 0.0)
        meta, spec = event.object["metadata"], event.object["spec"]
        assert meta["managedFields"] == [{"manager": "k8s-loadtest", "operation": "Update", "fieldsType": "FieldsV1",
                                          "time": "2023-11-14T22:13:20Z",
                                          "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
        container = spec["containers"][0]
        assert container["resources"] == {"requests": {"cpu": "100m"}}  # a Quantity is its string
        assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
        assert container["readinessProbe"] == {"httpGet": {"path": "/ready", "port": "http"}}  # IntOrString
        assert spec["volumes"] == [{"name": "config", "configMap": {"name": "settings"}}]
        assert spec["nodeName"] == "kwok-node-00001"

    def test_bytes_times_and_durations_are_written_as_go_writes_their_json(self) -> None:
        secret = core_v1_pb2.Secret()
        secret.metadata.name = "s"
        secret.data["key"] = b"\x00\xffhi"
        assert decode_object(encode_object(secret, "v1", "Secret"), full=True)["data"] == {"key": "AP9oaQ=="}
        event = core_v1_pb2.Event()
        event.eventTime.seconds, event.eventTime.nanos = STAMP, 123_456_789
        event.metadata.creationTimestamp.SetInParent()  # a zero time is sent empty: JSON null
        found = decode_object(encode_object(event, "v1", "Event"), full=True)
        assert found["eventTime"] == "2023-11-14T22:13:20.123456Z"
        assert found["metadata"]["creationTimestamp"] is None
        assert [go_duration(n) for n in (0, 1_500_000, 90 * 10**9, 3_723_500_000_000)] == ["0s", "1.5ms", "1m30s",
                                                                                             "1h2m3.5s"]

    def test_a_kind_without_generated_messages_is_decoded_to_its_metadata(self) -> None:
        """Every API object's field 1 is its ObjectMeta: an EndpointSlice (discovery.k8s.io, not generated here)
        still has its name and resourceVersion; the rest is skipped."""
        stand_in = core_v1_pb2.Service()  # any message whose field 1 is metadata, with more fields after it
        stand_in.metadata.name, stand_in.metadata.resourceVersion = "web-abc", "77"
        stand_in.spec.clusterIP = "10.0.0.1"
        (event,) = ProtobufWatchDecoder().feed(encode_frame("ADDED", stand_in, "discovery.k8s.io/v1",
                                                            "EndpointSlice"), 0.0)
        assert event.object == {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                                "metadata": {"name": "web-abc", "resourceVersion": "77"}}


class TestFrames:
    def test_frames_split_at_every_byte_give_the_same_events(self) -> None:
        body = stream()
        for cut in range(len(body) + 1):
            decoder = ProtobufWatchDecoder()
            events = decoder.feed(body[:cut], 1.0) + decoder.feed(body[cut:], 2.0)
            assert summary(events) == EXPECTED, cut

    def test_byte_by_byte_each_event_comes_with_its_last_byte(self) -> None:
        body = stream()
        ends = []
        offset = 0
        for frame_type in ("ADDED", "BOOKMARK", "MODIFIED", "DELETED"):
            length = int.from_bytes(body[offset:offset + FRAME_HEADER], "big")
            offset += FRAME_HEADER + length
            ends.append((frame_type, offset - 1))
        decoder = ProtobufWatchDecoder()
        seen = [(event.type, at) for at in range(len(body)) for event in decoder.feed(body[at:at + 1], float(at))]
        assert seen == [(kind, float(at)) for kind, at in ends]

    def test_wanted_is_the_rest_of_the_frame_being_read(self) -> None:
        frame = encode_frame("ADDED", pod(), "v1", "Pod")
        decoder = ProtobufWatchDecoder()
        assert decoder.wanted() == FRAME_HEADER
        assert decoder.feed(frame[:3], 0.0) == [] and decoder.wanted() == 1
        assert decoder.feed(frame[3:10], 0.0) == [] and decoder.wanted() == len(frame) - 10
        assert len(decoder.feed(frame[10:], 0.0)) == 1 and decoder.wanted() == FRAME_HEADER

    def test_a_truncated_last_frame_is_dropped(self) -> None:
        body = stream()
        for missing in (1, 5, len(encode_frame("DELETED", pod("103", phase="Running"), "v1", "Pod")) - 2):
            events = list(iter_watch_events([body[:-missing]], lambda: 0.0, ProtobufWatchDecoder()))
            assert summary(events) == EXPECTED[:3], missing

    def test_an_error_event_raises_gone_for_410_and_watch_error_otherwise(self) -> None:
        gone = encode_frame("ERROR", status(410, "Expired", "too old resource version: 1 (50)"), "v1", "Status")
        with pytest.raises(Gone, match="410 Expired: too old resource version"):
            list(iter_watch_events([stream()[:40], stream()[40:], gone], lambda: 0.0, ProtobufWatchDecoder()))
        other = encode_frame("ERROR", status(500, "InternalError", "etcd is gone"), "v1", "Status")
        with pytest.raises(WatchError, match="500 InternalError: etcd is gone"):
            list(iter_watch_events([other], lambda: 0.0, ProtobufWatchDecoder()))

    def test_the_bookmark_that_ends_initial_events_is_seen(self) -> None:
        events = ProtobufWatchDecoder().feed(stream(), 0.0)
        assert [ends_initial_events(e) for e in events] == [False, True, False, False]
        assert events[1].object["metadata"]["annotations"] == {INITIAL_EVENTS_END: "true"}

    @pytest.mark.parametrize(("body", "message"), [
        (b'{"type":"ADDED","object":{}}\n', "a frame of"),  # JSON fed to the protobuf decoder
        ((MAX_FRAME + 1).to_bytes(4, "big"), "a frame of"),
        (b"\x00\x00\x00\x03\xff\xff\xff", "not a protobuf watch event"),
        (encode_frame("ADDED", pod(), "v1", "Pod").replace(b"k8s\x00", b"k8s\x01"), "no k8s\\\\x00 prefix"),
    ])
    def test_what_is_not_a_protobuf_watch_stream_is_a_watch_error(self, body: bytes, message: str) -> None:
        with pytest.raises(WatchError, match=message):
            ProtobufWatchDecoder().feed(body, 0.0)

    def test_a_watch_stream_reads_through_the_decoder_it_is_given(self) -> None:
        body = stream()
        decoder = ProtobufWatchDecoder()
        position = 0

        def read() -> bytes:  # as the gevent transport reads: exactly the rest of the frame
            nonlocal position
            chunk = body[position:position + decoder.wanted()]
            position += len(chunk)
            return chunk

        watch = WatchStream(read, lambda: None, decoder=decoder, clock=lambda: 0.0)
        assert summary(list(watch)) == EXPECTED
        assert (watch.resource_version, watch.bookmarks, watch.bytes) == ("103", 1, len(body))


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in leaves(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in leaves(item, f"{path}[{i}]").items()}
    return {path: value}


class TestRecorded:
    def test_a_recorded_protobuf_pod_is_its_recorded_json(self) -> None:
        """Every value of the apiserver's JSON, of the same type; what protobuf adds are the empty values of
        omitempty fields, which Go writes to protobuf."""
        as_json = json.loads(Path(f"{RECORDED}.json").read_bytes())
        body = Path(f"{RECORDED}.pb").read_bytes()
        assert body.startswith(b"k8s\x00")
        full, json_form = leaves(decode_object(body, full=True)), leaves(as_json)
        assert {k: (type(full.get(k)), full.get(k)) for k in json_form} == {
            k: (type(v), v) for k, v in json_form.items()}
        added = {k: v for k, v in full.items() if k not in json_form}
        assert added and not any(added.values()), added

    def test_a_watcher_gets_the_recorded_pods_metadata_and_state(self) -> None:
        as_json = json.loads(Path(f"{RECORDED}.json").read_bytes())
        event = meta_v1_pb2.WatchEvent(type="MODIFIED")
        event.object.raw = Path(f"{RECORDED}.pb").read_bytes()
        frame = event.SerializeToString()
        (found,) = ProtobufWatchDecoder().feed(len(frame).to_bytes(4, "big") + frame, 0.0)
        meta = {k: v for k, v in as_json["metadata"].items() if k != "managedFields"}
        assert found.object["metadata"] == meta
        assert found.object["spec"] == {"nodeName": as_json["spec"]["nodeName"]}
        assert found.object["status"] == {k: as_json["status"][k] for k in ("phase", "conditions", "podIP",
                                                                            "startTime")}


class TestBodies:
    def test_a_list_decodes_to_its_metadata_and_items(self) -> None:
        pods = core_v1_pb2.PodList(items=[pod("5"), pod("6")])
        pods.metadata.resourceVersion = "9"
        body = encode_object(pods, "v1", "PodList")
        assert list_metadata(body) == {"resourceVersion": "9"}
        found = decode_object(body, full=True)
        assert [item["metadata"]["resourceVersion"] for item in found["items"]] == ["5", "6"]

    def test_content_types_choose_the_decoder_and_encodings_the_accept_header(self) -> None:
        assert isinstance(decoder_for("application/vnd.kubernetes.protobuf;stream=watch"), ProtobufWatchDecoder)
        assert isinstance(decoder_for("application/json"), WatchDecoder)
        assert isinstance(decoder_for(None), WatchDecoder)
        assert accept("protobuf") == "application/vnd.kubernetes.protobuf,application/json"  # a kubelet's
        assert accept("json") == "application/json"
        with pytest.raises(ValueError, match="expected one of: json, protobuf"):
            accept("yaml")


class TestGeneratedModules:
    def test_they_were_written_for_the_protobuf_runtime_the_project_asks_for(self) -> None:
        requirement = next(Requirement(text) for text in
                           tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
                           if Requirement(text).name == "protobuf")
        lock = re.search(r"^protobuf==(\S+)", (ROOT / "requirements.lock").read_text(), re.M)
        assert lock is not None and requirement.specifier.contains(lock.group(1))
        for path in sorted(PB.glob("*_pb2.py")):
            major, minor, patch = generate.gencode_version(path.read_text())
            # the runtime must be of the gencode's major version and at least its minor
            assert requirement.specifier.contains(f"{major}.{minor}.{patch}"), path.name
            assert not requirement.specifier.contains(f"{major + 1}.0.0"), path.name
            assert f"{minor}.{patch}" == generate.PROTOC_VERSION, path.name  # protoc 35.1 writes gencode 7.35.1

    def test_they_are_the_pinned_release_and_import_only_each_other(self) -> None:
        assert "v1" + generate.MODULES_VERSION.removeprefix("v0") == DEFAULT_KUBE_VERSION
        assert sorted(p.name for p in PB.glob("*_pb2.py")) == sorted(f"{n}_pb2.py" for n in generate.SOURCES)
        for path in PB.glob("*_pb2.py"):
            code = path.read_text()
            assert f"{generate.MODULES_VERSION}/" in code.splitlines()[1], path.name
            imports = re.findall(r"^from (\S+) import", code, re.M)
            assert all(m.startswith(("google.protobuf", "loadtests.kube.pb")) for m in imports), (path.name, imports)

    def test_their_sources_are_the_files_of_the_module_cache(self) -> None:
        cache = generate.module_cache()
        if not generate.source_file(cache, "core_v1").is_file():
            pytest.skip(f"Go's module cache ({cache}) does not hold k8s.io/api@{generate.MODULES_VERSION}")
        for name in generate.SOURCES:
            digest = hashlib.sha256(generate.source_file(cache, name).read_bytes()).hexdigest()
            assert f"sha256 {digest}" in (PB / f"{name}_pb2.py").read_text(), name
