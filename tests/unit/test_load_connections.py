"""What a Locust process holds per watch and per user, kept to what a watch needs: TLS contexts one per identity
(every node's kube-proxy is one client; each kubelet is its own node), built once, when a connection first needs
it; one jitter generator for every watcher."""

from __future__ import annotations

import random
import ssl

from loadtests.kube.access import ClusterAccess
from loadtests.kube.names import WatchNames
from loadtests.kube.node_identity import NodeIdentities
from loadtests.kube.reflector import SHARED_RNG, Backoff, Reflector
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


def test_every_watcher_of_a_process_draws_its_jitter_from_one_generator() -> None:
    """A generator's state is 2.5 KiB: a Locust process holding tens of thousands of reflectors keeps one."""
    names = WatchNames.of("pods", "")
    first, second = Reflector(object(), "pods", names), Reflector(object(), "nodes", names)  # type: ignore[arg-type]
    assert first._rng is second._rng is Backoff.client_go()._rng is SHARED_RNG
    own = random.Random(7)
    assert Reflector(object(), "pods", names, rng=own)._rng is own  # type: ignore[arg-type]
