"""Who a client is to flow control, asked of a real apiserver (measure/client_classes.py): the session's control
plane, and users given certificates by its own CA as the harness's classes are in a run with identities
"production" (pki.py) and as node agents and kube-proxy will be."""

from __future__ import annotations

from pathlib import Path

from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.local import LocalControlPlane
from loadtests.controlplane.pki import Authority
from loadtests.kube.access import ClusterAccess
from loadtests.kube.rest import RestClient
from loadtests.measure.client_classes import client_classes, read_flow_names


def issued(plane: LocalControlPlane, admin: ClusterAccess, stem: str, user: str, *groups: str) -> ClusterAccess:
    """An access as `user` in `groups`, its certificate signed by the plane's CA (kept in the plane's pki folder)."""
    pair = Authority.load(Path(plane.directory) / "pki").issue(stem, user, organization=groups)
    return ClusterAccess(server=admin.server, kubeconfig="", ca_file=admin.ca_file, cert_file=str(pair.cert),
                         key_file=str(pair.key))


def test_each_class_is_told_its_flow_schema_and_priority_level_by_the_apiserver(
        local_plane: LocalControlPlane, control_plane: TargetInfo) -> None:
    admin = control_plane.access
    accesses = {
        "harness": admin,
        "load": issued(local_plane, admin, "apf-load", "apf-load"),
        "node agents": issued(local_plane, admin, "apf-node", "system:node:apf-node-1", "system:nodes"),
        "kube-proxy": issued(local_plane, admin, "apf-kube-proxy", "system:serviceaccount:kube-system:kube-proxy",
                             "system:serviceaccounts", "system:serviceaccounts:kube-system"),
        "nobody": ClusterAccess(server="https://127.0.0.1:1", kubeconfig="", ca_file=admin.ca_file),
    }
    found = {c.client: c for c in client_classes(accesses, admin)}
    assert list(found) == list(accesses)  # in the order given, one a class
    harness = found["harness"]
    # system:masters is exempt, and an exempt request carries both headers too
    assert (harness.flow_schema, harness.priority_level, harness.exempt) == ("exempt", "exempt", True)
    assert "system:masters" in harness.groups and harness.note == ""
    # APF's defaults: an ordinary user in global-default, a kubelet's own requests (not its nodes and leases) in
    # system, a kube-system service account in workload-high
    load = found["load"]
    assert (load.user, load.groups) == ("apf-load", ["system:authenticated"])
    assert (load.flow_schema, load.priority_level, load.exempt) == ("global-default", "global-default", False)
    node = found["node agents"]
    assert node.user == "system:node:apf-node-1" and "system:nodes" in node.groups
    assert (node.flow_schema, node.priority_level, node.exempt) == ("system-nodes", "system", False)
    proxy = found["kube-proxy"]
    assert (proxy.flow_schema, proxy.priority_level, proxy.exempt) == (
        "kube-system-service-accounts", "workload-high", False)
    # one that cannot be asked says why, and the others are still measured
    nobody = found["nobody"]
    assert nobody.flow_schema == "" and nobody.exempt is None and "not answered" in nobody.note, nobody


def test_the_names_are_the_clusters_flow_control_objects(rest: RestClient) -> None:
    names = read_flow_names(rest)
    assert names.note == ""
    assert {"exempt", "probes", "global-default", "system-nodes", "system-node-high"} <= set(
        names.flow_schemas.values())
    assert names.exempt_levels == {"exempt"}  # the only level of type Exempt in APF's defaults
    assert {"global-default", "workload-high", "workload-low", "system", "node-high"} <= set(
        names.priority_levels.values())
