"""Bad input and interruptions around `loadtest up`: one clear line, and nothing left running."""

from __future__ import annotations

import json
import signal
import socket

from loadtests.controlplane.processes import ProcessRecord, wait_for
from tests.checks import assert_nothing_left
from tests.cli import error_lines, loadtest, private_cache, start_loadtest


def test_port_in_use_is_named(bins, tmp_path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = loadtest("up", "--name", "port-busy", "--port", str(port), env=private_cache(tmp_path / "cache"))
    assert result.returncode == 2
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert f"port {port}" in lines[0] and "in use" in lines[0]


def test_sigint_during_up_stops_everything_started(bins, tmp_path) -> None:
    env = private_cache(tmp_path / "cache")
    state_file = tmp_path / "cache" / "clusters" / "interrupted" / "state.json"
    proc = start_loadtest("up", "--name", "interrupted", env=env)

    def started(n: int) -> bool:
        try:
            return len(json.loads(state_file.read_text())["processes"]) >= n
        except (OSError, ValueError, KeyError):
            return False

    try:
        # interrupt once etcd and kube-apiserver have been started, before up has finished
        wait_for(lambda: started(2), 60, "etcd and kube-apiserver started", interval_s=0.05)
        records = [ProcessRecord(**p) for p in json.loads(state_file.read_text())["processes"]]
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert_nothing_left(records)
