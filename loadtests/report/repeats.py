"""The report of a repeated run: one page and one JUnit file for the folder `loadtest run --repeat N` writes.

The folder holds repeat-1/, repeat-2/, ..., each a run folder with its own report. Its report shows every figure
of every step as the median of the repeats with its spread (benchstat's "± x %"; min–max and n on hover), draws
each chart as those medians against nodes with min–max error bars, and counts each step's SLO verdicts over the
repeats. The folder passes only when every repeat passed (slo.run_passed: complete, nothing saturated, no SLO
failed); a repeat that recorded no step counts as aborted. Figures, medians and verdicts are the ones the run
report and compare use (figures.py, analysis/judge.py, slo.py), so the three never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests.analysis import figures, stats
from loadtests.analysis.judge import Row
from loadtests.analysis.samples import Side, load_side, repeat_folders
from loadtests.analysis.slo import Verdict, run_passed, verdicts
from loadtests.errors import LoadTestError
from loadtests.report import charts, junit, page
from loadtests.report.compare import side_series, values
from loadtests.report.html import REPORT_FILE, banner
from loadtests.results import RESULTS_FILE, RunResult, StepResult

REPEATS_FILE = REPORT_FILE  # the folder's own report.html, beside its repeat-*/ folders
NOT_RECORDED = {"state": "aborted", "label": "NO RESULTS", "line": f"recorded no step (no {RESULTS_FILE})"}


@dataclass
class Repeat:
    """One repeat-<k> folder: its run (None when it recorded no step) and its own verdict."""

    name: str
    run: RunResult | None
    verdicts: list[Verdict] = field(default_factory=list)
    report: str = ""  # the relative link to its report.html; empty when it has none

    @property
    def passed(self) -> bool:
        return self.run is not None and run_passed(self.run)

    @property
    def complete(self) -> bool:
        return self.run is not None and self.run.status == "complete"

    @property
    def banner(self) -> dict[str, str]:
        """PASS / FAIL / SATURATED / ABORTED / INCOMPLETE as its own report says, or NO RESULTS."""
        return NOT_RECORDED if self.run is None else banner(self.run, self.verdicts)

    def count(self, passed: bool | None) -> int:
        return sum(v.passed is passed for v in self.verdicts)


@dataclass
class SloRow:
    """One SLO of one step over the repeats that recorded results: each repeat's verdict (None: not measured)."""

    slo: str
    slo_class: str
    threshold_s: float
    cells: list[Verdict | None]
    names: list[str]  # the repeats the cells belong to

    def _named(self, passed: bool | None) -> list[tuple[str, Verdict]]:
        return [(name, v) for name, v in zip(self.names, self.cells, strict=True)
                if v is not None and v.passed is passed]

    @property
    def failed(self) -> list[tuple[str, Verdict]]:
        return self._named(False)

    @property
    def passes(self) -> int:
        return len(self._named(True))

    @property
    def outcome(self) -> str:
        """"3/3 pass", "2/3 pass, 1 fail", ... over the repeats with results."""
        parts = [f"{self.passes}/{len(self.cells)} pass"]
        unjudged = len(self._named(None))
        missing = sum(v is None for v in self.cells)
        parts += [f"{count} {what}" for count, what in ((len(self.failed), "fail"), (unjudged, "not judged"),
                                                        (missing, "not measured")) if count]
        return ", ".join(parts)

    @property
    def state(self) -> str:
        """The cell's css class: fail when any repeat failed, pass when every repeat passed, skip otherwise."""
        if self.failed:
            return "fail"
        return "pass" if self.passes == len(self.cells) else "skip"

    def failure(self) -> str:
        """"failed in 1 of 3 repeats: repeat-2 (p99 5.313 s > 5 s)", for JUnit and the page."""
        which = ", ".join(f"{name} ({v.reason})" for name, v in self.failed)
        return f"failed in {len(self.failed)} of {len(self.cells)} repeats: {which}"

    def details(self) -> str:
        return "\n".join(f"{name}: {v.outcome}: {junit.verdict_text(v)}" if v is not None else f"{name}: not measured"
                         for name, v in zip(self.names, self.cells, strict=True))


@dataclass
class StepSection:
    """A step over the repeats: its SLOs, every figure as a median with its spread, and notes."""

    step: StepResult  # as the first repeat that recorded it
    recorded: list[str]  # the repeats that recorded the step
    slos: list[SloRow]
    rows: list[Row]  # compare rows holding this folder's repeats as side A only
    notes: list[str] = field(default_factory=list)


def _repeats(folder: Path, side: Side) -> list[Repeat]:
    """Every repeat-<k> folder, with its run when it has results."""
    runs = {path.resolve(): run for run, path in zip(side.runs, side.folders, strict=True)}
    found = []
    for path in repeat_folders(folder):
        run = runs.get(path.resolve())
        report = f"{path.name}/{REPORT_FILE}" if (path / REPORT_FILE).is_file() else ""
        found.append(Repeat(path.name, run, verdicts(run) if run is not None else [], report))
    return found


def _slo_rows(side: Side, names: list[str], found: list[list[Verdict]]) -> dict[int, list[SloRow]]:
    """Per step index, every SLO judged in any repeat (first-seen order) with each repeat's verdict."""
    by_step: dict[int, dict[str, SloRow]] = {}
    for position, run_verdicts in enumerate(found):
        for v in run_verdicts:
            rows = by_step.setdefault(v.step_index, {})
            row = rows.setdefault(v.slo, SloRow(v.slo, v.slo_class, v.threshold_s, [None] * side.n, names))
            row.cells[position] = v
    return {index: list(rows.values()) for index, rows in by_step.items()}


def _figure_rows(side: Side) -> dict[int, list[Row]]:
    """Per step index, every figure measured in any repeat: its median over the repeats, with their values."""
    found_values, rules = values(side, every=True)
    by_step: dict[int, list[Row]] = {}
    for step in side.steps:
        for (chart, name), per_step in found_values.items():
            measured = per_step.get(step.index)
            if not measured:
                continue
            by_step.setdefault(step.index, []).append(Row(
                step_index=step.index, step_name=step.name, nodes=step.nodes, chart=chart, name=name,
                unit=figures.CHARTS[chart].unit, rule=rules[(chart, name)] or "", a=stats.summarize(measured).median,
                b=None, a_values=measured))
    return by_step


def _sections(side: Side, names: list[str], found: list[list[Verdict]]) -> list[StepSection]:
    slos, rows = _slo_rows(side, names, found), _figure_rows(side)
    sections = []
    for step in side.steps:
        taken = [(name, s) for name, run in zip(names, side.runs, strict=True) for s in run.steps
                 if s.index == step.index]
        notes = [f"{name}: saturated: {s.saturation.get('condition')}: {s.saturation.get('evidence')}"
                 for name, s in taken if s.status == "saturated"]
        if len(taken) < side.n:
            notes.append(f"recorded by {len(taken)} of {side.n} repeats")
        sections.append(StepSection(step, [name for name, _ in taken], slos.get(step.index, []),
                                    rows.get(step.index, []), notes))
    return sections


def _panels(side: Side) -> list[charts.Panel]:
    """Every chart of the run report, drawn as the repeats' medians against nodes with min–max error bars."""
    steps = side.steps
    found_values, _ = values(side, every=True)
    spreads = {f"{chart}: {name}": [stats.summarize(per_step[s.index]) if per_step.get(s.index) else None
                                    for s in steps]
               for (chart, name), per_step in found_values.items()}
    return charts.run_panels(side_series(side, every=True), [s.nodes for s in steps],
                             [s.name or f"{s.nodes} nodes" for s in steps], figures.chart_sources(side.first),
                             spreads)


def count_text(n: int) -> str:
    """"1 repeat", "3 repeats"."""
    return f"{n} repeat{'' if n == 1 else 's'}"


def headline(repeats: list[Repeat]) -> dict[str, str]:
    """PASS only when every repeat passed; the line names the repeats that did not, and why."""
    total = len(repeats)
    complete = sum(r.complete for r in repeats)
    counts = (f"{count_text(total)}: {complete} complete, {total - complete} aborted · SLO checks over all repeats: "
              f"{sum(r.count(True) for r in repeats)} passed, {sum(r.count(False) for r in repeats)} failed, "
              f"{sum(r.count(None) for r in repeats)} not judged")
    failing = [r for r in repeats if not r.passed]
    if not failing:
        return {"state": "pass", "label": "PASS", "counts": counts,
                "line": f"every repeat passed its SLOs ({total} of {total})"}
    named = [f"{r.name} {r.banner['label']}: {r.banner['line']}" for r in failing]
    more = f"; and {len(named) - 3} more" if len(named) > 3 else ""
    return {"state": "fail", "label": "FAIL", "counts": counts,
            "line": f"{len(failing)} of {count_text(total)} did not pass: {'; '.join(named[:3])}{more}"}


def _suites(folder: str, repeats: list[Repeat], sections: list[StepSection]) -> list[junit.Suite]:
    """A suite per step, a case per SLO failing when it failed in any repeat; then a case per repeat that
    fails when the repeat did not complete."""
    suites = []
    for section in sections:
        cases = []
        for row in section.slos:
            case = junit.Case(section.step.name, row.slo, details=f"{row.outcome}\n{row.details()}")
            if row.failed:
                case.failure = row.failure()
            elif not row.passes:
                case.skipped = f"not judged in any repeat ({row.outcome})"
            cases.append(case)
        suites.append(junit.Suite(name=f"step {section.step.index}: {section.step.name}", cases=cases,
                                  properties={"nodes": str(section.step.nodes),
                                              "repeats": ", ".join(section.recorded)}))
    completed = [junit.completed_case(r.run, r.name, f"{r.name} completed") if r.run is not None else
                 junit.Case(r.name, f"{r.name} completed", failure=NOT_RECORDED["line"], failure_type="aborted")
                 for r in repeats]
    suites.append(junit.Suite(name="repeats", cases=completed,
                              properties={"folder": folder, "repeats": str(len(repeats))}))
    return suites


def context(folder: Path) -> tuple[dict[str, Any], list[junit.Suite]]:
    """What repeats.html shows, and the JUnit suites, computed from the repeats' results."""
    if not repeat_folders(folder):
        raise LoadTestError(f"{folder}: no repeat-*/ subfolders: not the folder of a repeated run "
                            "(loadtest run --repeat N writes one)")
    name = folder.resolve().name  # "." names a folder too
    side = load_side(folder, name, force=True, verb="report")
    repeats = _repeats(folder, side)
    names = [r.name for r in repeats if r.run is not None]
    sections = _sections(side, names, [r.verdicts for r in repeats if r.run is not None])
    panels = _panels(side) if side.steps else []
    plan = side.first.plan if isinstance(side.first.plan, dict) else {}
    return {
        "folder": name,
        "plan_name": plan.get("name", "—"),
        "digest": side.plan_digest,
        "scale": f"{' → '.join(f'{s.nodes:,}' for s in side.steps)} nodes" if side.steps else "no steps recorded",
        "count": count_text(len(repeats)),
        "banner": headline(repeats),
        "repeats": repeats,
        "names": names,
        "notes": side.notes,
        "steps": sections,
        "panels": panels,
        "figures": charts.payload(panels),
        "embedded": page.embedded("repeats", [(folder.name, run) for run, folder
                                              in zip(side.runs, side.folders, strict=True)]),
    }, _suites(name, repeats, sections)


def write_repeats_report(folder: Path) -> Path:
    """Write folder/report.html and folder/junit.xml for a folder of repeats; return the HTML path."""
    folder = Path(folder)
    shown, suites = context(folder)
    junit.write(folder / junit.JUNIT_FILE, f"loadtest {shown['folder']} ({shown['count']})", suites)
    return page.write(folder / REPEATS_FILE, page.render("repeats.html", **shown))
