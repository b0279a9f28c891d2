"""Workers of other machines: `loadtest worker` processes joining a run's steps from other addresses; and the
live view of a step (Locust's web UI, read-only).

"Other machines" are other loopback addresses (127.0.0.2, 127.0.0.3, ...) of this one; the run's cluster is a
local control plane treated as an existing cluster, and the session's shared control plane plays a second,
different cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from loadtests import results
from loadtests.analysis.scrapes import step_folder
from loadtests.binaries import cache as binaries
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane
from loadtests.controlplane.processes import free_ports, listening_ports, wait_for
from loadtests.kube.rest import RestClient
from loadtests.load.generator import LoadGenerator, StepLoad
from loadtests.run.fleet import Fleet
from tests.checks import assert_nothing_left, running_plane
from tests.cli import error_lines, loadtest, start_loadtest

CONTEXT = "loadtest"  # the context name of the kubeconfig a local control plane writes
RATE = 6.0  # pod creates per second, by two churn users: one on each worker


@pytest.fixture(scope="module")
def run_plane(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """The run's cluster: no kwok of its own (the run brings one, as on any existing cluster)."""
    with running_plane(bins, tmp_path_factory.mktemp("remote"), f"remote-{os.getpid()}", kwok=False) as plane:
        yield plane


def cluster_args(plane: LocalControlPlane) -> list[str]:
    return ["--kubeconfig", plane.access().kubeconfig, "--context", CONTEXT, "--allow-context", CONTEXT]


TWO_STEPS = [{"nodes": 5, "pods_per_node": 1, "warmup_s": 1, "duration_s": 10},
             {"nodes": 6, "pods_per_node": 1, "warmup_s": 1, "duration_s": 14}]


def plan_file(folder: Path, plane: LocalControlPlane, steps: list[dict] = TWO_STEPS) -> Path:
    path = folder / "plan.yaml"
    path.write_text(yaml.safe_dump({
        "name": "remote-workers",
        "target": {"kind": "cluster", "kubeconfig": plane.access().kubeconfig},
        "steps": steps,
        "load": {"scenarios": {"pod_churn": {"rate": RATE, "users": 2, "lifetime_s": 3}}},
    }))
    return path


def start_worker(master: str, bind: str, plane: LocalControlPlane, logs: Path) -> subprocess.Popen[str]:
    return start_loadtest("worker", "--master", master, "--bind", bind, *cluster_args(plane),
                          "--connect-timeout", "120", "--idle-timeout", "120", "--log-dir", str(logs / bind))


def family(proc: subprocess.Popen[str]) -> list[psutil.Process]:
    """The process and its children (its Locust worker), to prove later that none is left."""
    try:
        parent = psutil.Process(proc.pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def test_two_workers_of_other_machines_share_the_run_and_one_lost_is_noted(
        run_plane: LocalControlPlane, local_plane: LocalControlPlane, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    master = f"127.0.0.1:{port}"
    out = tmp_path / "out"
    # first a worker whose kubeconfig reaches another cluster: the master refuses it, and the run's own
    # workers, coming after it, still get in (Locust ends a headless test when its last worker quits)
    stranger = start_worker(master, "127.0.0.4", local_plane, tmp_path)
    plan = plan_file(tmp_path, run_plane)
    run = start_loadtest("run", "--plan", str(plan), *cluster_args(run_plane), "--master-bind", master,
                         "--expect-workers", "2", "--worker-wait", "120", "--no-gate", "--out", str(out))
    procs = [stranger, run]
    seen: list[psutil.Process] = []

    def run_ended() -> str | None:
        return None if run.poll() is None else f"run ended: {run.communicate()[1][-2000:]}"

    try:
        stranger_out, stranger_err = stranger.communicate(timeout=240)
        assert run.poll() is None, run.communicate()
        assert stranger.returncode == 2, stranger_out + stranger_err
        [line] = [line for line in stranger_err.splitlines() if line.strip()]
        assert f"the master at {master} refused this worker: its kubeconfig reaches another cluster" in line
        staying = start_worker(master, "127.0.0.2", run_plane, tmp_path)
        leaving = start_worker(master, "127.0.0.3", run_plane, tmp_path)
        procs += [staying, leaving]

        # step 2: once its window is open, one worker goes away for good (killed outright, Locust and all)
        window = step_folder(out, 1) / "window-open"
        wait_for(window.exists, 240, "step 2's window open", abort=run_ended)
        seen = family(staying) + family(leaving) + family(run)
        assert len(family(leaving)) == 2, "the worker runs one Locust worker process"
        leaving_label = f"127.0.0.3 (pid {leaving.pid})"
        time.sleep(1.0)  # one second into the window: part of its load is counted
        for proc in family(leaving):
            proc.send_signal(signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]
        staying_out, staying_err = staying.communicate(timeout=60)  # ends with the run's last step
        assert staying.returncode == 0, staying_out + staying_err
        assert "the run's last step; done" in staying_out
        leaving.wait(timeout=10)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert_nothing_left(seen)

    result = results.load(out)
    assert result.status == "complete" and len(result.steps) == 2, result.error
    first, second = result.steps

    # step 1: both workers of other machines sent load, and the apiserver counted every create of theirs
    assert sorted(w.worker for w in first.workers) == [f"127.0.0.2 (pid {staying.pid})", leaving_label]
    assert all(w.remote and w.requests > 0 and w.lost_after_s is None for w in first.workers), first.workers
    assert all(w.cpu_percent is not None and w.cpu_percent > 0 for w in first.workers), first.workers
    assert sum(w.requests for w in first.workers) == sum(c.count for c in first.client)
    client_creates = sum(c.count for c in first.client if c.name == "POST pods")
    assert client_creates > 0.7 * RATE * 10, first.client  # one worker alone sends half of it
    server_creates = first.server_requests["POST pods"]
    assert abs(client_creates - server_creates) <= 0.05 * client_creates, (client_creates, server_creates)
    assert any("refused worker 127.0.0.4" in note for note in first.notes), first.notes
    assert not any("lost" in note for note in first.notes), first.notes

    # step 2: finished without the lost worker, and says so
    lost = [w for w in second.workers if w.lost_after_s is not None]
    assert [w.worker for w in lost] == [leaving_label], second.workers
    assert any(leaving_label in note and "was lost" in note for note in second.notes), second.notes
    assert any("partial figures" in note for note in second.notes), second.notes
    assert second.client and second.status == "measured"


def test_a_worker_with_no_master_to_join_says_so_in_one_line(run_plane: LocalControlPlane) -> None:
    nowhere = f"127.0.0.1:{free_ports(1)[0]}"
    started = time.monotonic()
    result = loadtest("worker", "--master", nowhere, *cluster_args(run_plane), "--connect-timeout", "2", timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = error_lines(result)
    assert line.startswith(f"loadtest: --master {nowhere}: nothing answers there within 2 s"), line
    assert time.monotonic() - started < 30


def test_the_live_view_shows_the_step_and_refuses_to_change_it(control_plane: TargetInfo, rest: RestClient,
                                                               tmp_path: Path) -> None:
    fleet = Fleet(rest)
    fleet.ensure_namespaces()
    fleet.scale_nodes(3, timeout_s=120)
    gen = LoadGenerator(StepLoad({"list_pollers": {"rate": 2, "users": 1}}, nodes=3, duration_s=4, out_dir=tmp_path,
                                 windowed=True, ui_port=free_ports(1)[0]), control_plane.access)
    url = gen.ui_url()
    assert url is not None and url.startswith("http://127.0.0.1:")
    try:
        gen.start()
        assert gen.wait_spawned(90), (tmp_path / "locust.log").read_text()[-2000:]
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
        with urllib.request.urlopen(f"{url}/stats/requests", timeout=10) as stats:
            assert json.load(stats)["user_count"] == 1
        for change, form in (("swarm", {"user_count": "100", "spawn_rate": "10"}), ("stop", {}),
                             ("stats/reset", {})):
            request = urllib.request.Request(f"{url}/{change}", data=urllib.parse.urlencode(form).encode(),
                                             method="POST")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 403, change
        [master] = gen.pids()
        addresses = {c.laddr.ip for c in psutil.Process(master).net_connections("tcp")
                     if c.status == psutil.CONN_LISTEN}
        assert addresses == {"127.0.0.1"}
        gen.open_window()
        window_ends = time.monotonic() + 4
        while time.monotonic() < window_ends:  # the measured window, as the runner holds it open
            assert gen.running()
            time.sleep(0.5)
        gen.close_window()
        outcome = gen.wait(timeout=60)
    finally:
        gen.stop()
    assert outcome.users == {"ListPoller": 1}
    assert sum(c.count for c in outcome.client if c.type == "LIST") > 0, outcome.client
    assert not gen.running()
    assert listening_ports([master]) == []


def test_a_step_waits_for_its_workers_only_so_long(run_plane: LocalControlPlane, tmp_path: Path) -> None:
    master = f"127.0.0.1:{free_ports(1)[0]}"
    out = tmp_path / "out"
    started = time.time()
    result = loadtest("run", "--plan", str(plan_file(tmp_path, run_plane)), *cluster_args(run_plane),
                      "--master-bind", master, "--expect-workers", "1", "--worker-wait", "3", "--no-gate",
                      "--out", str(out), timeout=300)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("loadtest: run aborted")]
    assert f"waited 3 s for 1 worker(s) to connect at {master}; start them with `loadtest worker --master " \
           f"{master}" in line, line
    assert "\n" not in line and "Traceback" not in result.stdout + result.stderr
    assert results.load(out).status == "aborted"
    leftovers = [p for p in psutil.process_iter(["cmdline", "create_time"])
                 if p.info["create_time"] >= started and str(out) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


def test_a_worker_serves_every_repeat_and_ends_after_the_last(run_plane: LocalControlPlane, tmp_path: Path) -> None:
    master = f"127.0.0.1:{free_ports(1)[0]}"
    out = tmp_path / "out"
    plan = plan_file(tmp_path, run_plane, [{"nodes": 5, "pods_per_node": 1, "warmup_s": 1, "duration_s": 5}])
    worker = start_worker(master, "127.0.0.5", run_plane, tmp_path)
    try:
        result = loadtest("run", "--plan", str(plan), *cluster_args(run_plane), "--master-bind", master,
                          "--expect-workers", "1", "--worker-wait", "120", "--no-gate", "--repeat", "2",
                          "--out", str(out), timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        worker_out, worker_err = worker.communicate(timeout=120)  # ends by itself after the last repeat
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, worker_out + worker_err
    assert "step 1 of run repeat-1 served; waiting for the next step's master" in worker_out, worker_out
    assert "step 2 of run repeat-2 served: the run's last step; done" in worker_out, worker_out
    for k in (1, 2):
        [step] = results.load(out / f"repeat-{k}").steps
        [served] = step.workers
        assert served.remote and served.requests > 0 and served.lost_after_s is None, step.workers
