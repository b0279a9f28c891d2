"""How many figure series a history of a plan searches: a series per compared figure per step.

`loadtest history` searches every figure `loadtest compare` weighs, at every step, for change points
(analysis/history.tracks); how many there are decides how many noise-sized changes a page would show without the
history's smallest relative change. This counts them on a recorded run (default: the default plan's,
benchmarks/results/raw/plan_default/run-1), with the history's own code, by step and by chart. Writes
benchmarks/results/figure_series.md and its raw list. No control plane: under a second.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.recorded import chosen_raw_run, read_raw_run  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.analysis import figures  # noqa: E402
from loadtests.analysis.history import Point, Track, tracks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "figure_series.md"


def series(raw_run: Path) -> list[Track]:
    """The history's tracks of one recorded run (a plan benchmark's record holding its results.json)."""
    run = results.from_dict(read_raw_run(raw_run))
    found, _ = tracks([Point(name=raw_run.name, runs=[run], path=raw_run)])
    return found


def table(found: list[Track]) -> list[str]:
    """A row per step (figures and the charts they fall in), then the total."""
    lines = []
    steps = sorted({(t.step_index, t.step_name) for t in found})
    for index, name in steps:
        mine = [t for t in found if t.step_index == index]
        charts = Counter(figures.CHARTS[t.chart].short for t in mine)
        lines.append(f"| {name} | {len(mine)} | {', '.join(f'{c} {n}' for c, n in charts.items())} |")
    figures_n = len({(t.chart, t.name) for t in found})
    lines.append(f"| all {len(steps)} steps | {len(found)} | {figures_n} compared figures, each at one step or more |")
    return lines


def main() -> int:
    raw_run = chosen_raw_run(__doc__.splitlines()[0], RAW_DIR / "plan_default" / "run-1.json.gz")
    found = series(raw_run)
    shown = raw_run.resolve().relative_to(ROOT)
    keep_raw("figure_series.json.gz", {"run": str(shown), "series": [
        {"step": t.step_name, "chart": t.chart, "figure": t.name, "rule": t.rule} for t in found]})
    lines = results_head("Figure series a history searches, on a recorded run", f"the recorded run {shown}",
                         ".venv/bin/python benchmarks/figure_series.py", ["step", "figure series", "by chart"])
    lines += table(found)
    figures_n = len({(t.chart, t.name) for t in found})
    lines += ["", f"A history of this plan's runs searches {len(found)} figure series ({figures_n} compared figures "
                  "over the steps that measured each), as `loadtest history` counts them (analysis/history.tracks).",
              "", "Raw list (every series: step, chart, figure, rule): benchmarks/results/raw/figure_series.json.gz."]
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
