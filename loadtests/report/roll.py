"""The report's view of a rolling upgrade: its verdicts, each instance's stop and ready, the probe's seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtests.analysis import roll as analysis
from loadtests.report import charts
from loadtests.results import StepResult
from loadtests.results.loadgen import ClientStat

RELIST_MARK, REWATCH_MARK = "consistent)", "rewatch)"  # the informers' LIST after a 410, their watch again


@dataclass
class RollView:
    verdicts: list[analysis.RollVerdict]
    figures: analysis.RollFigures
    marks: list[tuple[str, str, str, str, str, str]]  # instance, version, out at, stop, start to ready, back at
    panel: charts.Panel
    watch_rows: list[tuple[str, int, int]] = field(default_factory=list)  # request, sent, failed (whole step)


def _seconds(value: float) -> str:
    return f"{value:.1f} s"


def _watch_rows(client: list[ClientStat]) -> list[tuple[str, int, int]]:
    """The informers' re-watches and relists over the whole step (the roll's and the steady seconds')."""
    return [(c.name, c.count, c.failures) for c in client
            if c.name.endswith((RELIST_MARK, REWATCH_MARK)) or (c.type == "WATCH" and c.failures)]


def roll_view(step: StepResult) -> RollView | None:
    roll = step.roll
    if roll is None:
        return None
    found = analysis.figures(roll)
    seconds = roll.seconds
    panel = charts.Panel(
        f"chart-roll_{step.index}", f"Rolling upgrade {roll.from_version} → {roll.to_version}, second by second",
        f"the availability probe: {roll.probe}, {roll.probe_qps:g} a second through the load balancer; per second "
        "the slowest answered (of so few, the p99 is their maximum) and those not served; shaded: each instance "
        "from out of rotation to back in",
        charts.roll_figure([s.t for s in seconds],
                           [None if s.slowest_s is None else s.slowest_s * 1000 for s in seconds],
                           [s.sent - s.served for s in seconds],
                           None if found.steady_slowest_s is None else found.steady_slowest_s * 1000,
                           [(m.instance, m.out_at_s, m.back_at_s) for m in roll.marks]))
    marks = [(m.instance, m.version, _seconds(m.out_at_s), _seconds(m.stop_s), _seconds(m.start_to_ready_s),
              _seconds(m.back_at_s)) for m in roll.marks]
    return RollView(verdicts=analysis.verdicts(step), figures=found, marks=marks, panel=panel,
                    watch_rows=_watch_rows(step.client))
