"""How faithful a replay is, end to end: a cluster captured, then replayed at each scale k and judged by the replay's
own `replay_fidelity` section (run/fidelity.py; the comparison is docs/profile.md's).

The source is the "production" cluster benchmarks/production.py builds (as the suite's end-to-end replay test
does): a local control plane writing an audit log, its fake nodes, ConfigMaps, Secrets and a custom resource of a
few sizes in namespaces of its own, and a steady traffic of a node, a service account and a user for --traffic
seconds; it is captured as a user captures a cluster (`loadtest capture --kubeconfig K --context loadtest
--allow-context loadtest --audit-log FILE --out profile.yaml`), stopped, and the profile replayed at each k
(`loadtest run --profile profile.yaml --scale K --duration D --no-gate --out run-K`, which brings up and stops its
own cluster).

    .venv/bin/python benchmarks/replay_fidelity.py [--nodes 20] [--scale 1 2] [--duration 20] [--traffic 30]

Writes benchmarks/results/replay_fidelity.md (per k: the tally of verdicts per section, and every row missed, not
judged or not measured) and, gzip-compressed, the profile and each replay's results.json in
benchmarks/results/raw/replay_fidelity/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from benchmarks.production import STREAMS, Sent, Shape, capture_args, production_cluster, send_traffic  # noqa: E402
from loadtests.binaries import cache as binaries  # noqa: E402
from loadtests.capture.compare import MET, MISSED, NOT_JUDGED, NOT_MEASURED  # noqa: E402
from loadtests.config.versions import DEFAULT_KUBE_VERSION  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "replay_fidelity.md"
RAW = "replay_fidelity"  # under benchmarks/results/raw/
REPO = Path(__file__).resolve().parent.parent
SOURCE = "src"  # the source cluster's name
NAMESPACES = ("team-a", "team-b", "team-c")
CONFIGMAPS = 15  # per namespace
SECRETS = 6
WIDGETS = 6
SECTIONS = ("counts", "sizes", "rates", "watches", "replayable share")
VERDICT_ORDER = (MET, MISSED, NOT_JUDGED, NOT_MEASURED)


@dataclass
class Source:
    """The source cluster: what it was filled with, what the capture cost, the traffic sent before it."""

    shape: Shape
    made: dict[str, int]
    data_bytes: int
    capture_wall_s: float
    capture: dict[str, Any]
    sent: Sent
    traffic: dict[str, Any]  # the profile's traffic section (its window and the start-up left out of it)


@dataclass
class Replay:
    """One replay at scale k: its exit code, wall time and the replay_fidelity section of each step."""

    scale: float
    exit_code: int
    wall_s: float
    fidelity: list[dict[str, Any]]
    said: str = ""  # the command's last line of output: why it stopped where no results were written


def loadtest(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """A `loadtest` command as a process of its own (this checkout's package), its output echoed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "loadtests.cli.main", *args], cwd=REPO, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    print(done.stdout, end="", flush=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"loadtest {' '.join(args)} exited {done.returncode}")
    return done


def capture_source(shape: Shape, traffic_s: float, profile: Path, scratch: Path) -> Source:
    """The production cluster built, its traffic sent, then captured from its audit log; stopped afterwards."""
    with production_cluster(binaries.find(DEFAULT_KUBE_VERSION), scratch, SOURCE, shape) as cluster:
        sent = send_traffic(cluster, traffic_s)
        started = time.monotonic()
        loadtest(*capture_args(cluster, profile))
        wall = time.monotonic() - started
        made, data = dict(cluster.made), cluster.data_bytes
    captured = yaml.safe_load(profile.read_text())
    return Source(shape, made, data, wall, captured.get("capture") or {}, sent, captured.get("traffic") or {})


def replay(profile: Path, scale: float, duration: float, out: Path, raw: str = RAW, *extra: str) -> Replay:
    """`loadtest run --profile` at `scale` (and `extra` flags, e.g. --force), its results.json kept under
    benchmarks/results/raw/`raw`/."""
    started = time.monotonic()
    done = loadtest("run", "--profile", str(profile), "--scale", f"{scale:g}", "--duration", f"{duration:g}",
                    "--no-gate", *extra, "--out", str(out), check=False)
    wall = time.monotonic() - started
    results = out / "results.json"
    found = []
    if results.exists():
        keep_raw(f"{raw}/results-k{scale:g}.json.gz", results.read_bytes())
        steps = json.loads(results.read_text()).get("steps") or []
        found = [step["replay_fidelity"] for step in steps if step.get("replay_fidelity")]
    said = (done.stdout.strip().splitlines() or [""])[-1]
    return Replay(scale, done.returncode, wall, found, said)


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


def window_line(traffic: dict[str, Any]) -> str:
    """Which span of the source's audit log its rates cover, and the cluster's start left out before it."""
    window, start = traffic.get("window") or {}, traffic.get("start_up") or {}
    span = f"The profile's rates cover {number(window.get('seconds'))} s of its audit log"
    if not start.get("end"):
        return f"{span}, the whole log ({start.get('why') or 'no start-up rule applied'})."
    return (f"{span}, from {window.get('start')}: the cluster's start before it ({number(start.get('seconds'))} s, "
            f"{start.get('requests', 0):,} requests) left out, as `traffic.start_up` says: {start.get('why')}.")


def report(source: Source, replays: list[Replay], command: str, duration: float, traffic: float) -> list[str]:
    shape, sent = source.shape, source.sent
    streams = ", ".join(f"{s.per_s:g}/s {s.what} as a {s.identity}" for s in STREAMS)
    lines = results_head(
        "How faithful a replay is, end to end",
        f"the production cluster of benchmarks/production.py ({shape.nodes} fake nodes; "
        f"{', '.join(f'{n} {kind}s' for kind, n in source.made.items())} of {'/'.join(map(str, shape.sizes))} B "
        f"of data in turn in {len(shape.namespaces)} namespaces) sending {streams} for {traffic:g} s, captured "
        f"from its audit log, then replayed for {duration:g} s at each k; each step's `replay_fidelity` tallied "
        "per section (rows judged: counts per kind, size p50/p99, request rates per class, watches per resource, "
        "the replayable share)",
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
    lines += ["", f"The source's capture: `loadtest capture --audit-log` took {source.capture_wall_s:.1f} s as a "
              f"process; the profile's own `seconds` (its objects read) {number(capture.get('seconds'))} s for "
              f"{capture.get('objects_read', 0):,} objects. The traffic sent "
              f"{', '.join(f'{n:,} {what}' for what, n in sent.requests.items())} in {sent.seconds:.1f} s "
              f"({sent.errors} failed). {window_line(source.traffic)}", "", *[f"- {note}" for note in notes], "",
              f"Raw: benchmarks/results/raw/{RAW}/ (profile.yaml.gz, the source's profile; results-k<K>.json.gz, "
              "each replay's results.json)."]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--scale", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of each replay's window")
    parser.add_argument("--traffic", type=float, default=30.0, help="seconds of the source's traffic")
    args = parser.parse_args()
    command = (f".venv/bin/python benchmarks/replay_fidelity.py --nodes {args.nodes} --scale "
               f"{' '.join(f'{k:g}' for k in args.scale)} --duration {args.duration:g} --traffic {args.traffic:g}")
    shape = Shape(nodes=args.nodes, namespaces=NAMESPACES, configmaps=CONFIGMAPS, secrets=SECRETS, widgets=WIDGETS)
    with tempfile.TemporaryDirectory(prefix="replay-fidelity-") as tmp:
        os.environ["LOADTEST_CLUSTERS"] = str(Path(tmp) / "clusters")  # this benchmark's clusters, no one else's
        profile = Path(tmp) / "profile.yaml"
        source = capture_source(shape, args.traffic, profile, Path(tmp) / "source")
        keep_raw(f"{RAW}/profile.yaml.gz", profile.read_bytes())
        replays = [replay(profile, k, args.duration, Path(tmp) / f"run-{k:g}") for k in args.scale]
    write_results(RESULTS, report(source, replays, command, args.duration, args.traffic))
    return 0


if __name__ == "__main__":
    sys.exit(main())
