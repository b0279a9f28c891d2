"""Time the ramp of a fresh local control plane to N Ready kwok nodes, and who spent the CPU.

For each target size a new control plane is started (empty etcd), the fleet is scaled from 0 to N and
timed from the first create to the last node Ready (seen by a watch). CPU seconds of every component and of
this harness process are measured over the same window, side by side, so the harness's share shows whether
it, and not the control plane, limits the ramp.

    .venv/bin/python benchmarks/node_ramp.py [--sizes 1000 5000] [--out benchmarks/results/node_ramp.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402
from loadtests.run.fleet import Fleet  # noqa: E402


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for component, pid in pids.items():
        try:
            times = psutil.Process(pid).cpu_times()
            out[component] = times.user + times.system
        except psutil.Error:
            out[component] = 0.0
    return out


def ramp_once(size: int, factor: float, bins: binaries.Binaries) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ramp-") as tmp:
        options = LocalOptions(name=f"ramp-{size}", directory=Path(tmp) / "c", heartbeat_factor=factor)
        plane = LocalControlPlane(options, bins)
        plane.up(log=lambda _m: None)
        try:
            info = plane.info()
            pids = {c: p[0] for c, p in info.pids.items()} | {"harness": os.getpid()}
            client = RestClient(info.access)
            before = cpu_seconds(pids)
            ramp = Fleet(client).scale_nodes(size, timeout_s=600)
            after = cpu_seconds(pids)
            client.close()
        finally:
            plane.down()
    used = {c: after[c] - before[c] for c in pids}
    return {"size": size, "factor": factor, "seconds": ramp.seconds, "cpu": used}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--heartbeat-factors", type=float, nargs="+", default=[1.0, 5.0],
                        help="1 = leases renewed every 10 s like kubelets; 5 = kwokctl's default")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "node_ramp.md")
    args = parser.parse_args()
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    rows = []
    for factor in args.heartbeat_factors:
        for size in args.sizes:
            result = ramp_once(size, factor, bins)
            rows.append(result)
            print(f"{size} nodes (heartbeat factor {factor:g}) Ready in {result['seconds']:.1f} s", flush=True)

    components = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "harness"]
    lines = results_head(
        "Node ramp: fresh control plane to N Ready nodes",
        f"Kubernetes {bins.kube_version}, etcd {versions.ETCD_VERSION}, kwok {versions.KWOK_VERSION}.",
        f".venv/bin/python benchmarks/node_ramp.py --sizes {' '.join(map(str, args.sizes))} "
        f"--heartbeat-factors {' '.join(f'{f:g}' for f in args.heartbeat_factors)}",
        ["nodes", "heartbeat factor", "ramp to all Ready (s)", "nodes/s", *(f"{c} CPU s" for c in components),
         "harness share of CPU"])
    lines[5:5] = ["CPU columns: CPU seconds spent during the ramp (100% of one core for the whole ramp = ramp "
                  "seconds).", ""]
    for row in rows:
        cpu = row["cpu"]
        total = sum(cpu.values()) or 1.0
        lines.append(
            f"| {row['size']} | {row['factor']:g} | {row['seconds']:.1f} | {row['size'] / row['seconds']:.0f} | "
            + " | ".join(f"{cpu.get(c, 0):.1f}" for c in components)
            + f" | {100 * cpu['harness'] / total:.1f}% |"
        )
    lines += ["", f"Raw rows: benchmarks/results/raw/{args.out.stem}.json.gz."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    keep_raw(f"{args.out.stem}.json.gz", {"command": lines[3], "rows": rows})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
