"""What a cluster holds, read without changing it: every served kind that answers LIST (custom resources too),
read page by page (limit 500), each object reduced to a few numbers as its page arrives and then let go.

Memory is bounded by one page of objects and, per object, five (or six) whole numbers kept in arrays (8 bytes each: its
size, its labels' and annotations' counts and bytes) until its kind's LIST ends and they become quantiles; per
namespace and per node a counter. Nothing of an object's content is kept: names (of objects, namespaces, nodes)
live only as counter keys in memory and are never written; values, label values, annotation values and the data
of Secrets and ConfigMaps are never kept at all (docs/profile.md)."""

from __future__ import annotations

import collections
import hashlib
import hmac
import secrets
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from loadtests.capture.bootstrap import NAMESPACE_DEFAULTS, made_at_bootstrap, namespace_default
from loadtests.capture.harness import made_by_harness, without_harness_labels
from loadtests.capture.profile import CrdFigures, KindProfile, NodeShape, PodFigures, Quantiles, Skipped
from loadtests.errors import TargetError
from loadtests.kube import discovery
from loadtests.kube.discovery import Kind
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient

PAGE_LIMIT = 500
# taint keys in these domains (Kubernetes and its SIG projects, kwok among them) are public words, written as they
# are; any other is hashed
WELL_KNOWN_DOMAINS = ("kubernetes.io", "k8s.io", "x-k8s.io")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
NODE_RESOURCES = ("cpu", "memory", "pods")
# the same objects served under a second group: read once, where their first group serves them
ALIASES = {("events.k8s.io", "events"): "the same objects as the core group's events, counted there"}
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
# what Go's encoding/json (the apiserver's) escapes that orjson writes as it is: <, >, & as \u003c (1 byte -> 6),
# U+2028 and U+2029 as \u2028 (3 bytes -> 6)
_GO_ESCAPED = ((b"<", 5), (b">", 5), (b"&", 5), ("\u2028".encode(), 3), ("\u2029".encode(), 3))
_TYPE_META = len(b'"kind":,"apiVersion":,')


def served_size(obj: dict[str, Any], kind: str, api_version: str) -> int:
    """The bytes of an object's JSON as a GET of it serves it (without the newline after it): its compact
    serialisation, keys in the served order, with Go's escapes, and its kind and apiVersion, which a LIST's items
    of built-in kinds leave out and a GET puts first."""
    data = orjson.dumps(obj)
    size = len(data) + sum(data.count(char) * extra for char, extra in _GO_ESCAPED)
    if "kind" not in obj:
        size += _TYPE_META + len(orjson.dumps(kind)) + len(orjson.dumps(api_version))
    return size


def map_bytes(mapping: dict[str, Any] | None) -> int:
    """UTF-8 bytes of a map's keys and values together (labels, annotations): what they add to etcd's value."""
    return sum(len(str(k).encode()) + len(str(v).encode()) for k, v in (mapping or {}).items())


class Interned:
    """Names (of namespaces, of nodes) as small numbers, so counters of every kind share one copy of each name;
    held in memory for the capture only, never written."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        return self._ids.setdefault(name, len(self._ids))


@dataclass
class KindTally:
    """One kind's figures as its pages arrive: five numbers per object, a counter per namespace and owner kind,
    and how many the control plane made at bootstrap and with each namespace, and the load tester itself."""

    kind: Kind
    owner_names: dict[tuple[str, str], str]  # (group, kind) served -> the name written for an owner of that kind
    per_namespace: collections.Counter[int] = field(default_factory=collections.Counter)
    sizes: array[int] = field(default_factory=lambda: array("q"))
    made_sizes: array[int] = field(default_factory=lambda: array("q"))  # of those without an owner, made by no one else
    harness_label_bytes: array[int] = field(default_factory=lambda: array("q"))  # of those, what the harness's add
    labels: array[int] = field(default_factory=lambda: array("q"))
    label_bytes: array[int] = field(default_factory=lambda: array("q"))
    annotations: array[int] = field(default_factory=lambda: array("q"))
    annotation_bytes: array[int] = field(default_factory=lambda: array("q"))
    owners: collections.Counter[str] = field(default_factory=collections.Counter)
    without_owner: int = 0
    control_plane: int = 0  # made by the control plane at bootstrap (capture/bootstrap.py's markers)
    namespace_defaults: int = 0  # made by the control plane with each namespace but the system ones
    harness: int = 0  # made by the load tester itself (capture/harness.py): apart from every other figure's count

    def add(self, obj: dict[str, Any], namespace_id: Callable[[str], int]) -> None:
        meta = obj.get("metadata") or {}
        if self.kind.namespaced:
            self.per_namespace[namespace_id(str(meta.get("namespace", "")))] += 1
        self.sizes.append(served_size(obj, self.kind.kind, self.kind.api_version))
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        self.labels.append(len(labels))
        self.label_bytes.append(map_bytes(labels))
        self.annotations.append(len(annotations))
        self.annotation_bytes.append(map_bytes(annotations))
        owners = {self.owner_name(ref) for ref in meta.get("ownerReferences") or () if isinstance(ref, dict)}
        self.owners.update(owners)
        self.without_owner += not owners
        group, kind = self.kind.group, self.kind.kind
        if made_by_harness(group, kind, obj):
            self.harness += 1
            return
        once, default = made_at_bootstrap(group, kind, obj), namespace_default(group, kind, obj)
        self.control_plane += once
        self.namespace_defaults += default
        if not (owners or once or default):  # one a replay makes (capture/replay.py): its size is the replay's
            # sized as the original's it stands for: without the labels the harness adds to what it makes
            made = served_size(without_harness_labels(obj), self.kind.kind, self.kind.api_version)
            self.made_sizes.append(made)
            if made < self.sizes[-1]:
                self.harness_label_bytes.append(self.sizes[-1] - made)

    def owner_name(self, ref: dict[str, Any]) -> str:
        """"ReplicaSet.apps", "Node": an owner's kind when the cluster serves it, else "other" (an owner
        reference's kind is free text, which could carry anything)."""
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        return self.owner_names.get((group, str(ref.get("kind", ""))), "other")

    def profile(self) -> KindProfile:
        kind = self.kind
        found = KindProfile(kind.group, kind.version, kind.kind, kind.plural,
                            "Namespaced" if kind.namespaced else "Cluster", count=len(self.sizes),
                            owners=dict(self.owners.most_common()), without_owner=self.without_owner,
                            control_plane=self.control_plane, harness=self.harness,
                            namespace_defaults=self.namespace_defaults if (
                                kind.group, kind.kind) in NAMESPACE_DEFAULTS else None)
        if kind.namespaced:
            found.namespaces = len(self.per_namespace)
        if not self.sizes:
            return found
        if kind.namespaced:
            found.per_namespace = Quantiles.of(self.per_namespace.values())
        found.size_bytes, found.labels = Quantiles.of(self.sizes), Quantiles.of(self.labels)
        found.made_size_bytes = Quantiles.of(self.made_sizes)
        found.harness_label_bytes = Quantiles.of(self.harness_label_bytes) if self.harness_label_bytes else None
        found.label_bytes, found.annotations = Quantiles.of(self.label_bytes), Quantiles.of(self.annotations)
        found.annotation_bytes = Quantiles.of(self.annotation_bytes)
        return found


@dataclass
class PodTally:
    """Pods: nodes they run on (by interned name), their containers, their phases."""

    node_id: Interned
    per_node: collections.Counter[int] = field(default_factory=collections.Counter)
    unscheduled: int = 0
    containers: array[int] = field(default_factory=lambda: array("q"))
    init_containers: array[int] = field(default_factory=lambda: array("q"))
    phases: collections.Counter[str] = field(default_factory=collections.Counter)

    def add(self, pod: dict[str, Any]) -> None:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if node := spec.get("nodeName"):
            self.per_node[self.node_id(str(node))] += 1
        else:
            self.unscheduled += 1
        self.containers.append(len(spec.get("containers") or ()))
        self.init_containers.append(len(spec.get("initContainers") or ()))
        phase = status.get("phase")
        self.phases[phase if phase in PHASES else "other"] += 1

    def figures(self, listed: set[int]) -> PodFigures:
        """Pods per node over every node this capture saw (`listed` by the Nodes' LIST, or named by a pod): a
        node without pods counts 0."""
        counts = [self.per_node.get(node, 0) for node in sorted(listed | set(self.per_node))]
        return PodFigures(per_node=Quantiles.of(counts), nodes=len(counts), unscheduled=self.unscheduled,
                          containers=Quantiles.of(self.containers), init_containers=Quantiles.of(self.init_containers),
                          phases=dict(self.phases.most_common()))


def taint_key(key: str, salt: bytes) -> str:
    """A taint's key as written: one of WELL_KNOWN_DOMAINS as it is, any other as a hash with this capture's salt,
    so alike nodes still group and no team's or product's name leaves the cluster."""
    domain = key.rpartition("/")[0]
    if any(domain == d or domain.endswith(f".{d}") for d in WELL_KNOWN_DOMAINS):
        return key
    return "private-" + hmac.new(salt, key.encode(), hashlib.sha256).hexdigest()[:12]


@dataclass
class NodeTally:
    """Nodes grouped by shape: capacity and allocatable (cpu, memory, pods), taints (key, effect), label count."""

    node_id: Interned
    salt: bytes
    shapes: collections.Counter[tuple[Any, ...]] = field(default_factory=collections.Counter)
    node_ids: set[int] = field(default_factory=set)

    def add(self, node: dict[str, Any]) -> None:
        self.node_ids.add(self.node_id(str((node.get("metadata") or {}).get("name", ""))))
        status, spec = node.get("status") or {}, node.get("spec") or {}
        capacity = tuple(str((status.get("capacity") or {}).get(r, "")) for r in NODE_RESOURCES)
        allocatable = tuple(str((status.get("allocatable") or {}).get(r, "")) for r in NODE_RESOURCES)
        taints = tuple(sorted((taint_key(str(t.get("key", "")), self.salt), str(t.get("effect", "")))
                              for t in spec.get("taints") or () if isinstance(t, dict)))
        labels = len((node.get("metadata") or {}).get("labels") or {})
        self.shapes[(capacity, allocatable, taints, labels)] += 1

    def shapes_found(self) -> list[NodeShape]:
        """The shapes, most nodes first (ties in a fixed order, so two captures of one cluster read alike)."""
        ordered = sorted(self.shapes.items(), key=lambda item: (-item[1], repr(item[0])))
        return [NodeShape(count, dict(zip(NODE_RESOURCES, capacity, strict=True)),
                          dict(zip(NODE_RESOURCES, allocatable, strict=True)),
                          [{"key": key, "effect": effect} for key, effect in taints], labels)
                for (capacity, allocatable, taints, labels), count in ordered]


def crd_figures(crd: dict[str, Any]) -> tuple[tuple[str, str], CrdFigures]:
    """(group, plural) of a CustomResourceDefinition and what it says of its versions."""
    spec = crd.get("spec") or {}
    versions = [v for v in spec.get("versions") or () if isinstance(v, dict)]
    served = [str(v.get("name")) for v in versions if v.get("served")]
    storage = next((str(v.get("name")) for v in versions if v.get("storage")), "")
    return (str(spec.get("group", "")), str((spec.get("names") or {}).get("plural", ""))), CrdFigures(served, storage)


@dataclass
class CrdTally:
    """CustomResourceDefinitions: what each says of its custom resource, by (group, plural)."""

    found: dict[tuple[str, str], CrdFigures] = field(default_factory=dict)

    def add(self, crd: dict[str, Any]) -> None:
        key, figures = crd_figures(crd)
        self.found[key] = figures


Extra = PodTally | NodeTally | CrdTally


@dataclass
class Inventory:
    """Every listed kind's figures, what was not read and why, and how much was read."""

    kinds: list[KindProfile]
    skipped: list[Skipped]
    objects_read: int
    pages_read: int


class ObjectReader:
    """Reads every listable kind once, page by page, into tallies; `salt` (random per capture unless given, for
    tests) hashes what must group without being written (taint keys outside Kubernetes's domains)."""

    def __init__(self, client: RestClient, *, page_limit: int = PAGE_LIMIT, salt: bytes | None = None,
                 progress: Callable[[str], None] = lambda _line: None) -> None:
        self.client, self.page_limit, self.progress = client, page_limit, progress
        self.salt = salt if salt is not None else secrets.token_bytes(16)
        self.namespace_id, self.node_id = Interned(), Interned()
        self.objects_read = self.pages_read = 0

    def read(self) -> Inventory:
        kinds, skipped = self.discover()
        owner_names = {(k.group, k.kind): k.kind + (f".{k.group}" if k.group else "") for k in kinds}
        done: list[tuple[KindTally, Extra | None]] = []
        for kind in kinds:
            try:
                done.append(self.read_kind(kind, owner_names))
            except ApiError as error:
                skipped.append(Skipped(kind.group, kind.version, kind.plural, self.not_read(kind, error)))
        extras = {type(extra): extra for _tally, extra in done if extra is not None}
        profiles = []
        for tally, extra in done:
            found = tally.profile()
            if isinstance(extra, PodTally):
                nodes = extras.get(NodeTally)
                found.pods = extra.figures(nodes.node_ids if isinstance(nodes, NodeTally) else set())
            elif isinstance(extra, NodeTally):
                found.nodes = extra.shapes_found()
            crds = extras.get(CrdTally)
            if isinstance(crds, CrdTally) and (crd := crds.found.get((tally.kind.group, tally.kind.plural))):
                found.crd = crd
            profiles.append(found)
        return Inventory(profiles, skipped, self.objects_read, self.pages_read)

    def discover(self) -> tuple[list[Kind], list[Skipped]]:
        """Every listable kind of every group's preferred version; aggregated APIs (served by another server,
        nothing of them in this cluster's storage) and second names of the same objects are skipped."""
        aggregated = self.aggregated()
        kinds: list[Kind] = []
        skipped: list[Skipped] = []
        for api_version in discovery.preferred_versions(self.client):
            group, _, version = api_version.rpartition("/")
            if api_version in aggregated:
                skipped.append(Skipped(group, version, "*", "an aggregated API: served by another server, its "
                                                             "objects are not stored in this cluster"))
                continue
            try:
                found = discovery.listable(self.client, api_version)
            except ApiError as error:
                skipped.append(Skipped(group, version, "*", f"its discovery answered HTTP {error.status}"))
                continue
            for kind in found:
                if reason := ALIASES.get((kind.group, kind.plural)):
                    skipped.append(Skipped(group, version, kind.plural, reason))
                else:
                    kinds.append(kind)
        return kinds, skipped

    def aggregated(self) -> set[str]:
        """The group/versions an APIService sends to another server (spec.service set); none if not readable."""
        try:
            pages = self.client.list_pages("/apis/apiregistration.k8s.io/v1/apiservices", {"limit": self.page_limit})
            services = [item.get("spec") or {} for page in pages for item in page.get("items") or ()]
        except ApiError as error:
            if not error.status:
                raise TargetError(f"lost the apiserver while reading its APIServices: {error.reason}") from None
            return set()
        return {f"{s.get('group')}/{s.get('version')}" for s in services if s.get("service")}

    def read_kind(self, kind: Kind, owner_names: dict[tuple[str, str], str]) -> tuple[KindTally, Extra | None]:
        """One kind's LIST, page by page, every object reduced as its page arrives; an ApiError ends it (its
        figures, half read, are dropped by the caller)."""
        started = time.monotonic()
        tally = KindTally(kind, owner_names)
        extra = self.extra_for(kind)
        for page in self.client.list_pages(kind.collection(), {"limit": self.page_limit}):
            self.pages_read += 1
            for obj in page.get("items") or ():
                tally.add(obj, self.namespace_id)
                if extra is not None:
                    extra.add(obj)
            self.objects_read += len(page.get("items") or ())
            del page  # the page goes before the next arrives
        if (seconds := time.monotonic() - started) >= 1.0:
            self.progress(f"{kind.plural}: {len(tally.sizes):,} objects in {seconds:.1f} s")
        return tally, extra

    def extra_for(self, kind: Kind) -> Extra | None:
        if (kind.group, kind.plural) == ("", "pods"):
            return PodTally(self.node_id)
        if (kind.group, kind.plural) == ("", "nodes"):
            return NodeTally(self.node_id, self.salt)
        return CrdTally() if (kind.group, kind.plural) == CRDS else None

    @staticmethod
    def not_read(kind: Kind, error: ApiError) -> str:
        """Why a kind's LIST failed, in words that name no object (an apiserver's message might); a lost
        apiserver ends the capture instead."""
        if not error.status:
            raise TargetError(f"lost the apiserver while reading {kind.plural}: {error.reason}") from None
        reasons = {401: "the credentials were refused", 403: "forbidden: the user may not list it (loadtest "
                   "capture --print-rbac prints the ClusterRole a capture needs)",
                   404: "gone since discovery listed it",
                   410: "its LIST outlived its continue token (etcd compacted meanwhile): capture again"}
        return reasons.get(error.status, f"its LIST answered HTTP {error.status}")
