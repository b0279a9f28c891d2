"""Run the `loadtest` command as a user would, in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def loadtest(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loadtests.cli", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})},
    )


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def write_tiny_plan(path: Path, name: str, durations_s: tuple[float, float]) -> Path:
    """A two-step plan (5 then 10 nodes, light churn and LISTs) for tests that run the whole harness."""
    first, second = durations_s
    path.write_text(f"""
name: {name}
steps:
  - {{nodes: 5, pods_per_node: 1, warmup_s: 1, duration_s: {first}}}
  - {{nodes: 10, pods_per_node: 1, warmup_s: 1, duration_s: {second}}}
load:
  scenarios:
    pod_churn: {{rate: 2, lifetime_s: 3, users: 1}}
    list_pollers: {{rate: 1, users: 1}}
""")
    return path
