"""A captured cluster's profile: typed, written as readable YAML with its schema version, read back only at that
version. Every field is a number, an API schema name (group, version, kind, resource) or a fixed word; what it
never holds, and why, is docs/profile.md's to say. Nothing here does I/O but `write` and `load`."""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtests.errors import LoadTestError, UnreadableFile
from loadtests.results.distribution import Distribution
from loadtests.results.schema import build

SCHEMA_VERSION = 1
SCHEMA = f"k8s-loadtest/profile/v{SCHEMA_VERSION}"
QUANTILE_METHOD = "nearest rank, exact: over every object's figure, kept as a number until the kind's LIST ended"


@dataclass
class Quantiles:
    """Quantiles of one whole number per object (or per namespace, per node): `count` numbers, each quantile the
    smallest of them with at least that share of the numbers at or below it (results/distribution.py's rule)."""

    count: int = 0
    p50: int | None = None
    p90: int | None = None
    p99: int | None = None
    max: int | None = None

    @classmethod
    def of(cls, values: typing.Iterable[int]) -> Quantiles:
        found = Distribution.of(list(values), "")
        return cls(found.count, found.p50, found.p90, found.p99, found.max)  # type: ignore[arg-type]


@dataclass
class CrdFigures:
    """What a custom resource's definition says of it, for a replay to install it with a permissive schema."""

    versions: list[str] = field(default_factory=list)  # the versions it serves, in its order
    storage_version: str = ""


@dataclass
class PodFigures:
    """Pods beyond what every kind has: how they spread over nodes, how many containers, in which phase."""

    per_node: Quantiles = field(default_factory=Quantiles)  # over every node listed, and any a pod names
    nodes: int = 0  # the nodes of per_node
    unscheduled: int = 0  # pods without spec.nodeName
    containers: Quantiles = field(default_factory=Quantiles)
    init_containers: Quantiles = field(default_factory=Quantiles)
    phases: dict[str, int] = field(default_factory=dict)  # status.phase -> pods; an unknown word is "other"


@dataclass
class NodeShape:
    """Nodes alike in every figure here, and how many of them."""

    count: int
    capacity: dict[str, str]  # cpu, memory, pods: quantities as served
    allocatable: dict[str, str]
    taints: list[dict[str, str]]  # {key, effect}; a key outside the kubernetes.io and k8s.io domains is hashed
    labels: int  # labels per node


@dataclass
class KindProfile:
    """One served kind: where it is served, how many objects, and their figures (None: no object to measure)."""

    group: str  # "" for the core group
    version: str  # the group's preferred version, the one read
    kind: str
    resource: str
    scope: str  # Namespaced | Cluster
    count: int = 0
    namespaces: int | None = None  # namespaces holding at least one (None: cluster-scoped)
    per_namespace: Quantiles | None = None  # objects per namespace, over the namespaces holding one
    size_bytes: Quantiles | None = None  # each object's JSON as a GET serves it
    # size_bytes of the objects a replay makes (without an owner, made neither by the control plane, at bootstrap
    # or with a namespace, nor by the load tester): its target, and its fidelity's, at any k (their count 0 where
    # the kind has none); None: captured before this figure was
    made_size_bytes: Quantiles | None = None
    # of those objects, the ones carrying the load tester's labels (a replay's: config/templates.py): the bytes
    # those labels and their managedFields entries add, which made_size_bytes leaves out so that a replay's objects
    # are sized as the original's they stand for; None: no object carries them
    harness_label_bytes: Quantiles | None = None
    labels: Quantiles | None = None  # labels per object
    label_bytes: Quantiles | None = None  # UTF-8 bytes of an object's label keys and values together
    annotations: Quantiles | None = None
    annotation_bytes: Quantiles | None = None
    owners: dict[str, int] = field(default_factory=dict)  # owner kind ("ReplicaSet.apps", "Node") -> objects owned
    without_owner: int = 0
    # made by the control plane at bootstrap (public markers: capture/bootstrap.py), once whatever the cluster's
    # size; None: captured before this figure was
    control_plane: int | None = None
    # ConfigMaps and ServiceAccounts only: the defaults the control plane makes with each namespace (kube-root-ca.crt,
    # `default`) but the system namespaces' (counted in control_plane); None: another kind, or captured before
    namespace_defaults: int | None = None
    # made by the load tester itself (capture/harness.py: its namespaces and what is in them, its RBAC, its fleet's
    # node Events), in none of the figures above and no part of the cluster the profile stands for; None: captured
    # before this figure was
    harness: int | None = None
    crd: CrdFigures | None = None  # a custom resource: its definition's figures
    pods: PodFigures | None = None
    nodes: list[NodeShape] | None = None  # Nodes: their shapes, most common first


@dataclass
class Skipped:
    """A served resource the profile holds no figures of, and why."""

    group: str
    version: str
    resource: str
    reason: str


@dataclass
class CaptureFigures:
    """The capture's own figures: when, how long, how much it read, what it cost this process."""

    started_at: str  # UTC, ISO 8601
    seconds: float
    server_version: str  # the apiserver's gitVersion
    objects_read: int
    pages_read: int
    page_limit: int
    requests: dict[str, int]  # the capture's requests per verb (GET, LIST), every resend counted
    peak_rss_since: str  # "capture start" (the peak was reset as it began) or "process start"
    rss_at_start_bytes: int | None = None  # None (left out of the file): not measured
    peak_rss_bytes: int | None = None  # this process's peak resident set (the kernel's VmHWM)
    quantiles: str = QUANTILE_METHOD
    user_agent: str = ""


@dataclass
class Profile:
    capture: CaptureFigures
    kinds: list[KindProfile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # the traffic part (audit log or /metrics), written under `traffic:` when captured; plain data of its own
    # module, not this one's types
    traffic: dict[str, Any] | None = None
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """The profile as written: schema first; a section or figure that is None is left out."""
        body = _without_none(dataclasses.asdict(self))
        return {"schema": body.pop("schema"), **body}

    def write(self, path: Path) -> Path:
        """Write the profile as YAML atomically: a reader, a crash or a full disk never sees half a file."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_text(f"# {SCHEMA}: a cluster's profile (docs/profile.md says what every field is)\n"
                           + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=120))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        return path

    def kind(self, kind: str, group: str = "") -> KindProfile | None:
        """The figures of one kind of one group, if the profile has them."""
        return next((k for k in self.kinds if k.kind == kind and k.group == group), None)


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def load(path: Path | str) -> Profile:
    """A profile file, read back; another schema version, or a file that is no profile, is refused in one line."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        reason = error.strerror if isinstance(error, OSError) else f"not YAML ({type(error).__name__})"
        raise UnreadableFile(f"{path}: cannot read the profile: {reason}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        found = f"schema {schema!r}" if schema else "no schema line"
        raise LoadTestError(f"{path}: a profile of {found}; this loadtest reads {SCHEMA!r} only: capture the "
                            "cluster again with this version")
    try:
        return build(Profile, data, strict=True)
    except (KeyError, TypeError, ValueError) as error:
        raise UnreadableFile(f"{path}: not a profile of {SCHEMA}: {type(error).__name__}: {error}") from None
