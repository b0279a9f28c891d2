"""Which cluster a client reaches, asked of the cluster itself (the run and each worker of another machine
must reach the same one)."""

from __future__ import annotations

from loadtests.errors import TargetError
from loadtests.kube.access import ClusterAccess
from loadtests.kube.errors import ApiError
from loadtests.kube.paths import resource_path


def cluster_identity(access: ClusterAccess, where: str = "") -> str:
    """The uid of the cluster's kube-system namespace: the same cluster answers with the same uid, whoever
    asks, and two clusters never share one."""
    from loadtests.kube.rest import RestClient  # not at import: rest is the heavier module

    where = where or access.server
    client = RestClient(access, timeout_s=15.0)
    try:
        return str(client.get(resource_path("namespaces", name="kube-system"))["metadata"]["uid"])
    except ApiError as error:
        what = f"HTTP {error.status}: {error.reason}" if error.status else error.reason
        raise TargetError(f"cannot tell which cluster {where} is (GET namespace kube-system: {what}); the "
                          "kubeconfig's user needs to read namespaces") from None
    finally:
        client.close()
