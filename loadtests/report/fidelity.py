"""The report's view of a replay's fidelity: its capture at the window's close beside the original × k (counts per
kind, sizes, rates per class, watches, the replayed share), each target's verdict, and what was not replayed."""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.analysis import fidelity as analysis
from loadtests.capture.compare import MET, MISSED, NOT_JUDGED, Fidelity, Judged
from loadtests.results import StepResult
from loadtests.results.fidelity import ReplayFidelity

CSS = {MET: "pass", MISSED: "fail"}  # any other verdict (not measured, not judged) is shown as skipped


@dataclass
class FidelityView:
    found: ReplayFidelity
    fidelity: Fidelity | None  # None: not compared (found.error says why)
    tally: dict[str, int]  # met, missed, not measured, not judged
    group_tally: list[tuple[str, int, int, int]]  # group, met, missed, neither

    @staticmethod
    def css(judged: Judged | None) -> str:
        return "" if judged is None else CSS.get(judged.verdict, "skip")

    @staticmethod
    def difference(judged: Judged | None) -> str:
        """"+3.2 %" (relative) or "+2" (exact); "—" where not measured."""
        if judged is None or judged.difference is None:
            return "—"
        if judged.relative:
            return f"{judged.difference * 100:+.1f} %"
        return f"{judged.difference:+,.0f}"


def fidelity_view(step: StepResult) -> FidelityView | None:
    found = step.replay_fidelity
    if found is None:
        return None
    verdicts = analysis.verdicts(step)
    groups = []
    for group in analysis.GROUPS:
        mine = [v.passed for v in verdicts if v.group == group]
        if mine:
            groups.append((group, mine.count(True), mine.count(False), mine.count(None)))
    judged = sum(v.verdict == NOT_JUDGED for v in verdicts)
    tally = {MET: sum(v.passed is True for v in verdicts), MISSED: sum(v.passed is False for v in verdicts),
             "not measured": sum(v.passed is None for v in verdicts) - judged, NOT_JUDGED: judged}
    return FidelityView(found, analysis.fidelity_of(found), tally, groups)
