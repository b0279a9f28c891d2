"""The plan's own PromQL figures and checks of a step (config/promql.py), answered by the run's Prometheus.

Step keys (results.json):

    promql: list of PromFigure, one per figure, then one per check, in the plan's order: its name, whether it
        is a figure or a check, the query as sent (the window's length in place of `%v` / `{{ .elapsed }}`), the
        value (null: not measured, never 0; `error` says why: the query gave no series, several it was not told
        how to combine, or Prometheus's own message), and how many series it gave
    promql_window: PromWindow or null (no Prometheus): the instant the queries were evaluated at (the window's
        close) and the window Prometheus's own scrapes cover inside the harness's: Prometheus scrapes on its own
        clock, so its first scrape of a target comes up to one interval after the window opens and its last up
        to one before it closes; rate() and increase() extrapolate from those to the edges
"""

from __future__ import annotations

from dataclasses import dataclass, field

NOT_FIRED = "did not fire"  # an alert-profile check's expression gave no series: the alert held


@dataclass
class PromFigure:
    name: str
    kind: str  # "figure" | "check"
    query: str  # as sent
    value: float | None = None
    series: int = 0  # how many series the query gave
    error: str = ""  # why not measured


@dataclass
class PromWindow:
    """What Prometheus's data covers of the harness's window (seconds from its open)."""

    evaluated_at: str  # UTC, ISO-8601: the window's close, where every instant query was evaluated
    range_s: float  # the window's length, substituted for the placeholder
    interval_s: float  # Prometheus's scrape interval
    targets: int = 0  # targets scraped inside the window
    first_scrape_s: float | None = None  # the latest of the targets' first scrapes inside the window
    last_scrape_s: float | None = None  # the earliest of their last ones
    waited_s: float = 0.0  # how long the queries waited for scrapes begun before the close to be stored

    def said(self) -> str:
        """"scrapes from +2.1 s to +58.3 s of the 60.0 s window (every 5 s, 6 targets)", for the report."""
        if self.first_scrape_s is None or self.last_scrape_s is None:
            return f"no scrape of Prometheus's inside the {self.range_s:.1f} s window"
        return (f"Prometheus's scrapes from +{self.first_scrape_s:.1f} s to +{self.last_scrape_s:.1f} s of the "
                f"{self.range_s:.1f} s window (every {self.interval_s:g} s, {self.targets} targets)")


@dataclass
class PromqlSection:
    promql: list[PromFigure] = field(default_factory=list)
    promql_window: PromWindow | None = None
