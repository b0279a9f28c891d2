"""What a step's apiserver restart (steps[].restart_apiserver_at_s) came to, in one line for the step's notes:
when each apiserver was stopped and ready again, and how the informers came back, from the SYNC rows they
recorded (config/scenarios.py): how many were in sync again before the window closed, so that the slowest
one's time is read as what it is (the slowest of those that made it)."""

from __future__ import annotations

from typing import Any

from loadtests.analysis.formats import duration
from loadtests.config.scenarios import SYNCED, informer_sync_names
from loadtests.results import StepResult


def restart_notes(step: StepResult, scenarios: dict[str, dict[str, Any]]) -> list[str]:
    """The restart's line (its marks, or why it stopped) and, with informers in the load, theirs."""
    restart = step.restart
    if restart is None:
        return []
    marks = "; ".join(f"{m.instance} stopped at {m.out_at_s:g} s into the window, in {duration(m.stop_s)}, ready "
                      f"{duration(m.start_to_ready_s)} after its start" for m in restart.marks)
    lines = [f"apiserver restart: {marks or 'nothing restarted'}"
             + (f"; stopped early: {restart.error}" if restart.error else "")]
    informers = scenarios.get("informers")
    if informers is not None:
        lines.append(resync_line(step, informers))
    return lines


def resync_line(step: StepResult, params: dict[str, Any]) -> str:
    """How many informers were in sync again after the restart before the window closed, and the slowest's times."""
    names = informer_sync_names(params)
    rows = {s.name: s for s in step.client if s.type == SYNCED}
    cut, sync, again = rows.get(names.cut), rows.get(names.sync), rows.get(names.again)
    count = int(params["count"])
    synced = cut.count if cut is not None else 0
    line = f"informers after the restart: {synced} of {count} in sync again before the window closed"
    if cut is not None and cut.max_ms is not None:
        line += f", the slowest {duration(cut.max_ms / 1000)} after its watch was cut"
        if sync is not None and sync.max_ms is not None:
            line += f" (the slowest sync itself {duration(sync.max_ms / 1000)})"
    if synced < count:
        line += f"; the others were not in sync yet, so the times are the slowest of {synced}, not of all"
    if again is not None and again.count:
        line += (f"; {again.count} more times an informer back in sync had its watch cut again and synced again"
                 + (f" (the slowest {duration(again.max_ms / 1000)} after that cut)" if again.max_ms is not None
                    else ""))
    return line
