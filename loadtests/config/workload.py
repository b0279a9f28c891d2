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
class ReplaySettings:
    """A plan compiled from a profile: the profile (its file name), the scale, and the objects left out."""

    profile: str
    scale: float
    not_replayed: tuple[NotReplayed, ...] = field(default_factory=tuple)
    # the traffic of the profile is not replayed by this plan yet: its load scenarios are empty
    traffic: str = "not replayed"

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "scale": self.scale, "traffic": self.traffic,
                "not_replayed": [asdict(n) for n in self.not_replayed]}


def parse(source: str, value: Any) -> ReplaySettings | None:
    """The `replay:` section (written by the replay's compiler; checked as every section is)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"profile", "scale", "not_replayed", "traffic"}:
        raise PlanError(f"{source}: replay: must be a mapping of profile, scale, not_replayed, traffic "
                        f"(got {value!r:.80})")
    scale = value.get("scale")
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0:
        raise PlanError(f"{source}: replay.scale: must be a positive finite number (got {scale!r})")
    rows = value.get("not_replayed") or []
    if not isinstance(rows, list) or not all(isinstance(r, dict) and set(r) == {"kind", "group", "count", "reason"}
                                             for r in rows):
        raise PlanError(f"{source}: replay.not_replayed: must be a list of {{kind, group, count, reason}}")
    return ReplaySettings(str(value.get("profile", "")), float(scale),
                          tuple(NotReplayed(str(r["kind"]), str(r["group"]), int(r["count"]), str(r["reason"]))
                                for r in rows), str(value.get("traffic", "not replayed")))
