"""The exit-code table of docs/faults.md (the README links it) is the one source, true for every command: every
code the CLI can end with (each error class's, each literal code in loadtests/cli/, each forced exit) is a row of
it, every row is a code something produces, and each row is exercised by the tests named here (a renamed or
removed test fails this one)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from loadtests import errors

ROOT = Path(__file__).resolve().parents[2]
# each code of the table, and tests that end a real command with it
EXERCISED = {
    0: ["tests/integration/test_run.py::test_smoke_plan_end_to_end",
        "tests/unit/test_compare_cli.py::test_exit_codes_follow_the_verdict"],
    1: ["tests/unit/test_compare_cli.py::test_exit_codes_follow_the_verdict",
        "tests/integration/test_capacity.py::test_a_step_that_does_not_converge_is_saturated_and_the_run_stops_growing"],
    2: ["tests/faults/test_faults.py::test_a_non_finite_plan_number_is_refused_before_anything_starts",
        "tests/faults/test_faults.py::test_a_corrupt_kept_file_is_refused_in_one_line_naming_it",
        "tests/faults/test_faults.py::test_a_report_page_given_for_a_run_folder_says_what_to_give",
        "tests/integration/test_exec_credentials.py::test_credentials_refused_before_anything_starts_are_bad_input"],
    3: ["tests/faults/test_faults.py::test_etcd_killed_mid_step_ends_with_one_error_and_partial_report",
        "tests/faults/test_faults.py::test_a_control_plane_stopped_from_outside_is_said_so",
        "tests/faults/test_faults.py::test_signals_mid_step_stop_everything_and_keep_finished_steps",
        "tests/faults/test_faults.py::test_a_component_that_fails_at_start_says_its_own_error_line",
        "tests/faults/test_faults.py::test_an_aborted_capacity_search_says_it_did_not_finish",
        "tests/faults/test_faults.py::test_an_interrupted_lesson_names_what_ran_aborted_and_never_ran"],
    4: ["tests/faults/test_faults.py::test_a_full_disk_ends_the_run_in_one_line_and_keeps_finished_steps",
        "tests/faults/test_faults.py::test_etcd_on_a_full_disk_at_start_is_the_environment_naming_the_folder"],
    130: ["tests/integration/test_bad_input.py::test_sigint_during_up_stops_everything_started"],
    141: ["tests/unit/test_broken_pipe.py::test_compare_read_by_head_exits_output_closed_and_says_nothing_more"],
}


def readme_codes() -> dict[int, str]:
    """The rows of the "Exit codes" table in docs/faults.md: code -> meaning."""
    text = (ROOT / "docs" / "faults.md").read_text()
    table = text.split("## Exit codes", 1)[1].split("\n\n", 2)[1]
    row = re.compile(r"^\| (\d+) \| ((?:[^|\\]|\\.)+) \|", re.MULTILINE)  # a cell may hold an escaped \|
    return {int(m.group(1)): m.group(2) for m in row.finditer(table)}


NAMED = {key: value for key, value in vars(errors).items() if key.startswith("EXIT_") and isinstance(value, int)}
PACKAGE = ROOT / "loadtests"


def _sources(folder: Path) -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(folder.rglob("*.py"))]


def error_classes() -> dict[str, type]:
    """Every LoadTestError subclass in loadtests/, found by reading the source (so one in a module no test
    imports is not missed), then imported: class name -> class."""
    bases: dict[str, tuple[str, set[str]]] = {}
    for path, tree in _sources(PACKAGE):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                bases[node.name] = (module, names)
    found = {"LoadTestError"}
    while grown := {name for name, (_, names) in bases.items() if names & found} - found:
        found |= grown
    return {name: getattr(importlib.import_module(bases[name][0]), name) for name in sorted(found)}


def _code(node: ast.expr | None) -> set[int]:
    """The exit codes an expression can be: an int literal, an EXIT_ name, either branch of `a if c else b`."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return {node.value}
    if isinstance(node, ast.Name) and node.id in NAMED:
        return {NAMED[node.id]}
    if isinstance(node, ast.IfExp):
        return _code(node.body) | _code(node.orelse)
    return set()


def _exits(func: ast.expr) -> bool:
    """`sys.exit`, `os._exit`, `self.exit` (argparse), `SystemExit`."""
    return getattr(func, "attr", None) in ("exit", "_exit") or getattr(func, "id", None) == "SystemExit"


def literal_codes() -> dict[int, list[str]]:
    """Each code written out in loadtests/cli/ (`return 1`, `return EXIT_PASSED`, `1 if gate else 0`) and each
    exit anywhere in loadtests/ (`sys.exit(n)`, `os._exit(n)`, `parser.exit(n, ...)`, `raise SystemExit(n)`):
    code -> where."""
    found: dict[int, list[str]] = {}
    for path, tree in _sources(PACKAGE):
        in_cli = path.parent == PACKAGE / "cli"
        for node in ast.walk(tree):
            codes: set[int] = set()
            if isinstance(node, ast.Return) and in_cli:
                codes = _code(node.value)
            elif isinstance(node, ast.Call) and node.args and _exits(node.func):
                codes = _code(node.args[0])
            for code in codes:
                found.setdefault(code, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_error_class_exits_with_a_code_of_the_table() -> None:
    classes = error_classes()
    assert {"RunAborted", "ComponentFailed", "EnvironmentProblem", "RemoteWorkerError"} <= set(classes)
    codes = readme_codes()
    for name, cls in classes.items():
        assert issubclass(cls, errors.LoadTestError), name
        assert cls.exit_code in codes and cls.exit_code >= 2, f"{name} exits {cls.exit_code}: not a row for errors"


def test_every_code_the_cli_writes_is_a_row_of_the_table() -> None:
    codes = readme_codes()
    for code, where in literal_codes().items():
        assert code in codes, f"exit {code} ({', '.join(where)}) is not in docs/faults.md's table"


def test_every_row_of_the_table_is_a_code_something_produces() -> None:
    produced = set(literal_codes()) | {cls.exit_code for cls in error_classes().values()}
    assert set(readme_codes()) == produced
    assert set(NAMED.values()) <= produced, "a named exit code nothing uses"


def test_every_row_is_exercised_by_a_test_that_exists() -> None:
    assert set(EXERCISED) == set(readme_codes())
    for code, tests in EXERCISED.items():
        for node in tests:
            path, name = node.split("::")
            source = (ROOT / path).read_text()
            found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name]
            assert found, f"exit {code}: {node} does not exist"
            assert f"== {code}" in (ast.get_source_segment(source, found[0]) or ""), f"{node} does not check {code}"
