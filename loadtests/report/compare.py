"""Compare two runs of the same plan figure by figure (e.g. before and after an upgrade) and flag regressions.

Run A is the baseline, run B the candidate. Steps are matched by index; figures by chart and name (see
figures.py, the same figures the run report draws). All compared figures are "lower is better". A figure
regresses when B is worse than A by more than the rule of its kind allows (REGRESSION_DEFAULTS, overridable).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests.errors import CompareError
from loadtests.plan import REGRESSION_DEFAULTS
from loadtests.report import charts, figures, junit, page
from loadtests.report.redact import redact
from loadtests.results import RESULTS_FILE, RunResult, load

COMPARE_FILE = "compare.html"
COMPARE_JUNIT_FILE = "compare-junit.xml"

# When B counts as worse than A. Latency and CPU need both a relative and an absolute margin, so noise on tiny
# numbers (3 ms -> 5 ms, 2 % -> 4 % CPU) is not a regression.


RULES = ("latency", "memory", "cpu", "errors_5xx", "throttled_429")


def rule_text(rule: str, limits: dict[str, float]) -> str:
    """The rule in words, for tables and JUnit messages."""
    return {
        "latency": f"worse by > {limits['latency_pct']:g} % and > {limits['latency_abs_s'] * 1000:g} ms",
        "memory": f"larger by > {limits['memory_pct']:g} %",
        "cpu": f"higher by > {limits['cpu_pct']:g} % and > {limits['cpu_abs_points']:g} points",
        "errors_5xx": f"more than {limits['errors_5xx_extra']:g} extra 5xx",
        "throttled_429": f"more than {limits['throttled_429_extra']:g} extra 429",
    }[rule]


def regressed(rule: str, a: float, b: float, limits: dict[str, float]) -> bool:
    """Whether B is worse than A beyond the rule's margins."""
    if rule == "latency":
        return b > a * (1 + limits["latency_pct"] / 100) and b - a > limits["latency_abs_s"]
    if rule == "memory":
        return b > a * (1 + limits["memory_pct"] / 100)
    if rule == "cpu":
        return b > a * (1 + limits["cpu_pct"] / 100) and b - a > limits["cpu_abs_points"]
    if rule == "errors_5xx":
        return b - a > limits["errors_5xx_extra"]
    if rule == "throttled_429":
        return b - a > limits["throttled_429_extra"]
    raise ValueError(f"unknown regression rule {rule!r}")


@dataclass
class Row:
    """One figure of one step in both runs."""

    step_index: int
    step_name: str
    nodes: int
    chart: str
    name: str
    unit: str
    rule: str
    a: float | None
    b: float | None
    regression: bool = False
    rule_text: str = ""

    @property
    def label(self) -> str:
        return f"{figures.CHARTS[self.chart].short} {self.name}"

    @property
    def origin(self) -> str:
        """Where the figure comes from: client side, apiserver, etcd or process."""
        return figures.CHARTS[self.chart].source.split(" · ")[0]

    @property
    def compared(self) -> bool:
        return self.a is not None and self.b is not None

    @property
    def change_pct(self) -> float | None:
        if self.a is None or self.b is None or not self.a:
            return None
        return (self.b - self.a) / abs(self.a) * 100

    @property
    def direction(self) -> str:
        """"up" (worse: every compared figure is lower-is-better), "down" (better), "same" or "" (missing)."""
        if self.a is None or self.b is None:
            return ""
        if self.b == self.a:
            return "same"
        return "up" if self.b > self.a else "down"

    @property
    def status(self) -> str:
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        if self.regression:
            return "regression"
        return {"up": "worse, within margin", "down": "better", "same": "same"}[self.direction]


@dataclass
class CompareResult:
    a_run_id: str
    b_run_id: str
    rows: list[Row]
    thresholds: dict[str, float]
    notes: list[str] = field(default_factory=list)
    run_regressions: list[str] = field(default_factory=list)  # run-level: B aborted where A completed
    html_path: Path | None = None
    junit_path: Path | None = None

    @property
    def regressions(self) -> list[Row]:
        """Every regressed figure (run-level regressions, such as B aborting, are in run_regressions)."""
        return [r for r in self.rows if r.regression]

    @property
    def passed(self) -> bool:
        return not self.regressions and not self.run_regressions

    @property
    def headline(self) -> str:
        """One line for people and CI logs."""
        compared = sum(r.compared for r in self.rows)
        if self.passed:
            return f"no regression in {compared} compared figures"
        parts = []
        if self.regressions:
            parts.append(f"{len(self.regressions)} regression(s) in {compared} compared figures")
        return "; ".join(parts + self.run_regressions)


def limits_from(thresholds: dict[str, Any] | None) -> dict[str, float]:
    """REGRESSION_DEFAULTS with overrides, refusing unknown keys and non-numbers in one line."""
    merged = dict(REGRESSION_DEFAULTS)
    for key, value in (thresholds or {}).items():
        if key not in REGRESSION_DEFAULTS:
            raise CompareError(f"compare thresholds: unknown key {key!r}; expected one of: "
                               f"{', '.join(REGRESSION_DEFAULTS)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise CompareError(f"compare thresholds: {key} must be a number >= 0 (got {value!r})")
        merged[key] = float(value)
    return merged


def _check_comparable(a: RunResult, b: RunResult, force: bool) -> list[str]:
    """Refuse runs of different plans or different scales unless forced; return notes on what was forced."""
    notes = []
    if a.plan_digest != b.plan_digest:
        line = (f"cannot compare {a.run_id} with {b.run_id}: their plans differ (digest {a.plan_digest} vs "
                f"{b.plan_digest}: other steps or load); pass force to compare anyway")
        if not force:
            raise CompareError(line)
        notes.append(f"plans differ (digest {a.plan_digest} vs {b.plan_digest}); compared anyway (forced)")
    b_steps = {s.index: s for s in b.steps}
    for step in a.steps:
        other = b_steps.get(step.index)
        if other is not None and other.nodes != step.nodes:
            line = (f"cannot compare step {step.index}: {step.nodes} nodes in {a.run_id} but {other.nodes} in "
                    f"{b.run_id}; pass force to compare anyway")
            if not force:
                raise CompareError(line)
            notes.append(f"step {step.index} has {step.nodes} nodes in A and {other.nodes} in B (forced)")
    a_only = sorted({s.index for s in a.steps} - set(b_steps))
    b_only = sorted(set(b_steps) - {s.index for s in a.steps})
    if a_only:
        notes.append(f"step(s) {', '.join(map(str, a_only))} only in A: B recorded fewer steps")
    if b_only:
        notes.append(f"step(s) {', '.join(map(str, b_only))} only in B: A recorded fewer steps")
    return notes


def rows(a: RunResult, b: RunResult, limits: dict[str, float]) -> list[Row]:
    """Every compared figure of every step present in either run, A's order first."""
    a_series = {(s.chart, s.name): s for s in figures.series(a) if s.rule and not s.slo_line}
    b_series = {(s.chart, s.name): s for s in figures.series(b) if s.rule and not s.slo_line}
    a_pos = {s.index: i for i, s in enumerate(a.steps)}
    b_pos = {s.index: i for i, s in enumerate(b.steps)}
    steps = {s.index: s for s in b.steps} | {s.index: s for s in a.steps}
    found = []
    for index in sorted(steps):
        step = steps[index]
        for key in list(a_series) + [k for k in b_series if k not in a_series]:
            sa, sb = a_series.get(key), b_series.get(key)
            va = sa.values[a_pos[index]] if sa and index in a_pos else None
            vb = sb.values[b_pos[index]] if sb and index in b_pos else None
            if va is None and vb is None:
                continue
            rule = str(sa.rule if sa is not None else sb.rule if sb is not None else "")
            row = Row(step_index=index, step_name=step.name, nodes=step.nodes, chart=key[0], name=key[1],
                      unit=figures.CHARTS[key[0]].unit, rule=rule, a=va, b=vb, rule_text=rule_text(rule, limits),
                      regression=va is not None and vb is not None and regressed(rule, va, vb, limits))
            found.append(row)
    return found


def _panels(a: RunResult, b: RunResult) -> list[charts.Panel]:
    """Overlaid charts: A solid, B dashed (or hatched bars), same colour per figure; SLO lines from A."""
    groups: dict[str, list[charts.Line]] = {}
    for run, tag in ((a, "A"), (b, "B")):
        nodes = [s.nodes for s in run.steps]
        labels = [s.name for s in run.steps]
        for s in figures.series(run):
            if s.slo_line and tag == "B":
                continue
            if not s.rule and not s.slo_line:
                continue
            groups.setdefault(s.chart, []).append(charts.Line(
                s, s.name if s.slo_line else f"{tag}: {s.name}", "", nodes, labels,
                dash="dash" if tag == "B" else "solid", pattern="/" if tag == "B" else "", group=s.name))
    for lines in groups.values():
        palette = charts.colours([line.series.name for line in lines if not line.series.slo_line])
        for line in lines:
            line.colour = palette.get(line.series.name, charts.SLO_COLOUR)
    return charts.panels(groups, figures.chart_sources(a))


def _run_summary(run: RunResult) -> dict[str, Any]:
    env = redact(run.environment if isinstance(run.environment, dict) else {})
    versions = env.get("versions") if isinstance(env.get("versions"), dict) else {}
    return {"run": run, "versions": versions, "digest": run.plan_digest,
            "scale": " → ".join(f"{s.nodes:,}" for s in run.steps) or "no steps"}


def _suites(result: CompareResult, a: RunResult, b: RunResult) -> list[junit.Suite]:
    suites: dict[int, junit.Suite] = {}
    for row in result.rows:
        suite = suites.setdefault(row.step_index, junit.Suite(
            name=f"step {row.step_index}: {row.step_name}", properties={"nodes": str(row.nodes)}))
        text = f"A {page.in_unit(row.a, row.unit)} → B {page.in_unit(row.b, row.unit)}"
        if row.change_pct is not None:
            text += f" ({row.change_pct:+.0f} %)"
        case = junit.Case(row.step_name, row.label, details=f"{text}; regression when {row.rule_text}",
                          failure_type="regression")
        if row.regression:
            case.failure = f"{text}: {row.rule_text}"
        elif not row.compared:
            case.skipped = row.status
        suite.cases.append(case)
    completed = junit.Case("run", "run completed", failure_type="regression",
                           details=f"A {a.status}, B {b.status}")
    if result.run_regressions:
        completed.failure = "; ".join(result.run_regressions)
    run_suite = junit.Suite(name="run", cases=[completed], properties={"a": a.run_id, "b": b.run_id})
    return [suites[i] for i in sorted(suites)] + [run_suite]


def _load(folder: Path) -> RunResult:
    """A run folder's results, or one line saying why they cannot be read."""
    try:
        return load(folder)
    except FileNotFoundError:
        raise CompareError(f"cannot compare: no {RESULTS_FILE} in {folder} (expected a run folder, "
                           "reports/<run-id>)") from None
    except (ValueError, TypeError) as error:
        raise CompareError(f"cannot compare: {folder}/{RESULTS_FILE} is not readable results ({error})") from None


def compare(a_folder: Path, b_folder: Path, out_dir: Path, thresholds: dict[str, Any] | None = None,
            force: bool = False) -> CompareResult:
    """Compare run B (candidate) against run A (baseline); write compare.html and compare-junit.xml."""
    limits = limits_from(thresholds)
    a, b = _load(Path(a_folder)), _load(Path(b_folder))
    notes = _check_comparable(a, b, force)
    result = CompareResult(a_run_id=a.run_id, b_run_id=b.run_id, rows=rows(a, b, limits), thresholds=limits,
                           notes=notes)
    if b.status != "complete" and a.status == "complete":
        result.run_regressions.append(f"B did not complete ({b.status}: {b.error or 'no error recorded'})")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    panels = _panels(a, b)
    summary_a, summary_b = _run_summary(a), _run_summary(b)
    html = page.render(
        COMPARE_FILE, result=result, a=summary_a, b=summary_b, panels=panels, figures=charts.payload(panels),
        rule_names={rule: rule_text(rule, limits) for rule in RULES}, limits=limits, defaults=REGRESSION_DEFAULTS,
        version_names=list(dict.fromkeys([*summary_a["versions"], *summary_b["versions"]])),
    )
    result.html_path = out_dir / COMPARE_FILE
    tmp = out_dir / f".{COMPARE_FILE}.tmp"
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(result.html_path)
    result.junit_path = junit.write(out_dir / COMPARE_JUNIT_FILE, f"compare {a.run_id} vs {b.run_id}",
                                    _suites(result, a, b))
    return result
