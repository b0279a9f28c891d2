"""`loadtest history`: line up many runs of one plan, find where each figure changed, gate on the latest run."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests.cli.compare import threshold_pairs
from loadtests.cli.flags import index_arg, positive_arg
from loadtests.cli.output import REPORTS_DIR, say
from loadtests.errors import LoadTestError
from loadtests.index.db import IndexUrl

if TYPE_CHECKING:
    from loadtests.analysis.history import Point


def _slug(text: str) -> str:
    """A point's title as part of a folder name: "ci-42 (3 repeats)" -> "ci-42-3-repeats"."""
    return re.sub(r"[^\w.-]+", "-", text).strip("-") or "run"


@dataclass(frozen=True)
class FromIndex:
    """The runs of a history read from a run index: of one plan (None: the only one it holds), the `last`
    latest builds (None: all)."""

    url: IndexUrl
    plan: str | None = None
    last: int | None = None


def history_points(runs: list[Path] | FromIndex, force: bool) -> tuple[list[Point], list[str]]:
    """The points of a history in start order, and notes: from the folders and pages named, or from an index."""
    from loadtests.analysis import history

    if isinstance(runs, list):
        return history.load_points(runs, force)
    from loadtests.index.store import open_index, points

    db = open_index(runs.url)
    try:
        found = points(db, runs.plan, runs.last)
    finally:
        db.close()
    return history.order(found, force)


def show_history(runs: list[Path] | FromIndex, out: Path | None, thresholds: dict[str, float], max_pvalue: float,
                 min_magnitude: float, force: bool) -> Any:
    """Read the runs (folders and pages, or an index), find the change points, write history.html and
    history-junit.xml, and say each change point in one line; return the History."""
    from loadtests.analysis import history
    from loadtests.analysis.formats import first_few
    from loadtests.analysis.rules import limits_from
    from loadtests.report.history import write_history

    limits_from(thresholds)  # a bad flag is refused before any run is read
    points, notes = history_points(runs, force)
    # thresholds: the defaults, then the latest run's plan `compare:` section, then --threshold flags
    plan = points[-1].first.plan if isinstance(points[-1].first.plan, dict) else {}
    planned = plan.get("compare") or {}
    result = history.history(points, {**planned, **thresholds} or None, max_pvalue=max_pvalue,
                             min_magnitude=min_magnitude, notes=notes)
    out = out or REPORTS_DIR / f"history-{_slug(points[0].title)}-to-{_slug(points[-1].title)}"
    html_path, junit_path = write_history(result, out)
    for note in result.notes:
        say(f"note: {note}")
    bounded = [f"step {t.step_name}: {t.label}" for t in result.bounded_tracks]
    if bounded:
        say(f"note: {len(bounded)} figure series hold values that are only histogram bounds ({first_few(bounded)}; "
            "listed on the page): a change point there is judged at the bounds' worst")
    for track, change in result.latest_regressions:
        say(f"REGRESSION  step {track.step_name}: {track.label}: {result.describe(track, change)}, the latest: "
            f"{result.rule_text(track)}")
    for track, change in result.earlier_regressions:
        say(f"REGRESSED   step {track.step_name}: {track.label}: {result.describe(track, change)}: "
            f"{result.rule_text(track)}; started before the latest run, not gated")
    for track, change in result.other_changes:
        say(f"CHANGED     step {track.step_name}: {track.label}: {result.describe(track, change)}: {change.status}")
    say(result.headline)
    say(f"history: {html_path}")
    say(f"junit: {junit_path}")
    return result


def runs_named(args: argparse.Namespace) -> list[Path] | FromIndex:
    """What the history reads: the folders and pages named, or --index (with its --plan and --last), not both."""
    if args.index is None:
        if not args.runs:
            raise LoadTestError("loadtest history: name the runs (folders or report pages), or --index URL")
        if args.plan is not None or args.last is not None:
            raise LoadTestError("loadtest history: --plan and --last choose runs of an index: add --index URL, or "
                                "name the runs themselves")
        return [Path(p) for p in args.runs]
    if args.runs:
        raise LoadTestError(f"loadtest history: runs named ({args.runs[0]}, ...) and --index: read one or the other")
    return FromIndex(args.index, args.plan, args.last)


def cmd_history(args: argparse.Namespace) -> int:
    result = show_history(runs_named(args), Path(args.out) if args.out else None,
                          threshold_pairs(args.threshold), args.max_pvalue, args.min_magnitude, args.force)
    return 1 if args.gate and result.latest_regressions else 0


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 0.05, not {text!r}") from None


def add_commands(sub: Any) -> None:
    from loadtests.analysis.history import MAX_PVALUE, MIN_MAGNITUDE

    p = sub.add_parser("history", help="a history of runs: every figure across them, its change points (Apache "
                                       "Otava); with --gate, exit 1 when the latest run starts a regression")
    p.add_argument("runs", nargs="*", metavar="DIR_OR_HTML",
                   help="run folders, folders of repeats (their median is one point) or report pages; ordered by "
                        "start time")
    p.add_argument("--index", type=index_arg, metavar="URL",
                   help="read the runs from this run index instead (`loadtest index`, `loadtest run --index`): "
                        "a file path or sqlite:///PATH, or postgresql://...")
    p.add_argument("--plan", metavar="NAME", help="with --index: the runs of this plan (needed when it holds several)")
    p.add_argument("--last", type=positive_arg, metavar="N", help="with --index: only the N latest builds")
    p.add_argument("--out", help="folder for history.html and history-junit.xml "
                                 "(default: reports/history-<first>-to-<last>)")
    p.add_argument("--gate", action="store_true", help="exit 1 when the latest run starts a regression")
    p.add_argument("--max-pvalue", type=_number, default=MAX_PVALUE, metavar="P",
                   help=f"significance of a change point (default {MAX_PVALUE:g}, Otava's)")
    p.add_argument("--min-magnitude", type=_number, default=MIN_MAGNITUDE, metavar="FRACTION",
                   help=f"smallest relative change reported (default {MIN_MAGNITUDE:g}: 5 %%)")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER",
                   help="override a regression threshold, e.g. latency_pct=10 (repeatable)")
    p.add_argument("--force", action="store_true", help="line up runs made from different plans")
    p.set_defaults(func=cmd_history)
