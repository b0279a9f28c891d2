"""Which target a run gets: the plan's local control plane, or an existing cluster when the plan or the command
line names one (its guard runs here, before anything starts)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from loadtests.config.plan import Plan
from loadtests.controlplane.base import Target, TargetRequest


def make_target(plan: Plan, run_id: str, out_dir: Path, request: TargetRequest,
                log: Callable[[str], None] = print) -> Target:
    """The run's target, not started yet; an existing cluster keeps its component logs in out_dir."""
    if plan.target.kind == "cluster" or request.kubeconfig:
        from loadtests.controlplane.existing import ExistingCluster
        from loadtests.controlplane.local import KEPT_LOGS

        return ExistingCluster.from_request(plan, request, log_dir=out_dir / KEPT_LOGS, log=log)
    from loadtests.controlplane.audit import AuditLog, audit_destination
    from loadtests.controlplane.local import LocalOptions, RunControlPlane

    audit = None
    # checked before anything starts: a bad destination is one line, no run; no log where no probe reads it
    if plan.audit.enabled and "audit" in plan.probes():
        audit = AuditLog(audit_destination(plan.audit.dir, out_dir), max_size_mb=plan.audit.max_size_mb,
                         max_backups=plan.audit.max_backups)
    return RunControlPlane(LocalOptions(
        # two runs with the same folder name never share a cluster
        name=f"run-{run_id}-{os.getpid()}", kube_version=plan.target.kube_version,
        heartbeat_factor=plan.target.heartbeat_factor, events_etcd=plan.target.events_etcd,
        leases_etcd=plan.target.leases_etcd, tied_to_owner=True,
        audit=audit, component_args=plan.target.component_args, etcd_storage=plan.target.etcd_storage,
        identities=plan.target.identities, topology=plan.target.topology, profiling="profiles" in plan.probes(),
        tenants=plan.target.tenants),
        out_dir, log)
