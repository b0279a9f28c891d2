"""Where the CPU went: a step's pprof profiles as tables (top functions, groups, heap in use), and the groups'
shares step by step. Read from results only (step.profiles), so a report rebuilt elsewhere says the same; the
raw files the rows came from are named beside them, for `go tool pprof`."""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtests.analysis import profiles as analysis
from loadtests.analysis.formats import duration, percent, size
from loadtests.results import RunResult, StepResult
from loadtests.results.profiles import ComponentProfile

TOP_ROWS = 10


@dataclass
class FunctionRow:
    name: str  # the full name, as pprof shows it
    short: str  # without its package's path
    flat_pct: float
    cum_pct: float


@dataclass
class ProfileTable:
    """One profile of one component, as the step's section shows it."""

    component: str
    kind: str
    source: str  # what was profiled, when, how much, and which file
    rows: list[FunctionRow] = field(default_factory=list)
    groups: list[tuple[str, float, float]] = field(default_factory=list)  # group, flat %, cum %


@dataclass
class StepProfiles:
    cpu: list[ProfileTable]
    heap: list[ProfileTable]
    files: list[str]  # every raw file of the step, for the note on opening them


@dataclass
class ChangeTable:
    """One component's groups, a column per step: share of its CPU profile ("—": that step was not profiled), and
    the change in points from the first profiled step to the last."""

    component: str
    steps: list[str]
    rows: list[tuple[str, list[str], str]]  # group, share per step, change


def signed_points(points: float | None) -> str:
    """A change in points of a share, its sign shown (none on a change that rounds to zero)."""
    if points is None:
        return "—"
    return "0.0" if abs(points) < 0.05 else f"{points:+.1f}"


def short_name(name: str) -> str:
    """A function without its package's path: k8s.io/apiserver/pkg/storage/cacher.(*Cacher).Watch ->
    cacher.(*Cacher).Watch."""
    head, slash, tail = name.rpartition("/")
    return tail if slash and "." in tail else name


def _cpu_source(profile: ComponentProfile, step: StepResult) -> str:
    busy = analysis.cpu_percent(profile)
    measured = next((p.cpu_percent for p in step.processes if p.component == profile.component), None)
    window = f" of the {duration(step.duration_s)} window" if step.duration_s else ""
    cpu = "" if profile.total is None else f": {duration(profile.total / 1e9)} on a CPU"
    if busy is not None:
        cpu += f" ({percent(busy)} of a core"
        cpu += f"; psutil over the whole window: {percent(measured)})" if measured is not None else ")"
    when = f"{duration(profile.seconds)}{window}" if profile.seconds is not None else "the window"
    start = f", from {duration(profile.offset_s)} after it opened" if profile.offset_s is not None else ""
    return (f"{profile.component} · pprof CPU profile (/debug/pprof/profile) over {when}{start}{cpu}; "
            f"% of the profile's samples · {', '.join(profile.files)}")


def _heap_source(profile: ComponentProfile) -> str:
    total = f"{size(profile.total)} in use" if profile.total is not None else "in use"
    when = f" {duration(profile.offset_s)} after the window opened" if profile.offset_s is not None else ""
    return (f"{profile.component} · pprof heap profile (/debug/pprof/heap,{when} at the window's close): {total}, "
            f"sampled by the Go runtime (objects allocated and not yet freed by the last GC), by allocating "
            f"function · {', '.join(profile.files)}")


def _table(profile: ComponentProfile, step: StepResult) -> ProfileTable:
    rows = [FunctionRow(f.name, short_name(f.name), f.flat_pct, f.cum_pct) for f in profile.functions[:TOP_ROWS]]
    source = _cpu_source(profile, step) if profile.kind == "cpu" else _heap_source(profile)
    return ProfileTable(profile.component, profile.kind, source, rows,
                        [(g.group, g.flat_pct, g.cum_pct) for g in profile.groups])


def _order(profiles: list[ComponentProfile]) -> list[ComponentProfile]:
    return sorted(profiles, key=lambda p: (analysis.component_kind(p.component) != analysis.APISERVER,
                                           p.component))


def step_profiles(step: StepResult) -> StepProfiles | None:
    """The step's profile tables, the apiservers first; None where the step was not profiled."""
    if not step.profiles:
        return None
    cpu = [_table(p, step) for p in _order([p for p in step.profiles if p.kind == "cpu"])]
    heap = [_table(p, step) for p in _order([p for p in step.profiles if p.kind == "heap"])]
    return StepProfiles(cpu, heap, [f for p in step.profiles for f in p.files])


CPU_ROW = "on a CPU, % of a core (the profile's samples over its seconds)"


def _busy_row(run: RunResult, component: str) -> tuple[str, list[str], str]:
    """What the shares are shares of: the component's CPU at each step, as its profile counted it."""
    busy = [None if (found := analysis.find(step.profiles, component, "cpu")) is None else analysis.cpu_percent(found)
            for step in run.steps]
    measured = [b for b in busy if b is not None]
    return CPU_ROW, [percent(b) for b in busy], signed_points(measured[-1] - measured[0] if len(measured) > 1 else None)


def change_tables(run: RunResult) -> list[ChangeTable]:
    """Per profiled component, its CPU groups' shares at every step side by side, under its CPU at each step (empty:
    fewer than two steps, or none profiled)."""
    if len(run.steps) < 2:
        return []
    names = [step.name for step in run.steps]
    return [ChangeTable(component, names, [_busy_row(run, component)] + [
        (row.group, [percent(share) for share in row.shares], signed_points(row.change))
        for row in analysis.group_changes(run, component)]) for component in analysis.profiled_components(run)]
