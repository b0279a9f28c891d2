"""Workers of other machines, refused before anything starts: each bad input is one line and exit code 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from loadtests.controlplane.processes import free_ports
from loadtests.load.generator import read_workers
from loadtests.load.remote import RemoteWorkerError, check_local_address, parse_address
from tests.cli import error_lines, loadtest

NOT_HERE = "192.0.2.1"  # TEST-NET-1: never an address of this machine


def kubeconfig(folder: Path) -> Path:
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "staging", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def one_line(*args: str, cwd: Path) -> str:
    result = loadtest(*args, timeout=60, cwd=cwd)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("count", ["0", "-1"])
def test_expect_workers_needs_one_or_more(tmp_path: Path, count: str) -> None:
    line = one_line("run", "--plan", "smoke", "--kubeconfig", str(kubeconfig(tmp_path)), "--context", "staging",
                    "--allow-context", "staging", "--expect-workers", count, "--out", str(tmp_path / "out"),
                    cwd=tmp_path)
    assert line == (f"loadtest: --expect-workers {count}: a run with workers of other machines needs at least one "
                    "(leave the flag out to run the load on this machine)")
    assert not (tmp_path / "out").exists()


def test_master_bind_must_be_an_address_of_this_machine(tmp_path: Path) -> None:
    line = one_line("run", "--plan", "smoke", "--kubeconfig", str(kubeconfig(tmp_path)), "--context", "staging",
                    "--allow-context", "staging", "--master-bind", f"{NOT_HERE}:5557", "--expect-workers", "2",
                    "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert line.startswith(f"loadtest: --master-bind {NOT_HERE}: not an address of this machine"), line


def test_master_bind_port_in_use_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line("run", "--plan", "smoke", "--kubeconfig", str(kubeconfig(tmp_path)), "--context", "staging",
                        "--allow-context", "staging", "--master-bind", f"127.0.0.1:{port}", "--expect-workers", "1",
                        "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert line == f"loadtest: --master-bind 127.0.0.1:{port}: the port is in use; choose another"


def test_master_bind_is_refused_for_a_local_control_plane(tmp_path: Path) -> None:
    line = one_line("run", "--plan", "smoke", "--master-bind", "127.0.0.1:5557", "--expect-workers", "2",
                    "--force", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert "workers of other machines join runs against an existing cluster only" in line, line


def test_master_bind_needs_expect_workers(tmp_path: Path) -> None:
    line = one_line("run", "--plan", "smoke", "--kubeconfig", str(kubeconfig(tmp_path)), "--context", "staging",
                    "--allow-context", "staging", "--master-bind", "127.0.0.1:5557", "--out", str(tmp_path / "o"),
                    cwd=tmp_path)
    assert line == "loadtest: --master-bind 127.0.0.1:5557: say how many workers to wait for with --expect-workers N"


def test_worker_without_kubeconfig(tmp_path: Path) -> None:
    line = one_line("worker", "--master", "127.0.0.1:5557", cwd=tmp_path)
    assert line.startswith("loadtest: loadtest worker needs --kubeconfig FILE --context NAME --allow-context NAME")


def test_worker_context_must_be_confirmed(tmp_path: Path) -> None:
    line = one_line("worker", "--master", "127.0.0.1:5557", "--kubeconfig", str(kubeconfig(tmp_path)),
                    "--context", "staging", cwd=tmp_path)
    assert "refusing to load-test context 'staging'" in line and line.endswith("--allow-context staging")


def test_worker_bind_must_be_local(tmp_path: Path) -> None:
    line = one_line("worker", "--master", "127.0.0.1:5557", "--bind", NOT_HERE, "--kubeconfig",
                    str(kubeconfig(tmp_path)), "--context", "staging", "--allow-context", "staging", cwd=tmp_path)
    assert line.startswith(f"loadtest: --bind {NOT_HERE}: not an address of this machine"), line


@pytest.mark.parametrize("text", ["nowhere", "host:", ":5557", "host:0", "host:70000", "host:port"])
def test_master_address_must_be_host_and_port(text: str) -> None:
    with pytest.raises(RemoteWorkerError) as caught:
        parse_address(text, "--master")
    assert str(caught.value) == f"--master {text!r}: expected HOST:PORT, e.g. 10.0.0.5:5557"


def test_addresses_parse_and_local_ones_pass() -> None:
    assert parse_address("10.0.0.5:5557", "--master") == ("10.0.0.5", 5557)
    assert parse_address("[::1]:6000", "--master") == ("::1", 6000)
    check_local_address("127.0.0.1", "--master-bind", free_ports(1)[0])
    check_local_address("0.0.0.0", "--master-bind")


def test_lost_and_refused_workers_become_notes(tmp_path: Path) -> None:
    path = tmp_path / "locust_window_workers.json"
    path.write_text(json.dumps({"error": None, "refused": ["10.0.0.9 (pid 7): its kubeconfig reaches another cluster"],
                                "workers": [
                                    {"worker": "10.0.0.7 (pid 5)", "remote": True, "requests": 120, "failures": 0,
                                     "cpu_seconds": 19.0, "cpu_percent": 95.0, "lost_after_s": None},
                                    {"worker": "10.0.0.8 (pid 6)", "remote": True, "requests": 30, "failures": 1,
                                     "cpu_seconds": None, "cpu_percent": None, "lost_after_s": 4.5}]}))
    workers, notes, error = read_workers(path)
    assert error is None
    assert [w.requests for w in workers] == [120, 30] and workers[1].lost_after_s == 4.5
    assert notes[0] == "load: refused worker 10.0.0.9 (pid 7): its kubeconfig reaches another cluster"
    assert notes[1].startswith("load: worker 10.0.0.7 (pid 5) CPU-bound: 95 % of a core")
    assert notes[2].startswith("load: worker 10.0.0.8 (pid 6) was lost")
    assert "partial figures" in notes[3]
    assert read_workers(tmp_path / "missing.json") == ([], [], None)
