"""A real control plane on this machine: etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok.

Everything listens on 127.0.0.1 only, speaks TLS and requires authentication (client certificates). Processes
are started directly rather than through kwokctl so the harness knows each pid (to measure CPU and memory and
to stop exactly what it started), chooses every port itself, and can tear down half-started clusters.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil
import yaml

from loadtests.binaries import cache as binaries_mod
from loadtests.binaries.cache import Binaries
from loadtests.config import versions
from loadtests.config.tenants import Tenant
from loadtests.config.topology import (
    APISERVER,
    CONTROLLER_MANAGER,
    ETCD,
    LOAD_BALANCER,
    SCHEDULER,
    Topology,
    component_of,
)
from loadtests.controlplane import haproxy
from loadtests.controlplane import kwok as kwok_mod
from loadtests.controlplane import tenants as tenants_mod
from loadtests.controlplane.audit import AuditLog
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.health import OUTSIDE, STOPPED_TOGETHER_S, HealthCheck, endpoint_check, stopped_together
from loadtests.controlplane.pki import (
    KWOK_USER,
    LOAD_USER,
    NODES_FOLDER,
    PROXY_STEM,
    SERVICE_ACCOUNT_STEM,
    USER_STEM,
    ClusterPki,
    create_cluster_pki,
    issue_node_certificates,
    write_kubeconfig,
)
from loadtests.controlplane.processes import (
    LOOPBACK,
    ClusterState,
    DownRequest,
    ProcessGroup,
    free_ports,
    http_ok,
    listening_ports,
    port_is_free,
    started_since_boot,
    wait_for,
)
from loadtests.errors import ComponentFailed, TargetError, os_reason
from loadtests.kube.access import ClusterAccess, unverified_context
from loadtests.kube.kept import KeptConnection
from loadtests.kube.node_identity import NODE_KEY, REPLAY_USER, SERVICE_ACCOUNT_USER, NodeIdentities
from loadtests.kube.objects import HARNESS_RBAC_PREFIX
from loadtests.kube.private import write_private
from loadtests.polling import poll_until
from loadtests.shutdown import SHUTDOWN

SERVICE_CIDR = "10.96.0.0/16"
KEPT_LOGS = "control-plane-logs"  # a run's components' logs, in its results folder
MEMORY_ROOT = Path("/dev/shm")  # a tmpfs on Linux: etcd_storage "memory" (no disk under its fsyncs)
NOSPACE = "NOSPACE"  # etcd's alarm when its database reaches --quota-backend-bytes
NODE_MONITOR_GRACE_S = 50  # kube-controller-manager default since 1.32
CLIENT_QPS, CLIENT_BURST = 200, 400  # scheduler and controller-manager; their defaults throttle thousands of nodes

HAPROXY_HEALTH = "haproxy_health"
ADMISSION_FLAG = "--enable-admission-plugins"
# an instance a rolling upgrade stops finishes its requests and closes its watches first (SIGKILL after this): an
# apiserver holds its open watches until its own shutdown deadline, the 60 s request timeout, unless a plan sets
# --shutdown-watch-termination-grace-period
REPLACE_STOP_TIMEOUT_S = 90.0


def port_key(instance: str, role: str = "") -> str:
    """The key of an instance's port in the cluster's state: `etcd_2_peer`, `controller_manager`, ..."""
    base = {APISERVER: "apiserver", SCHEDULER: "scheduler", CONTROLLER_MANAGER: "controller_manager"}.get(
        component_of(instance), component_of(instance)).replace("-", "_")
    number = instance[len(component_of(instance)):].replace("-", "_")
    return f"{base}{number}" + (f"_{role}" if role else "")


# Resources a local control plane can keep in an etcd of their own (kube-apiserver --etcd-servers-overrides),
# each such etcd an instance named after them: `events-etcd`, `leases-etcd`.
OWN_ETCD = {"events": "/events", "leases": "coordination.k8s.io/leases"}
OWN_ETCD_INSTANCES = tuple(f"{resource}-etcd" for resource in OWN_ETCD)


def port_names(topology: Topology, own_etcds: Sequence[str] = ()) -> list[str]:
    """Every port a cluster of this topology listens on (and one etcd for each of `own_etcds`, OWN_ETCD's
    resources). `apiserver` is the one its clients use: the apiserver's own in a single-node cluster, the load
    balancer's in front of several (theirs then `apiserver_1`, ...)."""
    names = [port_key(m, role) for m in topology.instances(ETCD) for role in ("", "peer", "metrics")]
    names += [port_key(f"{resource}-etcd", role) for resource in own_etcds for role in ("", "peer", "metrics")]
    names.append("apiserver")
    if topology.load_balanced:
        names += [apiserver_port_key(topology, a) for a in topology.instances(APISERVER)] + [HAPROXY_HEALTH]
    names += [port_key(i) for c in (SCHEDULER, CONTROLLER_MANAGER) for i in topology.instances(c)]
    return names + ["kwok"]


def tolerated(component: str, state: ClusterState) -> int:
    """How many of a component's instances the cluster survives losing: a minority of etcd's members (it
    needs a quorum), every apiserver, scheduler and controller-manager but one; none of the others."""
    count = sum(1 for p in state.processes if component_of(p.component) == component)
    if component == ETCD:
        return (count - 1) // 2
    return count - 1 if component in (APISERVER, SCHEDULER, CONTROLLER_MANAGER) else 0


def apiserver_port_key(topology: Topology, instance: str) -> str:
    if not topology.load_balanced:
        return "apiserver"
    return f"apiserver_{topology.instances(APISERVER).index(instance) + 1}"


PROXY_BINDING = f"{HARNESS_RBAC_PREFIX}node-proxier"  # kubeadm names its own "kubeadm:node-proxier"
SERVICE_ACCOUNT_BINDING = f"{HARNESS_RBAC_PREFIX}replay-serviceaccount"
USER_BINDING = f"{HARNESS_RBAC_PREFIX}replay-user"


def cluster_role_binding(name: str, role: str, subject: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]}


def grants(identities: str) -> list[dict[str, Any]]:
    """The rights of the harness's users that their groups do not give them: every node's kube-proxy gets the
    bootstrap role system:node-proxier as kubeadm grants kube-proxy's ServiceAccount, a replay's service-account
    and user classes (SERVICE_ACCOUNT_USER, REPLAY_USER) cluster-admin, as the load has; with identities
    "production", kwok and the load get cluster-admin."""
    namespace, name = SERVICE_ACCOUNT_USER.split(":")[2:]
    found = [cluster_role_binding(PROXY_BINDING, "system:node-proxier",
                                  {"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}),
             cluster_role_binding(SERVICE_ACCOUNT_BINDING, "cluster-admin",
                                  {"kind": "ServiceAccount", "name": name, "namespace": namespace}),
             cluster_role_binding(USER_BINDING, "cluster-admin",
                                  {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": REPLAY_USER})]
    if identities == "production":
        found += [cluster_role_binding(f"{HARNESS_RBAC_PREFIX}{user}", "cluster-admin",
                                       {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user})
                  for user in (KWOK_USER, LOAD_USER)]
    return found


def create_bindings(access: ClusterAccess, bindings: list[dict[str, Any]]) -> None:
    """Create ClusterRoleBindings as `access` (the admin); those already there are left as they are."""
    from loadtests.kube.rest import RestClient

    client = RestClient(access, timeout_s=30.0)
    try:
        for binding in bindings:
            client.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding, exist_ok=True)
    finally:
        client.close()


def with_extra_flags(argv: list[str], extra: Sequence[str]) -> list[str]:
    """A command line with a plan's extra flags last (Go's flag parsing keeps the last), except admission
    plugins, which are merged so that the harness's own stay on: plugins the plan enables join the harness's
    --enable-admission-plugins, and plugins it disables leave it (the apiserver refuses a plugin in both)."""
    extra = list(extra)
    own = next((i for i, flag in enumerate(argv) if flag.startswith(f"{ADMISSION_FLAG}=")), None)
    if own is None:
        return argv + extra
    plugins = [p for p in argv[own].split("=", 1)[1].split(",") if p]
    for flag in extra:
        name, _, value = flag.partition("=")
        if name == ADMISSION_FLAG:
            plugins += [p for p in value.split(",") if p and p not in plugins]
        elif name == "--disable-admission-plugins":
            plugins = [p for p in plugins if p not in value.split(",")]
    merged = [f"{ADMISSION_FLAG}={','.join(plugins)}"] if plugins else []
    return argv[:own] + merged + argv[own + 1:] + [f for f in extra if f.split("=", 1)[0] != ADMISSION_FLAG]


def clusters_root() -> Path:
    """Where local control planes keep their folders: LOADTEST_CLUSTERS when set (a test suite's own, so that a
    stale folder of some other run on the machine is not its business), else the cache's `clusters/`."""
    env = os.environ.get("LOADTEST_CLUSTERS")
    return Path(env).expanduser() if env else binaries_mod.cache_root() / "clusters"


def cluster_dir(name: str) -> Path:
    return clusters_root() / name


def local_clusters() -> list[ClusterState]:
    """Every local cluster with a state file in the cache, running or not."""
    root = clusters_root()
    found = [ClusterState.load(folder) for folder in sorted(root.iterdir())] if root.is_dir() else []
    return [state for state in found if state is not None]


def orphaned_clusters() -> list[ClusterState]:
    """Clusters of runs whose harness is gone (killed outright) and that still run."""
    return [state for state in local_clusters() if state.orphaned()]


def stale_clusters() -> list[ClusterState]:
    """Folders of runs whose harness is gone and whose processes are gone too: keys left behind, nothing else."""
    return [state for state in local_clusters()
            if state.tied_to_owner and not state.owner_alive() and not state.running()]


def leftover_lines() -> tuple[list[str], list[str]]:
    """What runs that are gone left behind, one line each: (clusters still running, folders whose processes are
    gone too). Both hold the cluster's CA and admin keys, kubeconfigs and etcd's data, so both are named until
    `loadtest down --orphans` removes them."""
    running = [f"orphaned: cluster {state.name} (its run, pid {state.owner_pid}, is gone): "
               + ", ".join(state.running_names()) + "; ports "
               + ", ".join(f"{k}={v}" for k, v in state.ports.items()) + "; stop it: loadtest down --orphans"
               for state in orphaned_clusters()]
    stale = [f"stale: cluster folder {state.directory} of a run that is gone (pid {state.owner_pid}): nothing of "
             "it runs, but it holds the cluster's keys and etcd's data; remove it: loadtest down --orphans"
             for state in stale_clusters()]
    return running, stale


@dataclass(frozen=True)
class Replacement:
    """One instance replaced by a rolling upgrade, each stage's seconds: stopped (SIGTERM until it exited),
    started on the new version until ready, and back in the load balancer's rotation; its new pid."""

    instance: str
    stop_s: float
    start_to_ready_s: float
    back_s: float
    pid: int

    @property
    def stop_to_ready_s(self) -> float:
        return self.stop_s + self.start_to_ready_s


@dataclass
class LocalOptions:
    name: str = "default"
    kube_version: str = versions.DEFAULT_KUBE_VERSION
    heartbeat_factor: float = 1.0
    events_etcd: bool = False
    leases_etcd: bool = False
    apiserver_port: int | None = None  # None: choose a free port
    directory: Path | None = None  # default: <cache>/clusters/<name>
    kwok: bool = True  # False: no kwok controller (the cluster stands in for one someone else runs)
    tied_to_owner: bool = False  # a run's own cluster: dies with the process that started it
    audit: AuditLog | None = None  # the apiserver's audit log (who sent which request), when wanted
    component_args: dict[str, list[str]] = field(default_factory=dict)  # extra flags, after the harness's own
    etcd_storage: str = "disk"  # "memory": etcd's data in a tmpfs folder (MEMORY_ROOT), removed on down
    identities: str = "admin"  # who kwok and the load are to the apiserver (plan.IDENTITIES, pki.py)
    kept_logs: Path | None = None  # where the components' logs are kept after down (a run's results folder)
    topology: Topology = field(default_factory=Topology)  # how many of each component (config/topology.py)
    # kube-apiserver's /debug/pprof (--profiling) and etcd's (--enable-pprof, on its client URL): measure/profiles.py
    profiling: bool = True
    # load scenarios sent as users of their own (config/tenants.py): made before kwok and the steps start
    tenants: dict[str, Tenant] = field(default_factory=dict)

    @property
    def own_etcds(self) -> tuple[str, ...]:
        """The resources kept in an etcd of their own (OWN_ETCD's keys), in OWN_ETCD's order."""
        wanted = {"events": self.events_etcd, "leases": self.leases_etcd}
        return tuple(resource for resource in OWN_ETCD if wanted[resource])


class LocalControlPlane:
    """Bring a local control plane up and down; `up` tears down whatever it started if it fails or is interrupted."""

    def __init__(self, options: LocalOptions, bins: Binaries | None = None) -> None:
        self.options = options
        self.directory = options.directory or cluster_dir(options.name)
        self.bins = bins
        self.state: ClusterState | None = None
        self.group: ProcessGroup | None = None
        self._pki: ClusterPki | None = None  # the certificates of a cluster this object started

    # -------------------------------------------------------------------------------------------- up
    def up(self, log: Any = print) -> TargetInfo:
        existing = ClusterState.load(self.directory)
        if existing and any(p.alive() for p in existing.processes):
            raise TargetError(
                f"cluster {self.options.name!r} is already running ({self.directory}); "
                f"use it, or stop it first: loadtest down --name {self.options.name}"
            )
        bins = self.bins or binaries_mod.find(self.options.kube_version)
        ports = self._choose_ports()
        if self.directory.exists():
            shutil.rmtree(self.directory)
        binaries_mod.cache_folder(self.directory.parent)
        self.directory.mkdir()
        self.directory.chmod(0o700)
        state = ClusterState(name=self.options.name, directory=str(self.directory),
                             kube_version=bins.kube_version, versions=bins.versions(), ports=ports,
                             owner_pid=os.getpid(), owner_create_time=psutil.Process().create_time(),
                             owner_since_boot_s=started_since_boot(psutil.Process()),
                             tied_to_owner=self.options.tied_to_owner)
        state.server = f"https://{LOOPBACK}:{ports['apiserver']}"
        state.etcd_metrics_url = f"http://{LOOPBACK}:{ports['etcd_metrics']}/metrics"
        state.save()
        self.state, self.group = state, ProcessGroup(state, self.directory / "logs", self.options.kept_logs)
        untrack = SHUTDOWN.track(state.running_names)
        try:
            self._start_all(bins, state, log)
        except BaseException as error:
            # Ctrl-C, a dead component or a timeout: leave nothing running
            with SHUTDOWN.shielded():
                self.group.stop_all()
            untrack()
            if type(error) is TargetError:  # a component that exited or never became ready: not the input's fault
                raise ComponentFailed(str(error)) from None
            raise
        state.ready = True
        state.save()
        return self.info()

    def _argv(self, component: str, argv: list[str]) -> list[str]:
        """A component's command line with the plan's extra flags last (with_extra_flags)."""
        return with_extra_flags(argv, self.options.component_args.get(component, []))

    @property
    def memory_dir(self) -> Path:
        """Where etcd keeps its data with etcd_storage "memory"; named after the cluster folder (its name and a
        digest of its whole path: two folders of one name elsewhere, as the test workers' "cluster0", must not
        share one), so `down` finds it even for a cluster whose options it does not know."""
        digest = hashlib.sha256(str(self.directory.resolve()).encode()).hexdigest()[:10]
        return MEMORY_ROOT / f"k8s-loadtest-{self.directory.name}-{digest}"

    @property
    def haproxy_socket(self) -> Path:
        """HAProxy's runtime API: a Unix socket only root and its owner reach, in the temp folder (a socket's path
        must be short, and the cluster folder's may not be), named after the cluster folder as memory_dir is."""
        digest = hashlib.sha256(str(self.directory.resolve()).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"k8s-loadtest-{self.directory.name[:20]}-{digest}.sock"

    def folders(self) -> list[Path]:
        """The cluster folder, etcd's data (in memory or on disk) and the audit log's folder."""
        found = [self.directory]
        if self.options.etcd_storage == "memory":
            found.append(self.memory_dir)
        if self.options.audit is not None:
            found.append(self.options.audit.directory)
        return found

    def _etcd_data_dir(self, component: str) -> Path:
        if self.options.etcd_storage != "memory":
            return self.directory / component
        if not MEMORY_ROOT.is_dir():
            raise TargetError(f"etcd_storage 'memory' needs a tmpfs at {MEMORY_ROOT}, which this machine lacks; "
                              "use etcd_storage 'disk'")
        self.memory_dir.mkdir(mode=0o700, exist_ok=True)
        return self.memory_dir / component

    def _choose_ports(self) -> dict[str, int]:
        names = port_names(self.options.topology, self.options.own_etcds)
        wanted = self.options.apiserver_port
        if wanted is not None and not port_is_free(wanted):
            raise TargetError(f"port {wanted} on {LOOPBACK} is in use; choose another with --port, "
                              "or leave it out to use a free port")
        chosen = dict(zip(names, free_ports(len(names)), strict=True))
        if wanted is not None:
            chosen["apiserver"] = wanted
        return chosen

    def _start_all(self, bins: Binaries, state: ClusterState, log: Any) -> None:
        assert self.group is not None
        topology = self.options.topology
        pki = create_cluster_pki(self.directory / "pki", self.options.identities)
        ports = state.ports
        admin_kubeconfig = write_kubeconfig(self.directory / "kubeconfig", state.server, pki.ca.cert, pki.admin,
                                            "admin")
        state.kubeconfig = str(admin_kubeconfig)
        state.save()

        members = topology.instances(ETCD)
        self._start_etcd(bins, pki, members, log)
        for resource in self.options.own_etcds:
            self._start_etcd(bins, pki, [f"{resource}-etcd"], log)
        state.etcd_members = {m: f"http://{LOOPBACK}:{ports[port_key(m, 'metrics')]}/metrics" for m in members}
        self._pki = pki

        for instance in topology.instances(APISERVER):
            url = f"https://{LOOPBACK}:{ports[apiserver_port_key(topology, instance)]}"
            log(f"starting {instance} {bins.kube_version} on {url}")
            record = self.group.start(instance, self._instance_argv(bins, instance))
            state.apiservers[instance] = url
            wait_for(lambda i=instance: self._ready(i), 120, f"{instance} ready",
                     abort=lambda r=record: self.group.exited(r))
        if topology.load_balanced:
            self._start_load_balancer(pki, state, log)
        create_bindings(self.access(), grants(self.options.identities))
        tenants_mod.set_up(self.access(), self.directory, self.options.tenants, log)

        write_kubeconfig(self.directory / "scheduler.kubeconfig", state.server, pki.ca.cert, pki.scheduler,
                         "kube-scheduler")
        write_kubeconfig(self.directory / "controller-manager.kubeconfig", state.server, pki.ca.cert,
                         pki.controller_manager, "kube-controller-manager")
        kwok_kubeconfig = write_kubeconfig(self.directory / "kwok.kubeconfig", state.server, pki.ca.cert,
                                           pki.kwok, "kwok-controller")
        write_private(self.directory / "scheduler-config.yaml", yaml.safe_dump({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.directory / "scheduler.kubeconfig"), "qps": CLIENT_QPS,
                                 "burst": CLIENT_BURST},
            "leaderElection": {"leaderElect": topology.schedulers > 1},
        }).encode())

        log("starting kube-scheduler, kube-controller-manager" + (" and kwok" if self.options.kwok else ""))
        controllers = topology.instances(SCHEDULER) + topology.instances(CONTROLLER_MANAGER)
        started = [self.group.start(instance, self._instance_argv(bins, instance)) for instance in controllers]
        if self.options.kwok:
            kwok_config = kwok_mod.write_config(self.directory / "kwok.yaml", self.options.heartbeat_factor)
            started.append(self.group.start("kwok", self._argv("kwok", kwok_mod.local_argv(
                bins.kwok, kwok_kubeconfig, kwok_config, ports["kwok"], self.options.heartbeat_factor,
                tls=(pki.kwok.cert, pki.kwok.key)))))

        def first_exit() -> str | None:
            return next((r for r in (self.group.exited(p) for p in started) if r), None)

        for instance in controllers:
            wait_for(lambda i=instance: self._ready(i), 60, f"{instance} healthy", abort=first_exit)
        if self.options.kwok:
            wait_for(lambda: kwok_mod.healthy(ports["kwok"]), 60, "kwok healthy", abort=first_exit)

    def _instance_argv(self, bins: Binaries, instance: str) -> list[str]:
        """The command line of an apiserver, scheduler or controller-manager instance on `bins` (one builder for
        the first start and for a rolling upgrade's restart on another version)."""
        assert self.state is not None and self._pki is not None
        pki, ports, component = self._pki, self.state.ports, component_of(instance)
        certs = f"--cert-dir={self.directory / instance.replace('kube-', '')}-certs"
        if component == APISERVER:
            members = self.options.topology.instances(ETCD)
            etcd_servers = ",".join(f"https://{LOOPBACK}:{ports[port_key(m)]}" for m in members)
            return self._apiserver_argv(bins, pki, ports, instance, etcd_servers)
        port = ports[port_key(instance)]
        if component == SCHEDULER:
            kubeconfig = self.directory / "scheduler.kubeconfig"
            return self._argv("kube-scheduler", [
                str(bins.kube_scheduler), f"--config={self.directory / 'scheduler-config.yaml'}",
                f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
                f"--bind-address={LOOPBACK}", f"--secure-port={port}", certs,
            ])
        return self._controller_manager_argv(bins, pki, port, self.directory / "controller-manager.kubeconfig",
                                             instance, leader_elect=self.options.topology.controller_managers > 1)

    def _ready(self, instance: str) -> bool:
        """An apiserver answers /readyz on its own port (the admin's certificate); a scheduler or controller-
        manager /healthz on its secure port."""
        assert self.state is not None
        if component_of(instance) == APISERVER:
            return http_ok(f"{self.state.apiservers[instance]}/readyz", self.access().ssl_context())
        return http_ok(f"https://{LOOPBACK}:{self.state.ports[port_key(instance)]}/healthz", unverified_context())

    def replace(self, instance: str, bins: Binaries, log: Callable[[str], None] = print,
                timeout_s: float = 120.0) -> Replacement:
        """Stop one apiserver, scheduler or controller-manager and start it again on `bins`: a rolling upgrade's
        move. An apiserver behind the load balancer leaves its rotation first (new connections go to the others)
        and comes back once it answers /readyz. The times of each stage are returned; a new instance that exits
        or is not ready within `timeout_s` is a TargetError naming it."""
        assert self.state is not None and self.group is not None
        state, group = self.state, self.group
        record = next((r for r in state.processes if r.component == instance and r.alive()), None)
        if record is None:
            raise TargetError(f"{instance} is not running: it cannot be replaced")
        balanced = component_of(instance) == APISERVER and self.options.topology.load_balanced
        if balanced:
            haproxy.set_state(self.haproxy_socket, instance, "maint")
        out = time.monotonic()
        log(f"replacing {instance}: " + ("out of the load balancer's rotation, " if balanced else "")
            + f"stopping it, starting it on {bins.kube_version}")
        group.stop(record, REPLACE_STOP_TIMEOUT_S)
        stopped = time.monotonic()
        new = group.start(instance, self._instance_argv(bins, instance))
        wait_for(lambda: self._ready(instance), timeout_s, f"{instance} ready on {bins.kube_version}",
                 abort=lambda: group.exited(new))
        ready = time.monotonic()
        if balanced:
            haproxy.set_state(self.haproxy_socket, instance, "ready")
            wait_for(lambda: haproxy.servers_up(self.haproxy_socket).get(instance, False), 30,
                     f"{LOAD_BALANCER} sending connections to {instance} again", abort=lambda: group.exited(new))
        back = time.monotonic()
        return Replacement(instance=instance, stop_s=stopped - out, start_to_ready_s=ready - stopped,
                           back_s=back - ready, pid=new.pid)

    def _start_load_balancer(self, pki: ClusterPki, state: ClusterState, log: Any) -> None:
        """HAProxy in front of the apiservers, then every client through it: up once it serves /readyz."""
        assert self.group is not None and pki.health_checker is not None
        ports = state.ports
        config = haproxy.write_config(
            self.directory / "haproxy.cfg", ports["apiserver"], ports[HAPROXY_HEALTH],
            {a: int(u.rsplit(":", 1)[1]) for a, u in state.apiservers.items()}, pki.ca.cert, pki.health_checker,
            self.haproxy_socket)
        log(f"starting {LOAD_BALANCER} on {state.server} in front of {len(state.apiservers)} apiservers")
        record = self.group.start(LOAD_BALANCER, haproxy.argv(config))
        admin_ctx = self.access().ssl_context()
        sock = self.haproxy_socket

        def every_apiserver_in() -> bool:
            return (haproxy.healthy(ports[HAPROXY_HEALTH]) and sock.exists()
                    and all(haproxy.servers_up(sock).get(a) for a in state.apiservers)
                    and http_ok(f"{state.server}/readyz", admin_ctx))

        wait_for(every_apiserver_in, 60, f"{LOAD_BALANCER} serving every apiserver",
                 abort=lambda: self.group.exited(record))

    def _start_etcd(self, bins: Binaries, pki: ClusterPki, members: list[str], log: Any) -> None:
        """One etcd cluster of `members` (peers over TLS with client certificates, as its clients), started
        together: a member waits for a quorum of its peers before it serves."""
        assert self.group is not None
        ports = self.state.ports if self.state else {}
        peers = ",".join(f"{m}=https://{LOOPBACK}:{ports[port_key(m, 'peer')]}" for m in members)
        records = []
        for member in members:
            client, peer = ports[port_key(member)], ports[port_key(member, "peer")]
            log(f"starting {member} {versions.ETCD_VERSION} on https://{LOOPBACK}:{client}")
            records.append(self.group.start(member, self._argv("etcd", [
                str(bins.etcd), f"--name={member}", f"--data-dir={self._etcd_data_dir(member)}",
                f"--listen-client-urls=https://{LOOPBACK}:{client}",
                f"--advertise-client-urls=https://{LOOPBACK}:{client}",
                f"--listen-peer-urls=https://{LOOPBACK}:{peer}",
                f"--initial-advertise-peer-urls=https://{LOOPBACK}:{peer}",
                f"--initial-cluster={peers}", "--initial-cluster-state=new",
                f"--initial-cluster-token={self.options.name}-{members[0]}",
                f"--listen-metrics-urls=http://{LOOPBACK}:{ports[port_key(member, 'metrics')]}",
                f"--cert-file={pki.etcd_server.cert}", f"--key-file={pki.etcd_server.key}",
                f"--trusted-ca-file={pki.ca.cert}", "--client-cert-auth=true",
                f"--peer-cert-file={pki.etcd_server.cert}", f"--peer-key-file={pki.etcd_server.key}",
                f"--peer-trusted-ca-file={pki.ca.cert}", "--peer-client-cert-auth=true",
                "--log-level=warn", *(["--enable-pprof"] if self.options.profiling else []),
            ])))
        for member, record in zip(members, records, strict=True):
            metrics = ports[port_key(member, "metrics")]
            wait_for(lambda m=metrics: http_ok(f"http://{LOOPBACK}:{m}/health", expect=b'"health":"true"'), 60,
                     f"{member} healthy", abort=lambda r=record: self.group.exited(r))

    def _apiserver_argv(self, bins: Binaries, pki: ClusterPki, ports: dict[str, int], instance: str,
                        etcd_servers: str) -> list[str]:
        argv = [
            str(bins.kube_apiserver),
            f"--etcd-servers={etcd_servers}",
            f"--etcd-cafile={pki.ca.cert}",
            f"--etcd-certfile={pki.apiserver_etcd_client.cert}",
            f"--etcd-keyfile={pki.apiserver_etcd_client.key}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
            f"--secure-port={ports[apiserver_port_key(self.options.topology, instance)]}",
            f"--tls-cert-file={pki.apiserver.cert}", f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            # a node's kubelet may change only its own Node, Lease and pods (node agents send as their node)
            f"{ADMISSION_FLAG}=NodeRestriction",
            "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cert-dir={self.directory / instance.replace('kube-', '')}-certs",
            "--allow-privileged=true",
            # the advertise address is loopback, which the lease endpoint reconciler refuses
            "--endpoint-reconciler-type=none",
            f"--profiling={str(self.options.profiling).lower()}",
        ]
        if self.options.audit is not None:
            first = instance == self.options.topology.instances(APISERVER)[0]
            argv.extend(self.options.audit.apiserver_flags(self.options.audit.instance_path(instance, first)))
        if self.options.own_etcds:
            argv.append("--etcd-servers-overrides=" + ",".join(
                f"{OWN_ETCD[r]}#https://{LOOPBACK}:{ports[port_key(f'{r}-etcd')]}" for r in self.options.own_etcds))
        return self._argv("kube-apiserver", argv)

    def _controller_manager_argv(self, bins: Binaries, pki: ClusterPki, port: int, kubeconfig: Path,
                                 instance: str, leader_elect: bool) -> list[str]:
        return self._argv("kube-controller-manager", [
            str(bins.kube_controller_manager), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={LOOPBACK}", f"--secure-port={port}",
            f"--cert-dir={self.directory / instance.replace('kube-', '')}-certs",
            f"--leader-elect={str(leader_elect).lower()}", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            f"--cluster-signing-cert-file={pki.ca.cert}", f"--cluster-signing-key-file={pki.ca.key}",
            f"--kube-api-qps={CLIENT_QPS}", f"--kube-api-burst={CLIENT_BURST}",
            f"--node-monitor-grace-period={self._scaled(NODE_MONITOR_GRACE_S)}s",
        ])

    def _scaled(self, seconds: float) -> int:
        return kwok_mod.scaled(seconds, self.options.heartbeat_factor)

    # -------------------------------------------------------------------------------------------- observe
    def _loaded_state(self) -> ClusterState:
        state = self.state or ClusterState.load(self.directory)
        if state is None:
            raise TargetError(f"no cluster named {self.options.name!r} ({self.directory}); start one: loadtest up")
        self.state = state
        return state

    def access(self, user: str = "admin") -> ClusterAccess:
        """The admin's access, or another user's of the cluster's certificates ("load", "kwok")."""
        state = self._loaded_state()
        pki = Path(state.directory) / "pki"
        return ClusterAccess(server=state.server, kubeconfig=state.kubeconfig, ca_file=str(pki / "ca.crt"),
                             cert_file=str(pki / f"{user}.crt"), key_file=str(pki / f"{user}.key"))

    def node_identities(self, names: Sequence[str]) -> NodeIdentities:
        """Every named node's kubelet identity, issued where missing (kept for later steps), and kube-proxy's."""
        state = self._loaded_state()
        pki = Path(state.directory) / "pki"
        folder = pki / NODES_FOLDER
        issue_node_certificates(pki, folder, names)
        user = pki / f"{USER_STEM}.crt"  # a cluster brought up before the user class had one has none: the load's
        return NodeIdentities(server=state.server, kubeconfig=state.kubeconfig, ca_file=str(pki / "ca.crt"),
                              folder=str(folder), key_file=str(folder / NODE_KEY),
                              proxy_cert_file=str(pki / f"{PROXY_STEM}.crt"),
                              proxy_key_file=str(pki / f"{PROXY_STEM}.key"),
                              service_account_cert_file=str(pki / f"{SERVICE_ACCOUNT_STEM}.crt"),
                              service_account_key_file=str(pki / f"{SERVICE_ACCOUNT_STEM}.key"),
                              user_cert_file=str(user) if user.is_file() else "",
                              user_key_file=str(pki / f"{USER_STEM}.key") if user.is_file() else "")

    def info(self) -> TargetInfo:
        state = self._loaded_state()
        metrics_urls = {record.component: f"https://{LOOPBACK}:{state.ports[port_key(record.component)]}/metrics"
                        for record in state.processes
                        if component_of(record.component) in (SCHEDULER, CONTROLLER_MANAGER)}
        if "kwok" in state.ports and any(record.component == "kwok" for record in state.processes):
            metrics_urls["kwok"] = f"https://{LOOPBACK}:{state.ports['kwok']}/metrics"  # served with its TLS
        pki = Path(state.directory) / "pki"
        etcd_client = ClusterAccess(server=f"https://{LOOPBACK}:{state.ports['etcd']}", kubeconfig="",
                                    ca_file=str(pki / "ca.crt"), cert_file=str(pki / "apiserver-etcd-client.crt"),
                                    key_file=str(pki / "apiserver-etcd-client.key"))
        production = self.options.identities == "production"
        return TargetInfo(access=self.access(), etcd_metrics_url=state.etcd_metrics_url,
                          versions=dict(state.versions), pids=state.pids(), kind="local",
                          metrics_urls=metrics_urls, audit_logs=self._audit_logs(state),
                          etcd_client=etcd_client, load_access=self.access("load") if production else None,
                          node_access=self.access("kwok") if production else None,
                          scenario_access=tenants_mod.scenario_access(Path(state.directory), state.server,
                                                                      self.options.tenants),
                          apiservers=dict(state.apiservers) if len(state.apiservers) > 1 else {},
                          etcd_members=dict(state.etcd_members) if len(state.etcd_members) > 1 else {})

    def _audit_logs(self, state: ClusterState) -> list[Path]:
        audit = self.options.audit
        instances = list(state.apiservers) or [APISERVER]
        return [audit.instance_path(a, i == 0) for i, a in enumerate(instances)] if audit else []

    def status(self) -> dict[str, Any]:
        state = ClusterState.load(self.directory)
        if state is None:
            return {"name": self.options.name, "running": False}
        return {
            "name": state.name,
            "running": any(p.alive() for p in state.processes),
            "ready": state.ready,
            "server": state.server,
            "kubeconfig": state.kubeconfig,
            "etcd_metrics_url": state.etcd_metrics_url,
            "versions": state.versions,
            "components": [{"component": p.component, "pid": p.pid, "alive": p.alive(), "log": p.log}
                           for p in state.processes],
            "ports": state.ports,
        }

    def dead_components(self) -> list[str]:
        """Components that were started and are no longer running (a crashed etcd, say), where the cluster
        does not survive it: one etcd member of three, or an apiserver of two, gone is the health watch's
        event, not a dead cluster."""
        state = self._loaded_state()
        stopping = self.group.stopping if self.group else set()  # a rolling upgrade's, on purpose
        dead = [p.component for p in state.processes if not p.alive() and p.pid not in stopping]
        by_group: dict[str, list[str]] = {}
        for instance in dead:
            by_group.setdefault(component_of(instance), []).append(instance)
        return [i for group, lost in by_group.items() if len(lost) > tolerated(group, state) for i in lost]

    def stopped_from_outside(self, settle_s: float = STOPPED_TOGETHER_S) -> str | None:
        """What ended the control plane when it was stopped from outside, not broken: a `loadtest down` (its
        request in the cluster folder says who asked, and when), or every component ending within moments of
        each other (health.stopped_together), watched for up to `settle_s` once one has ended. None while every
        component runs, or when one ended on its own: the health watch names that one."""
        if (request := DownRequest.load(self.directory)) is not None:
            return f"{OUTSIDE} ({request.said()})"
        state = self.state
        stopping = self.group.stopping if self.group else set()  # a rolling upgrade's, on purpose
        records = [r for r in state.processes if r.pid not in stopping] if state else []
        gone_at: dict[str, float | None] = dict.fromkeys(r.component for r in records)
        first_look = time.monotonic()

        def all_gone() -> bool:
            for record in records:
                if gone_at[record.component] is None and not record.alive():
                    gone_at[record.component] = time.monotonic() - first_look
            return all(at is not None for at in gone_at.values())

        all_gone()
        if all(at is None for at in gone_at.values()):
            return None
        poll_until(all_gone, settle_s, interval_s=0.1)
        return stopped_together(gone_at, settle_s)

    def health_checks(self) -> list[HealthCheck]:
        """Each component's process and its health endpoint, those others depend on first (etcd before
        kube-apiserver), so a hung etcd is named as the cause rather than the apiserver it stalls."""
        state = self._loaded_state()
        ports = state.ports
        insecure = unverified_context()
        admin = self.access().ssl_context()
        etcd_ok = b'"health":"true"'
        # a full etcd (the NOSPACE alarm) still answers reads and deletes: the step records the alarm and the
        # refused writes (measure/etcd.py) rather than the run stopping
        etcd_health = f"/health?exclude={NOSPACE}"

        def check(instance: str) -> tuple[str, str, Callable[[str], bool]] | None:
            """Each check keeps its connection between rounds (a round each second: a handshake each would cost
            the harness and the component more than the check)."""
            component = component_of(instance)
            if component == ETCD or component in OWN_ETCD_INSTANCES:
                plain = KeptConnection()
                return (f"http://{LOOPBACK}:{ports.get(port_key(instance, 'metrics'))}{etcd_health}", etcd_health,
                        lambda u: http_ok(u, expect=etcd_ok, kept=plain))
            if component == APISERVER:
                url, as_admin = state.apiservers.get(instance) or state.server, KeptConnection(admin)
                return f"{url}/livez", "/livez", lambda u: http_ok(u, kept=as_admin)
            if component in (SCHEDULER, CONTROLLER_MANAGER):
                unverified = KeptConnection(insecure)
                return (f"https://{LOOPBACK}:{ports.get(port_key(instance))}/healthz", "/healthz",
                        lambda u: http_ok(u, kept=unverified))
            if component == LOAD_BALANCER:
                plain = KeptConnection()
                return (f"http://{LOOPBACK}:{ports.get(HAPROXY_HEALTH)}/healthz", "/healthz",
                        lambda _u: haproxy.healthy(ports[HAPROXY_HEALTH], plain))
            if component == "kwok":
                both = (KeptConnection(), KeptConnection(insecure))
                return (f"{LOOPBACK}:{ports.get('kwok')}", "/healthz",
                        lambda _u: kwok_mod.healthy(ports["kwok"], both))
            return None

        group = self.group  # None for a cluster another process started: how its processes ended is not known here
        return [replace(endpoint_check(record.component, record, *found,
                                       exit_reason=group.exit_reason if group else None),
                        group=component_of(record.component),
                        tolerated=tolerated(component_of(record.component), state))
                for record in state.processes if (found := check(record.component)) is not None]

    # -------------------------------------------------------------------------------------------- down
    def down(self, keep_files: bool = False, timeout_s: float = 15.0,
             request: DownRequest | None = None) -> dict[str, Any]:
        """Stop every recorded process by pid (SIGKILL after timeout_s) and check that none of them still
        holds a port; then remove the cluster's folder (its keys with it) unless keep_files. Signals do not
        cut it short. `request`: who asked (`loadtest down`), written in the folder before anything stops, so a
        run that owns the cluster says it was stopped from outside; that run, alive, removes the folder itself
        as it ends (keeping its logs): `left_to` names it."""
        state = ClusterState.load(self.directory) if self.state is None else self.state
        if state is None:
            return {"stopped": [], "killed": [], "left_to": 0}
        owner = state.owner_pid if request is not None and state.tied_to_owner and state.owner_alive() else 0
        if request is not None:
            with contextlib.suppress(OSError):  # a folder that takes no file: the run names a component instead
                request.save(self.directory)
        keep_files = keep_files or bool(owner)
        with SHUTDOWN.shielded():
            pids = [p.pid for p in state.processes]
            group = self.group or ProcessGroup(state, self.directory / "logs")
            stopped = [p.component for p in state.processes if p.alive()]
            killed = group.stop_all(timeout_s)
            still = [p.component for p in state.processes if p.alive()]
            if still:
                raise TargetError(f"could not stop: {', '.join(still)}; see {self.directory}/state.json")
            bound = listening_ports(pids)
            if bound:
                raise TargetError(f"ports still bound after stop: {bound}")
            shutil.rmtree(self.memory_dir, ignore_errors=True)  # etcd's data in memory is never kept
            self.haproxy_socket.unlink(missing_ok=True)  # HAProxy leaves it when killed
            if not keep_files:
                shutil.rmtree(self.directory, ignore_errors=True)
        return {"stopped": stopped, "killed": killed, "left_to": owner}


RUN_STOP_TIMEOUT_S = 5.0


class RunControlPlane:
    """A local control plane private to one run (the Target of `loadtest run`): a fresh etcd, logs kept with
    the results, the cluster folder (which holds keys) removed afterwards."""

    def __init__(self, options: LocalOptions, out_dir: Path, log: Callable[[str], None] = print) -> None:
        self.out_dir = out_dir
        self.log = log
        self.plane = LocalControlPlane(replace(options, kept_logs=out_dir / KEPT_LOGS))
        self._untrack: Callable[[], None] | None = None

    @property
    def name(self) -> str:
        return self.plane.options.name

    def up(self) -> TargetInfo:
        self._untrack = SHUTDOWN.track(lambda: self.plane.state.running_names() if self.plane.state else [])
        return self.plane.up(log=self.log)

    def info(self) -> TargetInfo:
        return self.plane.info()

    def dead_components(self) -> list[str]:
        return self.plane.dead_components()

    def node_identities(self, names: Sequence[str]) -> NodeIdentities:
        return self.plane.node_identities(names)

    def health_checks(self) -> list[HealthCheck]:
        return self.plane.health_checks()

    def stopped_from_outside(self) -> str | None:
        return self.plane.stopped_from_outside()

    def replace(self, instance: str, bins: Binaries) -> Replacement:
        return self.plane.replace(instance, bins, log=self.log)

    def folders(self) -> list[Path]:
        return [*self.plane.folders(), self.out_dir]

    def down(self) -> None:
        """Stop first; then keep the logs with the results (a full disk may refuse them: the logs are
        then lost, never the teardown) and remove the cluster folder, which holds keys."""
        with SHUTDOWN.shielded():
            try:
                # a run's cluster is thrown away: no reason to wait long for a component stuck on a hung one
                self.plane.down(keep_files=True, timeout_s=RUN_STOP_TIMEOUT_S)
            finally:
                logs = self.plane.directory / "logs"
                try:
                    if logs.is_dir():
                        shutil.copytree(logs, self.out_dir / KEPT_LOGS, dirs_exist_ok=True)
                except OSError as error:
                    self.log(f"warning: control-plane logs not kept ({os_reason(error)}); they are removed "
                             "with the cluster's folder")
                shutil.rmtree(self.plane.directory, ignore_errors=True)
                if self._untrack is not None:
                    self._untrack()
