"""How faithful a replay is, end to end: a cluster captured, then replayed at each scale k and judged by the replay's
own `replay_fidelity` section (run/fidelity.py; the comparison is docs/profile.md's).

Brings up a source cluster as a user does (`loadtest up --name src --nodes N`, under a clusters folder of its own),
fills it with ConfigMaps and Secrets of a few sizes (SIZES) in a few namespaces (NAMESPACES; plain ones, not the
harness's), and captures it (`loadtest capture --name src --window W --out profile.yaml`) while a small client loop
sends GETs and LISTs of those ConfigMaps at a steady rate, so that request classes exist in the profile; then stops
it (`loadtest down --name src`) and replays the profile at each k (`loadtest run --profile profile.yaml --scale K
--duration D --no-gate --out run-K`, which brings up and stops its own cluster).

    .venv/bin/python benchmarks/replay_fidelity.py [--nodes 20] [--scale 1 2] [--duration 20] [--window 10]

Writes benchmarks/results/replay_fidelity.md (per k: the tally of verdicts per section, and every row missed, not
judged or not measured) and, gzip-compressed, the profile and each replay's results.json in
benchmarks/results/raw/replay_fidelity/.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from loadtests.capture.compare import MET, MISSED, NOT_JUDGED, NOT_MEASURED  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "replay_fidelity.md"
RAW = "replay_fidelity"  # under benchmarks/results/raw/
REPO = Path(__file__).resolve().parent.parent
SOURCE = "src"  # the source cluster's name
NAMESPACES = ("team-a", "team-b", "team-c")
SIZES = (256, 2048, 16384)  # bytes of data per object, in turn
CONFIGMAPS = 15  # per namespace
SECRETS = 6  # per namespace
GET_PER_S = 5.0  # the client loop's GETs of one ConfigMap each, in turn
LIST_PER_S = 2.0  # and its LISTs of one namespace's ConfigMaps, in turn
TRAFFIC_AGENT = "replay-fidelity-bench"
SECTIONS = ("counts", "sizes", "rates", "watches", "replayable share")
VERDICT_ORDER = (MET, MISSED, NOT_JUDGED, NOT_MEASURED)


@dataclass
class Traffic:
    """What the client loop sent while the capture's window was open."""

    gets: int = 0
    lists: int = 0
    errors: int = 0
    seconds: float = 0.0


@dataclass
class Source:
    """The source cluster: what it was filled with, what the capture cost, the traffic meanwhile."""

    nodes: int
    made: dict[str, int]
    data_bytes: int
    capture_wall_s: float
    capture: dict[str, Any]
    traffic: Traffic = field(default_factory=Traffic)


@dataclass
class Replay:
    """One replay at scale k: its exit code, wall time and the replay_fidelity section of each step."""

    scale: float
    exit_code: int
    wall_s: float
    fidelity: list[dict[str, Any]]


def loadtest(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A `loadtest` command as a process of its own (this checkout's package), its output echoed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "loadtests.cli.main", *args], cwd=REPO, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    print(done.stdout, end="", flush=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"loadtest {' '.join(args)} exited {done.returncode}")
    return done


@contextmanager
def source_cluster(nodes: int) -> Iterator[RestClient]:
    """`loadtest up --name src --nodes N`, stopped by `loadtest down` whatever happens."""
    try:
        loadtest("up", "--name", SOURCE, "--nodes", str(nodes))
        client = RestClient(LocalControlPlane(LocalOptions(name=SOURCE)).access(), user_agent=TRAFFIC_AGENT)
        try:
            yield client
        finally:
            client.close()
    finally:
        loadtest("down", "--name", SOURCE, check=False)


def body(kind: str, name: str, size: int) -> dict[str, Any]:
    text = base64.b64encode(os.urandom(size))[:size].decode()
    if kind == "ConfigMap":
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "data": {"blob": text}}
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "type": "Opaque",
            "data": {"blob": base64.b64encode(text.encode()).decode()}}


def fill(client: RestClient) -> tuple[dict[str, int], int]:
    """The namespaces (plain: the harness's label would make the capture count them as its own) and their
    ConfigMaps and Secrets, sizes in turn; the objects made per kind and their data's bytes."""
    made, data = {"ConfigMap": 0, "Secret": 0}, 0
    sizes = itertools.cycle(SIZES)
    for ns in NAMESPACES:
        client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for kind, count, plural in (("ConfigMap", CONFIGMAPS, "configmaps"), ("Secret", SECRETS, "secrets")):
            for i in range(count):
                size = next(sizes)
                client.create(f"/api/v1/namespaces/{ns}/{plural}", body(kind, f"{kind.lower()}-{i}", size))
                made[kind] += 1
                data += size
    return made, data


def steady_traffic(client: RestClient, stop: threading.Event, sent: Traffic) -> None:
    """GETs and LISTs of the ConfigMaps, each paced to its own steady rate until `stop` (the next one due is
    waited for on the event, so the loop ends as soon as it is set)."""
    started = time.monotonic()
    due = {"get": started, "list": started}
    period = {"get": 1 / GET_PER_S, "list": 1 / LIST_PER_S}
    while not stop.is_set():
        which = min(due, key=due.__getitem__)
        if stop.wait(max(0.0, due[which] - time.monotonic())):
            break
        try:
            if which == "get":
                ns = NAMESPACES[sent.gets % len(NAMESPACES)]
                client.request("GET", f"/api/v1/namespaces/{ns}/configmaps/configmap-{sent.gets % CONFIGMAPS}")
                sent.gets += 1
            else:
                client.request("GET", f"/api/v1/namespaces/{NAMESPACES[sent.lists % len(NAMESPACES)]}/configmaps")
                sent.lists += 1
        except Exception:  # noqa: BLE001 - counted and said in the results; the capture goes on
            sent.errors += 1
        due[which] += period[which]
    sent.seconds = time.monotonic() - started


def capture_source(nodes: int, window: float, profile: Path) -> Source:
    with source_cluster(nodes) as client:
        made, data = fill(client)
        sent, stop = Traffic(), threading.Event()
        loop = threading.Thread(target=steady_traffic, args=(client, stop, sent), daemon=True)
        loop.start()
        try:
            started = time.monotonic()
            loadtest("capture", "--name", SOURCE, "--window", f"{window:g}", "--out", str(profile))
            wall = time.monotonic() - started
        finally:
            stop.set()
            loop.join()
    captured = yaml.safe_load(profile.read_text())
    return Source(nodes, made, data, wall, captured.get("capture") or {}, sent)


def replay(profile: Path, scale: float, duration: float, out: Path) -> Replay:
    started = time.monotonic()
    done = loadtest("run", "--profile", str(profile), "--scale", f"{scale:g}", "--duration", f"{duration:g}",
                    "--no-gate", "--out", str(out), check=False)
    wall = time.monotonic() - started
    results = out / "results.json"
    found = []
    if results.exists():
        keep_raw(f"{RAW}/results-k{scale:g}.json.gz", results.read_bytes())
        steps = json.loads(results.read_text()).get("steps") or []
        found = [step["replay_fidelity"] for step in steps if step.get("replay_fidelity")]
    return Replay(scale, done.returncode, wall, found)


def number(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.3g}"


def rows(compared: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], str]]:
    """Every judged figure of a comparison: its section, what it is, the figure (Judged) and its note."""
    for kind in compared.get("kinds") or []:
        name = f"{kind['group'] + '/' if kind['group'] else ''}{kind['kind']}"
        yield "counts", name, kind["count"], kind.get("note") or ""
        for quantile in ("p50", "p99"):
            if kind.get(f"size_{quantile}"):
                yield "sizes", f"{name} size {quantile}", kind[f"size_{quantile}"], kind.get("size_note") or ""
    for row in compared.get("classes") or []:
        what = "/".join(p for p in (row["resource"], row["subresource"]) if p)
        group = f"{row['group']}/" if row["group"] else ""
        yield "rates", f"{row['verb']} {group}{what} ({row['scope']}, {row['client_class']})", row["per_second"], ""
    for row in compared.get("watches") or []:
        yield "watches", f"{row['group'] + '/' if row['group'] else ''}{row['resource']}", row["open"], \
            row.get("note") or ""
    if compared.get("replayed"):
        share = compared["replayed"]
        figure = {"original": REPLAYABLE_TARGET, "replay": share.get("share"), "verdict": share["verdict"]}
        yield "replayable share", "original's requests in replayable classes", figure, share.get("target") or ""


REPLAYABLE_TARGET = 0.95


def tally_lines(k: float, compared: dict[str, Any]) -> list[str]:
    counted: dict[str, dict[str, int]] = {section: dict.fromkeys(VERDICT_ORDER, 0) for section in SECTIONS}
    for section, _name, figure, _note in rows(compared):
        counted[section][figure["verdict"]] += 1
    return [f"| {k:g} | {section} | " + " | ".join(str(counted[section][v]) for v in VERDICT_ORDER) + " |"
            for section in SECTIONS]


def shortfall_lines(k: float, compared: dict[str, Any], notes: dict[str, int]) -> list[str]:
    """The rows not met, each note given by its number in `notes` (added there the first time it is seen): the
    comparison's notes repeat word for word over many rows."""
    lines = []
    for section, name, figure, note in rows(compared):
        if figure["verdict"] == MET:
            continue
        mark = f"[{notes.setdefault(note, len(notes) + 1)}]" if note else ""
        lines.append(f"| {k:g} | {section} | {name} | {number(figure.get('original'))} | "
                     f"{number(figure.get('replay'))} | {figure['verdict']} | {mark} |")
    return lines


def report(source: Source, replays: list[Replay], command: str, duration: float, window: float) -> list[str]:
    lines = results_head(
        "How faithful a replay is, end to end",
        f"a source cluster (`loadtest up --nodes {source.nodes}`) holding "
        f"{', '.join(f'{n} {kind}s' for kind, n in source.made.items())} of {'/'.join(map(str, SIZES))} B of data "
        f"in turn in {len(NAMESPACES)} namespaces, captured with a {window:g} s window while a client loop sent "
        f"{GET_PER_S:g} GETs/s and {LIST_PER_S:g} LISTs/s of those ConfigMaps, then replayed for {duration:g} s at "
        f"each k; each step's `replay_fidelity` tallied per section (rows judged: counts per kind, size p50/p99, "
        "request rates per class, watches per resource, the replayable share)",
        command, ["k", "section", *VERDICT_ORDER])
    shortfalls: list[str] = []
    notes: list[str] = []
    row_notes: dict[str, int] = {}
    for run in replays:
        if not run.fidelity:
            notes.append(f"k = {run.scale:g}: no replay_fidelity section (loadtest run exited {run.exit_code})")
        for step in run.fidelity:
            if step.get("error") or not step.get("compared"):
                notes.append(f"k = {run.scale:g}: not compared: {step.get('error') or 'no comparison'}")
                continue
            lines += tally_lines(run.scale, step["compared"])
            shortfalls += shortfall_lines(run.scale, step["compared"], row_notes)
            notes.append(f"k = {run.scale:g}: passed {step['compared'].get('passed')}; traffic from "
                         f"{step.get('traffic_source') or 'not measured'}; the replay's capture "
                         f"{number(step.get('capture_s'))} s for {step.get('objects_read', 0):,} objects; "
                         f"`loadtest run` {run.wall_s:.0f} s, exit {run.exit_code}")
    lines += ["", "Every row not met (missed, not judged, not measured): original × k beside the replay "
              "(sizes in bytes as they are, rates per second, watches open at the window's end, the replayable "
              "share as a fraction against its floor).", "",
              "| k | section | row | original × k | replay | verdict | note |", "|---" * 7 + "|", *shortfalls, "",
              *[f"[{n}] {text}  " for text, n in row_notes.items()]]
    capture = source.capture
    traffic = source.traffic
    lines += ["", f"The source's capture: `loadtest capture --window {window:g}` took {source.capture_wall_s:.1f} s "
              f"as a process (its window included); the profile's own `seconds` (its objects read) "
              f"{number(capture.get('seconds'))} s for {capture.get('objects_read', 0):,} objects. The client loop "
              f"sent {traffic.gets:,} GETs and {traffic.lists:,} LISTs in {traffic.seconds:.1f} s "
              f"({traffic.errors} failed).", "", *[f"- {note}" for note in notes], "",
              f"Raw: benchmarks/results/raw/{RAW}/ (profile.yaml.gz, the source's profile; results-k<K>.json.gz, "
              "each replay's results.json)."]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--scale", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of each replay's window")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of the capture's traffic window")
    args = parser.parse_args()
    command = (f".venv/bin/python benchmarks/replay_fidelity.py --nodes {args.nodes} --scale "
               f"{' '.join(f'{k:g}' for k in args.scale)} --duration {args.duration:g} --window {args.window:g}")
    with tempfile.TemporaryDirectory(prefix="replay-fidelity-") as tmp:
        os.environ["LOADTEST_CLUSTERS"] = str(Path(tmp) / "clusters")  # this benchmark's clusters, no one else's
        profile = Path(tmp) / "profile.yaml"
        source = capture_source(args.nodes, args.window, profile)
        keep_raw(f"{RAW}/profile.yaml.gz", profile.read_bytes())
        replays = [replay(profile, k, args.duration, Path(tmp) / f"run-{k:g}") for k in args.scale]
    write_results(RESULTS, report(source, replays, command, args.duration, args.window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
