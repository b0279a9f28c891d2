"""The local control plane is real: nodes become Ready, pods run on them, leases renew, etcd reports its size."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.processes import port_is_free, wait_for
from loadtests.kube import objects
from loadtests.kube.rest import RestClient
from loadtests.run.fleet import Fleet
from tests.checks import assert_nothing_left


def test_every_component_listens_on_loopback_only(local_plane) -> None:
    import psutil

    pids = {p.pid for p in local_plane.state.processes}
    addresses = {c.laddr.ip for c in psutil.net_connections("tcp") if c.pid in pids and c.status == "LISTEN"}
    assert addresses, "no listening sockets found for the control plane"
    assert addresses <= {"127.0.0.1"}, addresses


def test_kubeconfig_is_private_and_authenticated(control_plane: TargetInfo) -> None:
    import os
    import ssl
    import urllib.error

    assert os.stat(control_plane.access.kubeconfig).st_mode & 0o777 == 0o600
    anonymous = ssl.create_default_context(cafile=control_plane.access.ca_file)
    try:
        urllib.request.urlopen(f"{control_plane.access.server}/api/v1/nodes", context=anonymous, timeout=5)
        raise AssertionError("the apiserver answered an unauthenticated request")
    except urllib.error.HTTPError as error:
        assert error.code == 401


def test_200_nodes_ready_and_100_pods_running(rest: RestClient) -> None:
    fleet = Fleet(rest)
    fleet.ensure_namespaces()
    ramp = fleet.scale_nodes(200, timeout_s=120)
    assert ramp.nodes == 200
    nodes = rest.list_items("nodes", label_selector=objects.NODE_SELECTOR)
    ready = [n for n in nodes if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]
    assert len(ready) == 200

    fleet.scale_pods(100, timeout_s=120)
    pods = rest.list_items("pods", objects.NS_FLEET)
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert len(running) == 100
    assert all(p["spec"]["nodeName"].startswith(objects.NODE_PREFIX) for p in running)


def test_node_lease_renew_time_advances(rest: RestClient) -> None:
    Fleet(rest).scale_nodes(max(1, _kwok_node_count(rest)), timeout_s=60)
    path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{objects.node_name(0)}"
    wait_for(lambda: bool(rest.request("GET", path, ok=(404,))), 30, "lease of the first node exists")
    first = rest.get(path)["spec"]["renewTime"]
    wait_for(lambda: rest.get(path)["spec"]["renewTime"] != first, 40, "lease renewTime advances")


def _kwok_node_count(rest: RestClient) -> int:
    nodes = rest.list_items("nodes", label_selector=objects.NODE_SELECTOR)
    return len(nodes)


def test_etcd_reports_its_database_size(control_plane: TargetInfo) -> None:
    assert control_plane.etcd_metrics_url
    with urllib.request.urlopen(control_plane.etcd_metrics_url, timeout=5) as response:
        text = response.read().decode()
    sizes = [s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == "etcd_mvcc_db_total_size_in_bytes"]
    assert sizes and sizes[0] > 0


def test_down_stops_every_process_and_frees_every_port(bins, tmp_path) -> None:
    from loadtests.controlplane.local import LocalControlPlane, LocalOptions

    plane = LocalControlPlane(LocalOptions(name="down-check", directory=tmp_path / "c"), bins)
    plane.up(log=lambda _m: None)
    state = plane.state
    records = list(state.processes)
    ports = list(state.ports.values())
    assert len(records) == 5 and all(r.alive() for r in records)
    started = time.monotonic()
    plane.down()
    assert_nothing_left(records)
    assert [p for p in ports if not port_is_free(p)] == []
    assert time.monotonic() - started < 60
