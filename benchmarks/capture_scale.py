"""What `loadtest capture` costs on a large cluster: its time and memory reading at least 100,000 objects.

Brings up a local control plane of `--nodes` idle kwok nodes, fills it with `--objects` objects (ConfigMaps and
Secrets of 200 B to 4 KiB of data and a custom resource, over `--namespaces` namespaces, a third of them labelled
and annotated; made FILL_CONCURRENCY creates at a time, timed apart), then runs the capture as a user does
(`loadtest capture --kubeconfig K --context C --allow-context C --out profile.yaml`, a process of its own)
`--repeats` times on the same cluster. Each repeat's memory is given three ways: the child's peak resident set as
the kernel accounted it (/usr/bin/time -v's maximum resident set), the peak of its resident set
sampled every SAMPLE_S by psutil, and the profile's own `capture:` figures (its RSS as the capture began and its
peak since then).

The data stays far under etcd's quota: the local plane sets no --quota-backend-bytes, so etcd's 2 GiB default
holds, and 100,000 objects of 2 KiB of data on average are about 190 MiB of data (the table gives etcd's database
size after the fill).

    .venv/bin/python benchmarks/capture_scale.py [--objects 100000] [--nodes 100] [--repeats 3]

Writes benchmarks/results/capture_scale.md and benchmarks/results/raw/capture_scale.json.gz.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from benchmarks.plane import fleet_plane  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402
from loadtests.polling import poll_until  # noqa: E402
from loadtests.run.fleet import ensure_namespaces  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "capture_scale.md"
REPO = Path(__file__).resolve().parent.parent
FILL_CONCURRENCY = 16  # creates in flight: the apiserver and etcd, not this client, are the limit on 2 cores
TIME_V = "/usr/bin/time"  # GNU time: -v prints the peak resident set the kernel kept for the process
SAMPLE_S = 0.05  # how often the capture process's resident set is sampled
SIZES = (200, 4096)  # bytes of data per ConfigMap or Secret, uniformly between
SHARES = {"ConfigMap": 0.6, "Secret": 0.3, "Gizmo": 0.1}  # of the objects made, by kind
GROUP = "bench.example.com"
GIZMO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gizmos.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
COLLECTIONS = {"ConfigMap": "/api/v1/namespaces/{ns}/configmaps", "Secret": "/api/v1/namespaces/{ns}/secrets",
               "Gizmo": f"/apis/{GROUP}/v1/namespaces/{{ns}}/gizmos"}


@dataclass
class Fill:
    """What the cluster was filled with, and how long it took."""

    made: dict[str, int]  # kind -> objects created
    namespaces: int
    data_bytes: int  # the objects' data (before base64 for Secrets), the bulk of what etcd holds
    seconds: float
    etcd_db_bytes: int | None = None  # etcd's database after the fill (etcd_mvcc_db_total_size_in_bytes)


@dataclass
class Repeat:
    """One capture process: its wall time, its memory three ways, and its profile's `capture:` section."""

    wall_s: float
    maxrss_bytes: int | None  # /usr/bin/time -v's maximum resident set (ru_maxrss); None: no /usr/bin/time
    sampled_peak_bytes: int  # the largest resident set psutil saw, every SAMPLE_S
    capture: dict[str, Any] = field(default_factory=dict)
    kinds: int = 0


def manifest(kind: str, index: int, rng: random.Random) -> tuple[str, dict[str, Any], int]:
    """One object to create: where, its body, and its data's bytes (a third of them labelled and annotated)."""
    size = rng.randint(*SIZES)
    meta: dict[str, Any] = {"name": f"{kind.lower()}-{index}"}
    if index % 3 == 0:
        meta["labels"] = {"app": f"app-{index % 40}", "tier": rng.choice(("web", "db", "cache"))}
        meta["annotations"] = {"bench.example.com/note": "n" * rng.randint(10, 200)}
    blob = rng.randbytes(size * 3 // 4)
    text = base64.b64encode(blob).decode()[:size]
    if kind == "ConfigMap":
        body = {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"blob": text}}
    elif kind == "Secret":
        body = {"apiVersion": "v1", "kind": kind, "metadata": meta, "type": "Opaque",
                "data": {"blob": base64.b64encode(text.encode()).decode()}}
    else:
        body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": meta,
                "spec": {"size": size % 7, "payload": text[: size // 4]}}
    return kind, body, len(text) if kind != "Gizmo" else size // 4


def established(client: RestClient) -> bool:
    found = client.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.{GROUP}",
                           ok=(404,))
    if not any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (found.get("status") or {}).get("conditions") or []):
        return False
    return bool(client.request("GET", f"/apis/{GROUP}/v1/gizmos", ok=(404,), params={"limit": 1}))


def fill(client: RestClient, objects: int, namespaces: int, seed: int = 35) -> Fill:
    """`objects` objects spread evenly over `namespaces` namespaces (made first, with the custom resource's
    definition): the time counts every create of them, from the first to the last."""
    names = [f"capture-scale-{i}" for i in range(namespaces)]
    ensure_namespaces(client, names)
    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", GIZMO_CRD)
    if not poll_until(lambda: established(client), 60):
        raise RuntimeError("the Gizmo definition was not served within 60 s")
    counts = {kind: int(objects * share) for kind, share in SHARES.items()}
    counts["ConfigMap"] += objects - sum(counts.values())
    plan = [(kind, i) for kind, n in counts.items() for i in range(n)]

    def create(item: tuple[str, int]) -> int:
        kind, body, size = manifest(item[0], item[1], random.Random(f"{seed}-{item[0]}-{item[1]}"))
        client.create(COLLECTIONS[kind].format(ns=names[item[1] % namespaces]), body)
        return size

    started, total = time.monotonic(), 0
    with ThreadPoolExecutor(FILL_CONCURRENCY) as pool:
        for done, size in enumerate(pool.map(create, plan), 1):
            total += size
            if done % 10_000 == 0:
                print(f"filled {done:,}/{len(plan):,} in {time.monotonic() - started:.0f} s", flush=True)
    return Fill(counts, namespaces, total, time.monotonic() - started)


def etcd_db_bytes(url: str | None) -> int | None:
    """etcd's database size from its /metrics (plain HTTP on 127.0.0.1), to show the fill is under its quota."""
    if not url:
        return None
    with urllib.request.urlopen(url, timeout=10) as response:
        found = re.search(r"^etcd_mvcc_db_total_size_in_bytes (\S+)$", response.read().decode(), re.MULTILINE)
    return int(float(found.group(1))) if found else None


def context_of(kubeconfig: str) -> str:
    """The plane's kubeconfig context (its current one, else its only one)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    return str(config.get("current-context") or config["contexts"][0]["name"])


def capture_once(kubeconfig: str, context: str, out: Path) -> Repeat:
    """`loadtest capture` as a process of its own (under /usr/bin/time -v when there is one), its resident set
    sampled while it runs."""
    timed = out.with_suffix(".time")
    wrapper = [TIME_V, "-v", "-o", str(timed)] if Path(TIME_V).exists() else []
    command = [*wrapper, sys.executable, "-m", "loadtests.cli.main", "capture", "--kubeconfig", kubeconfig,
               "--context", context, "--allow-context", context, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    peak, done = [0], threading.Event()
    started = time.monotonic()
    child = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)

    def sample() -> None:
        process = psutil.Process(child.pid)
        while not done.is_set():
            with contextlib.suppress(psutil.Error):
                for each in [process, *process.children(recursive=True)]:
                    peak[0] = max(peak[0], each.memory_info().rss)
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = child.wait()
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    if code != 0:
        raise RuntimeError(f"loadtest capture exited {code}")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.read_text()) if wrapper else None
    profile = yaml.safe_load(out.read_text())
    return Repeat(wall, int(found.group(1)) * 1024 if found else None, peak[0], profile["capture"],
                  len(profile.get("kinds") or []))


def measure(objects: int, nodes: int, namespaces: int, repeats: int,
            bins: binaries.Binaries) -> tuple[Fill, list[Repeat]]:
    with fleet_plane("capture-scale", nodes, bins) as made, tempfile.TemporaryDirectory() as tmp:
        filled = fill(made.client, objects, namespaces)
        filled.etcd_db_bytes = etcd_db_bytes(made.info.etcd_metrics_url)
        kubeconfig = made.info.access.kubeconfig
        context = context_of(kubeconfig)
        runs = []
        for i in range(repeats):
            runs.append(capture_once(kubeconfig, context, Path(tmp) / f"profile-{i}.yaml"))
            print(f"capture {i + 1}/{repeats}: {runs[-1].wall_s:.1f} s, "
                  f"{runs[-1].capture.get('objects_read', 0):,} objects", flush=True)
        return filled, runs


def spread(values: list[float], fmt: str) -> str:
    """min / median / max of the repeats."""
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def table(filled: Fill, runs: list[Repeat]) -> list[str]:
    mib = 2**20
    read = [float(r.capture["objects_read"]) for r in runs]
    capture_s = [float(r.capture["seconds"]) for r in runs]
    cells = [
        ("objects made", f"{sum(filled.made.values()):,} ({', '.join(f'{k} {n:,}' for k, n in filled.made.items())}) "
                         f"in {filled.namespaces} namespaces, {filled.data_bytes / mib:.0f} MiB of data"),
        ("etcd database after the fill (MiB; quota 2,048)",
         f"{filled.etcd_db_bytes / mib:.0f}" if filled.etcd_db_bytes else "—"),
        ("objects read by the capture", spread(read, ",.0f")),
        ("kinds in the profile", spread([float(r.kinds) for r in runs], ".0f")),
        ("fill time (s)", f"{filled.seconds:.1f} ({sum(filled.made.values()) / filled.seconds:,.0f} creates/s)"),
        ("capture wall time of the process (s)", spread([r.wall_s for r in runs], ".1f")),
        ("capture seconds (profile's `seconds`)", spread(capture_s, ".1f")),
        ("objects/s (objects read / profile's seconds)",
         spread([o / s for o, s in zip(read, capture_s, strict=True)], ",.0f")),
        ("peak RSS, kernel (/usr/bin/time -v, MiB)",
         spread([r.maxrss_bytes / mib for r in runs], ".0f") if all(r.maxrss_bytes for r in runs) else "—"),
        (f"peak RSS, psutil sampled every {SAMPLE_S:g} s (MiB)",
         spread([r.sampled_peak_bytes / mib for r in runs], ".0f")),
        ("RSS at start (profile's `rss_at_start_bytes`, MiB)",
         spread([r.capture["rss_at_start_bytes"] / mib for r in runs], ".0f")),
        ("peak RSS (profile's `peak_rss_bytes`, MiB)",
         spread([r.capture["peak_rss_bytes"] / mib for r in runs], ".0f")),
        ("growth (profile's peak - at start, MiB)",
         spread([(r.capture["peak_rss_bytes"] - r.capture["rss_at_start_bytes"]) / mib for r in runs], ".0f")),
    ]
    return [f"| {name} | {value} |" for name, value in cells]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--namespaces", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    filled, runs = measure(args.objects, args.nodes, args.namespaces, args.repeats, bins)
    command = (f".venv/bin/python benchmarks/capture_scale.py --objects {args.objects} --nodes {args.nodes} "
               f"--namespaces {args.namespaces} --repeats {args.repeats}")
    since = {str(r.capture.get("peak_rss_since")) for r in runs}
    lines = results_head(
        "What `loadtest capture` costs on a large cluster",
        f"a local control plane (kube {bins.kube_version}) with {args.nodes} idle kwok nodes, filled with "
        f"{args.objects:,} objects, then captured {args.repeats} times as a user does (`loadtest capture "
        "--kubeconfig K --context C --allow-context C --out profile.yaml`, a process of its own); figures are "
        "min / median / max of the repeats",
        command, ["figure", "value"])
    lines += table(filled, runs)
    lines += ["", "Wall time is the process's, start to exit (interpreter start, imports and writing the file "
              "included); `seconds` is the profile's own, the capture alone. The capture resets the kernel's peak "
              f"as it begins (the profile's peak is since {' / '.join(sorted(since))}), so /usr/bin/time's peak "
              "is since then too; the psutil sample covers the whole process but can miss a peak shorter than its "
              "period. The capture is started through /usr/bin/time, a small process, because the kernel keeps "
              "the spawning process's resident set as the child's peak at exec: the benchmark's own wait4 "
              "reported the benchmark's resident set (265 MiB when first run), not the capture's. Objects read "
              "include the cluster's own (nodes, leases, events, ...) besides the ones made. Raw: "
              "benchmarks/results/raw/capture_scale.json.gz (each repeat's `capture:` section)."]
    keep_raw("capture_scale.json.gz", {"command": command, "nodes": args.nodes, "fill": filled, "repeats": runs})
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
