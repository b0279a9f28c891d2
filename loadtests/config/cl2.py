"""ClusterLoader2's load test (perf-tests, clusterloader2/testing/load/config.yaml) as numbers: how many objects
of each kind and size its namespaces hold at a scale, computed by the same formulas with its defaults, so a
scaled-down run here has the object mix of the test that gates Kubernetes releases.

    namespaces = nodes / nodes_per_namespace (nodes_per_namespace capped at nodes)
    pods per namespace = nodes_per_namespace * pods_per_node
    Deployments: 1/4 of the pods in big (250), 1/4 in medium (30), 1/2 in small (5) ones, less one medium and
      one small per StatefulSet, less one of each for the Jobs
    StatefulSets: one small, one medium; Jobs: one small, one medium, one big (none big below 100 nodes),
      each of size parallel pods and 3x size completions; one DaemonSet; Services for half the Deployments;
      a ConfigMap and a Secret per Deployment (mounted by it); a PriorityClass for the DaemonSet
"""

from __future__ import annotations

from dataclasses import dataclass

CREATE, SCALE, DELETE = "cl2-create", "cl2-scale", "cl2-delete"
SCHEDULER, POD_STARTUP = "scheduler-throughput", "pod-startup"
PHASES = (CREATE, SCALE, DELETE, SCHEDULER, POD_STARTUP)  # a step's `phase`: its window is that phase of the test
MIN_SCHEDULER_PODS = 1000  # the scheduler-throughput phase: max(1000, nodes) pods at once
SCHEDULER_THRESHOLD = 100.0  # pods scheduled per second: CL2_SCHEDULER_THROUGHPUT_THRESHOLD, judged on the max
LATENCY_PODS = 500  # the pod-startup phase's latency pods (CL2_LATENCY_POD_COUNT), one Deployment each ...
LATENCY_QPS = 5.0  # ... created at 5 per second (its Uniform5qps)
BIG, MEDIUM, SMALL = 250, 30, 5
SMALL_CLUSTER_NODES = 100  # below it ClusterLoader2 makes no big Job
RANDOM_SCALE_FACTOR = 0.5  # "scale and update": each object to a random size in [0.5x, 1.5x]
COMPLETIONS_FACTOR = 2 * (1 + RANDOM_SCALE_FACTOR)  # a Job's completions: 3x its parallelism


@dataclass(frozen=True)
class Group:
    """Objects of one kind and size in every namespace: `per_namespace` of them, `size` pods each."""

    kind: str  # Deployment | StatefulSet | Job | DaemonSet | Service | ConfigMap | Secret
    basename: str  # ClusterLoader2's: big-deployment, small-statefulset, ...
    per_namespace: int
    size: int = 0  # pods each asks for (parallelism, for a Job); 0 for objects without pods
    completions: int = 0  # a Job's

    @property
    def pods_per_namespace(self) -> int:
        return self.per_namespace * self.size


@dataclass(frozen=True)
class LoadMix:
    nodes: int
    pods_per_node: int
    nodes_per_namespace: int
    namespaces: int
    groups: tuple[Group, ...]

    @property
    def pods_per_namespace(self) -> int:
        return self.nodes_per_namespace * self.pods_per_node

    @property
    def total_pods(self) -> int:
        return self.namespaces * self.pods_per_namespace

    def per_namespace(self, kind: str) -> int:
        return sum(g.per_namespace for g in self.groups if g.kind == kind)

    def controlled_pods(self) -> int:
        """Pods of the Deployments, StatefulSets and Jobs at their created size (the DaemonSet's are one
        per node on top)."""
        return self.namespaces * sum(g.pods_per_namespace for g in self.groups
                                     if g.kind in ("Deployment", "StatefulSet", "Job"))


def load_mix(nodes: int, pods_per_node: int = 30, nodes_per_namespace: int = 100, *, big: int = BIG,
             medium: int = MEDIUM, small: int = SMALL, small_statefulsets: int = 1,
             medium_statefulsets: int = 1) -> LoadMix:
    """The objects of ClusterLoader2's load test at `nodes` nodes, with its defaults."""
    per_namespace_nodes = min(nodes, nodes_per_namespace)
    namespaces = max(1, nodes // per_namespace_nodes)
    pods = per_namespace_nodes * pods_per_node
    big_deployments = pods // (4 * big)
    medium_deployments = pods // (4 * medium)
    small_deployments = pods // (2 * small)
    # StatefulSets are on: one small and one medium Deployment fewer; Jobs are on: one of each size fewer
    small_deployments = max(0, small_deployments - small_statefulsets)
    medium_deployments = max(0, medium_deployments - medium_statefulsets)
    small_deployments, medium_deployments, big_deployments = (
        max(0, small_deployments - 1), max(0, medium_deployments - 1), max(0, big_deployments - 1))
    big_jobs = 0 if nodes < SMALL_CLUSTER_NODES else 1
    deployments = (("big", big, big_deployments), ("medium", medium, medium_deployments),
                   ("small", small, small_deployments))
    groups = [Group("Deployment", f"{name}-deployment", count, size) for name, size, count in deployments]
    groups += [Group("Service", f"{name}-service", (count + 1) // 2) for name, _, count in deployments]
    groups += [Group(kind, f"{name}-deployment", count) for kind in ("ConfigMap", "Secret")
               for name, _, count in deployments]
    groups += [Group("StatefulSet", "small-statefulset", small_statefulsets, small),
               Group("StatefulSet", "medium-statefulset", medium_statefulsets, medium)]
    groups += [Group("Job", f"{name}-job", count, size, round(size * COMPLETIONS_FACTOR))
               for name, size, count in (("small", small, 1), ("medium", medium, 1), ("big", big, big_jobs))]
    groups.append(Group("DaemonSet", "daemonset", 1))
    return LoadMix(nodes, pods_per_node, per_namespace_nodes, namespaces, tuple(g for g in groups if g.per_namespace))
