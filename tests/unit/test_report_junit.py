"""junit.xml as CI reads it: a suite per step, a case per SLO, failures and skips in the right places."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from loadtests.analysis.slo import verdicts
from loadtests.report.html import write_report
from loadtests.results import load
from tests.unit.reportdata import ABORTED, SAMPLE, copy_run, edited_run


def cases(root: ET.Element) -> list[ET.Element]:
    return root.findall("./testsuite/testcase")


def test_sample_junit_structure(tmp_path: Path) -> None:
    folder = copy_run(SAMPLE, tmp_path / "run")
    write_report(folder)
    root = ET.parse(folder / "junit.xml").getroot()
    run = load(folder)
    found = verdicts(run)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["step 0: 100 nodes", "step 1: 500 nodes", "step 2: 1000 nodes", "run"]
    assert len(cases(root)) == len(found) + 1
    assert int(root.get("tests")) == len(found) + 1
    assert root.findall(".//failure") == []
    skipped = root.findall(".//skipped")
    assert len(skipped) == sum(v.passed is None for v in found) == int(root.get("skipped"))
    first = suites[0].findall("testcase")
    assert {c.get("classname") for c in first} == {"100 nodes"}
    assert first[0].get("name") == "mutating POST pods"
    assert suites[-1].find("testcase").get("name") == "run completed"


def test_failed_slo_is_a_failure_with_value_and_threshold(tmp_path: Path) -> None:
    def slow_lists(data: dict) -> None:
        for step in data["steps"]:
            for entry in step["server"]:
                if entry["verb"] == "GET" and entry["resource"] == "pods":
                    entry["p99"] = 1.25

    folder = edited_run(SAMPLE, tmp_path / "run", slow_lists)
    write_report(folder)
    root = ET.parse(folder / "junit.xml").getroot()
    failures = root.findall(".//testcase[failure]")
    assert [c.get("name") for c in failures] == ["read GET pods (resource)"] * 3
    message = failures[0].find("failure").get("message")
    assert "1.250 s" in message and "threshold 1 s" in message
    assert root.get("failures") == "3"
    for suite in root.findall("testsuite")[:3]:
        assert suite.get("failures") == "1"


def test_aborted_run_fails_run_completed_with_its_error(tmp_path: Path) -> None:
    folder = copy_run(ABORTED, tmp_path / "run")
    write_report(folder)
    root = ET.parse(folder / "junit.xml").getroot()
    assert len(root.findall("testsuite")) == 2
    completed = root.find("./testsuite[@name='run']/testcase[@name='run completed']")
    failure = completed.find("failure")
    assert failure is not None
    assert failure.get("message") == load(folder).error
