"""Faults injected into a tiny run, as they happen for real: a component that dies or hangs (SIGSTOP looks
like a hung disk) while a step measures or ramps, the harness itself killed outright, two SIGTERMs a second
apart (a CI runner's timeout), Ctrl-C, and a results folder on a filesystem that fills up.

Every test asserts on processes and ports (nothing of the run is left), not on messages alone.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from loadtests import results
from loadtests.controlplane.processes import ProcessRecord, wait_for
from tests.checks import assert_nothing_left, still_alive
from tests.cli import loadtest, private_cache, start_loadtest
from tests.watched import WatchedRun

FAULT_WITHIN_S = 60  # a hung component must end the run within this (its health timeout is 15 s here)


@pytest.fixture()
def faulty(bins, tmp_path: Path) -> Iterator[Callable[..., WatchedRun]]:
    started: list[WatchedRun] = []

    def start(**kwargs: object) -> WatchedRun:
        run = WatchedRun(tmp_path, **kwargs)  # type: ignore[arg-type]
        started.append(run)
        return run

    yield start
    for run in started:  # a failed assertion must not leave a control plane behind either
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(timeout=30)
        for item in run.seen:
            if isinstance(item, ProcessRecord) and (process := item.process()):
                process.kill()


def assert_partial_results(out: Path, error_words: str) -> None:
    run = results.load(out)
    assert run.status == "aborted" and error_words in (run.error or ""), run.error
    assert len(run.steps) == 1 and run.steps[0].nodes == 5
    assert (out / "report.html").exists() and (out / "junit.xml").exists()
    assert "aborted" in (out / "report.html").read_text().lower()


def test_etcd_killed_mid_step_ends_with_one_error_and_partial_report(faulty) -> None:
    run = faulty()
    run.wait_second_step_loaded()
    os.kill(run.component("etcd").pid, signal.SIGKILL)
    assert run.finish() == 3, run.stdout[-2000:] + run.stderr[-2000:]
    errors = run.errors()
    assert len(errors) == 1 and "etcd killed by SIGKILL" in errors[0] and "step 2/2" in errors[0], errors
    assert "full log: " in errors[0] and "\n" not in errors[0], errors
    assert_partial_results(run.out, "etcd killed by SIGKILL")
    assert_nothing_left(run.seen)


@pytest.mark.parametrize("how", ["loadtest down", "kill of every component"])
def test_a_control_plane_stopped_from_outside_is_said_so(faulty, how: str) -> None:
    """`loadtest down` from another terminal, or an operator's `kill` of every component at once: the run's line
    says the control plane was stopped from outside (by whom, where `loadtest down` said so), not that kwok,
    the first the health watch saw end, failed."""
    run = faulty()
    run.wait_second_step_loaded()
    records = run.records()
    if how == "loadtest down":
        down = loadtest("down", "--name", run.state_file.parent.name, env=run.env)
        assert down.returncode == 0 and "keeps the logs" in down.stdout, down.stdout + down.stderr
        said = "the control plane was stopped from outside (`loadtest down` by pid "
    else:
        for record in records:
            os.kill(record.pid, signal.SIGTERM)
        said = "s of each other: the control plane was stopped from outside"
    assert run.finish() == 3, run.stdout[-2000:] + run.stderr[-2000:]
    errors = run.errors()
    assert len(errors) == 1 and said in errors[0] and "step 2/2" in errors[0], errors
    assert "exited (code" not in errors[0] and "killed by" not in errors[0], errors
    assert_partial_results(run.out, "stopped from outside")
    assert (run.out / "control-plane-logs" / "kwok.log").exists()  # kept by the run, not removed by `down`
    assert not run.state_file.parent.exists()
    assert_nothing_left(run.seen)


@pytest.mark.parametrize("when", ["measuring", "node ramp"])
def test_a_hung_etcd_ends_the_run_naming_it(faulty, when: str) -> None:
    run = faulty(second_nodes=400) if when == "node ramp" else faulty()
    if when == "node ramp":
        run.wait_line("step 2/2 (400 nodes): scaling to 400 nodes")
    else:
        run.wait_second_step_loaded()
    os.kill(run.component("etcd").pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    code = run.finish()
    took = time.monotonic() - stopped_at
    assert code == 3, run.stdout[-2000:] + run.stderr[-2000:]
    errors = run.errors()
    assert len(errors) == 1, errors
    assert "etcd stopped answering /health" in errors[0] and when in errors[0], errors
    assert took < FAULT_WITHIN_S, (took, run.stdout[-3000:], run.stderr[-2000:])
    assert_partial_results(run.out, "etcd stopped answering")
    assert_nothing_left(run.seen)


@pytest.mark.parametrize(("signals", "said"), [
    ([signal.SIGINT], "interrupted by the user (Ctrl-C)"),
    ([signal.SIGTERM, signal.SIGTERM], "interrupted by SIGTERM"),
    ([signal.SIGHUP], "interrupted by SIGHUP (the terminal or session closed"),
], ids=["ctrl-c", "two SIGTERMs a second apart", "SIGHUP: the terminal closed"])
def test_signals_mid_step_stop_everything_and_keep_finished_steps(faulty, signals: list[int], said: str) -> None:
    run = faulty()
    run.wait_second_step_loaded()
    run.records()
    for n, signum in enumerate(signals):
        if n:
            time.sleep(1)  # a CI runner's second signal comes on its own schedule; not a wait for readiness
        run.proc.send_signal(signum)
    assert run.finish() == 3, run.stdout[-2000:] + run.stderr[-2000:]
    errors = [line for line in run.errors() if "stopping everything it started" not in line]  # a later signal's
    assert len(errors) == 1 and said in errors[0] and "step 2/2" in errors[0], errors
    assert_nothing_left(run.seen)
    assert not run.state_file.parent.exists()  # its folder (keys) removed only after everything stopped
    assert_partial_results(run.out, said)


def test_a_killed_harness_leaves_no_control_plane(faulty) -> None:
    run = faulty()
    run.wait_second_step_loaded()
    records = run.records()
    assert len(records) == 5
    run.proc.kill()
    run.finish()
    # every process it started gets SIGKILL from the kernel as its parent dies; on a busy machine their exits
    # (Go runtimes with many threads) take a moment, and the load's processes end beside the components
    wait_for(lambda: not still_alive(run.seen), 15, "the control plane and the load gone with their harness")
    assert_nothing_left(run.seen)
    status = json.loads(loadtest("status", "--json", env=run.env).stdout)
    assert status["orphans"] == []  # nothing of it runs
    assert run.state_file.exists()  # but its folder, with its keys, is left: named, and removed on request
    assert any(str(run.state_file.parent) in line for line in status["stale"]), status["stale"]
    down = loadtest("down", "--orphans", env=run.env)
    assert down.returncode == 0 and run.state_file.parent.name in down.stdout
    assert not run.state_file.parent.exists()


@pytest.fixture()
def tiny_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs, so the results folder can be filled on purpose (needs root).

    Large enough for a finished step's results, report and kept /metrics pages, so that the disk fills when the
    test fills it and not before."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> None:
    """Take every free byte of the filesystem (it may be full already: the run writes there too)."""
    try:
        with open(folder / "filler", "wb") as handle:
            while True:
                handle.write(b"\0" * (1 << 16))
                handle.flush()
    except OSError as error:
        assert error.errno == errno.ENOSPC, error


def test_a_full_disk_ends_the_run_in_one_line_and_keeps_finished_steps(faulty, tiny_filesystem: Path) -> None:
    run = faulty(out=tiny_filesystem / "run", durations_s=(3, 12))  # the disk fills as step 2's load starts
    run.wait_second_step_loaded()
    run.records()
    fill(tiny_filesystem)
    filled_at = time.monotonic()
    code = run.finish()
    took = time.monotonic() - filled_at
    assert code == 4, run.stdout[-2000:] + run.stderr[-2000:]
    errors = run.errors()
    assert len(errors) == 1 and errors[0].count("disk full") == 1 and "EnvironmentProblem" not in errors[0], errors
    assert "not kept (None)" not in run.stdout + run.stderr  # a logs warning gives the copy's real reason
    # found as it happens (Locust, which says in its log that its users run, cannot say it), not after the
    # 120 s the load is given to start
    assert took < FAULT_WITHIN_S, (took, errors)
    saved = results.load(run.out)  # the last good results.json, intact
    assert len(saved.steps) == 1 and saved.steps[0].nodes == 5
    assert "Traceback" not in run.stdout + run.stderr
    assert_nothing_left(run.seen)


def processes_using(folder: Path) -> list[str]:
    """Live processes whose command line names `folder` (the components of a cluster kept there)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(str(folder) in part for part in cmdline):
            found.append(" ".join(cmdline[:2]))
    return found


def one_step_plan(path: Path, target: str = "{}") -> Path:
    path.write_text(f"""
name: start-fault
target: {target}
steps:
  - {{nodes: 2, pods_per_node: 1, warmup_s: 1, duration_s: 5}}
load:
  scenarios:
    list_pollers: {{rate: 1, users: 1}}
""")
    return path


def test_a_component_that_fails_at_start_says_its_own_error_line(tmp_path: Path) -> None:
    env = private_cache(tmp_path / "cache")
    plan = one_step_plan(tmp_path / "plan.yaml", "{component_args: {kube-apiserver: [--no-such-flag]}}")
    done = loadtest("run", "--plan", str(plan), "--out", str(tmp_path / "run"), env=env, timeout=180)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("loadtest:")]
    assert len(errors) == 1, errors
    assert "kube-apiserver exited (code 1): Error: unknown flag: --no-such-flag; full log: " in errors[0], errors
    assert "goroutine" not in done.stderr and "Traceback" not in done.stderr
    log = Path(errors[0].rsplit("full log: ", 1)[1].split()[0].rstrip(";"))
    assert log.is_file() and "unknown flag" in log.read_text()  # kept with the results, where it points
    assert processes_using(tmp_path / "cache") == []
    assert list((tmp_path / "cache" / "clusters").iterdir()) == []  # keys removed


def test_etcd_on_a_full_disk_at_start_is_the_environment_naming_the_folder(tmp_path: Path,
                                                                         tiny_filesystem: Path) -> None:
    env = private_cache(tiny_filesystem / "cache")
    free = shutil.disk_usage(tiny_filesystem).free
    with open(tiny_filesystem / "filler", "wb") as filler:  # leave 2 MiB: the keys fit, etcd's WAL does not
        filler.truncate(0)
        for _ in range((free - (2 << 20)) >> 16):
            filler.write(b"\0" * (1 << 16))
    plan = one_step_plan(tmp_path / "plan.yaml")
    done = loadtest("run", "--plan", str(plan), "--out", str(tmp_path / "run"), env=env, timeout=180)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("loadtest:")]
    assert len(errors) == 1, errors
    assert f"disk full: {tiny_filesystem}" in errors[0] and "bytes free" in errors[0], errors
    assert "etcd exited (code 2): " in errors[0] and "no space left on device" in errors[0], errors
    assert "goroutine" not in done.stderr and "Traceback" not in done.stderr
    assert processes_using(tiny_filesystem) == []


@pytest.mark.parametrize("value", [".inf", ".nan"])
def test_a_non_finite_plan_number_is_refused_before_anything_starts(tmp_path: Path, value: str) -> None:
    env = private_cache(tmp_path / "cache")
    plan = one_step_plan(tmp_path / "plan.yaml")
    plan.write_text(plan.read_text().replace("duration_s: 5", f"duration_s: {value}"))
    done = loadtest("run", "--plan", str(plan), "--out", str(tmp_path / "run"), env=env, timeout=60)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip() == (f"loadtest: {plan}: steps[0].duration_s: must be a finite number from 1 to 1e+09 "
                                   f"(got {value[1:]})"), done.stderr
    assert not (tmp_path / "cache" / "clusters").exists() and not (tmp_path / "run").exists()  # nothing started


SAMPLE_RESULTS = Path(__file__).resolve().parent.parent / "unit" / "data" / "results_sample"


@pytest.mark.parametrize(("corrupt", "said"), [
    ("metrics/apiserver-end.prom.gz", "not a readable kept /metrics page (BadGzipFile"),
    ("metrics/etcd-start.prom.gz", "not a readable kept /metrics page (BadGzipFile"),
    ("cut metrics/apiserver-end.prom.gz", "not a readable kept /metrics page (EOFError"),
    ("results.json", "results.json: not a readable results file (JSONDecodeError"),
])
def test_a_corrupt_kept_file_is_refused_in_one_line_naming_it(tmp_path: Path, corrupt: str, said: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RESULTS, run)
    cut, _, name = corrupt.rpartition(" ")
    target = run / name if name == "results.json" else run / "step-1" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"\x1f\x8b\x08\x00cut" if cut else b"{not json" if name == "results.json" else b"garbage")
    done = loadtest("report", "--recompute", str(run))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"loadtest: {target}: ") and said in lines[0], lines


REPORT_NOT_FOLDER = "{page} is a report page, not a run folder: give the folder it was written into"
# compare reads the results a report page carries: a page that carries none says so
PAGE_WITHOUT_RESULTS = "{page}: the page carries no results (written by an older version, or not a loadtest " \
                       "report): give its run folder instead"


@pytest.mark.parametrize(("command", "said"), [(("report", "{page}"), REPORT_NOT_FOLDER),
                                               (("report", "--recompute", "{page}"), REPORT_NOT_FOLDER),
                                               (("compare", "{page}", "{run}"), PAGE_WITHOUT_RESULTS)])
def test_a_report_page_given_for_a_run_folder_says_what_to_give(tmp_path: Path, command: tuple[str, ...],
                                                                said: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RESULTS, run)
    page = run / "report.html"
    page.write_text("<!DOCTYPE html><html></html>")
    done = loadtest(*(part.format(page=page, run=run) for part in command))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert said.format(page=page) in lines[0], lines


def test_an_aborted_capacity_search_says_it_did_not_finish(faulty) -> None:
    run = faulty(command=("capacity", "--max-nodes", "40"))
    run.wait_second_step_loaded()
    os.kill(run.component("etcd").pid, signal.SIGKILL)
    assert run.finish() == 3, run.stdout[-2000:] + run.stderr[-2000:]
    last = run.lines[-1]
    assert last.startswith("the search did not finish (etcd killed by SIGKILL"), run.lines[-3:]
    assert "before it stopped, the largest scale where every SLO held was 5 nodes" in last, last
    assert "stopped at its limit" not in last
    assert_nothing_left(run.seen)


def test_an_interrupted_lesson_names_what_ran_aborted_and_never_ran(tmp_path: Path) -> None:
    out = tmp_path / "lesson"
    proc = start_loadtest("lesson", "etcd-disk", "--scale", "small", "--repeat", "1", "--out", str(out))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in proc.stdout or []),
                              daemon=True)
    reader.start()
    wait_for(lambda: (out / "disk" / "results.json").exists(), 180, "the first variant's first step",
             abort=lambda: None if proc.poll() is None else "the lesson exited early")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    assert proc.returncode == 3, lines[-10:]
    said = [line for line in lines if line.startswith("loadtest: lesson etcd-disk was aborted")]
    assert said == ["loadtest: lesson etcd-disk was aborted (disk aborted, memory never ran)"], lines[-6:]
