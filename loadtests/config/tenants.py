"""Tenants of a local control plane: load scenarios sent as users of their own, as a shared cluster's tenants
are, rather than as the harness's load identity.

Each tenant is an ordinary user (a client certificate in the tenant's groups, never a `system:` group, so API
Priority and Fairness neither exempts it as it does system:masters nor takes it for a kubelet), allowed only
what its RBAC `rules` grant, and optionally given a FlowSchema of its own that maps every request of the user to
a priority level of its own (`flow_schema`). The control plane makes all of it before the first step
(controlplane/tenants.py); it goes with the cluster. The plan names them under `target.tenants`, by user:

    tenants:
      tenant-noisy:
        groups: [tenants]
        scenarios: [list_pollers]
        rules: [{apiGroups: [""], resources: [pods], verbs: [list]}]
        flow_schema: {shares: 1, queues: 4, hand_size: 1, queue_length: 10}
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

from loadtests.config.scenarios import SCENARIOS
from loadtests.errors import PlanError

# a user's name is also the name of its flow-control objects and of its files: a DNS label
USER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
RULE_KEYS = frozenset({"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"})
# global-default's matchingPrecedence: a tenant's FlowSchema must come before it to take the tenant's requests
GLOBAL_DEFAULT_PRECEDENCE = 9900


@dataclass(frozen=True)
class FlowSchemaSpec:
    """A Limited PriorityLevelConfiguration of the tenant's own, and a FlowSchema sending every request of the
    tenant to it (distinguished by user, as global-default does)."""

    shares: int = 1  # nominalConcurrencyShares: its part of the apiserver's seats against the other levels'
    lendable_percent: int = 0  # of its seats, how many other levels may borrow
    borrowing_limit_percent: int | None = 0  # how many it may borrow from others, % of its own; None: no limit
    queues: int = 4  # 0: requests that find no free seat are rejected at once (limitResponse Reject)
    hand_size: int = 1  # queues a flow is shuffle-sharded over
    queue_length: int = 10  # requests a queue holds before the next one is rejected (429)
    precedence: int = 1000  # matchingPrecedence: must be below global-default's 9900


@dataclass
class Tenant:
    """One tenant: its groups, the scenarios that send as it, what RBAC lets it do, its own flow schema."""

    groups: list[str] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)
    rules: list[dict[str, Any]] = field(default_factory=list)  # RBAC PolicyRules of a ClusterRole bound to it
    flow_schema: FlowSchemaSpec | None = None


def _error(source: str, path: str, reason: str) -> PlanError:
    return PlanError(f"{source}: {path}: {reason}")


def _strings(source: str, path: str, value: Any, *, required: bool, blank: bool = False) -> list[str]:
    """A list of names (`blank`: "" is one too, as the core API group's)."""
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and (v or blank) for v in value) \
            or (required and not value):
        raise _error(source, path, f"must be a {'non-empty ' if required else ''}list of names (got {value!r})")
    return list(value)


def _rules(source: str, path: str, value: Any) -> list[dict[str, Any]]:
    """RBAC PolicyRules: verbs, and resources (in apiGroups, "" the core group by default) or nonResourceURLs."""
    if not isinstance(value, list) or not value:
        raise _error(source, path, "must be a non-empty list of RBAC rules, e.g. "
                                   "[{apiGroups: [\"\"], resources: [pods], verbs: [list]}]")
    rules = []
    for i, raw in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(raw, dict):
            raise _error(source, where, "must be a mapping with verbs and resources (or nonResourceURLs)")
        unknown = sorted(set(raw) - RULE_KEYS)
        if unknown:
            raise _error(source, f"{where}.{unknown[0]}",
                         f"unknown field; expected one of: {', '.join(sorted(RULE_KEYS))}")
        rule = {key: _strings(source, f"{where}.{key}", raw.get(key), required=key == "verbs",
                              blank=key == "apiGroups") for key in raw}
        if "verbs" not in rule:
            raise _error(source, f"{where}.verbs", "is required: the verbs the rule allows, e.g. [list]")
        if bool(rule.get("resources")) == bool(rule.get("nonResourceURLs")):
            raise _error(source, where, "needs resources or nonResourceURLs (one of them)")
        if rule.get("resources"):
            rule.setdefault("apiGroups", [""])
        rules.append(rule)
    return rules


def _whole(source: str, path: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value != int(value) or not low <= value <= high:
        raise _error(source, path, f"must be a whole number from {low} to {high} (got {value!r})")
    return int(value)


def _flow_schema(source: str, path: str, value: Any) -> FlowSchemaSpec | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _error(source, path, f"must be a mapping (got {type(value).__name__})")
    known = {f.name for f in dataclasses.fields(FlowSchemaSpec)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise _error(source, f"{path}.{unknown[0]}", f"unknown field; expected one of: {', '.join(sorted(known))}")
    spec = FlowSchemaSpec(**value)
    _whole(source, f"{path}.shares", spec.shares, 1, 10_000)
    _whole(source, f"{path}.lendable_percent", spec.lendable_percent, 0, 100)
    if spec.borrowing_limit_percent is not None:
        _whole(source, f"{path}.borrowing_limit_percent", spec.borrowing_limit_percent, 0, 10_000)
    _whole(source, f"{path}.queues", spec.queues, 0, 512)
    if spec.queues:
        _whole(source, f"{path}.hand_size", spec.hand_size, 1, min(spec.queues, 8))
        _whole(source, f"{path}.queue_length", spec.queue_length, 1, 1000)
    _whole(source, f"{path}.precedence", spec.precedence, 2, GLOBAL_DEFAULT_PRECEDENCE - 1)
    return spec


def parse(source: str, value: Any) -> dict[str, Tenant]:
    """`target.tenants`: users by name, each refused in one line naming the field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(source, "target.tenants",
                     f"must be a mapping of user names to tenants (got {type(value).__name__})")
    tenants: dict[str, Tenant] = {}
    owner: dict[str, str] = {}
    known = {f.name for f in dataclasses.fields(Tenant)}
    for user, raw in value.items():
        path = f"target.tenants.{user}"
        if not isinstance(user, str) or not USER_NAME.match(user):
            raise _error(source, path, "a tenant's user name must be lowercase letters, digits and '-' (at most 63), "
                                       "as the names of its flow-control objects are")
        if not isinstance(raw, dict):
            raise _error(source, path, "must be a mapping with scenarios and rules (and groups, flow_schema)")
        unknown = sorted(set(raw) - known)
        if unknown:
            raise _error(source, f"{path}.{unknown[0]}", f"unknown field; expected one of: {', '.join(sorted(known))}")
        groups = _strings(source, f"{path}.groups", raw.get("groups"), required=False)
        for i, group in enumerate(groups):
            if group.startswith("system:"):
                raise _error(source, f"{path}.groups[{i}]", f"{group} is a group of Kubernetes' own (system:masters "
                                                         "is exempt from flow control, system:nodes are kubelets); "
                                                         "a tenant is an ordinary user")
        scenarios = _strings(source, f"{path}.scenarios", raw.get("scenarios"), required=True)
        for i, scenario in enumerate(scenarios):
            if scenario not in SCENARIOS:
                raise _error(source, f"{path}.scenarios[{i}]", f"unknown scenario {scenario!r}; expected one of: "
                                                            f"{', '.join(sorted(SCENARIOS))}")
            if scenario in owner:
                raise _error(source, f"{path}.scenarios[{i}]", f"{scenario} already sends as {owner[scenario]}: a "
                                                            "scenario has one identity")
            owner[scenario] = user
        tenants[user] = Tenant(groups=groups, scenarios=scenarios,
                               rules=_rules(source, f"{path}.rules", raw.get("rules")),
                               flow_schema=_flow_schema(source, f"{path}.flow_schema", raw.get("flow_schema")))
    return tenants


def flow_control_off(apiserver_args: list[str]) -> bool:
    """Whether kube-apiserver's flags turn API Priority and Fairness off (the last of the flag wins, as in Go)."""
    value = None
    for flag in apiserver_args:
        name, _, given = flag.partition("=")
        if name == "--enable-priority-and-fairness":
            value = given or "true"
    return value is not None and value.lower() in ("false", "0", "f")


def check_flow_control(source: str, tenants: dict[str, Tenant], apiserver_args: list[str]) -> None:
    """A tenant's own flow schema needs flow control on: with it off the apiserver would never take it up."""
    with_schema = [user for user, tenant in tenants.items() if tenant.flow_schema is not None]
    if with_schema and flow_control_off(apiserver_args):
        raise _error(source, f"target.tenants.{with_schema[0]}.flow_schema",
                     "needs API Priority and Fairness, which target.component_args turn off "
                     "(--enable-priority-and-fairness=false); drop one of them")
