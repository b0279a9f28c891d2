"""What one real node's agents send: kubemark's hollow nodes (the real kubelet and kube-proxy code on a fake
runtime) against a local control plane, read from the apiserver's audit log.

The control plane starts as the harness starts one (LocalControlPlane: TLS, client certificates, Node and RBAC
authorization, NodeRestriction), with its audit log on (Metadata for every resource request, a watch when it is
established) and without kwok (the hollow nodes register their own Nodes; kwok manages only nodes it is told to).
Each hollow kubelet and every hollow proxy send as the harness's node agents do (the plane's node_identities,
controlplane/pki.py): a certificate per kubelet (CN system:node:hollow-node-<k>, O system:nodes: the Node
authorizer's user) and one for every proxy: CN system:serviceaccount:kube-system:kube-proxy, O
system:serviceaccounts and system:serviceaccounts:kube-system, the user and groups kubeadm's kube-proxy has (its
ServiceAccount), bound to system:node-proxier as kubeadm binds it (the plane does at up). Each kubemark process
(`--morph=kubelet` and `--morph=proxy` per node) has a kubeconfig of its own and runs in a private mount namespace
(unshare, as root): its own /tmp (the fake runtime's socket and the kubelet's root directory, under the node's
folder) and an /etc/hosts and /etc/resolv.conf that answer the node name's lookups on this machine (the kubelet
looks its own name up at every status cycle), so nothing the nodes send leaves 127.0.0.1. The kubelet's API server
listens on 0.0.0.0 at its own port: kubemark forces that address; nothing here connects to it.

Once every node is Ready: a Deployment per node (its pods pinned by nodeSelector; each pod mounts a ConfigMap and a
Secret besides the default token volume) and a ClusterIP Service over them. Once every pod runs, and a settle, the
steady window: the requests of each agent (by user agent: hollow-kubelet, hollow-proxy) that arrived in it, per
node per minute, by (verb, resource, subresource, scope); the watches held at its end with their selectors and
options; users, groups and user agents; what the clients sent and were answered (client-go's own request and
response headers, logged at --vmodule=round_trippers=8, matched to the audit log by Audit-Id); each process's CPU.
Everything started is stopped by pid at the end, on Ctrl-C, on any signal and on errors.

    .venv/bin/python benchmarks/hollow_node.py [--nodes 3] [--steady-min 5] [--pods-per-node 3] [--out FILE.md]

kubemark is provided first (`loadtest setup --hollow-node`: built from Go modules when the cache lacks it).
Results in benchmarks/results/hollow_node.md; the agents' audit events and the aggregated counts in
benchmarks/results/raw/hollow_node/.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import hollow_audit as ha  # noqa: E402
from benchmarks import hollow_report  # noqa: E402
from benchmarks.markdown import RAW_DIR  # noqa: E402
from loadtests.analysis.metrics import Snapshot  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.binaries.provide import provide_hollow_node  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.controlplane.audit import AuditLog  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.controlplane.processes import ProcessRecord, free_ports, wait_for  # noqa: E402
from loadtests.errors import LoadTestError, TargetError  # noqa: E402
from loadtests.kube import kubeconfig  # noqa: E402
from loadtests.kube.access import ClusterAccess  # noqa: E402
from loadtests.kube.errors import ApiError  # noqa: E402
from loadtests.kube.node_identity import node_user  # noqa: E402
from loadtests.kube.rest import RestClient, send_once  # noqa: E402
from loadtests.shutdown import SHUTDOWN, interrupt_reason  # noqa: E402

CLUSTER = "hollow-node"
NAMESPACE = "hollow-workload"
CONFIGMAP, SECRET, SERVICE = "hollow-config", "hollow-secret", "hollow-pods"
IMAGE = "registry.k8s.io/pause:3.10"
READY_TIMEOUT_S = 300.0
SETTLE_S = 30.0
CHECK_EVERY_S = 10.0
USER_AGENT = "k8s-loadtest/hollow-node-benchmark"
REFERENCE = Path(__file__).resolve().parent.parent / "loadtests" / "data" / "node_agents_reference.yaml"
# each kubemark process: a private /etc/hosts, /etc/resolv.conf and /tmp, then kubemark itself ($4...)
NAMESPACE_SCRIPT = ('mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && mount --bind "$3" /tmp '
                    '&& shift 3 && exec "$@"')
CLIENT_LOG_LEVEL = "--vmodule=round_trippers=8"  # client-go's request and response headers, nothing else verbose


@dataclass(frozen=True)
class HollowNode:
    name: str
    folder: Path
    kubelet_kubeconfig: Path
    proxy_kubeconfig: Path
    kubelet_port: int


@dataclass
class Measured:
    """What one run recorded: its timeline (epoch seconds), the processes' cost, the apiserver's counters."""

    nodes: list[str]
    pods_per_node: int
    timeline: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    metric_before: list[tuple[dict[str, str], float]] = field(default_factory=list)
    metric_after: list[tuple[dict[str, str], float]] = field(default_factory=list)
    failure: str = ""
    ready_at_end: bool = False  # every node still Ready when the window closed
    logs: dict[str, str] = field(default_factory=dict)  # process -> its log's text
    argv: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)  # per agent: what its client sent and was answered
    check: list[list[Any]] = field(default_factory=list)  # the audit log against apiserver_request_total
    completed: str = ""  # what of this record was not kept by its run and was added afterwards, and from where


# --- the hollow nodes -------------------------------------------------------------------------------------------


def namespace_problem() -> str | None:
    """Why a private mount namespace cannot be made here (unshare needs root or user namespaces), else None."""
    if shutil.which("unshare") is None:
        return "no `unshare` (util-linux) on PATH"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True,
                           text=True, check=False, timeout=30)
    return None if probe.returncode == 0 else f"`unshare --mount` failed: {probe.stderr.strip()[:200]}"


def access_kubeconfig(path: Path, access: ClusterAccess, user: str) -> Path:
    """A kubemark process's kubeconfig: the certificate and key of `access`."""
    return kubeconfig.write_kubeconfig(path, access.server, user=user, ca=access.ca_file,
                                       client_cert=access.cert_file, client_key=access.key_file)


def prepare_nodes(plane: LocalControlPlane, count: int) -> list[HollowNode]:
    """Each node's kubelet identity and the proxies' as the harness's node agents have them (the plane's
    node_identities), a kubeconfig of each, and each node's folder (its /tmp, hosts, resolver)."""
    names = [f"hollow-node-{k}" for k in range(count)]
    identities = plane.node_identities(names)
    nodes = []
    for name, port in zip(names, free_ports(count), strict=True):
        folder = plane.directory / "hollow" / name
        (folder / "tmp").mkdir(parents=True)
        (folder / "tmp").chmod(0o1777)
        (folder / "hosts").write_text(f"127.0.0.1 localhost\n127.0.0.1 {name}\n")
        (folder / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        nodes.append(HollowNode(
            name, folder,
            access_kubeconfig(folder / "kubelet.kubeconfig", identities.node_access(name), node_user(name)),
            access_kubeconfig(folder / "proxy.kubeconfig", identities.proxy_access(), "kube-proxy"), port))
    return nodes


def kubemark_argv(kubemark: Path, node: HollowNode, morph: str) -> list[str]:
    """One hollow agent's command line, inside its private mount namespace."""
    own = [f"--morph={morph}", f"--name={node.name}", CLIENT_LOG_LEVEL]
    if morph == "kubelet":
        own += [f"--kubeconfig={node.kubelet_kubeconfig}", "--use-host-image-service=false",
                f"--kubelet-port={node.kubelet_port}", "--kubelet-read-only-port=0"]
    else:
        own.append(f"--kubeconfig={node.proxy_kubeconfig}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, f"hollow-{morph}",
            str(node.folder / "hosts"), str(node.folder / "resolv.conf"), str(node.folder / "tmp"), str(kubemark),
            *own]


def start_nodes(plane: LocalControlPlane, kubemark: Path, nodes: list[HollowNode],
                measured: Measured) -> dict[str, ProcessRecord]:
    assert plane.group is not None
    records = {}
    for node in nodes:
        for morph in ("kubelet", "proxy"):
            argv = kubemark_argv(kubemark, node, morph)
            records[f"{node.name}-{morph}"] = plane.group.start(f"{node.name}-{morph}", argv, env={"TMPDIR": "/tmp"})
            measured.argv[f"{node.name}-{morph}"] = argv
    return records


def first_exit(plane: LocalControlPlane, records: dict[str, ProcessRecord]) -> Any:
    assert plane.group is not None
    group = plane.group
    return lambda: next((why for why in (group.exited(r) for r in records.values()) if why), None)


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in obj.get("status", {}).get("conditions", []))


def nodes_ready(client: RestClient, names: list[str]) -> bool:
    found = {n["metadata"]["name"]: n for n in client.list_items("nodes")}
    return all(name in found and _condition(found[name], "Ready") for name in names)


def pods_running(client: RestClient, expected: int) -> bool:
    pods = client.list_items("pods", NAMESPACE)
    running = [p for p in pods if p.get("status", {}).get("phase") == "Running" and _condition(p, "Ready")]
    return len(running) >= expected


# --- the pods -------------------------------------------------------------------------------------------------


def workload(nodes: list[str], pods_per_node: int) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) to create, in order: a namespace, a ConfigMap and a Secret its pods mount, a
    Service over the pods (EndpointSlices for the proxies), and a Deployment per node pinned to it."""
    ns = f"/api/v1/namespaces/{NAMESPACE}"
    meta = {"namespace": NAMESPACE}
    objects = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (f"{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP, **meta},
                              "data": {"setting": "value"}}),
        (f"{ns}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, **meta},
                           "stringData": {"token": "not-a-secret"}}),
        (f"{ns}/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, **meta},
                            "spec": {"selector": {"app": "hollow"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    ]
    for node in nodes:
        labels = {"app": "hollow", "node": node}
        pod = {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{"name": "pause", "image": IMAGE, "ports": [{"containerPort": 8080}],
                            "volumeMounts": [{"name": "config", "mountPath": "/config"},
                                             {"name": "secret", "mountPath": "/secret"}]}],
            "volumes": [{"name": "config", "configMap": {"name": CONFIGMAP}},
                        {"name": "secret", "secret": {"secretName": SECRET}}]}}
        objects.append((f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"pods-{node}", **meta},
            "spec": {"replicas": pods_per_node, "selector": {"matchLabels": labels}, "template": pod}}))
    return objects


# --- measuring --------------------------------------------------------------------------------------------------


def request_total(plane: LocalControlPlane) -> list[tuple[dict[str, str], float]]:
    """apiserver_request_total's samples, read from the apiserver's /metrics with the admin's certificate."""
    access = plane.access()
    response = send_once("GET", f"{access.server}/metrics", tls=access.ssl_context(), timeout_s=30)
    if response.status != 200:
        return []
    snapshot = Snapshot.parse(response.data.decode(), families={"apiserver_request_total"})
    return [(dict(labels), value) for (name, labels), value in snapshot.items() if name == "apiserver_request_total"]


def cpu_seconds(records: dict[str, ProcessRecord]) -> dict[str, tuple[float, float]]:
    """Each process's CPU seconds so far and its resident memory (MiB)."""
    found = {}
    for name, record in records.items():
        proc = record.process()
        if proc is None:
            continue
        try:
            times, rss = proc.cpu_times(), proc.memory_info().rss
        except psutil.Error:
            continue
        found[name] = (times.user + times.system, rss / 2**20)
    return found


def hold(plane: LocalControlPlane, records: dict[str, ProcessRecord], steady_s: float, measured: Measured) -> None:
    """The steady window: every node's processes must run through it; the counters at both ends."""
    exited = first_exit(plane, records)
    opened = time.time()
    measured.timeline["window_opened"] = opened
    measured.metric_before = request_total(plane)
    before = cpu_seconds(records)
    print(f"steady window: {steady_s / 60:.1f} min", flush=True)
    while (left := opened + steady_s - time.time()) > 0:
        time.sleep(min(CHECK_EVERY_S, left))
        if why := exited():
            raise TargetError(f"during the steady window: {why}")
    measured.timeline["window_closed"] = time.time()
    measured.metric_after = request_total(plane)
    after = cpu_seconds(records)
    span = measured.timeline["window_closed"] - opened
    measured.cpu = {name: {"cpu_percent": 100 * (after[name][0] - before[name][0]) / span, "rss_mib": after[name][1]}
                    for name in after if name in before}


def drive(plane: LocalControlPlane, kubemark: Path, args: argparse.Namespace, measured: Measured) -> None:
    """Nodes up and Ready, pods running on them, a settle, the steady window."""
    client = RestClient(plane.access(), user_agent=USER_AGENT)
    try:
        nodes = prepare_nodes(plane, args.nodes)
        measured.timeline["nodes_started"] = time.time()
        records = start_nodes(plane, kubemark, nodes, measured)
        wait_for(lambda: nodes_ready(client, measured.nodes), READY_TIMEOUT_S, "every hollow node Ready",
                 interval_s=1.0, abort=first_exit(plane, records))
        ready = measured.timeline["nodes_ready"] = time.time()
        print(f"{args.nodes} hollow nodes Ready in {ready - measured.timeline['nodes_started']:.0f} s", flush=True)
        for path, body in workload(measured.nodes, args.pods_per_node):
            client.create(path, body)
        wait_for(lambda: pods_running(client, args.nodes * args.pods_per_node), READY_TIMEOUT_S,
                 "every pod Running and Ready on its hollow node", interval_s=1.0, abort=first_exit(plane, records))
        measured.timeline["pods_running"] = time.time()
        print(f"{args.nodes * args.pods_per_node} pods running; settling {SETTLE_S:.0f} s", flush=True)
        time.sleep(SETTLE_S)
        hold(plane, records, args.steady_min * 60, measured)
        measured.ready_at_end = nodes_ready(client, measured.nodes)
    finally:
        client.close()


def run_once(args: argparse.Namespace, bins: binaries.Binaries, kubemark: Path, scratch: Path) -> Measured:
    """One control plane, the hollow nodes, the window; everything stopped by pid whatever happens."""
    measured = Measured(nodes=[f"hollow-node-{k}" for k in range(args.nodes)], pods_per_node=args.pods_per_node)
    (scratch / "audit").mkdir()
    plane = LocalControlPlane(LocalOptions(name=CLUSTER, kwok=False, audit=AuditLog(scratch / "audit"),
                                           tied_to_owner=True), bins)
    if Path(tempfile.gettempdir()) in plane.directory.resolve().parents:
        raise TargetError(f"the cluster folder {plane.directory} is under {tempfile.gettempdir()}, which each hollow "
                          "node replaces with a private one; point LOADTEST_CACHE elsewhere")
    measured.timeline["control_plane_started"] = time.time()
    try:
        plane.up(log=print)
        try:
            drive(plane, kubemark, args, measured)
        except (TargetError, ApiError) as error:
            measured.failure = str(error)
    finally:
        try:
            plane.down(keep_files=True)
        finally:
            measured.timeline["stopped"] = time.time()
            for log in sorted((plane.directory / "logs").glob("hollow-node-*.log")):
                measured.logs[log.stem] = log.read_text(errors="replace")
            shutil.rmtree(plane.directory, ignore_errors=True)  # its keys and the nodes' folders
    return measured


def audit_files(directory: Path) -> list[Path]:
    """The audit log and its rotations, oldest first (rotated names carry their time; the live file is last)."""
    live = directory / "audit.log"
    return sorted((p for p in directory.glob("audit*.log") if p != live), key=lambda p: p.name) + [live]


def from_raw(out: Path) -> int:
    """The results file written again from its raw record (benchmarks/results/raw/hollow_node/): the agents'
    audit events and what else the run measured; nothing is started."""
    summary = json.loads(gzip.decompress((RAW_DIR / hollow_report.RAW / "summary.json.gz").read_bytes()))
    events = [json.loads(line) for line in gzip.decompress(
        (RAW_DIR / hollow_report.RAW / "agents-audit-events.jsonl.gz").read_bytes()).splitlines()]
    measured = Measured(**summary["measured"])
    reference = yaml.safe_load(REFERENCE.read_text())
    hollow_report.write(out, summary["command"], summary["version"], summary["build_s"], measured,
                        ha.requests_of(events), reference)
    return 1 if measured.failure else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, help="hollow nodes (a kubelet and a proxy process each)")
    parser.add_argument("--steady-min", type=float, default=5.0, help="minutes of the steady window")
    parser.add_argument("--pods-per-node", type=int, default=3, help="pods pinned to each node")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "hollow_node.md")
    parser.add_argument("--from-raw", action="store_true",
                        help="write the results file again from its raw record, starting nothing")
    args = parser.parse_args()
    if args.from_raw:
        return from_raw(args.out)
    SHUTDOWN.install()
    version = os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION
    command = (f".venv/bin/python benchmarks/hollow_node.py --nodes {args.nodes} --steady-min {args.steady_min:g} "
               f"--pods-per-node {args.pods_per_node}")
    try:
        bins = binaries.find(version)
        was_cached = binaries.hollow_node_set(version).is_cached()
        started = time.monotonic()
        kubemark = provide_hollow_node(version, log=lambda line: print(line, flush=True))
        build_s = None if was_cached else time.monotonic() - started
        if problem := namespace_problem():
            raise TargetError(f"each hollow node needs a private mount namespace here: {problem}")
        with tempfile.TemporaryDirectory(prefix="hollow-node-") as scratch:
            measured = run_once(args, bins, kubemark, Path(scratch))
            events = list(ha.read_events(audit_files(Path(scratch) / "audit")))
    except LoadTestError as error:
        print(f"hollow_node: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        print(f"hollow_node: {interrupt_reason(interrupt)}; everything it started is stopped", file=sys.stderr)
        return 130
    requests = ha.requests_of(events)
    measured.headers = hollow_report.headers_of(requests, measured.logs)
    measured.check = hollow_report.check_rows(requests, measured)
    hollow_report.keep_events([e for e in events if ha.is_agents(e)])
    reference = yaml.safe_load(REFERENCE.read_text())
    hollow_report.write(args.out, command, version, build_s, measured, requests, reference)
    return 1 if measured.failure else 0


if __name__ == "__main__":
    sys.exit(main())
