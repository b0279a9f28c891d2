"""An existing cluster reached through an exec credential plugin, as on EKS, GKE and AKS: a run longer than
the plugin's tokens live completes, every process obtaining new tokens before the old ones expire. Also the
kubeconfig's proxy-url and tls-server-name, which such clusters use.

The cluster is a real local control plane without kwok. The plugin is a script that asks that apiserver for
a ServiceAccount token (TokenRequest, as the cluster admin) at each call, logs which process called it, and
says the token expires in TOKEN_TTL_S: well inside the run's load, so every process must refresh mid-run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from loadtests import results
from loadtests.binaries import cache as binaries
from loadtests.config import versions
from loadtests.controlplane.existing import guard
from loadtests.controlplane.local import LocalControlPlane
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient
from loadtests.measure.prometheus import fetch_metrics_text
from loadtests.polling import poll_until
from tests.checks import running_plane
from tests.cli import loadtest, start_loadtest

CONTEXT = "eks-like"
NAMESPACE, ACCOUNT = "exec-credentials", "load-tester"  # not a harness namespace: the cluster's own
# three tokens' lifetimes of load: each process refreshes mid-run, more than once (a run within one lifetime, or
# a process that never refreshed, fails the counts of plugin calls asserted below)
TOKEN_TTL_S = 8
LOAD_S = 24

PLUGIN = """#!{python}
# An exec credential plugin: a fresh ServiceAccount token per call, said to expire in {ttl} s.
import datetime, json, os, ssl, urllib.request

context = ssl.create_default_context(cafile={ca!r})
context.load_cert_chain({cert!r}, {key!r})
request = urllib.request.Request(
    {server!r} + "/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", method="POST",
    data=json.dumps({{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "spec": {{"expirationSeconds": 600}}}}).encode(),
    headers={{"Content-Type": "application/json"}})
with urllib.request.urlopen(request, context=context, timeout=30) as response:
    token = json.load(response)["status"]["token"]
with open(f"/proc/{{os.getppid()}}/cmdline", "rb") as cmdline:
    caller = " ".join(part.decode() for part in cmdline.read().split(bytes(1)) if part)
with open({calls!r}, "a") as log:  # who called: the parent's pid and command line
    log.write(f"{{os.getppid()}} {{caller}}\\n")
with open({tokens!r}, "a") as log:
    log.write(token + "\\n")
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={ttl})
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
"""


class ConnectProxy:
    """An HTTP CONNECT proxy on loopback that records each tunnel it opened, and the pid of the process that
    asked for it (each tunnel is piped by two threads)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.tunnels: list[str] = []
        self.clients: list[int | None] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.server.accept()
                threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        target = head.split(b" ")[1].decode()
        self.tunnels.append(target)
        self.clients.append(self._pid_of(client.getpeername(), client.getsockname()))
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pid_of(address: tuple[str, int], proxy: tuple[str, int]) -> int | None:
        """The process whose socket is the tunnel's other end: from `address` to the proxy. Its local address
        alone is not enough: the kernel gives one local port to several connections to different peers (an
        apiserver's to etcd took the tunnel of a Locust process so, once). psutil finds a socket's pid by
        scanning every process's open files, which can miss one opened that instant: looked for again, for up
        to 2 s."""
        found: list[int | None] = []

        def look() -> bool:
            found[:] = [c.pid for c in psutil.net_connections("tcp") if c.laddr and tuple(c.laddr) == address
                        and c.raddr and tuple(c.raddr) == proxy and c.pid is not None]
            return bool(found)

        poll_until(look, 2.0, interval_s=0.05)
        return found[0] if found else None

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def eks_like(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """A control plane without kwok, with a ServiceAccount bound to cluster-admin for the plugin's tokens."""
    with running_plane(bins, tmp_path_factory.mktemp("exec"), f"exec-{os.getpid()}", kwok=False) as plane, \
            contextlib.closing(RestClient(plane.access())) as client:
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": NAMESPACE}})
        client.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT}})
        client.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{ACCOUNT}-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]})
        yield plane


def plugin_kubeconfig(folder: Path, plane: LocalControlPlane, proxy_url: str) -> Path:
    """A kubeconfig whose only credential is the exec plugin (written next to it, mode 0700)."""
    access = plane.access()
    plugin = folder / "get-token"
    plugin.write_text(PLUGIN.format(python=sys.executable, ttl=TOKEN_TTL_S, ca=access.ca_file, cert=access.cert_file,
                                    key=access.key_file, server=access.server, namespace=NAMESPACE, account=ACCOUNT,
                                    calls=str(folder / "calls"), tokens=str(folder / "tokens")))
    plugin.chmod(0o700)
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": access.server, "certificate-authority": access.ca_file,
                                               "proxy-url": proxy_url}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                  "command": str(plugin), "interactiveMode": "Never"}}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def callers(folder: Path) -> list[tuple[int, str]]:
    """(pid, command line) of the process behind each plugin call, in order."""
    lines = (folder / "calls").read_text().splitlines() if (folder / "calls").exists() else []
    return [(int(pid), command) for pid, _, command in (line.partition(" ") for line in lines)]


def test_a_run_outlives_its_exec_tokens(eks_like: LocalControlPlane, tmp_path: Path) -> None:
    """Through the kubeconfig's proxy-url, too: every process of the run honours it."""
    proxy = ConnectProxy()
    kubeconfig = plugin_kubeconfig(tmp_path, eks_like, proxy.url)
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "exec-credentials",
        "target": {"kind": "cluster", "kubeconfig": str(kubeconfig)},
        "steps": [{"nodes": 3, "pods_per_node": 1, "duration_s": LOAD_S, "warmup_s": 1}],
        "load": {"scenarios": {"pod_churn": {"rate": 2}, "list_pollers": {"rate": 1}}},
    }))
    out = tmp_path / "out"
    proc = start_loadtest("run", "--plan", str(plan), "--context", CONTEXT, "--allow-context", CONTEXT,
                          "--no-gate", "--out", str(out))
    try:
        stdout, stderr = proc.communicate(timeout=360)
    finally:
        proxy.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    run = results.load(out)
    assert run.status == "complete" and len(run.steps) == 1
    client = run.steps[0].client
    assert client and sum(c.count for c in client) > 0
    assert not [c for c in client if c.failures], [(c.name, c.failures) for c in client if c.failures]

    calls = callers(tmp_path)
    harness = [pid for pid, _ in calls if pid == proc.pid]
    locust = {pid for pid, command in calls if "locust" in command}
    kwok = [pid for pid, command in calls if "kwok" in Path(command.split(" ")[0]).name]
    # the harness ran the plugin at the start and again before each token expired, over more than LOAD_S
    assert len(harness) >= 1 + LOAD_S // TOKEN_TTL_S, calls
    # the Locust process had only the kubeconfig and the context, and refreshed for itself
    assert len(locust) == 1 and sum(1 for pid, _ in calls if pid in locust) >= 2, calls
    assert kwok, calls  # kwok (client-go) ran the plugin from the kubeconfig written for it
    assert {proc.pid, *locust, kwok[0]} <= set(proxy.clients), (proxy.clients, calls)

    tokens = (tmp_path / "tokens").read_text().split()
    assert len(set(tokens)) == len(calls)
    written = [p for p in out.rglob("*") if p.is_file()]
    leaked = [str(p) for p in written if any(t.encode() in p.read_bytes() for t in tokens)]
    assert leaked == [], "a token was written to the results"


# ---------------------------------------------------------------------------------------------- proxy, TLS name
def cert_kubeconfig(folder: Path, plane: LocalControlPlane, **cluster: str) -> Path:
    access = plane.access()
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": access.server, "certificate-authority": access.ca_file,
                                               **cluster}}],
        "users": [{"name": "u", "user": {"client-certificate": access.cert_file, "client-key": access.key_file}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def test_proxy_url_carries_every_client_of_the_harness(eks_like: LocalControlPlane, tmp_path: Path) -> None:
    proxy = ConnectProxy()
    workdir = tmp_path / "work"
    workdir.mkdir(mode=0o700)
    try:
        kubeconfig = cert_kubeconfig(tmp_path, eks_like, **{"proxy-url": proxy.url})
        access = guard(str(kubeconfig), CONTEXT, CONTEXT).materialize(workdir)
        client = RestClient(access)
        try:
            assert client.get("/version")["gitVersion"] == versions.DEFAULT_KUBE_VERSION
        finally:
            client.close()
        assert "apiserver_request_total" in fetch_metrics_text(access.server + "/metrics", access)
    finally:
        proxy.close()
    server = access.server.removeprefix("https://")
    assert proxy.tunnels == [server, server]


def test_tls_server_name_is_the_name_asked_for_and_verified(eks_like: LocalControlPlane, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir(mode=0o700)
    access = guard(str(cert_kubeconfig(tmp_path, eks_like, **{"tls-server-name": "kubernetes.default"})), CONTEXT,
                   CONTEXT).materialize(workdir)
    assert access.tls_server_name == "kubernetes.default"
    client = RestClient(access)
    try:
        assert client.get("/version")["gitVersion"] == versions.DEFAULT_KUBE_VERSION
    finally:
        client.close()
    elsewhere = RestClient(dataclasses.replace(access, tls_server_name="elsewhere.example"))
    try:
        with pytest.raises(ApiError) as caught:
            elsewhere.get("/version")
        assert caught.value.status == 0 and "elsewhere.example" in caught.value.reason
    finally:
        elsewhere.close()


# ------------------------------------------------------------------------------ refused before anything starts
FAILING_PLUGIN = """#!/bin/sh
echo "error: the SSO session has expired; run: sso login" >&2
exit 1
"""
NO_RIGHTS = "no-rights"  # a ServiceAccount that exists and is bound to nothing


def token_kubeconfig(folder: Path, plane: LocalControlPlane, user: dict[str, object]) -> Path:
    access = plane.access()
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": access.server, "certificate-authority": access.ca_file}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def unbound_token(plane: LocalControlPlane) -> str:
    """A real token of a ServiceAccount that may do nothing (authenticated, not authorised)."""
    with contextlib.closing(RestClient(plane.access())) as client:
        path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts"
        if not client.request("GET", f"{path}/{NO_RIGHTS}", ok=(404,)):  # {}: not there yet
            client.create(path, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NO_RIGHTS}})
        made = client.create(f"{path}/{NO_RIGHTS}/token", {"apiVersion": "authentication.k8s.io/v1",
                                                           "kind": "TokenRequest", "spec": {"expirationSeconds": 600}})
    return str(made["status"]["token"])


@pytest.mark.parametrize("case", ["exec plugin exits 1", "token refused", "may not list nodes"])
def test_credentials_refused_before_anything_starts_are_bad_input(eks_like: LocalControlPlane, tmp_path: Path,
                                                                  case: str) -> None:
    if case == "exec plugin exits 1":
        plugin = tmp_path / "get-token"
        plugin.write_text(FAILING_PLUGIN)
        plugin.chmod(0o700)
        user: dict[str, object] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                                            "interactiveMode": "Never"}}
        said = f"context {CONTEXT}: no credentials from its user ("
    elif case == "token refused":
        user, said = {"token": "not-a-token-this-cluster-issued"}, "refused the kubeconfig's credentials (HTTP 401"
    else:
        user, said = {"token": unbound_token(eks_like)}, "the kubeconfig's user may not list nodes (HTTP 403"
    kubeconfig = token_kubeconfig(tmp_path, eks_like, user)
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "refused", "target": {"kind": "cluster", "kubeconfig": str(kubeconfig)},
                                    "steps": [{"nodes": 1, "duration_s": 5}],
                                    "load": {"scenarios": {"list_pollers": {"rate": 1}}}}))
    out = tmp_path / "out"
    done = loadtest("run", "--plan", str(plan), "--context", CONTEXT, "--allow-context", CONTEXT, "--out", str(out))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("loadtest:")]
    assert len(errors) == 1 and said in errors[0], errors
    assert "run aborted" not in errors[0] and "Traceback" not in done.stderr
    if case == "exec plugin exits 1":
        assert "SSO session has expired" in errors[0], errors  # the plugin's own words
    if case == "may not list nodes":
        assert f"system:serviceaccount:{NAMESPACE}:{NO_RIGHTS}" in errors[0], errors  # who, from the apiserver
