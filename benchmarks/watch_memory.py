"""How many node-agent watches one machine holds, and what each costs: N watches of the `node_agents` scenario held
for a short while against one local control plane, from the harness's own load generator processes.

Per size a fresh control plane (no kwok: no nodes, no pods), node identities for N/10 nodes, and the load as the
harness runs it (LoadGenerator: one Locust process, or a master and `--workers` workers). Each node has a kubelet
(6 watches: its pods, its Node, Services, RuntimeClasses, CSIDrivers, PodCertificateRequests) and a kube-proxy
(4: Services, EndpointSlices, ServiceCIDRs, its Node), protobuf, bookmarks, timeoutSeconds drawn in 300-600 s and
renewed, each on its own HTTP/1.1 TLS connection. The collections are all but empty (the `kubernetes` Service and
its EndpointSlice and ServiceCIDR): the watches, not the objects, are what is measured.

Once the watches are established (apiserver_longrunning_requests, verb WATCH, less those open before the load),
they are held `--hold-s`; at its end: the load's memory (RSS and USS summed over its processes), kube-apiserver's
and etcd's RSS, the machine's memory in use; over the hold: CPU of the load, kube-apiserver, etcd and the machine.

With `--apiservers N` (2 or 3) the control plane has N kube-apiservers (and HAProxy in front, which the
controller-manager and scheduler reach them through), and the nodes' agents reach the apiservers' own addresses,
node i's kubelet and kube-proxy the (i mod N)-th (NodeIdentities.servers): each apiserver holds a third of the
watches, each a socket under its own open-file limit. Their memory and CPU are summed and kept per apiserver.

Every process this benchmark starts gets its open-file soft limit raised to the hard limit (each watch is a socket
in the load and in kube-apiserver). A size whose watches exceed that limit in one kube-apiserver, or the source
ports 127.0.0.1 has to one apiserver's port, is not run, and says so.

    .venv/bin/python benchmarks/watch_memory.py [--watches 2500 5000 ...] [--hold-s 60] [--label after]
        [--apiservers 3]
    .venv/bin/python benchmarks/watch_memory.py --from-raw

Written: benchmarks/results/watch_memory.md; each size's figures in benchmarks/results/raw/watch_memory/.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.config.node_agents import KUBE_PROXY, KUBELET, node_watches  # noqa: E402
from loadtests.config.topology import APISERVER, Topology, component_of  # noqa: E402
from loadtests.controlplane.base import TargetInfo  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.kube.node_identity import NodeIdentities  # noqa: E402
from loadtests.kube.objects import node_name  # noqa: E402
from loadtests.load.generator import LoadGenerator, StepLoad  # noqa: E402
from loadtests.measure.processes import CpuMeter  # noqa: E402
from loadtests.measure.prometheus import scrape_apiserver  # noqa: E402
from loadtests.polling import poll_until  # noqa: E402

RAW = "watch_memory"  # benchmarks/results/raw/watch_memory/<label>-<watches>.json.gz
SIZES = [2500, 5000, 10_000, 20_000, 40_000]
WATCHES_PER_NODE = sum(len(node_watches(agent)) for agent in (KUBELET, KUBE_PROXY))
FD_MARGIN = 500  # open files a process needs besides its watches' sockets (libraries, logs, its own clients)
ESTABLISH_CAP_S = 300.0  # the longest wait for the watches to be established
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")  # the source ports one address has to one destination
Row = dict[str, Any]
# what a watch's memory in a Locust process is made of, measured apart from this benchmark (small programs on this
# machine, each holding 1,000-2,000 of one thing, USS and tracemalloc before and after); said beside the table
CODE = ("Code: before = the load as on main (445386d; measured at 411668d, which adds only this benchmark); after = "
        "a1cf165: one SSLContext per identity in a Locust process, one jitter generator for every watcher; the rows "
        "of 3 kube-apiservers: that load at 1dd280d, which adds only NodeIdentities.servers and this benchmark's "
        "--apiservers.")
WHERE = [
    "Where a watch's memory goes (measured apart: small programs holding 1,000-2,000 of one thing, USS and "
    "tracemalloc before and after):",
    "- Its TLS connection, idle in a read, as geventhttpclient, gevent and OpenSSL 3.0 hold it: 48 KiB (2,000 "
    "streaming GETs to a local TLS 1.3 server, 48.1 KiB USS each; 11 KiB of it in Python's allocator: the "
    "greenlet's saved stack, gevent's SSLSocket, geventhttpclient's pool and response). A plain TCP socket read "
    "in a greenlet alone: 10.6 KiB. The ~37 KiB outside Python's allocator is OpenSSL's state per connection "
    "(the SSL object, its session, the server's certificate decoded per handshake, cipher contexts); its record "
    "buffers are already released while idle (CPython sets SSL_MODE_RELEASE_BUFFERS: the context's mode reads "
    "0x14), and malloc_trim gives back 0.6 KiB: nothing Python can shrink without changing the wire.",
    "- The connection pool's size costs nothing: geventhttpclient allocates no connection ahead (48.1 KiB with "
    "a pool of 1, 48.5 KiB with the users' 64).",
    "- An SSLContext: 25 KiB (17.6 KiB with the cluster's CA, 7.1 KiB more with a client certificate). Before: "
    "one per user, two per node (its kubelet's, and one per kube-proxy user, though every kube-proxy is one "
    "identity), 5 KiB per watch; after: one per identity, the kubelets' one per node and one for every "
    "kube-proxy, 2.5 KiB per watch.",
    "- A random.Random per reflector and per backoff, for their jitter: 2.9 KiB each, 5.8 KiB per watch; after: "
    "one generator for the process.",
    "- The load's own path on top (FastHttpSession, KubeApi.watch, Reflector, the protobuf decoder; five "
    "watches per session, one context) against a local TLS server that answers each watch and holds it: "
    "58.7 KiB USS per watch with the code after, 10.7 KiB over the bare streaming GET; by tracemalloc, the "
    "greenlet's saved stack while it waits in the read 5.0 KiB (3.7 KiB in the bare GET: the reflector's loop "
    "and the stream's generators lie between), the reflector 1.6 KiB, its greenlet 0.7 KiB, "
    "geventhttpclient's and Locust's request and response objects about 1.5 KiB. The rest of the slope: the "
    "node's SSLContexts (above) and its two Locust users.",
    "",
    "What stops 40,000 on this machine, and what held them: each watch is a socket in kube-apiserver too, and "
    "the open-file hard limit is 20,000 (raising it is refused: no CAP_SYS_RESOURCE), so one kube-apiserver holds "
    "at most about 19,500 HTTP/1.1 watches (HAProxy in front would hold two sockets per connection under the same "
    "limit). With 3 kube-apiservers and each node's kubelet and kube-proxy sent to one apiserver's own address "
    "(node i to the (i mod 3)-th: NodeIdentities.servers), each apiserver holds a third of the watches (the rows "
    "above, per apiserver, those of the controller-manager and scheduler included), below its open files and "
    "below the source ports 127.0.0.1 has to one port (ip_local_port_range), and the load runs in a master and "
    "workers, each under its own open files; the load there differs from one apiserver's only by a kube-proxy "
    "SSLContext per apiserver. Locust's master never said \"All users spawned\" with its workers busy opening "
    "10,000 connections each (its wait for their reports ran out): the benchmark waits for the apiservers' count "
    "of watches instead. Next here: about 58,000 watches, three apiservers' open files (the local control plane "
    "runs 3 at most); with a larger limit, the source ports to each apiserver's port, beyond which the load's "
    "connections would need other loopback source addresses (127.0.0.x), which its connection pool does not "
    "choose today.",
]


def raise_open_files() -> int:
    """The open-file soft limit raised to the hard one (children inherit it); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def workers_for(watches: int, asked: int | None, open_files: int) -> int:
    """Locust worker processes: as asked, else none (the harness's default, one process) while one process's open
    files hold the watches, else as few as hold them."""
    if asked is not None:
        return asked
    per_process = open_files - FD_MARGIN
    return 0 if watches <= per_process else math.ceil(watches / per_process)


def apiservers_of(info: TargetInfo) -> dict[str, str]:
    """Each kube-apiserver instance's own address (one apiserver: the cluster's)."""
    return dict(info.apiservers) or {APISERVER: info.access.server}


def watches_by_apiserver(info: TargetInfo) -> dict[str, float]:
    """The watches each apiserver holds now (apiserver_longrunning_requests, verb WATCH), read from its own page."""
    found = {}
    for instance, url in apiservers_of(info).items():
        snapshot = scrape_apiserver(replace(info.access, server=url), families=["apiserver_longrunning_requests"])
        found[instance] = snapshot.total("apiserver_longrunning_requests", verb="WATCH") or 0.0
    return found


def watches_open(info: TargetInfo) -> float:
    return sum(watches_by_apiserver(info).values())


def source_ports() -> int:
    """How many source ports one local address has to one destination (ip_local_port_range)."""
    low, high = map(int, PORT_RANGE.read_text().split())
    return high - low + 1


def not_run(watches: int, nodes: int, apiservers: int, open_files: int) -> str | None:
    """Why a size cannot be held here, if it cannot: the most watches one apiserver gets (its nodes' ten each)
    against its open files and against the source ports to its port."""
    most = math.ceil(nodes / apiservers) * WATCHES_PER_NODE
    who = "kube-apiserver's" if apiservers == 1 else f"each of {apiservers} kube-apiservers'"
    if most + FD_MARGIN > open_files:
        return f"{who} open-file limit ({open_files:,}, the hard limit here) is below {most:,} sockets"
    if most > source_ports():
        return f"127.0.0.1 has {source_ports():,} source ports to one apiserver's port, below {most:,} watches"
    return None


def spread_over(identities: NodeIdentities, info: TargetInfo) -> NodeIdentities:
    """With several apiservers, each node's agents sent to one's own address (not through the load balancer)."""
    return replace(identities, servers=tuple(info.apiservers.values())) if info.apiservers else identities


def settled_watches(info: TargetInfo) -> float:
    """The watches open before the load, once the controller-manager's and scheduler's informers are all started
    (the count unchanged over 10 s)."""
    seen: list[float] = []

    def steady() -> bool:
        seen.append(watches_open(info))
        return len(seen) > 5 and len(set(seen[-6:])) == 1

    poll_until(steady, 120.0, interval_s=2.0)
    return seen[-1]


def memory_of(pids: list[int]) -> dict[str, float]:
    """RSS and USS (memory only these processes hold), summed, in MiB."""
    rss = uss = 0
    for pid in pids:
        try:
            info = psutil.Process(pid).memory_full_info()
        except psutil.Error:
            continue
        rss, uss = rss + info.rss, uss + info.uss
    return {"rss_mib": rss / 2**20, "uss_mib": uss / 2**20}


def established(info: TargetInfo, baseline: float, want: int, load: LoadGenerator) -> tuple[float, float]:
    """Wait until the load's watches are all open, or stop growing for 20 s once some are: (watches open, seconds
    waited). The count is the readiness, not Locust's "All users spawned": with workers busy opening thousands of
    connections, the master's wait for their reports runs out and it never says so."""
    start = time.monotonic()
    best, best_at = 0.0, start

    def done() -> bool:
        nonlocal best, best_at
        count = watches_open(info) - baseline
        if count > best:
            best, best_at = count, time.monotonic()
        return count >= want or (best > 0 and time.monotonic() - best_at > 20.0)

    poll_until(done, ESTABLISH_CAP_S, interval_s=2.0, abort=lambda: not load.running())
    return best, time.monotonic() - start


def hold(info: TargetInfo, load: LoadGenerator, baseline: float, hold_s: float) -> Row:
    """The figures of one hold: CPU over it, memory and watches at its end."""
    apiservers = [name for name in info.pids if component_of(name) == APISERVER]
    meter = CpuMeter({**{c: info.pids[c] for c in (*apiservers, "etcd")}, "load": load.pids()})
    meter.read()
    time.sleep(hold_s)  # a measured interval, not a wait for readiness
    cpu = {name.removeprefix("cpu."): value for name, value in meter.read().items()}
    apiserver_cpu = {name: cpu.pop(name) or 0.0 for name in apiservers}
    rss = {name: memory_of(info.pids[name])["rss_mib"] for name in apiservers}
    machine = psutil.virtual_memory()
    by_apiserver = watches_by_apiserver(info)
    return {"cpu": {**cpu, "kube-apiserver": sum(apiserver_cpu.values())}, "load": memory_of(load.pids()),
            "apiserver_rss_mib": sum(rss.values()), "etcd_rss_mib": memory_of(info.pids["etcd"])["rss_mib"],
            "machine_used_mib": (machine.total - machine.available) / 2**20,
            "held": sum(by_apiserver.values()) - baseline,
            **({"per_apiserver": {name: {"rss_mib": rss[name], "cpu": apiserver_cpu[name],
                                         "watches": by_apiserver.get(name)} for name in apiservers}}
               if len(apiservers) > 1 else {})}


def measure_size(watches: int, args: argparse.Namespace, bins: binaries.Binaries, open_files: int) -> Row:
    nodes = math.ceil(watches / WATCHES_PER_NODE)
    workers = workers_for(watches, args.workers, open_files)
    row: Row = {"label": args.label, "watches": watches, "nodes": nodes, "workers": workers,
                "open_files": open_files, "hold_s": args.hold_s, "apiservers": args.apiservers}
    why = not_run(watches, nodes, args.apiservers, open_files)
    if why:
        return {**row, "skipped": why}
    with tempfile.TemporaryDirectory(prefix="watch-memory-") as tmp:
        plane = LocalControlPlane(LocalOptions(name=f"wm-{watches}", directory=Path(tmp) / "c", kwok=False,
                                               profiling=False, topology=Topology(apiservers=args.apiservers)),
                                  bins)
        info = plane.up(log=lambda _m: None)
        try:
            identities = spread_over(plane.node_identities([node_name(i) for i in range(nodes)]), info)
            baseline = settled_watches(info)
            machine_before = psutil.virtual_memory()
            step = StepLoad({"node_agents": {"max_nodes": nodes}}, nodes=nodes,
                            duration_s=args.hold_s + ESTABLISH_CAP_S + 120, out_dir=Path(tmp) / "load",
                            workers=workers)
            with LoadGenerator(step, info.access, node_identities=identities) as load:
                load.start()
                row["established"], row["establish_s"] = established(info, baseline, watches, load)
                row.update(hold(info, load, baseline, args.hold_s))
            row["machine_before_mib"] = (machine_before.total - machine_before.available) / 2**20
        finally:
            plane.down()
    return row


def _mib(value: float | None) -> str:
    return "not measured" if value is None else f"{value:,.0f} MiB"


def _each(row: Row, key: str, form: str) -> str:
    """ (a / b / c): a figure per apiserver, in start order, for a row of several apiservers; else nothing."""
    each = (row.get("per_apiserver") or {}).values()
    return f" ({' / '.join(form.format(figures[key] or 0) for figures in each)})" if each else ""


def table_row(row: Row) -> str:
    head = f"| {row['label']} | {row.get('apiservers', 1)} | {row['watches']:,} | {row['nodes']:,} | " + (
        f"{row['workers'] or 1}" + (" + master" if row["workers"] else "") + " |")
    if row.get("skipped"):
        return head + f" not run: {row['skipped']} |" + " |" * 9
    held = max(1.0, row["held"])
    load, cpu = row["load"], row["cpu"]
    cores = 100 * (os.cpu_count() or 1)
    apiserver_mib = row["apiserver_rss_mib"]
    cells = [
        f"{row['established']:,.0f}; {row['held']:,.0f} at the end{_each(row, 'watches', '{:,.0f}')}",
        f"{_mib(load['rss_mib'])} / {_mib(load['uss_mib'])}",
        f"{load['rss_mib'] * 1024 / held:,.1f} / {load['uss_mib'] * 1024 / held:,.1f} KiB",
        f"{_mib(apiserver_mib)}{_each(row, 'rss_mib', '{:,.0f}')}, {apiserver_mib * 1024 / held:,.1f} KiB per watch",
        _mib(row["etcd_rss_mib"]),
        f"{_mib(row['machine_used_mib'])} (+{row['machine_used_mib'] - row['machine_before_mib']:,.0f})",
        f"{cpu.get('load') or 0:.0f} %",
        f"{cpu.get('kube-apiserver') or 0:.0f} %{_each(row, 'cpu', '{:.0f}')}",
        f"{cpu.get('etcd') or 0:.0f} %",
        f"{cpu.get('machine') or 0:.0f} % of {cores} %",
    ]
    return head + "".join(f" {cell} |" for cell in cells)


def from_raw() -> list[Row]:
    rows = [json.loads(gzip.decompress(path.read_bytes())) for path in (RAW_DIR / RAW).glob("*.json.gz")]
    labels = {label: index for index, label in enumerate(dict.fromkeys(r["label"] for r in sorted(
        rows, key=lambda r: r.get("measured_at", 0))))}
    return sorted(rows, key=lambda r: (labels[r["label"]], r.get("apiservers", 1), r["watches"]))


def slope(rows: list[Row], key: str) -> tuple[float, float] | None:
    """Least squares of the load's memory (`key` of its figures, MiB) over the watches held: (MiB at none, KiB
    per watch more); None with fewer than two sizes measured."""
    points = [(row["held"], row["load"][key]) for row in rows if not row.get("skipped")]
    if len({x for x, _ in points}) < 2:
        return None
    mean_x, mean_y = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    per = (sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points))
    return mean_y - per * mean_x, per * 1024


def summary(rows: list[Row]) -> list[str]:
    """Per code and apiservers measured: the load's memory per watch more (the slope over three sizes or more of
    one process count), or with fewer, each size's memory as measured."""
    lines = []
    for label, apiservers in dict.fromkeys((row["label"], row.get("apiservers", 1)) for row in rows):
        mine = [row for row in rows if (row["label"], row.get("apiservers", 1)) == (label, apiservers)]
        name = label + (f", {apiservers} apiservers" if apiservers > 1 else "")
        held = [row for row in mine if not row.get("skipped")]
        fits = {key: slope(mine, key) for key in ("rss_mib", "uss_mib")}
        if len(held) < 3 or fits["rss_mib"] is None or fits["uss_mib"] is None:
            lines += [f"- {name}: measured, not fitted: " + "; ".join(
                f"{row['held']:,.0f} watches {row['load']['uss_mib'] / 1024:.2f} GiB USS in {row['workers'] + 1} "
                f"processes ({row['load']['uss_mib'] * 1024 / row['held']:.1f} KiB per watch)" for row in held)
                + "; a master and workers, as the open files ask"] if held else []
            continue
        base, per = fits["uss_mib"]
        lines.append(f"- {name}: {fits['rss_mib'][1]:.1f} KiB RSS, {per:.1f} KiB USS per watch more (least squares "
                     f"over the sizes run; {base:.0f} MiB USS at none); 40,000 watches at that rate: "
                     f"{(base * 4 + per * 40_000 / 1024) / 1024:.2f} GiB USS in four processes (a master and "
                     "three workers, as the open files ask)")
    return lines


def machine_share(rows: list[Row]) -> list[str]:
    """Where the machine's memory and CPU went at each size held with several apiservers."""
    lines = []
    for row in rows:
        if row.get("apiservers", 1) == 1 or row.get("skipped"):
            continue
        gib = {key: row[key] / 1024 for key in ("machine_used_mib", "machine_before_mib", "apiserver_rss_mib",
                                                 "etcd_rss_mib")}
        cpu = {key: row["cpu"].get(key) or 0 for key in ("machine", "load", "kube-apiserver", "etcd")}
        more = gib["machine_used_mib"] - gib["machine_before_mib"]
        lines.append(
            f"- {row['label']}, {row['apiservers']} apiservers, {row['held']:,.0f} watches held: the machine "
            f"{gib['machine_used_mib']:.1f} GiB in use, everyone's ({more:.1f} more than before the load, the "
            f"control plane already up) of {psutil.virtual_memory().total / 2**30:.0f} GiB: the load "
            f"{row['load']['uss_mib'] / 1024:.2f} GiB USS, the control plane "
            f"{gib['apiserver_rss_mib'] + gib['etcd_rss_mib']:.2f} GiB RSS (the apiservers "
            f"{gib['apiserver_rss_mib']:.2f}, etcd {gib['etcd_rss_mib']:.2f}); CPU {cpu['machine']:.0f} % of "
            f"{100 * (os.cpu_count() or 1)} %, everyone's (the load {cpu['load']:.0f} %, the apiservers "
            f"{cpu['kube-apiserver']:.0f} %, etcd {cpu['etcd']:.0f} %)")
    return lines


def write(out: Path, rows: list[Row]) -> None:
    commands = dict.fromkeys(row["command"] for row in rows)
    lines = results_head(
        "Node-agent watches held from one machine: the load's memory per watch",
        f"Kubernetes {versions.DEFAULT_KUBE_VERSION}, one local control plane per size (1 etcd, the kube-apiservers "
        "the table says, no kwok; with several, HAProxy in front for the controller-manager and scheduler, and each "
        "node's agents sent to one apiserver's own address, node i's to the (i mod n)-th), `node_agents` (protobuf, "
        f"bookmarks, timeoutSeconds 300-600 s renewed; {WATCHES_PER_NODE} watches per node, each on its own "
        f"HTTP/1.1 TLS connection) on all but empty collections, held {rows[0]['hold_s']:.0f} s once established.",
        "; ".join(f"`{c}`" for c in commands).strip("`"),
        ["code", "kube-apiservers", "watches asked", "nodes", "Locust processes", "watches established",
         "load memory RSS / USS", "load per watch RSS / USS", "kube-apiserver RSS (per apiserver)", "etcd RSS",
         "machine memory in use (+ over before the load)", "load CPU", "kube-apiserver CPU (per apiserver)",
         "etcd CPU",
         "machine CPU"])
    lines += [table_row(row) for row in rows]
    lines += ["", "Watches established: apiserver_longrunning_requests (verb WATCH) less those open before the load "
                  "(the controller-manager's and scheduler's), summed over the apiservers (each read from its own "
                  "page), the most seen while waiting, and at the hold's end (per apiserver in brackets, those "
                  "open before the load included). Memory: psutil at the hold's end; the load's summed over its "
                  "processes (RSS counts pages the master and workers share once per process; USS only what each "
                  "holds alone); the apiservers' summed (per apiserver in brackets). CPU: mean over the hold, "
                  "100 % = one core; the machine's from /proc/stat, everyone's (others measure on it too)."]
    lines += ["", CODE, "", "The load's memory per watch more, by code:", *summary(rows)]
    shares = machine_share(rows)
    lines += ["", "The machine's share with several apiservers:", *shares] if shares else []
    lines += ["", *WHERE]
    write_results(out, lines, also=f", raw: {RAW_DIR / RAW}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watches", type=int, nargs="+", default=SIZES)
    parser.add_argument("--hold-s", type=float, default=60.0)
    parser.add_argument("--workers", type=int, help="Locust worker processes (default: as the open files need)")
    parser.add_argument("--apiservers", type=int, default=1, choices=(1, 2, 3),
                        help="kube-apiservers; with more than one, each node's agents reach one directly")
    parser.add_argument("--label", default="after", help="what code was measured (rows of one label go together)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "watch_memory.md")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept rows, run nothing")
    args = parser.parse_args()
    if not args.from_raw:
        open_files = raise_open_files()
        bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
        command = (f".venv/bin/python benchmarks/watch_memory.py --watches {' '.join(map(str, args.watches))} "
                   f"--hold-s {args.hold_s:g} --label {args.label}"
                   + ("" if args.workers is None else f" --workers {args.workers}")
                   + ("" if args.apiservers == 1 else f" --apiservers {args.apiservers}"))
        # rows of one apiserver keep their old names; others beside them
        kind = args.label if args.apiservers == 1 else f"{args.label}-{args.apiservers}apiservers"
        for watches in args.watches:
            row = {**measure_size(watches, args, bins, open_files), "command": command, "measured_at": time.time()}
            keep_raw(f"{RAW}/{kind}-{watches}.json.gz", row)
            print(table_row(row), flush=True)
    write(args.out, from_raw())
    return 0


if __name__ == "__main__":
    sys.exit(main())
