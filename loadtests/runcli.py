"""`loadtest run | report | compare | rehearse`: the commands that run plans and read their results.

The runner (and pandas, Locust's CSV reader, behind it) is imported only by the commands that run plans, so
that `loadtest status` or `loadtest report` start quickly.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests import plan as plan_mod
from loadtests import results
from loadtests.errors import MIN_FREE_BYTES, LoadTestError, disk_full
from loadtests.plan import Plan

if TYPE_CHECKING:
    from loadtests.capacity import StepChooser
    from loadtests.controlplane.base import Target

REPORTS_DIR = Path("reports")

EXIT_PASSED, EXIT_SLO_FAILED, EXIT_BAD_INPUT, EXIT_ABORTED, EXIT_ENVIRONMENT = 0, 1, 2, 3, 4


def _say(message: str) -> None:
    print(message, flush=True)


def count_arg(text: str) -> int:
    """argparse type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 (got {text!r})") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0 (got {value})")
    return value


def new_run_id(plan: Plan) -> str:
    return f"{plan.name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def make_target(plan: Plan, run_id: str, out_dir: Path, args: argparse.Namespace) -> Target:
    if plan.target.kind == "cluster" or getattr(args, "kubeconfig", None):
        from loadtests.controlplane.existing import ExistingCluster

        return ExistingCluster.from_args(plan, args, log_dir=out_dir / "control-plane-logs", log=_say)
    from loadtests.controlplane.local import LocalOptions, RunControlPlane

    return RunControlPlane(LocalOptions(
        # two runs with the same folder name never share a cluster
        name=f"run-{run_id}-{os.getpid()}", kube_version=plan.target.kube_version,
        heartbeat_factor=plan.target.heartbeat_factor, events_etcd=plan.target.events_etcd, tied_to_owner=True),
        out_dir, _say)


def execute(plan: Plan, out_dir: Path, args: argparse.Namespace,
            chooser: StepChooser | None = None) -> tuple[results.RunResult | None, LoadTestError | None]:
    """Run a plan into out_dir and write its report; the results, and what stopped the run (said in one
    line already), if anything did."""
    from loadtests.report import write_report
    from loadtests.runner import Runner, RunOptions

    prepare_out_dir(out_dir)
    runner = Runner(plan, RunOptions(out_dir=out_dir, workers=args.workers, progress=_say),
                    make_target(plan, out_dir.name, out_dir, args), chooser)
    failure: LoadTestError | None = None
    try:
        runner.run()
    except LoadTestError as error:  # aborted (3) or the environment (4); everything is stopped by now
        failure = error
    try:
        _say(f"report: {write_report(out_dir)}")
    except Exception as error:  # the results are what matters; a report can be rebuilt from them later
        reason = disk_full(out_dir) or f"{type(error).__name__}: {error}"
        _say(f"report not written ({reason}); rebuild it later: loadtest report {out_dir}")
    try:
        run = results.load(out_dir)
    except (OSError, ValueError):
        run = None
    if failure is not None:
        saved = f"{len(run.steps)} finished steps saved in {out_dir}" if run else f"no results in {out_dir}"
        prefix = "" if failure.exit_code == EXIT_ENVIRONMENT else "run aborted: "
        _say(f"loadtest: {prefix}{failure} ({saved})")
    return run, failure


def run_plan(plan: Plan, out_dir: Path, args: argparse.Namespace) -> int:
    """Run one plan into out_dir, write its report, and return the exit code its verdicts call for."""
    from loadtests.report import run_passed, verdicts

    run, failure = execute(plan, out_dir, args)
    if failure is not None or run is None:
        return failure.exit_code if failure else EXIT_ABORTED
    for step in run.steps:
        if step.status == "saturated":
            _say(f"SATURATED   step {step.name}: {step.saturation.get('condition')}: "
                 f"{step.saturation.get('evidence')}")
    found = verdicts(run)
    failed = [v for v in found if v.passed is False]
    for verdict in failed:
        _say(f"SLO FAILED  step {verdict.step_name}: {verdict.slo} p99 {verdict.value_s:.3f} s > "
             f"{verdict.threshold_s:g} s")
    passed = run_passed(run)
    judged = sum(1 for v in found if v.passed is not None)
    _say(f"{'PASS' if passed else 'FAIL'}: {judged - len(failed)}/{judged} SLO checks passed over "
         f"{len(run.steps)} steps")
    gate = plan.gate and not args.no_gate
    return EXIT_PASSED if passed or not gate else EXIT_SLO_FAILED


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


def check_runnable(plan: Plan, args: argparse.Namespace) -> None:
    """Everything a run needs, checked before anything starts: binaries of its version, and a machine that
    can hold it (unless --force). Warns about clusters of runs that were killed and left running."""
    from loadtests import sizing

    if plan.target.kind == "local" and not getattr(args, "kubeconfig", None):
        from loadtests.binaries import find

        find(plan.target.kube_version)
        if not getattr(args, "force", False) and (beyond := sizing.beyond_this_machine(plan)):
            raise LoadTestError(beyond)
    warn_about_orphans()


def warn_about_orphans() -> None:
    """Name clusters of killed runs that still run; remove the folders (keys) of those that stopped."""
    import shutil

    from loadtests.controlplane.local import orphaned_clusters, stale_clusters

    for state in orphaned_clusters():
        _say(f"warning: cluster {state.name} of a run that is gone still runs ({', '.join(state.running_names())});"
             f" stop it: loadtest down --orphans")
    for state in stale_clusters():
        shutil.rmtree(state.directory, ignore_errors=True)


def cmd_run(args: argparse.Namespace) -> int:
    plan = plan_mod.load(args.plan)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / new_run_id(plan)).resolve()
    check_runnable(plan, args)
    return run_plan(plan, out_dir, args)


def cmd_capacity(args: argparse.Namespace) -> int:
    """Grow the fleet until the control plane stops holding, then narrow to the breaking point. Reaching
    a limit is the expected outcome: the exit code says whether the search finished (0), not the verdict."""
    from loadtests.capacity import CapacitySearch, summarize

    plan = plan_mod.load(args.plan)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    search = CapacitySearch(plan, args.max_nodes)
    args.force = True  # reaching what the machine can hold is the point of the search
    check_runnable(plan, args)
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / f"capacity-{new_run_id(plan)}").resolve()
    plan.capacity.max_nodes = search.max_nodes  # recorded with the results, for the report
    run, failure = execute(plan, out_dir, args, search)
    if run is not None:
        _say(summarize(run, search.max_nodes if search.failed is None else None).line())
    return failure.exit_code if failure else EXIT_PASSED


def cmd_report(args: argparse.Namespace) -> int:
    from loadtests.report import write_report

    folder = Path(args.run_dir)
    try:
        path = write_report(folder)
    except (FileNotFoundError, ValueError) as error:
        raise LoadTestError(f"{folder}: {error}") from None
    _say(f"report: {path}")
    _say(f"junit: {folder / 'junit.xml'}")
    return 0


def _thresholds(pairs: list[str]) -> dict[str, float]:
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            raise LoadTestError(f"--threshold {pair!r}: expected KEY=NUMBER, e.g. latency_pct=25") from None
    return out


def compare_runs(a: Path, b: Path, out: Path, thresholds: dict[str, float], force: bool) -> int:
    from loadtests.report import compare

    # thresholds: the defaults, then the candidate plan's `compare:` section, then --threshold flags
    try:
        planned = results.load(b).plan.get("compare") or {}
    except (OSError, ValueError):
        planned = {}  # compare() itself says what is wrong with the folder
    for side, folder in (("A", a), ("B", b)):
        try:
            run = results.load(folder)
        except (OSError, ValueError):
            continue  # compare() itself says what is wrong with the folder
        if run.status != "complete":
            _say(f"note: run {side} ({folder}) did not complete (status {run.status}: {run.error or 'no reason'}); "
                 f"only its {len(run.steps)} finished step(s) are compared, and what it lacks is no improvement")
    result = compare(a, b, out, {**planned, **thresholds} or None, force=force)
    for row in result.regressions:
        _say(f"REGRESSION  step {row.step_name}: {row.name} ({row.chart}): {row.a:g} -> {row.b:g} {row.unit}, "
             f"{row.rule_text}")
    _say(f"{result.headline}")
    _say(f"comparison: {result.html_path}")
    return 0 if result.passed else 1


def cmd_compare(args: argparse.Namespace) -> int:
    a, b = Path(args.a), Path(args.b)
    out = Path(args.out) if args.out else REPORTS_DIR / f"compare-{a.name}-vs-{b.name}"
    return compare_runs(a, b, out, _thresholds(args.threshold), args.force)


def cmd_rehearse(args: argparse.Namespace) -> int:
    """The same plan on two Kubernetes versions, then their comparison: an upgrade rehearsal."""
    plan_from = plan_mod.load(args.plan)
    base = Path(args.out) if args.out else REPORTS_DIR / f"rehearsal-{new_run_id(plan_from)}"
    codes = []
    folders = []
    plans = [plan_from.on_kube_version(v) for v in (args.from_version, args.to_version)]
    for plan in plans:  # every version provided, and the machine big enough, before the first run starts
        check_runnable(plan, args)
    for plan in plans:
        version = plan.target.kube_version
        folder = base / version
        folders.append(folder)
        _say(f"=== rehearsal: {plan.name} on Kubernetes {version} ===")
        codes.append(run_plan(plan, folder, args))
    if failed := [code for code in codes if code in (EXIT_ABORTED, EXIT_ENVIRONMENT)]:
        _say("loadtest: a rehearsal run was aborted; compare skipped")
        return failed[0]
    return compare_runs(folders[0], folders[1], base / "compare", _thresholds(args.threshold), False)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("run", help="run a plan: growing steps, load, measurements, report")
    p.add_argument("--plan", default="default", help="plan file, or the name of a bundled plan (default: default)")
    p.add_argument("--out", help="results folder (default: reports/<plan>-<time>)")
    p.add_argument("--kube-version", help="override the plan's Kubernetes version")
    _run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("capacity", help="grow the fleet until an SLO fails or a step saturates; report the "
                                        "largest scale that held and what broke at the next")
    p.add_argument("--plan", default="capacity", help="plan file or bundled plan name (default: capacity)")
    p.add_argument("--max-nodes", type=count_arg, default=None, help="stop growing here (default: the plan's)")
    p.add_argument("--out", help="results folder (default: reports/capacity-<plan>-<time>)")
    p.add_argument("--kube-version", help="override the plan's Kubernetes version")
    _run_options(p)
    p.set_defaults(func=cmd_capacity)

    p = sub.add_parser("report", help="rebuild report.html and junit.xml from a results folder")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="compare two runs; exit 1 when B regressed against A")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--out")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER",
                   help="override a regression threshold, e.g. latency_pct=10 (repeatable)")
    p.add_argument("--force", action="store_true", help="compare runs made from different plans")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("rehearse", help="run one plan on two Kubernetes versions and compare them")
    p.add_argument("--plan", default="default")
    p.add_argument("--from", dest="from_version", required=True)
    p.add_argument("--to", dest="to_version", required=True)
    p.add_argument("--out")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER")
    _run_options(p)
    p.set_defaults(func=cmd_rehearse)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=count_arg, default=None, help="Locust worker processes (default: the plan's)")
    p.add_argument("--force", action="store_true", help="run a plan estimated to be beyond this machine")
    p.add_argument("--no-gate", action="store_true", help="exit 0 even when an SLO fails")
    p.add_argument("--kubeconfig", help="run against an existing cluster with this kubeconfig")
    p.add_argument("--context", help="the kubeconfig context to use (required with --kubeconfig)")
    p.add_argument("--allow-context", help="confirm the context by repeating its name (safety guard)")
    p.add_argument("--kwok-mode", choices=("local", "in-cluster"),
                   help="existing cluster: run kwok here (default when its binary is cached) or in the cluster")


