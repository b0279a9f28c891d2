"""A lesson's runs on disk: each variant's folder (one run, or its repeat-<k>/ folders) read into the complete runs
the figures come from and those no verdict may rest on, each run's values of a measure (query.py reads them from
a step), what the runs recorded beyond the figures, and a lesson folder's lesson.json read back."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests import results
from loadtests.analysis.query import read, reading
from loadtests.analysis.samples import repeat_folders
from loadtests.analysis.scrapes import kept_page, step_folder
from loadtests.config.lesson import Measure, Variant
from loadtests.errors import UnreadableFile, read_text, unreadable
from loadtests.results import RunResult, StepResult

LESSON_RESULTS = "lesson.json"


@dataclass
class VariantRuns:
    """A variant's runs (one, or its repeats): the complete ones, which the figures come from, and those that
    were aborted, recorded nothing or never ran, which no verdict rests on."""

    variant: Variant
    folder: Path
    runs: list[tuple[RunResult, Path]] = field(default_factory=list)  # complete runs
    aborted: list[tuple[RunResult, Path]] = field(default_factory=list)  # runs that did not complete
    missing: list[str] = field(default_factory=list)  # run folders that recorded nothing
    never_ran: bool = False  # no folder at all: the lesson stopped before this variant

    @staticmethod
    def load(variant: Variant, folder: Path) -> VariantRuns:
        found = VariantRuns(variant, folder)
        if not folder.is_dir():
            found.never_ran = True
            return found
        for run_folder in repeat_folders(folder) or [folder]:
            try:
                run = results.load(run_folder)
            except (OSError, ValueError):
                found.missing.append(str(run_folder))
                continue
            (found.runs if run.status == "complete" else found.aborted).append((run, run_folder))
        return found

    @property
    def state(self) -> str:
        """"complete", or why no verdict may rest on this variant: "never ran", "aborted", "recorded nothing"."""
        if self.never_ran:
            return "never ran"
        if self.aborted:
            return "aborted"
        if self.missing or not self.runs:
            return "recorded nothing"
        return "complete"

    def measured_steps(self) -> list[tuple[list[StepResult], Path]]:
        return [([s for s in run.steps if s.status == "measured"], path) for run, path in self.runs]

    def last_readings(self, measure: Measure) -> list[tuple[float, str]]:
        """The measure at the last measured step of every complete run (runs where it was not measured left out)."""
        found = []
        for steps, path in self.measured_steps():
            if steps:
                value, bound = reading(measure, steps[-1], step_folder(path, steps[-1].index))
                if value is not None and math.isfinite(value):
                    found.append((value, bound))
        return found

    def per_step(self, measure: Measure) -> list[tuple[int, list[float]]]:
        """(nodes, the value of every complete run) at every measured step."""
        by_nodes: dict[int, list[float]] = {}
        for steps, path in self.measured_steps():
            for step in steps:
                value = read(measure, step, step_folder(path, step.index))
                if value is not None and math.isfinite(value):
                    by_nodes.setdefault(step.nodes, []).append(value)
        return sorted(by_nodes.items())


FEATURE_METRIC = "kubernetes_feature_enabled"  # 1 per gate the apiserver reports as on, 0 as off


def feature_states(runs: VariantRuns, features: list[str]) -> dict[str, str]:
    """Each feature gate's state in the variant's first run, from its kept apiserver page."""
    states: dict[str, str] = {}
    for steps, path in runs.measured_steps()[:1]:
        if not steps:
            continue
        end = kept_page(step_folder(path, steps[-1].index), "apiserver", "end", frozenset({FEATURE_METRIC}))
        for feature in features:
            value = end.total(FEATURE_METRIC, name=feature) if end is not None else None
            states[feature] = "not listed" if value is None else "enabled" if value else "disabled"
    return states


def recorded(runs: VariantRuns) -> list[str]:
    """What the variant's runs recorded beyond the figures: errors, alarms, refused writes, notes."""
    lines = ["never ran: the lesson stopped before this variant"] if runs.never_ran else []
    for run, path in [*runs.runs, *runs.aborted]:
        name = path.name if path != runs.folder else runs.variant.name
        if run.status != "complete":
            lines.append(f"{name}: run {run.status}" + (f": {run.error}" if run.error else ""))
        for step in run.steps:
            where = f"{name}, step {step.name}"
            if step.status == "saturated":
                lines.append(f"{where}: saturated: {step.saturation.get('condition')}: "
                             f"{step.saturation.get('evidence')}")
            if step.etcd.alarms:
                lines.append(f"{where}: etcd alarm raised: {', '.join(step.etcd.alarms)}")
            codes = {c: n for c, n in step.requests_by_code.items() if c.startswith("5") or c == "429"}
            if codes:
                answered = ", ".join(f"{n:,} × {c}" for c, n in sorted(codes.items()))
                lines.append(f"{where}: apiserver answered {answered}")
            lines.extend(f"{where}: {note}" for note in step.notes)
    lines.extend(f"{m}: recorded no results" for m in runs.missing)
    return lines


def lesson_record(folder: Path) -> dict[str, Any]:
    """A lesson folder's lesson.json, as written by write_lesson_report; what is not one is refused in one line
    naming the file (exit 2)."""
    path = folder / LESSON_RESULTS
    fix = "rebuild it: loadtest lesson ... --out on that folder, or remove the folder"
    try:
        text = read_text(path, "lesson record", fix)
    except OSError as error:
        raise unreadable(path, "lesson record", error, fix) from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise unreadable(path, "lesson record", error, fix) from None
    if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list) or "verdict" not in data:
        raise UnreadableFile(f"{path}: not a readable lesson record (no verdict and comparisons)")
    return data
