"""Where a component's CPU (or memory) went: pprof profiles read in Python, summed per function and per group.

A profile is what Go's net/http/pprof serves: profile.proto (github.com/google/pprof/proto/profile.proto),
usually gzipped. It is decoded here with a small wire-format reader (varints and length-delimited fields,
repeated fields packed or not), which needs no protobuf package and no descriptor. What is read: the string
table, the sample types, each sample's location ids and values, each location's lines (inlined frames, innermost
first) and each function's name; mappings, labels and addresses are skipped.

Shares follow `go tool pprof -top`: a function's flat share is the samples where it was the innermost frame, its
cumulative share the samples with it anywhere on the stack (once per sample, however often it recurs), each in %
of the sum of the chosen value over all samples. Groups (GROUPS, the one table of them) say where the time went
in words: a sample belongs to the group of its innermost frame that any group claims (a json encoder's malloc is
GC and memory, the encoder's own loop serialisation), "other" where none does.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from loadtests.results import RunResult
from loadtests.results.profiles import ComponentProfile, ProfileFunction, ProfileGroup

TOP_FUNCTIONS = 25  # kept per profile in results; the report shows fewer
OTHER = "other"
APISERVER = "kube-apiserver"
ETCD = "etcd"


class ProfileError(ValueError):
    """Bytes that are not a pprof profile (a truncated download, an HTML error page)."""


# ------------------------------------------------------------------------------------------------ decoding
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProfileError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProfileError("varint longer than 10 bytes")


def _fields(data: bytes) -> Iterable[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message: an int for varints and fixed widths, bytes for
    length-delimited fields."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise ProfileError("truncated length-delimited field")
            yield number, wire, data[pos:pos + length]
            pos += length
        elif wire == 1:
            pos += 8
            yield number, wire, int.from_bytes(data[pos - 8:pos], "little")
        elif wire == 5:
            pos += 4
            yield number, wire, int.from_bytes(data[pos - 4:pos], "little")
        else:
            raise ProfileError(f"unsupported wire type {wire}")


def _repeated_ints(wire: int, value: int | bytes) -> list[int]:
    """A repeated integer field's values: one varint, or (packed) a run of them."""
    if wire == 0:
        return [value]  # type: ignore[list-item]
    assert isinstance(value, bytes)
    found, pos = [], 0
    while pos < len(value):
        item, pos = _varint(value, pos)
        found.append(item)
    return found


def _signed(value: int) -> int:
    """An int64 as its varint carries it (two's complement in 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass
class Profile:
    """The parts of a decoded profile the summaries read: each sample's stack of function names (innermost
    first, inlined frames expanded) and its values, one per sample type."""

    sample_types: list[tuple[str, str]]  # (type, unit), e.g. ("cpu", "nanoseconds")
    samples: list[tuple[tuple[str, ...], list[int]]]
    default_sample_type: str = ""
    duration_nanos: int = 0
    period_type: tuple[str, str] = ("", "")
    period: int = 0

    def index_of(self, preferred: Sequence[str]) -> int:
        """The sample type to sum: the first of `preferred` the profile has, else its default, else its last (as
        pprof picks)."""
        names = [name for name, _ in self.sample_types]
        for name in (*preferred, self.default_sample_type):
            if name in names:
                return names.index(name)
        if not names:
            raise ProfileError("the profile has no sample types")
        return len(names) - 1

    def total(self, index: int) -> int:
        return sum(values[index] for _, values in self.samples if index < len(values))


@dataclass
class _Raw:
    strings: list[str] = field(default_factory=list)
    sample_types: list[tuple[int, int]] = field(default_factory=list)
    samples: list[tuple[list[int], list[int]]] = field(default_factory=list)
    locations: dict[int, list[int]] = field(default_factory=dict)  # location id -> function ids, innermost first
    functions: dict[int, int] = field(default_factory=dict)  # function id -> name (string index)
    default_sample_type: int = 0
    duration_nanos: int = 0
    period_type: tuple[int, int] = (0, 0)
    period: int = 0


def _first_two(data: bytes) -> tuple[int, int]:
    """Fields 1 and 2 of a message whose two are integers: a ValueType (type, unit) or a Function (id, name)."""
    first = second = 0
    for number, _, value in _fields(data):
        if number == 1:
            first = int(value)  # type: ignore[arg-type]
        elif number == 2:
            second = int(value)  # type: ignore[arg-type]
    return first, second


def _sample(data: bytes) -> tuple[list[int], list[int]]:
    locations: list[int] = []
    values: list[int] = []
    for number, wire, value in _fields(data):
        if number == 1:
            locations += _repeated_ints(wire, value)
        elif number == 2:
            values += [_signed(v) for v in _repeated_ints(wire, value)]
    return locations, values


def _location(data: bytes) -> tuple[int, list[int]]:
    ident, functions = 0, []
    for number, _, value in _fields(data):
        if number == 1:
            ident = int(value)  # type: ignore[arg-type]
        elif number == 4:  # Line: function_id = 1
            assert isinstance(value, bytes)
            functions += [int(v) for n, _, v in _fields(value) if n == 1]  # type: ignore[arg-type]
    return ident, functions


def decode(data: bytes) -> Profile:
    """A profile from its bytes as served (gzipped) or unpacked; ProfileError for anything else."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise ProfileError(f"not a readable gzip stream: {error}") from None
    raw = _Raw()
    try:
        for number, wire, value in _fields(data):
            if wire == 2:
                assert isinstance(value, bytes)
                if number == 1:
                    raw.sample_types.append(_first_two(value))
                elif number == 2:
                    raw.samples.append(_sample(value))
                elif number == 4:
                    ident, functions = _location(value)
                    raw.locations[ident] = functions
                elif number == 5:
                    ident, name = _first_two(value)
                    raw.functions[ident] = name
                elif number == 6:
                    raw.strings.append(value.decode("utf-8", "replace"))
                elif number == 11:
                    raw.period_type = _first_two(value)
            elif wire == 0:
                assert isinstance(value, int)
                if number == 10:
                    raw.duration_nanos = _signed(value)
                elif number == 12:
                    raw.period = _signed(value)
                elif number == 14:
                    raw.default_sample_type = value
    except IndexError as error:
        raise ProfileError(f"a string or function index out of range: {error}") from None
    if not raw.strings or raw.strings[0] != "":
        raise ProfileError("not a pprof profile (its string table does not start with the empty string)")
    return _resolved(raw)


def _resolved(raw: _Raw) -> Profile:
    strings = raw.strings

    def text(index: int) -> str:
        if not 0 <= index < len(strings):
            raise ProfileError(f"string index {index} out of range ({len(strings)} strings)")
        return strings[index]

    names = {ident: text(name) for ident, name in raw.functions.items()}
    frames: dict[int, tuple[str, ...]] = {
        ident: tuple(names.get(f, f"<function {f}>") for f in functions) for ident, functions in raw.locations.items()}
    stacks: dict[tuple[int, ...], tuple[str, ...]] = {}
    samples = []
    for location_ids, values in raw.samples:
        key = tuple(location_ids)
        stack = stacks.get(key)
        if stack is None:
            stack = stacks[key] = tuple(name for loc in key for name in frames.get(loc, (f"<location {loc}>",)))
        samples.append((stack, values))
    return Profile(sample_types=[(text(t), text(u)) for t, u in raw.sample_types], samples=samples,
                   default_sample_type=text(raw.default_sample_type), duration_nanos=raw.duration_nanos,
                   period_type=(text(raw.period_type[0]), text(raw.period_type[1])), period=raw.period)


# ------------------------------------------------------------------------------------------------ groups
@dataclass(frozen=True)
class Group:
    """Functions that do one kind of work, by name (regular expressions matched at the name's start unless they
    say otherwise), for the components named (empty: every one)."""

    name: str
    patterns: tuple[str, ...]
    components: tuple[str, ...] = ()


_GC = (r"runtime\.(gc|scan|markroot|markBits|greyobject|findObject|malloc|newobject|makeslice|growslice|"
       r"memclrNoHeapPointers|wbBuf|bulkBarrier|heapBits|typePointers|nextFreeFast|deductSweepCredit|sweepone|"
       r"bgsweep|bgscavenge|spanOf|publicationBarrier|profilealloc|mProf|"
       r"\(\*(mcache|mcentral|mheap|mspan|gcWork|gcControllerState|sweepLocked|sweepLocker|pageAlloc|"
       r"scavengerState|gcBits|pallocData|spanSet|stackScanState)\))")
_SCHEDULER = (r"runtime\.(schedule|findRunnable|findrunnable|park_m|mcall|futex|netpoll|usleep|notesleep|"
              r"notetsleep|notewakeup|stealWork|runqgrab|stopm|startm|wakep|goready|ready|casgstatus|mPark|"
              r"epollwait|nanotime|procyield|osyield|lock2|unlock2|semrelease|semacquire|selectgo|chansend|"
              r"chanrecv|gopark|goschedImpl|preemptPark|exitsyscall|entersyscall|retake|sysmon|resetspinning|"
              r"checkTimers|runtimer|runOneTimer|execute|gogo|goexit0|newproc|exitsyscallfast|"
              r"\(\*timers?\)|\(\*randomEnum\))")

# Where the time went, one table: the first group whose pattern matches a function's name claims it. Order matters
# only where two groups could claim one name (the generated Marshal methods of API types are serialisation, not
# their package's).
GROUPS: tuple[Group, ...] = (
    # the profiler's own work as its profiles see it: the writer that encodes a CPU profile, and in a heap profile
    # the CPU profile's buffers (its signal handler is not in the samples: each is the stack it interrupted)
    Group("the profiler itself", (r"runtime\.(sigprof|\(\*cpuProfile\)|pprof)", r"runtime/pprof\.")),
    Group("GC and memory", (_GC,)),
    Group("Go scheduler and syscalls", (_SCHEDULER, r"syscall\.", r"internal/runtime/syscall", r"internal/poll\.",
                                        r"runtime/internal/syscall", r"golang\.org/x/sys/unix")),
    Group("serialisation", (r"encoding/json\.", r"sigs\.k8s\.io/json", r"github\.com/json-iterator",
                            r"k8s\.io/apimachinery/pkg/runtime/serializer", r"google\.golang\.org/protobuf",
                            r"github\.com/gogo/protobuf", r"github\.com/golang/protobuf", r"github\.com/fxamacker/cbor",
                            r"sigs\.k8s\.io/yaml", r"k8s\.io/apimachinery/pkg/util/json", r"encoding/base64",
                            r"k8s\.io/apimachinery/pkg/runtime\.(Encode|Decode|\(\*Unknown\)|\(\*RawExtension\))",
                            r".*\.(Marshal|MarshalTo|MarshalToSizedBuffer|Unmarshal|Size|MarshalJSON|UnmarshalJSON|"
                            r"XXX_\w+)$", r"strconv\.", r"unicode/utf8\.")),
    Group("compression", (r"compress/", r"hash/crc32", r"github\.com/klauspost/compress")),
    Group("watch cache", (r"k8s\.io/apiserver/pkg/storage/cacher",), (APISERVER,)),
    Group("etcd client", (r"go\.etcd\.io/etcd/client", r"go\.etcd\.io/etcd/api", r"k8s\.io/apiserver/pkg/storage/etcd3",
                          r"google\.golang\.org/grpc"), (APISERVER,)),
    Group("field management (server-side apply)", (r"sigs\.k8s\.io/structured-merge-diff",
                                                   r"k8s\.io/apimachinery/pkg/util/managedfields",
                                                   r"k8s\.io/apiserver/pkg/endpoints/handlers/fieldmanager"),
          (APISERVER,)),
    Group("conversion, defaulting, deep copy", (r"k8s\.io/apimachinery/pkg/conversion",
                                                r"k8s\.io/apimachinery/pkg/runtime\.\(\*Scheme\)",
                                                r".*\.(DeepCopy|DeepCopyInto|DeepCopyObject)$",
                                                r".*\.(auto)?Convert_", r".*\.SetDefaults_",
                                                r".*\.SetObjectDefaults_"), (APISERVER,)),
    Group("admission, authn, authz", (r"k8s\.io/apiserver/pkg/admission", r"k8s\.io/kubernetes/plugin/pkg/admission",
                                      r"k8s\.io/apiserver/pkg/authentication", r"k8s\.io/apiserver/pkg/authorization",
                                      r"k8s\.io/kubernetes/plugin/pkg/auth", r"k8s\.io/apiserver/plugin/pkg/authorizer",
                                      r"k8s\.io/kubernetes/pkg/registry/rbac", r"k8s\.io/apiserver/pkg/cel",
                                      r"github\.com/google/cel-go",
                                      r"k8s\.io/apiserver/pkg/endpoints/filters\.(WithAuthentication|"
                                      r"WithAuthorization|withAuthentication)"), (APISERVER,)),
    Group("audit", (r"k8s\.io/apiserver/pkg/audit", r"k8s\.io/apiserver/plugin/pkg/audit",
                    r"k8s\.io/apiserver/pkg/endpoints/filters\.(WithAudit|withAudit)"), (APISERVER,)),
    Group("flow control (APF)", (r"k8s\.io/apiserver/pkg/util/flowcontrol",), (APISERVER,)),
    Group("metrics", (r"github\.com/prometheus", r"k8s\.io/component-base/metrics")),
    Group("logging", (r"k8s\.io/klog", r"go\.uber\.org/zap")),
    Group("raft", (r"go\.etcd\.io/raft", r"go\.etcd\.io/etcd/raft",
                   r"go\.etcd\.io/etcd/server/v3/etcdserver/api/rafthttp",
                   r"go\.etcd\.io/etcd/server/v3/etcdserver\.\(\*raftNode\)"), (ETCD,)),
    Group("WAL", (r"go\.etcd\.io/etcd/server/v3/storage/wal", r"go\.etcd\.io/etcd/server/v3/wal"), (ETCD,)),
    Group("bbolt (backend)", (r"go\.etcd\.io/bbolt", r"go\.etcd\.io/etcd/server/v3/storage/backend",
                              r"go\.etcd\.io/etcd/server/v3/mvcc/backend"), (ETCD,)),
    Group("MVCC and watch", (r"go\.etcd\.io/etcd/server/v3/storage/mvcc", r"go\.etcd\.io/etcd/server/v3/mvcc",
                             r"github\.com/google/btree"), (ETCD,)),
    Group("gRPC serving", (r"google\.golang\.org/grpc", r"go\.etcd\.io/etcd/server/v3/etcdserver/api/v3rpc",
                           r"github\.com/grpc-ecosystem"), (ETCD,)),
    Group("etcd server (apply, requests)", (r"go\.etcd\.io/etcd/server/v3/etcdserver",), (ETCD,)),
    Group("TLS and crypto", (r"crypto/", r"vendor/golang\.org/x/crypto", r"golang\.org/x/crypto",
                             r"p256\w*$")),  # the assembly of crypto/internal/fips140/nistec has bare names
    Group("HTTP/2 and net/http", (r"net/http", r"golang\.org/x/net/http2", r"vendor/golang\.org/x/net/http2",
                                  r"golang\.org/x/net/http/httpguts", r"vendor/golang\.org/x/net/http",
                                  r"bufio\.", r"net\.")),
)


def component_kind(component: str) -> str:
    """The component an instance belongs to: kube-apiserver-2 -> kube-apiserver, etcd-3 -> etcd."""
    for name in (APISERVER, ETCD):
        if component == name or component.startswith(name + "-"):
            return name
    return component


class Grouper:
    """Which group claims a function, for one component, each name matched once."""

    def __init__(self, component: str, groups: Sequence[Group] = GROUPS) -> None:
        kind = component_kind(component)
        self.groups = [(g.name, re.compile("|".join(f"(?:{p})" for p in g.patterns)))
                       for g in groups if not g.components or kind in g.components]
        self._known: dict[str, str | None] = {}

    def group_of(self, function: str) -> str | None:
        if function not in self._known:
            self._known[function] = next((name for name, pattern in self.groups if pattern.match(function)), None)
        return self._known[function]

    def names(self) -> list[str]:
        return [name for name, _ in self.groups]


# ------------------------------------------------------------------------------------------------ summaries
CPU_TYPES = ("cpu", "samples")
HEAP_TYPES = ("inuse_space",)


@dataclass
class Shares:
    """A profile summed by function and by group, in the chosen value's unit."""

    sample_type: str
    unit: str
    total: int
    flat: Counter[str]
    cum: Counter[str]
    group_flat: Counter[str]
    group_cum: Counter[str]


def shares(profiles: Sequence[Profile], component: str, kind: str) -> Shares:
    """Flat and cumulative sums per function and group over the samples of one or more profiles of the same kind
    (consecutive CPU profiles of a window are summed as `go tool pprof` merges several files)."""
    if not profiles:
        raise ProfileError("no profile to sum")
    grouper = Grouper(component)
    flat: Counter[str] = Counter()
    cum: Counter[str] = Counter()
    group_flat: Counter[str] = Counter()
    group_cum: Counter[str] = Counter()
    total = 0
    first = profiles[0]
    sample_type, unit = first.sample_types[first.index_of(CPU_TYPES if kind == "cpu" else HEAP_TYPES)]
    for profile in profiles:
        names = [name for name, _ in profile.sample_types]
        if sample_type not in names:
            raise ProfileError(f"profiles of different kinds: {sample_type} is not among {names}")
        index = names.index(sample_type)
        for stack, values in profile.samples:
            value = values[index] if index < len(values) else 0
            if not value:
                continue
            total += value
            if stack:
                flat[stack[0]] += value
            for name in set(stack):
                cum[name] += value
            groups = [grouper.group_of(name) for name in stack]
            group_flat[next((g for g in groups if g is not None), OTHER)] += value
            for group in {g for g in groups if g is not None}:
                group_cum[group] += value
    return Shares(sample_type, unit, total, flat, cum, group_flat, group_cum)


def _pct(value: float, total: float) -> float:
    return round(100.0 * value / total, 2) if total else 0.0


def summarise(profiles: Sequence[Profile], component: str, kind: str, files: list[str], *,
              offset_s: float | None, seconds: float | None, top: int = TOP_FUNCTIONS) -> ComponentProfile:
    """What results keep of a component's profile: its total, its top functions by flat share (ties by name) and
    every group with a share, largest first."""
    found = shares(profiles, component, kind)
    ranked = sorted(found.flat, key=lambda name: (-found.flat[name], name))[:top]
    functions = [ProfileFunction(name, _pct(found.flat[name], found.total), _pct(found.cum[name], found.total))
                 for name in ranked]
    groups = [ProfileGroup(name, _pct(value, found.total), _pct(found.group_cum.get(name, value), found.total))
              for name, value in sorted(found.group_flat.items(), key=lambda item: (-item[1], item[0]))]
    return ComponentProfile(component=component, kind=kind, files=list(files), sample_type=found.sample_type,
                            unit=found.unit, total=float(found.total), offset_s=offset_s, seconds=seconds,
                            functions=functions, groups=groups)


def cpu_percent(profile: ComponentProfile) -> float | None:
    """A CPU profile's samples as % of one core over the seconds profiled (100 = one core); None where the profile
    does not say (a heap profile, no seconds, a unit other than nanoseconds)."""
    if profile.kind != "cpu" or not profile.seconds or profile.total is None or profile.unit != "nanoseconds":
        return None
    return 100.0 * profile.total / 1e9 / profile.seconds


# ------------------------------------------------------------------------------------------------ across steps
def find(profiles: Iterable[ComponentProfile], component: str, kind: str) -> ComponentProfile | None:
    return next((p for p in profiles if p.component == component and p.kind == kind), None)


@dataclass
class GroupChange:
    """One group's share of a component's profile at each step: None where that step has no such profile (not
    measured), 0.0 where it was profiled and no sample fell in the group."""

    group: str
    shares: list[float | None]

    @property
    def change(self) -> float | None:
        """Points from the first profiled step to the last."""
        measured = [s for s in self.shares if s is not None]
        return measured[-1] - measured[0] if len(measured) > 1 else None


def group_changes(run: RunResult, component: str, kind: str = "cpu") -> list[GroupChange]:
    """The groups' flat shares of one component's profiles step by step, the largest anywhere first; empty when
    no step has such a profile."""
    found = [find(step.profiles, component, kind) for step in run.steps]
    if not any(found):
        return []
    names: dict[str, float] = {}
    for profile in found:
        for group in profile.groups if profile else []:
            names[group.group] = max(names.get(group.group, 0.0), group.flat_pct)
    rows = []
    for name in sorted(names, key=lambda n: (n == OTHER, -names[n], n)):
        shares_by_step: list[float | None] = []
        for profile in found:
            if profile is None:
                shares_by_step.append(None)
            else:
                shares_by_step.append(next((g.flat_pct for g in profile.groups if g.group == name), 0.0))
        rows.append(GroupChange(name, shares_by_step))
    return rows


def profiled_components(run: RunResult, kind: str = "cpu") -> list[str]:
    """Every component with a profile of this kind in some step, the apiservers first, in order of appearance."""
    seen: list[str] = []
    for step in run.steps:
        for profile in step.profiles:
            if profile.kind == kind and profile.component not in seen:
                seen.append(profile.component)
    return sorted(seen, key=lambda c: (component_kind(c) != APISERVER, seen.index(c)))
