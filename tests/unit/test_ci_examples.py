"""The CI examples in docs/ci/ parse as YAML and name what the harness writes (they cannot be run here)."""

from __future__ import annotations

from typing import Any

import yaml

from loadtests.analysis.history import MIN_RUNS, WINDOW_LEN
from loadtests.cli.run import GATE_JUNIT_FILE
from loadtests.report.history import HISTORY_FILE, HISTORY_JUNIT_FILE
from tests.cli import REPO

CI = REPO / "docs" / "ci"


def _load(name: str) -> tuple[str, dict[str, Any]]:
    text = (CI / name).read_text()
    data = yaml.safe_load(text)
    assert isinstance(data, dict), name
    return text, data


def test_github_actions_example_parses() -> None:
    text, workflow = _load("github-actions.yml")
    assert True in workflow or "on" in workflow  # YAML 1.1 reads the `on:` key as true
    steps = workflow["jobs"]["load-test"]["steps"]
    uses = [step.get("uses", "") for step in steps]
    for action in ("actions/setup-python", "actions/setup-go", "actions/download-artifact", "actions/upload-artifact"):
        assert any(u.startswith(action) for u in uses), action
    cache = next(step for step in steps if step.get("uses", "").startswith("actions/cache"))
    assert cache["with"]["path"] == "~/.cache/k8s-loadtest/bin"
    assert "loadtests/config/versions.py" in cache["with"]["key"]
    assert any("make load-test" in step.get("run", "") and "BASELINE=" in step.get("run", "") for step in steps)
    assert GATE_JUNIT_FILE in text


def test_gitlab_ci_example_parses() -> None:
    text, pipeline = _load("gitlab-ci.yml")
    job = pipeline["load-test"]
    assert job["image"].startswith("python:3.11")
    assert any("loadtests/config/versions.py" in cache["key"]["files"]
               for cache in job["cache"] if "files" in cache["key"])
    assert pipeline["variables"]["LOADTEST_CACHE"].endswith(".cache/k8s-loadtest")
    assert any("make load-test" in line and "BASELINE=" in line for line in job["script"])
    assert job["artifacts"]["reports"]["junit"].endswith(GATE_JUNIT_FILE)
    assert "jobs/artifacts/" in text and "go.dev/dl/" in text


def test_github_actions_history_example_parses() -> None:
    text, workflow = _load("github-actions-history.yml")
    assert True in workflow or "on" in workflow
    keep = int(workflow["env"]["KEEP"])
    assert MIN_RUNS <= keep <= WINDOW_LEN  # enough runs for a verdict, all of them in one Otava window
    steps = workflow["jobs"]["history"]["steps"]
    uses = [step.get("uses", "") for step in steps]
    for action in ("actions/setup-python", "actions/setup-go", "actions/upload-artifact"):
        assert any(u.startswith(action) for u in uses), action
    restore = next(step for step in steps if step.get("uses", "").startswith("actions/cache/restore"))
    save = next(step for step in steps if step.get("uses", "").startswith("actions/cache/save"))
    assert restore["with"]["path"] == save["with"]["path"] == workflow["env"]["HISTORY"]
    assert restore["with"]["key"] == save["with"]["key"] and "github.run_id" in save["with"]["key"]
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])  # the next run restores this one
    assert save.get("if") == "always()"  # a run whose SLOs failed is still kept
    runs = [step.get("run", "") for step in steps]
    assert any("make load-test" in run and "BASELINE=" not in run for run in runs)
    gate = next(run for run in runs if "loadtest history" in run)
    assert "--gate" in gate and '"$HISTORY"/*/' in gate and f"-lt {MIN_RUNS}" in gate
    assert any('head -n -"$KEEP"' in run for run in runs)
    assert HISTORY_JUNIT_FILE in text and HISTORY_FILE in text
