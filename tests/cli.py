"""Run the `loadtest` command as a user would, in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from loadtests.binaries.cache import cache_root

REPO = Path(__file__).resolve().parent.parent


def as_from_a_terminal() -> None:
    """In the child, before exec: the signals a shell in a terminal leaves at their defaults, whatever this
    process inherited (`nohup` ignores SIGHUP, a background job SIGQUIT), so a test's signal is the user's."""
    for name in ("SIGHUP", "SIGQUIT", "SIGINT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def private_cache(root: Path) -> dict[str, str]:
    """A cache folder of its own (its clusters and logs there, its binaries the shared ones, linked), so what a
    run leaves in it, or fails to write to it, is this test's alone."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "bin").exists():
        (root / "bin").symlink_to(cache_root() / "bin", target_is_directory=True)
    return {"LOADTEST_CACHE": str(root), "LOADTEST_CLUSTERS": str(root / "clusters")}


def start_loadtest(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.Popen[str]:
    """`loadtest ARGS` started in the background, its output captured."""
    return subprocess.Popen([sys.executable, "-m", "loadtests.cli.main", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})}, preexec_fn=as_from_a_terminal)


def loadtest(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
             cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`loadtest ARGS` to its end; its exit code and output."""
    proc = start_loadtest(*args, env=env, cwd=cwd)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def write_tiny_plan(path: Path, name: str, durations_s: tuple[float, float], *, second_nodes: int = 10,
                    unresponsive_s: float = 30, target: str = "") -> Path:
    """A two-step plan (5 then 10 nodes, light churn and LISTs) for tests that run the whole harness; `target`
    adds fields to its target (e.g. "topology: {apiservers: 2}")."""
    first, second = durations_s
    path.write_text(f"""
name: {name}
target: {{unresponsive_s: {unresponsive_s}{", " + target if target else ""}}}
steps:
  - {{nodes: 5, pods_per_node: 1, warmup_s: 1, duration_s: {first}}}
  - {{nodes: {second_nodes}, pods_per_node: 1, warmup_s: 1, duration_s: {second}}}
load:
  scenarios:
    pod_churn: {{rate: 2, lifetime_s: 3, users: 1}}
    list_pollers: {{rate: 1, users: 1}}
""")
    return path
