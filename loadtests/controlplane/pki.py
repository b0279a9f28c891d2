"""Certificates and keys for a local control plane: one CA, serving certs for loopback, a client cert each.

Everything is written with mode 0600 under the cluster's own folder, so nothing secret leaves it.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from loadtests.kube import kubeconfig
from loadtests.kube.node_identity import (
    NODE_KEY,
    NODES_GROUP,
    PROXY_GROUPS,
    PROXY_USER,
    REPLAY_USER,
    SERVICE_ACCOUNT_GROUPS,
    SERVICE_ACCOUNT_USER,
    node_cert_file,
    node_user,
)
from loadtests.kube.private import write_private

SERVICE_IP = "10.96.0.1"  # first address of the service range; only ever a name in a certificate
_VALIDITY = datetime.timedelta(days=30)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


class Authority:
    """A throw-away CA for one cluster; it signs server and client certificates."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k8s-loadtest-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pair = CertPair(directory / "ca.crt", directory / "ca.key")
        write_private(self.pair.cert, self.cert.public_bytes(serialization.Encoding.PEM))
        write_private(self.pair.key, _key_pem(self.key))

    @classmethod
    def load(cls, directory: Path) -> Authority:
        """The CA a cluster's certificates were made with, read back from its files, to sign more for it (the
        tenants' client certificates, made once the plan's tenants are known)."""
        found = cls.__new__(cls)
        found.directory = directory
        found.pair = CertPair(directory / "ca.crt", directory / "ca.key")
        found.cert = x509.load_pem_x509_certificate(found.pair.cert.read_bytes())
        key = serialization.load_pem_private_key(found.pair.key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{found.pair.key}: not this harness's CA key")
        found.key = key
        return found

    def sign(self, public_key: ec.EllipticCurvePublicKey, common_name: str, *,
             organization: str | tuple[str, ...] | None = None, server_names: tuple[str, ...] = (),
             client: bool = True) -> x509.Certificate:
        """A certificate for `public_key`: CN the user, organization its groups (one or several); server_names
        (DNS names or IPs) make it a serving certificate too."""
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        groups = (organization,) if isinstance(organization, str) else organization or ()
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups if group]
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes)).issuer_name(self.cert.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            alt: list[x509.GeneralName] = []
            for entry in server_names:
                try:
                    alt.append(x509.IPAddress(ipaddress.ip_address(entry)))
                except ValueError:
                    alt.append(x509.DNSName(entry))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        return builder.sign(self.key, hashes.SHA256())

    def issue(self, stem: str, common_name: str, *, organization: str | tuple[str, ...] | None = None,
              server_names: tuple[str, ...] = (), client: bool = True) -> CertPair:
        """A new key and its certificate (see sign), written as <stem>.crt and <stem>.key (mode 0600)."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self.sign(key.public_key(), common_name, organization=organization, server_names=server_names,
                         client=client)
        pair = CertPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        write_private(pair.cert, cert.public_bytes(serialization.Encoding.PEM))
        write_private(pair.key, _key_pem(key))
        return pair


@dataclass(frozen=True)
class ClusterPki:
    ca: CertPair
    apiserver: CertPair
    etcd_server: CertPair
    apiserver_etcd_client: CertPair
    admin: CertPair
    scheduler: CertPair
    controller_manager: CertPair
    kwok: CertPair
    service_account_key: Path
    service_account_pub: Path
    load: CertPair | None = None  # the load's own user (identities "production"), else the load is the admin
    # the load balancer's health checks of each apiserver's /readyz (an authenticated user, no other rights)
    health_checker: CertPair | None = None
    kube_proxy: CertPair | None = None  # every node's kube-proxy (PROXY_USER), bound to system:node-proxier
    service_account: CertPair | None = None  # a replay's service-account class (SERVICE_ACCOUNT_USER)
    user: CertPair | None = None  # a replay's user class (REPLAY_USER)


# Who the harness's clients are to the apiserver. "admin": kwok and the load in system:masters, which API
# Priority and Fairness exempts (nothing of theirs queues or is rejected). "production": as in a real cluster:
# kwok (and nodes that join) in the kubelets' group system:nodes, which flow control sends to the node-high and
# system priority levels, and the load as an ordinary user (global-default); both granted their rights by an
# RBAC binding rather than by their group (plan.IDENTITIES).
KWOK_USER = "kwok-controller"
LOAD_USER = "loadtest-load"
HEALTH_CHECK_USER = "k8s-loadtest-health-checker"
PROXY_STEM = "kube-proxy"  # kube_proxy's files in the pki folder
SERVICE_ACCOUNT_STEM = "replay-serviceaccount"  # service_account's files in the pki folder
USER_STEM = "replay-user"  # user's files in the pki folder
NODES_FOLDER = "nodes"  # the node certificates' folder in the pki folder


def create_cluster_pki(directory: Path, identities: str = "admin") -> ClusterPki:
    """Every certificate a local control plane needs, all valid for loopback only."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca = Authority(directory)
    loopback = ("127.0.0.1", "localhost")
    apiserver_names = (*loopback, SERVICE_IP, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                       "kubernetes.default.svc.cluster.local")
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key_path, sa_pub_path = directory / "sa.key", directory / "sa.pub"
    write_private(sa_key_path, _key_pem(sa_key))
    write_private(sa_pub_path, sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return ClusterPki(
        ca=ca.pair,
        apiserver=ca.issue("apiserver", "kube-apiserver", server_names=apiserver_names, client=False),
        etcd_server=ca.issue("etcd-server", "etcd", server_names=loopback),
        apiserver_etcd_client=ca.issue("apiserver-etcd-client", "kube-apiserver-etcd-client"),
        admin=ca.issue("admin", "kubernetes-admin", organization="system:masters"),
        scheduler=ca.issue("scheduler", "system:kube-scheduler"),
        controller_manager=ca.issue("controller-manager", "system:kube-controller-manager"),
        # kwok acts for every fake kubelet at once (node status, leases, pod status): it needs broad rights
        kwok=ca.issue("kwok", KWOK_USER, server_names=loopback,
                      organization="system:nodes" if identities == "production" else "system:masters"),
        service_account_key=sa_key_path,
        service_account_pub=sa_pub_path,
        load=ca.issue("load", LOAD_USER) if identities == "production" else None,
        health_checker=ca.issue("health-checker", HEALTH_CHECK_USER),
        kube_proxy=ca.issue(PROXY_STEM, PROXY_USER, organization=PROXY_GROUPS),
        service_account=ca.issue(SERVICE_ACCOUNT_STEM, SERVICE_ACCOUNT_USER, organization=SERVICE_ACCOUNT_GROUPS),
        user=ca.issue(USER_STEM, REPLAY_USER),
    )


def node_key(folder: Path) -> ec.EllipticCurvePrivateKey:
    """The one key of every node certificate in `folder`, made the first time (mode 0600, the folder 0700).

    A real node has a key of its own; one shared key is what makes thousands of node identities cheap, and the
    apiserver cannot tell: it checks only that a client certificate chains to its CA and that the client holds
    the key in the TLS handshake, then takes the user from the certificate's subject."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / NODE_KEY
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{path}: not this harness's node key")
        return key
    key = ec.generate_private_key(ec.SECP256R1())
    write_private(path, _key_pem(key))
    return key


def issue_node_certificates(pki_dir: Path, folder: Path, names: Iterable[str]) -> int:
    """A client certificate per node not yet in `folder` (<node>.crt: CN system:node:<node>, O system:nodes,
    signed by the CA in `pki_dir`, for the folder's shared key); those already there are kept, so the steps of
    a growing run issue only their new nodes'. Returns how many were issued."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    present = {entry.name for entry in os.scandir(folder)}
    missing = [name for name in dict.fromkeys(names) if node_cert_file(folder, name).name not in present]
    if not missing:
        return 0
    authority = Authority.load(pki_dir)
    public_key = node_key(folder).public_key()
    for name in missing:
        cert = authority.sign(public_key, node_user(name), organization=NODES_GROUP)
        write_private(node_cert_file(folder, name), cert.public_bytes(serialization.Encoding.PEM))
    return len(missing)


def write_kubeconfig(path: Path, server: str, ca: Path, client: CertPair, user: str) -> Path:
    """A kubeconfig for one component's client certificate (files, so it holds no key itself), mode 0600."""
    return kubeconfig.write_kubeconfig(path, server, user=user, ca=ca, client_cert=client.cert,
                                       client_key=client.key)
