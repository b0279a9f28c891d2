"""The CI examples in docs/ci/ parse as YAML and name what the harness writes (they cannot be run here)."""

from __future__ import annotations

from typing import Any

import yaml

from loadtests.cli.run import GATE_JUNIT_FILE
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
