"""A profile's traffic compiled into load scenarios, at a scale k: what capture/replay.py's plan runs as its load.

- every captured class of requests (verb, group, resource, scope, client class; codes and products summed) with a
  replayable verb on a resource the replay has (the replayed kinds, the fleet's pods, nodes and namespaces) is
  one row of the `requests` scenario at its captured rate × k, a LIST with its captured shape (resourceVersion
  shares, limit, label and field selector shares: selectors on the replay's own labels and fields);
- watches held by nodes are the fake nodes' own agents (`node_agents`, per fake node as kubelets hold them);
  the control plane's own and the fake fleet's controller's (clients.runs_once) are the replaying cluster's, held
  once by its own components; other watches are held watchers of the `requests` scenario, their captured mean
  open count × k; a profile from /metrics does not say whose a watch is: its counts are every client's
  together, topped up as the load starts (`topped_up`), the watches the replaying cluster holds then counting
  toward them;
- a node's Leases, Node status and pod status are the fleet's (kwok's heartbeats), not sent twice, nor anything
  kwok sends as the nodes (a cluster of fake nodes captured: its kwok is no node, and holds no node's watches);
- the control plane's own requests (kube-controller-manager's, kube-scheduler's, by their class or their user
  agent) are not load: the replaying cluster's components send theirs;
- what is not replayed (streams, aggregated APIs, requests to no resource, verbs and resources the replay cannot
  make, the control plane's own) is listed with its share of the captured requests;
- the shape over time: the window's mean mix (`mean`, each row at its mean rate), or the captured per-minute
  curve (`timeline`): each row follows its verb's curve (the profile's `per_minute` counts per verb), fitted to
  the step's window as config/timeline.py says, its mean over the window its captured rate × k.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loadtests.capture.clients import CONTROL_PLANE_PRODUCTS, CONTROLLER, NODE, runs_once
from loadtests.capture.profile import Profile
from loadtests.capture.traffic_types import AGGREGATED_GROUPS, STREAMS
from loadtests.config.scenarios import requests_row_name
from loadtests.config.timeline import fit
from loadtests.errors import PlanError
from loadtests.kube.paths import resource_key
from loadtests.measure.audit import event_time

UNKNOWN_CLIENT = "unknown"  # a watch row's class where the profile does not say whose its watches are
REPLAYABLE_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
WRITES = frozenset({"create", "update", "patch", "delete"})
# the fleet's: a fake node's heartbeats (Lease, Node status) and its pods' status, which kwok sends for every node
FLEET_MADE = frozenset({("coordination.k8s.io", "leases", ""), ("", "nodes", "status"), ("", "nodes", ""),
                        ("", "pods", "status")})
# resources the fleet makes whatever the profile: (group, resource) -> (version, kind, namespaced)
FLEET_RESOURCES = {("", "pods"): ("v1", "Pod", True), ("", "nodes"): ("v1", "Node", False),
                   ("", "namespaces"): ("v1", "Namespace", False)}
SHAPES = ("mean", "timeline")  # the traffic over time: the window's mean mix, or its per-minute curve
MEAN_MIX = "replayed: the window's mean mix"
READ_ONLY = {("", "nodes"): "the fleet's nodes: the replay writes none of its own",
             ("", "namespaces"): "the replay's namespaces are made for its objects, not by its load"}


@dataclass
class Traffic:
    """The compiled traffic: scenario parameters by name, and what was not replayed (with its share)."""

    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_replayed: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Resource:
    """A resource the replay has objects of: its path's parts, and the prefill template of its kind (writes)."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    template: Mapping[str, Any] | None = None


def replayed_resources(profile: Profile, prefill: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Resource]:
    """The fleet's pods, nodes and namespaces, and each prefilled kind (its template for creates)."""
    found = {key: Resource(key[0], version, key[1], kind, namespaced)
             for key, (version, kind, namespaced) in FLEET_RESOURCES.items()}
    templates = {entry["text"].split("\nkind: ", 1)[1].split("\n", 1)[0]: entry for entry in prefill}
    for kind in profile.kinds:
        entry = templates.get(kind.kind)
        if entry is not None:
            template = {"template": entry["template"], "text": entry["text"], "replicas": 1,
                        "input_vars": entry["input_vars"]}
            found[(kind.group, kind.resource)] = Resource(kind.group, kind.version, kind.resource, kind.kind,
                                                          kind.scope == "Namespaced", template)
    return found


def compile_traffic(profile: Profile, scale: float, prefill: list[dict[str, Any]], shape: str = "mean",
                    window_s: float = 60.0) -> Traffic:
    """The `requests` and `node_agents` scenarios of the profile's traffic at `scale` (over time as `shape` says,
    fitted to a step's window of `window_s`), and what is left out."""
    traffic = profile.traffic
    out = Traffic()
    if not traffic or not isinstance(traffic.get("rates"), list):
        out.summary = {"traffic": "not replayed"}  # the profile holds none
        return out
    resources = replayed_resources(profile, prefill)
    total = int(traffic.get("requests") or sum(int(r.get("count") or 0) for r in traffic["rates"]))
    rows, left, node_watch = _rate_rows(traffic, scale, resources)
    followed = MEAN_MIX if shape == "mean" else timelines(traffic, rows, window_s)
    watches = _watch_rows(traffic, scale, resources)
    namespaces = max([len(e.get("per_namespace") or []) for e in prefill] + [1])
    if rows or watches:
        out.scenarios["requests"] = {"rows": rows, "watches": watches, "namespaces": namespaces}
    # the nodes' agents where nodes watch; the fake fleet's one controller (kwok) sending as the nodes is no node
    if node_watch or any(w.get("client_class") == NODE and not runs_once(NODE, w.get("product"))
                         for w in _list(traffic.get("watches"))):
        out.scenarios["node_agents"] = {"per_node": 1.0}
    out.not_replayed = [{"what": what, "requests": n, "share": round(n / total, 4) if total else None,
                         "reason": reason} for (what, reason), n in sorted(left.items(), key=lambda i: -i[1])]
    replayed = total - sum(n for n in left.values())
    out.summary = {"traffic": followed, "requests": total,
                   "replayed_share": round(replayed / total, 4) if total else None}
    return out


def minute_curves(traffic: Mapping[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """Per verb, (seconds of the window in it, requests) of each captured minute in order, a minute without the
    verb at 0; PlanError where the profile has no per-minute curve (one from /metrics)."""
    minutes, window = traffic.get("per_minute"), traffic.get("window") or {}
    if not isinstance(minutes, list) or not minutes or not window.get("start") or not window.get("end"):
        raise PlanError("shape timeline follows the profile's per-minute curve, which only a capture from an audit "
                        "log has (`traffic.per_minute`); replay this profile's mean mix (shape: mean)")
    start, end = event_time(window["start"]), event_time(window["end"])
    covered = [max(0.0, min(event_time(m["start"]) + 60.0, end) - max(event_time(m["start"]), start))
               for m in minutes]
    verbs = {verb for m in minutes for verb in m.get("verbs") or {}}
    return {verb: [(seconds, float((m.get("verbs") or {}).get(verb, 0))) for seconds, m in zip(covered, minutes,
                                                                                             strict=True)]
            for verb in verbs}


def timelines(traffic: Mapping[str, Any], rows: list[dict[str, Any]], window_s: float) -> str:
    """Each row's timeline (its verb's curve fitted to the window, set on the row); what the replay follows, said."""
    curves = minute_curves(traffic)
    passes = set()
    for row in rows:
        found = fit(curves.get(row["verb"], []), window_s)
        if found is not None:
            row["timeline"] = found.to_dict()
            passes.add(found.passes)
    span = sum(seconds for seconds, _ in next(iter(curves.values()), []))
    return (f"replayed: the captured per-minute curve (timeline) of {span:.0f} s, "
            f"{'/'.join(map(str, sorted(passes))) or 1} pass(es) over the window's {window_s:.0f} s")


def _list(value: Any) -> list[dict[str, Any]]:
    return value if isinstance(value, list) else []


def _classes(rates: list[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """Rates by (verb, group, resource, subresource, scope, client class): codes and products summed. The control
    plane's own components are one class, whichever credential they send with (kube-controller-manager's
    controllers each use a ServiceAccount of their own)."""
    found: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for rate in rates:
        client = str(rate.get("client_class") or "unknown")
        if rate.get("product") in CONTROL_PLANE_PRODUCTS:
            client = CONTROLLER
        key = (str(rate.get("verb") or ""), str(rate.get("group") or ""), str(rate.get("resource") or ""),
               str(rate.get("subresource") or ""), str(rate.get("scope") or ""), client)
        found.setdefault(key, []).append(rate)
    return found


def why_not(key: tuple[str, ...], resources: Mapping[tuple[str, str], Resource]) -> str | None:
    """Why a class of requests is not sent as a row of its own (None: it is), in the plan's words."""
    verb, group, resource, subresource, _, client = key
    if client == CONTROLLER:
        return ("the control plane's own (kube-controller-manager, kube-scheduler): the replaying cluster's send "
                "these, for its own objects and load")
    if not resource:
        return "requests to no resource (discovery, health, metrics): not replayed"
    if subresource in STREAMS or verb == "connect":
        return "a stream into a container or node: no fake node serves one"
    if group in AGGREGATED_GROUPS:
        return "an aggregated API: served by another apiserver the replay does not run"
    if client == NODE and (group, resource, subresource) in FLEET_MADE and verb != "watch":
        return "fleet"
    if verb not in REPLAYABLE_VERBS:
        return f"verb {verb}: not replayed (only {', '.join(sorted(REPLAYABLE_VERBS))})"
    if (group, resource) not in resources:
        return "a resource the replay makes no objects of"
    if subresource:
        return f"subresource {subresource}: not replayed"
    if verb == "watch" and client != NODE and watch_key(group, resource) is None:
        return "watches of a resource the watch loop has no path for (a custom resource's)"
    if verb in WRITES and (group, resource) in READ_ONLY:
        return READ_ONLY[(group, resource)]
    if verb in WRITES and resources[(group, resource)].template is None and resource != "pods":
        return "writes of a kind without a body the replay can make"
    return None


def _rate_rows(traffic: dict[str, Any], scale: float, resources: Mapping[tuple[str, str], Resource]) -> tuple[
        list[dict[str, Any]], dict[tuple[str, str], int], bool]:
    """The `requests` rows; the requests left out by (what, reason); whether nodes watch (node agents)."""
    seconds = float((traffic.get("window") or {}).get("seconds") or 0)
    shapes = {(s["verb"], s["client_class"], s["group"], s["resource"]): s
              for s in _list(traffic.get("request_shapes"))}
    rows, left, node_watch = [], {}, False
    for key, found in sorted(_classes(traffic["rates"]).items()):
        verb, group, resource, subresource, scope, client = key
        count = sum(int(r.get("count") or 0) for r in found)
        reason = why_not(key, resources)
        # replayed by the fleet (its heartbeats; anything its one controller, kwok, sends as the nodes): neither a
        # row nor left out
        if reason == "fleet" or (client == NODE and all(runs_once(client, r.get("product")) for r in found)):
            continue
        if reason is not None:
            what = f"{verb} {resource}{'/' + subresource if subresource else ''}" if resource else \
                f"{verb} {found[0].get('path') or '(other)'}"
            left[(what, reason)] = left.get((what, reason), 0) + count
            continue
        if verb == "watch":  # held watches (below), not a rate of watch requests
            node_watch = node_watch or (client == NODE and not all(runs_once(client, r.get("product")) for r in found))
            continue
        per_second = sum(float(r["per_second"]) for r in found if r.get("per_second") is not None) \
            or (count / seconds if seconds else 0.0)
        if per_second * scale <= 0:
            continue
        rows.append(_row(key, per_second * scale, resources[(group, resource)], shapes.get((verb, client, group,
                                                                                             resource))))
    return rows, left, node_watch


def _row(key: tuple[str, ...], rate: float, target: Resource, shape: Mapping[str, Any] | None) -> dict[str, Any]:
    verb, group, resource, _, scope, client = key
    row: dict[str, Any] = {"verb": verb, "group": group, "version": target.version, "resource": resource,
                           "kind": target.kind, "namespaced": target.namespaced, "scope": scope,
                           "client_class": client, "rate": round(rate, 6)}
    row["name"] = requests_row_name(row)
    if verb in WRITES and target.template is not None:
        row["template"] = dict(target.template)
    if verb == "list":
        row["list"] = list_shape(shape)
    return row


def list_shape(shape: Mapping[str, Any] | None) -> dict[str, Any]:
    """A LIST's shape as the row asks it: shares by resourceVersion ("" a consistent read, "0" the watch cache,
    "other" a resourceVersion the client had: the list's own), the share with a limit and the median limit, the
    shares with a label and a field selector and the most common field selector's key."""
    if shape is None:
        return {"resource_version": {"": 1.0}, "with_limit": 0.0, "limit": 0, "label_selector": 0.0,
                "field_selector": 0.0, "field_key": ""}
    limit = shape.get("limit") or {}
    keys = shape.get("field_keys") or {}
    return {"resource_version": {str(k): float(v) for k, v in (shape.get("resource_version") or {"": 1.0}).items()},
            "with_limit": float(shape.get("with_limit") or 0.0),
            "limit": int((limit.get("p50") if isinstance(limit, dict) else None) or 500),
            "label_selector": float(shape.get("label_selector") or 0.0),
            "field_selector": float(shape.get("field_selector") or 0.0),
            "field_key": max(keys, key=lambda k: keys[k]) if keys else ""}


def watch_key(group: str, resource: str) -> str | None:
    """The watch loop's name of a resource (kube/paths.py), None where it has no path for it."""
    try:
        return resource_key(resource, group)
    except ValueError:
        return None


def _watch_rows(traffic: dict[str, Any], scale: float,
                resources: Mapping[tuple[str, str], Resource]) -> list[dict[str, Any]]:
    """Held watches of classes other than nodes' (theirs are the node agents') and the control plane's (its own
    components hold theirs): the mean open count × k (the count open at the end where the mean was not measured),
    of the resources the replay has."""
    rows = []
    for watch in _list(traffic.get("watches")):
        group, resource = str(watch.get("group") or ""), str(watch.get("resource") or "")
        key = watch_key(group, resource)
        client = watch.get("client_class")
        if client == NODE or runs_once(client, watch.get("product")) or key is None or (
                group, resource) not in resources:
            continue
        held = watch.get("mean_open")
        held = float(held) if held is not None else float(watch.get("open_at_end") or 0)
        if (count := round(held * scale)) > 0:
            row = {"resource": key, "client_class": str(client or UNKNOWN_CLIENT), "count": count}
            rows.append({**row, "top_up": True} if client is None else row)
    return rows


def topped_up(scenarios: Mapping[str, Any],
              open_now: Callable[[], Mapping[tuple[str, str], int]]) -> dict[str, Any]:
    """The load's scenarios with each held watch row of every client together (`top_up`: from /metrics, which
    does not say whose a watch is) cut by the watches already open on its resource (`open_now()`, asked only
    where a row is to be topped up, by group and resource: the replaying cluster's control plane's, its fleet's,
    the harness's), so the cluster holds the captured count and not the control plane's twice; a row left with
    none is dropped."""
    requests = scenarios.get("requests")
    if not isinstance(requests, Mapping) or not any(w.get("top_up") for w in requests.get("watches") or []):
        return dict(scenarios)
    held: dict[str, int] = {}
    for (group, resource), count in open_now().items():
        if (key := watch_key(group, resource)) is not None:
            held[key] = held.get(key, 0) + count
    rows = []
    for row in requests["watches"]:
        if row.get("top_up"):
            taken = min(int(row["count"]), held.get(row["resource"], 0))
            held[row["resource"]] = held.get(row["resource"], 0) - taken
            row = {**row, "count": int(row["count"]) - taken}
        if row["count"] > 0:
            rows.append(row)
    return {**scenarios, "requests": {**requests, "watches": rows}}


def installed_watches(profile: Profile) -> list[dict[str, Any]]:
    """Per custom resource the replay installs, the watches the original's control plane held on it as its capture
    ended ({group, resource, open}; none where it held none): the replaying cluster's components open theirs once
    they find the new resource in discovery (kube-controller-manager's garbage collector and quota controller poll
    it every 30 s), and the run waits for them before its window (config/workload.HeldWatches). From /metrics,
    which does not say whose a watch is, one: the control plane's first watch of it says it found the resource."""
    traffic = profile.traffic if isinstance(profile.traffic, dict) else {}
    rows = _list(traffic.get("watches"))
    classes = isinstance(traffic.get("client_classes"), list)
    found = []
    for kind in profile.kinds:
        if kind.crd is None:
            continue
        held = [w for w in rows if (str(w.get("group") or ""), str(w.get("resource") or "")) == (kind.group,
                                                                                               kind.resource)]
        counts = [int(w["open_at_end"]) for w in held if isinstance(w.get("open_at_end"), int | float) and (
            not classes or runs_once(w.get("client_class"), w.get("product")))]
        if (count := sum(counts) if classes else min(1, sum(counts))) > 0:
            found.append({"group": kind.group, "resource": kind.resource, "open": count})
    return found
