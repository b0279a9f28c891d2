"""Who a fake node's agents are to the apiserver: its kubelet as that node (CN system:node:<node>, O system:nodes,
the Node authorizer's and NodeRestriction's user) and its kube-proxy as kubeadm's kube-proxy ServiceAccount.

Paths only, so it travels to the Locust processes as JSON beside the load's own access. The certificates are
made by the target (controlplane/pki.py), which holds the cluster's CA; one folder holds them all:
`<folder>/<node>.crt` per node and `<folder>/node.key`, the one key every node's certificate is for.

A node's agents reach `server` (with several apiservers: their load balancer), or, given `servers` (the
apiservers' own addresses), each node's kubelet and kube-proxy one of them, node i the (i mod n)-th: one
apiserver holds only its share of the nodes' watches, each a socket under its own open-file limit, where a load
balancer would hold two per watch under one.
"""

from __future__ import annotations

import re
import zlib
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
# a replay's requests of the service-account class (capture/clients.py): a ServiceAccount's user of the harness's
# fleet namespace, in the groups the apiserver gives every ServiceAccount (flow control's `service-accounts`)
SERVICE_ACCOUNT_USER = "system:serviceaccount:loadtest-fleet:k8s-loadtest-replay"
SERVICE_ACCOUNT_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:loadtest-fleet")
# a replay's requests of the user class: a user of its own in no group (system:authenticated, which the apiserver
# adds, only), as people and their tools are: flow control's global-default, not the exempt system:masters
REPLAY_USER = "k8s-loadtest-replay-user"
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NODE_NUMBER = re.compile(r"(\d+)$")  # node_name(i) ends in i: kwok-node-00007


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
    servers: tuple[str, ...] = ()  # the apiservers' own addresses the nodes spread over; none: all to `server`
    # SERVICE_ACCOUNT_USER's credentials (a replay's service-account class); "": the target has none to give
    service_account_cert_file: str = ""
    service_account_key_file: str = ""
    user_cert_file: str = ""  # REPLAY_USER's (a replay's user class); "": the target has none to give
    user_key_file: str = ""

    def server_for(self, node: str | None) -> str:
        """The apiserver a node's agents reach: `server`, or with `servers` the one of the node's number (the
        digits its name ends in, as node_name(i) writes i) modulo their count, so consecutive nodes take turns;
        a name without a number by a digest of it."""
        if not self.servers or node is None:
            return self.server
        number = _NODE_NUMBER.search(node)
        return self.servers[(int(number.group(1)) if number else zlib.crc32(node.encode())) % len(self.servers)]

    def node_access(self, node: str) -> ClusterAccess:
        """The node's kubelet: its own certificate (the target issued it for this name), the shared key."""
        return ClusterAccess(server=self.server_for(node), kubeconfig=self.kubeconfig, ca_file=self.ca_file,
                             cert_file=str(node_cert_file(self.folder, node)), key_file=self.key_file)

    def proxy_access(self, node: str | None = None) -> ClusterAccess:
        """kube-proxy (every node's: they share kubeadm's ServiceAccount identity), to the apiserver of `node`."""
        return ClusterAccess(server=self.server_for(node), kubeconfig=self.kubeconfig, ca_file=self.ca_file,
                             cert_file=self.proxy_cert_file, key_file=self.proxy_key_file)

    def service_account_access(self) -> ClusterAccess | None:
        """SERVICE_ACCOUNT_USER, where the target issued it (None: the load's own identity sends instead)."""
        return self._issued(self.service_account_cert_file, self.service_account_key_file)

    def user_access(self) -> ClusterAccess | None:
        """REPLAY_USER, where the target issued it (None: the load's own identity sends instead)."""
        return self._issued(self.user_cert_file, self.user_key_file)

    def _issued(self, cert_file: str, key_file: str) -> ClusterAccess | None:
        if not cert_file:
            return None
        return ClusterAccess(server=self.server, kubeconfig=self.kubeconfig, ca_file=self.ca_file,
                             cert_file=cert_file, key_file=key_file)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeIdentities:
        return cls(**{**data, "servers": tuple(data.get("servers") or ())})
