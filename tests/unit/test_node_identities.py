"""Node identities without a control plane: the certificates pki.py issues for them, the object that carries them
to the Locust processes, and the local apiserver's admission flags as a plan's component_args change them."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from loadtests.capture.clients import client_class
from loadtests.config.scenarios import NODE_IDENTITY_SCENARIOS, needs_node_identities
from loadtests.controlplane.local import (
    PROXY_BINDING,
    SERVICE_ACCOUNT_BINDING,
    USER_BINDING,
    grants,
    with_extra_flags,
)
from loadtests.controlplane.pki import KWOK_USER, Authority, create_cluster_pki, issue_node_certificates
from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import (
    NODE_KEY,
    PROXY_GROUPS,
    PROXY_USER,
    REPLAY_USER,
    SERVICE_ACCOUNT_GROUPS,
    SERVICE_ACCOUNT_USER,
    NodeIdentities,
)
from loadtests.kube.objects import node_name
from loadtests.load.contract import LoadConfig
from loadtests.load.generator import StepLoad


def subject(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]


def test_a_node_certificate_names_the_node_and_chains_to_the_ca(tmp_path: Path) -> None:
    ca = Authority(tmp_path / "pki")
    folder = tmp_path / "pki" / "nodes"
    assert issue_node_certificates(tmp_path / "pki", folder, ["kwok-node-00000", "kwok-node-00001"]) == 2
    cert = x509.load_pem_x509_certificate((folder / "kwok-node-00001.crt").read_bytes())
    assert subject(cert, NameOID.COMMON_NAME) == ["system:node:kwok-node-00001"]
    assert subject(cert, NameOID.ORGANIZATION_NAME) == ["system:nodes"]
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage(
        [ExtendedKeyUsageOID.CLIENT_AUTH])
    cert.verify_directly_issued_by(ca.cert)
    key = serialization.load_pem_private_key((folder / NODE_KEY).read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    assert key.public_key() == cert.public_key()  # the shared key is the one every node certificate is for
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in folder.iterdir()} == {0o600}


def test_node_certificates_are_issued_once_and_kept(tmp_path: Path) -> None:
    Authority(tmp_path / "pki")
    folder = tmp_path / "nodes"
    issue_node_certificates(tmp_path / "pki", folder, ["a", "b"])
    first, key = (folder / "a.crt").read_bytes(), (folder / NODE_KEY).read_bytes()
    assert issue_node_certificates(tmp_path / "pki", folder, ["a", "b", "c", "c"]) == 1  # only the new node's
    assert (folder / "a.crt").read_bytes() == first and (folder / NODE_KEY).read_bytes() == key
    assert issue_node_certificates(tmp_path / "pki", folder, ["c", "a"]) == 0


@pytest.mark.parametrize("name", ["../ca", "Node", "a/b", "", ".hidden"])
def test_a_name_that_is_no_node_name_is_refused(tmp_path: Path, name: str) -> None:
    Authority(tmp_path / "pki")
    with pytest.raises(ValueError, match="not a node name"):
        issue_node_certificates(tmp_path / "pki", tmp_path / "nodes", [name])


def test_the_cluster_has_kubeadms_kube_proxy_identity(tmp_path: Path) -> None:
    pki = create_cluster_pki(tmp_path / "pki")
    assert pki.kube_proxy is not None
    cert = x509.load_pem_x509_certificate(pki.kube_proxy.cert.read_bytes())
    assert subject(cert, NameOID.COMMON_NAME) == [PROXY_USER]
    assert tuple(subject(cert, NameOID.ORGANIZATION_NAME)) == PROXY_GROUPS
    binding = next(b for b in grants("admin") if b["metadata"]["name"] == PROXY_BINDING)
    assert binding["roleRef"]["name"] == "system:node-proxier"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}]
    assert [b["subjects"][0]["name"] for b in grants("production")][3:4] == [KWOK_USER]
    # a replay's service-account class: a ServiceAccount's user and groups, bound as the load is
    assert pki.service_account is not None
    cert = x509.load_pem_x509_certificate(pki.service_account.cert.read_bytes())
    assert subject(cert, NameOID.COMMON_NAME) == [SERVICE_ACCOUNT_USER]
    assert client_class(SERVICE_ACCOUNT_USER, SERVICE_ACCOUNT_GROUPS) == "serviceaccount"
    binding = next(b for b in grants("admin") if b["metadata"]["name"] == SERVICE_ACCOUNT_BINDING)
    assert binding["roleRef"]["name"] == "cluster-admin" and binding["subjects"][0]["kind"] == "ServiceAccount"
    # a replay's user class: a user of its own in no group (not the exempt system:masters), bound as the load is
    assert pki.user is not None
    cert = x509.load_pem_x509_certificate(pki.user.cert.read_bytes())
    assert subject(cert, NameOID.COMMON_NAME) == [REPLAY_USER] and subject(cert, NameOID.ORGANIZATION_NAME) == []
    assert client_class(REPLAY_USER, ("system:authenticated",)) == "user"
    binding = next(b for b in grants("admin") if b["metadata"]["name"] == USER_BINDING)
    assert binding["roleRef"]["name"] == "cluster-admin" and binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": REPLAY_USER}]


def identities(tmp_path: Path) -> NodeIdentities:
    return NodeIdentities(server="https://127.0.0.1:6443", ca_file=str(tmp_path / "ca.crt"),
                          kubeconfig=str(tmp_path / "kubeconfig"), folder=str(tmp_path / "nodes"),
                          key_file=str(tmp_path / "nodes" / NODE_KEY), proxy_cert_file=str(tmp_path / "p.crt"),
                          proxy_key_file=str(tmp_path / "p.key"))


def test_a_node_access_is_that_nodes_certificate_and_the_shared_key(tmp_path: Path) -> None:
    found = identities(tmp_path)
    access = found.node_access("kwok-node-00007")
    assert access.cert_file == str(tmp_path / "nodes" / "kwok-node-00007.crt")
    assert access.key_file == found.key_file and access.server == found.server and access.ca_file == found.ca_file
    assert found.proxy_access().cert_file == found.proxy_cert_file
    with pytest.raises(ValueError):
        found.node_access("../p")


def test_nodes_spread_over_the_apiservers_given_each_nodes_agents_to_one(tmp_path: Path) -> None:
    servers = ("https://127.0.0.1:7001", "https://127.0.0.1:7002", "https://127.0.0.1:7003")
    spread = replace(identities(tmp_path), servers=servers)
    names = [node_name(i) for i in range(3000)]
    chosen = [spread.node_access(name).server for name in names]
    assert chosen[:4] == [*servers, servers[0]]  # node i -> the (i mod n)-th
    assert Counter(chosen) == {server: 1000 for server in servers}
    assert [spread.proxy_access(name).server for name in names] == chosen  # its kube-proxy: the same one
    assert spread.proxy_access().server == spread.server  # no node: the cluster's address
    assert spread.node_access("worker-a").server == spread.node_access("worker-a").server in servers
    assert {identities(tmp_path).node_access(name).server for name in names} == {"https://127.0.0.1:6443"}
    config = LoadConfig(access=ClusterAccess(server="https://127.0.0.1:6443", kubeconfig="k"), scenarios={},
                        nodes=3, node_identities=spread)
    assert LoadConfig.from_dict(json.loads(json.dumps(config.to_dict()))).node_identities == spread


def test_node_identities_travel_to_local_locust_processes_only(tmp_path: Path) -> None:
    config = LoadConfig(access=ClusterAccess(server="https://127.0.0.1:6443", kubeconfig="k"), scenarios={},
                        nodes=3, node_identities=identities(tmp_path))
    back = LoadConfig.from_dict(json.loads(json.dumps(config.to_dict())))
    assert back == config and back.node_identities == identities(tmp_path)
    assert "node_identities" not in config.without_access()  # workers of other machines get no credentials
    plain = LoadConfig(access=config.access, scenarios={}, nodes=3)
    assert LoadConfig.from_dict(json.loads(json.dumps(plain.to_dict()))).node_identities is None


def test_only_a_scenario_that_sends_as_the_nodes_needs_their_identities() -> None:
    assert needs_node_identities({"scenarios": {name: {} for name in NODE_IDENTITY_SCENARIOS}})
    assert not needs_node_identities({"scenarios": {"kubelet_watchers": {}}})
    assert not needs_node_identities({"kubelet_watchers": {}})
    step = StepLoad(scenarios={}, nodes=3, duration_s=1.0, out_dir=Path("."))
    assert step.all_node_names() == ["kwok-node-00000", "kwok-node-00001", "kwok-node-00002"]
    assert StepLoad(scenarios={}, nodes=3, duration_s=1.0, out_dir=Path("."),
                    node_names=("x",)).all_node_names() == ["x"]


OWN = ["kube-apiserver", "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--v=1"]


def test_a_plans_admission_plugins_join_the_harnesss() -> None:
    merged = with_extra_flags(OWN, ["--enable-admission-plugins=AlwaysPullImages,NodeRestriction", "--v=2"])
    assert merged == ["kube-apiserver", "--authorization-mode=Node,RBAC",
                      "--enable-admission-plugins=NodeRestriction,AlwaysPullImages", "--v=1", "--v=2"]
    assert [f for f in merged if f.startswith("--enable-admission-plugins")] == [merged[2]]


def test_a_plan_that_disables_node_restriction_has_it_off() -> None:
    merged = with_extra_flags(OWN, ["--disable-admission-plugins=NodeRestriction"])
    assert merged == ["kube-apiserver", "--authorization-mode=Node,RBAC", "--v=1",
                      "--disable-admission-plugins=NodeRestriction"]


def test_other_components_take_the_plans_flags_last() -> None:
    assert with_extra_flags(["etcd", "--a=1"], ["--a=2"]) == ["etcd", "--a=1", "--a=2"]
