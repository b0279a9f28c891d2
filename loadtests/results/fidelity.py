"""The replay's fidelity section of a step (run/fidelity.py): a step of a plan compiled from a captured profile
captures its own cluster at the window's close and compares that with the original × k (capture/compare.py).

Step keys (results.json):

    replay_fidelity: ReplayFidelity or null (a step of a plan that is no replay; older files): the original
        profile (as the plan names it, and the file read), the scale k, where the replay's traffic came from
        (traffic_source: the window's audit log or its two apiserver /metrics scrapes; "" not measured), the
        capture's own cost (capture_s, objects_read), the objects of each kind the harness made itself (harness:
        its namespaces and what is in them, its RBAC, its fleet's node Events; capture/harness.py; not counted in
        the comparison), the plan's kinds not replayed with their share of the original's objects of the kind,
        and `compared`: capture/compare.py's Fidelity.to_dict() (every figure and its verdict: met, missed, not
        measured, or not judged where no replay controls it, Events' count); `error` says why the capture or the
        comparison could not be made (then compared is null and every target is "not measured"); `rates_window`:
        the seconds of the window the replay's rates cover (whole renewal periods of its nodes' Leases), of those
        measured, and why (null: the traffic not from the audit log)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class HarnessKind:
    """Objects of one kind the harness made itself at the window's close (capture/harness.py: its namespaces and
    what is in them, its RBAC, its fleet's node Events): taken off the replay's count before it is judged, listed
    so a reader sees what of the cluster was the harness's."""

    group: str
    kind: str
    resource: str
    count: int


@dataclass
class NotReplayedKind:
    """A kind of the original the plan does not make (its `replay.not_replayed`), and why."""

    kind: str
    group: str
    count: int  # the original's objects left out (not × k)
    reason: str
    share: float | None = None  # of the original's objects of the kind; None: the original holds none


@dataclass(frozen=True)
class NotReplayedRequests:
    """Captured requests of one kind the replay does not send (its plan's `replay.not_replayed`), and why."""

    what: str  # verb and resource, or verb and path
    requests: int  # the original's, not × k
    share: float | None  # of all the original's requests
    reason: str


@dataclass
class RatesWindow:
    """The part of the measured window the replay's rates cover: whole renewal periods of its nodes' Leases, which
    renew in rounds, so that a window of any length counts each round once (capture/traffic.renewal_window)."""

    window_s: float  # the window as measured, opened to closed
    kept_s: float  # the rates' own window, within it
    period_s: float | None  # the nodes' Lease renewal period; None: no Lease renewed in it, the window kept whole
    why: str


@dataclass
class ReplayFidelity:
    """The replaying cluster captured at the window's close, compared with the original profile × scale."""

    profile: str  # the original's profile as the plan names it
    scale: float
    profile_path: str = ""  # the file read ("": not found)
    traffic_source: str = ""  # "": the replay's traffic not measured
    capture_s: float | None = None  # the replay's capture of its objects (GETs and LISTs), after the window
    objects_read: int = 0
    harness_namespaces: list[str] = field(default_factory=list)
    harness: list[HarnessKind] = field(default_factory=list)
    not_replayed: list[NotReplayedKind] = field(default_factory=list)
    compared: dict[str, Any] | None = None  # capture/compare.py Fidelity.to_dict(); None: not compared
    error: str = ""  # why not compared, in one line
    notes: list[str] = field(default_factory=list)
    not_replayed_requests: list[NotReplayedRequests] = field(default_factory=list)  # the plan's traffic rows
    rates_window: RatesWindow | None = None  # None: not from an audit log (or an older file)


@dataclass
class FidelitySection:
    """How faithful a replay was, measured in its own window (None: the step replays no profile)."""

    replay_fidelity: ReplayFidelity | None = None
