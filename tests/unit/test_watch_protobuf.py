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
import yaml
from packaging.requirements import Requirement

from loadtests.config.versions import DEFAULT_KUBE_VERSION
from loadtests.kube.encoding import decoder_for
from loadtests.kube.errors import Gone, WatchError
from loadtests.kube.paths import RESOURCES, resource_key
from loadtests.kube.pb import (
    certificates_v1_pb2,
    coordination_v1_pb2,
    core_v1_pb2,
    discovery_v1_pb2,
    generate,
    meta_v1_pb2,
    networking_v1_pb2,
    runtime_pb2,
)
from loadtests.kube.pod_references import referenced_objects
from loadtests.kube.watch import (
    INITIAL_EVENTS_END,
    WatchDecoder,
    WatchStream,
    accept,
    ends_initial_events,
    iter_watch_events,
)
from loadtests.kube.watch_protobuf import (
    ALWAYS,
    API_VERSIONS,
    FRAME_HEADER,
    INLINE,
    MAX_FRAME,
    MESSAGES,
    SUMMARY_FIELDS,
    ProtobufWatchDecoder,
    decode_object,
    encode_frame,
    encode_object,
    go_duration,
    list_messages,
    list_metadata,
)
from loadtests.measure.cluster_objects import (
    NODE_FIELDS,
    POD_FIELDS,
    TAINT_UNREACHABLE,
    NodeState,
    lease_message_state,
    lease_state,
    node_state,
    pod_state,
)
from loadtests.measure.watchers import pod_running_ready
from tests.checks import leaves

ROOT = Path(__file__).resolve().parents[2]
NODE_AGENTS = ROOT / "loadtests" / "data" / "node_agents_reference.yaml"
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
            "spec": {"nodeName": "kwok-node-00001", "volumes": [{"name": "config", "configMap": {"name": "settings"}}]},
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
        """Every API object's field 1 is its ObjectMeta: a Deployment (apps/v1, not generated here) still has its
        name and resourceVersion, even asked in full; the rest is skipped."""
        stand_in = core_v1_pb2.Service()  # any message whose field 1 is metadata, with more fields after it
        stand_in.metadata.name, stand_in.metadata.resourceVersion = "web-abc", "77"
        stand_in.spec.clusterIP = "10.0.0.1"
        for full in (False, True):
            (event,) = ProtobufWatchDecoder(full).feed(encode_frame("ADDED", stand_in, "apps/v1", "Deployment"), 0.0)
            assert event.object == {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "metadata": {"name": "web-abc", "resourceVersion": "77"}}

    def test_an_unknown_kind_whose_first_field_is_not_metadata_is_a_watch_error(self) -> None:
        body = encode_object(core_v1_pb2.Service(), "apps/v1", "Deployment")
        unknown = runtime_pb2.Unknown.FromString(body[4:])
        unknown.raw = b"\x0a\x03abc"  # field 1 holds 3 bytes that are no ObjectMeta
        with pytest.raises(WatchError, match="not a protobuf Deployment"):
            decode_object(b"k8s\x00" + unknown.SerializeToString())


def endpoint_slice() -> discovery_v1_pb2.EndpointSlice:
    """A Service's slice as the EndpointSlice controller writes one: two endpoints, one port."""
    found = discovery_v1_pb2.EndpointSlice(addressType="IPv4")
    meta = found.metadata
    meta.name, meta.namespace, meta.uid, meta.resourceVersion = "web-x7k2p", "loadtest-churn", "u-9", "4242"
    meta.generateName, meta.generation = "web-", 1
    meta.creationTimestamp.seconds = STAMP
    meta.labels.update({"kubernetes.io/service-name": "web",
                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"})
    meta.ownerReferences.add(apiVersion="v1", kind="Service", name="web", uid="u-s", controller=True,
                             blockOwnerDeletion=True)
    meta.managedFields.add(manager="kube-controller-manager", operation="Update", fieldsType="FieldsV1")
    for ip, node in (("10.128.1.5", "kwok-node-00001"), ("10.128.2.9", "kwok-node-00002")):
        endpoint = found.endpoints.add(addresses=[ip], nodeName=node)
        endpoint.conditions.ready, endpoint.conditions.serving, endpoint.conditions.terminating = True, True, False
        endpoint.targetRef.kind, endpoint.targetRef.namespace, endpoint.targetRef.name = "Pod", "loadtest-churn", "p"
    found.ports.add(name="", protocol="TCP", port=80)
    return found


def lease() -> coordination_v1_pb2.Lease:
    """A node's heartbeat Lease as its kubelet renews it."""
    found = coordination_v1_pb2.Lease()
    meta = found.metadata
    meta.name, meta.namespace, meta.uid, meta.resourceVersion = "kwok-node-00001", "kube-node-lease", "u-l", "77"
    meta.creationTimestamp.seconds = STAMP
    meta.ownerReferences.add(apiVersion="v1", kind="Node", name="kwok-node-00001", uid="u-n")
    found.spec.holderIdentity, found.spec.leaseDurationSeconds = "kwok-node-00001", 40
    found.spec.renewTime.seconds, found.spec.renewTime.nanos = STAMP + 10, 123_456_000
    return found


# their JSON forms, as the apiserver writes them
SLICE_METADATA = {"name": "web-x7k2p", "generateName": "web-", "namespace": "loadtest-churn", "uid": "u-9",
                  "resourceVersion": "4242", "generation": 1, "creationTimestamp": "2023-11-14T22:13:20Z",
                  "labels": {"kubernetes.io/service-name": "web",
                             "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                  "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u-s",
                                       "controller": True, "blockOwnerDeletion": True}],
                  "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                                     "fieldsType": "FieldsV1"}]}
SLICE_JSON = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": SLICE_METADATA,
              "addressType": "IPv4",
              "endpoints": [{"addresses": [ip], "conditions": {"ready": True, "serving": True, "terminating": False},
                             "targetRef": {"kind": "Pod", "namespace": "loadtest-churn", "name": "p"},
                             "nodeName": node}
                            for ip, node in (("10.128.1.5", "kwok-node-00001"), ("10.128.2.9", "kwok-node-00002"))],
              "ports": [{"name": "", "protocol": "TCP", "port": 80}]}
LEASE_JSON = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
              "metadata": {"name": "kwok-node-00001", "namespace": "kube-node-lease", "uid": "u-l",
                           "resourceVersion": "77", "creationTimestamp": "2023-11-14T22:13:20Z",
                           "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "kwok-node-00001",
                                                "uid": "u-n"}]},
              "spec": {"holderIdentity": "kwok-node-00001", "leaseDurationSeconds": 40,
                       "renewTime": "2023-11-14T22:13:30.123456Z"}}


class TestGroups:
    """The kinds a node's agents watch and write besides core/v1's, each decoded by its own message."""

    @pytest.mark.parametrize(("message", "as_json"), [(endpoint_slice(), SLICE_JSON), (lease(), LEASE_JSON)],
                             ids=["EndpointSlice", "Lease"])
    def test_a_body_and_an_event_are_their_json_form(self, message: Any, as_json: dict) -> None:
        body = encode_object(message, as_json["apiVersion"], as_json["kind"])
        head = {"apiVersion": as_json["apiVersion"], "kind": as_json["kind"],
                "metadata": {k: v for k, v in as_json["metadata"].items() if k != "managedFields"}}
        assert decode_object(body) == head  # a watcher's view: metadata, less managedFields
        assert decode_object(body, full=True) == as_json
        (event,) = ProtobufWatchDecoder().feed(encode_frame("MODIFIED", message, as_json["apiVersion"],
                                                            as_json["kind"]), 0.0)
        assert (event.type, event.object, event.resource_version) == ("MODIFIED", head,
                                                                      as_json["metadata"]["resourceVersion"])

    def test_go_slices_of_strings_and_embedded_structs_are_their_json(self) -> None:
        request = certificates_v1_pb2.CertificateSigningRequest()
        request.spec.extra["scopes"].items.extend(["a", "b"])  # ExtraValue: a []string in Go
        found = decode_object(encode_object(request, "certificates.k8s.io/v1", "CertificateSigningRequest"),
                              full=True)
        assert found["spec"]["extra"] == {"scopes": ["a", "b"]}
        ingress = networking_v1_pb2.Ingress()
        rule = ingress.spec.rules.add(host="example.com")
        rule.ingressRuleValue.http.paths.add(path="/", pathType="Prefix")  # IngressRuleValue: inlined in JSON
        found = decode_object(encode_object(ingress, "networking.k8s.io/v1", "Ingress"), full=True)
        assert found["spec"]["rules"] == [{"host": "example.com", "http": {"paths": [{"path": "/",
                                                                                      "pathType": "Prefix"}]}}]

    def test_every_generated_group_is_keyed_by_the_api_version_that_serves_it(self) -> None:
        """generate.py's API groups are all in API_VERSIONS, each under its group and version
        (k8s.io.api.discovery.v1: discovery.k8s.io/v1; core: v1)."""
        groups = {name for name, (module, _) in generate.SOURCES.items() if module == "k8s.io/api"}
        assert {module.__name__.rpartition(".")[2].removesuffix("_pb2") for module in API_VERSIONS.values()} == groups
        for api_version, module in API_VERSIONS.items():
            group, version = module.DESCRIPTOR.package.removeprefix("k8s.io.api.").split(".")
            assert api_version == (version if group == "core" else f"{group}.k8s.io/{version}")

    def test_every_kind_a_node_agent_watches_or_writes_has_a_path_and_a_message(self) -> None:
        reference = yaml.safe_load(NODE_AGENTS.read_text())
        rows = [*reference["watches"], *reference["requests"], *reference["startup"]]
        for row in rows:
            api = RESOURCES[resource_key(row["resource"], row["group"])]
            assert api.api_version == (f"{row['group']}/{row['version']}" if row["group"] else row["version"]), row
            if row["group"] != "resource.k8s.io":  # a DELETECOLLECTION at start only: its answer's metadata is read
                assert (api.api_version, api.kind) in MESSAGES, row
        assert ("authentication.k8s.io/v1", "TokenRequest") in MESSAGES  # serviceaccounts/token's body and answer


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
            events = list(iter_watch_events([(body[:-missing], 0.0)], ProtobufWatchDecoder()))
            assert summary(events) == EXPECTED[:3], missing

    def test_an_error_event_raises_gone_for_410_and_watch_error_otherwise(self) -> None:
        gone = encode_frame("ERROR", status(410, "Expired", "too old resource version: 1 (50)"), "v1", "Status")
        with pytest.raises(Gone, match="410 Expired: too old resource version"):
            chunks = [(stream()[:40], 0.0), (stream()[40:], 0.0), (gone, 0.0)]
            list(iter_watch_events(chunks, ProtobufWatchDecoder()))
        other = encode_frame("ERROR", status(500, "InternalError", "etcd is gone"), "v1", "Status")
        with pytest.raises(WatchError, match="500 InternalError: etcd is gone"):
            list(iter_watch_events([(other, 0.0)], ProtobufWatchDecoder()))

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
        # where it runs, and what its node's agents read of it: its kube-api-access projected volume, ServiceAccount
        assert found.object["spec"] == {k: as_json["spec"][k] for k in ("nodeName", "volumes", "serviceAccountName")}
        assert found.object["status"] == {k: as_json["status"][k] for k in ("phase", "conditions", "podIP",
                                                                            "startTime")}


def referencing_pod() -> core_v1_pb2.Pod:
    """A pod naming ConfigMaps and Secrets every way a kubelet looks: volumes, imagePullSecrets, and the env of an
    init, a regular and an ephemeral container (whose fields protobuf keeps in its ephemeralContainerCommon)."""
    found = pod()  # its volume "config": the ConfigMap "settings"
    found.spec.serviceAccountName = "builder"
    found.spec.imagePullSecrets.add().name = "registry"
    found.spec.volumes.add(name="tls").volumeSource.secret.secretName = "tls"
    init = found.spec.initContainers.add(name="init", image="busybox")
    init.envFrom.add().secretRef.localObjectReference.name = "init-env"
    env = found.spec.containers[0].env
    env.add(name="PLAIN", value="1")
    env.add(name="LEVEL").valueFrom.configMapKeyRef.localObjectReference.name = "levels"
    debug = found.spec.ephemeralContainers.add()
    debug.ephemeralContainerCommon.name = "debug"
    debug.ephemeralContainerCommon.env.add(name="TOKEN").valueFrom.secretKeyRef.localObjectReference.name = "debug"
    return found


class TestPodReferences:
    def test_a_watcher_gets_what_names_configmaps_and_secrets_as_the_json_form_has_it(self) -> None:
        body = encode_object(referencing_pod(), "v1", "Pod")
        spec = decode_object(body)["spec"]
        assert spec == {
            "nodeName": "kwok-node-00001", "serviceAccountName": "builder",
            "volumes": [{"name": "config", "configMap": {"name": "settings"}},
                        {"name": "tls", "secret": {"secretName": "tls"}}],
            "imagePullSecrets": [{"name": "registry"}],
            "initContainers": [{"envFrom": [{"secretRef": {"name": "init-env"}}]}],
            "containers": [{"env": [{"name": "PLAIN", "value": "1"},
                                    {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "levels"}}}]}],
            "ephemeralContainers": [{"env": [{"name": "TOKEN",
                                              "valueFrom": {"secretKeyRef": {"name": "debug"}}}]}],
        }
        full = decode_object(body, full=True)
        for resource in ("configmaps", "secrets"):
            assert referenced_objects({"metadata": {"namespace": "loadtest-churn"}, "spec": spec}, resource) == \
                referenced_objects(full, resource)

    def test_every_summary_path_names_fields_the_kinds_message_has(self) -> None:
        """A misspelt path would read nothing, silently: each step is a field, or one of an embedded struct's."""
        def field(descriptor: Any, name: str) -> Any:
            inlined = [f.message_type for f in descriptor.fields
                       if f.message_type is not None and (f.name, f.message_type.name) in INLINE]
            return descriptor.fields_by_name.get(name) or next(
                (found for inner in inlined if (found := field(inner, name)) is not None), None)

        for kind, paths in SUMMARY_FIELDS.items():
            for path in paths:
                descriptor = MESSAGES[("v1", kind)].DESCRIPTOR
                for name in path.split("."):
                    found = field(descriptor, name)
                    assert found is not None, (kind, path, name)
                    descriptor = found.message_type

    def test_a_pod_naming_none_has_none_of_those_fields(self) -> None:
        plain = core_v1_pb2.Pod()
        plain.spec.containers.add(name="c", image="i")  # a container without env: nothing read of it
        plain.spec.nodeName = "n"
        assert decode_object(encode_object(plain, "v1", "Pod"))["spec"] == {"nodeName": "n"}


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
            module, _ = generate.SOURCES[path.name.removesuffix("_pb2.py")]
            assert f"{module}@{generate.version(module)}/" in code.splitlines()[1], path.name
            imports = re.findall(r"^from (\S+) import", code, re.M)
            assert all(m.startswith(("google.protobuf", "loadtests.kube.pb")) for m in imports), (path.name, imports)
            ours = set(re.findall(r"^from loadtests\.kube\.pb import (\w+)_pb2 as", code, re.M))
            assert ours <= set(generate.SOURCES) - {path.name.removesuffix("_pb2.py")}, (path.name, ours)

    def test_their_sources_are_the_files_of_the_module_cache(self) -> None:
        cache = generate.module_cache()
        if not generate.source_file(cache, "core_v1").is_file():
            pytest.skip(f"Go's module cache ({cache}) does not hold k8s.io/api@{generate.MODULES_VERSION}")
        for name in generate.SOURCES:
            digest = hashlib.sha256(generate.source_file(cache, name).read_bytes()).hexdigest()
            assert f"sha256 {digest}" in (PB / f"{name}_pb2.py").read_text(), name


def restricted(obj: Any, paths: tuple[str, ...]) -> Any:
    """The JSON form cut to the fields `paths` name (a list's elements each cut), as a projection converts them."""
    tree: dict = {}
    for path in paths:
        node = tree
        for name in path.split("."):
            node = node.setdefault(name, {})

    def cut(value: Any, below: dict) -> Any:
        if not below:
            return value
        if isinstance(value, list):
            return [cut(v, below) for v in value]
        return {k: cut(value[k], b) for k, b in below.items() if k in value}

    return cut(obj, tree)


def node() -> core_v1_pb2.Node:
    """A kwok node the node lifecycle controller found unreachable: its Ready Unknown, its taints."""
    found = core_v1_pb2.Node()
    found.metadata.name, found.metadata.uid, found.metadata.resourceVersion = "kwok-node-00001", "u-n", "88"
    found.metadata.labels["type"] = "kwok"
    for key, effect in (("kwok.x-k8s.io/node", "NoSchedule"), (TAINT_UNREACHABLE, "NoExecute")):
        found.spec.taints.add(key=key, effect=effect)
    for kind, state in (("Ready", "Unknown"), ("MemoryPressure", "Unknown")):
        condition = found.status.conditions.add(type=kind, status=state, reason="NodeStatusUnknown")
        condition.lastHeartbeatTime.seconds = STAMP
    found.status.capacity["cpu"].string = "32"
    return found


NODE_JSON = {"metadata": {"name": "kwok-node-00001", "uid": "u-n", "resourceVersion": "88",
                          "labels": {"type": "kwok"}},
             "spec": {"taints": [{"key": "kwok.x-k8s.io/node", "effect": "NoSchedule"},
                                 {"key": TAINT_UNREACHABLE, "effect": "NoExecute"}]},
             "status": {"conditions": [{"type": kind, "status": "Unknown", "reason": "NodeStatusUnknown",
                                        "lastHeartbeatTime": "2023-11-14T22:13:20Z"}
                                       for kind in ("Ready", "MemoryPressure")],
                        "capacity": {"cpu": "32"}}}


class TestProjections:
    """What a reader names of each object is all that is converted, and reads as the JSON form reads."""

    def test_the_recorded_pod_projected_is_its_json_cut_to_the_fields_and_reads_alike(self) -> None:
        as_json = json.loads(Path(f"{RECORDED}.json").read_bytes())
        body = Path(f"{RECORDED}.pb").read_bytes()
        for fields, read in ((POD_FIELDS, pod_state), (POD_FIELDS, pod_running_ready)):
            found = decode_object(body, fields=fields)
            assert {k: v for k, v in found.items() if k not in ("apiVersion", "kind")} == restricted(
                as_json, (*ALWAYS, *fields))
            assert read(found) == read(as_json)
        assert pod_running_ready(as_json)  # the recorded pod runs: the reading above could have said otherwise

    def test_a_node_and_a_lease_read_as_their_json_forms(self) -> None:
        found = decode_object(encode_object(node(), "v1", "Node"), fields=NODE_FIELDS)
        assert node_state(found) == node_state(NODE_JSON) == NodeState("Unknown", frozenset({TAINT_UNREACHABLE}))
        assert "labels" not in found["metadata"] and "capacity" not in found["status"]
        found = decode_object(encode_object(lease(), "coordination.k8s.io/v1", "Lease"),
                              fields=("spec.renewTime", "spec.leaseDurationSeconds"))
        assert found["spec"] == {"renewTime": "2023-11-14T22:13:30.123456Z", "leaseDurationSeconds": 40}
        assert lease_state(found) == lease_state(LEASE_JSON)
        read = lease_message_state(lease())  # the message read as it is, as the Leases' LIST is
        assert read.duration_s == lease_state(LEASE_JSON).duration_s == 40.0
        assert read.renewed_at == pytest.approx(lease_state(LEASE_JSON).renewed_at, abs=1e-6)

    def test_a_list_s_items_come_as_their_messages(self) -> None:
        leases = coordination_v1_pb2.LeaseList(items=[lease(), coordination_v1_pb2.Lease()])
        found = list_messages(encode_object(leases, "coordination.k8s.io/v1", "LeaseList"))
        assert [item.metadata.name for item in found] == ["kwok-node-00001", ""]
        assert found[0].spec.renewTime.nanos == 123_456_000
        with pytest.raises(WatchError, match="not a list"):
            list_messages(encode_object(lease(), "coordination.k8s.io/v1", "Lease"))
        with pytest.raises(WatchError, match="prefix"):
            list_messages(b"{}")

    def test_a_list_projects_each_item_and_keeps_its_metadata(self) -> None:
        pods = core_v1_pb2.PodList(items=[pod("5"), pod("6", phase="Running")])
        pods.metadata.resourceVersion = "9"
        setattr(pods.metadata, "continue", "next")  # a Python keyword
        found = decode_object(encode_object(pods, "v1", "PodList"), fields=("status.phase",))
        assert found["metadata"] == {"resourceVersion": "9", "continue": "next"}
        assert found["items"] == [{"metadata": {"name": "churn-1", "namespace": "loadtest-churn", "uid": "u-1",
                                                "resourceVersion": rv}, "status": {"phase": phase}}
                                  for rv, phase in (("5", "Pending"), ("6", "Running"))]

    def test_a_watch_decoder_with_fields_hands_on_only_those(self) -> None:
        events = ProtobufWatchDecoder(fields=("spec.nodeName",)).feed(stream(), 0.0)
        assert summary(events) == [(t, k, n, rv, "") for t, k, n, rv, _ in EXPECTED]
        assert [e.object.get("spec") for e in events] == [{"nodeName": "kwok-node-00001"}, None,
                                                          {"nodeName": "kwok-node-00001"},
                                                          {"nodeName": "kwok-node-00001"}]
