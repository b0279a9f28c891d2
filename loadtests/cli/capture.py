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

from loadtests.cli.flags import seconds_arg
from loadtests.cli.output import say, write
from loadtests.errors import LoadTestError
from loadtests.kube.access import ClusterAccess

if TYPE_CHECKING:
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
    p.set_defaults(func=cmd_capture)
