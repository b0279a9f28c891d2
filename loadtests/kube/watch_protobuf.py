"""Watch streams and bodies in Kubernetes's protobuf encoding, which kubelets and kube-proxy ask for (Accept
application/vnd.kubernetes.protobuf): decoded by the `protobuf` library with Kubernetes's own messages
(loadtests/kube/pb), into the WatchEvent objects the JSON path makes. Like watch.py, nothing here does I/O:
every transport feeds the bytes it read.

The wire, as the apiserver writes it (paths in k8s.io/apimachinery@v0.37.2 unless another module is named):
- A body (GET, LIST, a Status) is the 4 bytes `k8s\\x00` and a runtime.Unknown message: typeMeta (apiVersion,
  kind), raw (the object's own message), contentEncoding, contentType (pkg/runtime/serializer/protobuf/
  protobuf.go: protoEncodingPrefix, Serializer.doEncode).
- A watch is answered `application/vnd.kubernetes.protobuf;stream=watch`: the protobuf media type's stream
  serializer is the RawSerializer (no prefix, no Unknown) with LengthDelimitedFramer
  (pkg/runtime/serializer/codec_factory.go), so the body is frames, each a 4-byte big-endian length and that
  many bytes (pkg/util/framer/framer.go: lengthDelimitedFrameWriter.Write), each one metav1.WatchEvent. Its
  object is a RawExtension whose raw bytes the embedded encoder, the negotiated (prefixed) serializer, wrote:
  `k8s\\x00` + Unknown again (k8s.io/apiserver@v0.37.2 pkg/endpoints/handlers/response.go:
  watchEncoder.doEncode; handlers/watch.go: serveWatchHandler's embeddedEncoder).

Objects become dicts in the JSON form's field names. By default only what the harness reads of an event is
converted: kind, apiVersion and metadata (less managedFields) of any kind, and for the kinds in SUMMARY_FIELDS
those fields too (a Pod's node, phase, conditions, and what a node's agents read of it: the ConfigMaps and
Secrets it names); `full=True` converts every field the message carries
(benchmarks/protobuf_decode.py measures both against json.loads). Metadata comes out as its JSON; elsewhere
Go writes every plain string and number to protobuf, so a full object may hold an empty string or a zero where
the JSON form leaves an omitempty field out.
"""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from google.protobuf.message import DecodeError, Message

from loadtests.kube import jsonbody
from loadtests.kube.errors import WatchError
from loadtests.kube.pb import (
    authentication_v1_pb2,
    certificates_v1_pb2,
    coordination_v1_pb2,
    core_v1_pb2,
    discovery_v1_pb2,
    events_v1_pb2,
    meta_v1_pb2,
    networking_v1_pb2,
    node_v1_pb2,
    runtime_pb2,
    storage_v1_pb2,
)
from loadtests.kube.watch import WatchEvent

MAGIC = b"k8s\x00"
FRAME_HEADER = 4
# a frame longer than this is not a watch event (etcd's request limit is 1.5 MiB): the body is not protobuf frames
MAX_FRAME = 64 << 20

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
# messages whose JSON form is not their fields (the types with their own MarshalJSON)
TIME, MICRO_TIME, DURATION = META + "Time", META + "MicroTime", META + "Duration"
FIELDS_V1 = META + "FieldsV1"
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"

# the generated API groups (loadtests/kube/pb/generate.py's SOURCES) and the apiVersion their kinds are served
# as: a .proto names its Go package (k8s.io.api.discovery.v1), not its API group (discovery.k8s.io)
API_VERSIONS: dict[str, ModuleType] = {
    "v1": core_v1_pb2,
    "discovery.k8s.io/v1": discovery_v1_pb2,
    "node.k8s.io/v1": node_v1_pb2,
    "storage.k8s.io/v1": storage_v1_pb2,
    "networking.k8s.io/v1": networking_v1_pb2,
    "coordination.k8s.io/v1": coordination_v1_pb2,
    "certificates.k8s.io/v1": certificates_v1_pb2,
    "events.k8s.io/v1": events_v1_pb2,
    "authentication.k8s.io/v1": authentication_v1_pb2,
}
# (apiVersion, kind) -> message, for the kinds whose .proto is generated (every message of a group's module:
# its kinds, their lists, and the types inside them, which no apiserver sends as a kind), and meta/v1's Status
MESSAGES: dict[tuple[str, str], type[Message]] = {
    **{(api_version, name): getattr(module, name) for api_version, module in API_VERSIONS.items()
       for name in module.DESCRIPTOR.message_types_by_name},
    ("v1", "Status"): meta_v1_pb2.Status,
}
# what of a kind the harness reads besides metadata, as dotted paths of the JSON form; a path through a list
# reaches into each of its elements (spec.containers.env: every container's env). A Pod: where it runs and how it
# is doing, for the load's watchers; for a node's agents, the ConfigMaps, Secrets and ServiceAccount it names (the
# fields podutil.VisitPodConfigmapNames and VisitPodSecretNames visit, see kube/pod_references.py). All are
# omitempty in JSON, so their empty strings and zeros are left out, as in metadata.
SUMMARY_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "status.phase", "status.conditions", "status.podIP", "status.startTime",
            "spec.volumes", "spec.imagePullSecrets", "spec.serviceAccountName",
            *(f"spec.{containers}.{env}" for containers in ("initContainers", "containers", "ephemeralContainers")
              for env in ("env", "envFrom"))),
    "Status": ("status", "message", "reason", "code", "details"),
}


@functools.lru_cache(maxsize=4096)
def _seconds_text(seconds: int) -> str:
    """RFC 3339 in UTC, as metav1.Time's JSON; cached: the times of one object's changes repeat."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _time(message: Any) -> str | None:
    # a zero time is sent empty: its JSON is null
    return _seconds_text(message.seconds) if message.HasField("seconds") else None


def _micro_time(message: Any) -> str | None:
    if not message.HasField("seconds"):
        return None
    return f"{_seconds_text(message.seconds)[:-1]}.{message.nanos // 1000:06d}Z"


def go_duration(nanoseconds: int) -> str:
    """A duration as Go's time.Duration.String writes it (metav1.Duration's JSON): "1h2m3.5s", "1.5ms", "0s"."""
    sign, ns = ("-" if nanoseconds < 0 else ""), abs(nanoseconds)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size or unit == "ns":
                return f"{sign}{ns / size:.9g}{unit}" if ns else "0s"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = f"{rest / 1e9:.9f}".rstrip("0").rstrip(".") + "s"
    return sign + (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + seconds


def _raw(raw: bytes) -> Any:
    """A RawExtension's or FieldsV1's bytes: JSON, or a protobuf object of its own."""
    if raw.startswith(MAGIC):
        return decode_object(raw, full=True)
    return jsonbody.loads(raw) if raw else None


# Go's named slices that protobuf wraps in a message of `items` (`+protobuf.nullable=true` in the generated .proto):
# a list in JSON
STRING_LISTS = frozenset({"k8s.io.api.authentication.v1.ExtraValue", "k8s.io.api.authentication.v1.AttestationValue",
                          "k8s.io.api.certificates.v1.ExtraValue"})
# the messages that marshal themselves (their Go types' MarshalJSON) -> their JSON value
SPECIAL: dict[str, Callable[[Any], Any]] = {
    TIME: _time,
    MICRO_TIME: _micro_time,
    QUANTITY: lambda message: message.string,
    INT_OR_STRING: lambda message: message.strVal if message.type == 1 else message.intVal,
    DURATION: lambda message: go_duration(message.duration),
    FIELDS_V1: lambda message: _raw(message.Raw),
    RAW_EXTENSION: lambda message: _raw(message.raw),
    **{name: lambda message: list(message.items) for name in STRING_LISTS},
}
# Go's embedded structs: a field of their own in protobuf, their fields inlined in JSON (every `json:""` field of
# the types.go of k8s.io/api@v0.37.2's generated groups: core/v1's, and networking/v1's IngressRuleValue), as
# (field name, its message)
INLINE = frozenset({("volumeSource", "VolumeSource"), ("persistentVolumeSource", "PersistentVolumeSource"),
                    ("handler", "ProbeHandler"), ("localObjectReference", "LocalObjectReference"),
                    ("ephemeralContainerCommon", "EphemeralContainerCommon"),
                    ("ingressRuleValue", "IngressRuleValue")})


def _bytes(value: bytes) -> str:
    return base64.b64encode(value).decode()


def object_meta(message: Any) -> dict[str, Any]:
    """An ObjectMeta or ListMeta as its JSON: Go writes every string and number of it in protobuf, empty or
    not, and leaves the empty ones out of JSON (all are omitempty), so they are left out here too."""
    return {k: v for k, v in message_dict(message).items() if v != "" and v != 0}


OMIT_EMPTY = frozenset({META + "ObjectMeta", META + "ListMeta"})


def _omitting_dict(message: Any) -> dict[str, Any]:
    return message_dict(message, omit_empty=True)


def _element(field: Any, omit_empty: bool) -> Callable[[Any], Any] | None:
    """How one value of a field becomes JSON (None: as it is)."""
    if field.message_type is None:
        return _bytes if field.type == field.TYPE_BYTES else None
    name = field.message_type.full_name
    return object_meta if name in OMIT_EMPTY else SPECIAL.get(name, _omitting_dict if omit_empty else message_dict)


# how message_dict treats a field: (inlined, left out when empty or zero, the function that makes its value JSON;
# None: as it is)
Converter = tuple[bool, bool, Callable[[Any], Any] | None]


def _make_converter(field: Any, omit_empty: bool) -> Converter:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        entry = _element(field.message_type.fields_by_name["value"], omit_empty)
        return False, False, (lambda value: dict(value)) if entry is None else (
            lambda value: {k: entry(v) for k, v in value.items()})
    element = _element(field, omit_empty)
    if field.is_repeated:
        return False, False, (lambda value: list(value)) if element is None else (
            lambda value: [element(v) for v in value])
    inline = field.message_type is not None and (field.name, field.message_type.name) in INLINE
    return inline, omit_empty and field.message_type is None, element


# per omit_empty (False, True): field -> its converter
_CONVERTERS: tuple[dict[Any, Converter], dict[Any, Converter]] = ({}, {})


def _converter(field: Any, omit_empty: bool = False) -> Converter:
    """_make_converter's answer, once per field: asking a descriptor is what a conversion would spend most on."""
    known = _CONVERTERS[omit_empty]
    found = known.get(field)
    if found is None:
        found = known[field] = _make_converter(field, omit_empty)
    return found


def message_dict(message: Any, omit_empty: bool = False) -> dict[str, Any]:
    """Every field the message carries, in the JSON form's names and values (the generated .proto keeps the
    JSON names; times, quantities, int-or-strings and raw extensions as their Go types marshal them; embedded
    structs inlined). `omit_empty`: without the empty strings and zeros, in it and in the messages inside it, as
    JSON leaves Go's omitempty fields out (which it writes to protobuf all the same)."""
    found: dict[str, Any] = {}
    for field, value in message.ListFields():
        inline, droppable, convert = _converter(field, omit_empty)
        if inline:
            found.update(message_dict(value, omit_empty))
        elif not (droppable and (value == "" or value == 0)):
            found[field.name] = value if convert is None else convert(value)
    return found


# a projection's paths as a tree: JSON field name -> what is read below it ({}: all of it)
Tree = dict[str, "Tree"]
# what of each object a reader converts, as dotted paths of the JSON form (metadata's included); () for the default
Fields = tuple[str, ...]
# what every projection carries whatever it names: the resourceVersion a watch resumes from, and the keys readers
# tell objects apart by
ALWAYS = ("metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion")


def _tree(paths: Fields) -> Tree:
    tree: Tree = {}
    for path in paths:
        node = tree
        for name in path.split("."):
            node = node.setdefault(name, {})
    return tree


@functools.cache
def _json_field(descriptor: Any, name: str) -> tuple[Any, ...]:
    """The protobuf fields that reach a JSON field of a message: itself, or through the embedded structs that
    JSON inlines (an EphemeralContainer's env is in its ephemeralContainerCommon)."""
    if name in descriptor.fields_by_name:
        return (descriptor.fields_by_name[name],)
    for field in descriptor.fields:
        if field.message_type is not None and (field.name, field.message_type.name) in INLINE:
            inner = _json_field(field.message_type, name)
            if inner:
                return (field, *inner)
    return ()


Projector = Callable[[Any], dict[str, Any]]


def _compile(descriptor: Any, tree: Tree) -> Projector:
    """A function that converts the fields of a tree of one message type, nested as in the JSON form; a list's
    elements each projected; what is unset, empty or zero left out (what JSON's omitempty leaves out). Each
    field's descriptor and converter are looked up here, once, not per object: a watch converts thousands."""
    # (JSON name, the embedded structs on the way, the field, whether it is a singular message (asked whether it
    # is set; a scalar or a list unset reads empty), how its value becomes JSON, whether it is projected)
    steps: list[tuple[str, tuple[str, ...], str, bool, Callable[[Any], Any] | None, bool]] = []
    for name, below in tree.items():
        fields = _json_field(descriptor, name)
        if not fields:
            continue
        *parents, last = fields
        singular = last.message_type is not None and not last.is_repeated
        if below and last.message_type is not None and last.message_type.full_name not in SPECIAL:
            inner = _compile(last.message_type, below)
            convert = (lambda value, inner=inner: [inner(v) for v in value]) if last.is_repeated else inner
            steps.append((name, tuple(p.name for p in parents), last.name, singular, convert, True))
        else:
            steps.append((name, tuple(p.name for p in parents), last.name, singular,
                          _converter(last, omit_empty=True)[2], False))

    def project(message: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name, parents, field, singular, convert, nested in steps:
            holder = message
            for parent in parents:
                if not holder.HasField(parent):
                    break
                holder = getattr(holder, parent)
            else:
                if singular and not holder.HasField(field):
                    continue
                value = getattr(holder, field)
                if not singular and not value:  # "", 0, False or an empty list: what omitempty leaves out
                    continue
                if convert is not None:
                    value = convert(value)
                if nested and not any(value):  # nothing read in it (a dict's keys, a list's projected elements)
                    continue
                if value != "" and value != 0:
                    found[name] = value
        return found

    return project


@functools.cache
def projector(descriptor: Any, fields: Fields) -> Projector:
    """What a reader asks of each object of a message type (`fields`, ALWAYS added), compiled once."""
    return _compile(descriptor, _tree((*ALWAYS, *fields)))


@functools.cache
def _summary(descriptor: Any, kind: str) -> Projector:
    """The default: SUMMARY_FIELDS of the kind (its metadata is converted apart, whole)."""
    return _compile(descriptor, _tree(SUMMARY_FIELDS.get(kind, ())))


def unknown_dict(unknown: Any, full: bool = False, metadata_only: bool = False, fields: Fields = ()) -> dict[str, Any]:
    """The object a runtime.Unknown carries, as a dict: the kinds of MESSAGES decoded as themselves, any
    other kind (or any, with `metadata_only`) as its metadata only (every API object's field 1 is its
    ObjectMeta, every list's its ListMeta, and a list's items are field 2). `fields`: only those of each object
    (a list's items), metadata's included, and nothing else (see projector)."""
    api_version, kind = unknown.typeMeta.apiVersion, unknown.typeMeta.kind
    cls = MESSAGES.get((api_version, kind))
    typed = cls is not None and not metadata_only and (full or bool(fields) or kind in SUMMARY_FIELDS)
    if not typed:  # metadata only: the rest is skipped, not decoded
        cls = meta_v1_pb2.PartialObjectMetadataList if kind.endswith("List") else meta_v1_pb2.PartialObjectMetadata
    try:
        message = cls.FromString(unknown.raw)
    except DecodeError as error:
        raise WatchError(f"not a protobuf {kind or 'object'} ({error})") from None
    found: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    if full:
        return {**found, **message_dict(message)}
    if typed and fields:
        if kind.endswith("List") and "items" in message.DESCRIPTOR.fields_by_name:
            project = projector(message.DESCRIPTOR.fields_by_name["items"].message_type, fields)
            return {**found, "metadata": object_meta(message.metadata), "items": [project(i) for i in message.items]}
        return {**found, **projector(message.DESCRIPTOR, fields)(message)}
    if "metadata" in message.DESCRIPTOR.fields_by_name and message.HasField("metadata"):
        meta = message.metadata
        if "managedFields" in meta.DESCRIPTOR.fields_by_name:
            meta.ClearField("managedFields")  # not read by watchers, and dearer to build than the rest of metadata
        found["metadata"] = object_meta(meta)
    return {**found, **_summary(message.DESCRIPTOR, kind)(message)} if typed else found


def decode_object(data: bytes, full: bool = False, metadata_only: bool = False, fields: Fields = ()) -> dict[str, Any]:
    """A protobuf body (a GET's, a LIST's, an error's Status, a watch event's object): `k8s\\x00` + Unknown."""
    if not data.startswith(MAGIC):
        raise WatchError(f"not a Kubernetes protobuf object (no k8s\\x00 prefix): {bytes(data[:16])!r}")
    try:
        unknown = runtime_pb2.Unknown.FromString(data[len(MAGIC):])
    except DecodeError as error:
        raise WatchError(f"not a Kubernetes protobuf object ({error})") from None
    return unknown_dict(unknown, full, metadata_only, fields)


def list_messages(body: bytes) -> list[Any]:
    """A protobuf LIST body's items as the messages themselves, for a reader of their attributes; WatchError when
    the body is not a list of a generated kind."""
    if not body.startswith(MAGIC):
        raise WatchError(f"not a Kubernetes protobuf object (no k8s\\x00 prefix): {bytes(body[:16])!r}")
    try:
        unknown = runtime_pb2.Unknown.FromString(body[len(MAGIC):])
        cls = MESSAGES.get((unknown.typeMeta.apiVersion, unknown.typeMeta.kind))
        if cls is None or "items" not in cls.DESCRIPTOR.fields_by_name:
            raise WatchError(f"not a list of a known kind: {unknown.typeMeta.apiVersion} {unknown.typeMeta.kind}")
        return list(cls.FromString(unknown.raw).items)
    except DecodeError as error:
        raise WatchError(f"not a protobuf list ({error})") from None


def decode_status(body: bytes) -> dict[str, Any]:
    """The Status of a protobuf error answer as a dict ({} when the body is not one)."""
    try:
        return decode_object(body)
    except WatchError:
        return {}


def list_metadata(body: bytes) -> dict[str, Any]:
    """A protobuf LIST's metadata (resourceVersion, continue) without converting its items."""
    return decode_object(body).get("metadata") or {}


def decode_event(frame: bytes, received_at: float, size: int, full: bool = False, fields: Fields = ()) -> WatchEvent:
    """One frame's metav1.WatchEvent, its object decoded."""
    try:
        event = meta_v1_pb2.WatchEvent.FromString(frame)
    except DecodeError as error:
        raise WatchError(f"not a protobuf watch event ({error}): {frame[:32]!r}") from None
    if not event.type:
        raise WatchError(f"not a protobuf watch event (no type): {frame[:32]!r}")
    # a BOOKMARK carries only metadata (its resourceVersion, and the end of the initial events)
    return WatchEvent(event.type, decode_object(event.object.raw, full, event.type == "BOOKMARK", fields),
                      received_at, size)


class ProtobufWatchDecoder:
    """Splits a protobuf watch body into events whatever the chunking: length-prefixed frames, the partial
    last one kept for the next chunk. `wanted` says how many bytes end the frame being read, so a transport
    can read exactly that and hand each event on the moment its last byte arrives."""

    def __init__(self, full: bool = False, fields: Fields = ()) -> None:
        self.full, self.fields = full, fields
        self._pending = bytearray()

    def _frame_length(self) -> int | None:
        if len(self._pending) < FRAME_HEADER:
            return None
        length = int.from_bytes(self._pending[:FRAME_HEADER], "big")
        if length > MAX_FRAME:
            raise WatchError(f"not a protobuf watch stream (a frame of {length} bytes): "
                             f"{bytes(self._pending[:16])!r}")
        return length

    def wanted(self) -> int:
        """The bytes that complete the frame being read (its header first): at least 1."""
        length = self._frame_length()
        if length is None:
            return FRAME_HEADER - len(self._pending)
        return max(1, FRAME_HEADER + length - len(self._pending))

    def feed(self, chunk: bytes, received_at: float) -> list[WatchEvent]:
        self._pending += chunk
        events: list[WatchEvent] = []
        while (length := self._frame_length()) is not None and len(self._pending) >= FRAME_HEADER + length:
            end = FRAME_HEADER + length
            frame = bytes(self._pending[FRAME_HEADER:end])
            del self._pending[:end]  # cheap: a bytearray drops its head without moving the rest
            events.append(decode_event(frame, received_at, end, self.full, self.fields))
        return events

    def finish(self, received_at: float) -> list[WatchEvent]:
        """A stream that ended mid-frame (the connection broke, which the stream reports itself): the
        truncated frame is dropped, as the JSON path drops a truncated line."""
        self._pending = bytearray()
        return []


def encode_object(message: Message, api_version: str, kind: str) -> bytes:
    """An object as the apiserver writes it in protobuf (`k8s\\x00` + Unknown): for recorded payloads and tests."""
    unknown = runtime_pb2.Unknown(raw=message.SerializeToString(), contentEncoding="", contentType="")
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = api_version, kind
    return MAGIC + unknown.SerializeToString()


def encode_frame(event_type: str, message: Message, api_version: str, kind: str) -> bytes:
    """One watch event as the apiserver frames it: a 4-byte big-endian length and a metav1.WatchEvent."""
    event = meta_v1_pb2.WatchEvent(type=event_type)
    event.object.raw = encode_object(message, api_version, kind)
    data = event.SerializeToString()
    return len(data).to_bytes(FRAME_HEADER, "big") + data
