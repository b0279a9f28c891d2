"""The multiple k a profile is replayed and judged at, and a count at × k: one rule for the replay's plan and for
the comparison of its capture, so that "exact" means the same number on both sides."""

from __future__ import annotations

import math

from loadtests.errors import LoadTestError


def check_scale(value: object, where: str = "--scale") -> float:
    """k as a float: a positive finite number (or its text), else refused in one line naming `where`."""
    try:
        scale = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else math.nan
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and scale > 0):
        raise LoadTestError(f"{where}: the scale must be a positive finite number, the multiple of the original a "
                            f"replay makes, e.g. 1, 2 or 0.5 (got {value!r})")
    return scale


def scaled_count(count: int, scale: float) -> int:
    """Objects of a kind at × k: the nearest whole number, a half rounded up (3 × 1.5 is 5)."""
    return math.floor(count * scale + 0.5)


def expected_count(count: int, control_plane: int | None, scale: float) -> int:
    """A kind's objects at × k: those the control plane made at bootstrap once (a cluster of any size has one set
    of them), the rest × k; without the figure (a profile captured before it), every object × k."""
    if control_plane is None:
        return scaled_count(count, scale)
    once = max(0, min(control_plane, count))
    return once + scaled_count(count - once, scale)
