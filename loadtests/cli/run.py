"""`loadtest run | capacity`: run a plan (repeated, gated on a baseline) or search for its breaking point.

The runner (and pandas, Locust's CSV reader, behind it) is imported only by the commands that run plans, so
that `loadtest status` or `loadtest report` start quickly."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests import results
from loadtests.cli import worker
from loadtests.cli.compare import compare_runs, show_comparison, threshold_pairs
from loadtests.cli.flags import count_arg, index_arg, number_arg
from loadtests.cli.index import check_index, index_run
from loadtests.cli.output import REPORTS_DIR, say
from loadtests.config import plan as plan_mod
from loadtests.config.plan import Plan
from loadtests.config.topology import Topology
from loadtests.controlplane.base import TargetRequest
from loadtests.errors import (
    EXIT_ABORTED,
    EXIT_ENVIRONMENT,
    EXIT_PASSED,
    EXIT_SLO_FAILED,
    MIN_FREE_BYTES,
    CompareError,
    LoadTestError,
    PlanError,
    disk_full,
)
from loadtests.load.remote import MasterBind

if TYPE_CHECKING:
    from loadtests.analysis.samples import Side
    from loadtests.analysis.soak import SoakJudgement
    from loadtests.config.soak import SoakSettings
    from loadtests.run.capacity import StepChooser
    from loadtests.run.roll import RollRequest




GATE_JUNIT_FILE = "gate-junit.xml"  # with --baseline: the run's SLO verdicts and the comparison, one file for CI


@dataclass(frozen=True)
class RunRequest:
    """What the command line asks of a run beyond its plan, built once, after every check has passed; the
    rooms below the command line read this, never the parsed arguments."""

    target: TargetRequest
    workers: int | None = None  # None: the plan's value
    master: MasterBind | None = None  # each step's master listens here for workers of other machines
    ui: bool = False  # serve Locust's web UI (read-only) on 127.0.0.1
    gate: bool = True  # False (--no-gate, lessons): failed SLOs do not fail the command
    roll: RollRequest | None = None  # `rehearse --rolling`: the upgrade rolled through one step
    soak: SoakSettings | None = None  # `loadtest soak`: the one step's window sampled for its trends


def new_run_id(plan: Plan) -> str:
    return f"{plan.name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def execute(plan: Plan, out_dir: Path, request: RunRequest, chooser: StepChooser | None = None,
            runs_follow: int = 0) -> tuple[results.RunResult | None, LoadTestError | None]:
    """Run a plan into out_dir and write its report; the results, and what stopped the run (said in one
    line already), if anything did."""
    from loadtests.controlplane.factory import make_target
    from loadtests.controlplane.processes import free_ports
    from loadtests.report.html import write_report
    from loadtests.run.runner import Runner, RunOptions

    prepare_out_dir(out_dir)
    options = RunOptions(out_dir=out_dir, workers=request.workers, progress=say, master=request.master,
                         ui_port=free_ports(1)[0] if request.ui else None, runs_follow=runs_follow,
                         roll=request.roll, soak=request.soak)
    runner = Runner(plan, options, make_target(plan, out_dir.name, out_dir, request.target, say), chooser)
    failure: LoadTestError | None = None
    try:
        runner.run()
    except LoadTestError as error:  # aborted (3) or the environment (4); everything is stopped by now
        failure = error
    try:
        say(f"report: {write_report(out_dir)}")
    except Exception as error:  # the results are what matters; a report can be rebuilt from them later
        reason = disk_full(out_dir) or f"{type(error).__name__}: {error}"
        say(f"report not written ({reason}); rebuild it later: loadtest report {out_dir}")
    try:
        run = results.load(out_dir)
    except (OSError, ValueError):
        run = None
    if failure is not None:
        saved = f"{len(run.steps)} finished steps saved in {out_dir}" if run else f"no results in {out_dir}"
        prefix = "run aborted: " if failure.exit_code == EXIT_ABORTED else ""
        say(f"loadtest: {prefix}{failure} ({saved})")
    return run, failure


def run_plan(plan: Plan, out_dir: Path, request: RunRequest, runs_follow: int = 0) -> int:
    """Run one plan into out_dir, write its report, and return the exit code its verdicts call for."""
    run, failure = execute(plan, out_dir, request, runs_follow=runs_follow)
    if failure is not None or run is None:
        return failure.exit_code if failure else EXIT_ABORTED
    return verdict_code(run, plan.gate and request.gate)


def verdict_code(run: results.RunResult, gate: bool, soak: SoakJudgement | None = None) -> int:
    """A finished run's verdicts, each failed check said in a line, then its last line; the exit code they call
    for: 1 when anything failed and the gate is on (the plan's `gate` and no --no-gate), else 0. From the
    results alone (and a soak's series on disk), so recorded results give the code the run gave."""
    from loadtests.analysis.fidelity import run_verdicts as fidelity_verdicts
    from loadtests.analysis.promql import run_verdicts as promql_verdicts
    from loadtests.analysis.roll import run_verdicts as roll_verdicts
    from loadtests.analysis.slo import run_passed, verdicts

    for step in run.steps:
        if step.status == "saturated":
            say(f"SATURATED   step {step.name}: {step.saturation.get('condition')}: "
                f"{step.saturation.get('evidence')}")
    found = verdicts(run)
    failed = [v for v in found if v.passed is False]
    for verdict in failed:
        say(f"SLO FAILED  step {verdict.step_name}: {verdict.slo} p99 {verdict.value_s:.3f} s > "
            f"{verdict.threshold_s:g} s")
    for step in run.steps:
        if step.scheduling is not None and step.scheduling.passed is False:
            say(f"FAILED      step {step.name}: scheduler throughput at best {step.scheduling.max:g} pods/s < "
                f"{step.scheduling.threshold:g} pods/s")
    for step, check in roll_verdicts(run):
        if check.passed is False:
            say(f"FAILED      step {step.name}: {check.check}: {check.value} (needed {check.threshold})")
    for step, target in fidelity_verdicts(run):
        if target.passed is False:
            say(f"MISSED      step {step.name}: replay fidelity {target.check}: {target.value} ({target.threshold})")
    for step, check in promql_verdicts(run):
        if check.passed is False:
            say(f"FAILED      step {step.name}: PromQL check {check.check}: {check.value} (needed {check.threshold}); "
                f"query: {check.query}")
    if soak is not None:
        from loadtests.analysis.soak import trend_text

        for trend in soak.grown:
            say(f"GROWS       {trend_text(trend)}")
    say(final_line(run, soak))
    passed = run_passed(run) and (soak is None or soak.passed)
    return EXIT_PASSED if passed or not gate else EXIT_SLO_FAILED


def final_line(run: results.RunResult, soak: SoakJudgement | None = None) -> str:
    """The run's last line: PASS or FAIL, how many SLO checks passed, and every check that failed by name
    (SLOs, saturation, scheduler throughput, a rolling upgrade's checks), the first few and how many more."""
    from loadtests.analysis.slo import failed_checks, verdicts

    judged = [v for v in verdicts(run) if v.passed is not None]
    failed = failed_checks(run) + ([f"{t.series} grows" for t in soak.grown] if soak is not None else [])
    steps = f"{len(run.steps)} step{'s' if len(run.steps) != 1 else ''}"
    held = sum(1 for v in judged if v.passed)
    line = f"{'FAIL' if failed else 'PASS'}: {held}/{len(judged)} SLO checks passed over {steps}"
    if soak is not None:
        flat = sum(t.verdict != "grows" and t.verdict != "not measured" for t in soak.trends)
        line += f"; soak: {flat}/{flat + len(soak.grown)} series not growing over {soak.hours_measured:.2f} h"
    return line + (f"; failed: {named_failures(failed)}" if failed else "")


def named_failures(names: list[str]) -> str:
    """"recovery at step roll, availability at step roll and 2 more": failed checks, the first few, for one line."""
    from loadtests.analysis.formats import first_few

    return first_few(names, shown=4, sep=", ")


def prepare_out_dir(out_dir: Path) -> None:
    """The results folder must be a new or empty folder that takes files; refused in one line otherwise."""
    if out_dir.exists() and not out_dir.is_dir():
        raise LoadTestError(f"--out {out_dir}: a file of that name exists; name a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise LoadTestError(f"{out_dir} is not empty; choose another --out or remove it")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".write-check"
        probe.write_bytes(b"x")
        probe.unlink()
    except OSError as error:
        raise LoadTestError(f"--out {out_dir}: cannot create a folder there ({error.strerror})") from None
    if full := disk_full(out_dir):
        raise LoadTestError(f"--out {out_dir}: {full} (a run needs more than {MIN_FREE_BYTES >> 20} MiB)")


def check_runnable(plan: Plan, args: argparse.Namespace, *, orphans: bool = True, force: bool = False,
                   gate: bool = True) -> RunRequest:
    """Everything a run needs, checked before anything starts: the command line's options, binaries of its
    version, and a machine that can hold it (unless --force); the run's request when all is well. Warns
    about clusters of runs that were killed and left running (once per command: `orphans` False for the
    second plan on)."""
    from loadtests.config import sizing

    target = TargetRequest(kubeconfig=getattr(args, "kubeconfig", None), context=getattr(args, "context", None),
                           allow_context=getattr(args, "allow_context", None),
                           kwok_mode=getattr(args, "kwok_mode", None))
    request = RunRequest(target=target, workers=args.workers, master=worker.master_bind(plan, args),
                         ui=getattr(args, "ui", False), gate=gate and not getattr(args, "no_gate", False))
    if target.kubeconfig and plan.target.tenants:  # who the load is on an existing cluster, its kubeconfig says
        raise PlanError(f"{plan.source}: target.tenants: tenants are made by a local control plane only; drop "
                        "--kubeconfig to run this plan locally, or the tenants")
    if plan.target.kind == "local" and not target.kubeconfig:
        from loadtests.binaries.cache import find

        find(plan.target.kube_version)
        if not (force or getattr(args, "force", False)) and (beyond := sizing.beyond_this_machine(plan)):
            raise LoadTestError(beyond)
    if orphans:
        warn_about_orphans()
    return request


def warn_about_orphans() -> None:
    """Name what runs that are gone left behind: clusters that still run, and folders that hold their keys."""
    from loadtests.controlplane.local import leftover_lines

    for line in sum(leftover_lines(), []):
        say(f"warning: {line}")


def run_plan_of(args: argparse.Namespace) -> Plan:
    """The plan a run command names: --plan (a plan file, bundled name, or a plan with `workload:`), or the
    replay of --profile at --scale (capture/replay.py); the flags that go with neither are refused in one line."""
    from loadtests.capture import profile as profile_mod
    from loadtests.capture import replay

    profile = getattr(args, "profile", None)
    if profile is None:
        for flag in ("scale", "shape"):
            if getattr(args, flag, None) is not None:
                raise LoadTestError(f"--{flag} goes with --profile PROFILE.yaml (a captured cluster to replay; a "
                                    f"plan's `workload:` says its own)")
        return replay.load_plan(args.plan or "default", duration_s=getattr(args, "duration", None))
    if args.plan is not None:
        raise LoadTestError("--profile and --plan name two plans: give one (a plan may name its profile under "
                            "`workload:`)")
    scale = 1.0 if args.scale is None else args.scale  # checked by plan_of, as a plan's workload.scale is
    return replay.plan_of(profile_mod.load(profile), scale, source=str(profile),
                          duration_s=args.duration or replay.DEFAULT_DURATION_S, shape=args.shape or "mean")


def scale_arg(text: str) -> float:
    """--scale: a positive finite number, refused in one line otherwise."""
    from loadtests.capture.scale import check_scale

    try:
        return check_scale(float(text))
    except (ValueError, LoadTestError):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, e.g. 1 or 2.5 (got {text!r})") from None


def cmd_run(args: argparse.Namespace) -> int:
    plan = run_plan_of(args)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    repeat = repeats_of(plan, args)
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / new_run_id(plan)).resolve()
    baseline = load_baseline(plan, args)
    if args.index is not None:
        check_index(args.index)
    request = check_runnable(plan, args)
    code = run_plan(plan, out_dir, request) if repeat == 1 else run_repeats(plan, out_dir, repeat, request)
    code = code if baseline is None else gate_on_baseline(baseline, out_dir, code, args.force_baseline)
    return code if args.index is None else index_run(args.index, out_dir, code)


def repeats_of(plan: Plan, args: argparse.Namespace) -> int:
    """How many times to run the plan: --repeat, else the plan's `repeat`."""
    repeat = plan.repeat if args.repeat is None else args.repeat
    if repeat < 1:
        raise LoadTestError(f"--repeat {repeat}: a run needs at least one repeat (e.g. --repeat 4 for a "
                            "noise-checked comparison)")
    return repeat


def load_baseline(plan: Plan, args: argparse.Namespace) -> Side | None:
    """The runs of --baseline DIR (a run folder or a folder of repeats), checked before anything starts: a
    folder with results, made from this plan (unless --force-baseline). None without --baseline."""
    from loadtests.analysis.samples import load_side

    if args.baseline is None:
        if args.force_baseline:
            raise LoadTestError("--force-baseline goes with --baseline DIR (the earlier run to gate on)")
        return None
    folder = Path(args.baseline)
    if not folder.is_dir():
        what = "not a folder" if folder.exists() else "no such folder"
        raise LoadTestError(f"--baseline {folder}: {what}; name the folder of an earlier run of this plan (with its "
                            "results.json, or repeat-*/results.json)")
    try:
        side = load_side(folder, "A", args.force_baseline, force_flag="--force-baseline")
    except CompareError as error:
        raise CompareError(f"--baseline {folder}: {str(error).removeprefix('cannot compare: ')}") from None
    digest = results.plan_digest(plan.to_dict())
    if side.plan_digest != digest:
        line = (f"--baseline {folder} was made from another plan (digest {side.plan_digest}, this plan's {digest}: "
                "other steps or load)")
        if not args.force_baseline:
            raise CompareError(f"{line}; name a baseline of this plan, or pass --force-baseline to gate on it anyway")
        say(f"note: {line}; gating on it anyway (--force-baseline)")
    say(f"baseline: {side.run_id} ({folder}, {side.n} run(s))")
    return side


def gate_on_baseline(baseline: Side, out_dir: Path, code: int, force: bool = False) -> int:
    """Compare the run in out_dir (side B: a run folder or a folder of repeats) against the baseline (side A)
    into out_dir/compare/, and write out_dir/gate-junit.xml: the run's SLO suites, then the comparison's.
    Exit 1 when an SLO failed (`code`) or the run regressed; an aborted run keeps its code and is not compared."""
    from dataclasses import replace

    from loadtests.analysis.samples import load_side
    from loadtests.report import junit
    from loadtests.report.compare import junit_suites

    if code not in (EXIT_PASSED, EXIT_SLO_FAILED):
        say("baseline comparison skipped: the run did not finish")
        return code
    candidate = load_side(out_dir, "B", force)
    result = show_comparison(baseline, candidate, out_dir / "compare", {}, force)
    suites = []
    for run, folder in zip(candidate.runs, candidate.folders, strict=True):
        tag = "SLO" if candidate.n == 1 else f"SLO {folder.name}"
        suites += [replace(suite, name=f"{tag}: {suite.name}") for suite in junit.run_suites(run)]
    suites += [replace(suite, name=f"baseline: {suite.name}") for suite in junit_suites(result, baseline, candidate)]
    path = junit.write(out_dir / GATE_JUNIT_FILE, f"loadtest gate {candidate.run_id} vs {baseline.run_id}", suites)
    failed = ([checks_failed(candidate.runs)] if code == EXIT_SLO_FAILED else []) + \
        ([] if result.passed else [result.headline])
    if failed:
        say(f"GATE FAIL: {'; '.join(failed)} (junit: {path})")
        return EXIT_SLO_FAILED
    changed = len(result.unchecked_changes)
    also = f"; {changed} change(s) past their threshold, not noise-checked (see above)" if changed else ""
    say(f"GATE PASS: no regression against the baseline {baseline.run_id}{also} (junit: {path})")
    return EXIT_PASSED


def checks_failed(runs: list[results.RunResult]) -> str:
    """"checks failed: recovery at step roll, ..." over every run of a side (each name once), the first few."""
    from loadtests.analysis.slo import failed_checks

    named = list(dict.fromkeys(name for run in runs for name in failed_checks(run)))
    return f"checks failed: {named_failures(named)}" if named else "a check of the run failed"


def run_repeats(plan: Plan, out_dir: Path, repeat: int, request: RunRequest) -> int:
    """The plan `repeat` times into out_dir/repeat-<k>/, each on a fresh control plane, so a comparison can
    tell a change from run-to-run noise; the exit code is the worst of the runs'. An aborted run ends it."""
    from loadtests.report.repeats import write_repeats_report

    prepare_out_dir(out_dir)
    codes = []
    for k in range(1, repeat + 1):
        say(f"=== repeat {k}/{repeat} of {plan.name} ===")
        # workers of other machines stay for the next repeat
        code = run_plan(plan, out_dir / f"repeat-{k}", request, runs_follow=repeat - k)
        codes.append(code)
        if code in (EXIT_ABORTED, EXIT_ENVIRONMENT):
            say(f"loadtest: repeat {k} was aborted; the {k - 1} finished repeats are kept in {out_dir}")
            break
    try:
        say(f"repeats report: {write_repeats_report(out_dir)}")
    except Exception as error:  # the runs' own reports are written; this summary can be rebuilt
        say(f"repeats report not written ({type(error).__name__}: {error}); rebuild it: loadtest report {out_dir}")
    return max(codes, key=lambda code: (code in (EXIT_ABORTED, EXIT_ENVIRONMENT), code))


def cmd_capacity(args: argparse.Namespace) -> int:
    """Grow the fleet until the control plane stops holding, then narrow to the breaking point. Reaching
    a limit is the expected outcome: the exit code says whether the search finished (0), not the verdict."""
    from loadtests.capture.replay import load_plan
    from loadtests.run.capacity import CapacitySearch, summarize

    plan = load_plan(args.plan)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    search = CapacitySearch(plan, args.max_nodes)
    request = check_runnable(plan, args, force=True)  # reaching what the machine can hold is the point: no --force
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / f"capacity-{new_run_id(plan)}").resolve()
    plan.capacity.max_nodes = search.max_nodes  # recorded with the results, for the report
    run, failure = execute(plan, out_dir, request, search)
    if run is not None:
        say(summarize(run, search.max_nodes if search.failed is None else None).line())
    return failure.exit_code if failure else EXIT_PASSED


def cmd_rehearse(args: argparse.Namespace) -> int:
    """The same plan on two Kubernetes versions, then their comparison: an upgrade rehearsal. With --rolling,
    the upgrade itself: one run that starts on the first version and replaces its components under load."""
    if args.rolling and args.threshold:
        raise LoadTestError("--threshold goes without --rolling: a rolling upgrade is one run, judged by its roll "
                            "checks and SLOs, and compares nothing")
    if not args.rolling and args.rollback:
        raise LoadTestError("--rollback goes with --rolling (it rolls the control plane back after the upgrade)")

    if not args.rolling and args.no_gate:
        raise LoadTestError("--no-gate goes with --rolling: a rehearsal of two versions exits on their comparison, "
                            "not on their SLOs")
    if (args.hours is not None or args.interval_s is not None or args.settle_s is not None) and not args.soak:
        raise LoadTestError("--hours, --interval-s and --settle-s go with --soak (two soaks, one on each version, "
                            "compared)")
    plan_from = run_plan_of(args)  # a plan, or a captured cluster's replay (--profile)
    base = Path(args.out) if args.out else REPORTS_DIR / f"rehearsal-{new_run_id(plan_from)}"
    if args.soak:
        return rehearse_soak(plan_from, args, base.resolve())
    if args.rolling:
        return rehearse_rolling(plan_from, args, base.resolve())
    codes = []
    folders = []
    plans = [plan_from.on_kube_version(v) for v in (args.from_version, args.to_version)]
    repeat = repeats_of(plan_from, args)  # each version as often: with 4 or more, the verdicts are noise-checked
    # every version provided, and the machine big enough, before the first run
    requests = [check_runnable(plan, args, orphans=n == 0) for n, plan in enumerate(plans)]
    for plan, request in zip(plans, requests, strict=True):
        version = plan.target.kube_version
        folder = base / version
        folders.append(folder)
        say(f"=== rehearsal: {plan.name} on Kubernetes {version} ===")
        codes.append(run_plan(plan, folder, request) if repeat == 1 else run_repeats(plan, folder, repeat, request))
    if failed := [code for code in codes if code in (EXIT_ABORTED, EXIT_ENVIRONMENT)]:
        say("loadtest: a rehearsal run was aborted; compare skipped")
        return failed[0]
    return compare_runs(folders[0], folders[1], base / "compare", threshold_pairs(args.threshold), False)


def cmd_soak(args: argparse.Namespace) -> int:
    """One step of a plan, its load held for --hours and sampled every --interval-s; each series' trend judged
    (analysis/soak.py); exit 1 when a series grows (or an SLO failed) and the gate is on."""
    from dataclasses import replace

    from loadtests.analysis.soak import judge_folder
    from loadtests.capture.replay import load_plan
    from loadtests.config.plan import soak_plan
    from loadtests.config.soak import asked

    plan = load_plan(args.plan or "default")
    soak = asked(plan.soak, args.hours, args.interval_s, args.step, args.settle_s)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    plan = soak_plan(plan, soak)
    request = replace(check_runnable(plan, args), soak=soak)  # the machine holds it, before anything starts
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / f"soak-{new_run_id(plan)}").resolve()
    say(f"=== soak: {plan.name}, step {plan.steps[0].name}, {soak.hours:g} h sampled every {soak.interval_s:g} s ===")
    run, failure = execute(plan, out_dir, request)
    judgement = judge_folder(out_dir)
    if judgement is not None:
        say(f"soak report: {out_dir / 'soak.html'} (raw series: {out_dir / 'soak'})")
    if failure is not None or run is None:
        return failure.exit_code if failure else EXIT_ABORTED
    return verdict_code(run, plan.gate and request.gate, judgement)


def rehearse_soak(plan: Plan, args: argparse.Namespace, base: Path) -> int:
    """The plan soaked on --from, then on --to, and their slopes compared series by series (analysis/soak.py);
    exit 1 when a series grows faster on --to."""
    from dataclasses import replace

    from loadtests.analysis.soak import FASTER, compare_soaks, difference_text, judge_folder
    from loadtests.config.plan import soak_plan
    from loadtests.config.soak import asked

    if args.rolling or (args.repeat or 1) > 1 or args.threshold:
        raise LoadTestError("--soak goes without --rolling, --repeat and --threshold: two soaks are compared by "
                            "their slopes")
    soak = asked(plan.soak, args.hours, args.interval_s, args.step, args.settle_s)
    plans = [soak_plan(plan.on_kube_version(v), soak) for v in (args.from_version, args.to_version)]
    requests = [replace(check_runnable(p, args, orphans=n == 0), soak=soak) for n, p in enumerate(plans)]
    found = []
    for soaked, request in zip(plans, requests, strict=True):
        version = soaked.target.kube_version
        say(f"=== soak rehearsal: {soaked.name} on Kubernetes {version}, {soak.hours:g} h ===")
        _, failure = execute(soaked, base / version, request)
        judged = judge_folder(base / version)
        if failure is not None or judged is None:
            say("loadtest: a soak of the rehearsal was aborted; compare skipped")
            return failure.exit_code if failure else EXIT_ABORTED
        found.append(judged)
    lines = [difference_text(d) for d in compare_soaks(*found)]
    (base / "soak-compare.txt").write_text("\n".join(lines) + "\n")
    faster = [line for line in lines if FASTER in line]
    for line in faster:
        say(f"REGRESSION  {line}")
    say(f"{'FAIL' if faster else 'PASS'}: {len(faster)} of {len(lines)} series grow faster on {args.to_version} "
        f"than on {args.from_version} (every series: {base / 'soak-compare.txt'})")
    return EXIT_SLO_FAILED if faster else EXIT_PASSED


def soak_number(text: str, example: str, problem: Callable[[float], str | None]) -> float:
    """A soak's number on the command line (argparse's `type`): a number `problem` finds nothing wrong with, or one
    line saying what is wrong."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of {example} (got {text!r})") from None
    if found := problem(number):
        raise argparse.ArgumentTypeError(found)
    return number


def positive_hours(text: str) -> float:
    """--hours: a positive finite number."""
    from loadtests.config.soak import hours_problem

    return soak_number(text, "hours, e.g. 2 or 0.5", hours_problem)


def sampling_interval(text: str) -> float:
    """--interval-s: at least a second."""
    from loadtests.config.soak import interval_problem

    return soak_number(text, "seconds", interval_problem)


def settling_time(text: str) -> float:
    """--settle-s: no seconds or more (against the soak's length: config/soak.settings)."""
    from loadtests.config.soak import settle_problem

    return soak_number(text, "seconds", settle_problem)


ROLLING_TOPOLOGY = Topology(etcd_members=3, apiservers=2)  # a plan without a topology of its own is rolled on this


def rehearse_rolling(plan: Plan, args: argparse.Namespace, out_dir: Path) -> int:
    """The plan on --from with a highly available control plane, its components replaced with --to's one by
    one in the roll's step while the load runs (and back with --rollback); exit 1 when a roll check failed."""
    from dataclasses import replace

    from loadtests.binaries.cache import find
    from loadtests.config.versions import upgrade_problem
    from loadtests.run.roll import RollRequest, window_refusal

    if args.kubeconfig or plan.target.kind != "local":
        raise LoadTestError("--rolling replaces the components of a control plane this harness starts: it does not "
                            "go with --kubeconfig or a plan whose target.kind is 'cluster'")
    if (args.repeat or 1) > 1:
        raise LoadTestError("--rolling runs the plan once (a roll is one event, judged on its own seconds): "
                            "leave out --repeat")
    if problem := upgrade_problem(args.from_version, args.to_version):
        raise LoadTestError(f"--from {args.from_version} --to {args.to_version}: {problem}")
    plan = plan.on_kube_version(args.from_version)
    if plan.target.topology.single:
        plan.target.topology = ROLLING_TOPOLOGY
        say(f"rolling upgrade on {ROLLING_TOPOLOGY.etcd_members} etcd members and {ROLLING_TOPOLOGY.apiservers} "
            "apiservers behind HAProxy (the plan sets no target.topology)")
    if refused := window_refusal(plan, args.rollback):
        raise PlanError(refused)
    request = check_runnable(plan, args)
    index = plan_mod.roll_step(plan)
    step = plan.steps[index]
    roll = RollRequest(step_index=index, from_bins=find(args.from_version), to_bins=find(args.to_version),
                       rollback=args.rollback)
    say(f"=== rolling upgrade: {plan.name} from {args.from_version} to {args.to_version} in step {step.name}"
        + (f", then back to {args.from_version}" if args.rollback else "") + " ===")
    return run_plan(plan, out_dir, replace(request, roll=roll))


def replay_options(parser: argparse.ArgumentParser) -> None:
    """--profile, --scale and --duration: a captured cluster replayed instead of a plan (run, rehearse)."""
    parser.add_argument("--profile", metavar="PROFILE.yaml",
                        help="replay a captured cluster (`loadtest capture`) instead of a plan: its nodes, shapes, "
                             "objects and traffic x --scale (docs/profile.md, docs/plans.md)")
    parser.add_argument("--scale", type=scale_arg, default=None, metavar="K",
                        help="with --profile: the replay's multiple of the captured cluster (default: 1)")
    parser.add_argument("--duration", type=number_arg(1), default=None, metavar="SECONDS",
                        help="with --profile (or a plan's workload): the replay's measured window (default: 60)")
    parser.add_argument("--shape", choices=("mean", "timeline"), default=None,
                        help="with --profile: the traffic over time, the window's mean mix (default) or the "
                             "captured per-minute curve fitted to the window (docs/plans.md)")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("run", help="run a plan: growing steps, load, measurements, report")
    p.add_argument("--plan", default=None, help="plan file, or the name of a bundled plan (default: default)")
    replay_options(p)
    p.add_argument("--out", help="results folder (default: reports/<plan>-<time>)")
    p.add_argument("--kube-version", help="override the plan's Kubernetes version")
    run_options(p, repeat=True, baseline=True)
    p.add_argument("--index", type=index_arg, metavar="URL",
                   help="after the run (all repeats, as one build), add it to this run index: a file path or "
                        "sqlite:///PATH (SQLite), or postgresql://...; checked before the run starts; a failed write "
                        "says so in one line and makes a passing run exit 4")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("capacity", help="grow the fleet until an SLO fails or a step saturates; report the "
                                        "largest scale that held and what broke at the next")
    p.add_argument("--plan", default="capacity", help="plan file or bundled plan name (default: capacity)")
    p.add_argument("--max-nodes", type=count_arg, default=None, help="stop growing here (default: the plan's)")
    p.add_argument("--out", help="results folder (default: reports/capacity-<plan>-<time>)")
    p.add_argument("--kube-version", help="override the plan's Kubernetes version")
    run_options(p, gated=False)
    p.set_defaults(func=cmd_capacity)

    p = sub.add_parser("rehearse", help="run one plan on two Kubernetes versions and compare them")
    p.add_argument("--plan", default=None, help="plan file, or the name of a bundled plan (default: default)")
    replay_options(p)
    p.add_argument("--from", dest="from_version", required=True,
                   help="the Kubernetes version run first, side A (with --rolling: the version it starts on)")
    p.add_argument("--to", dest="to_version", required=True,
                   help="the Kubernetes version run second, side B (with --rolling: the version it upgrades to)")
    p.add_argument("--out", help="results folder: a run folder per version and compare/ (with --rolling: the "
                                 "run folder) (default: reports/rehearsal-<plan>-<time>)")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER",
                   help="override a regression threshold of the comparison, e.g. latency_pct=10 (repeatable)")
    p.add_argument("--rolling", action="store_true",
                   help="rehearse the upgrade itself: start on --from (highly available) and replace each component "
                        "with --to's, one at a time, while the plan's roll step measures (plan section `roll`)")
    p.add_argument("--rollback", action="store_true", help="with --rolling: roll back to --from afterwards")
    p.add_argument("--soak", action="store_true",
                   help="soak the plan's step on each version for --hours and compare their slopes (docs/soak.md)")
    p.add_argument("--hours", type=positive_hours, default=None,
                   help="with --soak: each soak's hours (default: the plan's `soak.hours`)")
    p.add_argument("--interval-s", type=sampling_interval, default=None, metavar="SECONDS",
                   help="with --soak: seconds between samples (default: the plan's `soak.interval_s`, else 30)")
    p.add_argument("--step", default=None, help="with --soak: the plan's step to hold, by name (default: its first)")
    p.add_argument("--settle-s", type=settling_time, default=None, metavar="SECONDS",
                   help="with --soak: seconds from each soak's start shown and not judged (default: the plan's "
                        "`soak.settle_s`, else a tenth of the soak, at most 15 min)")
    run_options(p, repeat=True)
    p.set_defaults(func=cmd_rehearse)
    add_soak_command(sub)


def add_soak_command(sub: Any) -> None:
    from loadtests.config.soak import DEFAULT_INTERVAL_S

    p = sub.add_parser("soak", help="hold one step's load for hours, sample it, and judge every series' trend "
                                    "(grows, flat, falls, inconclusive): leaks and drifts (docs/soak.md)")
    p.add_argument("--plan", default=None, help="plan file, or the name of a bundled plan (default: default)")
    p.add_argument("--hours", type=positive_hours, default=None,
                   help="how long the load is held, in hours (default: the plan's `soak.hours`; one is needed)")
    p.add_argument("--interval-s", type=sampling_interval, default=None, metavar="SECONDS",
                   help=f"seconds between samples, at least 1 (default: the plan's `soak.interval_s`, else "
                        f"{DEFAULT_INTERVAL_S:g})")
    p.add_argument("--step", default=None,
                   help="the plan's step to hold, by name (default: the plan's `soak.step`, else its first)")
    p.add_argument("--settle-s", type=settling_time, default=None, metavar="SECONDS",
                   help="seconds from the soak's start shown and not judged: probes starting, caches filling "
                        "(default: the plan's `soak.settle_s`, else a tenth of the soak, at most 15 min)")
    p.add_argument("--out", help="results folder (default: reports/soak-<plan>-<time>)")
    p.add_argument("--kube-version", help="override the plan's Kubernetes version")
    run_options(p)
    p.set_defaults(func=cmd_soak)


def run_options(p: argparse.ArgumentParser, *, repeat: bool = False, baseline: bool = False,
                existing: bool = True, gated: bool = True) -> None:
    """The options of every command that runs plans: `repeat` adds --repeat, `baseline` the CI gate's
    --baseline, `existing` the existing-cluster and remote-worker options (lessons start their own local
    control planes, and never gate), `gated` --force and (with `existing`) --no-gate: a capacity search
    offers neither, as it always runs up to what the machine holds and its exit code is no verdict."""
    if repeat:
        p.add_argument("--repeat", type=count_arg, default=None, metavar="N",
                       help="run the plan N times (fresh control plane each) into OUT/repeat-<k>/ "
                            "(default: the plan's `repeat`, 1)")
    if baseline:
        p.add_argument("--baseline", metavar="DIR",
                       help="after the run (all repeats), compare it (B) against this earlier run of the same plan "
                            "(A: a run folder or a folder of repeats) into OUT/compare/; exit 1 on a regression as "
                            "on a failed SLO (even with --no-gate); OUT/gate-junit.xml holds both for CI")
        p.add_argument("--force-baseline", action="store_true",
                       help="gate on a --baseline made from another plan (other steps or load); separate from "
                            "--force, which only lets a plan beyond this machine run")
    p.add_argument("--workers", type=count_arg, default=None, help="Locust worker processes (default: the plan's)")
    if gated:
        p.add_argument("--force", action="store_true", help="run a plan estimated to be beyond this machine")
    if not existing:
        worker.add_run_options(p, distributed=False)
        return
    if gated:
        p.add_argument("--no-gate", action="store_true", help="exit 0 even when an SLO fails")
    p.add_argument("--kubeconfig", help="run against an existing cluster with this kubeconfig")
    p.add_argument("--context", help="the kubeconfig context to use (required with --kubeconfig)")
    p.add_argument("--allow-context", help="confirm the context by repeating its name (safety guard)")
    p.add_argument("--kwok-mode", choices=("local", "in-cluster"),
                   help="existing cluster: run kwok here (default when its binary is cached) or in the cluster")
    worker.add_run_options(p)
