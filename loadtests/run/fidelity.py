"""How faithful a replay was, measured in its own run: at the window's close, the replaying cluster is captured as
`loadtest capture` captures any cluster (its objects with GETs and LISTs; its traffic over the window from the
window's own apiserver scrapes, or its audit log) and compared with the original profile × k (capture/compare.py).

The harness's own objects (its namespaces and what is in them, the watch-delay probe's ConfigMaps among them, its
RBAC, its fleet's node Events: capture/harness.py) are counted apart by the capture, listed beside the comparison
and not judged. The capture is made after the window closed, so none of its requests is in
the window's traffic.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from loadtests.analysis.metrics import Snapshot
from loadtests.analysis.server import REQUESTS
from loadtests.capture.audit_events import read_events
from loadtests.capture.audit_tally import ENDS, STARTED
from loadtests.capture.compare import compare
from loadtests.capture.harness import HARNESS_USER_AGENTS
from loadtests.capture.profile import Profile, load
from loadtests.capture.take import USER_AGENT, take
from loadtests.capture.traffic import (
    LONGRUNNING,
    METRICS_SOURCE,
    TrafficProfile,
    WatchLoad,
    traffic_from_audit,
    traffic_from_metrics,
)
from loadtests.config.plan import Plan
from loadtests.config.workload import NotReplayed, ReplaySettings, TrafficNotReplayed
from loadtests.controlplane.base import TargetInfo
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.results.fidelity import (
    HarnessKind,
    NotReplayedKind,
    NotReplayedRequests,
    RatesWindow,
    ReplayFidelity,
)

# the apiserver metric families the window's scrapes keep for the replay's traffic (rates, watches open)
FAMILIES = frozenset({REQUESTS, LONGRUNNING})
HARNESS_NAMESPACES = objects.NAMESPACES
AUDIT_SOURCE = ("apiserver audit log, the window's events (rates, by client class); watches open at the window's "
                f"close from its end scrape ({LONGRUNNING})")
AUDIT_WATCHES = ("watches from the window's end scrape, not the audit log: the load's watches open before the window "
                 "does, so the window's part of the log does not see them open; the harness's own (its health "
                 "watch's, its fleet's, its probes', by their user agents in the whole log) taken off")


@dataclasses.dataclass(frozen=True)
class Window:
    """The measured window as the probes saw it: its two apiserver scrapes and its wall-clock ends."""

    start: Snapshot | None
    end: Snapshot | None
    opened_at: float | None = None  # epoch seconds
    closed_at: float | None = None


def profile_path(plan: Plan) -> Path:
    """The original profile, as the plan's `replay.profile` names it: an absolute path as it is, else beside the
    plan's own file (where the replay's compiler found it), else as given."""
    assert plan.replay is not None
    named = Path(plan.replay.profile)
    if named.is_absolute() or not plan.source:
        return named
    beside = Path(plan.source).parent / named
    return beside if beside.exists() or not named.exists() else named


def not_replayed(settings: ReplaySettings, original: Profile | None) -> list[NotReplayedKind]:
    """The plan's kinds not replayed, each with its share of the original's objects of the kind."""
    rows = []
    for left in settings.not_replayed:
        if not isinstance(left, NotReplayed):
            continue
        kind = original.kind(left.kind, left.group) if original is not None else None
        share = round(left.count / kind.count, 4) if kind is not None and kind.count else None
        rows.append(NotReplayedKind(left.kind, left.group, left.count, left.reason, share))
    return rows


def requests_not_replayed(settings: ReplaySettings) -> list[NotReplayedRequests]:
    """The plan's captured requests not sent, each with its share of the original's requests."""
    return [NotReplayedRequests(left.what, left.requests, left.share, left.reason)
            for left in settings.not_replayed if isinstance(left, TrafficNotReplayed)]


def harness_kinds(captured: Profile) -> list[HarnessKind]:
    """The load tester's own objects of each kind the capture found (capture/harness.py: its namespaces and what is
    in them, its RBAC, its fleet's node Events): the comparison does not count them (compare.judged_count)."""
    return [HarnessKind(kind.group, kind.kind, kind.resource, kind.harness) for kind in captured.kinds if kind.harness]


def harness_watches(audit_logs: list[Path], until: float) -> dict[tuple[str, str], int]:
    """The harness's own watches (its fleet's, its health watch's, its probes': capture/harness.py's user agents)
    open at `until`, per (group, resource), from the whole of one apiserver's audit log: they are no part of the
    cluster replayed, as its own objects are not."""
    opened: dict[str, tuple[str, str]] = {}
    for event in read_events(audit_logs, []):
        if event.at > until or event.verb != "watch" or not event.user_agent.startswith(HARNESS_USER_AGENTS):
            continue
        if event.stage == STARTED:
            opened[event.audit_id] = (event.group, event.resource)
        elif event.stage in ENDS:
            opened.pop(event.audit_id, None)
    return dict(collections.Counter(opened.values()))


def _without(watches: list[WatchLoad], harness: dict[tuple[str, str], int]) -> list[WatchLoad]:
    """The end scrape's watches less the harness's own (never below 0)."""
    return [dataclasses.replace(w, open_at_end=max(0, w.open_at_end - harness.get((w.group, w.resource), 0)))
            if w.open_at_end is not None else w for w in watches]


def window_traffic(window: Window, audit_logs: list[Path], salt: bytes) -> tuple[TrafficProfile | None, str, str]:
    """The replay's traffic over the window, where it came from, and a note ("" none): from one apiserver's audit
    log (the window's events: client classes known) with the watches of the end scrape less the harness's own
    (the log says whose), else from the window's two scrapes (the harness's watches among theirs); None without
    both scrapes."""
    start, end = window.start, window.end
    if start is None or end is None:
        return None, "", "the window's apiserver scrapes are missing: the replay's traffic is not measured"
    metrics = traffic_from_metrics(start, end, end.taken_at - start.taken_at)
    if len(audit_logs) != 1 or window.opened_at is None or window.closed_at is None:
        why = f"{len(audit_logs)} apiservers' audit logs (the window's rates are taken from one)" if audit_logs \
            else "no audit log"
        return metrics, METRICS_SOURCE, (f"traffic from the window's /metrics scrapes: {why}; the harness's own "
                                         "watches (its health watch's, its fleet's) are counted among the replay's")
    audit = traffic_from_audit(audit_logs, salt, between=(window.opened_at, window.closed_at))
    watches = _without(metrics.watches, harness_watches(audit_logs, window.closed_at))
    return dataclasses.replace(audit, watches=watches, notes=[*audit.notes, AUDIT_WATCHES]), AUDIT_SOURCE, ""


def rates_window(traffic: TrafficProfile | None) -> RatesWindow | None:
    """The part of the window the replay's rates cover, from its audit log's capture (None: not from one)."""
    rounds = traffic.rounds if traffic is not None else None
    if rounds is None:
        return None
    return RatesWindow(round(rounds.given_s, 3), round(rounds.kept_s, 3),
                       None if rounds.period_s is None else round(rounds.period_s, 3), rounds.why)


def _failed(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= 300 else text[:297] + "..."


def measure_fidelity(plan: Plan, info: TargetInfo, window: Window,
                     say: Callable[[str], None] = lambda _line: None) -> ReplayFidelity:
    """The replaying cluster captured now and compared with the plan's original × its scale; what could not be
    captured or compared is said in `error` (every target then "not measured"), never raised."""
    settings = plan.replay
    assert settings is not None, "only a replay's step measures its fidelity"
    found = ReplayFidelity(settings.profile, settings.scale, harness_namespaces=list(HARNESS_NAMESPACES))
    path = profile_path(plan)
    try:
        original = load(path)
        found.profile_path = str(path)
    except Exception as error:  # noqa: BLE001 - a replay whose original is gone still has its run
        found.error, found.not_replayed = f"the original profile: {_failed(error)}", not_replayed(settings, None)
        found.not_replayed_requests = requests_not_replayed(settings)
        return found
    found.not_replayed = not_replayed(settings, original)
    found.not_replayed_requests = requests_not_replayed(settings)
    salt = os.urandom(16)  # this capture's own: its hashes group, and match no other's
    client = RestClient(info.access, user_agent=USER_AGENT, timeout_s=60.0)
    try:
        captured = take(client, salt=salt, progress=say, reset_peak=False)  # the run measures its own peak
        found.capture_s, found.objects_read = captured.capture.seconds, captured.capture.objects_read
        found.harness = harness_kinds(captured)
        traffic, found.traffic_source, note = window_traffic(window, info.audit_logs, salt)
        found.notes += [note] if note else []
        found.rates_window = rates_window(traffic)
        captured.traffic = traffic.to_dict() if traffic is not None else None
        found.notes.append("the harness's own objects (its namespaces and what is in them, its RBAC, its fleet's "
                           "node Events) are taken off the replay's counts before they are judged; their sizes "
                           "stay in the size quantiles")
        found.compared = compare(original, captured, settings.scale).to_dict()
    except Exception as error:  # noqa: BLE001 - one line in the results, the run's other figures kept
        found.error = f"the replay's capture: {_failed(error)}"
    finally:
        client.close()
    return found
