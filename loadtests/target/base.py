"""What a target (a control plane we start, or a cluster someone else runs) gives the rest of the harness."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ClusterAccess:
    """How to reach and authenticate to a kube-apiserver; every client in the harness is built from this."""

    server: str  # https://127.0.0.1:PORT
    kubeconfig: str  # path of a kubeconfig with the same credentials (mode 0600)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure_skip_verify: bool = False

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@dataclass
class TargetInfo:
    """Everything probes need to observe a running target."""

    access: ClusterAccess
    etcd_metrics_url: str | None  # http://127.0.0.1:PORT/metrics, or None where etcd is not reachable
    versions: dict[str, str] = field(default_factory=dict)
    # component name -> pids to measure with psutil (empty for a remote cluster)
    pids: dict[str, list[int]] = field(default_factory=dict)
    kind: str = "local"


class Target(Protocol):
    """A control plane the runner can bring up, observe and bring down."""

    def up(self) -> TargetInfo: ...

    def down(self) -> None: ...
