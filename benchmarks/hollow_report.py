"""benchmarks/results/hollow_node.md and its raw record, from what benchmarks/hollow_node.py measured: the agents'
requests per node per minute beside the reference (loadtests/data/node_agents_reference.yaml), the watches they
hold, who they are, what they send and get, what their start cost, and what each process used. A run that could
not hold its nodes writes what it needs, what was tried and the error lines instead."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import hollow_audit as ha
from benchmarks.markdown import keep_raw, results_head, write_results
from loadtests.config import versions

RAW = "hollow_node"  # under benchmarks/results/raw/
AGENT_REFERENCE = {ha.KUBELET: ("kubelet", "hollow-kubelet"), ha.PROXY: ("kube-proxy", "hollow-proxy")}
CONFIGMAPS_PER_NODE = 2  # hollow-config and kube-root-ca.crt (the default token volume projects it)
SECRETS_PER_NODE = 1  # hollow-secret
SAME = 0.25  # a measured rate within this share of the expected one is not called a difference


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value else "0"


def _key_cells(key: ha.Key) -> str:
    verb, resource, subresource, scope = key
    return f"{verb} | {resource} | {subresource} | {scope}"


# --- the steady table -------------------------------------------------------------------------------------------


def steady_rows(requests: list[ha.Request], measured: Any, reference: dict[str, Any],
                configmaps: int = CONFIGMAPS_PER_NODE, secrets: int = SECRETS_PER_NODE) -> list[dict[str, Any]]:
    """One row per (agent, key) seen in the window or in the reference: each node's rate, the mean, the renewals
    due in this window, the reference's long-run rates (hollow agent and real one) for nodes whose pods reference
    `configmaps` ConfigMaps and `secrets` Secrets."""
    opened, closed = measured.timeline["window_opened"], measured.timeline["window_closed"]
    nodes, minutes = measured.nodes, (closed - opened) / 60
    rates = ha.per_node_rates(requests, opened, closed, nodes)
    due = ha.renewals_due(requests, opened, closed)
    rows = []
    for agent, (real, hollow) in AGENT_REFERENCE.items():
        pods = measured.pods_per_node
        ref_real = ha.reference_rates(reference, (real,), pods, configmaps, secrets)
        ref_hollow = ha.reference_rates(reference, (hollow,), pods, configmaps, secrets)
        keys = {k for a, k in rates if a == agent} | set(ref_real) | set(ref_hollow)
        for key in sorted(keys):
            per_node = rates.get((agent, key), {})
            if agent == ha.PROXY:
                mean = per_node.get(ha.EVERY_NODE, 0.0)
            else:
                mean = sum(per_node.get(n, 0.0) for n in nodes) / len(nodes)
            due_count = sum(n for (a, _node, k), n in due.items() if a == agent and k == key)
            rows.append({"agent": agent, "key": key, "per_node": per_node, "mean": mean,
                         "due": due_count / len(nodes) / minutes if key[0] == "WATCH" else None,
                         "hollow": ref_hollow.get(key), "real": ref_real.get(key)})
    return rows


def steady_lines(rows: list[dict[str, Any]], nodes: list[str]) -> list[str]:
    lines = []
    for row in rows:
        cells = [("·" if row["agent"] == ha.PROXY else _num(row["per_node"].get(n, 0.0))) for n in nodes]
        lines.append(f"| {_key_cells(row['key'])} | {row['agent']} | " + " | ".join(cells)
                     + f" | **{_num(row['mean'])}** | {_num(row['due'])} | {_num(row['hollow'])} | "
                       f"{_num(row['real'])} |")
    return lines


def _last_before(requests: list[ha.Request], agent: str, key: ha.Key, moment: float) -> str:
    """How long before `moment` each node's agent last sent `key` ("never" where it did not)."""
    last: dict[str, float] = {}
    for r in ha.agents_requests(requests):
        if r.agent == agent and r.key == key and r.received < moment and not r.refused:
            last[r.node] = r.received
    if not last:
        return "never sent before the window closed"
    return "each node's last one " + ", ".join(f"{moment - at:.0f} s" for _, at in sorted(last.items())) + \
        " before the window closed"


def differences(rows: list[dict[str, Any]], requests: list[ha.Request], closed: float) -> list[str]:
    """Each row whose measured rate is not the hollow reference's, named with what this window could show; and
    the LISTs, which the reference says an agent never sends."""
    said, as_due = [], []
    for row in rows:
        name = f"{row['agent']} {' '.join(p for p in row['key'] if p)}"
        mean, hollow, real, due = row["mean"], row["hollow"], row["real"], row["due"]
        if hollow is None and real is None:
            said.append(f"- {name}: {_num(mean)} a minute, **not in the reference** (neither agent's steady state).")
        elif hollow is None:
            said.append(f"- {name}: the real agent's ({_num(real)} a minute); kubemark's does not send it "
                        f"(the reference says so), measured {_num(mean)}.")
        elif due is not None and abs(mean - due) > max(SAME * due, 0.01):
            said.append(f"- {name}: {_num(mean)} a minute measured, {_num(due)} due in this window from the "
                        f"timeoutSeconds of the watches held when it opened (long run: {_num(hollow)}): watches "
                        "opened in the window, or ended before their time.")
        elif due is not None and abs(mean - hollow) > max(SAME * hollow, 0.01):
            as_due.append(f"{row['agent']} {row['key'][1]} ({_num(mean)} against {_num(hollow)})")
        elif due is None and abs(mean - hollow) > max(SAME * hollow, 0.01):
            said.append(f"- {name}: {_num(mean)} a minute measured against {_num(hollow)} in the reference "
                        f"(a long-run rate; {_last_before(requests, row['agent'], row['key'], closed)}).")
    if as_due:
        said.append("- WATCH renewals as due in this window, not at the long-run rate: " + "; ".join(as_due)
                    + ". Each watch renews at its own timeoutSeconds (300-600 s; the per-object ones 1,800-3,600 s), "
                    "so a window of a few minutes holds the renewals of the watches whose time falls in it; the "
                    "long-run rate needs a window of many timeouts.")
    listed = ha.fallbacks(requests)
    if listed:
        after = sum(1 for _, watch in listed if watch is not None)
        said.append(f"- LIST: the reference has none (every reflector starts with a streaming list); {len(listed)} "
                    f"LIST requests over the run, {after} of them right after the same reflector's streaming list was "
                    "refused: client-go's fallback (see Refused requests).")
    return said or ["- none beyond the reference's tolerance (a quarter of its rate)."]


# --- watches, identities, content types -------------------------------------------------------------------------


def watch_lines(requests: list[ha.Request], measured: Any) -> list[str]:
    closed = measured.timeline["window_closed"] - 0.001
    shapes = ha.held_by_shape(requests, closed)
    spans = ha.timeouts(requests)
    lines = ["| agent | resource | group | scope | fieldSelector | labelSelector | allowWatchBookmarks | "
             + " | ".join(measured.nodes) + " | per node | timeoutSeconds asked |",
             "|---" * (9 + len(measured.nodes)) + "|"]
    total: Counter[str] = Counter()
    for shape in sorted(shapes, key=lambda s: (s.agent, s.resource, s.field_selector)):
        count = shapes[shape]
        shared = count.get(ha.EVERY_NODE, 0) / len(measured.nodes)
        cells = ["·" if shape.agent == ha.PROXY else str(count.get(n, 0)) for n in measured.nodes]
        per = shared if shape.agent == ha.PROXY else sum(count.values()) / len(measured.nodes)
        total[shape.agent] += per
        low, high = spans.get(f"{shape.agent} {shape.resource}", (0, 0))
        lines.append(f"| {shape.agent} | {shape.resource} | {shape.api_group} | {shape.scope} | "
                     f"{_code(shape.field_selector)} | {_code(shape.label_selector)} | {shape.bookmarks} | "
                     + " | ".join(cells)
                     + f" | {_num(per, 2)} | {low}-{high} |")
    lines.append("")
    lines.append("Held per node at the window's end: " + ", ".join(
        f"{agent} {_num(n, 2)}" for agent, n in sorted(total.items())) + f" (all {_num(sum(total.values()), 2)}).")
    return lines


def opening_lines(requests: list[ha.Request]) -> list[str]:
    """How the watches started: streaming lists (sendInitialEvents) or from a resourceVersion; and any LIST."""
    opened = ha.opened_by_shape(requests)
    streaming = sum(n for s, n in opened.items() if s.initial_events == "true")
    matched = sum(n for s, n in opened.items() if s.initial_events == "true" and s.rv_match == "NotOlderThan")
    refused = sum(1 for r in ha.agents_requests(requests) if r.verb == "WATCH" and r.refused)
    lists = Counter((r.agent, r.resource) for r in ha.agents_requests(requests) if r.verb == "LIST")
    listed = ", ".join(f"{a} {res} {n}" for (a, res), n in sorted(lists.items())) or "none"
    return [f"Watch requests over the whole run: {sum(opened.values())}, of them {streaming} streaming lists "
            f"(sendInitialEvents=true; {matched} with resourceVersionMatch=NotOlderThan), the rest from a "
            f"resourceVersion (renewals, and watches after a LIST); {refused} refused. LIST requests: {listed}."]


def refused_lines(requests: list[ha.Request], measured: Any) -> list[str]:
    """Every request of the agents answered with an error, when (seconds after the nodes started), and the LISTs
    a refused streaming list was followed by."""
    start = measured.timeline.get("nodes_started", 0.0)
    refused: dict[tuple[Any, ...], list[float]] = {}
    for r in ha.agents_requests(requests):
        if r.refused:
            refused.setdefault((r.agent, r.verb, r.resource, r.subresource, r.code), []).append(r.received - start)
    lines = ["| agent | verb | resource | subresource | code | requests | seconds after the nodes started |",
             "|---|---|---|---|---|---|---|"]
    for (agent, verb, resource, subresource, code), seconds in sorted(refused.items(), key=lambda i: min(i[1])):
        low, high = f"{min(seconds):.1f}", f"{max(seconds):.1f}"
        span = low if low == high else f"{low}-{high}"
        lines.append(f"| {agent} | {verb} | {resource} | {subresource} | {code} | {len(seconds)} | {span} |")
    if len(lines) == 2:
        lines = ["None."]
    listed = ha.fallbacks(requests)
    if listed:
        lines.append("")
    for request, watch in listed:
        query = request.query()
        after = (f"after its streaming list was refused ({watch.code}, {request.received - watch.received:.2f} s "
                 "before)") if watch else "with no refused streaming list before it"
        lines.append(f"- {request.agent} on {request.node}: LIST {request.resource} `{query.get('fieldSelector', '')}` "
                     f"(resourceVersion={query.get('resourceVersion', '')}) {after}.")
    return lines


def identity_lines(requests: list[ha.Request]) -> list[str]:
    lines = ["| agent | user | groups | user agent | requests (whole run) |", "|---|---|---|---|---|"]
    for (agent, user, groups, user_agent), n in sorted(ha.identities(requests).items()):
        lines.append(f"| {agent} | `{user}` | {', '.join(f'`{g}`' for g in groups)} | `{user_agent}` | {n} |")
    return lines


def headers_of(requests: list[ha.Request], logs: dict[str, str]) -> dict[str, Any]:
    """Per agent, what its client logged it sent ([verb, Accept, Content-Type, count]) and the Content-Type each
    audited request was answered with, matched by Audit-Id ([agent, verb, resource, Content-Type, count])."""
    found: dict[str, Any] = {}
    for agent, suffix in ((ha.KUBELET, "-kubelet"), (ha.PROXY, "-proxy")):
        sent: Counter[tuple[str, str, str]] = Counter()
        responses: dict[str, str] = {}
        for name, text in logs.items():
            if name.endswith(suffix):
                logged = ha.client_headers(text)
                sent.update(logged.requests)
                responses.update(logged.responses)
        matched = ha.answered([r for r in requests if r.agent == agent], responses)
        found[agent] = {"sent": [[*k, n] for k, n in sent.items()], "answered": [[*k, n] for k, n in matched.items()]}
    return found


def content_lines(headers: dict[str, Any]) -> list[str]:
    """What each agent's client sent (Accept, Content-Type) and was answered, from its own log."""
    lines = ["| agent | requests logged | Accept sent | Content-Type sent (verb) | answered with (audited requests "
             "matched by Audit-Id) |", "|---|---|---|---|---|"]
    for agent, found in headers.items():
        accept: Counter[str] = Counter()
        bodies: Counter[str] = Counter()
        answers: Counter[str] = Counter()
        for verb, sent_accept, content_type, n in found["sent"]:
            accept[sent_accept] += n
            if content_type:
                bodies[f"{content_type} ({verb})"] += n
        for *_, content_type, n in found["answered"]:
            answers[content_type] += n
        lines.append(f"| {agent} | {sum(accept.values())} | {_counted(accept)} | {_counted(bodies)} | "
                     f"{_counted(answers)} |")
    return lines


def _code(text: str) -> str:
    return f"`{text}`" if text else "—"


def _counted(counter: Counter[str]) -> str:
    return "; ".join(f"`{value or '(none)'}` × {n}" for value, n in counter.most_common()) or "none logged"


# --- start-up, cross-check, processes ---------------------------------------------------------------------------


def phase_lines(requests: list[ha.Request], measured: Any) -> list[str]:
    """Requests per node in the two phases before the window: start to Ready, then the pods' start and settle."""
    t = measured.timeline
    phases = (("start to Ready", t["nodes_started"], t["nodes_ready"]),
              ("after Ready: the rest of the start, the pods start, the settle", t["nodes_ready"], t["window_opened"]))
    counted = [ha.counts(requests, start, end) for _, start, end in phases]
    keys = sorted({(agent, key) for c in counted for agent, _, key in c})
    lines = ["| agent | verb | resource | subresource | scope | " + " | ".join(p[0] for p in phases) + " |",
             "|---" * (5 + len(phases)) + "|"]
    for agent, key in keys:
        cells = [_num(sum(n for (a, _, k), n in c.items() if a == agent and k == key) / len(measured.nodes), 2)
                 for c in counted]
        lines.append(f"| {agent} | {_key_cells(key)} | " + " | ".join(cells) + " |")
    return lines


def check_rows(requests: list[ha.Request], measured: Any) -> list[list[Any]]:
    """The audit log against the apiserver's own counter over the window, for the keys the agents sent in it (not
    WATCH: the counter counts a watch when it ends): [verb, resource, subresource, scope, audit, counter]."""
    if not measured.metric_before or not measured.metric_after or "window_closed" not in measured.timeline:
        return []
    opened, closed = measured.timeline["window_opened"], measured.timeline["window_closed"]
    before, after = ha.metric_totals(measured.metric_before), ha.metric_totals(measured.metric_after)
    audit = ha.audit_totals(requests, opened, closed)
    keys = sorted({r.key for r in ha.agents_requests(requests) if r.verb != "WATCH" and opened <= r.received < closed})
    return [[*key, audit.get(key, 0), after.get(key, 0) - before.get(key, 0)] for key in keys]


def check_lines(rows: list[list[Any]]) -> list[str]:
    if not rows:
        return ["apiserver_request_total was not read at both ends of the window: no cross-check."]
    lines = ["| verb | resource | subresource | scope | audit log (2xx, every client) | apiserver_request_total "
             "(2xx, delta) |", "|---|---|---|---|---|---|"]
    return lines + [f"| {_key_cells(tuple(row[:4]))} | {row[4]} | {row[5]} |" for row in rows]


def process_lines(measured: Any) -> list[str]:
    lines = ["| process | CPU (% of one core, window mean) | RSS at the window's end |", "|---|---|---|"]
    for name, cost in sorted(measured.cpu.items()):
        lines.append(f"| {name} | {cost['cpu_percent']:.1f} % | {cost['rss_mib']:.0f} MiB |")
    return lines


# --- the file ---------------------------------------------------------------------------------------------------


def setting(version: str, build_s: float | None, measured: Any) -> str:
    built = f"built in this run in {build_s / 60:.1f} min" if build_s is not None else "from the cache"
    return (f"Kubernetes {version}, etcd {versions.ETCD_VERSION}; kubemark {version} ({built}; Go build from "
            f"k8s.io/kubernetes@{version}); {len(measured.nodes)} hollow nodes, {measured.pods_per_node} pods each "
            f"(each pod mounts a ConfigMap and a Secret besides its token: C = {CONFIGMAPS_PER_NODE} ConfigMaps with "
            f"kube-root-ca.crt, S = {SECRETS_PER_NODE} Secret per node).")


def timeline_line(measured: Any) -> str:
    t = measured.timeline
    parts = []
    if "nodes_started" in t:
        parts.append(f"nodes started {t['nodes_started'] - t['control_plane_started']:.0f} s after the control "
                     "plane")
    if "nodes_ready" in t:
        parts.append(f"all Ready {t['nodes_ready'] - t['nodes_started']:.0f} s after their start")
    if "pods_running" in t:
        parts.append(f"every pod running {t['pods_running'] - t['nodes_ready']:.0f} s after the Deployments")
    if "window_closed" in t:
        parts.append(f"steady window {t['window_closed'] - t['window_opened']:.0f} s, every node "
                     + ("still Ready at its end" if measured.ready_at_end else "**not** Ready at its end"))
    parts.append(f"everything stopped {t['stopped'] - t['control_plane_started']:.0f} s after the control plane "
                 "started")
    return "Timeline: " + "; ".join(parts) + "."


def error_lines(logs: dict[str, str], keep: int = 12) -> list[str]:
    """Each hollow process's klog error and fatal lines (E..., F...), its last `keep`; its last lines otherwise."""
    lines = []
    for name, text in sorted(logs.items()):
        errors = [line for line in text.splitlines() if re.match(r"[EF]\d{4} ", line)]
        shown = errors[-keep:] or text.splitlines()[-keep:]
        lines += [f"`{name}`:", "", "```", *(line[:300] for line in shown), "```", ""]
    return lines


def write(out: Path, command: str, version: str, build_s: float | None, measured: Any,
          requests: list[ha.Request], reference: dict[str, Any]) -> None:
    if measured.failure:
        _write_failure(out, command, version, build_s, measured)
        return
    rows = steady_rows(requests, measured, reference)
    columns = ["verb", "resource", "subresource", "scope", "agent", *measured.nodes, "per node",
               "renewals due in this window", "reference: hollow node", "reference: real node"]
    lines = results_head("Hollow nodes: what one node's kubelet and kube-proxy send, measured (kubemark)",
                         setting(version, build_s, measured), command, columns)
    lines[5:5] = [
        "Requests per node per minute in the steady window, from the apiserver's audit log, by user agent "
        "(`hollow-kubelet`, `hollow-proxy`); a WATCH row counts watch requests opened. The proxies share one "
        "identity, so a proxy row is every proxy's requests over the nodes (· per node). \"Renewals due\": the "
        "watches held when the window opened whose own `timeoutSeconds` ended inside it, per node per minute (what "
        "this window can show of a renewal rate). The references are the long-run rates of "
        "`loadtests/data/node_agents_reference.yaml` for N = "
        f"{measured.pods_per_node}, C = {CONFIGMAPS_PER_NODE}, S = {SECRETS_PER_NODE}, per agent: kubemark's agents "
        "and a real kubelet / kube-proxy.", ""]
    lines += steady_lines(rows, measured.nodes)
    lines += ["", "Differences from the reference:", "",
              *differences(rows, requests, measured.timeline["window_closed"])]
    lines += ["", "## Watches held at the window's end", "", *watch_lines(requests, measured), "",
              *opening_lines(requests), "", "## Refused requests", "",
              "Every request of the agents answered with an error (whole run), and each LIST they sent:", "",
              *refused_lines(requests, measured), "", "## Who they are", "", *identity_lines(requests), "",
              "## What they send and are answered", "",
              "From each agent's own client-go log (`--vmodule=round_trippers=8`: every request's headers, every "
              "response's), the responses matched to the audited requests by their `Audit-Id` header. The setting "
              "behind it: kubemark's `--kube-api-content-type`, default `application/vnd.kubernetes.protobuf`, for "
              "both morphs (`cmd/kubemark/app/hollow_node.go`).", "", *content_lines(measured.headers),
              "", "## Before the window (requests per node)", "", *phase_lines(requests, measured),
              "", "## The audit log against apiserver_request_total", "", *check_lines(measured.check),
              "", "## What each process used", "", *process_lines(measured), "", timeline_line(measured), "",
              f"Raw: the agents' audit events and the aggregated counts in benchmarks/results/raw/{RAW}/."]
    if measured.completed:
        lines += ["", f"This run's record was completed by hand: {measured.completed}."]
    write_results(out, lines, also=f", raw in benchmarks/results/raw/{RAW}/")
    _keep(command, version, build_s, measured, requests, rows)


def _keep(command: str, version: str, build_s: float | None, measured: Any, requests: list[ha.Request],
          rows: list[dict[str, Any]]) -> None:
    """The aggregated counts, and everything the results file was written from besides the agents' audit events
    (`measured`, without the processes' logs): `hollow_node.py --from-raw` writes the file again from these."""
    t = measured.timeline
    opened, closed = t.get("window_opened", 0.0), t.get("window_closed", 0.0)
    summary = {
        "command": command, "nodes": measured.nodes, "pods_per_node": measured.pods_per_node, "timeline": t,
        "steady": [{**row, "key": list(row["key"])} for row in rows],
        "per_minute": ha.per_minute(requests, opened, closed) if closed else {},
        "held_at_end": [[*shape.__dict__.values(), dict(count)]
                        for shape, count in ha.held_by_shape(requests, closed - 0.001).items()] if closed else [],
        "identities": [[*k[:2], list(k[2]), k[3], n] for k, n in ha.identities(requests).items()],
        "non_2xx": [[a, list(k), c, n] for (a, k, c), n in ha.codes(requests, 0, float("inf")).items()],
        "version": version, "build_s": build_s,
        "measured": {k: v for k, v in measured.__dict__.items() if k != "logs"},
    }
    keep_raw(f"{RAW}/summary.json.gz", summary)


def keep_events(events: list[dict[str, Any]]) -> Path:
    """The agents' audit events, as the apiserver wrote them (JSON lines)."""
    return keep_raw(f"{RAW}/agents-audit-events.jsonl.gz",
                    "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode())


def _write_failure(out: Path, command: str, version: str, build_s: float | None, measured: Any) -> None:
    lines = results_head("Hollow nodes: what one node's kubelet and kube-proxy send, measured (kubemark)",
                         setting(version, build_s, measured), command, ["outcome"])
    lines += [f"| **the hollow nodes could not be held here**: {measured.failure} |", "",
              "What a hollow node needs (docs/node-agents.md): the kubemark binary; per node a kubelet and a proxy "
              "process, `--use-host-image-service=false` (no containerd here), a kubelet port of its own, "
              "`--kubelet-read-only-port=0`, a kubeconfig with its own client certificate, a name kwok does not "
              "manage. What was started:", ""]
    lines += [f"- `{name}`: `{' '.join(argv)}`" for name, argv in sorted(measured.argv.items())]
    lines += ["", timeline_line(measured), "", "Error lines of each hollow process's log:", "",
              *error_lines(measured.logs)]
    write_results(out, lines)
    keep_raw(f"{RAW}/failure.json.gz", {"command": command, "failure": measured.failure, "argv": measured.argv,
                                        "timeline": measured.timeline, "logs_tail": {
                                            n: t.splitlines()[-200:] for n, t in measured.logs.items()}})
