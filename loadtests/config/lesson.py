"""Lessons of the field reports as experiments: data, not code per lesson.

A lesson (loadtests/lessons/NAME.yaml) is two or more variants of one experiment — the setup the reports warn
against and the fix — each a plan: the lesson's `base` plan, its `scales` entry (steps for small or medium)
and the variant's own `plan` overlay, deep-merged in that order and validated like any plan. A growth lesson
has one variant (role `sweep`) and steps of growing scale. `effect` declares the figures that show the effect
(how each is read from a step: see analysis/query.py) and what the field report leads one to expect. Running
a lesson runs each variant on a fresh control plane into OUT/<variant>/ (OUT/<variant>/repeat-<k>/ with
--repeat), then writes OUT/lesson.html.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtests import PACKAGE_DIR
from loadtests.config import plan as plan_mod
from loadtests.config.plan import Plan, field_error
from loadtests.errors import PlanError, read_text

LESSONS_DIR = PACKAGE_DIR / "lessons"
SCALES = ("small", "medium")
DEFAULT_SCALE = "medium"
ROLES = ("warned", "fix", "sweep")
# the warned setup's value against the fix's; or growth with nodes; "same": a check that both setups carried the
# same load (a figure the fix does not change, such as the Lease renewals it only moves to another etcd)
EXPECT = ("higher", "lower", "grows", "same")
READ_KINDS = ("figure", "scrape", "audit")
# Runs of each variant `make lessons` and `loadtest lesson` make by default: the fewest whose spread can be
# measured and whose full separation means something (every warned run beyond every fix run).
DEFAULT_REPEAT = 3


@dataclass(frozen=True)
class Measure:
    """One figure that shows a lesson's effect, and how to read it from a step (see analysis/query.py)."""

    name: str
    unit: str  # "bytes" | "s" | "%" | "count" | "per_s"
    source: str  # said on the page: the metric or probe the value comes from, and whose requests it covers
    read: dict[str, Any]  # exactly one of {"figure": path} | {"scrape": {...}} | {"audit": {...}}
    expect: str = "higher"
    min_effect: float = 1.5  # the ratio the field report implies at least: the figure to expect, never a noise band
    # a sanity check shown on the page, never a verdict: a figure that is zero by construction in one variant
    # (Event keys in the main etcd when Events have their own) cannot go either way
    check: bool = False


@dataclass(frozen=True)
class Variant:
    name: str
    role: str
    says: str  # one line: what this variant sets up
    plan: dict[str, Any] = field(default_factory=dict)
    every_step: dict[str, Any] = field(default_factory=dict)  # merged into each of the scale's steps
    min_kube_version: str | None = None  # the variant needs this Kubernetes version or later


@dataclass(frozen=True)
class FieldClaim:
    """What the field report said, with the figure it quoted, and where."""

    said: str
    source: str
    # growth lessons: {nodes, value, unit, measure}; a comparison: {measure, warned, fix}, its two setups' figures
    figure: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """The warned setup's figure over the fix's, as the report quoted them (None: it quoted no pair)."""
        warned, fix = self.figure.get("warned"), self.figure.get("fix")
        return float(warned) / float(fix) if warned and fix else None


@dataclass(frozen=True)
class Lesson:
    name: str
    title: str
    summary: str  # the line `loadtest lesson --list` prints
    field_report: FieldClaim
    base: dict[str, Any]
    scales: dict[str, dict[str, Any]]
    variants: list[Variant]
    measures: list[Measure]
    explain: str = ""  # how to read the result (a cascade, a caveat of this machine)
    features: list[str] = field(default_factory=list)  # feature gates whose state the page shows
    source: str = ""

    @property
    def growth(self) -> bool:
        return any(v.role == "sweep" for v in self.variants)

    @property
    def deciding(self) -> Measure:
        """The figure the verdict rests on: the first that is not a sanity check (the field report's claim)."""
        return next(m for m in self.measures if not m.check)

    def plan_data(self, variant: Variant, scale: str) -> dict[str, Any]:
        data = deep_merge(deep_merge(self.base, self.scales[scale]), variant.plan)
        if variant.every_step and isinstance(data.get("steps"), list):
            data["steps"] = [deep_merge(step, variant.every_step) for step in data["steps"]]
        data["name"] = f"lesson-{self.name}-{variant.name}"
        return data

    def plan(self, variant: Variant, scale: str, kube_version: str | None = None) -> Plan:
        """The variant's plan at a scale, validated; on another Kubernetes version when one is given."""
        found = plan_mod.parse(self.plan_data(variant, scale), source=f"lesson {self.name} ({variant.name})")
        return found.on_kube_version(kube_version) if kube_version else found

    def check_version(self, kube_version: str) -> None:
        """One line when a variant needs a newer Kubernetes than the one chosen."""
        for variant in self.variants:
            if variant.min_kube_version and version_tuple(kube_version) < version_tuple(variant.min_kube_version):
                raise PlanError(f"lesson {self.name}: variant {variant.name!r} needs Kubernetes "
                                f"{variant.min_kube_version} or later ({kube_version} chosen); pick a newer "
                                "--kube-version")


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split(".") if part.isdigit())


def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """A copy of base with overlay's mappings merged in, key by key; any other value replaces."""
    merged = copy.deepcopy(base)
    for key, value in (overlay or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _text(source: str, data: dict[str, Any], key: str, path: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise field_error(source, f"{path}{key}", "is required (a line of text)")
    return " ".join(value.split())


def _measure(source: str, path: str, data: Any) -> Measure:
    if not isinstance(data, dict):
        raise field_error(source, path, "must be a mapping with name, unit, source and one of figure, scrape, audit")
    known = {"name", "unit", "source", "expect", "min_effect", "check", *READ_KINDS}
    if "noise" in data:
        raise field_error(source, f"{path}.noise", "a lesson declares no noise: it is measured from repeated runs "
                                             "(loadtest lesson --repeat 3); remove the field")
    unknown = sorted(set(data) - known)
    if unknown:
        raise field_error(source, f"{path}.{unknown[0]}", f"unknown field; expected one of: {', '.join(sorted(known))}")
    reads = [kind for kind in READ_KINDS if kind in data]
    if len(reads) != 1:
        raise field_error(source, path, f"needs exactly one of {', '.join(READ_KINDS)}")
    expect = data.get("expect", "higher")
    if expect not in EXPECT:
        raise field_error(source, f"{path}.expect", f"must be one of: {', '.join(EXPECT)}")
    min_effect, check = data.get("min_effect", 1.5), data.get("check", False)
    if isinstance(min_effect, bool) or not isinstance(min_effect, int | float) or not 1 <= min_effect < math.inf:
        raise field_error(source, f"{path}.min_effect", f"must be a finite ratio >= 1 (got {min_effect!r})")
    if not isinstance(check, bool):
        raise field_error(source, f"{path}.check", f"must be true or false (got {check!r})")
    if expect == "same" and not check:
        raise field_error(source, f"{path}.expect", "`same` is for a sanity check (check: true): a figure "
                                                    "expected not to move decides nothing")
    return Measure(name=_text(source, data, "name", f"{path}."), unit=str(data.get("unit", "count")),
                   source=_text(source, data, "source", f"{path}."), read={reads[0]: data[reads[0]]},
                   expect=expect, min_effect=float(min_effect), check=check)


def parse(data: Any, source: str) -> Lesson:
    """Validate a lesson mapping; every variant's plan at every scale is validated too."""
    if not isinstance(data, dict):
        raise PlanError(f"{source}: not a lesson (expected a mapping)")
    known = {"name", "title", "summary", "field_report", "base", "scales", "variants", "effect", "explain",
             "features"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise field_error(source, unknown[0], f"unknown field; expected one of: {', '.join(sorted(known))}")
    claim = data.get("field_report") or {}
    if not isinstance(claim, dict):
        raise field_error(source, "field_report", "must be a mapping with said and source")
    figure = claim.get("figure") or {}
    if not isinstance(figure, dict):
        raise field_error(source, "field_report.figure", "must be a mapping (nodes, value, measure; or warned, "
                                                     "fix, measure)")
    for key in ("nodes", "value", "warned", "fix"):
        value = figure.get(key)
        if key in figure and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not 0 < value < math.inf):
            raise field_error(source, f"field_report.figure.{key}", f"must be a finite number > 0 (got {value!r})")
    scales = data.get("scales") or {}
    if not isinstance(scales, dict) or set(scales) != set(SCALES):
        raise field_error(source, "scales", f"must give steps for each of: {', '.join(SCALES)}")
    variants = []
    for i, raw in enumerate(data.get("variants") or []):
        path = f"variants[{i}]"
        if not isinstance(raw, dict):
            raise field_error(source, path, "must be a mapping with name, role, says and plan")
        role = raw.get("role")
        if role not in ROLES:
            raise field_error(source, f"{path}.role", f"must be one of: {', '.join(ROLES)}")
        variants.append(Variant(name=_text(source, raw, "name", f"{path}."), role=role,
                                says=_text(source, raw, "says", f"{path}."), plan=raw.get("plan") or {},
                                every_step=raw.get("every_step") or {},
                                min_kube_version=raw.get("min_kube_version")))
    roles = [v.role for v in variants]
    if roles != ["sweep"] and not (roles.count("warned") == 1 and roles.count("fix") >= 1 and "sweep" not in roles):
        raise field_error(source, "variants",
                          "needs one `warned` variant and one or more `fix` variants, or one `sweep`")
    effect = data.get("effect") or {}
    measures = [_measure(source, f"effect.measures[{i}]", m) for i, m in enumerate(effect.get("measures") or [])]
    if figure.get("measure") and figure["measure"] not in {m.name for m in measures}:
        raise field_error(source, "field_report.figure.measure", f"names no measure of the lesson "
                                                               f"(got {figure['measure']!r})")
    if not [m for m in measures if not m.check]:
        raise field_error(source, "effect.measures", "needs at least one figure that shows the effect and is not a "
                                               "`check` (the first such figure decides the verdict)")
    lesson = Lesson(
        name=_text(source, data, "name"), title=_text(source, data, "title"), summary=_text(source, data, "summary"),
        field_report=FieldClaim(said=_text(source, claim, "said", "field_report."),
                                source=_text(source, claim, "source", "field_report."),
                                figure=claim.get("figure") or {}),
        base=data.get("base") or {}, scales=scales, variants=variants, measures=measures,
        explain=" ".join(str(data.get("explain", "")).split()), features=list(data.get("features") or []),
        source=source)
    for variant in variants:
        for scale in SCALES:
            lesson.plan(variant, scale)
    return lesson


def names() -> list[str]:
    return sorted(p.stem for p in LESSONS_DIR.glob("*.yaml"))


def load(name: str) -> Lesson:
    """A bundled lesson by name, or a lesson file of one's own (a path to its YAML, as a plan is given); an
    unknown name is one line listing the known ones."""
    own = name.endswith((".yaml", ".yml"))
    path = Path(name) if own else LESSONS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise PlanError(f"{name}: no such lesson file" if own else
                        f"unknown lesson {name!r}; known lessons: {', '.join(names())}")
    try:
        data = yaml.safe_load(read_text(path, "lesson file"))
    except yaml.YAMLError as error:
        raise PlanError(f"{path}: not valid YAML ({' '.join(str(error).split())})") from None
    return parse(data, source=str(path))


def load_all() -> list[Lesson]:
    return [load(name) for name in names()]
