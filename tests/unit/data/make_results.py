"""Regenerate the recorded-results fixtures: `python tests/unit/data/make_results.py`.

The numbers follow what a local control plane shows at 100, 500 and 1,000 fake nodes with 10 pods each, pod
churn at 5/s, kubelet-like watchers and LIST pollers. They are built with the results dataclasses and written
with results.save, so the fixtures always match the schema the report reads.
"""

from __future__ import annotations

from pathlib import Path

from loadtests.config.plan import DEFAULT_SLO
from loadtests.results import RunResult, StepResult, save
from loadtests.results.apiserver import ServerLatency
from loadtests.results.distribution import Distribution
from loadtests.results.etcd import EtcdStats
from loadtests.results.loadgen import ClientStat, RateResult
from loadtests.results.processes import ProcessStat

HERE = Path(__file__).parent
MIB = 2**20

PLAN = {
    "name": "default",
    "target": {"kind": "local", "kube_version": "v1.37.2", "heartbeat_factor": 1.0, "events_etcd": False,
               "kubeconfig": None, "context": None},
    "steps": [{"nodes": n, "pods_per_node": 10, "warmup_s": 30.0, "duration_s": 120.0, "name": f"{n} nodes"}
              for n in (100, 500, 1000)],
    "load": {
        "pod_churn": {"rate": 5.0, "lifetime_s": 10.0, "users": 2, "deployment_scale_every_s": 30.0,
                      "deployment_min": 0, "deployment_max": 10},
        "kubelet_watchers": {"per_node": 1.0, "max_watchers": 2000},
        "informers": {"count": 4, "resource": "pods", "namespace": ""},
        "list_pollers": {"rate": 1.0, "users": 2, "resource": "pods", "resource_version": "0", "namespace": "",
                         "limit": 500},
    },
    "slo": {**DEFAULT_SLO, "min_samples": 5},
    "gate": True,
    "workers": 0,
}

ENVIRONMENT = {
    "versions": {"kubernetes": "v1.37.2", "etcd": "v3.6.16", "kwok": "v0.8.0", "locust": "2.47.0",
                 "python": "3.11.2"},
    "target": {"kind": "local", "server": "https://127.0.0.1:36443"},
    "machine": {"cpus": 8, "memory_bytes": 33_546_305_536, "platform": "Linux-6.1.0-27-amd64-x86_64-with-glibc2.36"},
}

# per step: nodes, how much slower than at 100 nodes, and the minute it started
SCALES = ((100, 1.0, "10:02"), (500, 1.7, "10:07"), (1000, 2.9, "10:14"))


def server(nodes: int, f: float) -> list[ServerLatency]:
    pods = nodes * 10

    def entry(verb: str, resource: str, scope: str, count: int, p50: float, p90: float, p99: float,
              subresource: str = "", group: str = "") -> ServerLatency:
        return ServerLatency(verb=verb, resource=resource, scope=scope, subresource=subresource, group=group,
                             count=count, p50=round(p50, 4), p90=round(p90, 4), p99=round(p99, 4))

    list_f = f * f  # a full LIST grows with the number of objects
    return [
        entry("POST", "pods", "namespace", 600 + pods // 10, 0.006 * f, 0.014 * f, 0.041 * f),
        entry("DELETE", "pods", "namespace", 598, 0.005 * f, 0.012 * f, 0.036 * f),
        entry("PATCH", "pods", "namespace", 1_250 + pods // 5, 0.004 * f, 0.010 * f, 0.029 * f, subresource="status"),
        entry("POST", "pods", "namespace", 600 + pods // 10, 0.003 * f, 0.008 * f, 0.024 * f, subresource="binding"),
        entry("PUT", "leases", "namespace", nodes * 12, 0.003 * f, 0.007 * f, 0.019 * f, group="coordination.k8s.io"),
        entry("PATCH", "nodes", "cluster", nodes * 2, 0.004 * f, 0.011 * f, 0.033 * f, subresource="status"),
        entry("PUT", "deployments", "namespace", 4, 0.005, 0.011, 0.012, subresource="scale", group="apps"),
        entry("GET", "pods", "resource", 310, 0.0012 * f, 0.0031 * f, 0.0094 * f),
        entry("GET", "configmaps", "resource", 3, 0.001, 0.002, 0.002),
        entry("LIST", "pods", "cluster", 240, 0.021 * list_f, 0.048 * list_f, 0.071 * list_f),
        entry("LIST", "pods", "namespace", 36, 0.004 * f, 0.009 * f, 0.015 * f),
        entry("LIST", "nodes", "cluster", 8, 0.006 * list_f, 0.013 * list_f, 0.021 * list_f),
        entry("WATCH", "pods", "cluster", min(nodes, 2000) + 4, 60.0, 60.0, 60.0),
    ]


def client(f: float) -> list[ClientStat]:
    def stat(kind: str, name: str, count: int, p50: float, p90: float, p99: float, failures: int = 0) -> ClientStat:
        return ClientStat(type=kind, name=name, count=count, failures=failures, rps=round(count / 120, 2),
                          p50_ms=round(p50 * f), p90_ms=round(p90 * f), p99_ms=round(p99 * f),
                          max_ms=round(p99 * f * 1.6), avg_ms=round(p50 * f * 1.2, 1))

    return [
        stat("POST", "pods", 600, 9, 21, 56),
        stat("DELETE", "pods", 598, 8, 18, 48),
        stat("PATCH", "deployments/scale", 4, 11, 17, 17),
        stat("LIST", "pods (rv=0, limit 500)", 240, 31 * f, 70 * f, 110 * f),
        stat("LIST", "pods (informer)", 4, 40 * f, 90 * f, 90 * f),
    ]


def step(index: int, nodes: int, f: float, minute: str) -> StepResult:
    pods = nodes * 10
    cpu = {"etcd": 8 * f, "kube-apiserver": 26 * f * f / 1.3, "kube-scheduler": 3 * f, "kube-controller-manager": 4 * f,
           "kwok": 12 * f * 1.5, "loadgen": min(93.4, 34 * f)}
    rss = {"etcd": 60 * f, "kube-apiserver": 420 * f * 1.4, "kube-scheduler": 60 * f, "kube-controller-manager": 80 * f,
           "kwok": 70 * f * 1.5, "loadgen": 95 + 10 * f}
    processes = [
        ProcessStat(component=name, cpu_percent=round(cpu[name], 1), cpu_seconds=round(cpu[name] * 1.2, 1),
                    rss_max_bytes=int(rss[name] * MIB), rss_end_bytes=int(rss[name] * 0.93 * MIB),
                    pids=[4100 + i])
        for i, name in enumerate(cpu)
    ]
    return StepResult(
        index=index, name=f"{nodes} nodes", nodes=nodes, pods_per_node=10,
        started_at=f"2025-11-28T{minute}:05.120+00:00", duration_s=120.0,
        ramp={"nodes_ready_s": round(0.045 * nodes + 1.7, 1), "pods_running_s": round(0.095 * nodes + 1.9, 1)},
        client=client(f),
        rates=[
            RateResult("pod_churn", 5.0, round(5.0 - 0.35 * (f - 1), 2), "pods"),
            RateResult("list_pollers", 1.0, round(1.0 - 0.01 * (f - 1), 2)),
            RateResult("kubelet_watchers", None, round(1.1 * nodes, 1), "watch events"),
            RateResult("informers", None, round(11.5 * f, 1), "watch events"),
        ],
        server=server(nodes, f),
        requests_by_code={"200": 18_000 + nodes * 40, "201": 1_250 + pods // 5, "404": 3, "409": 2,
                          **({"429": 12} if nodes >= 1000 else {})},
        apiserver={"watchers": float(min(nodes, 2000) + 4), "registered_watchers": float(min(nodes, 2000) + 90),
                   "watch_events": float(nodes * 140), "flowcontrol_rejected": 12.0 if nodes >= 1000 else 0.0,
                   "resident_memory_bytes": float(int(420 * f * 1.35 * MIB)),
                   "heap_inuse_bytes": float(int(300 * f * 1.4 * MIB)), "cpu_seconds": round(31 * f * f, 1),
                   "goroutines": float(2_400 + nodes * 3), "inflight_mutating": 3.0,
                   "inflight_readOnly": float(round(2 * f)), "lists_from_watchcache": 240.0,
                   "lists_from_etcd": 44.0, "list_fetched_objects_from_etcd": float(44 * (nodes + 3))},
        storage_objects={"pods": float(pods + 25), "nodes": float(nodes),
                         "leases.coordination.k8s.io": float(nodes + 3),
                         "events": float(1_800 + pods // 2), "namespaces": 6.0, "configmaps": 8.0,
                         "deployments.apps": 2.0, "replicasets.apps": 4.0, "endpointslices.discovery.k8s.io": 2.0},
        etcd=EtcdStats(db_size_bytes=float(int(12 * f * f * MIB)), db_size_in_use_bytes=float(int(9 * f * f * MIB)),
                       keys_total=float(pods + nodes * 2 + 1_900), quota_bytes=float(2 * 1024 * MIB),
                       wal_fsync_p99_s=round(0.004 * f, 4), backend_commit_p99_s=round(0.008 * f, 4)),
        pod_startup=Distribution(count=600 + pods // 10, p50=round(0.9 * f ** 0.5, 3), p90=round(1.6 * f ** 0.6, 3),
                                 p99=round(2.4 * f ** 0.5, 3), max=round(3.2 * f ** 0.6, 3),
                                 source="watch receive times, create -> Running"),
        watch_delay=Distribution(count=240, p50=round(0.004 * f, 4), p90=round(0.009 * f * 1.3, 4),
                                 p99=round(0.022 * f * f, 4), max=round(0.04 * f * f, 4),
                                 source="write -> watch event"),
        processes=processes,
        notes=["kubelet_watchers: 500 watchers opened of 500 asked"] if nodes == 500 else [],
    )


def main() -> None:
    sample = RunResult(run_id="20251128-100000-default", plan=PLAN, environment=ENVIRONMENT,
                       started_at="2025-11-28T10:00:00.000+00:00", finished_at="2025-11-28T10:17:41.512+00:00",
                       status="complete", steps=[step(i, n, f, m) for i, (n, f, m) in enumerate(SCALES)])
    save(sample, HERE / "results_sample")
    aborted = RunResult(run_id="20251128-110000-default", plan=PLAN, environment=ENVIRONMENT,
                        started_at="2025-11-28T11:00:00.000+00:00", finished_at="2025-11-28T11:06:12.208+00:00",
                        status="aborted",
                        error="etcd exited with code 2 during step 1 (500 nodes); its log is logs/etcd.log",
                        steps=[step(0, 100, 1.0, "11:02")])
    save(aborted, HERE / "results_aborted")


if __name__ == "__main__":
    main()
