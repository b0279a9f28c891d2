"""A query over one step's results: the three ways a lesson reads a figure from a measured step, and nothing
else (no runs, no verdicts: lesson_runs.py reads the runs, judge.py weighs them).

- figure: a path into the step's results, e.g. `etcd.wal_fsync_p99_s`, `pod_startup.p99`,
  `etcd.keys_by_prefix.events`, `processes[component=kube-apiserver].cpu_percent` (summed over matches),
  `requests_by_code[5*]` (keys matching a pattern, summed), `etcd.alarms` (a list: its length);
- scrape: a metric of the /metrics pages kept at the window's start and end ({page: apiserver | etcd,
  metric, labels (a value or a list of values), stat: delta | rate | p50 | p90 | p99 | sum | sum_rate | end |
  total (a counter at the window's close: since its process started, e.g. an apiserver restarted in the window),
  present: a metric with a series of the read's labels wherever they can be counted, e.g. a priority level's
  apiserver_flowcontrol_nominal_limit_seats: without one, not measured; with one, a counter missing from the
  page counted nothing});
- audit: requests of the step's audit log ({verb, resource, client (a prefix), code (a prefix),
  stat: count | rate | p99 (latency, receipt to response)}).

A reading is the value and the bound it carries where it is only a histogram's bound ("<": in the first bucket,
">": in the open last one); a figure that cannot be read is None: not measured, never 0.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from loadtests.analysis.metrics import counter_delta, histogram_delta
from loadtests.analysis.scrapes import kept_page
from loadtests.config.lesson import Measure
from loadtests.results import StepResult

QUANTILES = ("p50", "p90", "p99")


# a value, and "<" or ">" where it is only a histogram's bound (its rank in the first or the open last bucket)
Reading = tuple[float | None, str]


def _sum(values: list[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return sum(numbers) if numbers else None


def _walk(value: Any, tokens: list[str]) -> list[Any]:
    """Every value the path reaches: `name[key=value]` selects list items, `name[pattern]` dict keys."""
    if not tokens:
        return [value]
    token, rest = tokens[0], tokens[1:]
    selector = None
    if token.endswith("]") and "[" in token:
        token, selector = token[:-1].split("[", 1)
    found = value.get(token) if isinstance(value, dict) else getattr(value, token, None)
    if found is None:
        return []
    if selector is None:
        return _walk(found, rest)
    if isinstance(found, dict):
        matched = [v for key, item in found.items() if fnmatch.fnmatchcase(str(key), selector)
                   for v in _walk(item, rest)]
        # a recorded mapping without the key counts none of it (no 5xx answered: 0), an empty one is unknown
        return matched or ([0.0] if found and not rest else [])
    if isinstance(found, list):
        key, _, wanted = selector.partition("=")
        return [v for item in found if [str(k) for k in _walk(item, [key])] == [wanted] for v in _walk(item, rest)]
    return []


def figure_value(step: StepResult, path: str) -> float | None:
    """A figure of the step's results by path; a list at the end counts its items."""
    reached = _walk(step, path.split("."))
    if len(reached) == 1 and isinstance(reached[0], list):
        return float(len(reached[0]))
    return _sum(reached)


def figure_reading(step: StepResult, path: str) -> Reading:
    """figure_value, and the bound the results recorded beside it (a quantile of one histogram: a server
    latency's `p99`, etcd's `wal_fsync_p99_s`, a health summary's p99 maximum) in its holder's `bounds`."""
    *parent, last = path.split(".")
    holders = _walk(step, parent) if parent else []
    bound = _walk(holders[0], ["bounds", last]) if len(holders) == 1 else []
    return figure_value(step, path), str(bound[0]) if bound else ""


def _one_of(values: list[Any]) -> Any:
    allowed = frozenset(str(v) for v in values)
    return lambda value: value in allowed


def _matcher(labels: dict[str, Any]) -> dict[str, Any]:
    """Label matchers: a value, or a list of values any of which matches."""
    return {k: _one_of(want) if isinstance(want, list) else str(want) for k, want in (labels or {}).items()}


def scrape_reading(step: StepResult, folder: Path, spec: dict[str, Any]) -> Reading:
    """A metric over the step's window, from the /metrics pages kept with it."""
    source, metric, stat = spec.get("page", "apiserver"), spec["metric"], spec.get("stat", "delta")
    families = frozenset({metric, *([str(spec["present"])] if spec.get("present") else [])})
    end = kept_page(folder, source, "end", families)
    if end is None:
        return None, ""
    match = _matcher(spec.get("labels") or {})
    window = step.duration_s or None
    if stat == "end":
        return end.total(metric, **match), ""
    if stat == "total":  # a counter's count at the close: all since its process started (a restarted apiserver's)
        value = end.total(metric, **match)
        return (0.0 if value is None and end.has(metric) else value), ""
    start = kept_page(folder, source, "start", families)  # only figures over the window read the window's first page
    if stat in ("delta", "rate"):
        present = spec.get("present")  # a metric with a series of these labels wherever they can be counted
        if present and not end.series(str(present), **match):
            return None, ""  # what would count them (a priority level) does not exist here: not measured
        if not end.has(metric):  # not on the page: not measured (this version may not export it, or nothing counted)
            # unless `present` says they can be counted: a counter appears with its first increment, so none was
            return (0.0 if present else None), ""
        # the family is on the page: a labelled counter appears with its first increment, so no series of these
        # labels means none of them happened
        delta = counter_delta(start, end, metric, **match) or 0.0
        return (delta / window if stat == "rate" and window else delta), ""
    if stat in ("sum", "sum_rate"):
        delta = counter_delta(start, end, f"{metric}_sum", **match)
        return (None if delta is None else delta / window if stat == "sum_rate" and window else delta), ""
    if stat in QUANTILES:
        histogram = histogram_delta(start, end, metric, **match)
        if histogram is None or not histogram.count:
            return None, ""
        quantile = histogram.bounded_quantile(int(stat[1:]) / 100)
        return quantile.honest, quantile.bound or ""
    raise ValueError(f"unknown scrape stat {stat!r}")


def audit_value(step: StepResult, spec: dict[str, Any]) -> float | None:
    """Requests of the step's audit log matching verb, resource, client and code prefixes; or (stat p99) their
    latency from receipt to response, every code and flow-control queueing included. Each row's p99 is exact (the
    log's own timestamps); of several rows the slowest row's p99 is given, so a p99 read names verb, resource
    and client to match one row (none matched: not measured)."""
    if not step.audit.source:
        return None
    count = 0
    p99s = []
    for row in step.audit.requests:
        if spec.get("verb") and row.verb != spec["verb"]:
            continue
        if spec.get("resource") and row.resource != spec["resource"]:
            continue
        if spec.get("client") and not row.client.startswith(spec["client"]):
            continue
        if row.p99_s is not None:
            p99s.append(row.p99_s)
        code = spec.get("code")
        count += sum(n for c, n in row.codes.items() if c.startswith(str(code))) if code else row.count
    if spec.get("stat", "count") == "rate":
        return count / step.duration_s if step.duration_s else None
    if spec.get("stat") == "p99":
        return max(p99s) if p99s else None
    return float(count)


def reading(measure: Measure, step: StepResult, folder: Path) -> Reading:
    """The measure at one step (folder: the step's files, where its /metrics pages are kept), and its bound."""
    kind, spec = next(iter(measure.read.items()))
    try:
        if kind == "figure":
            return figure_reading(step, str(spec))
        if kind == "scrape":
            return scrape_reading(step, folder, spec)
        return audit_value(step, spec), ""
    except (OSError, ValueError, KeyError):
        return None, ""


def read(measure: Measure, step: StepResult, folder: Path) -> float | None:
    return reading(measure, step, folder)[0]
