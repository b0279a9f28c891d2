"""Numbers in words for people: latencies, sizes, counts and percentages, in the one style every page and
every verdict sentence uses (a missing figure is "—", never 0)."""

from __future__ import annotations

import math


def duration(seconds: float | None) -> str:
    """A latency for people: `850 µs`, `12.3 ms`, `1.24 s`."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    if seconds < 0.001:
        return f"{seconds * 1e6:,.0f} µs"
    if seconds < 1:
        return f"{seconds * 1000:,.1f} ms"
    if seconds < 120:
        return f"{seconds:,.2f} s"
    return f"{seconds / 60:,.1f} min"


def bounded(seconds: float | None, bound: str = "") -> str:
    """A latency that may be only a bound of a histogram quantile: `< 50.0 ms`, `> 60.00 s`."""
    shown = duration(seconds)
    return f"{bound} {shown}" if bound and seconds is not None else shown


def millis(ms: float | None) -> str:
    return "—" if ms is None else duration(ms / 1000.0)


def size(nbytes: float | None) -> str:
    if nbytes is None:
        return "—"
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} TiB"


def number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer() and digits == 0 and abs(value) < 100:
        digits = 2
    return f"{value:,.{digits}f}"


def percent(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f} %"


def in_unit(value: float | None, unit: str) -> str:
    """A figure in the base unit of its chart (see figures.CHARTS)."""
    return {"s": duration, "ms": millis, "bytes": size, "%": percent, "percent": percent}.get(unit, number)(value)


def times(effect: float | None, prefix: str = "") -> str:
    """An effect as a factor: ×2.41, ×∞ (only the fix measured zero), — (not measured); `prefix` "≥ " or "≤ "
    where a histogram bound says only how large it is at least or at most."""
    if effect is None:
        return "—"
    return "×∞" if math.isinf(effect) else f"{prefix}×{effect:.2f}"


def first_few(items: list[str], shown: int = 3, sep: str = "; ") -> str:
    """The first `shown` items and how many more: "a; b; c and 4 more", for a line that must stay one line."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return sep.join(items[:shown]) + more
