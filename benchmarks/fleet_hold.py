"""The largest idle fleet this machine's control plane keeps Ready: ramp to N kwok nodes with kubelet-cadence
heartbeats (Leases renewed every 10 s), then hold it for a while and watch every node stay Ready.

Each size gets a fresh control plane. Through the hold, every 10 s: nodes NotReady (and the lifecycle
controller's taints), the oldest Lease's lag, and the CPU of each component and of the machine, side by side.
A size "held" when no node turned NotReady and no Lease lapsed (lag below its 40 s duration) for the whole hold.

    .venv/bin/python benchmarks/fleet_hold.py [--sizes 2500 5000] [--hold-s 300] [--out FILE.md]

It records the control plane's CPU per 1,000 held nodes (the largest over the sizes held) in
loadtests/data/sizing.json, which the sizing check reads, and keeps its raw rows in
benchmarks/results/raw/<results file's name>.json.gz.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head  # noqa: E402
from benchmarks.plane import fleet_plane  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import (
    sizing,  # noqa: E402
    versions,  # noqa: E402
)
from loadtests.kube import objects  # noqa: E402
from loadtests.measure.cluster_objects import LeaseLists, name_of, node_figures, node_state  # noqa: E402
from loadtests.measure.processes import CpuMeter  # noqa: E402

COMPONENTS = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"]


def lease_cores(rows: list[dict[str, object]]) -> dict[str, object] | None:
    """Cores the control plane's components used per 1,000 idle nodes, the largest over the sizes that held."""
    per_size = {}
    for row in rows:
        cpu = row["cpu"]
        assert isinstance(cpu, dict)
        if row["held"] and all(c in cpu for c in COMPONENTS):
            per_size[str(row["size"])] = sum(cpu[c] for c in COMPONENTS) / 100 / int(row["size"]) * 1000
    if not per_size:
        return None
    return {"cores": max(per_size.values()), "by_nodes": per_size,
            "what": "etcd, kube-apiserver, scheduler, controller-manager and kwok CPU, mean over an idle hold with "
                    "kubelet-cadence Leases, in cores per 1,000 nodes"}


def hold_once(size: int, hold_s: float, interval_s: float, bins: binaries.Binaries) -> dict[str, object]:
    with fleet_plane("hold", size, bins) as made:
        client = made.client
        print(f"{size} nodes Ready in {made.ramp_s:.1f} s; holding {hold_s:.0f} s", flush=True)
        cpu, leases = CpuMeter(made.info.pids), LeaseLists(client)
        cpu.read()
        worst = {"nodes_not_ready": 0.0, "lease_lag_s": 0.0, "leases_expired": 0.0}
        totals: dict[str, list[float]] = {}
        end = time.monotonic() + hold_s
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(interval_s, left))
            listed = client.list_items("nodes", label_selector=objects.NODE_SELECTOR)
            nodes = {name_of(n): node_state(n) for n in listed}
            refreshed = leases.refresh()
            figures = node_figures(nodes, refreshed[0] if refreshed else None,
                                   refreshed[1] if refreshed else None, now=time.time())
            for key in worst:
                worst[key] = max(worst[key], figures.get(key) or 0.0)
            for key, value in cpu.read().items():
                if value is not None:
                    totals.setdefault(key.removeprefix("cpu."), []).append(value)
    mean = {k: sum(v) / len(v) for k, v in totals.items() if v}
    held = worst["nodes_not_ready"] == 0 and worst["leases_expired"] == 0
    return {"size": size, "ramp_s": made.ramp_s, "held": held, **worst, "cpu": mean}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2500, 5000])
    parser.add_argument("--hold-s", type=float, default=300.0)
    parser.add_argument("--interval-s", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "fleet_hold.md")
    args = parser.parse_args()
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    rows = []
    for size in args.sizes:
        row = hold_once(size, args.hold_s, args.interval_s, bins)
        rows.append(row)
        print(f"{size} nodes: {'held' if row['held'] else 'did NOT hold'}; max NotReady {row['nodes_not_ready']:.0f}, "
              f"max Lease lag {row['lease_lag_s']:.1f} s", flush=True)
    default_out = parser.get_default("out")
    command = (f".venv/bin/python benchmarks/fleet_hold.py --sizes {' '.join(map(str, args.sizes))} "
               f"--hold-s {args.hold_s:g}" + ("" if args.out == default_out else f" --out {args.out.name}"))
    lines = results_head(
        f"Fleet hold: N idle kwok nodes kept Ready for {args.hold_s:.0f} s",
        f"Kubernetes {bins.kube_version}, heartbeat factor 1 (Leases of 40 s renewed every 10 s).",
        command,
        ["nodes", "ramp to Ready", "held", "max NotReady", "max Lease lag", "Leases lapsed",
         *(f"{c} CPU" for c in COMPONENTS), "machine CPU"])
    for row in rows:
        cpu = row["cpu"]
        assert isinstance(cpu, dict)
        lines.append(
            f"| {row['size']:,} | {row['ramp_s']:.1f} s | {'yes' if row['held'] else 'no'} | "
            f"{row['nodes_not_ready']:.0f} | {row['lease_lag_s']:.1f} s | {row['leases_expired']:.0f} | "
            + " | ".join(f"{cpu.get(c, 0):.0f} %" for c in COMPONENTS)
            + f" | {cpu.get('machine', 0):.0f} % of {100 * (os.cpu_count() or 1)} % |")
    lines += ["", "CPU: mean over the hold, in % of one core (psutil, per process; the machine's from /proc/stat)."]
    cost = lease_cores(rows)
    if cost is not None:
        lines += ["", f"Recorded for the sizing check (loadtests/data/sizing.json): {cost['cores']:.2f} cores per "
                      "1,000 idle nodes (the largest over the sizes that held)."]
        sizing.record(sizing.LEASE_CORES, cost, command)
    args.out.write_text("\n".join(lines) + "\n")
    raw = keep_raw(f"{args.out.stem}.json.gz", {"command": command, "rows": rows})
    print(f"written: {args.out}, {raw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
