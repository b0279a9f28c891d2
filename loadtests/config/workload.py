"""The plan's `replay:` section: what a plan compiled from a captured profile (capture/replay.py) says of itself,
so the run's results (which keep the plan) can say what was replayed, at which scale, and what was not, and why."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from loadtests.errors import PlanError


@dataclass(frozen=True)
class NotReplayed:
    """Objects of one kind of the profile the replay does not make, and why."""

    kind: str
    group: str
    count: int  # objects of the profile left out, at the profile's own scale (not × scale)
    reason: str


@dataclass(frozen=True)
class TrafficNotReplayed:
    """Captured requests of one kind the replay does not send, their share of all captured requests, and why."""

    what: str  # verb and resource ("get pods/log"), or verb and path of a request to no resource
    requests: int  # at the profile's own scale
    share: float | None
    reason: str


@dataclass(frozen=True)
class HeldWatches:
    """Watches the original's control plane held on a resource the replay installs (a custom resource's): the
    replaying cluster's components open theirs only once they find the new resource in discovery, and the run
    waits until they have, so the window sees them as the original's did."""

    group: str
    resource: str
    open: int


@dataclass(frozen=True)
class ReplaySettings:
    """A plan compiled from a profile: the profile (its file name), the scale, and the objects left out."""

    profile: str
    scale: float
    not_replayed: tuple[NotReplayed | TrafficNotReplayed, ...] = field(default_factory=tuple)
    # how the traffic is replayed ("replayed: the window's mean mix", "replayed: the captured per-minute curve
    # (timeline) ..."; "not replayed": the profile has none)
    traffic: str = "not replayed"
    requests: int | None = None  # captured requests in the profile's window
    replayed_share: float | None = None  # of them, in classes the replay sends (the fleet's heartbeats included)
    control_plane_watches: tuple[HeldWatches, ...] = ()  # on the resources it installs, waited for before a window

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"profile": self.profile, "scale": self.scale, "traffic": self.traffic,
                               "not_replayed": [asdict(n) for n in self.not_replayed]}
        if self.requests is not None:
            out.update(requests=self.requests, replayed_share=self.replayed_share)
        if self.control_plane_watches:
            out["control_plane_watches"] = [asdict(w) for w in self.control_plane_watches]
        return out


def parse(source: str, value: Any) -> ReplaySettings | None:
    """The `replay:` section (written by the replay's compiler; checked as every section is)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"profile", "scale", "not_replayed", "traffic", "requests",
                                                    "replayed_share", "control_plane_watches"}:
        raise PlanError(f"{source}: replay: must be a mapping of profile, scale, not_replayed, traffic, requests, "
                        f"replayed_share, control_plane_watches (got {value!r:.80})")
    scale = value.get("scale")
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0:
        raise PlanError(f"{source}: replay.scale: must be a positive finite number (got {scale!r})")
    rows = value.get("not_replayed") or []
    if not isinstance(rows, list) or not all(isinstance(r, dict) and set(r) in (OBJECT_ROW, TRAFFIC_ROW)
                                             for r in rows):
        raise PlanError(f"{source}: replay.not_replayed: must be a list of {{kind, group, count, reason}} (objects) "
                        "or {what, requests, share, reason} (traffic)")
    share = value.get("replayed_share")
    return ReplaySettings(str(value.get("profile", "")), float(scale), tuple(_not_replayed(r) for r in rows),
                          str(value.get("traffic", "not replayed")),
                          None if value.get("requests") is None else int(value["requests"]),
                          None if share is None else float(share),
                          _held(source, value.get("control_plane_watches") or []))


def _held(source: str, rows: Any) -> tuple[HeldWatches, ...]:
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and set(r) == HELD_ROW and isinstance(r["open"], int) and not isinstance(
                r["open"], bool) and r["open"] >= 0 for r in rows):
        raise PlanError(f"{source}: replay.control_plane_watches: must be a list of {{group, resource, open}}, open a "
                        "whole number of watches")
    return tuple(HeldWatches(str(r["group"]), str(r["resource"]), r["open"]) for r in rows)


OBJECT_ROW = {"kind", "group", "count", "reason"}
TRAFFIC_ROW = {"what", "requests", "share", "reason"}
HELD_ROW = {"group", "resource", "open"}


def _not_replayed(row: dict[str, Any]) -> NotReplayed | TrafficNotReplayed:
    if set(row) == OBJECT_ROW:
        return NotReplayed(str(row["kind"]), str(row["group"]), int(row["count"]), str(row["reason"]))
    share = row["share"]
    return TrafficNotReplayed(str(row["what"]), int(row["requests"]), None if share is None else float(share),
                              str(row["reason"]))
