"""`loadtest up` and a run say the same failure with the same exit code: a component that fails to start is an
abort (3) in both, a full disk the environment (4); what the user gave (a cluster already running) stays bad
input (2). No control plane is started: the start itself is replaced by the failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.binaries.cache import Binaries
from loadtests.cli import main as cli
from loadtests.controlplane.local import LocalControlPlane, LocalOptions
from loadtests.errors import EXIT_ABORTED, EXIT_BAD_INPUT, EXIT_ENVIRONMENT, NO_SPACE, ComponentFailed, TargetError

REFUSED = "kube-apiserver ready: kube-apiserver exited (code 1): Error: unknown flag: --no-such-flag"


def _plane(tmp_path: Path) -> LocalControlPlane:
    bins = Binaries("v1.37.2", *(tmp_path / "bin" / name for name in ("etcd", "kube-apiserver", "kube-scheduler",
                                                                      "kube-controller-manager", "kwok", "kwokctl")))
    return LocalControlPlane(LocalOptions(name="refused", directory=tmp_path / "cluster"), bins=bins)


def _refuse(said: str):
    def start_all(*_args: object) -> None:
        raise TargetError(said)

    return start_all


def test_a_component_that_fails_to_start_is_an_abort(tmp_path: Path, monkeypatch) -> None:
    plane = _plane(tmp_path)
    monkeypatch.setattr(plane, "_start_all", _refuse(REFUSED))
    with pytest.raises(ComponentFailed) as failed:
        plane.up(log=lambda _line: None)
    assert str(failed.value) == REFUSED  # the same line as before, only its class (and code) says more
    assert failed.value.exit_code == EXIT_ABORTED


def _up_exits(tmp_path: Path, monkeypatch, said: str, capsys) -> tuple[int, str]:
    monkeypatch.setattr(cli.SHUTDOWN, "install", lambda: None)  # this process keeps its own signal handlers
    monkeypatch.setattr(cli, "_local", lambda _args: _plane(tmp_path))
    monkeypatch.setattr(LocalControlPlane, "_start_all", _refuse(said))
    monkeypatch.setattr("loadtests.controlplane.local.leftover_lines", lambda: ([], []))
    code = cli.main(["up", "--name", "refused"])
    return code, capsys.readouterr().err


def test_up_exits_as_a_run_does(tmp_path: Path, monkeypatch, capsys) -> None:
    code, err = _up_exits(tmp_path, monkeypatch, REFUSED, capsys)
    assert code == EXIT_ABORTED, err
    assert err.strip() == f"loadtest: {REFUSED}"


def test_up_on_a_full_disk_is_the_environment(tmp_path: Path, monkeypatch, capsys) -> None:
    said = f"etcd ready: etcd exited (code 2): failed to open database: {NO_SPACE}"
    code, err = _up_exits(tmp_path, monkeypatch, said, capsys)
    assert code == EXIT_ENVIRONMENT and "disk full" in err and said in err, err


def test_a_cluster_already_running_is_still_bad_input() -> None:
    assert TargetError("cluster 'x' is already running").exit_code == EXIT_BAD_INPUT
