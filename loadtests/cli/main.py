"""`loadtest`: set up binaries, bring a control plane up/down, scale nodes, run plans, build and compare reports."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from loadtests.binaries import cache as binaries
from loadtests.cli.flags import count_arg, factor_arg, port_arg
from loadtests.cli.output import OutputClosed, flush, output_closed, say, write
from loadtests.config import versions
from loadtests.config.topology import ETCD_MEMBERS, MAX_APISERVERS, MAX_REPLICAS, Topology
from loadtests.errors import (
    EXIT_BAD_INPUT,
    EXIT_OUTPUT_CLOSED,
    ComponentFailed,
    EnvironmentProblem,
    LoadTestError,
    full_disk_of,
    write_error_log,
)
from loadtests.shutdown import SHUTDOWN, interrupt_reason


def _local(args: argparse.Namespace) -> Any:
    from loadtests.controlplane.local import LocalControlPlane, LocalOptions

    return LocalControlPlane(LocalOptions(
        name=args.name,
        kube_version=getattr(args, "kube_version", None) or versions.DEFAULT_KUBE_VERSION,
        heartbeat_factor=getattr(args, "heartbeat_factor", 1.0),
        events_etcd=getattr(args, "events_etcd", False),
        apiserver_port=getattr(args, "port", None),
        topology=Topology(etcd_members=getattr(args, "etcd_members", 1), apiservers=getattr(args, "apiservers", 1),
                          schedulers=getattr(args, "schedulers", 1),
                          controller_managers=getattr(args, "controller_managers", 1)),
    ))


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments are one line (what is wrong, and where to read more), not a usage dump."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def _print_message(self, message: str, file: Any = None) -> None:
        """--help goes through the command's own stdout writer, so a reader that went away is noticed."""
        if message and file is sys.stdout:
            write(message)
        else:
            super()._print_message(message, file)


def cmd_setup(args: argparse.Namespace) -> int:
    from loadtests.binaries.prometheus import provide_prometheus
    from loadtests.binaries.provide import provide, provide_hollow_node

    wanted = [args.kube_version] + ([versions.PREVIOUS_KUBE_VERSION] if args.previous else [])
    for version in dict.fromkeys(wanted):
        provide(version, log=say)
    if args.hollow_node:
        provide_hollow_node(args.kube_version, log=say)
    hollow = f", kubemark {args.kube_version}" if args.hollow_node else ""
    prometheus = f", prometheus {versions.PROMETHEUS_VERSION}" if provide_prometheus(log=say) else ""
    say(f"ready: Kubernetes {', '.join(dict.fromkeys(wanted))}, etcd {versions.ETCD_VERSION}, "
        f"kwok {versions.KWOK_VERSION}{hollow}{prometheus} in {binaries.cache_root() / 'bin'}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from loadtests.controlplane.local import leftover_lines

    for line in sum(leftover_lines(), []):
        say(f"warning: {line}")
    plane = _local(args)
    try:
        info = plane.up(log=say)
    except ComponentFailed as error:  # as a run says it: a component that died on a full disk is the machine's
        if full := full_disk_of(plane.folders(), str(error)):
            raise EnvironmentProblem(f"{full}; {error}"[:600]) from None
        raise
    if args.nodes:
        _scale(info.access, args.nodes)
    say(f"control plane {args.name!r} is up: {info.access.server} (Kubernetes {info.versions['kubernetes']})")
    say(f"kubectl --kubeconfig {info.access.kubeconfig} get nodes")
    return 0


def _scale(access: Any, nodes: int) -> None:
    from loadtests.kube.rest import RestClient
    from loadtests.run.fleet import FLEET_USER_AGENT, Fleet

    client = RestClient(access, user_agent=FLEET_USER_AGENT)
    try:
        ramp = Fleet(client).scale_nodes(nodes, progress=say)
    finally:
        client.close()
    say(f"{ramp.nodes} nodes Ready in {ramp.seconds:.1f} s (created {ramp.created}, deleted {ramp.deleted}; "
        f"harness CPU {ramp.harness_cpu_s:.1f} s)")


def cmd_nodes(args: argparse.Namespace) -> int:
    plane = _local(args)
    _scale(plane.access(), args.count)
    return 0


def _stopped_line(name: str, result: dict[str, Any]) -> str:
    stopped = ", ".join(result["stopped"]) or "nothing was running"
    killed = f" (killed after timeout: {', '.join(result['killed'])})" if result["killed"] else ""
    left = (f"; its run (pid {result['left_to']}) keeps the logs and removes its folder as it ends"
            if result.get("left_to") else "")
    return f"{name}: stopped: {stopped}{killed}{left}"


def cmd_down(args: argparse.Namespace) -> int:
    """Stop one named cluster, or (--orphans) every cluster whose run was killed, and remove their keys."""
    from loadtests.controlplane.local import LocalControlPlane, LocalOptions, orphaned_clusters, stale_clusters
    from loadtests.controlplane.processes import DownRequest

    request = DownRequest.here()  # a run whose cluster this stops says who stopped it
    if not args.orphans:
        say(_stopped_line(args.name, _local(args).down(request=request)))
        return 0
    found = orphaned_clusters() + stale_clusters()
    for state in found:
        plane = LocalControlPlane(LocalOptions(name=state.name, directory=Path(state.directory)))
        say(_stopped_line(state.name, plane.down(request=request)))
    if not found:
        say("no orphaned clusters")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from loadtests.controlplane.local import leftover_lines

    status = _local(args).status()
    orphans, stale = leftover_lines()
    if args.json:
        say(json.dumps({**status, "orphans": orphans, "stale": stale}, indent=1))
        return 0  # an answer either way ("running" says which), not an error
    for line in orphans + stale:
        say(line)
    if not status["running"]:
        say(f"cluster {args.name!r}: not running")
        return 0
    say(f"cluster {status['name']!r}: {'ready' if status['ready'] else 'starting'} at {status['server']}")
    say("versions: " + ", ".join(f"{k} {v}" for k, v in status["versions"].items()))
    width = max((len(comp["component"]) for comp in status["components"]), default=0) + 1
    for comp in status["components"]:
        say(f"  {comp['component']:<{width}} pid {comp['pid']:<8} {'running' if comp['alive'] else 'STOPPED'}")
    say("ports: " + ", ".join(f"{k}={v}" for k, v in status["ports"].items()))
    say(f"etcd metrics: {status['etcd_metrics_url']}")
    say(f"kubeconfig: {status['kubeconfig']}")
    return 0


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    status = _local(args).status()
    if not status.get("kubeconfig"):
        raise LoadTestError(f"no cluster named {args.name!r}; start one: loadtest up --name {args.name}")
    say(status["kubeconfig"])
    return 0


def _add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default=os.environ.get("LOADTEST_CLUSTER", "default"),
                        help="name of the local control plane (default: $LOADTEST_CLUSTER, else default)")


def _cluster_command(sub: Any, name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
    """A subcommand that acts on one named local control plane."""
    parser = sub.add_parser(name, help=help_text)
    _add_cluster_args(parser)
    parser.set_defaults(func=func)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="loadtest", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    p = sub.add_parser("setup", help="provide pinned control-plane binaries (cache, download, or Go build) "
                                        "and Prometheus (Debian's package, where apt reaches it)")
    p.add_argument("--kube-version", default=os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION,
                   help="the Kubernetes version to provide (default: $KUBE_VERSION, else "
                        f"{versions.DEFAULT_KUBE_VERSION})")
    p.add_argument("--previous", action="store_true",
                   help=f"also provide {versions.PREVIOUS_KUBE_VERSION}, the other side of upgrade rehearsals")
    p.add_argument("--hollow-node", action="store_true",
                   help="also provide kubemark at --kube-version (the hollow node: a real kubelet or kube-proxy on a "
                        "fake runtime), built from Go modules as it is no release download; a run does not need it, "
                        "benchmarks/hollow_node.py does")
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("up", help="start a local control plane on 127.0.0.1 (TLS, client-cert auth)")
    _add_cluster_args(p)
    p.add_argument("--kube-version", default=os.environ.get("KUBE_VERSION") or versions.DEFAULT_KUBE_VERSION,
                   help="the Kubernetes version to start, provided by `loadtest setup` (default: $KUBE_VERSION, else "
                        f"{versions.DEFAULT_KUBE_VERSION})")
    p.add_argument("--nodes", type=count_arg, default=0, help="fake nodes to create once it is up")
    p.add_argument("--port", type=port_arg, default=None, help="apiserver port (default: a free one)")
    p.add_argument("--heartbeat-factor", type=factor_arg, default=1.0,
                   help="multiply node heartbeat/lease intervals (1 = like a real kubelet)")
    p.add_argument("--events-etcd", action="store_true", help="store Events in a second etcd")
    p.add_argument("--etcd-members", type=int, choices=ETCD_MEMBERS, default=1,
                   help="etcd members of the cluster (peers over TLS)")
    p.add_argument("--apiservers", type=int, choices=range(1, MAX_APISERVERS + 1), default=1,
                   help="apiservers; more than one are reached through HAProxy on --port")
    p.add_argument("--schedulers", type=int, choices=range(1, MAX_REPLICAS + 1), default=1,
                   help="kube-scheduler replicas (leader-elected when 2)")
    p.add_argument("--controller-managers", type=int, choices=range(1, MAX_REPLICAS + 1), default=1,
                   help="kube-controller-manager replicas (leader-elected when 2)")
    p.set_defaults(func=cmd_up)

    _cluster_command(sub, "down", cmd_down, "stop every process of a local control plane and free its ports"
                     ).add_argument("--orphans", action="store_true",
                                    help="stop every cluster whose run is gone (killed outright), whatever its name")
    _cluster_command(sub, "status", cmd_status, "what runs, where, which versions").add_argument(
        "--json", action="store_true", help="print the status as one JSON object (`running` says whether it runs)")
    _cluster_command(sub, "kubeconfig", cmd_kubeconfig, "print the admin kubeconfig path (last line)")
    _cluster_command(sub, "nodes", cmd_nodes, "scale the fake fleet to COUNT Ready nodes").add_argument(
        "count", type=count_arg, help="the number of fake nodes to have, each Ready (fewer: the extra are deleted)")

    _add_run_commands(sub)
    return parser


def _add_run_commands(sub: Any) -> None:
    from loadtests.cli import capture, compare, history, index, lessons, run, worker

    for room in (run, compare, history, index, lessons, capture):
        room.add_commands(sub)
    worker.add_worker_command(sub)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code (docs/faults.md). Whatever it was doing, a reader of its output that went
    away (`| head -1`) makes it EXIT_OUTPUT_CLOSED, which no verdict shares."""
    SHUTDOWN.install()
    try:
        code = _command(argv)
    except BrokenPipeError:  # stderr's reader went away as the error line was said (`2>&1 | head -0`)
        return EXIT_OUTPUT_CLOSED
    return EXIT_OUTPUT_CLOSED if output_closed() else code


def _command(argv: list[str] | None) -> int:
    """The command's exit code; whatever ended it is said in one line on stderr, never as a traceback."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help (written through `write`), or a bad argument said in one line
        return done.code if isinstance(done.code, int) else EXIT_BAD_INPUT
    try:
        code = int(args.func(args) or 0)
        flush()
        return code
    except OutputClosed:  # nothing more to say: its reader is gone
        return EXIT_OUTPUT_CLOSED
    except LoadTestError as error:
        print(f"loadtest: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as interrupt:
        print(f"loadtest: {interrupt_reason(interrupt)}; everything it started has been stopped", file=sys.stderr)
        return 130
    except Exception as error:  # never a traceback: one line, and the details in a file
        log = write_error_log(binaries.cache_root() / "logs", error)
        print(f"loadtest: unexpected error: {type(error).__name__}: {error}; details in {log}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())

