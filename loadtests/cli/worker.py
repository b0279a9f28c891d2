"""The command line of load from more than one machine: the run's --master-bind/--expect-workers/--ui, and
`loadtest worker` (see load/remote.py for what they do)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from loadtests.cli.flags import seconds_arg
from loadtests.cli.output import say
from loadtests.kube.identity import cluster_identity
from loadtests.load.remote import (
    CONNECT_TIMEOUT_S,
    DEFAULT_MASTER_PORT,
    IDLE_TIMEOUT_S,
    WORKER_WAIT_S,
    MasterBind,
    RemoteWorker,
    RemoteWorkerError,
    check_local_address,
    parse_address,
)


def add_run_options(parser: argparse.ArgumentParser, *, distributed: bool = True) -> None:
    """--ui, and with `distributed` the options of workers on other machines (existing clusters only)."""
    parser.add_argument("--ui", action="store_true",
                        help="serve Locust's web UI on 127.0.0.1 (read-only; the plan decides the load)")
    if not distributed:
        return
    parser.add_argument("--master-bind", metavar="ADDR:PORT",
                        help="existing cluster: each step's Locust master listens here for workers of other "
                             f"machines (`loadtest worker`); default 127.0.0.1:{DEFAULT_MASTER_PORT} with "
                             "--expect-workers")
    parser.add_argument("--expect-workers", type=int, default=None, metavar="N",
                        help="wait for N `loadtest worker` processes each step; they share the users")
    parser.add_argument("--worker-wait", type=seconds_arg, default=WORKER_WAIT_S, metavar="SECONDS",
                        help=f"how long a step waits for its workers (default {WORKER_WAIT_S:.0f})")


def master_bind(plan: Any, args: argparse.Namespace) -> MasterBind | None:
    """The run's --master-bind/--expect-workers, checked before anything starts; None without them."""
    bind, expected = getattr(args, "master_bind", None), getattr(args, "expect_workers", None)
    if bind is None and expected is None:
        return None
    if expected is None:
        raise RemoteWorkerError(f"--master-bind {bind}: say how many workers to wait for with --expect-workers N")
    if expected < 1:
        raise RemoteWorkerError(f"--expect-workers {expected}: a run with workers of other machines needs at "
                                "least one (leave the flag out to run the load on this machine)")
    if plan.target.kind != "cluster" and not getattr(args, "kubeconfig", None):
        raise RemoteWorkerError("--master-bind/--expect-workers: workers of other machines join runs against an "
                                "existing cluster only (--kubeconfig K --context C --allow-context C); a local "
                                "control plane listens on loopback alone")
    local_workers = plan.workers if args.workers is None else args.workers
    if local_workers:
        raise RemoteWorkerError(f"--expect-workers {expected} with {local_workers} local worker processes "
                                "(--workers or the plan's workers): start local ones as `loadtest worker` too")
    if not args.worker_wait > 0:
        raise RemoteWorkerError(f"--worker-wait {args.worker_wait:g}: expected a number of seconds > 0")
    host, port = parse_address(bind, "--master-bind") if bind else ("127.0.0.1", DEFAULT_MASTER_PORT)
    check_local_address(host, "--master-bind", port)
    return MasterBind(host=host, port=port, workers=expected, wait_s=args.worker_wait)


def cmd_worker(args: argparse.Namespace) -> int:
    """`loadtest worker`: join a run's steps from this machine, with this machine's own access."""
    from loadtests.binaries import cache as binaries
    from loadtests.controlplane.existing import guard

    host, port = parse_address(args.master, "--master")
    if args.bind:
        check_local_address(args.bind, "--bind")
    if not args.kubeconfig:
        raise RemoteWorkerError("loadtest worker needs --kubeconfig FILE --context NAME --allow-context NAME: each "
                                "worker reaches the cluster with its own credentials, which never leave it")
    for flag, value in (("--connect-timeout", args.connect_timeout), ("--idle-timeout", args.idle_timeout)):
        if not value > 0:
            raise RemoteWorkerError(f"{flag} {value:g}: expected a number of seconds > 0")
    context = guard(args.kubeconfig, args.context, args.allow_context)
    workdir = Path(tempfile.mkdtemp(prefix="loadtest-worker-"))  # mode 0700: credential files
    log_dir = Path(args.log_dir) if args.log_dir else binaries.cache_root() / "logs" / f"worker-{os.getpid()}"
    worker = None
    try:
        access = context.materialize(workdir)
        uid = cluster_identity(access, f"context {context.name!r} ({context.server})")
        worker = RemoteWorker(host, port, access, uid, workdir, log_dir, source=args.bind, say=say)
        say(f"worker {worker.label}: cluster {context.server} (kube-system uid {uid}); joining the run at "
            f"{worker.master}; logs in {log_dir}")
        worker.serve(args.connect_timeout, args.idle_timeout)
    finally:
        if worker is not None:
            worker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0




def add_worker_command(sub: Any) -> None:
    p = sub.add_parser("worker", help="join a run's load from this machine (its master started with "
                                      "--master-bind ADDR:PORT --expect-workers N)")
    p.add_argument("--master", required=True, metavar="HOST:PORT", help="the run's --master-bind address")
    p.add_argument("--kubeconfig", help="this machine's kubeconfig for the run's cluster")
    p.add_argument("--context", help="the kubeconfig context to use")
    p.add_argument("--allow-context", help="confirm the context by repeating its name (safety guard)")
    p.add_argument("--bind", metavar="ADDR", help="connect to the master from this local address")
    p.add_argument("--connect-timeout", type=seconds_arg, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
                   help=f"wait this long for the run's master (default {CONNECT_TIMEOUT_S:.0f})")
    p.add_argument("--idle-timeout", type=seconds_arg, default=IDLE_TIMEOUT_S, metavar="SECONDS",
                   help=f"after a step, wait this long for the next one (default {IDLE_TIMEOUT_S:.0f})")
    p.add_argument("--log-dir", help="where the Locust worker logs go (default: the cache's logs folder)")
    p.set_defaults(func=cmd_worker)
