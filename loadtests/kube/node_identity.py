"""Who a fake node's agents are to the apiserver: its kubelet as that node (CN system:node:<node>, O system:nodes,
the Node authorizer's and NodeRestriction's user) and its kube-proxy as kubeadm's kube-proxy ServiceAccount.

Paths only, so it travels to the Locust processes as JSON beside the load's own access. The certificates are
made by the target (controlplane/pki.py), which holds the cluster's CA; one folder holds them all:
`<folder>/<node>.crt` per node and `<folder>/node.key`, the one key every node's certificate is for.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadtests.kube.access import ClusterAccess

NODE_USER_PREFIX = "system:node:"  # what the Node authorizer and NodeRestriction recognise as a node
NODES_GROUP = "system:nodes"
NODE_KEY = "node.key"
# kube-proxy as kubeadm runs it: its ServiceAccount's user and groups, bound to the ClusterRole system:node-proxier
PROXY_USER = "system:serviceaccount:kube-system:kube-proxy"
PROXY_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system")
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def node_user(node: str) -> str:
    return f"{NODE_USER_PREFIX}{node}"


def node_cert_file(folder: str | Path, node: str) -> Path:
    """Where a node's certificate is; a name that is not a node's (a DNS subdomain) is refused, so no name
    reaches outside the folder."""
    if len(node) > 253 or not _NODE_NAME.fullmatch(node):
        raise ValueError(f"{node!r} is not a node name (a DNS subdomain: lowercase letters, digits, '-' and '.')")
    return Path(folder) / f"{node}.crt"


@dataclass(frozen=True)
class NodeIdentities:
    """Every fake node's kubelet credentials and the nodes' kube-proxy's, as files of one cluster."""

    server: str
    ca_file: str
    kubeconfig: str  # the load's (a ClusterAccess names one); these identities have no token for it to refresh
    folder: str  # <folder>/<node>.crt, one per node the target was asked for
    key_file: str  # <folder>/node.key: the key of every node's certificate
    proxy_cert_file: str
    proxy_key_file: str

    def node_access(self, node: str) -> ClusterAccess:
        """The node's kubelet: its own certificate (the target issued it for this name), the shared key."""
        return ClusterAccess(server=self.server, kubeconfig=self.kubeconfig, ca_file=self.ca_file,
                             cert_file=str(node_cert_file(self.folder, node)), key_file=self.key_file)

    def proxy_access(self) -> ClusterAccess:
        """kube-proxy (every node's: they share kubeadm's ServiceAccount identity)."""
        return ClusterAccess(server=self.server, kubeconfig=self.kubeconfig, ca_file=self.ca_file,
                             cert_file=self.proxy_cert_file, key_file=self.proxy_key_file)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeIdentities:
        return cls(**data)
