"""Reports read results only: verdicts, JUnit, one self-contained HTML page per run, and run-to-run compare."""

from loadtests.report.compare import REGRESSION_DEFAULTS, CompareResult, compare
from loadtests.report.html import write_report
from loadtests.report.slo import Verdict, run_passed, verdicts

__all__ = ["REGRESSION_DEFAULTS", "CompareResult", "Verdict", "compare", "run_passed", "verdicts", "write_report"]
