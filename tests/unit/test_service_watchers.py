"""Pod ranges of the fake nodes, the Service the harness makes, and the service_watchers scenario's sizing,
selectors and received-bytes figures, without a control plane."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from loadtests.config import plan as plan_module
from loadtests.config.scenarios import (
    RECEIVED,
    SERVICE_WATCH_RESOURCES,
    ServiceWatch,
    achieved_rates,
    demands,
    scenario_params,
    user_plan,
)
from loadtests.controlplane.kwok import POD_CIDR
from loadtests.controlplane.local import SERVICE_CIDR
from loadtests.errors import PlanError
from loadtests.kube import objects
from loadtests.kube.watch import WatchDecoder
from loadtests.load.generator import read_stats_csv
from loadtests.results.loadgen import ClientStat


def service_params(**params: object) -> dict:
    return scenario_params({"service_watchers": params})["service_watchers"]


class TestNodePodRanges:
    def test_one_24_per_node_by_index(self) -> None:
        assert objects.node_pod_cidr(0) == "10.128.0.0/24"
        assert objects.node_pod_cidr(1) == "10.128.1.0/24"
        assert objects.node_pod_cidr(256) == "10.129.0.0/24"
        assert objects.node_pod_cidr(32767) == "10.255.255.0/24"

    def test_ranges_are_disjoint_and_clear_of_kwok_s_and_the_services(self) -> None:
        ranges = [ipaddress.ip_network(objects.node_pod_cidr(i)) for i in range(0, 32768, 7)]
        assert len({r.network_address for r in ranges}) == len(ranges)
        assert all(r.prefixlen == 24 and r.subnet_of(ipaddress.ip_network("10.0.0.0/8")) for r in ranges)
        kwok_default = ipaddress.ip_network(POD_CIDR, strict=False)
        services = ipaddress.ip_network(SERVICE_CIDR)
        assert not objects.NODE_POD_CIDRS.overlaps(kwok_default)
        assert not objects.NODE_POD_CIDRS.overlaps(services)

    @pytest.mark.parametrize("index", [-1, 32768])
    def test_beyond_the_ranges_is_refused(self, index: int) -> None:
        with pytest.raises(ValueError, match="outside"):
            objects.node_pod_cidr(index)

    def test_node_manifest_names_its_range_in_both_fields(self) -> None:
        spec = objects.node_manifest(objects.node_name(3), 3)["spec"]
        assert spec["podCIDR"] == "10.128.3.0/24" and spec["podCIDRs"] == ["10.128.3.0/24"]
        assert spec["taints"]  # the template's own spec is kept
        assert "podCIDR" not in objects.node_manifest("n")["spec"]


class TestService:
    def test_selects_every_harness_pod(self) -> None:
        service = objects.service_manifest("loadtest-backends", objects.NS_CHURN)
        selector = service["spec"]["selector"]
        fleet = objects.deployment_manifest("fleet", objects.NS_FLEET, 1)["spec"]["template"]["metadata"]["labels"]
        churn = objects.pod_manifest("p", objects.NS_CHURN, labels={"k8s-loadtest/scenario": "pod-churn"})
        for labels in (fleet, churn["metadata"]["labels"]):
            assert selector.items() <= labels.items()
        assert service["metadata"]["labels"] == objects.MANAGED_BY  # cleaned up with the harness's objects
        assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == objects.SERVICE_PORT


class TestScenario:
    def test_defaults(self) -> None:
        params = service_params()
        assert params == {"per_node": 1.0, "max_watchers": 2000, "resource": "endpointslices",
                          "service": "loadtest-backends", "namespace": objects.NS_CHURN}

    def test_one_watcher_per_node_capped(self) -> None:
        assert user_plan({"service_watchers": {}}, 50).by_class == {"ServiceWatcher": 50}
        assert user_plan({"service_watchers": {"per_node": 2.0, "max_watchers": 30}}, 50).by_class == {
            "ServiceWatcher": 30}
        assert user_plan({"service_watchers": {"per_node": 0.0}}, 50).by_class == {"ServiceWatcher": 0}
        demand = demands({"service_watchers": {"per_node": 0.5}}, 10)["service_watchers"]
        assert demand.asked == 5 and demand.per_second is False and demand.unit == "watches"

    def test_endpoints_are_watched_by_name_slices_by_label(self) -> None:
        endpoints = ServiceWatch.of(service_params(resource="endpoints", service="web"))
        assert (endpoints.resource, endpoints.field_selector, endpoints.label_selector) == (
            "endpoints", "metadata.name=web", "")
        slices = ServiceWatch.of(service_params(service="web", namespace=objects.NS_FLEET))
        assert (slices.resource, slices.field_selector, slices.label_selector) == (
            "endpointslices", "", "kubernetes.io/service-name=web")
        assert slices.namespace == objects.NS_FLEET
        assert slices.names.initial_list is not None  # LIST then WATCH, like kube-proxy's informers
        assert endpoints.received != slices.received

    def test_achieved_counts_watches_events_and_bytes(self) -> None:
        load = {"service_watchers": {"resource": "endpoints"}}
        watch = ServiceWatch.of(service_params(resource="endpoints"))

        def row(type_: str, name: str, count: int, content_bytes: int | None = None) -> ClientStat:
            return ClientStat(type_, name, count, 0, 0.0, None, None, None, None, content_bytes=content_bytes)

        client = [row("WATCH", watch.names.first, 10), row(RECEIVED, watch.received, 700, 1_750_000),
                  row(RECEIVED, "WATCH endpointslices (service, ns) events", 5, 99)]
        (rate,) = achieved_rates(load, 10, 20.0, client)
        assert (rate.achieved_per_s, rate.events, rate.received_bytes) == (10.0, 700, 1_750_000)
        (none_yet,) = achieved_rates(load, 10, 20.0, client[:1])
        assert (none_yet.events, none_yet.received_bytes) == (0, 0)
        (other,) = achieved_rates({"kubelet_watchers": {}}, 10, 20.0, client)
        assert other.events is None and other.received_bytes is None  # only watchers that count them

    def test_plan_refuses_other_resources_and_namespaces(self) -> None:
        assert {"endpoints", "endpointslices"} == SERVICE_WATCH_RESOURCES
        ok = plan_module.parse({"steps": [{"nodes": 5}], "load": {"scenarios": {"service_watchers": {
            "resource": "endpoints"}}}})
        assert ok.load["service_watchers"]["resource"] == "endpoints"
        for key, value in (("resource", "pods"), ("namespace", "default")):
            with pytest.raises(PlanError, match=f"service_watchers.{key}"):
                plan_module.parse({"steps": [{"nodes": 5}], "load": {"scenarios": {"service_watchers": {
                    key: value}}}})


class TestReceivedBytes:
    def test_event_sizes_add_up_to_the_body(self) -> None:
        body = (b'{"type":"ADDED","object":{"metadata":{"resourceVersion":"1"}}}\n'
                b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"2"}}}\n'
                b'{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"3"}}}')
        decoder = WatchDecoder()
        events = decoder.feed(body[:30], 0.0) + decoder.feed(body[30:], 0.0) + decoder.finish(0.0)
        assert [e.type for e in events] == ["ADDED", "BOOKMARK", "MODIFIED"]
        assert sum(e.size for e in events) == len(body)

    def test_stats_rows_carry_their_bytes(self, tmp_path: Path) -> None:
        path = tmp_path / "stats.csv"
        path.write_text("Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,"
                        "Min Response Time,Max Response Time,Average Content Size,Requests/s,Failures/s,50%,90%,"
                        "99%\n"
                        f'{RECEIVED},"WATCH endpoints (service, ns) events",3,0,0,0,0,0,1000.333333333,0.1,0,0,0,0\n'
                        'WATCH,"WATCH endpoints (service, ns)",2,0,5,5,5,5,0,0.1,0,5,5,5\n'
                        ",Aggregated,5,0,0,2,0,5,600.2,0.2,0,0,5,5\n")
        client, total = read_stats_csv(path)
        assert [c.content_bytes for c in client] == [3001, 0]
        assert total is not None and total.content_bytes == 3001
