"""`loadtest report | compare | rehearse`: rebuild a run's pages, compare runs, rehearse an upgrade."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests import results
from loadtests.cli.output import REPORTS_DIR, say
from loadtests.errors import (
    LoadTestError,
    UnreadableFile,
)
from loadtests.results.embedded import runs_from_html

if TYPE_CHECKING:
    from loadtests.analysis.judge import CompareResult
    from loadtests.analysis.samples import Side


def recompute_run(folder: Path) -> None:
    """Recompute every measured step's server-side figures from the /metrics pages kept with it, and whether
    it was the breaking point, and save them."""
    from loadtests.analysis import saturation
    from loadtests.analysis.scrapes import recompute, step_folder

    run = results.load(folder)
    cpus = (run.environment.get("machine") or {}).get("cpus")
    for step in run.steps:
        if step.status == "measured" or (step.status == "saturated" and step.window):
            for line in recompute(step, step_folder(folder, step.index)):
                say(f"note: {line}")
            saturation.apply(step, saturation.while_measured(step, cpus))
    results.save(run, folder)
    say(f"recomputed: {folder / results.RESULTS_FILE} (server-side figures from the kept /metrics pages; "
        "saturation from the recorded health)")


def unpack_page(page: Path, folder: Path | None) -> Path:
    """Write the runs a report page carries back into a run folder (a folder of repeat-<k>/ for a report of
    repeats), so every command that reads run folders reads them; return the folder."""
    runs = runs_from_html(page)
    if folder is None:
        first = runs[0][1].run_id
        folder = REPORTS_DIR / (f"{first}-from-page" if len(runs) == 1 else f"{Path(page).stem}-repeats-from-page")
    targets = [folder / name if name else folder for name, _ in runs]
    taken = [t for t in targets if (t / results.RESULTS_FILE).exists()]
    if taken:
        raise LoadTestError(f"{taken[0]} already holds a {results.RESULTS_FILE}: name an empty folder to write "
                            f"{page}'s results into (loadtest report --from {page} DIR)")
    for target, (_, run) in zip(targets, runs, strict=True):
        results.save(run, target)
    say(f"from {page}: {len(runs)} run(s) written into {folder} (keys that look like credentials were left out "
        "of the page, so of these results too)")
    return folder


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild a run folder's report; for the folder of a repeated run, each repeat's and then the folder's;
    with --from, first write a report page's results back into a run folder."""
    from loadtests.analysis.samples import repeat_folders
    from loadtests.report.html import write_report
    from loadtests.report.repeats import write_repeats_report

    if args.from_page:
        folder = unpack_page(Path(args.from_page), Path(args.run_dir) if args.run_dir else None)
    elif args.run_dir:
        folder = Path(args.run_dir)
    else:
        raise LoadTestError("report: name a run folder (loadtest report RUN_DIR), or a report page to rebuild one "
                            "from (loadtest report --from report.html [DIR])")
    repeats = repeat_folders(folder)
    try:
        for run_folder in repeats or [folder]:
            if args.recompute and (run_folder / results.RESULTS_FILE).is_file():
                recompute_run(run_folder)
        for repeat in repeats:
            if (repeat / results.RESULTS_FILE).is_file():
                say(f"report: {write_report(repeat)}")
            else:
                say(f"note: {repeat} has no {results.RESULTS_FILE} (the repeat recorded no step): no report")
        path = write_repeats_report(folder) if repeats else write_report(folder)
    except UnreadableFile:
        raise  # it names its file
    except (FileNotFoundError, ValueError) as error:
        raise LoadTestError(f"{folder}: {error}") from None
    say(f"{'repeats report' if repeats else 'report'}: {path}")
    if (folder / "soak.html").is_file() and not repeats:
        say(f"soak report: {folder / 'soak.html'}")
    say(f"junit: {folder / 'junit.xml'}")
    return 0


def threshold_pairs(pairs: list[str]) -> dict[str, float]:
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
    from loadtests.analysis.rules import limits_from
    from loadtests.analysis.samples import load_side

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
            say(f"note: run {side.label} ({folder}) did not complete (status {run.status}: "
                f"{run.error or 'no reason'}); only its {len(run.steps)} finished step(s) are compared, and what "
                "it lacks is no improvement")
    result = compare_sides(side_a, side_b, out, {**planned, **thresholds} or None, force=force)
    for row in result.regressions:
        say(f"REGRESSION  step {row.step_name}: {row.label}: {row.describe()}: {row.rule_text}")
    for row in result.not_significant:
        say(f"~           step {row.step_name}: {row.label}: {row.describe()}: {row.rule_text}, but "
            f"{row.within_text if row.tested else 'within the recorded noise'}")
    for row in result.unchecked_changes:
        say(f"CHANGED     step {row.step_name}: {row.label}: {row.describe()}: {row.rule_text}; a change, not a "
            "regression")
    say(result.noise)
    say(result.headline)
    say(f"comparison: {result.html_path}")
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
    thresholds = threshold_pairs(args.threshold)
    if args.alpha is not None:
        try:
            thresholds["alpha"] = float(args.alpha)
        except ValueError:
            raise LoadTestError(f"--alpha {args.alpha!r}: expected a number between 0 and 1, e.g. 0.05") from None
    out = Path(args.out) if args.out else REPORTS_DIR / f"compare-{_side_name(a)}-vs-{_side_name(b)}"
    return compare_runs(a, b, out, thresholds, args.force)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("report", help="rebuild report.html and junit.xml from a results folder, or a run folder "
                                      "from a report page (--from)")
    p.add_argument("run_dir", nargs="?", help="the run folder (with --from: where to write it; default "
                                              "reports/<run-id>-from-page)")
    p.add_argument("--from", dest="from_page", metavar="REPORT_HTML",
                   help="a run report or a report of repeats: write the results it carries into the run folder, "
                        "then rebuild its report")
    p.add_argument("--recompute", action="store_true",
                   help="first recompute the server-side figures from the /metrics pages kept in the run folder")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="compare two runs, or two sets of repeated runs; exit 1 when B regressed "
                                       "against A")
    p.add_argument("a", nargs="?", metavar="A",
                   help="side A (baseline): a run folder, a folder of repeats (repeat-1/, ...), or the report.html of "
                        "either")
    p.add_argument("b", nargs="?", metavar="B", help="side B (candidate): as A")
    p.add_argument("--a", dest="a_dirs", nargs="+", metavar="DIR", help="side A as one or more folders or report "
                   "pages (instead of the positional A and B)")
    p.add_argument("--b", dest="b_dirs", nargs="+", metavar="DIR", help="side B as one or more folders or report "
                   "pages")
    p.add_argument("--out", help="folder for compare.html and compare-junit.xml (default: reports/compare-<A>-vs-<B>)")
    p.add_argument("--threshold", action="append", default=[], metavar="KEY=NUMBER",
                   help="override a regression threshold, e.g. latency_pct=10 (repeatable)")
    p.add_argument("--alpha", default=None, metavar="P",
                   help="significance level for repeated runs (default: the plan's compare.alpha, else 0.05)")
    p.add_argument("--force", action="store_true", help="compare runs made from different plans")
    p.set_defaults(func=cmd_compare)
