"""How to reach and authenticate to a kube-apiserver; every client in the harness is built from this."""

from __future__ import annotations

import ssl
from dataclasses import dataclass


def unverified_context() -> ssl.SSLContext:
    """TLS without certificate checks: only for self-signed health endpoints of our own loopback components."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(frozen=True)
class ClusterAccess:
    """Server, CA and credentials of one apiserver user."""

    server: str  # https://127.0.0.1:PORT
    kubeconfig: str  # path of a kubeconfig with the same credentials (mode 0600)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None
    insecure_skip_verify: bool = False

    def ssl_context(self) -> ssl.SSLContext:
        context = unverified_context() if self.insecure_skip_verify else ssl.create_default_context(
            cafile=self.ca_file)
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}
