"""How faithful a replay was, measured: the replay's own capture set beside the original's × k, figure by figure,
each judged against its target (docs/profile.md, "Comparing two profiles").

A figure either side lacks is "not measured": never 0 and never met; one no replay controls (Events' count, the
sizes of a kind a replay does not pad, watches whose owners /metrics does not say at a k other than 1) is "not
judged", shown and neither met nor missed. Counts leave out the load tester's own objects on both sides
(`harness`). Sizes are per object, so not scaled, and of the objects a replay makes (made_size_bytes); counts,
rates and watches are scaled, the control plane's own bootstrap objects and watches once. Nothing here does I/O:
the CLI prints a Fidelity, a run's results keep its `to_dict()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loadtests.capture.audit_tally import SOURCE as AUDIT_SOURCE
from loadtests.capture.bootstrap import RBAC
from loadtests.capture.clients import CONTROL_PLANE_PRODUCTS, CONTROLLER, runs_once
from loadtests.capture.profile import KindProfile, Profile, Quantiles
from loadtests.capture.scale import check_scale, expected_count

MET, MISSED, NOT_MEASURED = "met", "missed", "not measured"
NOT_JUDGED = "not judged"  # measured both sides, but no target a replay controls: neither met nor missed
VERDICTS = (MET, MISSED, NOT_MEASURED, NOT_JUDGED)
# kinds whose count no replay controls, each with why: both counts shown, the verdict NOT_JUDGED
UNCONTROLLED = {
    ("", "Event"): "Events are made as things happen (by the control plane, the fleet's nodes, the load) and expire "
                   "after the apiserver's --event-ttl (1 h by default): their count at an instant is no target a "
                   "replay can meet",
}
# kinds one of which stands for a kind of object, whatever the cluster's size: a replay installs each captured
# CustomResourceDefinition once, and the apiserver makes its group's APIService with it (the built-in groups' at
# bootstrap, an aggregated API's with the server behind it): their count is the original's at any k
ONCE_KINDS = {
    ("apiextensions.k8s.io", "CustomResourceDefinition"): "one per custom resource kind, whatever the cluster's "
                                                          "size: the original's count at any scale",
    ("apiregistration.k8s.io", "APIService"): "one per API group and version (the built-in ones', a custom "
                                              "resource's, an aggregated API's), whatever the cluster's size: the "
                                              "original's count at any scale",
}
# the control plane's own requests (kube-controller-manager's, kube-scheduler's, the apiserver's): sent as its
# components need them, most at the cluster's bootstrap, so no rate of theirs is a target a replay controls
CONTROL_PLANE_RATES = ("the control plane's own requests (its components', most at its bootstrap): the replaying "
                       "cluster's send theirs as they need them, no target a replay controls")
SIZE_WITHIN = 0.10  # size p50 and p99, either side
# kinds a replay makes from a padded body of its own (capture/replay.py's GENERIC), custom resources besides: the
# sizes of the objects it makes are its to meet, compared over those objects only (made_size_bytes) on both sides
PADDED_KINDS = frozenset({("", "ConfigMap"), ("", "Secret"), ("", "ServiceAccount"), (RBAC, "Role"),
                          (RBAC, "ClusterRole")})
SIZES_NOT_MADE = ("sizes not judged: a replay makes none of these from a body of its own (the control plane, its "
                  "controllers or the fleet make them, or the harness without padding), so their sizes are no "
                  "target it can meet")
SIZES_ALL_OTHERS = ("sizes not judged: every one of the original's is the control plane's (at bootstrap, with a "
                    "namespace) or its controllers', none one a replay makes")
OTHER_VERSION = ("captured on {original}, replayed on {replay}: the control plane's own objects (its bootstrap RBAC, "
                 "ServiceAccounts, APIServices) and the APIs it serves are its version's, so their counts, and "
                 "the watches of resources the replay's version does not serve, are no target a replay on another "
                 "version can meet: not judged (a rehearsal of an upgrade replays one capture on both versions)")
RATE_WITHIN = 0.10  # requests per second of a class, either side
RATE_FLOOR = 1.0  # per second, after scaling: a class below it is too rare to judge over a replay's window
WATCH_WITHIN = 0.05
REPLAYED_AT_LEAST = 0.95
ANY_CLASS = "(any)"  # a class key's client class where either profile does not know who sent its requests
EPSILON = 1e-9  # a bound is inclusive: 110 against 100 is within 10 %, floating point notwithstanding
WATCH_KEY = "open_at_end"
WATCH_FIGURE = ("open_at_end: the watches open as the window ended, the one figure both sources write of the same "
                "instant (from /metrics, the gauge at the second scrape; from an audit log, the watches whose open "
                "is in it and whose end is not)")
UNKNOWN_WATCHER = "whose watches they are is not known (/metrics): not judged at a scale other than 1"
UNKNOWN_WATCHERS = ("the original's watches are from /metrics, which does not say whose a watch is: the control "
                    "plane's own (held once whatever the cluster's size) cannot be told from the rest (× k), so "
                    "no expected count is known at a scale other than 1 (an audit log says it)")
AUDIT_WATCHES = ("an audit log's open_at_end misses a watch opened before the log began and still open at its "
                 "end: a log longer than the clients' watch timeouts (client-go's: 5 to 10 min) misses none")


@dataclass(frozen=True)
class Judged:
    """One figure judged: the original's (× k where it scales) beside the replay's, how far apart, the target."""

    original: float | None  # × k already (sizes: as they are)
    replay: float | None
    difference: float | None  # `relative`: replay / original - 1; else replay - original
    relative: bool
    target: str  # "exact", "within 10 %"
    verdict: str  # met | missed | not measured


def exact(original: float | None, replay: float | None) -> Judged:
    if original is None or replay is None:
        return Judged(original, replay, None, False, "exact", NOT_MEASURED)
    return Judged(original, replay, replay - original, False, "exact", MET if replay == original else MISSED)


def within(original: float | None, replay: float | None, bound: float) -> Judged:
    """Within `bound` of the original either side; an original of 0 is met only by a replay of 0."""
    target = f"within {bound * 100:g} %"
    if original is None or replay is None:
        return Judged(original, replay, None, True, target, NOT_MEASURED)
    if original == 0:
        return Judged(original, replay, None, True, target, MET if replay == 0 else MISSED)
    difference = replay / original - 1
    return Judged(original, replay, difference, True, target, MET if abs(difference) <= bound + EPSILON else MISSED)


@dataclass(frozen=True)
class KindFidelity:
    """A kind of the original: its count (exact) and its objects' size p50 and p99 (within 10 %)."""

    group: str
    kind: str
    resource: str
    count: Judged
    size_p50: Judged | None = None  # None: the original has no object of the kind to size
    size_p99: Judged | None = None
    note: str = ""  # why the replay may fall short (its controllers make the objects), or why not measured
    control_plane: int | None = None  # of the original's objects, made by the control plane at bootstrap: once
    size_note: str = ""  # which objects' sizes are compared, or why they are not judged


@dataclass(frozen=True)
class ReplayOnly:
    """A kind only the replay has (the harness's own, or one the original could not list): listed, not judged."""

    group: str
    kind: str
    resource: str
    count: int


@dataclass(frozen=True)
class ClassFidelity:
    """Requests per second of one class of the original that makes at least 1/s at × k (within 10 %)."""

    verb: str
    group: str
    resource: str
    subresource: str
    scope: str
    client_class: str  # ANY_CLASS: every class together, as one profile does not know who sent its requests
    per_second: Judged


@dataclass(frozen=True)
class WatchFidelity:
    """Watches open on one resource, every client together (within 5 %): expected, the control plane's own once
    (clients.runs_once: its components and the fake fleet's controller hold theirs whatever the cluster's size)
    and the rest × k."""

    group: str
    resource: str
    open: Judged
    control_plane: float | None = None  # of the original's, the control plane's own: once (None: not known)
    note: str = ""


@dataclass(frozen=True)
class ReplayedShare:
    """The original's requests, by count, in classes a replay on fake nodes makes (1 - not_replayable.share): at
    least 95 %; the rest listed by kind either way. `seen`: the share of the original's requests whose class the
    replay's traffic shows at all, beside it and not judged."""

    share: float | None
    target: str
    verdict: str
    rest: list[dict[str, Any]] = field(default_factory=list)  # the original's not_replayable.kinds
    seen: float | None = None


@dataclass
class Fidelity:
    """Every target's verdict of one replay against its original × `scale`."""

    scale: float
    kinds: list[KindFidelity]
    replay_only: list[ReplayOnly]
    classes: list[ClassFidelity] = field(default_factory=list)
    watches: list[WatchFidelity] = field(default_factory=list)
    replayed: ReplayedShare | None = None  # None: the original holds no traffic
    watch_figure: str = WATCH_FIGURE
    notes: list[str] = field(default_factory=list)

    def verdicts(self) -> list[str]:
        sizes = [j for k in self.kinds for j in (k.size_p50, k.size_p99) if j is not None]
        judged = [k.count for k in self.kinds] + sizes + [c.per_second for c in self.classes]
        return [j.verdict for j in judged + [w.open for w in self.watches]] + (
            [self.replayed.verdict] if self.replayed else [])

    def tally(self) -> dict[str, int]:
        found = self.verdicts()
        return {verdict: found.count(verdict) for verdict in VERDICTS}

    @property
    def passed(self) -> bool:
        """Every target measured and met (and at least one to judge): a missed or unmeasured one is no pass; a
        figure not judged (no target a replay controls) is neither."""
        found = [verdict for verdict in self.verdicts() if verdict != NOT_JUDGED]
        return bool(found) and all(verdict == MET for verdict in found)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "targets": self.tally(), **dataclasses.asdict(self)}


def _owner_note(kind: KindProfile) -> str:
    owned = kind.count - kind.without_owner
    if not kind.owners or owned <= 0:
        return ""
    return (f"{owned:,} of {kind.count:,} owned ({', '.join(sorted(kind.owners))}): their controllers make them in a "
            "replay, at × k only as far as they make them")


def _bootstrap_note(kind: KindProfile, scale: float) -> str:
    count = judged_count(kind)
    once = min(kind.control_plane or 0, count)
    if not once:
        return ""
    return (f"expected: {once:,} made by the control plane at bootstrap (once, whatever the cluster's size) + "
            f"{count - once:,} × {scale:g}")


def _harness_note(kind: KindProfile, side: str) -> str:
    """The load tester's own objects of a side's capture (capture/harness.py), said: they are taken off its count."""
    if not kind.harness:
        return ""
    return (f"{kind.harness:,} of the {side}'s are the load tester's own (its namespaces and what is in them, its "
            f"RBAC, its fleet's node Events): not counted")


def judged_count(kind: KindProfile) -> int:
    """A kind's count as judged: less the load tester's own objects (capture/harness.py), no part of the cluster."""
    return kind.count - min(kind.harness or 0, kind.count)


def not_judged(judged: Judged) -> Judged:
    """A figure with no target a replay controls: its figures kept, its verdict NOT_JUDGED where both measured."""
    if judged.verdict == NOT_MEASURED:
        return judged
    return dataclasses.replace(judged, target="none", verdict=NOT_JUDGED)


def _uncontrolled(judged: Judged, kind: KindProfile) -> Judged:
    """A count no replay controls (UNCONTROLLED)."""
    return not_judged(judged) if (kind.group, kind.kind) in UNCONTROLLED else judged


def _made(kind: KindProfile | None) -> Quantiles | None:
    """The sizes of the objects a replay makes, where the profile has them (made_size_bytes), else every
    object's (a profile captured before that figure)."""
    if kind is None or not kind.count:
        return None
    return kind.made_size_bytes if kind.made_size_bytes is not None else kind.size_bytes


def _sizes(kind: KindProfile, replay: KindProfile | None) -> tuple[Judged | None, Judged | None, str]:
    """Size p50 and p99 of the objects a replay makes of a kind it pads (PADDED_KINDS, custom resources), on
    both sides; of any other kind, or one whose every object the control plane or its controllers made, both
    sides' sizes of every object shown, not judged."""
    if not kind.count or not kind.size_bytes:
        return None, None, ""
    padded = (kind.group, kind.kind) in PADDED_KINDS or kind.crd is not None
    made = kind.made_size_bytes
    if padded and (made is None or made.count):
        wanted, found = _made(kind), _made(replay)
        judged = [within(getattr(wanted, q), getattr(found, q) if found else None, SIZE_WITHIN) for q in ("p50",
                                                                                                       "p99")]
        note = "" if made is None else (f"sizes of the objects a replay makes: {made.count:,} of the original's "
                                        f"{kind.count:,} (without an owner, made by neither the control plane nor "
                                        f"the load tester)")
        return judged[0], judged[1], "; ".join(n for n in (note, labels_note(replay)) if n)
    found = replay.size_bytes if replay is not None and replay.count else None
    judged = [not_judged(within(getattr(kind.size_bytes, q), getattr(found, q) if found else None, SIZE_WITHIN))
              for q in ("p50", "p99")]
    return judged[0], judged[1], SIZES_ALL_OTHERS if padded else SIZES_NOT_MADE


def labels_note(replay: KindProfile | None) -> str:
    """What the load tester's labels add to the replay's objects, left out of the sizes compared (the original's
    objects do not carry them), said with its bytes; "" where none carries them."""
    added = replay.harness_label_bytes if replay is not None else None
    if added is None or not added.count:
        return ""
    return (f"{added.count:,} of the replay's objects are sized without the load tester's labels (its run, scenario, "
            f"template and managed-by), which add {added.p50:,} bytes to each at p50 ({added.max:,} at most), their "
            "managedFields entries included; the original's objects do not carry them")


def minor(version: str) -> str:
    """A gitVersion's major and minor ("v1.37.2" -> "v1.37"): what a control plane's own objects follow."""
    return ".".join(version.split("+", 1)[0].split(".")[:2])


def other_version(original: Profile, replay: Profile) -> str:
    """OTHER_VERSION said, where the two captures are of control planes of different minor versions; else ""."""
    found, made = original.capture.server_version, replay.capture.server_version
    if not found or not made or minor(found) == minor(made):
        return ""
    return OTHER_VERSION.format(original=found, replay=made)


def _kind(kind: KindProfile, replay: Profile, scale: float, versions: str = "") -> KindFidelity:
    other = replay.kind(kind.kind, kind.group)
    notes = [UNCONTROLLED.get((kind.group, kind.kind), ""), _bootstrap_note(kind, scale), _owner_note(kind),
             _harness_note(kind, "original"), _harness_note(other, "replay") if other is not None else ""]
    if other is None:
        skipped = next((s for s in replay.skipped if (s.group, s.resource) == (kind.group, kind.resource)), None)
        notes.append(f"the replay's capture skipped it: {skipped.reason}" if skipped else
                     "the replay's cluster does not serve it")
    p50, p99, size_note = _sizes(kind, other)
    once = ONCE_KINDS.get((kind.group, kind.kind))
    expected = judged_count(kind) if once else expected_count(judged_count(kind), kind.control_plane, scale)
    if once:
        notes[1] = once  # in place of the bootstrap note: every object once
    count = exact(expected, judged_count(other) if other else None)
    if versions and (kind.control_plane or other is None):  # the control plane's own, or an API of another version
        count = dataclasses.replace(count, target="none", verdict=NOT_JUDGED)
        notes.append(versions)
        if other is None:
            p50, p99 = (dataclasses.replace(q, target="none", verdict=NOT_JUDGED) if q else q for q in (p50, p99))
    return KindFidelity(kind.group, kind.kind, kind.resource, _uncontrolled(count, kind), p50, p99,
                        note="; ".join(n for n in notes if n), control_plane=kind.control_plane, size_note=size_note)


def _kinds(original: Profile, replay: Profile, scale: float) -> tuple[list[KindFidelity], list[ReplayOnly]]:
    known = {(k.group, k.kind) for k in original.kinds}
    only = [ReplayOnly(k.group, k.kind, k.resource, judged_count(k)) for k in replay.kinds
            if (k.group, k.kind) not in known]
    versions = other_version(original, replay)
    return [_kind(kind, replay, scale, versions) for kind in original.kinds], only


def _rows(traffic: dict[str, Any] | None, section: str) -> list[dict[str, Any]] | None:
    """A traffic section's rows; None where the profile has no traffic or the section is not measured."""
    rows = traffic.get(section) if isinstance(traffic, dict) else None
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else None


def knows_classes(traffic: dict[str, Any] | None) -> bool:
    return isinstance(traffic, dict) and isinstance(traffic.get("client_classes"), list)


ClassKey = tuple[str, str, str, str, str, str]


def _summed(pairs: Iterable[tuple[Any, float | None]]) -> dict[Any, float | None]:
    """Values summed per key; a key any of whose values is missing has none (a part not measured)."""
    out: dict[Any, float | None] = {}
    for key, value in pairs:
        before = out.get(key, 0.0)
        out[key] = None if before is None or value is None else before + value
    return out


def class_rates(traffic: dict[str, Any] | None, by_class: bool,
                figure: str = "per_second") -> dict[ClassKey, float | None] | None:
    """Requests per second (or in all: `figure` "count") per class key, over products, codes, components and
    paths; None when the profile has no rates, or (per second) its window spans no time."""
    rows = _rows(traffic, "rates")
    window = (traffic or {}).get("window")
    seconds = window.get("seconds") if isinstance(window, dict) else None
    if rows is None or (figure == "per_second" and not (isinstance(seconds, int | float) and seconds > 0)):
        return None
    return _summed(((str(r.get("verb", "")), str(r.get("group", "")), str(r.get("resource", "")),
                     str(r.get("subresource", "")), str(r.get("scope", "")),
                     _client(r) if by_class else ANY_CLASS), r.get(figure)) for r in rows)


def _client(row: dict[str, Any]) -> str:
    """A rate row's client class, the control plane's components one class whichever credential they send with
    (kube-controller-manager's controllers each use a ServiceAccount of their own), as a replay compiles them."""
    return CONTROLLER if row.get("product") in CONTROL_PLANE_PRODUCTS else str(row.get("client_class"))


def _classes(original: dict[str, Any], replay: dict[str, Any] | None, scale: float,
             by_class: bool) -> list[ClassFidelity]:
    """The original's classes of at least RATE_FLOOR at × k (and those whose rate is not measured, which might
    be), each against the replay's rate: 0 where the replay's measured window has no request of the class."""
    rates = class_rates(original, by_class) or dict.fromkeys(class_rates(original, by_class, "count") or {})
    found = class_rates(replay, by_class)
    rows = []
    for key, rate in rates.items():
        expected = None if rate is None else rate * scale
        if expected is not None and expected < RATE_FLOOR:
            continue
        seen = None if found is None else found.get(key, 0.0)
        judged = within(expected, seen, RATE_WITHIN)
        rows.append(ClassFidelity(*key, per_second=not_judged(judged) if key[-1] == CONTROLLER else judged))
    return sorted(rows, key=lambda row: (row.per_second.original is None, -(row.per_second.original or 0)))


def open_watches(traffic: dict[str, Any] | None) -> dict[tuple[str, str], float | None] | None:
    """WATCH_KEY per (group, resource), every client together; None when the profile has no watches."""
    rows = _rows(traffic, "watches")
    if rows is None:
        return None
    return _summed(((str(r.get("group", "")), str(r.get("resource", ""))), r.get(WATCH_KEY)) for r in rows)


def once_watches(traffic: dict[str, Any] | None) -> dict[tuple[str, str], float | None] | None:
    """WATCH_KEY per (group, resource) of the clients a cluster holds one of whatever its size (clients.runs_once);
    None where the source does not say whose a watch is (/metrics)."""
    if not knows_classes(traffic):
        return None
    return _summed(((str(r.get("group", "")), str(r.get("resource", ""))), r.get(WATCH_KEY))
                   for r in _rows(traffic, "watches") or [] if runs_once(r.get("client_class"), r.get("product")))


def _expected_watches(held: float | None, once: float | None, scale: float) -> float | None:
    """The control plane's own watches once, the rest × k."""
    if held is None or once is None:
        return None
    return once + (held - once) * scale


def _watches(original: dict[str, Any], replay: dict[str, Any] | None, scale: float,
             unserved: frozenset[tuple[str, str]] = frozenset(), versions: str = "") -> list[WatchFidelity]:
    """Each resource's watches against the original's × k; those of a resource the replay's control plane, of
    another version (`versions`), does not serve (`unserved`) not judged."""
    found = open_watches(replay)
    once = once_watches(original)
    rows = []
    for (group, resource), held in (open_watches(original) or {}).items():
        seen = None if found is None else found.get((group, resource), 0)
        if once is None:  # whose they are is not known: at a scale other than 1, the once and the × k neither
            judged = within(None if held is None else held * scale, seen, WATCH_WITHIN)
            unknown = scale != 1 and judged.verdict != NOT_MEASURED
            rows.append(WatchFidelity(group, resource, not_judged(judged) if unknown else judged, None,
                                      UNKNOWN_WATCHER if unknown else ""))
            continue
        own = once.get((group, resource)) or 0.0
        note = f"expected: {own:g} the control plane's own (once) + {(held or 0) - own:g} × {scale:g}" if own else ""
        judged = within(_expected_watches(held, own, scale), seen, WATCH_WITHIN)
        if versions and (group, resource) in unserved:
            judged, note = not_judged(judged), versions
        rows.append(WatchFidelity(group, resource, judged, own, note))
    return sorted(rows, key=lambda row: (-(row.open.original or 0), row.group, row.resource))


def _replayed(original: dict[str, Any], replay: dict[str, Any] | None, by_class: bool) -> ReplayedShare:
    section = original.get("not_replayable")
    section = section if isinstance(section, dict) else {}
    unplayable = section.get("share")
    share = None if unplayable is None else round(1 - unplayable, 4)
    verdict = NOT_MEASURED if share is None else MET if share >= REPLAYED_AT_LEAST - EPSILON else MISSED
    rest = [dict(row) for row in section.get("kinds") or [] if isinstance(row, dict)]
    counts = class_rates(original, by_class, "count") or {}
    found = class_rates(replay, by_class, "count")
    total = sum(n for n in counts.values() if n)
    seen = None if found is None or not total else round(
        sum(n for key, n in counts.items() if n and (found.get(key) or 0) > 0) / total, 4)
    return ReplayedShare(share, f"at least {REPLAYED_AT_LEAST * 100:g} %", verdict, rest, seen)


def _traffic_notes(original: dict[str, Any], replay: dict[str, Any] | None, by_class: bool) -> list[str]:
    notes = []
    if replay is None:
        notes.append("the replay's profile holds no traffic (capture it with --audit-log or --window): its rates "
                     "and watches are not measured")
    elif not by_class:
        unknown = "the original's" if not knows_classes(original) else "the replay's"
        notes.append(f"{unknown} client classes are unknown (/metrics does not say who sent a request): rates are "
                     f"compared per verb, resource, subresource and scope, every client class together "
                     f"(by {ANY_CLASS})")
    if any((t or {}).get("source") == AUDIT_SOURCE for t in (original, replay)):
        notes.append(AUDIT_WATCHES)
    return notes


def compare(original: Profile, replay: Profile, scale: float) -> Fidelity:
    """The replay's profile judged against the original's × `scale` (validated: a positive finite number)."""
    scale = check_scale(scale, "scale")
    kinds, only = _kinds(original, replay, scale)
    fidelity = Fidelity(scale, kinds, only)
    versions = other_version(original, replay)
    if versions:
        fidelity.notes.append(versions)
    wanted = original.traffic if isinstance(original.traffic, dict) else None
    if wanted is None:
        fidelity.notes.append("the original holds no traffic: only its objects are compared")
        return fidelity
    found = replay.traffic if isinstance(replay.traffic, dict) else None
    by_class = knows_classes(wanted) and (found is None or knows_classes(found))
    fidelity.classes = _classes(wanted, found, scale, by_class)
    served = {(k.group, k.resource) for k in replay.kinds} | {(s.group, s.resource) for s in replay.skipped}
    fidelity.watches = _watches(wanted, found, scale, frozenset((k.group, k.resource) for k in original.kinds
                                                                if (k.group, k.resource) not in served), versions)
    if any(c.client_class == CONTROLLER for c in fidelity.classes):
        fidelity.notes.append(CONTROL_PLANE_RATES)
    if any(w.note == UNKNOWN_WATCHER for w in fidelity.watches):
        fidelity.notes.append(UNKNOWN_WATCHERS)
    fidelity.replayed = _replayed(wanted, found, by_class)
    fidelity.notes.extend(_traffic_notes(wanted, found, by_class))
    return fidelity
