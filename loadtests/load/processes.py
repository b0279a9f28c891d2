"""Locust processes as the runner starts them: their command line, environment and session. Nothing here
imports Locust; the processes import it themselves."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import IO

from loadtests import PACKAGE_DIR
from loadtests.controlplane.processes import popen_tied

LOCUSTFILE = PACKAGE_DIR / "load" / "locust" / "locustfile.py"


def locust_worker_command(python: str, master_host: str, master_port: int) -> list[str]:
    """The command line of a Locust worker process joining the master at master_host:master_port."""
    return [python, "-m", "locust", "-f", str(LOCUSTFILE), "--worker", "--master-host", master_host,
            "--master-port", str(master_port), "--loglevel", "INFO"]


def locust_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a Locust process: this package importable, output unbuffered, plus `extra`."""
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    root = str(PACKAGE_DIR.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def locust_spawn(cmd: list[str], log: IO[bytes], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """A Locust process in its own session (a Ctrl-C at the terminal reaches its parent, which stops it in
    order), killed with the process that started it (a harness killed outright takes its load with it)."""
    return popen_tied(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                      start_new_session=True)
