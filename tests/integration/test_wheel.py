"""The built wheel works on its own: installed into a fresh venv and run outside the source tree.

Catches what the editable install hides: package data left out of the wheel (kwok templates, plans, report
templates) and code that reads files relative to the checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest

from loadtests.binaries import cache as binaries
from loadtests.controlplane.local import clusters_root

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# Left out of the copy the wheel is built from: environments, caches, build output and run results.
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "reports", "__pycache__",
                                     ".pytest_cache", ".ruff_cache", "*.pyc")

TINY_PLAN = """
name: wheel
target:
  kind: local
steps:
  - {nodes: 5, pods_per_node: 1, warmup_s: 0, duration_s: 5}
load:
  scenarios:
    pod_churn: {rate: 1}
"""


def _timed(timings: dict[str, float], name: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    timings[name] = time.monotonic() - started
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _build_wheel(dist: Path, work: Path, env: dict[str, str], timings: dict[str, float]) -> Path:
    """Build from a copy of the work tree: setuptools writes build/ and *.egg-info next to the sources and
    packs whatever is left in build/lib, so an in-place build could ship modules that were moved away."""
    source = work / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=_NOT_SOURCE)
    _timed(timings, "wheel", [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist),
                              str(source)], cwd=work, env=env)
    (wheel,) = dist.glob("k8s_loadtest-*.whl")
    return wheel


def _install(wheel: Path, venv: Path, work: Path, env: dict[str, str], timings: dict[str, float]) -> None:
    """A fresh venv with the wheel and its dependencies from the index (--no-compile: about twice as fast)."""
    _timed(timings, "venv", [sys.executable, "-m", "venv", str(venv)], cwd=work, env=env)
    _timed(timings, "install", [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile",
                                str(wheel)], cwd=work, env=env)


def _loadtest(venv: Path, env: dict[str, str], cwd: Path, *args: str, timeout: float,
              check: bool = True) -> subprocess.CompletedProcess:
    """Run the venv's `loadtest`; on a timeout it is interrupted first, so it stops the processes it started."""
    proc = subprocess.Popen([str(venv / "bin" / "loadtest"), *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        pytest.fail(f"loadtest {' '.join(args)} took over {timeout:.0f} s:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check:
        assert result.returncode == 0, f"loadtest {' '.join(args)}:\n{stdout[-3000:]}\n{stderr[-3000:]}"
    return result


def _status(venv: Path, env: dict[str, str], cwd: Path, name: str) -> dict:
    """`loadtest status --json`, or {} when it cannot say (safe to call while cleaning up after a failure)."""
    try:
        result = subprocess.run([str(venv / "bin" / "loadtest"), "status", "--name", name, "--json"], cwd=cwd,
                                env=env, capture_output=True, text=True, timeout=60, check=False)
        return json.loads(result.stdout)
    except (subprocess.TimeoutExpired, ValueError):
        return {}


def _processes(status: dict) -> list[psutil.Process]:
    procs = []
    for component in status.get("components", []):
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(component["pid"]))
    return procs


def _still_running(procs: list[psutil.Process]) -> list[str]:
    """Those of procs that still run (is_running() also checks the pid was not reused)."""
    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{proc.pid} {' '.join(proc.cmdline()[:1])}")
    return alive


def test_wheel_installs_and_runs_outside_the_source_tree(bins: binaries.Binaries, tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(REPO)
    timings: dict[str, float] = {}
    # nothing from the caller's environment may lead Python back to the checkout (a PYTHONPATH to it makes pip
    # think the package is already installed, through the checkout's *.egg-info)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "LOADTEST_CLUSTER")}
    wheel = _build_wheel(tmp_path / "dist", tmp_path, clean, timings)
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    data = {f"loadtests/{p.relative_to(REPO / 'loadtests').as_posix()}"
            for pattern in ("kwok_configs/**/*.yaml", "plans/*.yaml", "report/templates/*.html")
            for p in (REPO / "loadtests").glob(pattern)}
    assert {"loadtests/kwok_configs/node-template.yaml", "loadtests/kwok_configs/stages/pod-ready.yaml"} <= data
    assert data <= shipped, sorted(data - shipped)

    venv = tmp_path / "venv"
    _install(wheel, venv, tmp_path, clean, timings)
    work = tmp_path / "work"
    work.mkdir()
    env = {**clean, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{clean.get('PATH', '')}",
           "LOADTEST_CACHE": str(binaries.cache_root())}

    # the venv imports the installed package, and finds its data there too
    where = json.loads(_timed(timings, "import", [str(venv / "bin" / "python"), "-c", (
        "import json, loadtests, loadtests.kube.objects as o; "
        "print(json.dumps([loadtests.__file__, str(o.kwok_configs_dir()), o.node_manifest('n')['kind']]))")],
        cwd=work, env=env).stdout)
    site_packages = next((venv / "lib").glob("python3*/site-packages")).resolve()
    package_file, configs, kind = Path(where[0]).resolve(), Path(where[1]).resolve(), where[2]
    assert package_file.is_relative_to(site_packages) and not package_file.is_relative_to(REPO), package_file
    assert configs.is_relative_to(site_packages) and sorted(p.name for p in (configs / "stages").glob("*.yaml"))
    assert kind == "Node"
    assert (venv / "bin" / "loadtest").read_text().splitlines()[0] == f"#!{venv / 'bin' / 'python'}"

    # up and down: every process of the cluster is gone afterwards, whatever happened in between
    name = f"wheel-{os.getpid()}"
    procs: list[psutil.Process] = []
    started = time.monotonic()
    try:
        _loadtest(venv, env, work, "up", "--name", name, "--nodes", "5", "--kube-version", bins.kube_version,
                  timeout=300)
        status = _status(venv, env, work, name)
        procs = _processes(status)
        assert status["running"] and status["ready"] and len(procs) >= 5, status
        assert status["versions"]["kubernetes"] == bins.kube_version
    finally:
        if not procs:  # up failed before status said what runs: whatever it recorded, if anything
            procs = _processes(_status(venv, env, work, name))
        down = _loadtest(venv, env, work, "down", "--name", name, timeout=120, check=False)
        if down.returncode == 0:  # the cluster folder holds keys; `down` leaves it
            shutil.rmtree(clusters_root() / name, ignore_errors=True)
    timings["up+down"] = time.monotonic() - started
    assert down.returncode == 0, down.stderr
    assert _still_running(procs) == []
    assert _status(venv, env, work, name).get("running") is False

    # one step of load, then the report rebuilt from the results folder alone
    plan = tmp_path / "tiny.yaml"
    plan.write_text(TINY_PLAN)
    out = tmp_path / "run"
    started = time.monotonic()
    _loadtest(venv, env, work, "run", "--plan", str(plan), "--out", str(out), "--kube-version", bins.kube_version,
              "--no-gate", timeout=600)
    timings["run"] = time.monotonic() - started
    assert (out / "results.json").is_file() and (out / "report.html").is_file()
    assert json.loads((out / "results.json").read_text())["status"] == "complete"
    (out / "report.html").unlink()
    _timed(timings, "report", [str(venv / "bin" / "loadtest"), "report", str(out)], cwd=work, env=env)
    assert (out / "report.html").stat().st_size > 10_000

    print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    shutil.rmtree(venv, ignore_errors=True)  # 300+ MB; kept only when the test fails, to look into
