"""An existing cluster is used only when named and confirmed; its kubeconfig is read exactly; kwok's manifests."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadtests.config import plan as plan_mod
from loadtests.config import versions
from loadtests.controlplane import kwok as kwok_mod
from loadtests.controlplane.base import TargetRequest
from loadtests.controlplane.existing import KWOK_NAMESPACE, ClusterOptions, ExistingCluster, guard
from loadtests.controlplane.kwok import in_cluster_manifests
from loadtests.controlplane.pki import create_cluster_pki
from loadtests.controlplane.processes import free_ports
from loadtests.errors import TargetError
from loadtests.kube import objects
from loadtests.kube.paths import object_path

CA, CERT, KEY = b"-----CA-----\n", b"-----CERT-----\n", b"-----KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(folder: Path, *, current: str = "inline") -> Path:
    """Five contexts: inline data, relative file paths, a token file, an exec plugin that is not installed,
    and basic authentication (which the harness refuses)."""
    certs = folder / "certs"
    certs.mkdir()
    (certs / "ca.crt").write_bytes(CA)
    (certs / "client.crt").write_bytes(CERT)
    (certs / "client.key").write_bytes(KEY)
    (certs / "token").write_text("s3cret-token\n")
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [
            {"name": "inline", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(CA)}},
            {"name": "files", "cluster": {"server": "https://10.1.2.3:6443", "certificate-authority": "certs/ca.crt"}},
            {"name": "open", "cluster": {"server": "https://127.0.0.1:7443", "insecure-skip-tls-verify": True}},
        ],
        "users": [
            {"name": "inline", "user": {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}},
            {"name": "files", "user": {"client-certificate": "certs/client.crt", "client-key": "certs/client.key"}},
            {"name": "token", "user": {"tokenFile": "certs/token"}},
            {"name": "plugin", "user": {"exec": {"command": "loadtest-no-such-plugin",
                                                 "apiVersion": "client.authentication.k8s.io/v1"}}},
            {"name": "basic", "user": {"username": "admin", "password": "hunter2"}},
        ],
        "contexts": [
            {"name": "inline", "context": {"cluster": "inline", "user": "inline"}},
            {"name": "files", "context": {"cluster": "files", "user": "files"}},
            {"name": "token", "context": {"cluster": "open", "user": "token"}},
            {"name": "plugin", "context": {"cluster": "inline", "user": "plugin"}},
            {"name": "basic", "context": {"cluster": "inline", "user": "basic"}},
        ],
    }
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def cluster_plan(kubeconfig: Path | None = None, context: str | None = None) -> plan_mod.Plan:
    target: dict[str, Any] = {"kind": "cluster", "kubeconfig": str(kubeconfig or "unused")}
    if context:
        target["context"] = context
    return plan_mod.parse({"name": "t", "target": target, "steps": [{"nodes": 1}]})


def run_args(**values: Any) -> TargetRequest:
    return TargetRequest(**values)


def refusal(plan: plan_mod.Plan, args: TargetRequest) -> str:
    with pytest.raises(TargetError) as caught:
        ExistingCluster.from_request(plan, args)
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------- the guard
def test_no_context_is_refused_even_with_a_current_context(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path, current="inline")
    message = refusal(cluster_plan(kubeconfig), run_args(kubeconfig=str(kubeconfig), allow_context="inline"))
    assert "without a named context" in message
    assert "--context NAME" in message and "--allow-context NAME" in message
    assert "inline, files, token, plugin, basic" in message


def test_context_without_allow_context_is_refused(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    message = refusal(cluster_plan(kubeconfig), run_args(kubeconfig=str(kubeconfig), context="files"))
    assert message == f"refusing to load-test context 'files' of {kubeconfig}: confirm with --allow-context files"


def test_mismatched_allow_context_is_refused(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    message = refusal(cluster_plan(kubeconfig),
                      run_args(kubeconfig=str(kubeconfig), context="files", allow_context="inline"))
    assert "refusing to load-test context 'files'" in message
    assert "'inline' does not match" in message and message.endswith("confirm with --allow-context files")


def test_unknown_context_names_the_ones_that_exist(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    message = refusal(cluster_plan(kubeconfig),
                      run_args(kubeconfig=str(kubeconfig), context="prod", allow_context="prod"))
    assert message == f"context 'prod' is not in {kubeconfig}; contexts there: inline, files, token, plugin, basic"


def test_plan_names_kubeconfig_and_context_and_the_command_line_wins(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    from_plan = ExistingCluster.from_request(cluster_plan(kubeconfig, context="files"), run_args(allow_context="files"))
    assert from_plan.context.name == "files"
    overridden = ExistingCluster.from_request(cluster_plan(kubeconfig, context="files"),
                                           run_args(context="inline", allow_context="inline"))
    assert overridden.context.name == "inline"
    # confirming the plan's context does not confirm another one given on the command line
    refusal(cluster_plan(kubeconfig, context="files"), run_args(context="inline", allow_context="files"))


def test_unreadable_kubeconfig_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    message = refusal(cluster_plan(missing), run_args(context="a", allow_context="a"))
    assert message.startswith(f"kubeconfig {missing}: cannot read it")


def test_an_exec_plugin_that_is_not_installed_is_one_line(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    message = refusal(cluster_plan(kubeconfig), run_args(context="plugin", allow_context="plugin"))
    assert message == (f"kubeconfig {kubeconfig}: context plugin: exec plugin command 'loadtest-no-such-plugin' "
                       "is not installed (not found on PATH); install it or use a context with a token or client "
                       "certificate")


def test_basic_authentication_is_refused(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    message = refusal(cluster_plan(kubeconfig), run_args(context="basic", allow_context="basic"))
    assert "basic authentication" in message and "hunter2" not in message
    assert "exec plugin" in message


# ---------------------------------------------------------------------------------------------- kubeconfig
def mode(path: str | Path) -> int:
    return os.stat(path).st_mode & 0o777


def test_inline_data_is_written_to_private_files(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    context = guard(str(kubeconfig), "inline", "inline")
    workdir = tmp_path / "work"
    workdir.mkdir(mode=0o700)
    access = context.materialize(workdir)
    assert access.server == "https://127.0.0.1:6443"
    for path, data in ((access.ca_file, CA), (access.cert_file, CERT), (access.key_file, KEY)):
        assert path is not None and Path(path).parent == workdir
        assert Path(path).read_bytes() == data and mode(path) == 0o600
    assert access.token is None and not access.insecure_skip_verify
    written = yaml.safe_load(Path(access.kubeconfig).read_text())
    assert mode(access.kubeconfig) == 0o600
    assert written["current-context"] == "inline"  # kwok has no --context flag: it uses this one
    assert written["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                                 "certificate-authority": access.ca_file}
    assert written["users"][0]["user"] == {"client-certificate": access.cert_file, "client-key": access.key_file}


def test_file_paths_are_resolved_next_to_the_kubeconfig_and_not_copied(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    access = guard(str(kubeconfig), "files", "files").materialize(workdir)
    assert access.ca_file == str(tmp_path / "certs" / "ca.crt")
    assert access.cert_file == str(tmp_path / "certs" / "client.crt")
    assert access.key_file == str(tmp_path / "certs" / "client.key")
    assert sorted(p.name for p in workdir.iterdir()) == ["kubeconfig"]


def test_token_file_and_insecure_skip_verify(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    access = guard(str(kubeconfig), "token", "token").materialize(workdir)
    assert access.token == "s3cret-token" and access.auth_headers() == {"Authorization": "Bearer s3cret-token"}
    assert access.insecure_skip_verify and access.ca_file is None and access.cert_file is None
    user = yaml.safe_load(Path(access.kubeconfig).read_text())["users"][0]["user"]
    assert user == {"tokenFile": str(tmp_path / "certs" / "token")}


def test_missing_credential_file_is_one_line(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    (tmp_path / "certs" / "client.key").unlink()
    message = refusal(cluster_plan(kubeconfig), run_args(context="files", allow_context="files"))
    assert message == f"{kubeconfig}: client-key {tmp_path / 'certs' / 'client.key'} does not exist"


# ---------------------------------------------------------------------------------------------- up / down
def test_unreachable_cluster_is_one_line_and_leaves_no_files(tmp_path: Path) -> None:
    pki = create_cluster_pki(tmp_path / "pki")
    port = free_ports(1)[0]
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                               "certificate-authority-data": b64(pki.ca.cert.read_bytes())}}],
        "users": [{"name": "u", "user": {"client-certificate-data": b64(pki.admin.cert.read_bytes()),
                                         "client-key-data": b64(pki.admin.key.read_bytes())}}],
        "contexts": [{"name": "down-here", "context": {"cluster": "c", "user": "u"}}],
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    target = ExistingCluster(ClusterOptions(context=guard(str(kubeconfig), "down-here", "down-here")),
                             log=lambda _m: None)
    with pytest.raises(TargetError) as caught:
        target.up()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach context 'down-here' (https://127.0.0.1:{port})")
    assert "refused" in message.lower()
    assert target.workdir is None and target.client is None  # credential files removed
    target.down()  # and again: nothing left to do


def test_down_before_up_does_nothing(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    target = ExistingCluster.from_request(cluster_plan(kubeconfig), run_args(context="inline", allow_context="inline"))
    target.down()
    target.down()
    assert target.dead_components() == []


def test_unknown_kwok_mode_is_refused(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path)
    message = refusal(cluster_plan(kubeconfig), run_args(context="inline", allow_context="inline",
                                                         kwok_mode="docker"))
    assert message == "kwok mode 'docker': expected one of local, in-cluster"


# ---------------------------------------------------------------------------------------------- manifests
def test_in_cluster_manifests_render_kwok_with_the_shared_configuration() -> None:
    docs = in_cluster_manifests(heartbeat_factor=2.0)
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment"]
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-loadtest"
        assert doc["metadata"].get("namespace", KWOK_NAMESPACE) == KWOK_NAMESPACE
        assert object_path(doc).endswith(f"/{doc['metadata']['name']}")
    by_kind = {d["kind"]: d for d in docs}
    deployment_path = f"/apis/apps/v1/namespaces/{KWOK_NAMESPACE}/deployments/kwok-controller"
    assert object_path(by_kind["Deployment"]) == deployment_path

    config = list(yaml.safe_load_all(by_kind["ConfigMap"]["data"]["kwok.yaml"]))
    assert config == kwok_mod.config_documents(2.0)  # the same source as the local control plane's kwok
    assert config[0]["options"]["nodeLeaseDurationSeconds"] == 80
    stages = {d["metadata"]["name"] for d in config[1:]}
    assert stages == {p.stem for p in (objects.kwok_configs_dir() / "stages").glob("*.yaml")}

    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == f"registry.k8s.io/kwok/kwok:{versions.KWOK_VERSION}"
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in container["args"]
    assert "--manage-all-nodes=false" in container["args"]
    assert "--config=/etc/kwok/kwok.yaml" in container["args"]
    assert pod["serviceAccountName"] == "kwok-controller"
    assert pod["volumes"][0]["configMap"]["name"] == by_kind["ConfigMap"]["metadata"]["name"]
    # never on a fake node: no toleration of their taint, and an affinity away from their label
    assert not any(t.get("key") in (None, "kwok.x-k8s.io/node") for t in pod.get("tolerations", []))
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]

    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == by_kind["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kwok-controller", "namespace": KWOK_NAMESPACE}]
    rules = by_kind["ClusterRole"]["rules"]
    granted = {(r, v) for rule in rules for r in rule["resources"] for v in rule["verbs"]}
    assert ("nodes/status", "patch") in granted and ("leases", "update") in granted
    assert ("pods", "delete") in granted
    assert not any("*" in rule["resources"] or "*" in rule["verbs"] for rule in rules)
    assert not {r for r, _ in granted} & {"secrets", "namespaces"}
    assert ("nodes", "delete") not in granted


def test_a_changed_configuration_rolls_the_kwok_pod() -> None:
    def checksum(factor: float) -> str:
        deployment = in_cluster_manifests(factor)[-1]
        return deployment["spec"]["template"]["metadata"]["annotations"]["k8s-loadtest/kwok-config-sha256"]

    assert checksum(1.0) == checksum(1.0) != checksum(2.0)
