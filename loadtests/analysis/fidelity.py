"""A replay's fidelity targets as verdicts, read from a step's replay_fidelity section (results/fidelity.py): one
per target of capture/compare.py (each kind's count, its size p50 and p99, each class's rate, each resource's
watches, the replayed share), as the SLOs are one per SLO. A target "not measured" is neither passed nor failed
(as an SLO with no samples), nor is a figure "not judged" (no target a replay controls, e.g. Events' count): JUnit
skips it and the exit code does not rest on it; a missed one fails the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtests.capture.compare import MET, MISSED, NOT_JUDGED, ClassFidelity, Fidelity, Judged
from loadtests.results import RunResult, StepResult
from loadtests.results.fidelity import ReplayFidelity
from loadtests.results.schema import build

GROUPS = ("objects", "sizes", "rates", "watches", "replayed")


@dataclass(frozen=True)
class FidelityVerdict:
    """One fidelity target of one step: `passed` None where it is not measured."""

    group: str  # one of GROUPS
    check: str  # "objects Pod", "size p99 ConfigMap", "rate list pods (namespace, node)", ...
    passed: bool | None
    value: str  # the replay's figure beside the original's × k
    threshold: str  # "exact", "within 10 %", "at least 95 %"
    reason: str = ""  # why not measured, or not judged
    verdict: str = ""  # capture/compare.py's: met, missed, not measured, not judged


def fidelity_of(found: ReplayFidelity | None) -> Fidelity | None:
    """The comparison a step recorded, as capture/compare.py's types again (None: not compared)."""
    return build(Fidelity, found.compared) if found is not None and found.compared else None


def _number(value: float | None) -> str:
    return "not measured" if value is None else f"{value:,.4g}" if isinstance(value, float) else f"{value:,}"


def _judged(group: str, check: str, judged: Judged, why: str = "") -> FidelityVerdict:
    """One target; `why`: the figure's note, the reason of one not judged (no target a replay controls)."""
    passed = True if judged.verdict == MET else False if judged.verdict == MISSED else None
    value = f"replay {_number(judged.replay)} vs original × k {_number(judged.original)}"
    reason = "" if passed is not None else f"not judged: {why}" if judged.verdict == NOT_JUDGED else \
        "not measured on both sides"
    return FidelityVerdict(group, check, passed, value, judged.target, reason, judged.verdict)


def _name(kind: str, group: str) -> str:
    return f"{kind}.{group}" if group else kind


def _class(row: ClassFidelity) -> str:
    where = f"{row.resource}{'.' + row.group if row.group else ''}{'/' + row.subresource if row.subresource else ''}"
    return f"rate {row.verb} {where} ({row.scope}, {row.client_class})"


def verdicts(step: StepResult) -> list[FidelityVerdict]:
    """Every fidelity target of a step, in the comparison's order; a step that replays nothing has none, and one
    whose capture or comparison failed has one, not measured, saying why."""
    found = step.replay_fidelity
    if found is None:
        return []
    fidelity = fidelity_of(found)
    if fidelity is None:
        return [FidelityVerdict("replayed", "replay captured", None, "not compared", "a capture of the replay",
                                found.error or "not compared")]
    out = [_judged("objects", f"objects {_name(k.kind, k.group)}", k.count, k.note) for k in fidelity.kinds]
    out += [_judged("sizes", f"size {q} {_name(k.kind, k.group)}", judged, k.size_note) for k in fidelity.kinds
            for q, judged in (("p50", k.size_p50), ("p99", k.size_p99)) if judged is not None]
    out += [_judged("rates", _class(c), c.per_second) for c in fidelity.classes]
    out += [_judged("watches", f"watches {_name(w.resource, w.group)}", w.open, w.note) for w in fidelity.watches]
    if fidelity.replayed is not None:
        share = fidelity.replayed.share
        shown = "not measured" if share is None else f"{share * 100:.1f} %"
        passed = True if fidelity.replayed.verdict == MET else False if fidelity.replayed.verdict == MISSED else None
        out.append(FidelityVerdict("replayed", "requests in replayed classes", passed, shown,
                                   fidelity.replayed.target, "" if passed is not None else "not measured"))
    return out


def run_verdicts(run: RunResult) -> list[tuple[StepResult, FidelityVerdict]]:
    return [(step, verdict) for step in run.steps for verdict in verdicts(step)]
