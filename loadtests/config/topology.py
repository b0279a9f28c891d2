"""How many of each control-plane component a local cluster runs: the single-node default, or a highly available
control plane as kubeadm's HA guide builds one (etcd members in one cluster over peer TLS, several apiservers
behind one TCP load balancer, leader-elected schedulers and controller-managers).

Instances are named after their component, the first as the component itself (so a single-node cluster, and the
first instance of an HA one, keep the names every figure is read by) and the others numbered from 2:
`kube-apiserver`, `kube-apiserver-2`, ...; `etcd`, `etcd-2`, `etcd-3`.
"""

from __future__ import annotations

from dataclasses import dataclass

ETCD, APISERVER, SCHEDULER, CONTROLLER_MANAGER = "etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"
LOAD_BALANCER = "haproxy"  # in front of the apiservers when there are more than one
ETCD_MEMBERS = (1, 3)  # an etcd cluster of 2 has no more fault tolerance than 1, and twice the writes
MAX_APISERVERS = 3
MAX_REPLICAS = 2  # schedulers, controller-managers: one leads, the other waits for its lease


@dataclass(frozen=True)
class Topology:
    etcd_members: int = 1
    apiservers: int = 1
    schedulers: int = 1
    controller_managers: int = 1

    @property
    def load_balanced(self) -> bool:
        """More than one apiserver: every client reaches them through the load balancer."""
        return self.apiservers > 1

    @property
    def single(self) -> bool:
        return self == Topology()

    def counts(self) -> dict[str, int]:
        return {ETCD: self.etcd_members, APISERVER: self.apiservers, SCHEDULER: self.schedulers,
                CONTROLLER_MANAGER: self.controller_managers}

    def instances(self, component: str) -> list[str]:
        """The instances of a component, by name, in start order."""
        return [instance_name(component, i) for i in range(self.counts()[component])]

    def problem(self) -> tuple[str, str] | None:
        """(field, what is wrong) for a topology this harness cannot build, else None."""
        if self.etcd_members not in ETCD_MEMBERS:
            return "etcd_members", f"must be 1 or 3 (got {self.etcd_members!r})"
        for name, value, most in (("apiservers", self.apiservers, MAX_APISERVERS),
                                  ("schedulers", self.schedulers, MAX_REPLICAS),
                                  ("controller_managers", self.controller_managers, MAX_REPLICAS)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
                return name, f"must be a whole number from 1 to {most} (got {value!r})"
        return None


def instance_name(component: str, index: int) -> str:
    """`component` for the first instance (index 0), `component-N` for the N-th."""
    return component if index == 0 else f"{component}-{index + 1}"


def component_of(instance: str) -> str:
    """The component an instance belongs to: `kube-apiserver-2` -> `kube-apiserver`."""
    head, _, tail = instance.rpartition("-")
    return head if head and tail.isdigit() else instance
