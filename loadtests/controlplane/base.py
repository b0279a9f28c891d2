"""What a target (a control plane we start, or a cluster someone else runs) gives the rest of the harness."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from loadtests.controlplane.health import HealthCheck
from loadtests.kube.access import ClusterAccess
from loadtests.kube.node_identity import NodeIdentities


@dataclass
class TargetInfo:
    """Everything probes need to observe a running target."""

    access: ClusterAccess
    etcd_metrics_url: str | None  # http://127.0.0.1:PORT/metrics, or None where etcd is not reachable
    versions: dict[str, str] = field(default_factory=dict)
    # component name -> pids to measure with psutil (empty for a remote cluster)
    pids: dict[str, list[int]] = field(default_factory=dict)
    kind: str = "local"
    # component instance ("kube-scheduler", "kube-controller-manager-2", "kwok") -> its /metrics URL on its secure
    # port, which takes the admin credentials of `access`; empty where the components cannot be reached (a remote
    # cluster)
    metrics_urls: dict[str, str] = field(default_factory=dict)
    # the apiservers' audit logs (JSON lines, rotated beside them), where the harness configured them
    audit_logs: list[Path] = field(default_factory=list)  # one per apiserver: each writes its own
    # the main etcd's client endpoint with a client certificate it accepts (local control planes only)
    etcd_client: ClusterAccess | None = None
    # who the load and joining nodes are where they are not `access` (identities "production", see pki.py):
    # an ordinary user, and a kubelet (group system:nodes)
    load_access: ClusterAccess | None = None
    node_access: ClusterAccess | None = None
    # load scenarios that send as a tenant of their own (target.tenants, config/tenants.py): scenario -> its access
    scenario_access: dict[str, ClusterAccess] = field(default_factory=dict)
    # several apiservers behind a load balancer (`access.server`): each one by instance name -> its own URL, so
    # their /metrics are read one by one; empty where `access.server` is the only one
    apiservers: dict[str, str] = field(default_factory=dict)
    # an etcd of several members: each member's /metrics URL by name (etcd_metrics_url is the first's)
    etcd_members: dict[str, str] = field(default_factory=dict)


class Target(Protocol):
    """A control plane the runner brings up, observes and brings down."""

    def up(self) -> TargetInfo:
        """Start (or claim) it; tears down whatever it started when it fails."""
        ...

    def info(self) -> TargetInfo:
        """The current view, pids included (components may have been restarted)."""
        ...

    def dead_components(self) -> list[str]:
        """Components of ours that stopped running."""
        ...

    def node_identities(self, names: Sequence[str]) -> NodeIdentities | None:
        """Credentials for the named nodes' agents, each kubelet as its node (system:node:<name>), and for their
        kube-proxy; None where the harness cannot make them (it does not hold the cluster's CA)."""
        ...

    def health_checks(self) -> list[HealthCheck]:
        """What to check through every phase of a run: each component's process and health endpoint."""
        ...

    def stopped_from_outside(self) -> str | None:
        """Why it ended when it was stopped from outside (`loadtest down`, a kill of every component at once),
        not broken: said in the run's one line instead of the first component the health watch saw end."""
        ...

    def folders(self) -> list[Path]:
        """Where it writes on this machine (its folder, etcd's data, the audit log): a full disk there is the
        environment's doing (exit 4), whichever component it stopped."""
        ...

    def down(self) -> None:
        """Stop and remove everything up() started or created; safe to call twice and after a failed up."""
        ...


@dataclass(frozen=True)
class TargetRequest:
    """What the command line said of the cluster (each field overrides the plan's target when set)."""

    kubeconfig: str | None = None
    context: str | None = None
    allow_context: str | None = None  # an existing cluster only runs when its context is repeated here
    kwok_mode: str | None = None
