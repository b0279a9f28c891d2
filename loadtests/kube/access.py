"""How to reach and authenticate to a kube-apiserver; every client in the harness is built from this.

An access travels to the Locust processes as JSON, so it holds paths and names, not live objects. A token
that expires (from an exec plugin or an auth-provider) is not in it at all: `credential_context` names the
context of `kubeconfig` that each process resolves, and refreshes, for itself (loadtests.kube.credentials).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadtests.kube.credentials import refreshing_token


def unverified_context() -> ssl.SSLContext:
    """TLS without certificate checks: only for self-signed health endpoints of our own loopback components.
    No CA is loaded (nothing is verified): the system's bundle took a health check each second 10 ms to read."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _with_server_name(context: ssl.SSLContext, server_name: str) -> ssl.SSLContext:
    """The context, made to ask for and verify `server_name` whatever host the client connects to (the
    kubeconfig's tls-server-name); done on the context so that urllib3, urllib and geventhttpclient alike
    honour it."""
    wrap_socket = context.wrap_socket

    def wrap_for_server_name(sock: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["server_hostname"] = server_name
        return wrap_socket(sock, *args, **kwargs)

    context.wrap_socket = wrap_for_server_name  # type: ignore[method-assign]
    return context


@dataclass(frozen=True)
class ClusterAccess:
    """Server, CA and credentials of one apiserver user."""

    server: str  # https://127.0.0.1:PORT
    kubeconfig: str  # path of a kubeconfig with the same credentials (mode 0600)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = None  # a token that does not expire (never one of credential_context's)
    insecure_skip_verify: bool = False
    credential_context: str | None = None  # a context of `kubeconfig` whose token each process resolves
    proxy_url: str | None = None  # an HTTP(S) proxy to the server, as the kubeconfig says
    tls_server_name: str | None = None  # the name to ask for and verify in TLS instead of the server's host

    def ssl_context(self) -> ssl.SSLContext:
        context = unverified_context() if self.insecure_skip_verify else ssl.create_default_context(
            cafile=self.ca_file)
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        if self.tls_server_name and not self.insecure_skip_verify:
            _with_server_name(context, self.tls_server_name)
        return context

    def _current_token(self) -> str | None:
        if self.credential_context is None:
            return self.token
        return refreshing_token(self.kubeconfig, self.credential_context).token()

    def auth_headers(self) -> dict[str, str]:
        """The Authorization header to send now: call it per request, a refreshing token changes."""
        token = self._current_token()
        return {"Authorization": f"Bearer {token}"} if token else {}

    def rejected(self, sent_headers: Mapping[str, str]) -> bool:
        """The apiserver answered 401 to a request with these headers: obtain a new token if that one was
        the current one; whether a retry would send a different token."""
        if self.credential_context is None:
            return False
        sent = str(sent_headers.get("Authorization", "")).removeprefix("Bearer ") or None
        return refreshing_token(self.kubeconfig, self.credential_context).rejected(sent)
