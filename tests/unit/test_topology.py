"""A highly available control plane's pieces that need no process: the plan field, instance names and ports,
HAProxy's configuration, and several apiservers' /metrics read as one page."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.analysis.metrics import Snapshot, counter_delta, histogram_delta, merge_pages
from loadtests.analysis.server import storage_objects
from loadtests.config import plan as plan_mod
from loadtests.config.topology import Topology, component_of, instance_name
from loadtests.controlplane import haproxy
from loadtests.controlplane.local import port_names
from loadtests.controlplane.pki import CertPair
from loadtests.errors import PlanError

PAGE = """# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{{code="200",verb="GET"}} {requests}
# HELP apiserver_request_duration_seconds Response latency.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{{verb="GET",le="0.1"}} {fast}
apiserver_request_duration_seconds_bucket{{verb="GET",le="1"}} {requests}
apiserver_request_duration_seconds_bucket{{verb="GET",le="+Inf"}} {requests}
apiserver_request_duration_seconds_sum{{verb="GET"}} 1
apiserver_request_duration_seconds_count{{verb="GET"}} {requests}
# HELP apiserver_storage_objects Number of stored objects.
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{{resource="pods"}} 30
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes {memory}
"""


def page(requests: int, fast: int, memory: int) -> str:
    return PAGE.format(requests=requests, fast=fast, memory=memory)


def test_the_plan_field_and_its_refusals() -> None:
    plan = plan_mod.parse({"steps": [{"nodes": 5}], "target": {"topology": {"etcd_members": 3, "apiservers": 2}}})
    assert plan.target.topology == Topology(etcd_members=3, apiservers=2) and plan.target.topology.load_balanced
    assert "topology" in plan.to_dict()["target"]
    assert "topology" not in plan_mod.load("smoke").to_dict()["target"]  # a single-node plan reads as before
    for field, value, words in (("etcd_members", 2, "must be 1 or 3"),
                                ("apiservers", 4, "must be a whole number from 1 to 3"),
                                ("schedulers", 0, "must be a whole number from 1 to 2"),
                                ("controller_managers", True, "must be a whole number from 1 to 2")):
        with pytest.raises(PlanError, match=f"target.topology.{field}: {words}"):
            plan_mod.parse({"steps": [{"nodes": 5}], "target": {"topology": {field: value}}})
    with pytest.raises(PlanError, match="target.topology: only a local control plane"):
        plan_mod.parse({"steps": [{"nodes": 5}], "target": {"kind": "cluster", "kubeconfig": "k",
                                                              "topology": {"apiservers": 2}}})


def test_instances_keep_the_single_names_first_and_each_has_its_ports() -> None:
    topology = Topology(etcd_members=3, apiservers=2, schedulers=2, controller_managers=2)
    assert topology.instances("etcd") == ["etcd", "etcd-2", "etcd-3"]
    assert topology.instances("kube-apiserver") == ["kube-apiserver", "kube-apiserver-2"]
    assert instance_name("kube-scheduler", 1) == "kube-scheduler-2"
    assert component_of("kube-controller-manager-2") == "kube-controller-manager"
    assert component_of("events-etcd") == "events-etcd" and component_of("kube-apiserver") == "kube-apiserver"
    single = port_names(Topology())
    assert single == ["etcd", "etcd_peer", "etcd_metrics", "apiserver", "scheduler", "controller_manager", "kwok"]
    ha = port_names(topology, ("events", "leases"))
    assert len(ha) == len(set(ha))
    assert {"etcd_3_peer", "events_etcd", "leases_etcd", "leases_etcd_metrics", "apiserver", "apiserver_1",
            "apiserver_2", "haproxy_health", "scheduler_2", "controller_manager_2"} <= set(ha)


def test_haproxy_checks_each_apiserver_s_readyz_with_a_client_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    cert.write_text("CERT\n")
    key.write_text("KEY\n")
    config = haproxy.write_config(tmp_path / "haproxy.cfg", 6443, 8404,
                                  {"kube-apiserver": 7001, "kube-apiserver-2": 7002}, tmp_path / "ca.crt",
                                  CertPair(cert, key), tmp_path / "haproxy.sock").read_text()
    assert "bind 127.0.0.1:6443" in config and "bind 127.0.0.1:8404" in config and "0.0.0.0" not in config
    assert "server kube-apiserver 127.0.0.1:7001" in config and "server kube-apiserver-2 127.0.0.1:7002" in config
    assert "http-check send meth GET uri /readyz" in config and "verify required" in config
    assert "mode tcp" in config  # the clients' TLS goes through: the apiserver sees their certificates
    pem = tmp_path / "haproxy-health-checker.pem"
    assert pem.read_text() == "CERT\nKEY\n" and pem.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "haproxy.cfg").stat().st_mode & 0o777 == 0o600
    assert haproxy.max_connections() >= 1000


def test_several_apiservers_pages_read_as_one() -> None:
    start = Snapshot.parse(merge_pages({"kube-apiserver": page(10, 5, 100), "kube-apiserver-2": page(4, 4, 50)}))
    end = Snapshot.parse(merge_pages({"kube-apiserver": page(30, 20, 110), "kube-apiserver-2": page(14, 9, 70)}))
    assert counter_delta(start, end, "apiserver_request_total") == 20 + 10  # each one's requests, summed
    merged = histogram_delta(start, end, "apiserver_request_duration_seconds")
    assert merged is not None and merged.count == 30  # buckets summed across the instances
    assert end.total("process_resident_memory_bytes") == 180  # the cluster's apiservers together
    assert end.shared_total("apiserver_storage_objects") == 30  # one etcd's objects, not counted twice
    assert storage_objects(end) == {"pods": 30}
    text = merge_pages({"kube-apiserver": page(1, 1, 1), "kube-apiserver-2": page(1, 1, 1)})
    assert text.count("# TYPE apiserver_request_total counter") == 1
    assert 'apiserver_request_total{instance="kube-apiserver-2",code="200",verb="GET"} 1' in text
    assert 'process_resident_memory_bytes{instance="kube-apiserver"} 1' in text
    one = Snapshot.parse(page(10, 5, 100))
    assert one.shared_total("apiserver_storage_objects") == one.total("apiserver_storage_objects") == 30


ETCD_PAGE = """# TYPE etcd_mvcc_db_total_size_in_bytes gauge
etcd_mvcc_db_total_size_in_bytes {size}
# TYPE etcd_server_is_leader gauge
etcd_server_is_leader {leader}
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.001"}} {fast}
etcd_disk_wal_fsync_duration_seconds_bucket{{le="0.008"}} {count}
etcd_disk_wal_fsync_duration_seconds_bucket{{le="+Inf"}} {count}
etcd_disk_wal_fsync_duration_seconds_sum 0.1
etcd_disk_wal_fsync_duration_seconds_count {count}
"""


def test_each_etcd_member_has_its_figures_and_the_cluster_counts_its_database_once(tmp_path: Path) -> None:
    from loadtests.analysis.etcd import etcd_stats
    from loadtests.report.html import write_report
    from tests.unit.reportdata import SAMPLE, edited_run

    def pages(fsyncs: int) -> Snapshot:
        return Snapshot.parse(merge_pages({
            "etcd": ETCD_PAGE.format(size=4096, leader=1, fast=fsyncs, count=fsyncs),
            "etcd-2": ETCD_PAGE.format(size=4000, leader=0, fast=0, count=fsyncs),
            "etcd-3": ETCD_PAGE.format(size=4096, leader=0, fast=0, count=fsyncs)}))

    stats = etcd_stats(pages(100), pages(300))
    assert stats.db_size_bytes == 4096  # one database, held by each member, not three
    assert [(n, m.leader) for n, m in stats.members.items()] == [("etcd", True), ("etcd-2", False),
                                                                ("etcd-3", False)]
    assert stats.members["etcd"].bounds == {"wal_fsync_p99_s": "<"}  # its 200 fsyncs all under 1 ms
    assert stats.members["etcd-2"].wal_fsync_p99_s is not None and not stats.members["etcd-2"].bounds
    single = etcd_stats(Snapshot.parse(ETCD_PAGE.format(size=1, leader=1, fast=1, count=1)),
                        Snapshot.parse(ETCD_PAGE.format(size=2, leader=1, fast=2, count=2)))
    assert single.members == {} and single.db_size_bytes == 2  # one member: the figures as before

    def edit(data: dict) -> None:
        data["steps"][0]["etcd"]["members"] = {"etcd": {"leader": True, "db_size_bytes": 4096},
                                               "etcd-2": {"leader": False}}

    html = write_report(edited_run(SAMPLE, tmp_path / "run", edit)).read_text(encoding="utf-8")
    assert html.count("<h3>etcd members</h3>") == 1
    assert "<td>etcd</td><td>leader</td>" in html and "<td>etcd-2</td><td>follower</td>" in html
