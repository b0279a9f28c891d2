"""`loadtest run | report | compare | rehearse`: the commands that run plans and read their results.

The runner (and pandas, Locust's CSV reader, behind it) is imported only by the commands that run plans, so
that `loadtest status` or `loadtest report` start quickly.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests import results
from loadtests.cli import worker
from loadtests.cli.flags import count_arg
from loadtests.config import plan as plan_mod
from loadtests.config.plan import Plan
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
    UnreadableFile,
    disk_full,
)
from loadtests.load.remote import MasterBind

if TYPE_CHECKING:
    from loadtests.analysis.samples import Side
    from loadtests.report.compare import CompareResult
    from loadtests.run.capacity import StepChooser

REPORTS_DIR = Path("reports")

GATE_JUNIT_FILE = "gate-junit.xml"  # with --baseline: the run's SLO verdicts and the comparison, one file for CI


def _say(message: str) -> None:
    print(message, flush=True)


@dataclass(frozen=True)
class RunRequest:
    """What the command line asks of a run beyond its plan, built once, after every check has passed; the
    rooms below the command line read this, never the parsed arguments."""

    target: TargetRequest
    workers: int | None = None  # None: the plan's value
    master: MasterBind | None = None  # each step's master listens here for workers of other machines
    ui: bool = False  # serve Locust's web UI (read-only) on 127.0.0.1
    gate: bool = True  # False (--no-gate, lessons): failed SLOs do not fail the command


def new_run_id(plan: Plan) -> str:
    return f"{plan.name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def execute(plan: Plan, out_dir: Path, request: RunRequest, chooser: StepChooser | None = None,
            runs_follow: int = 0) -> tuple[results.RunResult | None, LoadTestError | None]:
    """Run a plan into out_dir and write its report; the results, and what stopped the run (said in one
    line already), if anything did."""
    from loadtests.report.html import write_report
    from loadtests.run.runner import Runner, RunOptions

    prepare_out_dir(out_dir)
    from loadtests.controlplane.factory import make_target
    from loadtests.controlplane.processes import free_ports

    options = RunOptions(out_dir=out_dir, workers=request.workers, progress=_say, master=request.master,
                         ui_port=free_ports(1)[0] if request.ui else None, runs_follow=runs_follow)
    runner = Runner(plan, options, make_target(plan, out_dir.name, out_dir, request.target, _say), chooser)
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
        prefix = "run aborted: " if failure.exit_code == EXIT_ABORTED else ""
        _say(f"loadtest: {prefix}{failure} ({saved})")
    return run, failure


def run_plan(plan: Plan, out_dir: Path, request: RunRequest, runs_follow: int = 0) -> int:
    """Run one plan into out_dir, write its report, and return the exit code its verdicts call for."""
    from loadtests.analysis.slo import run_passed, verdicts

    run, failure = execute(plan, out_dir, request, runs_follow=runs_follow)
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
    gate = plan.gate and request.gate
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
        _say(f"warning: {line}")


def cmd_run(args: argparse.Namespace) -> int:
    plan = plan_mod.load(args.plan)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    repeat = repeats_of(plan, args)
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / new_run_id(plan)).resolve()
    baseline = load_baseline(plan, args)
    request = check_runnable(plan, args)
    code = run_plan(plan, out_dir, request) if repeat == 1 else run_repeats(plan, out_dir, repeat, request)
    return code if baseline is None else gate_on_baseline(baseline, out_dir, code, args.force_baseline)


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
        side = load_side(folder, "A", args.force_baseline)
    except CompareError as error:
        raise CompareError(f"--baseline {folder}: {str(error).removeprefix('cannot compare: ')}") from None
    digest = results.plan_digest(plan.to_dict())
    if side.plan_digest != digest:
        line = (f"--baseline {folder} was made from another plan (digest {side.plan_digest}, this plan's {digest}: "
                "other steps or load)")
        if not args.force_baseline:
            raise CompareError(f"{line}; name a baseline of this plan, or pass --force-baseline to gate on it anyway")
        _say(f"note: {line}; gating on it anyway (--force-baseline)")
    _say(f"baseline: {side.run_id} ({folder}, {side.n} run(s))")
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
        _say("baseline comparison skipped: the run did not finish")
        return code
    candidate = load_side(out_dir, "B", force)
    result = show_comparison(baseline, candidate, out_dir / "compare", {}, force)
    suites = []
    for run, folder in zip(candidate.runs, candidate.folders, strict=True):
        tag = "SLO" if candidate.n == 1 else f"SLO {folder.name}"
        suites += [replace(suite, name=f"{tag}: {suite.name}") for suite in junit.run_suites(run)]
    suites += [replace(suite, name=f"baseline: {suite.name}") for suite in junit_suites(result, baseline, candidate)]
    path = junit.write(out_dir / GATE_JUNIT_FILE, f"loadtest gate {candidate.run_id} vs {baseline.run_id}", suites)
    failed = (["an SLO failed"] if code == EXIT_SLO_FAILED else []) + ([] if result.passed else [result.headline])
    if failed:
        _say(f"GATE FAIL: {'; '.join(failed)} (junit: {path})")
        return EXIT_SLO_FAILED
    changed = len(result.unchecked_changes)
    also = f"; {changed} change(s) past their threshold, not noise-checked (see above)" if changed else ""
    _say(f"GATE PASS: no regression against the baseline {baseline.run_id}{also} (junit: {path})")
    return EXIT_PASSED


def run_repeats(plan: Plan, out_dir: Path, repeat: int, request: RunRequest) -> int:
    """The plan `repeat` times into out_dir/repeat-<k>/, each on a fresh control plane, so a comparison can
    tell a change from run-to-run noise; the exit code is the worst of the runs'. An aborted run ends it."""
    from loadtests.report.repeats import write_repeats_report

    prepare_out_dir(out_dir)
    codes = []
    for k in range(1, repeat + 1):
        _say(f"=== repeat {k}/{repeat} of {plan.name} ===")
        # workers of other machines stay for the next repeat
        code = run_plan(plan, out_dir / f"repeat-{k}", request, runs_follow=repeat - k)
        codes.append(code)
        if code in (EXIT_ABORTED, EXIT_ENVIRONMENT):
            _say(f"loadtest: repeat {k} was aborted; the {k - 1} finished repeats are kept in {out_dir}")
            break
    try:
        _say(f"repeats report: {write_repeats_report(out_dir)}")
    except Exception as error:  # the runs' own reports are written; this summary can be rebuilt
        _say(f"repeats report not written ({type(error).__name__}: {error}); rebuild it: loadtest report {out_dir}")
    return max(codes, key=lambda code: (code in (EXIT_ABORTED, EXIT_ENVIRONMENT), code))


def cmd_capacity(args: argparse.Namespace) -> int:
    """Grow the fleet until the control plane stops holding, then narrow to the breaking point. Reaching
    a limit is the expected outcome: the exit code says whether the search finished (0), not the verdict."""
    from loadtests.run.capacity import CapacitySearch, summarize

    plan = plan_mod.load(args.plan)
    if args.kube_version:
        plan = plan.on_kube_version(args.kube_version)
    search = CapacitySearch(plan, args.max_nodes)
    request = check_runnable(plan, args, force=True)  # reaching what the machine can hold is the point
    out_dir = (Path(args.out) if args.out else REPORTS_DIR / f"capacity-{new_run_id(plan)}").resolve()
    plan.capacity.max_nodes = search.max_nodes  # recorded with the results, for the report
    run, failure = execute(plan, out_dir, request, search)
    if run is not None:
        _say(summarize(run, search.max_nodes if search.failed is None else None).line())
    return failure.exit_code if failure else EXIT_PASSED


def recompute_run(folder: Path) -> None:
    """Recompute every step's server-side figures from the /metrics pages kept with it, and save them."""
    from loadtests.analysis.scrapes import recompute, step_folder

    run = results.load(folder)
    for step in run.steps:
        if step.status == "measured":
            for line in recompute(step, step_folder(folder, step.index)):
                _say(f"note: {line}")
    results.save(run, folder)
    _say(f"recomputed: {folder / results.RESULTS_FILE} (server-side figures from the kept /metrics pages)")


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild a run folder's report; for the folder of a repeated run, each repeat's and then the folder's."""
    from loadtests.analysis.samples import repeat_folders
    from loadtests.report.html import write_report
    from loadtests.report.repeats import write_repeats_report

    folder = Path(args.run_dir)
    repeats = repeat_folders(folder)
    try:
        for run_folder in repeats or [folder]:
            if args.recompute and (run_folder / results.RESULTS_FILE).is_file():
                recompute_run(run_folder)
        for repeat in repeats:
            if (repeat / results.RESULTS_FILE).is_file():
                _say(f"report: {write_report(repeat)}")
            else:
                _say(f"note: {repeat} has no {results.RESULTS_FILE} (the repeat recorded no step): no report")
        path = write_repeats_report(folder) if repeats else write_report(folder)
    except UnreadableFile:
        raise  # it names its file
    except (FileNotFoundError, ValueError) as error:
        raise LoadTestError(f"{folder}: {error}") from None
    _say(f"{'repeats report' if repeats else 'report'}: {path}")
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


def compare_runs(a: Path | list[Path], b: Path | list[Path], out: Path, thresholds: dict[str, float],
                 force: bool) -> int:
    """Compare side B against side A (each a run folder, a folder of repeats, or several folders); exit 1 on a
    regression."""
    from loadtests.analysis.samples import load_side
    from loadtests.report.compare import limits_from

    limits_from(thresholds)  # a bad flag is refused before any folder is read
    side_a, side_b = load_side(a, "A", force), load_side(b, "B", force)
    return 0 if show_comparison(side_a, side_b, out, thresholds, force).passed else 1


def show_comparison(side_a: Side, side_b: Side, out: Path, thresholds: dict[str, float],
                    force: bool) -> CompareResult:
    """Compare loaded sides into out (compare.html, compare-junit.xml) and say each regression in one line."""
    from loadtests.report.compare import compare_sides

    # thresholds: the defaults, then the candidate plan's `compare:` section, then --threshold and --alpha flags
    planned = side_b.first.plan.get("compare") or {}
    for side in (side_a, side_b):
        for run, folder in side.incomplete:
            _say(f"note: run {side.label} ({folder}) did not complete (status {run.status}: "
                 f"{run.error or 'no reason'}); only its {len(run.steps)} finished step(s) are compared, and what "
                 "it lacks is no improvement")
    result = compare_sides(side_a, side_b, out, {**planned, **thresholds} or None, force=force)
    for row in result.regressions:
        _say(f"REGRESSION  step {row.step_name}: {row.label}: {row.describe()}: {row.rule_text}")
    for row in result.not_significant:
        _say(f"~           step {row.step_name}: {row.label}: {row.describe()}: {row.rule_text}, but "
             f"{row.within_text if row.tested else 'within the recorded noise'}")
    for row in result.unchecked_changes:
        _say(f"CHANGED     step {row.step_name}: {row.label}: {row.describe()}: {row.rule_text}; a change, not a "
             "regression")
    _say(result.noise)
    _say(result.headline)
    _say(f"comparison: {result.html_path}")
    return result


def _side_name(folders: list[Path]) -> str:
    return folders[0].name + (f"+{len(folders) - 1}" if len(folders) > 1 else "")


def cmd_compare(args: argparse.Namespace) -> int:
    positional = [args.a, args.b]
    if args.a_dirs is None and args.b_dirs is None and None not in positional:
        a, b = [Path(args.a)], [Path(args.b)]
    elif args.a_dirs and args.b_dirs and positional == [None, None]:
        a, b = [Path(d) for d in args.a_dirs], [Path(d) for d in args.b_dirs]
    else:
        raise LoadTestError("compare: name the two sides either as `compare A B` or as "
                            "`compare --a DIR [DIR ...] --b DIR [DIR ...]`, not a mix")
    thresholds = _thresholds(args.threshold)
    if args.alpha is not None:
        try:
            thresholds["alpha"] = float(args.alpha)
        except ValueError:
            raise LoadTestError(f"--alpha {args.alpha!r}: expected a number between 0 and 1, e.g. 0.05") from None
    out = Path(args.out) if args.out else REPORTS_DIR / f"compare-{_side_name(a)}-vs-{_side_name(b)}"
    return compare_runs(a, b, out, thresholds, args.force)


def cmd_rehearse(args: argparse.Namespace) -> int:
    """The same plan on two Kubernetes versions, then their comparison: an upgrade rehearsal."""
    plan_from = plan_mod.load(args.plan)
    base = Path(args.out) if args.out else REPORTS_DIR / f"rehearsal-{new_run_id(plan_from)}"
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
        _say(f"=== rehearsal: {plan.name} on Kubernetes {version} ===")
        codes.append(run_plan(plan, folder, request) if repeat == 1 else run_repeats(plan, folder, repeat, request))
    if failed := [code for code in codes if code in (EXIT_ABORTED, EXIT_ENVIRONMENT)]:
        _say("loadtest: a rehearsal run was aborted; compare skipped")
        return failed[0]
    return compare_runs(folders[0], folders[1], base / "compare", _thresholds(args.threshold), False)


def cmd_lesson(args: argparse.Namespace) -> int:
    """Run lessons of the field reports: each variant on a fresh control plane, then the lesson's page. The exit
    code says whether every run finished (0) or one was aborted (3), not whether a lesson reproduced."""
    from loadtests.config import lesson as lesson_mod
    from loadtests.report.lesson import write_lesson_page

    if args.list:
        for found in lesson_mod.load_all():
            _say(f"{found.name:<28} {found.summary}")
        return EXIT_PASSED
    if not args.names:
        raise PlanError(f"name a lesson (or `all`); known lessons: {', '.join(lesson_mod.names())}")
    wanted = lesson_mod.names() if args.names == ["all"] else args.names
    lessons = [lesson_mod.load(name) for name in wanted]  # an unknown name is refused before anything runs
    if args.repeat == 0:
        raise PlanError(f"--repeat 0: each variant needs at least one run ({lesson_mod.DEFAULT_REPEAT}, the default, "
                        "for a verdict)")
    plans = {}
    for found in lessons:
        for variant in found.variants:
            planned = found.plan(variant, args.scale, args.kube_version)
            found.check_version(planned.target.kube_version)
            # a lesson's warned setup is expected to fail SLOs: that is the lesson (gate off)
            plans[(found.name, variant.name)] = planned, check_runnable(planned, args, orphans=not plans, gate=False)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    base = (Path(args.out) if args.out else REPORTS_DIR / (
        f"lesson-{wanted[0]}-{stamp}" if len(wanted) == 1 else f"lessons-{stamp}")).resolve()
    aborted = False
    lines = []
    for found in lessons:
        folder = base if len(lessons) == 1 else base / found.name
        prepare_out_dir(folder)
        for variant in found.variants:
            _say(f"=== lesson {found.name}: {variant.name} ({variant.says}) ===")
            plan, request = plans[(found.name, variant.name)]
            repeat = lesson_mod.DEFAULT_REPEAT if args.repeat is None else args.repeat
            code = (run_plan(plan, folder / variant.name, request) if repeat == 1
                    else run_repeats(plan, folder / variant.name, repeat, request))
            if code in (EXIT_ABORTED, EXIT_ENVIRONMENT):  # a fault or Ctrl-C ends every lesson, as it ends a run
                aborted = True
                break
        page = write_lesson_page(found, folder)
        verdict = json_verdict(folder)
        lines.append(f"{found.name:<28} {verdict}")
        _say(f"lesson {found.name}: {verdict}: {page}")
        if aborted:
            states = variant_states(folder)
            ran = ", ".join(f"{name} {state}" for name, state in states.items())
            after = [f.name for f in lessons[lessons.index(found) + 1:]]
            _say(f"loadtest: lesson {found.name} was aborted ({ran})"
                 + (f"; lessons not run: {', '.join(after)}" if after else ""))
            break
    if len(lessons) > 1:
        from loadtests.report.lesson import lessons_table

        ran = [base / f.name for f in lessons if (base / f.name / "lesson.json").is_file()]
        (base / "lessons.md").write_text(lessons_table(ran))
        _say("lessons:\n" + "\n".join(f"  {line}" for line in lines) + f"\ntable: {base / 'lessons.md'}")
    return EXIT_ABORTED if aborted else EXIT_PASSED


def json_verdict(folder: Path) -> str:
    """The verdict line of a lesson folder's lesson.json: the verdict and its first figure's effect."""
    from loadtests.report.lesson import lesson_record

    data = lesson_record(folder)
    first = next((c for c in data["comparisons"] if c["measure"] == data.get("deciding")), None)
    if first is None:
        return f"{data['verdict']} ({data['headline']})" if data.get("headline") else data["verdict"]
    return f"{data['verdict']} ({first['measure']} against {first['against']}: {first['reason']})"


def variant_states(folder: Path) -> dict[str, str]:
    """Each variant's state in a lesson folder's lesson.json: complete, aborted, recorded nothing, never ran."""
    from loadtests.report.lesson import lesson_record

    data = lesson_record(folder)
    return {name: found["state"] for name, found in (data.get("variants") or {}).items()}


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
    p.add_argument("--recompute", action="store_true",
                   help="first recompute the server-side figures from the /metrics pages kept in the run folder")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="compare two runs, or two sets of repeated runs; exit 1 when B regressed "
                                       "against A")
    p.add_argument("a", nargs="?", metavar="A",
                   help="side A (baseline): a run folder, or a folder of repeats (repeat-1/, ...)")
    p.add_argument("b", nargs="?", metavar="B", help="side B (candidate): as A")
    p.add_argument("--a", dest="a_dirs", nargs="+", metavar="DIR", help="side A as one or more folders (instead "
                   "of the positional A and B)")
    p.add_argument("--b", dest="b_dirs", nargs="+", metavar="DIR", help="side B as one or more folders")
    p.add_argument("--out")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER",
                   help="override a regression threshold, e.g. latency_pct=10 (repeatable)")
    p.add_argument("--alpha", default=None, metavar="P",
                   help="significance level for repeated runs (default: the plan's compare.alpha, else 0.05)")
    p.add_argument("--force", action="store_true", help="compare runs made from different plans")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("lesson", help="run a lesson of the field reports: the setup they warn against and the fix, "
                                      "side by side (lesson.html)")
    p.add_argument("names", nargs="*", metavar="NAME", help="lessons to run, or `all` (see --list)")
    p.add_argument("--list", action="store_true", help="list the lessons, one line each")
    p.add_argument("--scale", choices=("small", "medium"), default="medium",
                   help="small: seconds per variant (the test suite's); medium (default): minutes")
    p.add_argument("--out", help="results folder (default: reports/lesson-<name>-<time>)")
    p.add_argument("--kube-version", help="run the lesson on this Kubernetes version")
    p.add_argument("--repeat", type=count_arg, default=None, metavar="N",
                   help="run each variant N times (default 3): a verdict needs the run-to-run noise, and 1 run "
                        "shows the effect only")
    _run_options(p)
    p.set_defaults(func=cmd_lesson)

    p = sub.add_parser("rehearse", help="run one plan on two Kubernetes versions and compare them")
    p.add_argument("--plan", default="default")
    p.add_argument("--from", dest="from_version", required=True)
    p.add_argument("--to", dest="to_version", required=True)
    p.add_argument("--out")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER")
    _run_options(p)
    p.set_defaults(func=cmd_rehearse)


def _run_options(p: argparse.ArgumentParser) -> None:
    if p.prog.endswith((" run", " rehearse")):
        p.add_argument("--repeat", type=count_arg, default=None, metavar="N",
                       help="run the plan N times (fresh control plane each) into OUT/repeat-<k>/ "
                            "(default: the plan's `repeat`, 1)")
    if p.prog.endswith(" run"):
        p.add_argument("--baseline", metavar="DIR",
                       help="after the run (all repeats), compare it (B) against this earlier run of the same plan "
                            "(A: a run folder or a folder of repeats) into OUT/compare/; exit 1 on a regression as "
                            "on a failed SLO (even with --no-gate); OUT/gate-junit.xml holds both for CI")
        p.add_argument("--force-baseline", action="store_true",
                       help="gate on a --baseline made from another plan (other steps or load); separate from "
                            "--force, which only lets a plan beyond this machine run")
    p.add_argument("--workers", type=count_arg, default=None, help="Locust worker processes (default: the plan's)")
    p.add_argument("--force", action="store_true", help="run a plan estimated to be beyond this machine")
    if p.prog.endswith(" lesson"):  # lessons configure local control planes of their own, and never gate
        worker.add_run_options(p, distributed=False)
        return
    p.add_argument("--no-gate", action="store_true", help="exit 0 even when an SLO fails")
    p.add_argument("--kubeconfig", help="run against an existing cluster with this kubeconfig")
    p.add_argument("--context", help="the kubeconfig context to use (required with --kubeconfig)")
    p.add_argument("--allow-context", help="confirm the context by repeating its name (safety guard)")
    p.add_argument("--kwok-mode", choices=("local", "in-cluster"),
                   help="existing cluster: run kwok here (default when its binary is cached) or in the cluster")
    worker.add_run_options(p)


