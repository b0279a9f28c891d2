"""The exit-code table of docs/faults.md (the README links it) is the one source: its codes are the CLI's,
every error class exits with one of them, and each row is exercised by the tests named here (a renamed or
removed test fails this one)."""

from __future__ import annotations

import ast
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
        "tests/faults/test_faults.py::test_signals_mid_step_stop_everything_and_keep_finished_steps",
        "tests/faults/test_faults.py::test_a_component_that_fails_at_start_says_its_own_error_line",
        "tests/faults/test_faults.py::test_an_aborted_capacity_search_says_it_did_not_finish",
        "tests/faults/test_faults.py::test_an_interrupted_lesson_names_what_ran_aborted_and_never_ran"],
    4: ["tests/faults/test_faults.py::test_a_full_disk_ends_the_run_in_one_line_and_keeps_finished_steps",
        "tests/faults/test_faults.py::test_etcd_on_a_full_disk_at_start_is_the_environment_naming_the_folder"],
    141: ["tests/unit/test_broken_pipe.py::test_compare_read_by_head_exits_output_closed_and_says_nothing_more"],
}


def readme_codes() -> dict[int, str]:
    """The rows of the "Exit codes" table in docs/faults.md: code -> meaning."""
    text = (ROOT / "docs" / "faults.md").read_text()
    table = text.split("## Exit codes", 1)[1].split("\n\n", 2)[1]
    row = re.compile(r"^\| (\d+) \| ((?:[^|\\]|\\.)+) \|", re.MULTILINE)  # a cell may hold an escaped \|
    return {int(m.group(1)): m.group(2) for m in row.finditer(table)}


def test_the_readme_table_is_the_clis_codes() -> None:
    named = {value for key, value in vars(errors).items() if key.startswith("EXIT_") and isinstance(value, int)}
    assert set(readme_codes()) == named == {0, 1, 2, 3, 4, 141}


def test_every_error_class_exits_with_a_code_of_the_table() -> None:
    def subclasses(cls: type) -> list[type]:
        return [cls, *(found for sub in cls.__subclasses__() for found in subclasses(sub))]

    codes = readme_codes()
    for cls in subclasses(errors.LoadTestError):
        assert cls.exit_code in codes and cls.exit_code >= 2, cls


def test_every_row_is_exercised_by_a_test_that_exists() -> None:
    assert set(EXERCISED) == set(readme_codes())
    for code, tests in EXERCISED.items():
        for node in tests:
            path, name = node.split("::")
            source = (ROOT / path).read_text()
            found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name]
            assert found, f"exit {code}: {node} does not exist"
            assert f"== {code}" in (ast.get_source_segment(source, found[0]) or ""), f"{node} does not check {code}"
