"""The results of a run: the one format every later stage reads (report, JUnit, compare).

A results folder holds `results.json`. It is rewritten after every finished step (write to a temp file, then
rename), so a crash loses no finished step. Only measurements are stored; verdicts and charts are computed
from them by the report, so nothing is stored twice.

This module holds the run and each step's frame; the measurements of a step are its sections, one module each
in this package, registered in results/sections.py: each section's docstring says what its keys hold (loadgen:
client, rates, workers; apiserver: server, requests_by_code, server_requests, apiserver, storage_objects;
objects; etcd; watchers: pod_startup, watch_delay; controlled; scheduling; processes: processes,
machine_cpu_percent, machine_cpu_seconds; health; audit; roll: roll, restart; profiles; replay_fidelity;
promql: promql, promql_window). A step's
keys stay flat in the file, the frame's and its sections' side by side, so files of every version read alike. A
page's carried results are in results/embedded.py.

Schema (version 1), all times in seconds, sizes in bytes, rates per second:

    schema_version: 1
    run_id, status ("running" | "complete" | "aborted"), error (one line or null)
    started_at, finished_at: ISO-8601 UTC
    plan: the validated plan as a mapping (see loadtests/config/plan.py); plan_digest: sha256 of its steps+load
    environment: versions (kubernetes, etcd, kwok, locust, python), target, machine (cpus, memory, platform)
    clients: who the harness's clients were to the apiserver's flow control (ClientClass, results/flow_control.py;
        [] where not measured, as in files written before it)
    steps: list of StepResult, in order: its frame, then each section's keys (results/sections.py):
        index, name, nodes, pods_per_node, started_at, duration_s (measured window)
        ramp: nodes_ready_s, pods_running_s (time to reach the step's scale), harness_cpu_s (the harness's CPU
            during the node ramp), load_spawn_s (time until every load user ran, before the window opened)
        ... each section's keys ...
        window: {opened_at, closed_at}: the measured window in UTC (ISO-8601)
        notes: list of strings (warnings measured during the step, e.g. load generator CPU-bound)
        events: list of StepEvent: what the cluster survived during the step ({at, t_s, what})
        status: "measured", or "saturated" when nodes or pods did not converge within ramp_timeout_s (the
            breaking point: the run stops growing); saturation: {condition, evidence} of a saturated step
        section_versions: {section: version} for each section whose version is above 1 (absent: every
            section at 1, as in every file written so far)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from loadtests.errors import UnreadableFile, text_of, unreadable
from loadtests.results.flow_control import ClientClass
from loadtests.results.schema import build
from loadtests.results.sections import SECTIONS

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
REPORT_SUFFIXES = (".html", ".htm")
SECTION_VERSIONS = "section_versions"  # a step's key: {section: version} where a version is above 1

T = TypeVar("T")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def utc_at(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


@dataclass
class StepEvent:
    """Something that happened to the control plane during a step that the cluster went on without: an etcd
    member or an apiserver of several lost, and later back (the health watch's; see controlplane/health.py)."""

    at: str  # UTC, ISO-8601
    t_s: float  # seconds since the step started (its ramp included)
    what: str


@dataclass(init=False)
class StepResult:
    """One step of a run: its frame (what it was, when, how it ended) and its sections (section key -> the
    measurements of the part that owns them; every registered section is there, empty where not measured).

    A section's field reads and writes as the step's attribute (step.etcd, step.client = [...], and
    StepResult(..., client=[...])), so readers need not know which section holds a figure; step.section(cls)
    and step.put(section) are the typed way."""

    index: int
    name: str
    nodes: int
    pods_per_node: int
    started_at: str
    duration_s: float
    ramp: dict[str, float | None]
    sections: dict[str, Any]  # written between the frame's head and its tail, each section's keys flat
    # when the measured window opened and closed (UTC, ISO-8601), to line it up with other monitoring
    window: dict[str, str]
    notes: list[str]
    events: list[StepEvent]  # what the cluster survived during the step
    # "measured", or "saturated": the control plane did not converge (the run's breaking point); then
    # saturation says what did not ({"condition": ..., "evidence": ...}) and the figures above are empty
    status: str
    saturation: dict[str, str]

    def __init__(self, index: int, name: str, nodes: int, pods_per_node: int, started_at: str, duration_s: float,
                 ramp: dict[str, float | None] | None = None, *, window: dict[str, str] | None = None,
                 notes: list[str] | None = None, events: list[StepEvent] | None = None, status: str = "measured",
                 saturation: dict[str, str] | None = None, sections: dict[str, Any] | None = None,
                 **measured: Any) -> None:
        # sections: given whole by dataclasses.replace, which passes every field; else each empty until measured
        self.sections = {section.key: (sections or {}).get(section.key) or section.empty() for section in SECTIONS}
        self.index, self.name, self.nodes, self.pods_per_node = index, name, nodes, pods_per_node
        self.started_at, self.duration_s, self.ramp = started_at, duration_s, {} if ramp is None else ramp
        self.window = {} if window is None else window
        self.notes = [] if notes is None else notes
        self.events = [] if events is None else events
        self.status, self.saturation = status, {} if saturation is None else saturation
        for key, value in measured.items():
            if SECTIONS.owner(key) is None:
                raise TypeError(f"StepResult() got an unexpected keyword argument {key!r}")
            setattr(self, key, value)

    def section(self, cls: type[T]) -> T:
        """The step's section of this class (its empty default if the step has none yet)."""
        key = SECTIONS.of(cls).key
        found = self.sections.get(key)
        if found is None:
            found = self.sections[key] = cls()
        return typing.cast(T, found)

    def put(self, section: Any) -> None:
        """Set (replace) the step's section of the given object's class."""
        self.sections[SECTIONS.of(type(section)).key] = section

    def __getattr__(self, name: str) -> Any:
        # only called for what is not the frame's: a section's field, read from the section that owns it
        owner = SECTIONS.owner(name)
        if owner is None or "sections" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.section(owner.cls), name)

    def __setattr__(self, name: str, value: Any) -> None:
        owner = SECTIONS.owner(name)
        if owner is None:
            object.__setattr__(self, name, value)
        else:
            setattr(self.section(owner.cls), name, value)


FRAME = tuple(f for f in dataclasses.fields(StepResult) if f.name != "sections")
if _clash := {f.name for f in FRAME} & SECTIONS.fields:  # a section would hide the frame's own key
    raise ValueError(f"step keys owned by both the frame and a section: {sorted(_clash)}")


@dataclass
class RunResult:
    run_id: str
    plan: dict[str, Any]
    environment: dict[str, Any]
    started_at: str = field(default_factory=utc_now)
    finished_at: str | None = None
    status: str = "running"
    error: str | None = None
    clients: list[ClientClass] = field(default_factory=list)  # measured once, after the target is up
    steps: list[StepResult] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @property
    def plan_digest(self) -> str:
        return plan_digest(self.plan)


# Scenario parameters added after runs were recorded, at the value that asks for what those runs did: left out of
# a plan's digest, so that a run from before the parameter and one from after still compare (a baseline, a noise
# floor). config/scenarios.py declares them with these defaults; a unit test holds the two equal.
DIGEST_NEUTRAL: dict[str, dict[str, Any]] = {"kubelet_watchers": {"encoding": "json"},
                                            "list_pollers": {"encoding": "json"},
                                            "objects": {"namespaces": 0}}


def plan_digest(plan: dict[str, Any]) -> str:
    """Identity of what a plan asks for (steps, load and the fleet's shapes), ignoring the target, gating and name.

    Two runs with the same digest can be compared figure by figure, even across Kubernetes versions.
    """
    load = plan.get("load")
    if isinstance(load, dict):
        load = {name: _without_neutral(name, params) for name, params in load.items()}
    relevant = {"steps": plan.get("steps"), "load": load}
    if plan.get("fleet"):  # the nodes' shapes, where a plan gives them (absent: the same digest as before them)
        relevant["fleet"] = plan["fleet"]
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def _without_neutral(scenario: str, params: Any) -> Any:
    neutral = DIGEST_NEUTRAL.get(scenario, {})
    if not isinstance(params, dict) or not neutral:
        return params
    return {k: v for k, v in params.items() if k not in neutral or v != neutral[k]}


def _flat_step(step: dict[str, Any]) -> dict[str, Any]:
    """A step as dataclasses.asdict gives it (its sections nested) as results.json holds it: the frame's keys
    and every section's side by side, in the registry's order."""
    out: dict[str, Any] = {}
    for key, value in step.items():
        if key != "sections":
            out[key] = value
            continue
        for section in SECTIONS:
            found = value.get(section.key)
            out.update(dataclasses.asdict(section.empty()) if found is None else found)
    versions = {section.key: section.version for section in SECTIONS if section.version != 1}
    if versions:
        out[SECTION_VERSIONS] = versions
    return out


def step_dict(step: StepResult) -> dict[str, Any]:
    """One step as results.json holds it (flat: a section's fields are the step's keys)."""
    return _flat_step(dataclasses.asdict(step))


def to_dict(run: RunResult) -> dict[str, Any]:
    data = dataclasses.asdict(run)
    data["steps"] = [_flat_step(step) for step in data["steps"]]
    data["plan_digest"] = run.plan_digest
    return data


def step_from_dict(data: dict[str, Any]) -> StepResult:
    """A step from its keys in results.json: the frame's, then each section's by its registered loader."""
    hints = typing.get_type_hints(StepResult)
    step = StepResult(**{f.name: build(hints[f.name], data[f.name]) for f in FRAME if f.name in data})
    versions = data.get(SECTION_VERSIONS) or {}
    for section in SECTIONS:
        version = versions.get(section.key, 1)
        if version > section.version:
            raise UnreadableFile(f"results section {section.key!r} version {version!r} is not supported (this "
                                 f"tool reads up to {section.version})")
        step.put(section.read(data, version))
    return step


def from_dict(data: dict[str, Any]) -> RunResult:
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UnreadableFile(f"results schema version {version!r} is not supported (this tool reads "
                             f"{SCHEMA_VERSION})")
    run: RunResult = build(RunResult, {key: value for key, value in data.items() if key != "steps"})
    steps = data.get("steps", [])
    if isinstance(steps, list):
        run.steps = [step_from_dict(step) if isinstance(step, dict) else step for step in steps]
    else:  # kept as it is, as the generic builder keeps what it cannot read; its readers say what is wrong
        run.steps = steps
    return run


def save(run: RunResult, folder: Path) -> Path:
    """Write results.json atomically, so a reader, a crash or a full disk never leaves half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / RESULTS_FILE
    tmp = folder / f".{RESULTS_FILE}.tmp"
    try:
        tmp.write_text(json.dumps(to_dict(run), indent=1))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)  # the last good file stays as it was
        raise
    return target


def load(folder: Path) -> RunResult:
    """A run folder's results (or a results.json named itself). What is not readable results is refused in one
    line naming the file (UnreadableFile, exit 2); a report page given for its folder says what to give."""
    if Path(folder).suffix.lower() in REPORT_SUFFIXES and not Path(folder).is_dir():
        raise UnreadableFile(f"{folder} is a report page, not a run folder: give the folder it was written into "
                             f"(the one that holds {RESULTS_FILE} beside it, e.g. reports/<run-id>)")
    path = folder / RESULTS_FILE if folder.is_dir() else folder
    try:
        text = path.read_bytes()
    except FileNotFoundError as error:
        raise FileNotFoundError(f"no {RESULTS_FILE} in {folder}: is it a run folder (reports/<run-id>)?") from error
    except IsADirectoryError as error:
        raise unreadable(path, "results file", error) from None
    if text.lstrip()[:1] == b"<":
        raise UnreadableFile(f"{path} holds a web page, not results: give the run folder (reports/<run-id>)")
    try:
        data = json.loads(text_of(text, path, "results file", "rerun the run, or restore the file"))
    except UnreadableFile:
        raise  # not text: it says so, naming the file
    except ValueError as error:
        raise unreadable(path, "results file", error, "it is not JSON; rerun the run, or restore the file") from None
    if not isinstance(data, dict):
        raise UnreadableFile(f"{path}: not a readable results file (a JSON {type(data).__name__}, not a mapping)")
    try:
        return from_dict(data)
    except UnreadableFile as error:
        raise UnreadableFile(f"{path}: {error}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise unreadable(path, "results file", error) from None
