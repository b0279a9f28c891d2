"""The health watch's judgement (what is a fault, when, and whom it names) and the signal rules of teardown,
without a control plane: checks and clocks are given, signal handlers are called directly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from loadtests.controlplane.health import HealthCheck, HealthWatch, process_problem, stopped_together
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.controlplane.processes import (
    ClusterState,
    DownRequest,
    ProcessGroup,
    ProcessRecord,
    started_since_boot,
)
from loadtests.polling import poll_until
from loadtests.shutdown import FORCE_AFTER, Shutdown


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watch(problems: dict[str, str | None], clock: Clock, unresponsive_s: float = 30.0) -> HealthWatch:
    checks = [HealthCheck(name, lambda name=name: problems[name]) for name in problems]
    return HealthWatch(checks, on_fault=lambda _r: None, unresponsive_s=unresponsive_s, clock=clock)


def test_a_component_not_answering_is_a_fault_only_after_the_grace_time() -> None:
    clock, problems = Clock(), {"etcd": None, "kube-apiserver": None}
    health = watch(problems, clock)
    assert health.check_once() is None
    problems["etcd"] = "stopped answering /health"
    clock.now = 1.0
    assert health.check_once() is None
    clock.now = 20.0
    problems["etcd"] = None  # answered again: the clock starts over
    assert health.check_once() is None
    problems["etcd"] = "stopped answering /health"
    clock.now = 21.0
    assert health.check_once() is None
    clock.now = 51.0
    assert health.check_once() == "etcd stopped answering /health for 30 s"


def test_components_are_asked_to_answer_every_few_rounds_and_their_processes_looked_at_every_round() -> None:
    """Asks every 5 s, the processes each round: an exit is a fault at the round it is seen, a component that
    stopped answering is a fault at the first ask past its grace time, and one failing stays failing between
    asks (an answer between them is never heard)."""
    clock = Clock()
    asked: list[str] = []
    answering = {"etcd": True, "kwok": True}
    exited = {"etcd": False, "kwok": False}

    def check(name: str) -> HealthCheck:
        def alive() -> str | None:
            return "exited (code 1)" if exited[name] else None

        def probe() -> str | None:
            asked.append(f"{clock.now:.0f} {name}")
            return alive() or (None if answering[name] else "stopped answering /healthz")

        return HealthCheck(name, probe, alive=alive)

    health = HealthWatch([check("etcd"), check("kwok")], on_fault=lambda _r: None, unresponsive_s=12,
                         answer_interval_s=5.0, clock=clock)
    assert health.answer_interval_s == 4.0  # at least three asks within the grace time
    for now in range(0, 9):
        clock.now = float(now)
        answering["etcd"] = now not in (4, 5, 6, 7)  # stops answering at 4; would answer again at 8
        assert health.check_once() is None
    assert asked == ["0 etcd", "0 kwok", "4 etcd", "4 kwok", "8 etcd", "8 kwok"]
    answering["etcd"] = False
    for now in (12, 16, 20, 23):  # asked at 12, 16 and 20: failing since 12; not asked at 23
        clock.now = float(now)
        assert health.check_once() is None
    clock.now = 24.0
    assert health.check_once() == "etcd stopped answering /healthz for 12 s"
    exited["kwok"] = True
    clock.now = 25.0  # a round that does not ask: kwok's process says it, etcd's last ask stands
    assert health.check_once() == "kwok exited (code 1) (also: etcd stopped answering /healthz for 13 s)"
    assert asked[-2:] == ["24 etcd", "24 kwok"]


def test_a_highly_available_group_survives_a_minority_and_says_so_once() -> None:
    clock, events = Clock(), []
    problems: dict[str, str | None] = {"etcd": None, "etcd-2": None, "etcd-3": None, "kube-apiserver": None,
                                       "kube-apiserver-2": None, "haproxy": None}
    group = {"etcd": "etcd", "etcd-2": "etcd", "etcd-3": "etcd", "kube-apiserver": "kube-apiserver",
             "kube-apiserver-2": "kube-apiserver", "haproxy": "haproxy"}
    tolerated = {"etcd": 1, "kube-apiserver": 1, "haproxy": 0}
    checks = [HealthCheck(name, lambda name=name: problems[name], group=group[name], tolerated=tolerated[group[name]])
              for name in problems]
    health = HealthWatch(checks, on_fault=lambda _r: None, on_event=events.append, unresponsive_s=15, clock=clock)
    problems["etcd-3"] = "exited (code 137)"
    problems["kube-apiserver-2"] = "stopped answering /livez"
    assert health.check_once() is None  # one member of three gone: the cluster has its quorum
    assert events == ["etcd-3 exited (code 137); 2 of 3 etcd left"]
    clock.now = 16.0
    assert health.check_once() is None and health.check_once() is None  # said once, however often checked
    assert events[1:] == ["kube-apiserver-2 stopped answering /livez for 16 s; 1 of 2 kube-apiserver left"]
    problems["kube-apiserver-2"] = None
    assert health.check_once() is None and events[-1] == "kube-apiserver-2 answers again"
    problems["etcd-2"] = "exited (code 137)"  # the second of three: quorum lost, the run's end
    assert health.check_once() == ("etcd-2 exited (code 137) (also: etcd-3 exited (code 137)) "
                                   "(2 of 3 etcd lost: more than the 1 the cluster survives)")
    problems["etcd-2"], problems["haproxy"] = None, "exited (code 1)"  # a component with no spare: at once
    assert health.check_once() == "haproxy exited (code 1) (also: etcd-3 exited (code 137))"


def test_an_exited_process_is_a_fault_at_once_and_the_first_in_check_order_is_named() -> None:
    clock, problems = Clock(), {"etcd": None, "kube-apiserver": "stopped answering /readyz"}
    health = watch(problems, clock)
    assert health.check_once() is None
    clock.now = 31.0
    problems["etcd"] = "exited (pid 42)"
    assert health.check_once() == ("etcd exited (pid 42) (also: kube-apiserver stopped answering /readyz "
                                   "for 31 s)")


def test_a_hung_dependency_is_named_before_the_slow_apiserver_that_failed_first() -> None:
    clock, problems = Clock(), {"etcd": None, "kube-apiserver": "stopped answering /livez"}
    health = watch(problems, clock, unresponsive_s=15)
    assert health.check_once() is None  # an apiserver slow under a node ramp: not a fault yet
    clock.now = 4.0
    problems["etcd"] = "stopped answering /health (its process is stopped: SIGSTOP)"
    assert health.check_once() is None
    clock.now = 15.0
    assert health.check_once() == ("etcd stopped answering /health (its process is stopped: SIGSTOP) for 11 s "
                                   "(also: kube-apiserver stopped answering /livez for 15 s)")


def test_a_check_that_raises_counts_as_failing() -> None:
    def broken() -> str | None:
        raise OSError("no route")

    clock = Clock()
    health = HealthWatch([HealthCheck("kwok", broken)], on_fault=lambda _r: None, unresponsive_s=5, clock=clock)
    assert health.check_once() is None
    clock.now = 5.0
    assert health.check_once() == "kwok could not be checked (OSError: no route) for 5 s"


def test_stopped_and_exited_processes_are_told_apart(tmp_path) -> None:
    from loadtests.controlplane.processes import ClusterState

    state = ClusterState(name="t", directory=str(tmp_path))
    group = ProcessGroup(state, tmp_path / "logs")
    record = group.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_problem(record) == (None, False)
        subprocess.run(["kill", "-STOP", str(record.pid)], check=True)
        for _ in range(100):
            if process_problem(record)[0]:
                break
            __import__("time").sleep(0.02)
        assert process_problem(record) == ("is stopped: SIGSTOP", False)
    finally:
        killed = group.stop_all(timeout_s=5)
    assert killed == []  # a stopped process is continued, so SIGTERM ends it without SIGKILL
    assert process_problem(record) == ("exited", True)



def test_a_step_of_the_wall_clock_leaves_every_process_itself(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A virtual machine resumed from a snapshot, or NTP, steps the wall clock, and psutil's create_time (the boot
    time on the wall clock plus the start since boot) moves with it. Processes are known by their start since
    boot, so a run's components do not all look gone at once (as they did in a recorded lesson run, which then
    ended with them still running); a record kept before that field existed is still read by wall clock."""
    import dataclasses

    from loadtests.controlplane.processes import ClusterState

    state = ClusterState(name="t", directory=str(tmp_path), owner_pid=os.getpid(),
                         owner_create_time=psutil.Process().create_time(),
                         owner_since_boot_s=started_since_boot(psutil.Process()))
    group = ProcessGroup(state, tmp_path / "logs")
    record = group.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        booted = psutil.boot_time()
        monkeypatch.setattr("psutil._pslinux.boot_time", lambda: booted + 7.0)  # the clock stepped 7 s ahead
        assert psutil.Process(record.pid).create_time() > record.create_time + 6  # as the wall clock says
        assert record.alive() and process_problem(record) == (None, False) and state.owner_alive()
        written_before = dataclasses.replace(record, since_boot_s=None)
        assert not written_before.alive()  # what every record did: a running process taken for a gone one
        monkeypatch.undo()
    finally:
        group.stop_all(timeout_s=5)
    assert not record.alive()


@pytest.mark.parametrize(("gone_at", "said"), [
    ({"etcd": 0.0, "kube-apiserver": 0.4, "kube-scheduler": 0.1, "kwok": 0.0},
     "every component ended within 0.4 s of each other: the control plane was stopped from outside"),
    ({"etcd": 0.0, "kube-apiserver": None, "kube-scheduler": 0.0, "kwok": 0.0},
     "3 of 4 components (kube-apiserver still running) ended within 0.1 s of each other: the control plane was "
     "stopped from outside"),
    ({"etcd": 0.0, "kube-apiserver": None, "kube-scheduler": None, "kwok": None}, None),  # one alone: its own failure
    ({"etcd": 0.0, "kube-apiserver": None, "kube-scheduler": None, "kwok": 0.2}, None),
    ({"etcd": 0.0, "kube-apiserver": 5.0, "kube-scheduler": 5.0, "kwok": 5.0}, None),  # a cascade, seconds later
], ids=["every one", "all but one", "one alone", "two of four", "not within moments"])
def test_components_that_end_within_moments_of_each_other_were_stopped_from_outside(
        gone_at: dict[str, float | None], said: str | None) -> None:
    assert stopped_together(gone_at, within_s=2.0) == said


def sleepers(tmp_path, names: list[str]) -> tuple[LocalControlPlane, list[ProcessRecord]]:
    """A cluster of `sleep` processes owned by this process, as a run's cluster is owned by the run."""
    state = ClusterState(name="t", directory=str(tmp_path), owner_pid=os.getpid(),
                         owner_create_time=psutil.Process().create_time(),
                         owner_since_boot_s=started_since_boot(psutil.Process()), tied_to_owner=True)
    plane = LocalControlPlane(LocalOptions(name="t", directory=tmp_path))
    plane.state, plane.group = state, ProcessGroup(state, tmp_path / "logs")
    return plane, [plane.group.start(name, ["sleep", "60"]) for name in names]


def test_a_component_ending_alone_is_left_to_the_health_watch_to_name(tmp_path) -> None:
    plane, records = sleepers(tmp_path, ["etcd", "kube-apiserver", "kwok"])
    try:
        assert plane.stopped_from_outside(settle_s=0.3) is None  # everything runs: no wait either
        os.kill(records[0].pid, signal.SIGKILL)
        assert plane.stopped_from_outside(settle_s=0.3) is None
    finally:
        plane.group.stop_all(timeout_s=5)


def test_every_component_killed_at_once_is_said_stopped_from_outside(tmp_path) -> None:
    plane, records = sleepers(tmp_path, ["etcd", "kube-apiserver", "kube-scheduler", "kwok"])
    try:
        for record in records:
            os.kill(record.pid, signal.SIGTERM)
        # as the health watch calls it: once a component has ended (on a busy machine a signalled process may
        # still be running a moment later, and a look before any has ended finds nothing to say)
        assert poll_until(lambda: any(not r.alive() for r in records), 10.0, interval_s=0.05)
        said = plane.stopped_from_outside(settle_s=2.0)
    finally:
        plane.group.stop_all(timeout_s=5)
    assert said is not None and said.startswith("every component ended within "), said
    assert said.endswith("s of each other: the control plane was stopped from outside"), said


def test_loadtest_down_says_who_asked_and_leaves_the_folder_to_the_run_that_owns_it(tmp_path) -> None:
    plane, records = sleepers(tmp_path, ["etcd", "kube-apiserver", "kwok"])
    request = DownRequest(pid=4242, user="alice", at="14:02:07", tty="/dev/pts/3", parent="-bash")
    # another process's view of the cluster, as `loadtest down --name t` has it: its state on disk
    stopped = LocalControlPlane(LocalOptions(name="t", directory=tmp_path)).down(timeout_s=5, request=request)
    try:
        assert stopped["stopped"] == ["etcd", "kube-apiserver", "kwok"] and stopped["left_to"] == os.getpid()
        assert (tmp_path / "state.json").exists()  # the run keeps its logs, and removes the folder as it ends
        assert not any(record.alive() for record in records)
        assert plane.stopped_from_outside(settle_s=0.3) == (
            "the control plane was stopped from outside (`loadtest down` by pid 4242, user alice on /dev/pts/3 "
            "(from -bash) at 14:02:07)")
    finally:
        plane.group.stop_all(timeout_s=5)


def test_a_down_request_names_this_process(tmp_path) -> None:
    here = DownRequest.here()
    assert here.pid == os.getpid() and here.user and len(here.at) == 8
    here.save(tmp_path)
    assert DownRequest.load(tmp_path) == here
    (tmp_path / "down-request.json").write_text("{not json")
    assert DownRequest.load(tmp_path) is None


class TestShutdown:
    def test_the_first_signal_interrupts(self) -> None:
        with pytest.raises(KeyboardInterrupt):
            Shutdown()._on_signal(15, None)

    @pytest.mark.parametrize(("signum", "said"), [
        ("SIGHUP", "interrupted by SIGHUP (the terminal or session closed, or the CI step was cancelled)"),
        ("SIGQUIT", "interrupted by SIGQUIT (Ctrl-\\)"), ("SIGXCPU", "interrupted by SIGXCPU"),
        ("SIGUSR2", "interrupted by SIGUSR2"), ("SIGINT", "interrupted by the user (Ctrl-C)")])
    def test_every_terminating_signal_is_an_interrupt(self, signum: str, said: str) -> None:
        code = ("import os, signal\n"
                f"signal.signal(signal.{signum}, signal.SIG_DFL)\n"  # as a terminal leaves it (not nohup's)
                "from loadtests.shutdown import SHUTDOWN, interrupt_reason\n"
                "SHUTDOWN.install()\n"
                "try:\n"
                f"    os.kill(os.getpid(), signal.{signum})\n"
                "    signal.pause()\n"
                "except KeyboardInterrupt as error:\n"
                "    print(interrupt_reason(error))\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0 and result.stdout.strip() == said, result

    @pytest.mark.parametrize("raised_in", ["a hook Python runs around a fork", "a __del__"])
    def test_a_signal_handled_where_exceptions_cannot_propagate_still_interrupts(self, raised_in: str) -> None:
        """Python runs the handler at the main thread's next step; in a hook around a fork (every `preexec_fn`
        child, as the Locust processes are started) or a __del__, the interrupt would be printed and lost."""
        swallowing = ("def after():\n"
                      "    os.kill(os.getpid(), signal.SIGINT)\n"
                      "    sum(range(1000))\n"
                      "os.register_at_fork(after_in_parent=after)\n"
                      "subprocess.Popen(['true'], preexec_fn=lambda: None).wait()\n"
                      if raised_in.startswith("a hook") else
                      "class Dropped:\n"
                      "    def __del__(self):\n"
                      "        os.kill(os.getpid(), signal.SIGINT)\n"
                      "        sum(range(1000))\n"
                      "Dropped()\n")
        code = ("import os, signal, subprocess, time\n"
                "from loadtests.shutdown import SHUTDOWN, interrupt_reason\n"
                "SHUTDOWN.install()\n"
                "try:\n"
                + "".join("    " + line + "\n" for line in swallowing.splitlines()) +
                "    time.sleep(20)\n"
                "    print('the run went on')\n"
                "except KeyboardInterrupt as error:\n"
                "    print(interrupt_reason(error))\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert result.stdout.strip() == "interrupted by the user (Ctrl-C)", result
        assert "Exception ignored" not in result.stderr, result.stderr

    def test_a_sighup_ignored_at_start_stays_ignored(self) -> None:
        code = ("import signal\n"
                "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
                # as from a terminal: a shell's background job starts with SIGQUIT ignored, which would stay so
                "signal.signal(signal.SIGQUIT, signal.SIG_DFL)\n"
                "from loadtests.shutdown import SHUTDOWN\n"
                "SHUTDOWN.install()\n"
                "print(signal.getsignal(signal.SIGHUP) == signal.SIG_IGN, signal.getsignal(signal.SIGQUIT))\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert result.stdout.split()[0] == "True" and "_on_signal" in result.stdout, result

    def test_after_sighup_a_message_to_a_closed_terminal_does_not_stop_teardown(self) -> None:
        code = ("import os, signal, sys\n"
                "from loadtests.shutdown import Shutdown\n"
                "s = Shutdown()\n"
                "with s.shielded():\n"
                "    s._on_signal(signal.SIGHUP, None)\n"
                "    os.close(2)\n"  # the terminal is gone: every write to it fails
                "    print('stopping', file=sys.stderr, flush=True)\n"
                "    print('teardown went on', flush=True)\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0 and "teardown went on" in result.stdout, result

    def test_signals_during_teardown_are_counted_not_raised(self, capsys: pytest.CaptureFixture[str]) -> None:
        shutdown = Shutdown()
        with shutdown.shielded():
            for _ in range(FORCE_AFTER - 1):
                shutdown._on_signal(15, None)
        assert shutdown.signals == FORCE_AFTER - 1
        assert "stopping everything it started" in capsys.readouterr().err

    def test_the_third_signal_forces_and_names_what_is_left(self) -> None:
        code = ("from loadtests.shutdown import Shutdown\n"
                "s = Shutdown()\n"
                "s.track(lambda: ['etcd (pid 123)'])\n"
                "with s.shielded():\n"
                "    for _ in range(3):\n"
                "        s._on_signal(15, None)\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert result.returncode == 130
        assert "forced to exit during teardown; still running: etcd (pid 123)" in result.stderr

    def test_a_fault_interrupts_as_a_base_exception_no_except_exception_swallows(self) -> None:
        from loadtests.errors import RunAborted
        from loadtests.shutdown import FaultInterrupt

        shutdown = Shutdown()
        shutdown._fault = RunAborted("kwok exited (pid 7)")
        with pytest.raises(FaultInterrupt):
            try:
                shutdown._on_fault(10, None)
            except Exception:  # what a probe that must not fail alone does
                pytest.fail("the fault was swallowed")
        assert str(shutdown.take_fault()) == "kwok exited (pid 7)"

    def test_a_fault_from_another_thread_is_kept_while_shielded(self) -> None:
        from loadtests.errors import RunAborted

        shutdown = Shutdown()
        fault = RunAborted("etcd stopped answering /health for 30 s")
        with shutdown.shielded():
            shutdown._fault = fault
            shutdown._on_fault(10, None)  # not raised inside teardown
        assert shutdown.take_fault() is fault and shutdown.take_fault() is None
