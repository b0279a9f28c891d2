"""The load's TLS contexts: one per identity in a Locust process, whoever asks (every node's kube-proxy is one
client; each kubelet is its own node), built once, when a connection first needs it."""

from __future__ import annotations

import ssl

from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import NodeIdentities
from loadtests.load.locust.transport import ssl_contexts

IDENTITIES = NodeIdentities(server="https://127.0.0.1:6443", ca_file="/pki/ca.crt", kubeconfig="/pki/kubeconfig",
                            folder="/pki/nodes", key_file="/pki/nodes/node.key",
                            proxy_cert_file="/pki/kube-proxy.crt", proxy_key_file="/pki/kube-proxy.key")


def test_one_context_factory_per_identity() -> None:
    assert ssl_contexts(IDENTITIES.proxy_access()) is ssl_contexts(IDENTITIES.proxy_access())
    assert ssl_contexts(IDENTITIES.node_access("node-1")) is ssl_contexts(IDENTITIES.node_access("node-1"))
    assert ssl_contexts(IDENTITIES.node_access("node-1")) is not ssl_contexts(IDENTITIES.node_access("node-2"))
    assert ssl_contexts(IDENTITIES.node_access("node-1")) is not ssl_contexts(IDENTITIES.proxy_access())


def test_the_context_is_built_once_and_ignores_the_default_bundle() -> None:
    factory = ssl_contexts(ClusterAccess(server="https://127.0.0.1:6443", kubeconfig="/nowhere"))
    context = factory(cafile="/geventhttpclient/default/bundle.pem")  # a missing file: never read
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
    assert factory() is context
