"""The plan's PromQL figures and checks (config/promql.py) on the run's Prometheus: refused before the run when
Prometheus cannot parse them (promtool's own words), and answered once per step at the window's close.

The window's edges: the harness's window is exact (its own scrapes at its open and close); Prometheus scrapes on
its own clock, so its data inside the window begins with each target's first scrape after the open and ends with
its last before the close. Every step records which part of the window that is (results/promql.py PromWindow),
and the report says it beside the figures. Before querying, the queries wait until every scrape begun before the
close has been stored (at most one scrape interval), so the data the window holds is all there."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import yaml

from loadtests.config.promql import PromQuery
from loadtests.errors import PlanError, TargetError
from loadtests.results import utc_at
from loadtests.results.promql import NOT_FIRED, PromFigure, PromqlSection, PromWindow

CHECK_WINDOW_S = 60.0  # the window's length put in the placeholder when promtool checks a query
PROMTOOL_TIMEOUT_S = 60.0
SETTLE_MARGIN_S = 0.05  # a scrape due this close before the window's close may still be in flight
AGGREGATE: dict[str, Callable[[Sequence[float]], float]] = {
    "sum": sum, "max": max, "min": min, "avg": lambda values: sum(values) / len(values)}

Sample = tuple[dict[str, str], float]


class Prometheus(Protocol):
    """What a step asks of the run's Prometheus (controlplane/prometheus.RunPrometheus)."""

    def query(self, expr: str, at: float) -> list[Sample]: ...

    def last_scrapes(self) -> dict[str, float]: ...

    def scrape_times(self, at: float, seconds: float) -> dict[str, list[float]]: ...


def refuse_unparsable(queries: Sequence[PromQuery], promtool: Path, source: str) -> None:
    """A PlanError naming the first query Prometheus cannot parse and Prometheus's own message: each query is
    a recording rule of one file that `promtool check rules` reads (the placeholder as a 60 s window)."""
    if not queries:
        return
    rules = {"groups": [{"name": "plan", "rules": [{"record": f"q{i}", "expr": q.for_window(CHECK_WINDOW_S)}
                                                   for i, q in enumerate(queries)]}]}
    with tempfile.TemporaryDirectory(prefix="promql-") as folder:
        path = Path(folder) / "queries.yml"
        path.write_text(yaml.safe_dump(rules))
        try:
            done = subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True, text=True,
                                  timeout=PROMTOOL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise PlanError(f"{source}: the PromQL queries could not be checked ({promtool}: {error})") from None
    if done.returncode == 0:
        return
    said = done.stdout + done.stderr
    for line in said.splitlines():
        match = re.search(r'"q(\d+)": (.*)$', line)
        if match:
            query = queries[int(match[1])]
            where = f" (from {query.profile})" if query.profile else ""
            raise PlanError(f"{source}: PromQL {query.name!r}{where}: Prometheus cannot parse {query.query!r}: "
                            f"{match[2]}")
    raise PlanError(f"{source}: promtool refused the PromQL queries: {' '.join(said.split())[-300:]}")


def wait_settled(prometheus: Prometheus, closed_at: float, interval_s: float) -> float:
    """Wait until no scrape begun before `closed_at` is still in flight: each target's last stored scrape began
    after the close, or its next one is not due before it. How long it waited (at most an interval and a bit)."""
    started = time.monotonic()
    deadline = started + interval_s + 5.0
    while time.monotonic() < deadline:
        try:
            lasts = prometheus.last_scrapes()
        except TargetError:
            break
        if all(last > closed_at or last + interval_s > closed_at + SETTLE_MARGIN_S for last in lasts.values()):
            break
        time.sleep(0.2)
    return round(time.monotonic() - started, 3)


def one_value(query: PromQuery, found: list[Sample]) -> tuple[float | None, str]:
    """A figure's value from its series: none is not measured, several are combined only as the plan says."""
    if not found:
        return None, "no series: not measured"
    if len(found) > 1 and not query.aggregate:
        labels = "; ".join(",".join(f"{k}={v}" for k, v in sorted(s.items()) if k != "__name__") or "{}"
                           for s, _ in found[:3])
        return None, (f"{len(found)} series ({labels}{'; ...' if len(found) > 3 else ''}): aggregate them in the "
                      "query (sum, max, ...) or say `aggregate: sum | max | min | avg`")
    return AGGREGATE[query.aggregate or "sum"]([value for _, value in found]), ""


def _measure(prometheus: Prometheus, query: PromQuery, kind: str, closed_at: float, seconds: float) -> PromFigure:
    sent = query.for_window(seconds)
    try:
        found = prometheus.query(sent, closed_at)
    except TargetError as error:
        return PromFigure(query.name, kind, sent, error=str(error))
    if query.alert:  # an alert fires when its expression gives anything: its value is the first series'
        return PromFigure(query.name, kind, sent, found[0][1] if found else None, len(found),
                          "" if found else NOT_FIRED)
    value, error = one_value(query, found)
    return PromFigure(query.name, kind, sent, value, len(found), error)


def coverage(prometheus: Prometheus, opened_at: float, closed_at: float, interval_s: float) -> PromWindow:
    """Which part of the window Prometheus's scrapes cover: the latest first scrape and earliest last one."""
    window = PromWindow(utc_at(closed_at), round(closed_at - opened_at, 3), interval_s)
    try:
        times = {target: [t for t in found if opened_at <= t <= closed_at]
                 for target, found in prometheus.scrape_times(closed_at, closed_at - opened_at).items()}
    except TargetError:
        return window
    inside = [found for found in times.values() if found]
    if inside:
        window.targets = len(inside)
        window.first_scrape_s = round(max(min(found) for found in inside) - opened_at, 3)
        window.last_scrape_s = round(min(max(found) for found in inside) - opened_at, 3)
    return window


def measure_step(prometheus: Prometheus, figures: Sequence[PromQuery], checks: Sequence[PromQuery],
                 opened_at: float, closed_at: float, interval_s: float) -> PromqlSection:
    """Every figure and check of the plan at the window's close, over the window's length, and what it covers.
    The instant is the close in whole milliseconds, as `evaluated_at` records it: asked again at that instant
    (the kept TSDB, a test), every query gives the same answer."""
    opened_at, closed_at = round(opened_at, 3), round(closed_at, 3)
    waited = wait_settled(prometheus, closed_at, interval_s)
    window = coverage(prometheus, opened_at, closed_at, interval_s)
    window.waited_s = waited
    seconds = closed_at - opened_at
    found = [_measure(prometheus, q, "figure", closed_at, seconds) for q in figures]
    found += [_measure(prometheus, q, "check", closed_at, seconds) for q in checks]
    return PromqlSection(found, window)
