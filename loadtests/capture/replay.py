"""A captured profile compiled into an ordinary plan, at a scale k: the runner runs it as any plan, nothing here
runs anything.

- one step: the captured nodes × k (at least 1) of the captured shapes (`fleet.shapes`, their counts × k by
  largest remainder), and pods per node so the fleet holds about the captured pods × k;
- objects of every kind that can be made generically (ConfigMaps, Secrets, ServiceAccounts, Roles, ClusterRoles
  and every custom resource, their CRDs installed from the captured definitions with a permissive schema): the
  objects without an owner × k, prefilled once before the window by the `objects` scenario over the captured
  namespaces × k, each padded to a size drawn from the captured size quantiles of the objects a replay makes
  (`made_size_bytes`), with no padding nor field for it where that is smaller than it can be; those the
  control plane made at bootstrap (`control_plane`) once, as the replaying cluster's own control plane makes
  them; none of the
  defaults it makes with each namespace (`namespace_defaults`) nor of the load tester's own (`harness`);
- the namespaces: the captured ones but the system ones and the harness's × k, made by the `objects` scenario
  (its `namespaces`), so the replaying cluster ends with the count the comparison expects;
- what is not made (the control plane's and controllers' objects, kinds without a generic body) is listed in the
  plan's `replay:` section with its count and why, and the run's results keep it with the plan.

- the traffic (capture/replay_traffic.py): each replayable class at its captured rate × k (the `requests`
  scenario), nodes' watches as the fake nodes' agents (`node_agents`), what is not replayed listed with its share
  of the captured requests in the same `replay:` section.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from loadtests.capture.bootstrap import NAMESPACE_DEFAULTS, RBAC
from loadtests.capture.compare import PADDED_KINDS, judged_count
from loadtests.capture.harness import without_harness_labels
from loadtests.capture.profile import KindProfile, Profile, Quantiles, load
from loadtests.capture.replay_traffic import SHAPES, compile_traffic, installed_watches
from loadtests.capture.scale import check_scale, scaled_count
from loadtests.config import plan as plan_mod
from loadtests.config.plan import Plan
from loadtests.config.scenarios import objects_namespace
from loadtests.config.templates import ObjectTemplate
from loadtests.errors import PlanError

DEFAULT_DURATION_S = 60.0
DEFAULT_WARMUP_S = 10.0
MAX_PODS_PER_NODE = 110  # the plan's own limit (the kubelet's default)
PAD_KEY = "k8s-loadtest/pad"
MANAGER = "k8s-loadtest"  # the field manager of the harness's creates (its user agent's product)
SAMPLE = {"name": "prefill-replay-run-0-0", "namespace": objects_namespace(0), "run": "replay-run"}
_RULE = '  - {apiGroups: [""], resources: [configmaps], verbs: [get]}\n'
# the padding and the field that holds it, left out where the object is to be no bigger than without them
_PAD = '{% if pad %}data:\n  pad: "{{ pad }}"\n{% endif %}'
# kinds with a generic body: (group, kind) -> the body's YAML after metadata; `{{ pad }}` is the padding
GENERIC = {
    ("", "ConfigMap"): _PAD,
    ("", "Secret"): "type: Opaque\n" + _PAD,
    ("", "ServiceAccount"): "",
    (RBAC, "Role"): "rules:\n" + _RULE,
    (RBAC, "ClusterRole"): "rules:\n" + _RULE,
}
assert set(GENERIC) == PADDED_KINDS
IN_DATA = {("", "ConfigMap"), ("", "Secret")}  # padded in `data`, the others in an annotation
# kinds the control plane, its controllers or the fleet make, or the replay makes otherwise: never prefilled
NOT_MADE = {
    ("", "Node"): "the fleet's nodes, of the captured shapes",
    ("", "Pod"): "the fleet's pods (pods_per_node)",
    ("", "Namespace"): "the system namespaces the replaying cluster's own, the others × k as the objects "
                       "scenario's namespaces (`namespaces`), the objects spread over them",
    ("", "Event"): "made by the control plane and the fleet as things happen",
    ("events.k8s.io", "Event"): "made by the control plane and the fleet as things happen",
    ("coordination.k8s.io", "Lease"): "made by the control plane and the fleet's nodes",
    ("discovery.k8s.io", "EndpointSlice"): "made by the controller-manager for Services",
    ("", "Endpoints"): "made by the controller-manager for Services",
    ("apiextensions.k8s.io", "CustomResourceDefinition"): "installed from the custom resources' definitions",
    ("apiregistration.k8s.io", "APIService"): "made by the apiserver (an aggregated API's is not replayable)",
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): "made by the apiserver (bootstrap configuration)",
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): "made by the apiserver (bootstrap configuration)",
}
HARNESS = ("the load tester's own in the captured cluster (capture/harness.py): no part of the cluster; a replay's "
           "harness makes its own, which its fidelity does not count")
BOOTSTRAP = ("made by the control plane at bootstrap, once whatever the cluster's size: the replaying cluster's own "
             "count toward the kind's total, and are not made again")


def plan_of(profile: Profile, scale: float, *, source: str, duration_s: float = DEFAULT_DURATION_S,
            warmup_s: float = DEFAULT_WARMUP_S, shape: str = "mean") -> Plan:
    """The plan that replays `profile` at `scale`, checked as every plan is."""
    return plan_mod.parse(plan_data(profile, scale, source=source, duration_s=duration_s, warmup_s=warmup_s,
                                    shape=shape), source=source)


def plan_data(profile: Profile, scale: float, *, source: str, duration_s: float = DEFAULT_DURATION_S,
              warmup_s: float = DEFAULT_WARMUP_S, shape: str = "mean") -> dict[str, Any]:
    """The plan's mapping: one step, the fleet's shapes, the objects scenario, and the `replay:` section; the
    traffic over time as `shape` says (replay_traffic.SHAPES)."""
    scale = check_scale(scale)
    if shape not in SHAPES:
        raise PlanError(f"{source}: shape {shape!r}: the traffic over time is one of {', '.join(SHAPES)}")
    nodes = _nodes(profile, scale)
    pods = profile.kind("Pod")
    pods_per_node = min(MAX_PODS_PER_NODE, round((pods.count if pods else 0) * scale / nodes))
    step = {"nodes": nodes, "pods_per_node": pods_per_node, "warmup_s": warmup_s, "duration_s": duration_s,
            "name": f"replay x{scale:g}"}
    data: dict[str, Any] = {"name": _name(source), "steps": [step], "load": {"scenarios": {}}}
    shapes = _shapes(profile, nodes)
    if shapes:
        data["fleet"] = {"shapes": shapes}
    namespaces = replayed_namespaces(profile, scale)
    install, prefill, left_out = _objects(profile, scale, namespaces)
    if install or prefill:
        data["load"]["scenarios"]["objects"] = {"rate": 0, "users": 0, "nodes_per_namespace": 1_000_000_000,
                                                "namespaces": max(1, namespaces or 0), "install": install,
                                                "prefill": prefill}
    traffic = compile_traffic(profile, scale, prefill, shape, duration_s)
    data["load"]["scenarios"].update(traffic.scenarios)
    data["replay"] = {"profile": Path(source).name, "scale": scale, "traffic": traffic.summary["traffic"],
                      "not_replayed": left_out + traffic.not_replayed}
    if "requests" in traffic.summary:
        data["replay"]["requests"] = traffic.summary["requests"]
        data["replay"]["replayed_share"] = traffic.summary["replayed_share"]
    if held := installed_watches(profile):  # the run waits for its control plane to watch what it installs
        data["replay"]["control_plane_watches"] = held
    return data


def _name(source: str) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(source).stem)
    return f"replay-{stem}"


def _nodes(profile: Profile, scale: float) -> int:
    found = profile.kind("Node")
    return max(1, scaled_count(found.count if found else 0, scale))


def apportion(total: int, weights: list[float]) -> list[int]:
    """`total` split in proportion to `weights` by largest remainder (the parts add up to `total` exactly)."""
    whole = sum(weights)
    if total <= 0 or whole <= 0:
        return [0] * len(weights)
    exact = [total * w / whole for w in weights]
    parts = [math.floor(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: parts[i] - exact[i])[:total - sum(parts)]:
        parts[i] += 1
    return parts


# taints the control plane puts on and takes off a node by its conditions (the node lifecycle controller's, a cloud
# provider's): a replayed node gets them from its own conditions, never as fixed taints
MANAGED_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")


def _shapes(profile: Profile, nodes: int) -> list[dict[str, Any]]:
    """The captured shapes, their counts the step's nodes apportioned among them; a shape apportioned none is
    left out (a scale below 1 loses the rarest shapes). Taints the control plane manages are not replayed."""
    found = profile.kind("Node")
    captured = (found.nodes if found else None) or []
    counts = apportion(nodes, [s.count for s in captured])
    return [{"count": count, "capacity": dict(shape.capacity), "allocatable": dict(shape.allocatable),
             "taints": [{"key": t["key"], "effect": t["effect"]} for t in shape.taints
                        if not t["key"].startswith(MANAGED_TAINTS)], "labels": shape.labels}
            for shape, count in zip(captured, counts, strict=True) if count]


def replayed_namespaces(profile: Profile, scale: float) -> int | None:
    """The namespaces a replay makes: the captured ones but those the control plane made at bootstrap (the
    replaying cluster has its own) × k, so the cluster ends with the Namespaces' expected count (scale.py); None
    where the profile holds no Namespaces' figures."""
    found = profile.kind("Namespace")
    if found is None:
        return None
    count = judged_count(found)
    return scaled_count(count - min(found.control_plane or 0, count), scale)


def _objects(profile: Profile, scale: float, namespaces: int | None = None,
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The CRDs to install, the prefill entries (one per kind replayed, spread over at most `namespaces`), and the
    objects left out, with why."""
    install = [_crd_entry(kind) for kind in profile.kinds if kind.crd is not None]
    prefill, left_out = [], []
    captured_namespaces = profile.kind("Namespace")
    for kind in profile.kinds:
        key = (kind.group, kind.kind)
        if not kind.count:
            continue
        if key in NOT_MADE:
            left_out.append(_row(kind, kind.count, NOT_MADE[key]))
            continue
        made = kind.without_owner
        for owner, count in sorted(kind.owners.items()):
            left_out.append(_row(kind, count, f"owned by {owner}: made by its controller"))
        if harness := min(made, kind.harness or 0):
            made -= harness
            left_out.append(_row(kind, harness, HARNESS))
        if default := min(made, _defaults(kind, captured_namespaces)):
            made -= default
            left_out.append(_row(kind, default, f"one {NAMESPACE_DEFAULTS[key]} per namespace, made by the "
                                                "controller-manager with every namespace the replay makes"))
        if once := min(kind.control_plane or 0, made):
            made -= once
            left_out.append(_row(kind, once, BOOTSTRAP))
        if kind.crd is None and key not in GENERIC:
            if made:
                left_out.append(_row(kind, made, "no generic body: the replay cannot make one without its spec"))
        elif (count := scaled_count(made, scale)) > 0:
            prefill.append(_prefill_entry(kind, count, scale, len(prefill), present=once, namespaces=namespaces))
    return install, prefill, left_out


def _defaults(kind: KindProfile, namespaces: KindProfile | None) -> int:
    """The kind's defaults the control plane makes with each namespace but the system ones (namespace_defaults;
    those of the system namespaces are in control_plane); a profile captured before that figure: one per
    captured namespace."""
    if (kind.group, kind.kind) not in NAMESPACE_DEFAULTS:
        return 0
    if kind.namespace_defaults is not None:
        return kind.namespace_defaults
    return namespaces.count if namespaces is not None else 0


def _row(kind: KindProfile, count: int, reason: str) -> dict[str, Any]:
    return {"kind": kind.kind, "group": kind.group, "count": count, "reason": reason}


def _crd_entry(kind: KindProfile) -> dict[str, Any]:
    """A CustomResourceDefinition of the captured kind: its group, names, scope, served versions and storage
    version, each version's schema permissive (any field kept)."""
    assert kind.crd is not None
    versions = kind.crd.versions or [kind.version]
    storage = kind.crd.storage_version or versions[0]
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"{kind.resource}.{kind.group}"},
           "spec": {"group": kind.group, "scope": kind.scope,
                    "names": {"kind": kind.kind, "plural": kind.resource, "singular": kind.kind.lower(),
                              "listKind": f"{kind.kind}List"},
                    "versions": [{"name": v, "served": True, "storage": v == storage, "schema": schema}
                                 for v in versions]}}
    return {"template": f"replay-crd-{kind.resource}.yaml", "text": _literal(crd)}


def _literal(obj: dict[str, Any]) -> str:
    """An object as template text that renders to itself (JSON is YAML; Jinja's markers escaped)."""
    return "{% raw %}" + json.dumps(obj, separators=(",", ":")) + "{% endraw %}\n"


# The padding's length, computed as each object renders (config/templates.py gives `index`, `name`,
# `namespace`, `run`): the object of rank index + 1 gets the size interpolated linearly between the `knots`
# (rank, bytes) around its rank, less the bytes the rest of it serves (`fixed`, plus its name and namespace, whose
# lengths vary; the harness's labels not at all, as a capture sizes the objects a replay makes without them) and
# the padding's field (`field`: its key, quotes, its managedFields entry); none at all, the field left out, where
# that leaves nothing to pad (the object as small as it can be).
_SIZE = (
    "{%- set r = index + 1 -%}{%- set pad -%}"
    "{%- for i in range(1, knots|length) if (i == 1 or knots[i - 1][0] < r) and r <= knots[i][0] -%}"
    "{%- set a = knots[i - 1] -%}{%- set b = knots[i] -%}"
    "{%- set size = a[1] + (b[1] - a[1]) * (r - a[0]) / (b[0] - a[0]) -%}"
    "{%- set n = [0, (size|int) - fixed - field - name|length - namespace|length]|max -%}"
    "{{ ('A' * (n // 4 * 4)) if base64 else ('x' * n) }}"
    "{%- endfor -%}{%- endset -%}\n")


def _prefill_entry(kind: KindProfile, count: int, scale: float, index: int, *, present: int = 0,
                   namespaces: int | None = None) -> dict[str, Any]:
    """One kind's prefill entry: `count` objects over its namespaces × scale (at most the replay's `namespaces`),
    each padded to its drawn size; its total (top_up) `present` more, the objects the replaying cluster's control
    plane made at bootstrap as the original's did, which count toward it and are made once whatever the scale."""
    key = (kind.group, kind.kind)
    api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
    body = GENERIC.get(key, _PAD.replace("data:", "spec:"))
    annotated = key not in IN_DATA and key in GENERIC
    meta = ("{% if pad %}" + f'metadata:\n  annotations:\n    {PAD_KEY}: "{{{{ pad }}}}"\n' + "{% else %}"
            "metadata: {}\n{% endif %}") if annotated else "metadata: {}\n"
    text = _SIZE + f"apiVersion: {api_version}\nkind: {kind.kind}\n{meta}{body}"
    template = ObjectTemplate(f"replay-{index}-{kind.resource}.yaml", text, count,
                              {"knots": [[0, 0], [1, 0]], "fixed": 10**9, "field": 0,
                               "base64": key == ("", "Secret")})
    namespaced = kind.scope == "Namespaced"
    fixed, field = _fixed(template, namespaced, kind.crd is not None)
    sizes = made_sizes(kind) or Quantiles(count, fixed, fixed, fixed, fixed)
    # top_up: the replaying cluster's own objects of the kind (a fresh cluster's ClusterRoles, kube-system's
    # ServiceAccounts) count toward the total, so the replay ends with the original's bootstrap objects once and
    # the rest × k
    entry: dict[str, Any] = {"template": template.template, "text": text, "replicas": count + present,
                             "top_up": True,
                             "input_vars": {**template.input_vars, "fixed": fixed, "field": field,
                                            "knots": size_knots(sizes, count, fixed)}}
    if namespaced:
        wanted = min(count, max(1, round((kind.namespaces or 1) * scale)), max(1, namespaces or count))
        entry["per_namespace"] = spread(count, wanted, kind.per_namespace)
        # the last namespaces are those a top-up leaves short by the cluster's own: the bootstrap objects' share
        entry["per_namespace"][-1] += present
    return entry


def size_knots(sizes: Quantiles, count: int, smallest: int) -> list[list[int]]:
    """(rank, bytes) points through which `count` objects' sizes follow the captured quantiles: the nearest rank
    of p50, p90, p99 and max at their sizes, rank 1 at the smallest the object can be (or p50, if smaller)."""
    p50, p90, p99, top = (q if q is not None else smallest for q in (sizes.p50, sizes.p90, sizes.p99, sizes.max))
    points = {1: min(smallest, p50)}
    # where two quantiles fall on one rank (fewer objects than 100), p50 and p99 win: the replay is judged on them
    for share, size in ((1.0, top), (0.9, p90), (0.99, p99), (0.5, p50)):
        points[max(1, math.ceil(round(share * count, 9)))] = size
    if len(points) == 1:  # one object: a segment from rank 0 to it, at its size
        points[0] = points[1]
    return [[rank, points[rank]] for rank in sorted(points)]


def spread(count: int, namespaces: int, per_namespace: Quantiles | None) -> list[int]:
    """`count` objects over `namespaces` namespaces, shaped as the captured objects per namespace (their
    quantiles, interpolated by rank from 1 object) and scaled to add up to `count`."""
    if per_namespace is None or per_namespace.max is None:
        return apportion(count, [1.0] * namespaces)
    knots = size_knots(per_namespace, namespaces, 1)
    weights = [float(_interpolate(knots, rank)) for rank in range(1, namespaces + 1)]
    return apportion(count, weights)


def _interpolate(knots: list[list[int]], rank: int) -> float:
    for (r0, s0), (r1, s1) in zip(knots, knots[1:], strict=False):
        if rank <= r1:
            return s0 + (s1 - s0) * (rank - r0) / (r1 - r0)
    return knots[-1][1]


def made_sizes(kind: KindProfile) -> Quantiles | None:
    """The sizes a replay's objects of the kind follow: those of the objects it makes (made_size_bytes), where the
    profile has them, else every object's (a profile captured before that figure)."""
    if kind.made_size_bytes is not None:
        return kind.made_size_bytes if kind.made_size_bytes.count else None
    return kind.size_bytes


def _fixed(template: ObjectTemplate, namespaced: bool, custom: bool) -> tuple[int, int]:
    """The bytes an object of the template serves without its padding and without the harness's labels (a
    capture sizes the objects a replay makes without them: capture/harness.without_harness_labels), less its
    name's and namespace's (which vary): its JSON as rendered, and what the apiserver adds (uid, resourceVersion,
    creation time, a managedFields entry of the fields set; a custom resource's generation), estimated; and the
    bytes the padding's field adds beside the padding itself."""
    namespace = SAMPLE["namespace"] if namespaced else ""
    varying = len(SAMPLE["name"]) + len(namespace)

    def served(padding: int) -> int:
        found = ObjectTemplate(template.template, template.text, 1, {
            **template.input_vars, "fixed": 0, "knots": [[0, varying + padding], [1, varying + padding]]})
        obj = without_harness_labels(found.render(name=SAMPLE["name"], namespace=namespace, index=0,
                                                  run=SAMPLE["run"]))
        return len(json.dumps(obj, separators=(",", ":"))) + served_extra(obj, custom)

    fixed = served(0)
    return fixed - varying, served(4) - fixed - 4


def served_extra(obj: dict[str, Any], custom: bool) -> int:
    """What the apiserver adds to an object it serves (uid, resourceVersion, creation time, a managedFields entry of
    the fields set; a custom resource's generation), estimated."""
    meta = {f"f:{part}": {".": {}, **{f"f:{key}": {} for key in obj["metadata"][part]}}
            for part in ("labels", "annotations") if obj["metadata"].get(part)}
    fields: dict[str, Any] = {"f:metadata": meta} if meta else {}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata"):
            fields[f"f:{key}"] = {".": {}, **{f"f:{k}": {} for k in value}} if isinstance(value, dict) else {}
    when = "2026-01-01T00:00:00Z"
    extra: dict[str, Any] = {"uid": "0" * 36, "resourceVersion": "100000", "creationTimestamp": when,
                             "managedFields": [{"manager": MANAGER, "operation": "Update",
                                                "apiVersion": obj["apiVersion"], "time": when,
                                                "fieldsType": "FieldsV1", "fieldsV1": fields}]}
    if custom:
        extra["generation"] = 1
    return len(json.dumps(extra, separators=(",", ":"))) - 2 + len(extra)  # each member joins metadata by a comma


def load_plan(path: str | Path, *, duration_s: float | None = None) -> Plan:
    """A plan file; one with `workload: {profile, scale}` is the profile's replay (the profile's path relative to
    the plan's), the plan's other sections over it (its target, SLOs, load scenarios beside the replayed objects)."""
    found = Path(path)
    try:
        data = yaml.safe_load(found.read_text()) if found.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        data = None  # the plan's own reader says what is wrong with it, in one line
    if not isinstance(data, dict) or "workload" not in data:
        return plan_mod.load(path)
    workload = data.pop("workload")
    if not isinstance(workload, dict) or set(workload) - {"profile", "scale", "duration_s", "warmup_s", "shape"} \
            or "profile" not in workload:
        raise PlanError(f"{found}: workload: must be a mapping of profile (a file), scale, and optionally "
                        f"duration_s, warmup_s and shape ({' or '.join(SHAPES)}) (got {workload!r:.80})")
    for taken in ("steps", "fleet", "replay"):
        if taken in data:
            raise PlanError(f"{found}: {taken}: set by the workload's profile; drop it (or drop `workload`)")
    profile_path = found.parent / str(workload["profile"])
    scale = check_scale(workload.get("scale", 1), f"{found}: workload.scale")
    compiled = plan_data(load(profile_path), scale, source=str(profile_path),
                         duration_s=duration_s or workload.get("duration_s", DEFAULT_DURATION_S),
                         warmup_s=workload.get("warmup_s", DEFAULT_WARMUP_S),
                         shape=str(workload.get("shape", "mean")))
    compiled["replay"]["profile"] = str(workload["profile"])  # as the plan names it: beside it, or absolute
    theirs = ((data.pop("load", None) or {}).get("scenarios") or {})
    if "objects" in theirs and "objects" in compiled["load"]["scenarios"]:
        raise PlanError(f"{found}: load.scenarios.objects: the workload's objects are that scenario; drop it")
    compiled["load"]["scenarios"].update(theirs)
    return plan_mod.parse({**compiled, "name": Path(found).stem, **data}, source=str(found))
