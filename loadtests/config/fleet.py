"""The plan's `fleet:` section: the fake nodes' shapes (capacity, allocatable, taints, label count), so a fleet can
look like a captured cluster's (capture/replay.py) instead of every node being the bundled template's.

Shapes are weights: node i of a step takes the i-th shape of a smooth weighted round-robin over them, so any
node count holds each shape in its proportion (exactly, when the count is the shapes' sum) and a growing step
keeps the shapes its first nodes had."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from loadtests.errors import PlanError

RESOURCES = ("cpu", "memory", "pods")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_LABELS = 1000  # labels per node: far beyond any real node's, small enough to stay a typo's guard
# a Kubernetes quantity: a number with an optional suffix (binary, decimal or exponent)
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
# a taint key: a qualified name with an optional DNS prefix (its validation, loosely)
_TAINT_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Shape:
    """Nodes alike: `count` of them (a weight among the shapes), their status figures, taints and labels."""

    count: int
    capacity: dict[str, str] = field(default_factory=dict)  # cpu, memory, pods; absent: the template's
    allocatable: dict[str, str] = field(default_factory=dict)
    taints: tuple[tuple[str, str], ...] = ()  # (key, effect), besides the fake nodes' own taint
    labels: int = 0  # labels per node in all (the harness's own count; 0: the template's only)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "capacity": dict(self.capacity), "allocatable": dict(self.allocatable),
                "taints": [{"key": key, "effect": effect} for key, effect in self.taints], "labels": self.labels}


@dataclass(frozen=True)
class FleetShapes:
    """The fleet's shapes; none: every node is the template's."""

    shapes: tuple[Shape, ...] = ()

    def of(self, index: int) -> Shape | None:
        """The shape of the fleet's index-th node."""
        return self.shapes[_order(tuple(s.count for s in self.shapes))[index % self._period]] if self.shapes else None

    @property
    def _period(self) -> int:
        return sum(s.count for s in self.shapes)

    @property
    def taints(self) -> tuple[tuple[str, str], ...]:
        """Every taint of any shape, once (the fleet's pods tolerate them)."""
        return tuple(dict.fromkeys(t for s in self.shapes for t in s.taints))

    def to_dict(self) -> dict[str, Any]:
        return {"shapes": [s.to_dict() for s in self.shapes]}


@functools.lru_cache(maxsize=16)
def _order(weights: tuple[int, ...]) -> tuple[int, ...]:
    """Smooth weighted round-robin: each weight's index `weight` times in one period, as evenly spread as can be."""
    current = [0] * len(weights)
    total, order = sum(weights), []
    for _ in range(total):
        current = [c + w for c, w in zip(current, weights, strict=True)]
        best = max(range(len(weights)), key=lambda i: current[i])
        current[best] -= total
        order.append(best)
    return tuple(order)


MAX_PERIOD = 1_000_000  # the shapes' counts together: one period of the round-robin is held in memory


def parse(source: str, value: Any) -> FleetShapes:
    """The `fleet:` section, each shape checked; PlanError naming the field otherwise."""
    if value is None:
        return FleetShapes()
    if not isinstance(value, dict) or set(value) - {"shapes"}:
        raise PlanError(f"{source}: fleet: must be a mapping with `shapes` only (got {value!r:.80})")
    shapes = value.get("shapes") or []
    if not isinstance(shapes, list):
        raise PlanError(f"{source}: fleet.shapes: must be a list of shapes (got {type(shapes).__name__})")
    found = FleetShapes(tuple(_shape(source, f"fleet.shapes[{i}]", raw) for i, raw in enumerate(shapes)))
    if found._period > MAX_PERIOD:
        raise PlanError(f"{source}: fleet.shapes: the counts add up to {found._period:,}, more than {MAX_PERIOD:,}; "
                        "they are weights: give smaller ones in the same proportion")
    return found


def _shape(source: str, path: str, raw: Any) -> Shape:
    known = {"count", "capacity", "allocatable", "taints", "labels"}
    if not isinstance(raw, dict) or set(raw) - known or "count" not in raw:
        raise PlanError(f"{source}: {path}: must be a mapping with `count` and any of capacity, allocatable, taints, "
                        f"labels (got {raw!r:.80})")
    count, labels = raw["count"], raw.get("labels", 0)
    for name, number, least in (("count", count, 1), ("labels", labels, 0)):
        if isinstance(number, bool) or not isinstance(number, int) or not least <= number <= MAX_PERIOD:
            raise PlanError(f"{source}: {path}.{name}: must be an integer >= {least} (got {number!r})")
    if labels > MAX_LABELS:
        raise PlanError(f"{source}: {path}.labels: must be at most {MAX_LABELS} (got {labels})")
    return Shape(count, _resources(source, f"{path}.capacity", raw.get("capacity")),
                 _resources(source, f"{path}.allocatable", raw.get("allocatable")),
                 _taints(source, f"{path}.taints", raw.get("taints")), labels)


def _resources(source: str, path: str, value: Any) -> dict[str, str]:
    value = value or {}
    if not isinstance(value, dict) or set(value) - set(RESOURCES):
        raise PlanError(f"{source}: {path}: must map {', '.join(RESOURCES)} to quantities (got {value!r:.80})")
    for name, quantity in value.items():
        if isinstance(quantity, bool) or not _QUANTITY.match(str(quantity)):
            raise PlanError(f"{source}: {path}.{name}: not a quantity (got {quantity!r}; e.g. 4, 3500m, 16Gi)")
    return {name: str(quantity) for name, quantity in value.items()}


def _taints(source: str, path: str, value: Any) -> tuple[tuple[str, str], ...]:
    value = value or []
    if not isinstance(value, list):
        raise PlanError(f"{source}: {path}: must be a list of {{key, effect}} (got {type(value).__name__})")
    found = []
    for i, taint in enumerate(value):
        if not isinstance(taint, dict) or set(taint) != {"key", "effect"}:
            raise PlanError(f"{source}: {path}[{i}]: must be a mapping of `key` and `effect` (got {taint!r:.80})")
        if not isinstance(taint["key"], str) or not _TAINT_KEY.match(taint["key"]):
            raise PlanError(f"{source}: {path}[{i}].key: not a taint key (got {taint['key']!r})")
        if taint["effect"] not in EFFECTS:
            raise PlanError(f"{source}: {path}[{i}].effect: must be one of {', '.join(EFFECTS)} "
                            f"(got {taint['effect']!r})")
        found.append((taint["key"], taint["effect"]))
    return tuple(found)
