"""Who is expensive: the audit log's requests of a step, summed per client, and the clients behind each
server-side figure. Read from results only (step.audit), so a report rebuilt elsewhere says the same."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from loadtests.capture.harness import HARNESS_USER_AGENTS
from loadtests.results import StepResult
from loadtests.results.apiserver import ServerLatency
from loadtests.results.audit import AuditRow

TOP_CLIENTS = 12


@dataclass
class ClientCost:
    """One client's requests in a step: how many, how much apiserver time, and its costliest kinds."""

    client: str
    requests: int
    apiserver_s: float
    share_requests: float  # of all audited requests in the step, 0..1
    share_time: float  # of all audited apiserver time (watches add none), 0..1
    top_kinds: str  # e.g. "PUT leases 1,234 · GET leases 12"
    errors: int  # responses 5xx and 429


def _kind(row: AuditRow) -> str:
    return f"{row.verb} {row.resource}" + (f" ({row.scope})" if row.verb in ("LIST", "WATCH") else "")


def client_costs(step: StepResult) -> list[ClientCost]:
    """Every client of the step, costliest apiserver time first (then most requests)."""
    rows = step.audit.requests
    total_n = sum(r.count for r in rows) or 1
    total_s = sum(r.apiserver_s for r in rows) or 1.0
    by_client: dict[str, list[AuditRow]] = defaultdict(list)
    for row in rows:
        by_client[row.client].append(row)
    costs = []
    for client, own in by_client.items():
        n = sum(r.count for r in own)
        seconds = sum(r.apiserver_s for r in own)
        kinds = sorted(own, key=lambda r: (-r.apiserver_s, -r.count))[:3]
        errors = sum(count for r in own for code, count in r.codes.items() if code == "429" or code.startswith("5"))
        costs.append(ClientCost(client=client, requests=n, apiserver_s=seconds, share_requests=n / total_n,
                                share_time=seconds / total_s,
                                top_kinds=" · ".join(f"{_kind(r)} {r.count:,}" for r in kinds), errors=errors))
    return sorted(costs, key=lambda c: (-c.apiserver_s, -c.requests, c.client))


def top_by_count(costs: list[ClientCost]) -> list[ClientCost]:
    return sorted(costs, key=lambda c: (-c.requests, c.client))[:TOP_CLIENTS]


def _matches(row: AuditRow, entry: ServerLatency) -> bool:
    resource = entry.resource + (f"/{entry.subresource}" if entry.subresource else "")
    return (row.verb == entry.verb.upper() and row.resource == resource and row.scope == entry.scope
            and row.group == entry.group)


@dataclass
class Clients:
    """The clients whose requests a server-side entry covers, as the audit log counted them."""

    shares: list[tuple[str, int, float]]  # client, requests, share 0..1 (largest first)
    audited: int  # requests the audit log counted for the entry

    def describe(self, most: int = 3) -> str:
        if not self.shares:
            return "—"
        shown = [f"{client} {share * 100:.0f} %" for client, _, share in self.shares[:most]]
        rest = len(self.shares) - most
        return ", ".join(shown) + (f", {rest} more" if rest > 0 else "")


def clients_of(step: StepResult, entry: ServerLatency) -> Clients | None:
    """Who sent the requests of one server-side entry (None where the step read no audit log)."""
    if not step.audit.source:
        return None
    rows = [r for r in step.audit.requests if _matches(r, entry)]
    total = sum(r.count for r in rows)
    per_client: dict[str, int] = defaultdict(int)
    for row in rows:
        per_client[row.client] += row.count
    shares = sorted(((c, n, n / total) for c, n in per_client.items()), key=lambda s: (-s[1], s[0])) if total else []
    return Clients(shares=shares, audited=total)


HARNESS_PARTS = HARNESS_USER_AGENTS


def origin_of(client: str) -> str:
    """Whose a client is: the load (a scenario), the harness (fleet, probes, health), or the cluster itself."""
    if client.startswith(HARNESS_PARTS):
        return "harness"
    if client.startswith("k8s-loadtest/"):
        return "load"
    return "cluster"


def origins(step: StepResult, request: str) -> str:
    """Where the apiserver's count of one request kind (e.g. "POST pods") came from, by the audit log: the
    load's, the harness's own, and the cluster's (kwok, controllers), with the largest cluster client named."""
    if not step.audit.source:
        return ""
    verb, _, resource = request.partition(" ")
    rows = [r for r in step.audit.requests if r.verb == verb and r.resource == resource]
    totals: dict[str, int] = defaultdict(int)
    clients: dict[str, int] = defaultdict(int)
    for row in rows:
        totals[origin_of(row.client)] += row.count
        if origin_of(row.client) == "cluster":
            clients[row.client] += row.count
    parts = [f"{who} {totals[who]:,}" for who in ("load", "harness", "cluster") if totals.get(who)]
    if clients:
        top = max(clients, key=lambda c: clients[c])
        parts[-1] += f" ({top}{' …' if len(clients) > 1 else ''})"
    return ", ".join(parts) or "none audited"
