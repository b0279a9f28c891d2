"""HAProxy in front of several apiservers, as kubeadm's HA guide puts it there: a TCP load balancer (the clients'
TLS goes through to an apiserver, which sees their own certificates) that health-checks each apiserver's /readyz
and sends new connections only to those that are ready. Bound to loopback like every component; its runtime API
on a private socket takes an apiserver out of rotation and puts it back (a rolling upgrade's first move).
"""

from __future__ import annotations

import resource
import shutil
import socket
from pathlib import Path

from loadtests.controlplane.pki import CertPair
from loadtests.controlplane.processes import LOOPBACK, http_ok
from loadtests.errors import TargetError
from loadtests.kube.kept import KeptConnection
from loadtests.kube.private import write_private

BACKEND = "apiservers"
CHECK_INTERVAL_S = 1  # an apiserver that stops answering /readyz is out of rotation within 2 checks
LONG_CONNECTION_S = 3600  # a watch lives as long as its client wants: HAProxy must not cut it idle


def binary() -> Path:
    """HAProxy on this machine, or one line saying how to get it."""
    found = shutil.which("haproxy")
    if found is None:
        raise TargetError("a control plane with more than one apiserver needs HAProxy in front of them, and it is "
                          "not installed: apt-get install haproxy (make setup does it as root), or set "
                          "target.topology.apiservers to 1")
    return Path(found)


def write_config(path: Path, port: int, health_port: int, apiservers: dict[str, int], ca: Path,
                 checker: CertPair, socket_path: Path) -> Path:
    """The configuration: a TCP frontend on `port`, a backend of `apiservers` (name -> port) checked on /readyz
    with the health checker's client certificate, and /healthz of HAProxy itself on `health_port`."""
    pem = path.with_name("haproxy-health-checker.pem")  # HAProxy reads a client certificate and key from one file
    write_private(pem, checker.cert.read_bytes() + checker.key.read_bytes())
    servers = "\n".join(f"    server {name} {LOOPBACK}:{server_port}" for name, server_port in apiservers.items())
    write_private(path, f"""global
    log stdout format raw local0 notice
    maxconn {max_connections()}
    stats socket {socket_path} mode 600 level admin

defaults
    mode tcp
    log global
    timeout connect 5s
    timeout client {LONG_CONNECTION_S}s
    timeout server {LONG_CONNECTION_S}s
    timeout check 2s

frontend health
    mode http
    bind {LOOPBACK}:{health_port}
    monitor-uri /healthz

frontend apiserver
    bind {LOOPBACK}:{port}
    default_backend {BACKEND}

backend {BACKEND}
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    default-server check check-ssl verify required ca-file {ca} crt {pem} inter {CHECK_INTERVAL_S}s fall 2 rise 1
{servers}
""".encode())
    return path


def max_connections() -> int:
    """As many connections as this process's file limit lets HAProxy hold (two descriptors each, client's and
    apiserver's, and some to spare): a watch per fake node is a connection for as long as the step lasts."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else soft
    return max(1000, (limit - 200) // 2)


def argv(config: Path) -> list[str]:
    return [str(binary()), "-db", "-f", str(config)]  # -db: in the foreground, its pid the one we started


def healthy(health_port: int, kept: KeptConnection | None = None) -> bool:
    return http_ok(f"http://{LOOPBACK}:{health_port}/healthz", kept=kept)


def command(socket_path: Path, line: str, timeout_s: float = 5.0) -> str:
    """One command of HAProxy's runtime API, its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        conn.connect(str(socket_path))
        conn.sendall(line.encode() + b"\n")
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def servers_up(socket_path: Path) -> dict[str, bool]:
    """Each apiserver of the backend: whether HAProxy sends it connections now (its last check passed)."""
    found = {}
    lines = command(socket_path, "show stat").splitlines()
    if not lines:
        return found
    header = lines[0].lstrip("# ").split(",")
    for line in lines[1:]:
        row = dict(zip(header, line.split(","), strict=False))
        if row.get("pxname") == BACKEND and row.get("svname") not in ("FRONTEND", "BACKEND"):
            found[row["svname"]] = row.get("status", "").startswith("UP")
    return found


def set_state(socket_path: Path, server: str, state: str) -> None:
    """`ready` (back in rotation), `drain` (no new connections) or `maint` (out of rotation)."""
    answer = command(socket_path, f"set server {BACKEND}/{server} state {state}").strip()
    if answer:
        raise TargetError(f"HAProxy refused to set {server} {state}: {answer}")
