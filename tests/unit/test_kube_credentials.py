"""Credentials users really have: exec plugins resolved by the kubernetes client's loader, refreshed ahead of
their expiry and after a 401, in every process; a plugin that is missing or failing is one line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtests.controlplane.existing import guard
from loadtests.errors import TargetError
from loadtests.kube import credentials
from loadtests.kube.access import ClusterAccess
from loadtests.kube.credentials import Credential, RefreshingToken, forget_tokens
from loadtests.kube.rest import RestClient
from loadtests.load.contract import LoadConfig
from tests.checks import send_json
from tests.cli import REPO, error_lines, loadtest

EXEC_V1 = "client.authentication.k8s.io/v1"

PLUGIN = """#!{python}
import datetime, json, os, sys
calls = os.environ["PLUGIN_CALLS"]
with open(calls, "a") as handle:
    handle.write("call\\n")
count = sum(1 for _ in open(calls))
if os.environ.get("PLUGIN_FAIL"):
    sys.stderr.write("token service says no\\nsecond line\\n")
    sys.exit(1)
ttl = datetime.timedelta(seconds=int(os.environ["PLUGIN_TTL_S"]))
expires = (datetime.datetime.now(datetime.timezone.utc) + ttl).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{"apiVersion": "{api}", "kind": "ExecCredential",
                  "status": {{"token": f"token-{{count}}", "expirationTimestamp": expires}}}}))
"""


def write_plugin(folder: Path) -> Path:
    """An exec plugin that counts its calls and hands out token-1, token-2, ...; mode 0700."""
    plugin = folder / "bin" / "get-token"
    plugin.parent.mkdir(exist_ok=True)
    plugin.write_text(PLUGIN.format(python=sys.executable, api=EXEC_V1))
    plugin.chmod(0o700)
    return plugin


def plugin_kubeconfig(folder: Path, server: str, *, command: str = "bin/get-token", ttl_s: int = 600,
                      fail: bool = False, cluster: dict[str, Any] | None = None) -> Path:
    env = [{"name": "PLUGIN_CALLS", "value": str(folder / "calls")}, {"name": "PLUGIN_TTL_S", "value": str(ttl_s)}]
    if fail:
        env.append({"name": "PLUGIN_FAIL", "value": "1"})
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": EXEC_V1, "command": command, "env": env,
                                                  "interactiveMode": "IfAvailable"}}}],
        "contexts": [{"name": "eks", "context": {"cluster": "c", "user": "u"}}],
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def calls(folder: Path) -> int:
    path = folder / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture()
def workdir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "work"
    folder.mkdir(mode=0o700)
    yield folder
    forget_tokens(str(folder / "kubeconfig"))


# ---------------------------------------------------------------------------------------------- refused
def cluster_plan(tmp_path: Path, kubeconfig: Path) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "t", "target": {"kind": "cluster", "kubeconfig": str(kubeconfig)},
                                    "steps": [{"nodes": 1}]}))
    return plan


def test_a_missing_plugin_command_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    kubeconfig = plugin_kubeconfig(tmp_path, "https://127.0.0.1:6443", command="aws")
    out = tmp_path / "out"
    result = loadtest("run", "--plan", str(cluster_plan(tmp_path, kubeconfig)), "--context", "eks",
                      "--allow-context", "eks", "--out", str(out),
                      env={"PATH": str(tmp_path / "empty-path"), "LOADTEST_CACHE": str(tmp_path / "cache")},
                      timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert error_lines(result) == [
        f"loadtest: kubeconfig {kubeconfig}: context eks: exec plugin command 'aws' is not installed (not found "
        "on PATH); install it or use a context with a token or client certificate"], result.stderr
    assert not (out / "results.json").exists()


def test_a_missing_plugin_path_names_the_file_it_looked_for(tmp_path: Path) -> None:
    kubeconfig = plugin_kubeconfig(tmp_path, "https://127.0.0.1:6443", command="bin/get-token")
    with pytest.raises(TargetError) as caught:
        guard(str(kubeconfig), "eks", "eks")
    assert f"no executable file at {tmp_path / 'bin' / 'get-token'}" in str(caught.value)


def test_a_failing_plugin_is_one_line_with_its_own_words(tmp_path: Path, workdir: Path) -> None:
    write_plugin(tmp_path)
    kubeconfig = plugin_kubeconfig(tmp_path, "https://127.0.0.1:6443", fail=True)
    with pytest.raises(TargetError) as caught:
        guard(str(kubeconfig), "eks", "eks").materialize(workdir)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"kubeconfig {kubeconfig}: context eks: no credentials")
    assert "token service says no" in message


@pytest.mark.parametrize(("user", "cluster", "words"), [
    ({"auth-provider": {"name": "gcp"}}, {}, "use its exec plugin instead: gke-gcloud-auth-plugin"),
    ({"auth-provider": {"name": "azure"}}, {}, "kubelogin"),
    ({"token": "t"}, {"proxy-url": "socks5://127.0.0.1:1080"}, "http:// and https:// proxies only"),
])
def test_what_the_harness_cannot_honour_is_one_line(tmp_path: Path, user: dict[str, Any],
                                                    cluster: dict[str, Any], words: str) -> None:
    config = {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
              "users": [{"name": "u", "user": user}], "contexts": [{"name": "x", "context": {"cluster": "c",
                                                                                           "user": "u"}}]}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    with pytest.raises(TargetError) as caught:
        guard(str(kubeconfig), "x", "x")
    assert "\n" not in str(caught.value) and words in str(caught.value)


# ---------------------------------------------------------------------------------------------- resolved
def test_an_exec_token_is_resolved_per_process_and_never_written(tmp_path: Path, workdir: Path) -> None:
    write_plugin(tmp_path)
    kubeconfig = plugin_kubeconfig(tmp_path, "https://127.0.0.1:6443",
                                   cluster={"proxy-url": "http://127.0.0.1:3128", "tls-server-name": "kubernetes"})
    access = guard(str(kubeconfig), "eks", "eks").materialize(workdir)
    assert calls(tmp_path) == 1  # run once at the start: a broken plugin fails before anything starts
    assert access.token is None and access.credential_context == "eks"
    assert access.proxy_url == "http://127.0.0.1:3128" and access.tls_server_name == "kubernetes"
    assert access.auth_headers() == {"Authorization": "Bearer token-1"} and calls(tmp_path) == 1

    written = yaml.safe_load(Path(access.kubeconfig).read_text())
    stanza = written["users"][0]["user"]["exec"]
    assert stanza["command"] == str(tmp_path / "bin" / "get-token")  # absolute: the copy lives elsewhere
    assert stanza["apiVersion"] == EXEC_V1 and stanza["interactiveMode"] == "Never"
    assert written["clusters"][0]["cluster"]["proxy-url"] == "http://127.0.0.1:3128"
    assert written["clusters"][0]["cluster"]["tls-server-name"] == "kubernetes"

    config = json.dumps(LoadConfig(access=access, scenarios={}, nodes=1).to_dict())
    assert "token-" not in config
    # another process (a Locust worker) gets only the JSON and resolves its own token
    child = subprocess.run([sys.executable, "-c", (
        "import json, sys; from loadtests.load.contract import LoadConfig; "
        "print(LoadConfig.from_dict(json.loads(sys.argv[1])).access.auth_headers()['Authorization'])"), config],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "Bearer token-2" and calls(tmp_path) == 2


def test_a_401_gets_a_new_token_and_one_retry(tmp_path: Path, workdir: Path) -> None:
    """A real HTTP server that accepts only the second token the plugin hands out."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server interface
            seen.append(self.headers.get("Authorization", ""))
            status = 200 if seen[-1] == "Bearer token-2" else 401
            send_json(self, status, {"kind": "Status", "code": status})

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        write_plugin(tmp_path)
        kubeconfig = plugin_kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_address[1]}")
        access = guard(str(kubeconfig), "eks", "eks").materialize(workdir)
        client = RestClient(access)
        try:
            # the plugin's first token, a few seconds old: a 401 to it is worth a new one
            forget_tokens(access.kubeconfig)
            credentials.refreshing_token(access.kubeconfig, "eks",
                                         first=Credential(token="token-1", obtained_at=time.time() - 5))
            assert client.get("/version") == {"kind": "Status", "code": 200}
        finally:
            client.close()
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["Bearer token-1", "Bearer token-2"]
    assert calls(tmp_path) == 2


# ---------------------------------------------------------------------------------------------- refresh
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def scripted(clock: FakeClock, lifetime_s: float | None, failures: set[int] | None = None) -> Any:
    """A resolver handing out token-1, token-2, ... (raising on the calls numbered in `failures`)."""
    made: list[int] = []

    def resolver(_kubeconfig: Path, _context: str, **_options: Any) -> Credential:
        made.append(len(made) + 1)
        if failures and made[-1] in failures:
            raise TargetError("plugin failed")
        expires = clock.now + lifetime_s if lifetime_s is not None else None
        return Credential(token=f"token-{made[-1]}", obtained_at=clock.now, expires_at=expires)

    return resolver


def test_a_token_is_renewed_ahead_of_its_expiry() -> None:
    clock = FakeClock()
    token = RefreshingToken(Path("/k"), "c", clock=clock, resolver=scripted(clock, lifetime_s=12.0))
    assert token.token() == "token-1"
    clock.now += 8.9  # refreshed a quarter of its lifetime ahead: at 9 s
    assert token.token() == "token-1"
    clock.now += 0.1
    assert token.token() == "token-2" and token.resolutions == 2
    long_lived = RefreshingToken(Path("/k"), "c", clock=clock, resolver=scripted(clock, lifetime_s=900.0))
    long_lived.token()
    clock.now += 900 - credentials.REFRESH_AHEAD_MAX_S - 1
    assert long_lived.token() == "token-1"
    clock.now += 1
    assert long_lived.token() == "token-2"


def test_a_rejected_token_is_renewed_once_however_many_requests_it_failed() -> None:
    clock = FakeClock()
    token = RefreshingToken(Path("/k"), "c", clock=clock, resolver=scripted(clock, lifetime_s=None))
    assert token.token() == "token-1"
    assert not token.rejected("token-1")  # just obtained: a 401 is not about its age, a retry would not help
    clock.now += 5
    assert token.rejected("token-1") and token.token() == "token-2"
    assert token.rejected("token-1") and token.resolutions == 2  # others that sent token-1: retry, no new run


def test_a_failed_refresh_keeps_the_old_token_and_tries_again_later() -> None:
    clock = FakeClock()
    token = RefreshingToken(Path("/k"), "c", clock=clock, resolver=scripted(clock, lifetime_s=20.0, failures={2}))
    assert token.token() == "token-1"
    clock.now += 15
    assert token.token() == "token-1" and "plugin failed" in token.last_error
    clock.now += credentials.RETRY_AFTER_FAILURE_S - 1
    assert token.token() == "token-1" and token.resolutions == 2  # not at every request
    clock.now += 1
    assert token.token() == "token-3"


def test_a_first_resolution_that_fails_is_an_error() -> None:
    clock = FakeClock()
    token = RefreshingToken(Path("/k"), "c", clock=clock, resolver=scripted(clock, lifetime_s=20.0, failures={1}))
    with pytest.raises(TargetError):
        token.token()


def test_static_access_never_loads_kubeconfigs() -> None:
    access = ClusterAccess(server="https://127.0.0.1:1", kubeconfig="/nonexistent", token="t")
    assert access.auth_headers() == {"Authorization": "Bearer t"}
    assert not access.rejected(access.auth_headers())  # a 401 to a static token is final
