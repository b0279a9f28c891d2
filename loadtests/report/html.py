"""The run report: one self-contained HTML file (and junit.xml) rebuilt from results.json alone.

Everything shown is read from the results or computed from them here (verdicts, warnings, charts), so a report
can be regenerated on another machine, with other thresholds, long after the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from loadtests.analysis import figures
from loadtests.analysis.fidelity import run_verdicts as fidelity_verdicts
from loadtests.analysis.flow_control import ClientInStep, clients_in_step
from loadtests.analysis.formats import first_few
from loadtests.analysis.promql import plan_queries
from loadtests.analysis.promql import run_verdicts as promql_verdicts
from loadtests.analysis.roll import run_verdicts
from loadtests.analysis.slo import Verdict, classify, resource_label, thresholds, verdicts
from loadtests.config.promql import PromQuery
from loadtests.report import audit, card, charts, junit, page, projection
from loadtests.report.fidelity import FidelityView, fidelity_view
from loadtests.report.health import HealthCell, health_cells, health_details, health_panel, health_warnings
from loadtests.report.profiles import StepProfiles, change_tables, step_profiles
from loadtests.report.promql import PromqlView, promql_view
from loadtests.report.redact import REDACTED_NOTE, redact
from loadtests.report.roll import RollView, roll_view
from loadtests.results import RunResult, StepResult, load
from loadtests.results.flow_control import ClientClass
from loadtests.results.processes import CPU_BOUND_PERCENT

REPORT_FILE = "report.html"

# A scenario achieving less than this share of its asked rate did not deliver the load the plan describes.
RATE_SHORTFALL = 0.9
ETCD_QUOTA_WARNING = 0.8


@dataclass
class StepWarning:
    """A warning about one step, recorded during the run (note) or found in its numbers (measured)."""

    step: str
    text: str
    origin: str  # "note" | "event" (a loss the cluster survived, see results.StepEvent) | "measured"


@dataclass
class StepView:
    """A step with what the template needs beside the raw result: verdict per server entry, warnings."""

    step: StepResult
    server_rows: list[tuple[Any, str, Verdict | None, audit.Clients | None]]  # entry, label, verdict, clients
    warnings: list[StepWarning]
    codes: list[tuple[str, int, str]]  # code, count, css class
    pod_startup_verdict: Verdict | None
    ramp: dict[str, Any] = field(default_factory=dict)
    apiserver_rows: list[tuple[str, str]] = field(default_factory=list)
    storage_rows: list[tuple[str, str, str]] = field(default_factory=list)  # resource, counted, gauge
    count_rows: list[tuple[str, int, int, str]] = field(default_factory=list)  # request, client, apiserver, origins
    health_cells: list[HealthCell] = field(default_factory=list)  # empty: no health recorded
    health_details: list[str] = field(default_factory=list)
    health_panel: charts.Panel | None = None
    client_costs: list[audit.ClientCost] = field(default_factory=list)  # empty: no audit log read
    roll: RollView | None = None  # a rolling upgrade in this step's window
    fidelity: FidelityView | None = None  # a replay's step: its capture against the original × k
    promql: PromqlView | None = None  # the plan's PromQL figures and checks; None: the run had no Prometheus
    profiles: StepProfiles | None = None  # where the CPU went (pprof); None: not profiled
    clients: list[ClientInStep] = field(default_factory=list)  # the run's client classes beside flow control's rows


RECORDED_LOADGEN_NOTE = "load generator CPU-bound"


def step_warnings(step: StepResult) -> list[StepWarning]:
    """The step's recorded notes, then what its numbers show even when no note was recorded."""
    found = [StepWarning(step.name, note, "note") for note in step.notes]
    found += [StepWarning(step.name, f"at {event.t_s:.0f} s into the step: {event.what}", "event")
              for event in step.events]
    # a worker at its limit is a note of the run already (the load's own figures), as is, in files written
    # before workers were recorded, the runner's note that began with these words
    noted_cpu_bound = (any(w.cpu_percent is not None and w.cpu_percent >= CPU_BOUND_PERCENT for w in step.workers)
                       or any(note.startswith(RECORDED_LOADGEN_NOTE) for note in step.notes))
    for proc in step.processes:
        if proc.component != "loadgen" or noted_cpu_bound:
            continue
        cores = max(1, len(proc.pids))
        per_process = proc.cpu_percent / cores
        if per_process >= CPU_BOUND_PERCENT:
            found.append(StepWarning(step.name, (
                f"load generator CPU-bound: {proc.cpu_percent:.0f} % CPU over {cores} process(es) "
                f"({per_process:.0f} % of a core each); achieved rates and client-side latencies show the load "
                "generator's limit, not the control plane's"), "measured"))
    for rate in step.rates:
        if rate.asked_per_s and rate.achieved_per_s < RATE_SHORTFALL * rate.asked_per_s:
            found.append(StepWarning(step.name, (
                f"scenario {rate.scenario} achieved {rate.achieved_per_s:.2f} {rate.unit}"
                f"{'/s' if rate.per_second else ''} of {rate.asked_per_s:.2f} asked "
                f"({rate.achieved_per_s / rate.asked_per_s:.0%})"), "measured"))
    throttled = sum(n for code, n in step.requests_by_code.items() if str(code) == "429")
    errors = sum(n for code, n in step.requests_by_code.items() if str(code).startswith("5"))
    if throttled:
        found.append(StepWarning(step.name, f"{throttled} requests throttled by the apiserver (HTTP 429)", "measured"))
    if errors:
        found.append(StepWarning(step.name, f"{errors} server errors (HTTP 5xx)", "measured"))
    etcd = step.etcd
    if etcd.db_size_bytes and etcd.quota_bytes and etcd.db_size_bytes >= ETCD_QUOTA_WARNING * etcd.quota_bytes:
        found.append(StepWarning(step.name, (
            f"etcd database at {etcd.db_size_bytes / etcd.quota_bytes:.0%} of its quota: writes stop at 100 %"),
            "measured"))
    found += [StepWarning(step.name, text, "measured") for text in health_warnings(step)]
    return found


def _code_class(code: str) -> str:
    if code == "429":
        return "warn"
    if code.startswith("5"):
        return "bad"
    return ""


def _gauge(name: str, value: Any) -> str:
    """An apiserver figure in the unit its name says it has."""
    if not isinstance(value, int | float):
        return page.number(None) if value is None else str(value)
    if "bytes" in name:
        return page.size(value)
    if name.endswith("_s") or "seconds" in name:
        return page.duration(value)
    return page.number(value)


def count_rows(step: StepResult) -> list[tuple[str, int, int, str]]:
    """Each verb+resource the load sent: the client's count (all its request kinds of that verb+resource,
    e.g. "LIST pods (rv=0)" and "LIST pods (informer, rv=0)"; rows of that verb only, so that a RETRY row of the
    same name, whose resends are entries of the request's own row already, is not counted twice) beside the
    apiserver's, and where the audit log says the apiserver's came from."""
    rows = []
    for key, server in sorted(step.server_requests.items()):
        verb = key.partition(" ")[0]
        client = sum(c.count for c in step.client
                     if c.type == verb and (c.name == key or c.name.startswith(key + " ")))
        rows.append((key, client, server, audit.origins(step, key)))
    return rows


def object_rows(step: StepResult) -> list[tuple[str, str, str]]:
    """Objects per resource: counted at the window's close (exact) beside the apiserver's lazily refreshed gauge."""
    names = set(step.objects) | set(step.storage_objects)
    ordered = sorted(names, key=lambda k: (-(step.objects.get(k) or step.storage_objects.get(k) or 0), k))
    return [(k, page.number(step.objects.get(k)), page.number(step.storage_objects.get(k))) for k in ordered]


def step_view(step: StepResult, step_verdicts: list[Verdict], clients: list[ClientClass] | None = None,
              queries: tuple[list[PromQuery], list[PromQuery]] = ([], [])) -> StepView:
    """`queries`: the plan's PromQL figures and checks."""
    by_slo = {v.slo: v for v in step_verdicts}
    rows = []
    for entry in step.server:
        kind = classify(entry)
        rows.append((entry, resource_label(entry), by_slo.get(kind[0]) if kind else None,
                     audit.clients_of(step, entry)))
    codes = sorted(((str(c), n, _code_class(str(c))) for c, n in step.requests_by_code.items()),
                   key=lambda row: row[0])
    return StepView(step=step, server_rows=rows, warnings=step_warnings(step), codes=codes,
                    pod_startup_verdict=by_slo.get("pod startup"), ramp=dict(step.ramp),
                    apiserver_rows=[(k, _gauge(k, v)) for k, v in sorted(step.apiserver.items())],
                    storage_rows=object_rows(step),
                    count_rows=count_rows(step),
                    health_cells=health_cells(step) if step.health.samples else [],
                    health_details=health_details(step), health_panel=health_panel(step),
                    client_costs=audit.client_costs(step), roll=roll_view(step), profiles=step_profiles(step),
                    fidelity=fidelity_view(step), promql=promql_view(step, *queries),
                    clients=clients_in_step(clients or [], step.flow_control))


def verdict_matrix(run: RunResult, found: list[Verdict]) -> list[tuple[str, str, list[Verdict | None]]]:
    """Rows of (SLO, class, verdict per step): the summary table, one column per step."""
    positions = {step.index: i for i, step in enumerate(run.steps)}
    rows: dict[str, tuple[str, list[Verdict | None]]] = {}
    for v in found:
        cells = rows.setdefault(v.slo, (v.slo_class, [None] * len(run.steps)))[1]
        cells[positions[v.step_index]] = v
    return [(slo, cls, cells) for slo, (cls, cells) in rows.items()]


def banner(run: RunResult, found: list[Verdict]) -> dict[str, str]:
    """The headline: ABORTED / INCOMPLETE / FAIL / PASS, with the one line that explains it."""
    failed = sum(v.passed is False for v in found)
    passed = sum(v.passed is True for v in found)
    unjudged = sum(v.passed is None for v in found)
    counts = f"{passed} SLO checks passed, {failed} failed, {unjudged} not judged over {len(run.steps)} step(s)"
    if run.status == "aborted":
        return {"state": "aborted", "label": "ABORTED", "line": run.error or "the run was aborted", "counts": counts}
    if run.status != "complete":
        return {"state": "aborted", "label": "INCOMPLETE",
                "line": f"the run never finished (status {run.status!r}): it may have crashed", "counts": counts}
    saturated = next((s for s in run.steps if s.status == "saturated"), None)
    if saturated is not None:
        failing = {v.step_index for v in found if v.passed is False}
        held = [s.nodes for s in run.steps if s.status != "saturated" and s.index not in failing]
        held_text = f"largest scale that held: {max(held):,} nodes; " if held else "no scale held; "
        return {"state": "fail", "label": "SATURATED", "counts": counts,
                "line": f"{held_text}breaking point at {saturated.name}: {saturated.saturation.get('condition')}: "
                        f"{saturated.saturation.get('evidence')}"}
    rolled = [(step, v) for step, v in run_verdicts(run) if v.passed is False]
    if rolled:
        return {"state": "fail", "label": "FAIL", "counts": counts,
                "line": "rolling upgrade: " + "; ".join(f"{v.check} failed at {step.name} ({v.value}; needed "
                                                        f"{v.threshold})" for step, v in rolled)}
    missed = [f"{v.check} at {step.name} ({v.value})" for step, v in fidelity_verdicts(run) if v.passed is False]
    if missed:
        return {"state": "fail", "label": "FAIL", "counts": counts,
                "line": f"replay fidelity: {len(missed)} target(s) missed: {first_few(missed)}"}
    broken = [f"{v.check} at {step.name} ({v.value}; needed {v.threshold})" for step, v in promql_verdicts(run)
              if v.passed is False]
    if broken and not failed:
        return {"state": "fail", "label": "FAIL", "counts": counts,
                "line": f"PromQL: {len(broken)} check(s) did not hold: {first_few(broken)}"}
    short = [s for s in run.steps if s.scheduling is not None and s.scheduling.passed is False]
    if short and not failed:
        s = short[0].scheduling
        assert s is not None
        return {"state": "fail", "label": "FAIL", "counts": counts,
                "line": f"scheduler throughput at {short[0].name}: at best {s.max:g} pods/s, under the "
                        f"{s.threshold:g} pods/s threshold"}
    if failed:
        worst = [f"{v.slo} at {v.step_name} ({page.duration(v.value_s)} > {page.duration(v.threshold_s)})"
                 for v in found if v.passed is False]
        return {"state": "fail", "label": "FAIL", "counts": counts,
                "line": f"{failed} SLO check(s) failed: {first_few(worst)}"}
    return {"state": "pass", "label": "PASS", "line": "every judged SLO held at every step", "counts": counts}


def _elapsed(started: str | None, finished: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        return None


def flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested settings as (dotted.key, text) rows; sizes named *_bytes are shown in MiB/GiB."""
    if isinstance(value, dict):
        rows = []
        for key, item in value.items():
            rows += flatten(item, f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(value, list | tuple):
        return [(prefix, ", ".join(str(v) for v in value))]
    if value is None:
        return [(prefix, "—")]
    if prefix.endswith("bytes") and isinstance(value, int | float) and not isinstance(value, bool):
        return [(prefix, page.size(value))]
    return [(prefix, str(value))]


def metadata(run: RunResult) -> dict[str, Any]:
    """What the run was and where it ran, secrets removed."""
    plan = redact(run.plan if isinstance(run.plan, dict) else {})
    env = redact(run.environment if isinstance(run.environment, dict) else {})
    versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
    others = {k: v for k, v in env.items() if k != "versions"}
    return {
        "plan_name": plan.get("name", "—"),
        "plan_yaml": yaml.safe_dump(plan, sort_keys=False, default_flow_style=False, allow_unicode=True),
        "target_kind": (plan.get("target") or {}).get("kind", "—") if isinstance(plan.get("target"), dict) else "—",
        "versions": dict(flatten(versions)),
        "environment": flatten({"plan target": plan.get("target", {})}) + flatten(others),
        "elapsed_s": _elapsed(run.started_at, run.finished_at),
        # who the harness's clients were meant to be (plan.IDENTITIES); plans from before it: the admin
        "identities": (plan.get("target") or {}).get("identities", "admin") if isinstance(plan.get("target"), dict)
        else "admin",
        "redacted_note": REDACTED_NOTE,
    }


def context(run: RunResult) -> dict[str, Any]:
    """Everything report.html shows, computed from the run."""
    found = verdicts(run)
    by_step: dict[int, list[Verdict]] = {}
    for v in found:
        by_step.setdefault(v.step_index, []).append(v)
    nodes, labels = card.step_axis(run)
    panels = charts.run_panels(figures.series(run), nodes, labels, figures.chart_sources(run)) if run.steps else []
    queries = (plan_queries(run, "figures"), plan_queries(run, "checks"))
    views = [step_view(step, by_step.get(step.index, []), run.clients, queries) for step in run.steps]
    projected = projection.view(run) if run.steps else None
    return {
        "run": run,
        "digest": run.plan_digest,
        "banner": banner(run, found),
        "meta": metadata(run),
        "slo": thresholds(run),
        "matrix": verdict_matrix(run, found),
        "steps": views,
        "warnings": [w for view in views for w in view.warnings],
        "panels": panels,
        "projection": projected,
        "cpu_changes": change_tables(run),
        # in page order: the charts section, each step's health chart in its section, then the projections
        "figures": charts.payload(panels + [v.roll.panel for v in views if v.roll is not None]
                                  + [v.health_panel for v in views if v.health_panel is not None]
                                  + (projected["panels"] if projected else [])),
        "scale": " → ".join(f"{n:,}" for n in nodes),
        "embedded": page.embedded("run", [("", run)]),
        "card": card.card(run),
    }


def render(run: RunResult) -> str:
    return page.render("report.html", **context(run))


def write_report(run_folder: Path) -> Path:
    """Write run_folder/report.html and run_folder/junit.xml from run_folder/results.json (and a soak's
    soak.html from its series on disk, its series as JUnit cases); return the HTML path."""
    from loadtests.report.soak import write_soak_report
    from loadtests.results.soak import has_soak

    run_folder = Path(run_folder)
    run = load(run_folder)
    target = page.write(run_folder / REPORT_FILE, render(run))
    soak = write_soak_report(run_folder)[1] if has_soak(run_folder) else []  # its series judged, one case each
    junit.write(run_folder / junit.JUNIT_FILE, f"loadtest {run.run_id}", junit.run_suites(run) + soak)
    return target
