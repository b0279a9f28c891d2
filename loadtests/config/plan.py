"""The plan: what a run does, validated before anything starts.

A bad plan is refused with the path of the offending field and the reason, e.g.
`plan.yaml: steps[1].nodes: must be an integer >= 1 (got 'many')`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from loadtests import PACKAGE_DIR
from loadtests.config import cl2, templates
from loadtests.config import fleet as fleet_mod
from loadtests.config import measure as measure_mod
from loadtests.config import promql as promql_mod
from loadtests.config import soak as soak_mod
from loadtests.config import tenants as tenants_mod
from loadtests.config import workload as workload_mod
from loadtests.config.scenarios import SCENARIOS
from loadtests.config.topology import Topology
from loadtests.config.versions import DEFAULT_KUBE_VERSION, check_kube_version
from loadtests.errors import PlanError, SetupError, read_text

PLANS_DIR = PACKAGE_DIR / "plans"
SectionT = TypeVar("SectionT")

# SIG Scalability SLO thresholds (seconds). Namespace LISTs: 30 s since 2022 (ClusterLoader2 still flags > 5 s).
DEFAULT_SLO = {
    "mutating_p99_s": 1.0,
    "read_resource_p99_s": 1.0,
    "read_namespace_p99_s": 30.0,
    "read_cluster_p99_s": 30.0,
    "pod_startup_p99_s": 5.0,
    # Below 100 samples a p99 is the slowest sample (pod startup's nearest rank) or that sample's histogram bucket
    # (the rank 0.99 n is past the second slowest): one slow request would decide the verdict. A plan may set less.
    "min_samples": 100,
}

# When `loadtest compare` calls B a regression of A (a plan's `compare:` section or --threshold overrides them).
REGRESSION_DEFAULTS: dict[str, float] = {
    "latency_pct": 25.0,  # p99 latency (server, client, pod startup, watch delay) worse by more than 25 % ...
    "latency_abs_s": 0.050,  # ... and by more than 50 ms
    "memory_pct": 20.0,  # apiserver RSS and etcd DB size larger by more than 20 %
    "cpu_pct": 30.0,  # CPU of a component higher by more than 30 % ...
    "cpu_abs_points": 5.0,  # ... and by more than 5 percentage points of a core
    "errors_5xx_extra": 0,  # more 5xx responses than A: any new 5xx is a regression
    "throttled_429_extra": 0,  # more 429 responses than A by more than this
    "alpha": 0.05,  # repeated runs: a change past these thresholds must also be significant (Mann-Whitney U)
}

@dataclass
class Target:
    kind: str = "local"  # local | cluster
    kube_version: str = DEFAULT_KUBE_VERSION
    heartbeat_factor: float = 1.0
    events_etcd: bool = False  # store Events in a second etcd, as large clusters do
    leases_etcd: bool = False  # store Leases (the nodes' heartbeats) in an etcd of their own, as the largest do
    unresponsive_s: float = 30.0  # a component failing its health check this long aborts the run
    kubeconfig: str | None = None
    context: str | None = None
    # local control planes: extra flags per component (e.g. {"etcd": ["--quota-backend-bytes=67108864"]}),
    # after the harness's own, so a flag given here wins; flags that bind, serve or authenticate are refused
    component_args: dict[str, list[str]] = field(default_factory=dict)
    etcd_storage: str = "disk"  # local: "disk" (the cluster folder) or "memory" (a tmpfs folder, /dev/shm)
    # local: who kwok and the load are to the apiserver: "production" (kwok and joining nodes as kubelets, the load
    # as an ordinary user, so flow control treats them as a real cluster's; see controlplane/pki.py) or "admin"
    # (both in system:masters, exempt from API Priority and Fairness)
    identities: str = "production"
    # local: how many etcd members, apiservers (behind HAProxy when more than one), schedulers and
    # controller-managers (leader-elected when two) the control plane runs (config/topology.py)
    topology: Topology = field(default_factory=Topology)
    # local: load scenarios sent as users of their own, with their RBAC rules and flow schemas (config/tenants.py)
    tenants: dict[str, tenants_mod.Tenant] = field(default_factory=dict)


# Components whose flags a plan may extend, and the flags it may not set: they decide where a component
# listens, how it proves who it is, and who may talk to it (the harness binds loopback, with TLS and auth).
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
OWNED_FLAGS = ("--bind-address", "--advertise-address", "--secure-port", "--listen-", "--advertise-client-urls",
               "--initial-", "--tls-", "--cert-file", "--key-file", "--trusted-ca-file", "--client-cert-auth",
               "--client-ca-file", "--anonymous-auth", "--authorization-mode", "--token-auth-file",
               "--etcd-servers", "--etcd-cafile", "--etcd-certfile", "--etcd-keyfile", "--data-dir",
               "--kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig", "--config",
               "--service-account-", "--cert-dir", "--audit-", "--insecure", "--name", "--server")
ETCD_STORAGE = ("disk", "memory")
IDENTITIES = ("admin", "production")  # who kwok and the load are to the apiserver (see controlplane/pki.py)
MAX_PAYLOAD_BYTES = 200_000


@dataclass
class Join:
    """Nodes that join while the step is measured (a burst when over_s is 0), on top of the step's own."""

    nodes: int = 0
    over_s: float = 0.0

@dataclass
class Step:
    nodes: int
    pods_per_node: int = 0
    warmup_s: float = 5.0
    duration_s: float = 60.0
    name: str = ""
    ramp_timeout_s: float = 300.0  # nodes Ready and pods Running within this, or the step is saturated
    join: Join = field(default_factory=Join)
    # a phase of ClusterLoader2's load test (config/cl2.py) instead of a steady window: its window lasts until
    # the cluster has done what the phase asked, at most duration_s
    phase: str = ""
    # local control planes: every apiserver stopped and started again (the same version, one at a time) this many
    # seconds into the window, as a rolling upgrade replaces them (run/roll.py); None: no restart
    restart_apiserver_at_s: float | None = None


@dataclass
class Cl2:
    """ClusterLoader2's load-test parameters, with its defaults (its PODS_PER_NODE, NODES_PER_NAMESPACE,
    CL2_LOAD_TEST_THROUGHPUT and CL2_DELETE_TEST_THROUGHPUT)."""

    pods_per_node: int = 30
    nodes_per_namespace: int = 100
    throughput: float = 10.0  # pods per second created (and scaled) by the phases
    delete_throughput: float = 0.0  # pods per second deleted; 0: as throughput
    scheduler_pods: int = 0  # the scheduler-throughput phase's pods at once; 0: max(1000, nodes)
    scheduler_threshold: float = cl2.SCHEDULER_THRESHOLD  # pods per second, judged on the best 5 s window
    latency_pods: int = cl2.LATENCY_PODS  # the pod-startup phase's pods, one Deployment each ...
    latency_qps: float = cl2.LATENCY_QPS  # ... created at this many per second


@dataclass
class Capacity:
    """How `loadtest capacity` grows the fleet from the first step: by `growth` per step (or along the
    plan's own steps, then at the ratio of its last two), up to `max_nodes`, then narrows the range between
    the last scale that held and the first that did not until it is within `resolution` of the former."""

    growth: float | None = None
    max_nodes: int = 10_000
    resolution: float = 0.1


@dataclass
class Audit:
    """The apiserver's audit log, which attributes every request to its client (local control planes only).

    Written at Metadata level into `dir` (default: the run folder's `audit/`), rotated at `max_size_mb` with
    `max_backups` older files kept, so a long run cannot fill the disk."""

    enabled: bool = True
    dir: str | None = None
    max_size_mb: int = 200
    max_backups: int = 4


@dataclass
class Profiles:
    """pprof profiles of kube-apiserver and etcd in every window (measure/profiles.py): CPU over the window (its
    last `cpu_max_s` seconds at most), the heap at its close. Local control planes start both with their profiling
    endpoints on only when this is on; an existing cluster's apiserver is profiled where its endpoint answers."""

    enabled: bool = True
    cpu_max_s: int = 60


@dataclass
class Roll:
    """A rolling upgrade in the middle of a step (`loadtest rehearse --rolling`): after `steady_s` of the step's
    window (its figures before the roll), each component is replaced in turn with `pause_s` between them, while an
    availability probe sends `probe_qps` reads a second through the load balancer. The roll passes when at least
    `availability_pct` of its seconds had every probe request served (SIG Scalability's 5,000-node job asks
    99.5 %), and the probe's per-second latency is back within its steady range `recovery_s` after the last
    component is ready."""

    step: str = ""  # the step's name; "": the last step
    steady_s: float = 20.0
    pause_s: float = 10.0
    probe_qps: float = 10.0
    availability_pct: float = 99.5
    recovery_s: float = 60.0


# Scales the report projects each growing figure to, unless a plan names its own (`project_to:`).
DEFAULT_PROJECT_TO = [2500, 7500]


@dataclass
class Plan:
    name: str
    target: Target
    steps: list[Step]
    load: dict[str, dict[str, Any]]
    slo: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SLO))
    gate: bool = True
    workers: int = 0
    repeat: int = 1  # runs of the whole plan, each on a fresh control plane (noise-aware comparisons need >= 4)
    compare: dict[str, float] = field(default_factory=dict)
    capacity: Capacity = field(default_factory=Capacity)
    cl2: Cl2 = field(default_factory=Cl2)
    audit: Audit = field(default_factory=Audit)
    profiles: Profiles = field(default_factory=Profiles)
    # probes turned on or off against their defaults (config/measure.py); {}: every probe as it comes
    measure: dict[str, bool] = field(default_factory=dict)
    roll: Roll = field(default_factory=Roll)
    project_to: list[int] = field(default_factory=lambda: list(DEFAULT_PROJECT_TO))
    # the fake nodes' shapes (config/fleet.py); none: every node is the bundled template's
    fleet: fleet_mod.FleetShapes = field(default_factory=fleet_mod.FleetShapes)
    # a plan compiled from a captured profile says so, and what it left out (config/workload.py)
    replay: workload_mod.ReplaySettings | None = None
    # a real Prometheus beside the control plane, and the plan's own PromQL figures and checks (config/promql.py)
    prometheus: promql_mod.PrometheusSettings = field(default_factory=promql_mod.PrometheusSettings)
    figures: list[promql_mod.PromQuery] = field(default_factory=list)
    checks: list[promql_mod.PromQuery] = field(default_factory=list)
    # `loadtest soak` of this plan without flags: its hours, sampling interval, step and settling (config/soak.py)
    soak: soak_mod.SoakSettings | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("source")
        data["fleet"] = self.fleet.to_dict()
        if not self.fleet.shapes:  # a fleet of the template's nodes is written as before shapes (same digest)
            data.pop("fleet")
        data["replay"] = self.replay.to_dict() if self.replay else None
        if self.replay is None:  # nor a plan written by hand
            data.pop("replay")
        for step in data["steps"]:  # a step without a join is written as before joins existed (same digest)
            if not step["join"]["nodes"]:
                step.pop("join")
            if not step["phase"]:  # nor one without a phase, nor a plan without phases
                step.pop("phase")
            if step["restart_apiserver_at_s"] is None:  # nor one whose apiserver is not restarted
                step.pop("restart_apiserver_at_s")
        if not any(step.phase for step in self.steps):
            data.pop("cl2")
        if self.target.topology.single:  # a single-node control plane is written as before topologies
            data["target"].pop("topology")
        if not self.target.tenants:  # nor one without tenants
            data["target"].pop("tenants")
        if self.roll == Roll():  # nor a plan that does not set how a roll goes
            data.pop("roll")
        if not self.measure:  # nor one that runs every probe as it comes
            data.pop("measure")
        for key in ("figures", "checks"):  # nor one without PromQL
            if not data[key]:
                data.pop(key)
        if not self.prometheus.enabled:
            data.pop("prometheus")
        if self.soak is None:  # nor one that says nothing of a soak
            data.pop("soak")
        informers = data["load"].get("informers")
        if informers is not None and not informers.get("reconnect_spread_s"):  # nor informers that reconnect at once
            informers.pop("reconnect_spread_s", None)
        for key in ("watch_list", "relist_on_cut"):  # nor informers that list, and resume after a cut
            if informers is not None and not informers.get(key):
                informers.pop(key, None)
        return data

    def probes(self) -> tuple[str, ...]:
        """The probes that measure each window (config/measure.py), in their order; `profiles.enabled: false`
        is the older way to say `measure: {profiles: false}`."""
        return tuple(name for name in measure_mod.running(self.measure)
                     if name != "profiles" or self.profiles.enabled)

    def on_kube_version(self, version: str) -> Plan:
        """The same plan on another Kubernetes version (upgrade rehearsals, --kube-version)."""
        try:
            check_kube_version(version)
        except SetupError as error:
            raise field_error(self.source, "target.kube_version", str(error)) from None
        other = copy.deepcopy(self)
        other.target.kube_version = version
        return other

    def estimated_seconds(self) -> float:
        return sum(s.warmup_s + s.duration_s for s in self.steps)


def field_error(source: str, path: str, reason: str) -> PlanError:
    """The one-line refusal of a plan (or lesson) field: `plan.yaml: steps[1].nodes: must be ...`."""
    return PlanError(f"{source}: {path}: {reason}")


MAX_NUMBER = 1e9  # beyond any plan's use (a 30-year step, a billion nodes): a typo, or YAML's .inf


def _number(source: str, path: str, value: Any, *, minimum: float, integer: bool = False) -> Any:
    """A number of the plan, refused in one line unless it is finite and from `minimum` to MAX_NUMBER (YAML
    reads `.inf` and `.nan` as floats, which would pass a bare `>=` and fail deep in a run)."""
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not ok_type or (math.isfinite(value) and value < minimum):
        raise field_error(source, path, f"must be {kind} >= {minimum:g} (got {value!r})")
    if not math.isfinite(value) or value > MAX_NUMBER:
        raise field_error(source, path, f"must be {'an integer' if integer else 'a finite number'} from {minimum:g} to "
                                  f"{MAX_NUMBER:g} (got {value!r})")
    return value


def _mapping(source: str, path: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise field_error(source, path, f"must be a mapping (got {type(value).__name__})")
    return value


def _no_unknown(source: str, path: str, data: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        where = f"{path}.{unknown[0]}" if path else unknown[0]
        raise field_error(source, where, f"unknown field; expected one of: {', '.join(sorted(known))}")


def _boolean(source: str, path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise field_error(source, path, f"must be true or false (got {value!r})")
    return value


def _one_of(source: str, path: str, value: Any, allowed: Collection[Any]) -> Any:
    if value not in allowed:
        raise field_error(source, path, f"must be one of: {', '.join(map(str, allowed))} (got {value!r})")
    return value


def _section(source: str, path: str, value: Any, cls: type[SectionT]) -> SectionT:
    """A section read into its dataclass: a mapping whose fields are the dataclass's, no other."""
    data = _mapping(source, path, value)
    _no_unknown(source, path, data, set(cls.__dataclass_fields__))  # type: ignore[attr-defined]
    return cls(**data)


def parse(data: Any, source: str = "plan") -> Plan:
    """Validate a plan mapping and fill in defaults: one parser per section, each refusing in one line."""
    data = _mapping(source, "(top level)", data)
    _no_unknown(source, "", data, {"name", "target", "steps", "load", "slo", "gate", "workers", "compare",
                                   "capacity", "audit", "project_to", "repeat", "cl2", "roll", "profiles",
                                   "measure", "fleet", "replay", "prometheus", "figures", "checks", "soak"})
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise field_error(source, "name", f"must be letters, digits, - or _ (got {name!r})")
    steps = _steps(source, data.get("steps"))
    largest = max(s.nodes for s in steps)
    target = _target(source, data.get("target"))
    restarted = [i for i, s in enumerate(steps) if s.restart_apiserver_at_s is not None]
    if restarted and target.kind != "local":
        raise field_error(source, f"steps[{restarted[0]}].restart_apiserver_at_s",
                          "only a local control plane's apiservers can be restarted by the harness (target.kind: "
                          "local)")
    promql = promql_mod.parse(source, data)
    if promql.prometheus.enabled and target.kind != "local":
        raise field_error(source, "prometheus.enabled", "a run's Prometheus scrapes a local control plane's "
                                                        "components over loopback (target.kind: local)")
    return Plan(name=name, target=target, steps=steps,
                load=_load(source, data.get("load")), slo=_slo(source, data.get("slo")),
                gate=_boolean(source, "gate", data.get("gate", True)),
                workers=_number(source, "workers", data.get("workers", 0), minimum=0, integer=True),
                repeat=_number(source, "repeat", data.get("repeat", 1), minimum=1, integer=True),
                capacity=_capacity(source, data.get("capacity")), audit=_audit(source, data.get("audit")),
                project_to=(_project_to(source, data["project_to"], largest) if "project_to" in data
                            else default_project_to(largest)),
                compare=_compare(source, data.get("compare")), cl2=_cl2(source, data.get("cl2")),
                roll=_roll(source, data.get("roll"), steps), profiles=_profiles(source, data.get("profiles")),
                measure=measure_mod.parse(source, data.get("measure")),
                fleet=fleet_mod.parse(source, data.get("fleet")),
                replay=workload_mod.parse(source, data.get("replay")), prometheus=promql.prometheus,
                figures=promql.figures, checks=promql.checks, soak=_soak(source, data.get("soak"), steps),
                source=source)


def _target(source: str, value: Any) -> Target:
    raw = dict(_mapping(source, "target", value))
    topology = _section(source, "target.topology", raw.pop("topology", None), Topology)
    tenants = tenants_mod.parse(source, raw.pop("tenants", None))
    target = _section(source, "target", raw, Target)
    target.topology, target.tenants = topology, tenants
    if (problem := topology.problem()) is not None:
        raise field_error(source, f"target.topology.{problem[0]}", problem[1])
    if target.kind not in ("local", "cluster"):
        raise field_error(source, "target.kind", f"must be 'local' or 'cluster' (got {target.kind!r})")
    try:
        check_kube_version(str(target.kube_version))
    except SetupError as error:
        raise field_error(source, "target.kube_version", str(error)) from None
    _number(source, "target.heartbeat_factor", target.heartbeat_factor, minimum=0.1)
    _number(source, "target.unresponsive_s", target.unresponsive_s, minimum=1)
    if target.kind == "cluster" and not target.kubeconfig:
        raise field_error(source, "target.kubeconfig", "required when target.kind is 'cluster'")
    target.component_args = _component_args(source, target.component_args)
    tenants_mod.check_flow_control(source, target.tenants, target.component_args.get("kube-apiserver", []))
    _one_of(source, "target.etcd_storage", target.etcd_storage, ETCD_STORAGE)
    _one_of(source, "target.identities", target.identities, IDENTITIES)
    local_only = [name for name, value, default in (("component_args", target.component_args, {}),
                                                    ("events_etcd", target.events_etcd, False),
                                                    ("leases_etcd", target.leases_etcd, False),
                                                    ("etcd_storage", target.etcd_storage, "disk"),
                                                    ("identities", target.identities, "production"),
                                                    ("topology", target.topology, Topology()),
                                                    ("tenants", target.tenants, {})) if value != default]
    if target.kind == "cluster" and local_only:
        raise field_error(source, f"target.{local_only[0]}",
                          "only a local control plane's components can be configured by a plan (on an existing "
                          "cluster, its kubeconfig says who the load is)")
    return target


def _steps(source: str, value: Any) -> list[Step]:
    if not isinstance(value, list) or not value:
        raise field_error(source, "steps", "must be a non-empty list of steps (each with at least `nodes`)")
    steps = [_step(source, f"steps[{i}]", raw) for i, raw in enumerate(value)]
    created: set[int] = set()  # node counts whose mix exists (a create phase ran, no delete since)
    for i, step in enumerate(steps):
        if step.phase == cl2.CREATE:
            created.add(step.nodes)
        elif step.phase in (cl2.SCALE, cl2.DELETE) and step.nodes not in created:
            raise field_error(source, f"steps[{i}].phase", f"{step.phase} needs a {cl2.CREATE} step of "
                                                          f"{step.nodes} nodes before it")
        if step.phase == cl2.DELETE:
            created.discard(step.nodes)
    return steps


def _step(source: str, path: str, value: Any) -> Step:
    raw = dict(_mapping(source, path, value))
    _no_unknown(source, path, raw, set(Step.__dataclass_fields__))
    if "nodes" not in raw:
        raise field_error(source, f"{path}.nodes", "is required")
    join = _section(source, f"{path}.join", raw.pop("join", None), Join)
    step = Step(**raw, join=join)
    _number(source, f"{path}.join.nodes", step.join.nodes, minimum=0, integer=True)
    _number(source, f"{path}.join.over_s", step.join.over_s, minimum=0)
    _number(source, f"{path}.nodes", step.nodes, minimum=1, integer=True)
    _number(source, f"{path}.pods_per_node", step.pods_per_node, minimum=0, integer=True)
    if step.pods_per_node > 110:
        raise field_error(source, f"{path}.pods_per_node", "must be <= 110 (the Kubernetes per-node limit)")
    _number(source, f"{path}.warmup_s", step.warmup_s, minimum=0)
    _number(source, f"{path}.duration_s", step.duration_s, minimum=1)
    _number(source, f"{path}.ramp_timeout_s", step.ramp_timeout_s, minimum=1)
    if step.phase:
        _one_of(source, f"{path}.phase", step.phase, cl2.PHASES)
    if step.restart_apiserver_at_s is not None:
        _number(source, f"{path}.restart_apiserver_at_s", step.restart_apiserver_at_s, minimum=0)
        if step.restart_apiserver_at_s >= step.duration_s:
            raise field_error(source, f"{path}.restart_apiserver_at_s", f"must be within the window: below "
                                                                     f"duration_s ({step.duration_s:g})")
    step.name = str(step.name or (f"{step.nodes} nodes · {step.phase}" if step.phase else f"{step.nodes} nodes"))
    return step


def _load(source: str, value: Any) -> dict[str, dict[str, Any]]:
    load_data = _mapping(source, "load", value)
    _no_unknown(source, "load", load_data, {"scenarios"})
    scenarios = _mapping(source, "load.scenarios", load_data.get("scenarios"))
    return {scenario: _scenario(source, f"load.scenarios.{scenario}", scenario, params)
            for scenario, params in scenarios.items()}


def _scenario(source: str, path: str, scenario: str, value: Any) -> dict[str, Any]:
    """One scenario's parameters over its declared defaults, each of its default's type."""
    if scenario not in SCENARIOS:
        raise field_error(source, path, f"unknown scenario; expected one of: {', '.join(sorted(SCENARIOS))}")
    params = _mapping(source, path, value)
    declared = SCENARIOS[scenario]
    _no_unknown(source, path, params, set(declared.defaults))
    merged = {**copy.deepcopy(declared.defaults), **params}
    for key in declared.template_lists:
        merged[key] = _templates(source, f"{path}.{key}", merged[key], key)
    for key, default in declared.defaults.items():
        value = merged[key]
        if key in declared.template_lists:
            continue
        if isinstance(default, bool):
            _boolean(source, f"{path}.{key}", value)
        elif isinstance(default, int | float):
            _number(source, f"{path}.{key}", value, minimum=0, integer=isinstance(default, int))
        elif isinstance(default, str) and not isinstance(value, str):
            raise field_error(source, f"{path}.{key}", f"must be a string (got {value!r})")
    if scenario == "objects" and not merged["templates"] and not merged["prefill"]:
        raise field_error(source, f"{path}.templates", "must list at least one template, here or in `prefill` "
                                                       f"(bundled: {', '.join(templates.bundled())})")
    if scenario == "pod_churn" and merged["payload_bytes"] > MAX_PAYLOAD_BYTES:
        raise field_error(source, f"{path}.payload_bytes", f"must be <= {MAX_PAYLOAD_BYTES} (annotations of one "
                                                           "object are limited to 256 KiB)")
    for key, allowed in declared.choices.items():
        if merged[key] not in allowed:
            raise field_error(source, f"{path}.{key}", f"must be one of: {', '.join(sorted(allowed))}")
    return merged


def _templates(source: str, path: str, value: Any, key: str) -> list[dict[str, Any]]:
    """A list of object templates, each read and checked (config/templates.py): `templates` entries may say
    how many objects an iteration makes (`replicas`) and with which `input_vars`; `prefill` entries how many
    objects in all, how many in each namespace (`per_namespace`), and whether those already there count
    (`top_up`); `install` entries only `template` and `input_vars`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise field_error(source, path, f"must be a list of templates (got {type(value).__name__})")
    fields = frozenset({"template", "input_vars", *(("replicas",) if key != "install" else ()),
                        *(("per_namespace", "top_up") if key == "prefill" else ())})
    most = templates.MAX_PREFILL if key == "prefill" else templates.MAX_REPLICAS
    return [templates.read(source, f"{path}[{i}]", entry, fields=fields, max_replicas=most).to_dict()
            for i, entry in enumerate(value)]


def _slo(source: str, value: Any) -> dict[str, float]:
    slo_data = _mapping(source, "slo", value)
    _no_unknown(source, "slo", slo_data, set(DEFAULT_SLO))
    slo = {**DEFAULT_SLO, **slo_data}
    for key, number in slo.items():
        _number(source, f"slo.{key}", number, minimum=0)
    return slo


def _compare(source: str, value: Any) -> dict[str, float]:
    compare = _mapping(source, "compare", value)
    _no_unknown(source, "compare", compare, set(REGRESSION_DEFAULTS))
    for key, number in compare.items():
        _number(source, f"compare.{key}", number, minimum=0)
    return compare


def _numbers(source: str, path: str, section: Any, minima: dict[str, float]) -> None:
    """The section's numeric fields, each from its minimum (an integer where the dataclass's default is one)."""
    defaults = {f.name: f.default for f in dataclasses.fields(section)}
    for name, minimum in minima.items():
        value = getattr(section, name)
        if value is not None:
            _number(source, f"{path}.{name}", value, minimum=minimum, integer=isinstance(defaults[name], int))


def _cl2(source: str, value: Any) -> Cl2:
    found = _section(source, "cl2", value, Cl2)
    _numbers(source, "cl2", found, {"pods_per_node": 1, "nodes_per_namespace": 1, "throughput": 0.1,
                                    "delete_throughput": 0, "scheduler_pods": 0, "scheduler_threshold": 0,
                                    "latency_pods": 1, "latency_qps": 0.1})
    return found


def _roll(source: str, value: Any, steps: list[Step]) -> Roll:
    roll = _section(source, "roll", value, Roll)
    _numbers(source, "roll", roll, {"steady_s": 1, "pause_s": 0, "probe_qps": 1, "availability_pct": 0,
                                    "recovery_s": 1})
    if roll.availability_pct > 100:
        raise field_error(source, "roll.availability_pct",
                          f"must be a share from 0 to 100 (got {roll.availability_pct!r})")
    if roll.step and roll.step not in {s.name for s in steps}:
        raise field_error(source, "roll.step", f"no step is named {roll.step!r} (the steps: "
                          + ", ".join(s.name for s in steps) + ")")
    return roll


def _soak(source: str, value: Any, steps: list[Step]) -> soak_mod.SoakSettings | None:
    """`soak:` (hours, interval_s, step, settle_s): what `loadtest soak` of the plan holds when no flag says
    otherwise."""
    if value is None:
        return None
    data = _mapping(source, "soak", value)
    if "hours" not in data:
        raise field_error(source, "soak.hours", "is needed: how long the soak holds its load, e.g. 2")
    found = _section(source, "soak", data, soak_mod.SoakSettings)
    for key in ("hours", "interval_s", "settle_s"):
        value = getattr(found, key)
        if value is None and key == "settle_s":  # the default share of the soak
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise field_error(source, f"soak.{key}", f"must be a number (got {value!r})")
    if not isinstance(found.step, str) or (found.step and found.step not in {s.name for s in steps}):
        raise field_error(source, "soak.step", f"no step is named {found.step!r} (the steps: "
                          + ", ".join(s.name for s in steps) + ")")
    try:
        return soak_mod.settings(float(found.hours), float(found.interval_s), found.step,
                                 float(found.settle_s) if found.settle_s is not None else None)
    except PlanError as error:
        raise field_error(source, "soak", str(error)) from None


def soak_plan(plan: Plan, soak: soak_mod.SoakSettings) -> Plan:
    """The plan as a soak: its one step (the named or the first), its window lasting the soak's hours."""
    names = [s.name for s in plan.steps]
    if soak.step and soak.step not in names:
        raise PlanError(f"{plan.source or plan.name}: no step is named {soak.step!r} (the steps: {', '.join(names)})")
    step = copy.deepcopy(plan.steps[names.index(soak.step) if soak.step else 0])
    if step.phase:
        raise PlanError(f"{plan.source or plan.name}: step {step.name!r} is a ClusterLoader2 phase, which ends when "
                        "its work is done: a soak holds a steady load; name a step without `phase`")
    step.duration_s = soak.seconds
    step.restart_apiserver_at_s = None
    soaked = copy.deepcopy(plan)
    soaked.steps = [step]
    return soaked


def roll_step(plan: Plan) -> int:
    """The index of the step a rolling upgrade happens in: the one `roll.step` names, else the last."""
    names = [s.name for s in plan.steps]
    return names.index(plan.roll.step) if plan.roll.step else len(names) - 1


def _capacity(source: str, value: Any) -> Capacity:
    capacity = _section(source, "capacity", value, Capacity)
    _numbers(source, "capacity", capacity, {"growth": 1.05, "max_nodes": 1, "resolution": 0.01})
    return capacity


def _audit(source: str, value: Any) -> Audit:
    audit = _section(source, "audit", value, Audit)
    _boolean(source, "audit.enabled", audit.enabled)
    if audit.dir is not None and not isinstance(audit.dir, str):
        raise field_error(source, "audit.dir", f"must be a folder path (got {audit.dir!r})")
    _number(source, "audit.max_size_mb", audit.max_size_mb, minimum=1, integer=True)
    _number(source, "audit.max_backups", audit.max_backups, minimum=0, integer=True)
    return audit


def _profiles(source: str, value: Any) -> Profiles:
    profiles = _section(source, "profiles", value, Profiles)
    _boolean(source, "profiles.enabled", profiles.enabled)
    _number(source, "profiles.cpu_max_s", profiles.cpu_max_s, minimum=1, integer=True)  # pprof takes whole seconds
    return profiles


def _component_args(source: str, value: Any) -> dict[str, list[str]]:
    """Extra flags per component: lists of `--flag=value` strings, none that the harness owns."""
    args = _mapping(source, "target.component_args", value)
    _no_unknown(source, "target.component_args", args, set(COMPONENTS))
    checked: dict[str, list[str]] = {}
    for component, flags in args.items():
        path = f"target.component_args.{component}"
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise field_error(source, path, "must be a list of flags, e.g. [\"--quota-backend-bytes=67108864\"]")
        for i, flag in enumerate(flags):
            if not flag.startswith("--"):
                raise field_error(source, f"{path}[{i}]", f"must be a flag starting with -- (got {flag!r})")
            name = flag.split("=", 1)[0]
            if any(name == owned or (owned.endswith(("-", "_")) and name.startswith(owned))
                   for owned in OWNED_FLAGS):
                raise field_error(source, f"{path}[{i}]", f"{name} is set by the harness (it keeps every component on "
                                                    "loopback with TLS and authentication); drop it")
        checked[component] = list(flags)
    return checked


def default_project_to(largest_step: int) -> list[int]:
    """The default scales to project to: those beyond what the plan measures itself."""
    return [scale for scale in DEFAULT_PROJECT_TO if scale > largest_step]


def _project_to(source: str, value: Any, largest_step: int) -> list[int]:
    """Scales to project to: whole node counts beyond the largest step (a projection extrapolates; inside
    the measured range the steps themselves answer)."""
    if not isinstance(value, list):
        value = [value]
    scales = []
    for i, scale in enumerate(value):
        path = f"project_to[{i}]"
        if (isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale)
                or scale != int(scale) or scale > MAX_NUMBER):
            raise field_error(source, path, f"must be a whole number of nodes (got {scale!r})")
        if scale <= largest_step:
            raise field_error(source, path, f"{int(scale):,} nodes is not beyond the measured range (steps up to "
                                      f"{largest_step:,} nodes); name a larger scale or drop it")
        scales.append(int(scale))
    return sorted(set(scales))


def load(path: str | Path) -> Plan:
    """Read and validate a plan file; a name without a path is looked up among the bundled plans."""
    candidate = Path(path)
    if not candidate.exists() and (PLANS_DIR / f"{path}.yaml").exists():
        candidate = PLANS_DIR / f"{path}.yaml"
    try:
        text = read_text(candidate, "plan", "give a plan file (YAML)")
    except OSError as error:
        bundled = ", ".join(sorted(p.stem for p in PLANS_DIR.glob("*.yaml")))
        raise PlanError(f"{path}: cannot read the plan ({error.strerror}); bundled plans: {bundled}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise PlanError(f"{candidate}: {where}: not valid YAML "
                        f"({' '.join(str(getattr(error, 'problem', None) or error).split())})") from None
    return parse(data, source=str(candidate))
