"""Object templates: YAML with Jinja2 variables, from which the `objects` scenario makes objects of any kind
(and a plan installs what they need first: CustomResourceDefinitions, PriorityClasses).

A template is read and checked when the plan is (the file, its Jinja2, that it renders to one YAML mapping
with apiVersion, kind and metadata), so a bad one is refused in one line before anything starts; what only the
apiserver can say (an unknown kind, a field it rejects) is asked of it before the measured window (run/objects.py).

Variables a template may use: `name`, `namespace` (empty for cluster-scoped kinds), `index` (the object's
number within the run), `run` (the run's label) and the entry's own `input_vars`. Whatever the template says,
the harness sets metadata.name and metadata.namespace and adds its labels, so every object it makes is found
and removed again.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from loadtests import PACKAGE_DIR
from loadtests.errors import PlanError, UnreadableFile, read_text
from loadtests.kube.objects import MANAGED_BY

TEMPLATES_DIR = PACKAGE_DIR / "objects"  # the bundled templates (a plan names them by file name)
RUN_LABEL = "k8s-loadtest/run"
SCENARIO_LABEL = "k8s-loadtest/scenario"
TEMPLATE_LABEL = "k8s-loadtest/template"
POD_TEMPLATE_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"})
MAX_REPLICAS = 1000  # objects of one template per iteration
MAX_PREFILL = 1_000_000  # objects of one prefill template: made once, not per iteration
_ENVIRONMENT = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
# libyaml's parser where PyYAML has it (its wheels do): the same safe loading, without the pure-Python scanner's
# cost per character (48 ms for an object of 100 KB against 0.6 ms), paid for every object a prefill or the load
# renders
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=256)
def _compiled(text: str) -> jinja2.Template:
    """A template's text compiled once per process (each object renders it again, at the load's rate)."""
    return _ENVIRONMENT.from_string(text)


_SAMPLE = {"name": "template-check", "namespace": "loadtest-objects-0", "index": 0, "run": "check"}


@dataclass(frozen=True)
class ObjectTemplate:
    """One template of a plan: the file as the plan names it, its text (carried to every Locust process, also
    on other machines), how many objects of it one iteration makes, and its input variables."""

    template: str
    text: str
    replicas: int = 1
    input_vars: dict[str, Any] = field(default_factory=dict)
    api_version: str = ""  # of the object it makes, read when the plan was checked
    kind: str = ""
    # prefill: how many of the `replicas` objects go to each of the scenario's namespaces, in order (sum:
    # replicas); empty: all of them in the first
    per_namespace: tuple[int, ...] = ()
    # prefill: `replicas` is the kind's count in the whole cluster, the objects there already included (a replay:
    # a fresh cluster has its own ClusterRoles, ServiceAccounts...), so only the difference is made
    top_up: bool = False

    @property
    def label(self) -> str:
        """The template's label value: its file name without the extension."""
        return Path(self.template).stem[:63]

    def render(self, *, name: str, namespace: str, index: int, run: str, keep_name: bool = False) -> dict[str, Any]:
        """The object this template makes, with the harness's name (the template's own with `keep_name`, as
        for a CRD, whose name is fixed by its group and plural), namespace and labels."""
        text = _compiled(self.text).render(**self.input_vars, name=name, namespace=namespace, index=index, run=run)
        obj = yaml.load(text, Loader=_LOADER)
        meta = obj.get("metadata") or {}
        obj["metadata"] = meta
        if not (keep_name and meta.get("name")):
            meta["name"] = name
        meta.pop("generateName", None)
        if namespace:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        ours = {**MANAGED_BY, RUN_LABEL: run, SCENARIO_LABEL: "objects", TEMPLATE_LABEL: self.label}
        meta["labels"] = {**(meta.get("labels") or {}), **ours}
        pod_template = (obj.get("spec") or {}).get("template") if obj.get("kind") in POD_TEMPLATE_KINDS else None
        if isinstance(pod_template, dict):  # the pods a controller makes of it are the run's too
            pod_meta = pod_template.get("metadata") or {}
            pod_template["metadata"] = pod_meta
            pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **ours}
        return obj

    def to_dict(self) -> dict[str, Any]:
        found = {"template": self.template, "text": self.text, "replicas": self.replicas,
                 "input_vars": copy.deepcopy(self.input_vars), "api_version": self.api_version, "kind": self.kind}
        if self.per_namespace:
            found["per_namespace"] = list(self.per_namespace)
        return {**found, "top_up": True} if self.top_up else found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObjectTemplate:
        return cls(str(data["template"]), str(data["text"]), int(data.get("replicas", 1)),
                   dict(data.get("input_vars") or {}), str(data.get("api_version", "")), str(data.get("kind", "")),
                   tuple(int(n) for n in data.get("per_namespace") or ()), bool(data.get("top_up", False)))


def find(template: str, plan_source: str) -> Path:
    """A template file: beside the plan (or as given), else one bundled in loadtests/objects/."""
    given = Path(template)
    for candidate in (given if given.is_absolute() else Path(plan_source).parent / given, given,
                      TEMPLATES_DIR / given):
        if candidate.is_file():
            return candidate
    return given


def bundled() -> list[str]:
    return sorted(p.name for p in TEMPLATES_DIR.glob("*.yaml"))


def read(source: str, path: str, entry: Any, *, fields: frozenset[str] = frozenset(
        {"template", "replicas", "input_vars"}), max_replicas: int = MAX_REPLICAS) -> ObjectTemplate:
    """A plan's template entry (`template`, and `replicas`, `input_vars`, `per_namespace`, `top_up` where `fields`
    allows them; `text`, the template itself, given inline instead of a file's), its file read and its rendering
    checked; PlanError naming the entry and the template otherwise."""
    if isinstance(entry, str):
        entry = {"template": entry}
    if not isinstance(entry, dict):
        raise PlanError(f"{source}: {path}: must be a mapping with `template` (got {type(entry).__name__})")
    fields = fields | {"text", "api_version", "kind"}  # the last two as a plan writes them back (ignored)
    unknown = sorted(set(entry) - fields)
    if unknown:
        raise PlanError(f"{source}: {path}.{unknown[0]}: unknown field; expected one of: {', '.join(sorted(fields))}")
    name = entry.get("template")
    if not isinstance(name, str) or not name:
        raise PlanError(f"{source}: {path}.template: must name a template file (bundled: {', '.join(bundled())})")
    replicas = entry.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= max_replicas:
        raise PlanError(f"{source}: {path}.replicas: must be an integer from 1 to {max_replicas} (got {replicas!r})")
    input_vars = entry.get("input_vars") or {}
    if not isinstance(input_vars, dict):
        raise PlanError(f"{source}: {path}.input_vars: must be a mapping (got {type(input_vars).__name__})")
    spread = _per_namespace(source, path, entry.get("per_namespace"), replicas)
    top_up = entry.get("top_up", False)
    if not isinstance(top_up, bool):
        raise PlanError(f"{source}: {path}.top_up: must be true or false (got {top_up!r})")
    text = entry["text"] if "text" in entry else _text(source, path, name)
    if not isinstance(text, str):
        raise PlanError(f"{source}: {path}.text: must be the template's text (got {type(text).__name__})")
    sample = check(ObjectTemplate(name, text, replicas, dict(input_vars)), f"{source}: {path} ({name})")
    return ObjectTemplate(name, text, replicas, dict(input_vars), sample["apiVersion"], sample["kind"], spread,
                          top_up)


def _text(source: str, path: str, name: str) -> str:
    """A template's text, read from its file (beside the plan, or bundled)."""
    try:
        return read_text(find(name, source), "template")
    except UnreadableFile as error:  # the template named, and the plan entry that names it
        raise PlanError(f"{source}: {path}.template: {error}") from None
    except OSError as error:
        raise PlanError(f"{source}: {path}.template: cannot read {name} ({error.strerror}); give a path beside "
                        f"the plan or a bundled template ({', '.join(bundled())})") from None


def _per_namespace(source: str, path: str, value: Any, replicas: int) -> tuple[int, ...]:
    """Objects per namespace of a prefill entry: whole numbers from 0, as many as it has objects in all."""
    if value is None:
        return ()
    if (not isinstance(value, list) or not value
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)):
        raise PlanError(f"{source}: {path}.per_namespace: must be a list of whole numbers, the objects in each "
                        f"namespace in order (got {value!r:.80})")
    if sum(value) != replicas:
        raise PlanError(f"{source}: {path}.per_namespace: adds up to {sum(value)}, not the entry's replicas "
                        f"({replicas})")
    return tuple(value)


def check(template: ObjectTemplate, where: str) -> dict[str, Any]:
    """The template rendered once with sample values; PlanError (prefixed by `where`) if it does not make one
    YAML mapping with apiVersion, kind and (optionally) metadata as a mapping."""
    try:
        text = _compiled(template.text).render(**template.input_vars, **_SAMPLE)
    except jinja2.TemplateError as error:
        line = f" line {error.lineno}" if getattr(error, "lineno", None) else ""
        raise PlanError(f"{where}:{line} not a valid template: {error.message or error}") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise PlanError(f"{where}:{line} does not render to YAML ({getattr(error, 'problem', error)})") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise PlanError(f"{where}: must render to one YAML mapping (one object), got "
                        f"{len(documents)} document(s)" + ("" if len(documents) != 1 else
                                                            f" of type {type(documents[0]).__name__}"))
    obj = documents[0]
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise PlanError(f"{where}: the object has no {key}")
    if not isinstance(obj.get("metadata") or {}, dict):
        raise PlanError(f"{where}: metadata must be a mapping")
    return obj
