"""The load against client-go: the same work done by the harness's load (Locust, as a step runs it) and by a small
client-go program (benchmarks/clientgo/), one after the other against one local control plane, side by side.

Three works, each at the same rate and for the same window on both sides: pod creates at a fixed rate (pod_churn's
pod; its lifetime outlasts the window, so no delete falls in it), cluster-scope LISTs of pods at a fixed rate
(resourceVersion=0, limit=500, over SEED_PODS pods; list_pollers, in JSON unless --list-encoding protobuf: client-
go's generated clients ask protobuf, and its creates send it, where pod_churn sends JSON), and node watches held
(one pod watch per node by spec.nodeName, protobuf as a kubelet asks, bookmarks, timeouts of 300-600 s;
kubelet_watchers). Per work the sides alternate in pairs (client-go first, then the harness first, ...:
benchmarks/pairs.py), so a drift of the machine falls on both sides of a pair. Over each measured window (the load's
measured window; the Go program's work): the client's CPU (psutil, every process of the side), kube-apiserver's CPU
(psutil), the machine's (/proc/stat), and from the apiserver's /metrics the response bytes of its LISTs
(apiserver_response_sizes, read requests only) and of the watch events it sent (apiserver_watch_events_sizes). A
create or LIST is a unit of work; for watches a unit is one watch held for one minute.

    make clientgo-bench   # go build of benchmarks/clientgo into the harness's build folder, then the benchmark
    flock /tmp/bench.lock .venv/bin/python benchmarks/client_cost.py [--pairs 2] [--window-s 20] [--quick]
    .venv/bin/python benchmarks/client_cost.py --from-raw

Written: benchmarks/results/client_cost.md; its raw rows in benchmarks/results/raw/client_cost/rows.json.gz.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.pairs import second_first  # noqa: E402
from loadtests.analysis.metrics import Snapshot, histogram_delta  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.binaries.cache import cache_root  # noqa: E402
from loadtests.config import versions  # noqa: E402
from loadtests.config.scenarios import CREATE_PODS  # noqa: E402
from loadtests.controlplane.base import TargetInfo  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.kube import objects  # noqa: E402
from loadtests.kube.names import ListNames  # noqa: E402
from loadtests.kube.paths import resource_path  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402
from loadtests.load.generator import LoadGenerator, StepLoad  # noqa: E402
from loadtests.measure.processes import CpuMeter  # noqa: E402
from loadtests.measure.prometheus import scrape_apiserver  # noqa: E402
from loadtests.polling import poll_until  # noqa: E402
from loadtests.run.fleet import ensure_namespaces  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GO_SOURCE = Path(__file__).resolve().parent / "clientgo"
RAW = "client_cost/rows.json.gz"  # under benchmarks/results/raw/
DEFAULT_CREATE_RATE = 20.0
BEFORE = "client_cost/before.json.gz"  # the rows of the measurement before the load's cuts, when kept
CLIENT_GO, HARNESS = "client-go", "harness"
SEED_PODS = 500  # what each LIST returns: one page of limit=500
SEED_NAMESPACE = objects.NS_FLEET
FAMILIES = ("apiserver_response_sizes", "apiserver_watch_events_sizes", "apiserver_longrunning_requests")
Row = dict[str, Any]


def binary() -> Path:
    """The client-go program, in the harness's build folder (beside the control plane's builds)."""
    return cache_root() / "build" / "clientgo-bench"


def build() -> Path:
    """`go build` of benchmarks/clientgo (pinned to the control plane's client-go) into the build folder."""
    out = binary()
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(out), "."], cwd=GO_SOURCE, check=True,
                   env={**os.environ, "GOFLAGS": "-mod=mod"})
    return out


@dataclass(frozen=True)
class Work:
    """One kind of work: the Go program's flags and the load's scenarios for it, at one rate or watch count."""

    name: str
    rate: float  # creates or LISTs per second; for watches, the watches held
    unit: str
    encoding: str = "json"  # the load's LISTs

    def go_flags(self, window_s: float) -> list[str]:
        flags = [f"-work={self.name}", f"-duration={window_s:g}s"]
        return flags + ([f"-watches={int(self.rate)}"] if self.name == "watch" else [f"-rate={self.rate:g}"])

    def scenarios(self) -> dict[str, Any]:
        if self.name == "create":
            return {"pod_churn": {"rate": self.rate, "lifetime_s": 3600.0}}
        if self.name == "list":
            return {"list_pollers": {"rate": self.rate, "resource_version": "0", "limit": 500,
                                     "encoding": self.encoding}}
        return {"kubelet_watchers": {"per_node": 1.0, "max_watchers": int(self.rate), "encoding": "protobuf"}}

    def nodes(self) -> int:
        """The step's nodes: one watch each (none needed to exist: a watch by spec.nodeName just sees no pod)."""
        return int(self.rate) if self.name == "watch" else 0

    def row_name(self) -> str | None:
        """The load's client row that counts this work (watches are counted as held, not as requests)."""
        return {"create": CREATE_PODS, "list": ListNames.of("pods", "", "0").first}.get(self.name)


def works(quick: bool, create_rate: float = 20.0, only: Collection[str] = (),
          list_encoding: str = "json") -> list[Work]:
    """The works measured (`only` those named), creates at `create_rate` per second (a quick check: 10), the load's
    LISTs in `list_encoding`."""
    found = [Work("create", 10.0 if quick else create_rate, "create"), Work("list", 5.0, "LIST", list_encoding),
             Work("watch", 50.0 if quick else 200.0, "watch held a minute")]
    return [work for work in found if not only or work.name in only]


class Window:
    """One measured window of one side: CPU of its processes, kube-apiserver's and the machine's, and the
    apiserver's /metrics at both ends."""

    def __init__(self, info: TargetInfo, client_pids: list[int]) -> None:
        self.info = info
        self.meter = CpuMeter({"client": client_pids, "kube-apiserver": info.pids["kube-apiserver"]})

    def open(self) -> None:
        self.start = scrape_apiserver(self.info.access, families=FAMILIES)
        self.meter.read()
        self.opened = time.monotonic()

    def close(self) -> dict[str, Any]:
        cpu = self.meter.read()
        wall = time.monotonic() - self.opened
        end = scrape_apiserver(self.info.access, families=FAMILIES)
        return {"window_s": wall, "client_cpu_s": (cpu["cpu.client"] or 0.0) / 100 * wall,
                "apiserver_cpu_s": (cpu["cpu.kube-apiserver"] or 0.0) / 100 * wall,
                "machine_cpu_percent": cpu["cpu.machine"], **served(self.start, end)}


def served(start: Snapshot, end: Snapshot) -> dict[str, float | None]:
    """What the apiserver answered over the window: LIST responses of pods and watch events, counts and bytes."""
    lists = histogram_delta(start, end, "apiserver_response_sizes", verb="LIST", resource="pods")
    events = histogram_delta(start, end, "apiserver_watch_events_sizes")
    return {"list_responses": lists.count if lists else None, "list_bytes": lists.sum if lists else None,
            "watch_events": events.count if events else None, "watch_bytes": events.sum if events else None}


def watches_open(info: TargetInfo) -> float:
    return scrape_apiserver(info.access, families=FAMILIES).total(
        "apiserver_longrunning_requests", verb="WATCH", resource="pods") or 0.0


def run_go(info: TargetInfo, work: Work, window_s: float) -> Row:
    """The client-go side: measured from its `started` line to its result line (it then waits for stdin)."""
    command = [str(binary()), f"-kubeconfig={info.access.kubeconfig}", f"-label=clientgo-{time.time_ns()}",
               *work.go_flags(window_s)]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        if "started" not in proc.stdout.readline():
            raise RuntimeError(f"{command[0]} did not start its work")
        window = Window(info, [proc.pid])
        window.open()
        result = json.loads(proc.stdout.readline())
        figures = window.close()
        proc.stdin.close()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    held = result.get("watches", 0)
    units = held * figures["window_s"] / 60 if held else result["requests"]
    return {"side": CLIENT_GO, "work": work.name, "units": units, "errors": result["errors"], **figures}


def run_harness(info: TargetInfo, work: Work, window_s: float, folder: Path, profile: Path | None = None) -> Row:
    """The load's side, as a step runs it: spawned, then one measured window of `window_s`, then stopped; with
    `profile`, py-spy samples the load's process over the window into that file (collapsed stacks)."""
    before = watches_open(info)
    step = StepLoad(work.scenarios(), nodes=work.nodes(), duration_s=window_s, out_dir=folder, windowed=True,
                    run_id=f"cost{time.time_ns() % 10**8}")
    gen = LoadGenerator(step, info.access)
    try:
        gen.start()
        if not gen.wait_spawned(120):
            raise RuntimeError(f"the load did not spawn its users: {gen.log_path}")
        if work.name == "watch":
            poll_until(lambda: watches_open(info) >= before + work.rate, 120, interval_s=0.5)
        window = Window(info, gen.pids())
        window.open()
        gen.open_window()
        spy = start_profile(gen.pids()[0], window_s, profile) if profile else None
        time.sleep(window_s)
        figures = window.close()
        if spy is not None:
            spy.wait(timeout=60)
        gen.close_window()
        outcome = gen.wait()
    finally:
        gen.stop()
    stats = {stat.name: stat for stat in outcome.client}
    row = stats.get(work.row_name() or "")
    units = work.rate * figures["window_s"] / 60 if work.name == "watch" else (row.count if row else 0)
    errors = sum(stat.failures for stat in outcome.client)
    more = stats.get(ListNames.of("pods", "", "0").more)  # a LIST's further pages: more pods than one page
    return {"side": HARNESS, "work": work.name, "units": units, "errors": errors, **figures,
            "more_pages": more.count if more else 0}


PY_SPY = Path(os.environ.get("PY_SPY", "/opt/pyspy/bin/py-spy"))
PROFILE_RATE = 100.0  # creates per second while profiled
PROFILE_HZ = 250  # samples per second


def start_profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling a process without pausing it (--nonblocking), 100 times a second, as collapsed stacks."""
    return subprocess.Popen([str(PY_SPY), "record", "--pid", str(pid), "--format", "raw", "--nonblocking",
                             "--duration", str(int(seconds)), "--rate", str(PROFILE_HZ), "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_once(args: argparse.Namespace, info: TargetInfo, folder: Path) -> None:
    """One window of the load's creates with py-spy on its process: the stacks kept for the results file."""
    work = Work("create", PROFILE_RATE, "create")  # more samples than at the table's rate, the same requests
    out = folder / "profile.txt"
    row = run_harness(info, work, args.window_s, folder / "profiled", profile=out)
    keep_raw(f"client_cost/profile-{args.profile}.txt.gz", out.read_bytes())
    print(f"profiled {row['units']:.0f} creates: {per_unit(row, 'client_cpu_s'):.3f} ms client CPU each", flush=True)


def seed(client: RestClient) -> None:
    """The pods every LIST returns, and the namespaces both sides write to."""
    ensure_namespaces(client, objects.NAMESPACES)
    for index in range(SEED_PODS):
        client.create(resource_path("pods", SEED_NAMESPACE),
                      objects.pod_manifest(f"seed-{index:04d}", SEED_NAMESPACE), exist_ok=True)


def measure(args: argparse.Namespace) -> list[Row]:
    bins = binaries.find(os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="client-cost-") as tmp:
        plane = LocalControlPlane(LocalOptions(name="client-cost", directory=Path(tmp) / "c", kwok=False), bins)
        client: RestClient | None = None
        try:
            plane.up(log=lambda _m: None)
            info = plane.info()
            client = RestClient(info.access, user_agent="k8s-loadtest/benchmark")
            seed(client)
            if args.profile:
                profile_once(args, info, Path(tmp))
                return rows
            for work in works(args.quick, args.create_rate, args.works, args.list_encoding):
                for index in range(2 * args.pairs):
                    side = HARNESS if second_first(index) else CLIENT_GO
                    row = (run_harness(info, work, args.window_s, Path(tmp) / f"{work.name}-{index}")
                           if side == HARNESS else run_go(info, work, args.window_s))
                    rows.append({**row, "pair": index // 2})
                    # whatever a side left behind is gone before the next: every LIST sees the same pods
                    client.delete(resource_path("pods", objects.NS_CHURN))
                    print(f"{work.name} {side}: {per_unit(row, 'client_cpu_s'):.3f} ms client CPU per "
                          f"{work.unit}, {row['units']:.0f} units, {row['errors']} errors", flush=True)
        finally:
            if client is not None:
                client.close()
            plane.down()
    return rows


def per_unit(row: Row, key: str, scale: float = 1000.0) -> float:
    value = row.get(key)
    return float("nan") if value is None or not row["units"] else value * scale / row["units"]


@dataclass(frozen=True)
class Figure:
    """One column of the table: a row's value per unit of work, and how it is written."""

    title: str
    value: Callable[[Row], float]
    fmt: str


FIGURES = [
    Figure("client CPU per unit", lambda r: per_unit(r, "client_cpu_s"), "{:.3f} ms"),
    Figure("kube-apiserver CPU per unit", lambda r: per_unit(r, "apiserver_cpu_s"), "{:.3f} ms"),
    Figure("LIST response bytes per LIST", lambda r: per_unit(r, "list_bytes", 1.0) if r["work"] == "list"
           else float("nan"), "{:,.0f} B"),
    Figure("watch event bytes per event", lambda r: r["watch_bytes"] / r["watch_events"]
           if r["work"] == "watch" and r.get("watch_events") else float("nan"), "{:,.0f} B"),
]


def pairs_of(rows: list[Row], work: str) -> list[tuple[Row, Row]]:
    """(client-go, harness) of each pair of one work."""
    by_pair: dict[int, dict[str, Row]] = {}
    for row in rows:
        if row["work"] == work:
            by_pair.setdefault(row["pair"], {})[row["side"]] = row
    return [(sides[CLIENT_GO], sides[HARNESS]) for _, sides in sorted(by_pair.items())
            if CLIENT_GO in sides and HARNESS in sides]


def _shown(fmt: str, value: float) -> str:
    return "-" if value != value else fmt.format(value)


def table(rows: list[Row]) -> list[str]:
    """Per work and figure: each side's median over the pairs, the ratio harness / client-go (median, and its
    range over the pairs), and the machine's CPU over each side's windows."""
    lines = []
    for work in dict.fromkeys(row["work"] for row in rows):
        pairs = pairs_of(rows, work)
        machine = {side: statistics.median(p[i]["machine_cpu_percent"] or 0.0 for p in pairs)
                   for i, side in enumerate((CLIENT_GO, HARNESS))}
        for figure in FIGURES:
            go = [figure.value(g) for g, _ in pairs]
            load = [figure.value(h) for _, h in pairs]
            if all(v != v for v in go + load):
                continue
            ratios = [h / g for g, h in zip(go, load, strict=True) if g and g == g and h == h]
            ratio = (f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-")
            lines.append(f"| {work} | {figure.title} | {_shown(figure.fmt, statistics.median(go))} | "
                         f"{_shown(figure.fmt, statistics.median(load))} | {ratio} | {len(pairs)} | "
                         f"{machine[CLIENT_GO]:.0f} % / {machine[HARNESS]:.0f} % |")
    return lines


def units_line(rows: list[Row]) -> str:
    """How much work each side did per window, and its errors: the figures are per unit of it."""
    parts = []
    for work in dict.fromkeys(row["work"] for row in rows):
        for side in (CLIENT_GO, HARNESS):
            found = [r for r in rows if r["work"] == work and r["side"] == side]
            parts.append(f"{work} {side}: {statistics.median(r['units'] for r in found):,.0f} units, "
                         f"{sum(r['errors'] for r in found)} errors")
    return "Work per window (median): " + "; ".join(parts) + "."


def command(args: argparse.Namespace) -> str:
    return (f"flock /tmp/bench.lock .venv/bin/python benchmarks/client_cost.py --pairs {args.pairs} "
            f"--window-s {args.window_s:g}" + (" --quick" if args.quick else "")
            + (f" --create-rate {args.create_rate:g}" if args.create_rate != DEFAULT_CREATE_RATE else "")
            + (f" --list-encoding {args.list_encoding}" if args.list_encoding != "json" else "")
            + (f" --works {' '.join(args.works)}" if args.works else ""))


def variant(args: argparse.Namespace) -> str:
    """What sets this measurement apart from the default one ("" for it): in its rows' and results' names."""
    return ((f"-create{args.create_rate:g}" if args.create_rate != DEFAULT_CREATE_RATE else "")
            + (f"-list{args.list_encoding}" if args.list_encoding != "json" else ""))


def raw_name(args: argparse.Namespace) -> str:
    """The kept rows of this measurement: the default one's, or one per variant."""
    return RAW.replace(".json", f"{variant(args)}.json")


CUTS = [
    "", "What the cuts were (loadtests/load/locust/locustfile.py, generator.py, scenarios/base.py), nothing sent or "
    "counted changed: the load's master waited for the window's close file looking 50 times a second through the "
    "whole window (a cost per second, whatever the load: a larger share of the load's CPU the less it sends, "
    "most of it for held watches); it now sleeps until the runner's WINDOW_SIGNAL wakes it (sent only once the "
    "master has its handler), looking once a second besides. The users kept Locust's cookie jar, whose lock and "
    "URL parsing ran on every request and every answer, though the apiserver sets no cookie; they keep none now.",
]


def write(args: argparse.Namespace, rows: list[Row]) -> None:
    rates = {w.name: w for w in works(args.quick, args.create_rate, (), args.list_encoding)}
    lines = results_head(
        "The load against client-go: client CPU, apiserver CPU and bytes per unit of the same work",
        f"one local control plane (Kubernetes {versions.DEFAULT_KUBE_VERSION}, no kwok); per work, pairs "
        f"alternating client-go-harness and harness-client-go, windows of {args.window_s:g} s: " + ", ".join(
            what for name, what in (("create", f"creates at {rates['create'].rate:g}/s"),
                                    ("list", f"LISTs at {rates['list'].rate:g}/s over {SEED_PODS} pods (the "
                                             f"load's in {args.list_encoding})"),
                                    ("watch", f"{rates['watch'].rate:g} node watches held"))
            if not args.works or name in args.works) + ".",
        command(args),
        ["work", "figure", "client-go", "harness", "harness / client-go (range over pairs)", "pairs",
         "machine CPU (client-go / harness windows, of 200 %)"])
    lines += table(rows)
    before = RAW_DIR / BEFORE
    default = not variant(args) and not args.works  # the measurement the cuts were read on
    if before.exists() and default:
        lines += ["", "Before the cuts to the load's own work (the same measurement, its rows kept in "
                      f"benchmarks/results/raw/{BEFORE}):", "", lines[5], lines[6], *table(from_raw(before)[1])]
    lines += ["", units_line(rows), "",
              "A unit: one create, one LIST, or one watch held for a minute. Client CPU: psutil over the window, "
              "every process of the side (the Go program; the Locust process). kube-apiserver CPU: psutil over "
              "the same window. Bytes: from the apiserver's /metrics over the window (apiserver_response_sizes "
              "of pod LISTs, apiserver_watch_events_sizes of every watch event sent: window differences). "
              "Machine CPU: /proc/stat over the window, 200 % = both cores. psutil counts CPU in ticks of 10 ms: "
              "client-go's idle watches often used less than one tick in a window (a ratio over such a pair is "
              "left out).", *(CUTS if default else []), "",
              f"Raw rows: benchmarks/results/raw/{raw_name(args)}.", *(profile_lines() if default else [])]
    write_results(args.out, lines)


_LINE = re.compile(r":\d+\)$")


# what the cuts took away: the window's wait, the cookie jar on each request and answer (function name prefixes)
CUT_FUNCTIONS = ("_keep_window ", "CookieJar.add_cookie_header ", "CookieJar.extract_cookies ")


def total_share(stacks: str, prefixes: tuple[str, ...]) -> float:
    """The share of samples with any function named so on the stack."""
    hit = samples = 0
    for line in stacks.splitlines():
        frames, _, count = line.rpartition(" ")
        if frames and count.isdigit():
            samples += int(count)
            hit += int(count) if any(f.startswith(prefixes) for f in frames.split(";")) else 0
    return hit / samples if samples else 0.0


def profile_top(stacks: str, top: int = 12) -> list[tuple[str, float, float]]:
    """(function, own share, total share) of py-spy's collapsed stacks, the `top` largest by own time then by
    total: a function's own samples are those it was running in, its total those it was anywhere on the stack."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in stacks.splitlines():
        frames, _, count = line.rpartition(" ")
        if not frames or not count.isdigit():
            continue
        names = [_LINE.sub(")", frame) for frame in frames.split(";")]
        samples += int(count)
        own[names[-1]] = own.get(names[-1], 0) + int(count)
        for name in set(names):
            total[name] = total.get(name, 0) + int(count)
    if not samples:
        return []
    by_own = sorted(own, key=lambda name: (-own[name], name))[:top]  # ties by name: the same table every time
    by_total = [name for name in sorted(total, key=lambda name: (-total[name], name)) if name not in by_own][:top // 2]
    return [(name, own.get(name, 0) / samples, total[name] / samples) for name in by_own + by_total]


def samples(path: Path) -> int:
    return sum(int(line.rpartition(" ")[2]) for line in gzip.decompress(path.read_bytes()).decode().splitlines()
               if line.rpartition(" ")[2].isdigit())


def profile_lines() -> list[str]:
    """The kept profiles of the load's creates, summarised: one short table each."""
    lines = []
    for path in sorted((RAW_DIR / "client_cost").glob("profile-*.txt.gz")):
        label = path.name.removeprefix("profile-").removesuffix(".txt.gz")
        lines += ["", f"Profile of the load's process during {PROFILE_RATE:g} creates/s ({label}; py-spy "
                      f"--nonblocking, {PROFILE_HZ} samples/s of its busy time, {samples(path):,} samples, "
                      f"raw: benchmarks/results/raw/client_cost/{path.name}): the functions with the most own "
                      "time, then those with the most total time besides.", "",
                  "| function (file) | own | total |", "|---|---|---|"]
        stacks = gzip.decompress(path.read_bytes()).decode()
        lines += [f"| `{name}` | {own:.1%} | {total:.1%} |" for name, own, total in profile_top(stacks)]
        lines += ["", f"What the cuts took away ({', '.join(f'`{name.strip()}`' for name in CUT_FUNCTIONS)} "
                      f"anywhere on the stack): {total_share(stacks, CUT_FUNCTIONS):.1%} of the samples."]
    return lines


def from_raw(path: Path = RAW_DIR / RAW) -> tuple[dict[str, Any], list[Row]]:
    """The arguments and rows of the kept measurement."""
    data = json.loads(gzip.decompress(path.read_bytes()))
    return data["args"], data["rows"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--window-s", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="one pair of 8 s windows, fewer creates and watches")
    parser.add_argument("--from-raw", action="store_true", help="rebuild the table from the kept rows, run nothing")
    parser.add_argument("--build", action="store_true", help="go build the client-go program first")
    parser.add_argument("--profile", metavar="LABEL",
                        help="only profile the load's creates (py-spy), kept as raw/client_cost/profile-LABEL")
    parser.add_argument("--create-rate", type=float, default=DEFAULT_CREATE_RATE,
                        help="creates per second on both sides (another rate keeps its own rows and results file)")
    parser.add_argument("--list-encoding", choices=("json", "protobuf"), default="json",
                        help="the load's LISTs (client-go's generated clients ask protobuf)")
    parser.add_argument("--works", nargs="+", choices=("create", "list", "watch"), default=[],
                        help="only these works (default: all three)")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/client_cost.md (--quick: a temporary "
                                                 "file; another --create-rate: client_cost_createN.md)")
    args = parser.parse_args()
    default_out = f"client_cost{variant(args).replace('-', '_')}.md"
    args.out = args.out or (Path(tempfile.gettempdir()) / "client_cost_quick.md" if args.quick
                            else Path(__file__).parent / "results" / default_out)
    if args.from_raw:
        kept, rows = from_raw(RAW_DIR / raw_name(args))
        args.pairs, args.window_s, args.quick = kept["pairs"], kept["window_s"], kept["quick"]
        args.works = kept.get("works", [])
    else:
        if args.quick:
            args.pairs, args.window_s = 1, 8.0
        if args.build or not binary().exists():
            build()
        rows = measure(args)
        if args.profile:
            return 0
        if not args.quick:  # a short check keeps nothing: the kept rows stay those of the results file
            keep_raw(raw_name(args), {"args": {"pairs": args.pairs, "window_s": args.window_s, "quick": args.quick,
                                               "create_rate": args.create_rate, "works": args.works,
                                               "list_encoding": args.list_encoding}, "rows": rows})
    write(args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
