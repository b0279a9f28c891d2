"""`loadtest capture`: a read-only profile of a cluster (an existing one, by kubeconfig and a confirmed context,
or a local control plane by name) into one YAML file that says nothing private of it (docs/profile.md)."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtests.analysis.formats import number, percent
from loadtests.cli.flags import seconds_arg
from loadtests.cli.output import say, say_table, write
from loadtests.errors import EXIT_PASSED, EXIT_SLO_FAILED, LoadTestError
from loadtests.kube.access import ClusterAccess

if TYPE_CHECKING:
    from loadtests.capture.compare import ClassFidelity, Fidelity, Judged, ReplayedShare
    from loadtests.capture.traffic import TrafficProfile

BOTH_SOURCES = ("--audit-log and --window are two sources of the same traffic figures: give the audit log (who "
                "sent what) or, without one, --window SECONDS (two /metrics scrapes that far apart)")


@contextlib.contextmanager
def capture_access(args: argparse.Namespace) -> Iterator[ClusterAccess]:
    """Who the capture is: an existing cluster's context, named, confirmed and guarded as a run's is (its
    credentials in a private folder removed afterwards), else the local control plane --name."""
    if args.kubeconfig or args.context or args.allow_context:
        from loadtests.controlplane.existing import guard
        from loadtests.kube.credentials import forget_tokens

        context = guard(args.kubeconfig, args.context, args.allow_context)
        with tempfile.TemporaryDirectory(prefix="k8s-loadtest-capture-") as workdir:  # mode 0700
            access = context.materialize(Path(workdir))
            try:
                yield access
            finally:
                forget_tokens(access.kubeconfig)
        return
    from loadtests.controlplane.local import LocalControlPlane, LocalOptions

    yield LocalControlPlane(LocalOptions(name=args.name)).access()


def out_path(text: str | None) -> Path:
    """--out: a file to write (a folder of that name, or a missing folder above it, is refused in one line)."""
    if not text:
        raise LoadTestError("loadtest capture needs --out PROFILE.yaml (the profile file to write)")
    path = Path(text).expanduser().resolve()
    if path.is_dir():
        raise LoadTestError(f"--out {path}: a folder of that name exists; name a file (PROFILE.yaml)")
    if not path.parent.is_dir():
        raise LoadTestError(f"--out {path}: no folder {path.parent}; create it or name a file elsewhere")
    return path


def metrics_traffic(access: ClusterAccess, window_s: float) -> TrafficProfile:
    """The apiserver's /metrics scraped twice `window_s` apart (its request counters and open watches): the
    traffic of the window, whoever sent it (the scrapes themselves are not among the apiserver's counts)."""
    from loadtests.analysis.server import REQUESTS
    from loadtests.capture.traffic import LONGRUNNING, traffic_from_metrics
    from loadtests.measure.prometheus import scrape_apiserver

    families = (REQUESTS, LONGRUNNING)
    before = scrape_apiserver(access, families=families)
    opened = time.monotonic()
    say(f"traffic: scraping the apiserver's /metrics again in {window_s:.0f} s")
    time.sleep(window_s)  # the window asked for: the traffic is what the cluster does meanwhile
    after = scrape_apiserver(access, families=families)
    return traffic_from_metrics(before, after, time.monotonic() - opened)


def cmd_capture(args: argparse.Namespace) -> int:
    from loadtests.capture.take import USER_AGENT, cluster_role_yaml, take
    from loadtests.capture.traffic import traffic_from_audit
    from loadtests.kube.rest import RestClient

    if args.compare:
        return compare_profiles(args)
    if args.scale is not None:
        raise LoadTestError("--scale goes with --compare ORIGINAL REPLAY: the multiple of the original the replay "
                            "is judged against")
    if args.print_rbac:
        write(cluster_role_yaml())
        return 0
    if args.audit_log and args.window is not None:
        raise LoadTestError(BOTH_SOURCES)
    if args.window is not None and args.window <= 0:
        raise LoadTestError(f"--window {args.window:g}: the traffic window is the time between two scrapes; give a "
                            "positive number of seconds (e.g. --window 300)")
    out = out_path(args.out)
    salt = os.urandom(16)  # one per capture, never written: its hashes group, and match no other capture's
    # the audit log is read first: a file that is not one is refused before the cluster is asked anything
    traffic = traffic_from_audit([Path(p) for p in args.audit_log], salt) if args.audit_log else None
    if traffic is not None and traffic.start_up is not None and traffic.start_up.end is not None:
        say(f"traffic: {traffic.start_up.seconds:.1f} s and {traffic.start_up.requests:,} requests of the cluster's "
            f"start left out of the window ({traffic.window.seconds:.1f} s from {traffic.window.start}): "
            f"{traffic.start_up.why}")
    with capture_access(args) as access:
        client = RestClient(access, user_agent=USER_AGENT, timeout_s=60.0)
        try:
            profile = take(client, salt=salt, progress=say)
        finally:
            client.close()
        if args.window is not None:  # after the objects' LISTs, so the window holds none of them
            traffic = metrics_traffic(access, args.window)
    profile.traffic = traffic.to_dict() if traffic is not None else None
    profile.write(out)
    figures = profile.capture
    peak = f"{figures.peak_rss_bytes / 2**20:.0f} MiB" if figures.peak_rss_bytes else "not measured"
    skipped = f", {len(profile.skipped)} skipped (listed in the file)" if profile.skipped else ""
    say(f"profile: {out}: {figures.objects_read:,} objects of {len(profile.kinds)} kinds{skipped} in "
        f"{figures.seconds:.1f} s, peak memory {peak} (since {figures.peak_rss_since})")
    return 0


CAPTURE_FLAGS = (("out", "--out"), ("audit_log", "--audit-log"), ("window", "--window"),
                 ("kubeconfig", "--kubeconfig"), ("context", "--context"), ("allow_context", "--allow-context"),
                 ("print_rbac", "--print-rbac"))


def compare_profiles(args: argparse.Namespace) -> int:
    """--compare ORIGINAL REPLAY [--scale K]: the fidelity table; exit 0 when every target is met, 1 when one is
    missed or not measured (a script can trust it), 2 for a bad scale or a file that is no profile."""
    from loadtests.capture.compare import compare
    from loadtests.capture.profile import load
    from loadtests.capture.scale import check_scale

    given = [flag for name, flag in CAPTURE_FLAGS if getattr(args, name) not in (None, False, [])]
    if given:
        raise LoadTestError(f"--compare reads two profiles and captures nothing: drop {', '.join(given)}")
    scale = check_scale(args.scale if args.scale is not None else 1.0, "--scale")
    original, replay = (Path(p) for p in args.compare)
    fidelity = compare(load(original), load(replay), scale)
    show_fidelity(fidelity, f"{replay} against {original} × {scale:g}")
    return EXIT_PASSED if fidelity.passed else EXIT_SLO_FAILED


def _verdict(verdict: str) -> str:
    return verdict.upper() if verdict == "missed" else verdict


def _cells(subject: str, figure: str, judged: Judged, unit: str, note: str | None = None) -> list[str]:
    """A table row: the original (× k), the replay, how far apart, the target, the verdict (and a kind's note)."""
    def shown(value: float | None) -> str:
        return "—" if value is None else f"{number(value, 2 if unit == '/s' else 0)}{unit}"

    if judged.difference is None:
        difference = "—"
    else:
        difference = f"{judged.difference * 100:+.1f} %" if judged.relative else f"{judged.difference:+,.0f}"
    cells = [subject, figure, shown(judged.original), shown(judged.replay), difference, judged.target,
             _verdict(judged.verdict)]
    return cells if note is None else [*cells, note]


def _kind_rows(fidelity: Fidelity) -> list[list[str]]:
    rows = []
    for kind in fidelity.kinds:
        name = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
        rows.append(_cells(name, "count", kind.count, "", kind.note))
        rows.extend(_cells("", figure, judged, " B", kind.size_note) for figure, judged in (("size p50", kind.size_p50),
                                                                             ("size p99", kind.size_p99)) if judged)
    return rows


def _class_name(c: ClassFidelity) -> str:
    """`list pods (cluster) by node`, `get deployments/status.apps (resource) by (any)`."""
    path = "/".join(p for p in (c.resource, c.subresource) if p) or "(no resource)"
    return f"{c.verb} {path}{'.' + c.group if c.group else ''} ({c.scope or '-'}) by {c.client_class}"


def show_fidelity(fidelity: Fidelity, title: str) -> None:
    """The fidelity as tables: its verdict counts first, then kinds, classes, watches and the replayed share."""
    tally, k = fidelity.tally(), f"× {fidelity.scale:g}"
    targets = sum(tally.values()) - tally["not judged"]
    say(f"fidelity of {title}: {tally['met']} of {targets} targets met, {tally['missed']} missed, "
        f"{tally['not measured']} not measured"
        + (f", {tally['not judged']} not judged (no target a replay controls)" if tally["not judged"] else "")
        + f": {'faithful' if fidelity.passed else 'not shown faithful'}")
    header = ["figure", f"original {k}", "replay", "difference", "target", "verdict"]
    say(f"objects per kind: count exact at {k}; size p50 and p99 within 10 % (per object, not scaled)")
    say_table([["kind", *header, "note"], *_kind_rows(fidelity)])
    if fidelity.replay_only:
        say("only in the replay, not judged: " + ", ".join(
            f"{o.kind}.{o.group} ({o.count:,})" if o.group else f"{o.kind} ({o.count:,})"
            for o in fidelity.replay_only))
    notes = fidelity.notes
    if fidelity.replayed is not None:
        say(f"requests per second per class: the original's of at least 1/s at {k}, within 10 %")
        say_table([["class", *header], *(_cells(_class_name(c), "requests", c.per_second, "/s")
                                         for c in fidelity.classes)])
        say(f"open watches per resource: the control plane's own once, the rest {k}, within 5 %")
        say_table([["resource", *header, "note"], *(_cells(f"{w.resource}.{w.group}" if w.group else w.resource,
                                                           "open", w.open, "", w.note) for w in fidelity.watches)])
        show_replayed(fidelity.replayed)
        notes = [f"watches compared: {fidelity.watch_figure}", *notes]
    for note in notes:
        say(f"note: {note}")


def show_replayed(replayed: ReplayedShare) -> None:
    def share(value: float | None) -> str:
        return percent(None if value is None else value * 100)

    say(f"the original's requests in replayable classes: {share(replayed.share)} ({replayed.target}): "
        f"{_verdict(replayed.verdict)}; in classes the replay shows: {share(replayed.seen)}")
    for row in replayed.rest:
        say(f"  not replayable: {row.get('what')}: {row.get('requests')} requests, {share(row.get('share'))}")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("capture", help="a read-only profile of a cluster's objects (counts, sizes, shapes) and "
                                       "traffic (rates, watches, shapes) into one YAML file, with no names or values")
    p.add_argument("--out", help="the profile file to write (YAML)")
    p.add_argument("--kubeconfig", help="capture an existing cluster with this kubeconfig")
    p.add_argument("--context", help="the kubeconfig context to capture (required with --kubeconfig)")
    p.add_argument("--allow-context", help="confirm the context by repeating its name (safety guard)")
    p.add_argument("--name", default=os.environ.get("LOADTEST_CLUSTER", "default"),
                   help="without --kubeconfig: the local control plane to capture (default: $LOADTEST_CLUSTER, "
                        "else default)")
    p.add_argument("--print-rbac", action="store_true",
                   help="print the read-only ClusterRole a capture needs, and nothing else")
    p.add_argument("--audit-log", action="append", default=[], metavar="FILE",
                   help="an audit log (audit.k8s.io/v1 JSON lines, plain or gzipped) to read the traffic from; "
                        "repeat for rotated files")
    p.add_argument("--window", type=seconds_arg, default=None, metavar="SECONDS",
                   help="without --audit-log: the traffic from the apiserver's /metrics scraped twice this far apart "
                        "(rates and watches; who sent them is then unknown)")
    p.add_argument("--compare", nargs=2, metavar=("ORIGINAL", "REPLAY"),
                   help="compare two profiles instead of capturing: how faithful a replay was (object counts exact, "
                        "size p50/p99 within 10 %%, rates of classes of at least 1/s within 10 %%, open watches "
                        "within 5 %%, at least 95 %% of the requests replayable); exit 0 when every target is met, "
                        "1 when one is missed or not measured, 2 for bad input")
    p.add_argument("--scale", metavar="K",
                   help="with --compare: the multiple of the original the replay made (default 1)")
    p.set_defaults(func=cmd_capture)
