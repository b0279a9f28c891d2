"""`loadtest lesson`: the lessons of the field reports, each variant on fresh control planes, then its page."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadtests.cli.flags import count_arg
from loadtests.cli.output import REPORTS_DIR, say
from loadtests.cli.run import check_runnable, prepare_out_dir, run_options, run_plan, run_repeats
from loadtests.errors import (
    EXIT_ABORTED,
    EXIT_ENVIRONMENT,
    EXIT_PASSED,
    PlanError,
)


def cmd_lesson(args: argparse.Namespace) -> int:
    """Run lessons of the field reports: each variant on a fresh control plane, then the lesson's page. The exit
    code says whether every run finished (0) or one was aborted (3, or 4 for the environment, as the run said), not
    whether a lesson reproduced."""
    from loadtests.config import lesson as lesson_mod
    from loadtests.report.lesson import write_lesson_page

    if args.list:
        for found in lesson_mod.load_all():
            say(f"{found.name:<28} {found.summary}")
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
        f"lesson-{lessons[0].name}-{stamp}" if len(lessons) == 1 else f"lessons-{stamp}")).resolve()
    aborted = EXIT_PASSED  # the exit code of the run that ended the lessons, if one did
    lines = []
    for found in lessons:
        folder = base if len(lessons) == 1 else base / found.name
        prepare_out_dir(folder)
        for variant in found.variants:
            say(f"=== lesson {found.name}: {variant.name} ({variant.says}) ===")
            plan, request = plans[(found.name, variant.name)]
            repeat = lesson_mod.DEFAULT_REPEAT if args.repeat is None else args.repeat
            code = (run_plan(plan, folder / variant.name, request) if repeat == 1
                    else run_repeats(plan, folder / variant.name, repeat, request))
            if code in (EXIT_ABORTED, EXIT_ENVIRONMENT):  # a fault or Ctrl-C ends every lesson, as it ends a run
                aborted = code
                break
        page = write_lesson_page(found, folder)
        verdict = json_verdict(folder)
        lines.append(f"{found.name:<28} {verdict}")
        say(f"lesson {found.name}: {verdict}: {page}")
        if aborted:
            states = variant_states(folder)
            ran = ", ".join(f"{name} {state}" for name, state in states.items())
            after = [f.name for f in lessons[lessons.index(found) + 1:]]
            say(f"loadtest: lesson {found.name} was aborted ({ran})"
                 + (f"; lessons not run: {', '.join(after)}" if after else ""))
            break
    if len(lessons) > 1:
        from loadtests.report.lesson import lessons_table

        ran = [base / f.name for f in lessons if (base / f.name / "lesson.json").is_file()]
        (base / "lessons.md").write_text(lessons_table(ran))
        say("lessons:\n" + "\n".join(f"  {line}" for line in lines) + f"\ntable: {base / 'lessons.md'}")
    return aborted


def json_verdict(folder: Path) -> str:
    """The verdict line of a lesson folder's lesson.json: the verdict and its first figure's effect."""
    from loadtests.analysis.lesson_runs import lesson_record

    data = lesson_record(folder)
    first = next((c for c in data["comparisons"] if c["measure"] == data.get("deciding")), None)
    if first is None:
        return f"{data['verdict']} ({data['headline']})" if data.get("headline") else data["verdict"]
    return f"{data['verdict']} ({first['measure']} against {first['against']}: {first['reason']})"


def variant_states(folder: Path) -> dict[str, str]:
    """Each variant's state in a lesson folder's lesson.json: complete, aborted, recorded nothing, never ran."""
    from loadtests.analysis.lesson_runs import lesson_record

    data = lesson_record(folder)
    return {name: found["state"] for name, found in (data.get("variants") or {}).items()}


def add_commands(sub: Any) -> None:
    p = sub.add_parser("lesson", help="run a lesson of the field reports: the setup they warn against and the fix, "
                                      "side by side (lesson.html)")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="lessons to run (a name, or a lesson file of your own: FILE.yaml), or `all` (see --list)")
    p.add_argument("--list", action="store_true", help="list the lessons, one line each")
    p.add_argument("--scale", choices=("small", "medium"), default="medium",
                   help="small: seconds per variant (the test suite's); medium (default): minutes")
    p.add_argument("--out", help="results folder (default: reports/lesson-<name>-<time>)")
    p.add_argument("--kube-version", help="run the lesson on this Kubernetes version")
    p.add_argument("--repeat", type=count_arg, default=None, metavar="N",
                   help="run each variant N times (default 3): a verdict needs the run-to-run noise, and 1 run "
                        "shows the effect only")
    run_options(p, existing=False)
    p.set_defaults(func=cmd_lesson)
