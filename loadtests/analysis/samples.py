"""One side of a comparison: the runs it is made of, loaded from the folders the user named.

A folder is either a run folder (its results.json) or the folder of a repeated run (`loadtest run --repeat N`
writes one folder with a subfolder per repeat, `repeat-1/`, `repeat-2/`, ..., each a run folder); a report page
(report.html of a run or of repeats) stands for the runs it carries. A side may also be several of these.
Every run of a side must come from the same plan (the same plan digest: steps and load), unless forced.
`readings` gives every compared figure of a side as its runs measured it, each value with the bound the results
recorded for it (a quantile inside one histogram bucket is a bound).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadtests.analysis import figures
from loadtests.errors import CompareError, UnreadableFile
from loadtests.results import REPORT_SUFFIXES, RESULTS_FILE, RunResult, StepResult, load
from loadtests.results.embedded import runs_from_html

REPEAT_DIR = re.compile(r"repeat-(\d+)")

Key = tuple[str, str]  # a figure: (chart, name), as figures.Series names it
Reading = tuple[float, str]  # a value and its bound: "" (a value), "<" (at most it), ">" (at least it)
Readings = dict[Key, dict[int, list[Reading]]]  # figure -> step index -> one reading per run that measured it


@dataclass
class Side:
    """The runs of one side (A, the baseline, or B, the candidate), in the order they were named."""

    label: str
    runs: list[RunResult]
    folders: list[Path]
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def first(self) -> RunResult:
        return self.runs[0]

    @property
    def run_id(self) -> str:
        """The run's id, or for several runs the first one's and how many there are."""
        if self.n == 1:
            return self.first.run_id
        return f"{self.first.run_id} (+{self.n - 1} more, {self.n} runs)"

    @property
    def plan_digest(self) -> str:
        return self.first.plan_digest

    @property
    def steps(self) -> list[StepResult]:
        """Every step index recorded by any run, each as its first run recorded it, in index order."""
        found: dict[int, StepResult] = {}
        for run in self.runs:
            for step in run.steps:
                found.setdefault(step.index, step)
        return [found[i] for i in sorted(found)]

    @property
    def incomplete(self) -> list[tuple[RunResult, Path]]:
        """The runs that did not complete (aborted or still running), with their folders."""
        return [(run, folder) for run, folder in zip(self.runs, self.folders, strict=True)
                if run.status != "complete"]


def repeat_folders(folder: Path) -> list[Path]:
    """The repeat-<k> subfolders of a repeated run, by k."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir()
             if p.is_dir() and (m := REPEAT_DIR.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def _read(path: Path, verb: str) -> RunResult:
    """One run's results, or one line saying why they cannot be read."""
    try:
        return load(path)
    except FileNotFoundError:
        raise CompareError(f"cannot {verb}: no {RESULTS_FILE} in {path} and no repeat-*/ subfolders with one "
                           "(expected a run folder, reports/<run-id>, or the folder of a repeated run)") from None
    except OSError as error:
        raise CompareError(f"cannot {verb}: cannot read {path}: {error.strerror or error}") from None
    except UnreadableFile as error:
        raise CompareError(f"cannot {verb}: {error}") from None


def is_report_page(path: Path) -> bool:
    """A report's HTML file (it carries its runs' results), rather than a run folder."""
    return Path(path).suffix.lower() in REPORT_SUFFIXES and Path(path).is_file()


def _from_page(path: Path, verb: str) -> list[tuple[str, RunResult]]:
    """The runs a report page carries, or one line saying why it carries none."""
    try:
        return runs_from_html(path)
    except UnreadableFile as error:
        raise CompareError(f"cannot {verb}: {error}") from None


def _expand(folder: Path, verb: str) -> tuple[list[Path], list[str]]:
    """The run folders a named folder stands for, and notes on repeats that left no results."""
    repeats = repeat_folders(folder)
    if not repeats:
        return [folder], []
    found = [p for p in repeats if (p / RESULTS_FILE).is_file()]
    notes = [f"{p} has no {RESULTS_FILE} (the repeat recorded no step): left out" for p in repeats if p not in found]
    if not found:
        raise CompareError(f"cannot {verb}: none of the {len(repeats)} repeat-*/ subfolders of {folder} holds a "
                           f"{RESULTS_FILE}")
    return found, notes


def load_side(folders: Path | Sequence[Path], label: str, force: bool = False, verb: str = "compare",
              force_flag: str = "--force") -> Side:
    """The runs of one side: each folder a run folder or a folder of repeats (repeat-1/, repeat-2/, ...).

    Runs of different plans on one side are refused in one line unless `force` (the flag that sets it named as
    `force_flag`, as the user types it); a note then says so. A folder that cannot be read is refused in one
    line, "cannot <verb>: ..."."""
    named = [Path(folders)] if isinstance(folders, str | Path) else [Path(f) for f in folders]
    if not named:
        raise CompareError(f"cannot {verb}: side {label} names no folder")
    paths, notes, runs = [], [], []
    for folder in named:
        if is_report_page(folder):
            for name, run in _from_page(folder, verb):
                paths.append(folder.with_name(f"{folder.name}#{name}") if name else folder)
                runs.append(run)
            continue
        found, left_out = _expand(folder, verb)
        paths += found
        notes += left_out
        runs += [_read(p, verb) for p in found]
    if len({p.resolve() for p in paths}) != len(paths):
        raise CompareError(f"cannot {verb}: side {label} names the same run folder twice")
    digests: dict[str, list[str]] = {}
    for run, path in zip(runs, paths, strict=True):
        digests.setdefault(run.plan_digest, []).append(path.name)
    if len(digests) > 1:
        mix = "; ".join(f"digest {d} ({', '.join(names)})" for d, names in digests.items())
        if not force:
            raise CompareError(f"cannot {verb}: side {label} mixes runs of different plans ({mix}); "
                               f"pass {force_flag} to compare anyway")
        notes.append(f"side {label} mixes runs of different plans ({mix}); compared anyway (forced)")
    return Side(label=label, runs=runs, folders=paths, notes=notes)


def readings(side: Side, every: bool = False) -> tuple[Readings, dict[Key, str | None]]:
    """Every compared figure's readings per step across the side's runs, and each figure's rule (None for a figure
    that is shown only); `every` takes the shown-only figures too. SLO threshold lines are not measurements."""
    found: Readings = {}
    rules: dict[Key, str | None] = {}
    for run in side.runs:
        for s in figures.series(run):
            if s.slo_line or not (s.rule or every):
                continue
            key = (s.chart, s.name)
            rules.setdefault(key, s.rule)
            per_step = found.setdefault(key, {})
            for position, (step, value) in enumerate(zip(run.steps, s.values, strict=True)):
                if value is not None:
                    per_step.setdefault(step.index, []).append((float(value), s.bound(position)))
    return found, rules
