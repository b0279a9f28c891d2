"""The runner's side of the `objects` scenario: before the first window, what the plan installs (CRDs,
PriorityClasses), the step's namespaces, each template's kind resolved by the apiserver's discovery and every
template tried by it (a server-side dry run), so a template it refuses stops the run in one line before
anything is measured; at the end, everything of it removed: the namespaces (with every object in them), the
cluster-scoped objects the load made, and what was installed.

Every object carries the harness's labels (config/templates.py): removal finds them by the run's label and
never touches anything else."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from loadtests.config.scenarios import objects_namespace, objects_namespaces
from loadtests.config.templates import RUN_LABEL, ObjectTemplate
from loadtests.errors import PlanError
from loadtests.kube.discovery import Kind, UnknownKind, resolve
from loadtests.kube.errors import ApiError
from loadtests.kube.objects import NAMESPACES as HARNESS_NAMESPACES
from loadtests.kube.paths import resource_path
from loadtests.kube.rest import RestClient
from loadtests.measure.controlled import CONTROLLERS
from loadtests.measure.object_counts import count_objects
from loadtests.polling import poll_until
from loadtests.run.fleet import ensure_namespaces, remove_owned

SCENARIO = "objects"
CRD_KIND = "CustomResourceDefinition"
ESTABLISH_TIMEOUT_S = 60.0  # a CRD's Established condition, then its kind in discovery
PREFILL_CONCURRENCY = 8  # creates in flight while prefilling: enough to keep the apiserver busy on 2 cores


class ObjectsSetup:
    """What the objects scenario of a plan needs around its steps. Inert when the plan has no such scenario."""

    def __init__(self, client: RestClient, load: dict[str, dict[str, Any]], run: str, source: str,
                 say: Callable[[str], None] = lambda _line: None) -> None:
        self.client, self.run, self.source, self.say = client, run, source, say
        self.params = copy.deepcopy(load.get(SCENARIO)) if SCENARIO in load else None
        self.templates = [ObjectTemplate.from_dict(t) for t in (self.params or {}).get("templates", [])]
        self.installs = [ObjectTemplate.from_dict(t) for t in (self.params or {}).get("install", [])]
        self.prefills = [ObjectTemplate.from_dict(t) for t in (self.params or {}).get("prefill", [])]
        self.prefilled: list[Kind] = []  # the kinds prefill() made, once per run
        self.kinds: list[Kind] = []
        self.installed: list[str] = []  # paths of what install() made, in order
        self.namespaces: list[str] = []  # every namespace ensure() made or found
        self._checked = False

    @property
    def active(self) -> bool:
        return self.params is not None

    def _where(self, key: str, index: int, template: ObjectTemplate) -> str:
        return f"{self.source}: load.scenarios.{SCENARIO}.{key}[{index}] ({template.template})"

    # ---------------------------------------------------------------------------------------- before
    def install(self) -> None:
        """Make what the plan installs, once per run; a CRD is waited for until its kind is served."""
        for i, template in enumerate(self.installs):
            where = self._where("install", i, template)
            obj = template.render(name=template.label, namespace="", index=i, run=self.run, keep_name=True)
            kind = self._resolve(obj, where)
            if kind.namespaced:
                raise PlanError(f"{where}: {obj['kind']} is namespaced; `install` takes cluster-scoped objects "
                                "(CustomResourceDefinitions, PriorityClasses): put it in `templates`")
            path = kind.path("", obj["metadata"]["name"])
            try:
                self.client.create(kind.collection(), obj)
            except ApiError as error:
                if error.status == 409:
                    raise PlanError(f"{where}: {obj['kind']} {obj['metadata']['name']} already exists in the "
                                    "cluster; the harness installs only what it can remove again (delete it, "
                                    "or drop it from `install`)") from None
                raise PlanError(f"{where}: the apiserver refused it: {error.reason}") from None
            self.installed.append(path)
            if obj["kind"] == CRD_KIND:
                self._established(obj, where)

    def _established(self, crd: dict[str, Any], where: str) -> None:
        spec = crd.get("spec") or {}
        versions = [v.get("name") for v in spec.get("versions") or [] if v.get("served")]
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"

        def served() -> bool:
            found = self.client.request("GET", path, ok=(404,))
            conditions = (found.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                return False
            group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
            try:
                for version in versions:
                    resolve(self.client, f"{group}/{version}", kind)
            except UnknownKind:
                return False
            return True

        if not poll_until(served, ESTABLISH_TIMEOUT_S, interval_s=0.2):
            raise PlanError(f"{where}: the CustomResourceDefinition was not established (its kind served) within "
                            f"{ESTABLISH_TIMEOUT_S:.0f} s")

    def _resolve(self, obj: dict[str, Any], where: str) -> Kind:
        try:
            return resolve(self.client, str(obj["apiVersion"]), str(obj["kind"]))
        except UnknownKind as error:
            raise PlanError(f"{where}: {error}; install its CustomResourceDefinition first (`install`)") from None

    def ensure(self, nodes: int) -> None:
        """The step's namespaces (one per nodes_per_namespace nodes, or the scenario's fixed `namespaces`), with
        their default ServiceAccounts."""
        assert self.params is not None
        wanted = objects_namespaces(nodes, int(self.params["nodes_per_namespace"]),
                                    int(self.params.get("namespaces", 0)))
        self.namespaces += [name for name in wanted if name not in self.namespaces]  # removed at the end
        ensure_namespaces(self.client, wanted)

    def check(self) -> None:
        """Each template's kind resolved and one object of it tried by the apiserver (dryRun=All): nothing
        is created, and a refusal is one line naming the template and what the apiserver said."""
        if self._checked:
            return
        namespace = self.namespaces[0] if self.namespaces else ""
        kinds = []
        for i, template in enumerate(self.templates):
            where = self._where("templates", i, template)
            sample = template.render(name=f"check-{self.run}-{i}", namespace=namespace, index=0, run=self.run)
            kind = self._resolve(sample, where)
            if not kind.namespaced:
                sample["metadata"].pop("namespace", None)
            try:
                self.client.request("POST", kind.collection(namespace), sample, params={"dryRun": "All"})
            except ApiError as error:
                if error.status == 0 or error.status >= 500:
                    raise
                raise PlanError(f"{where}: the apiserver refused it: {error.reason}") from None
            kinds.append(kind)
        self.kinds = kinds
        self._checked = True

    def prefill(self) -> None:
        """Make each prefill template's `replicas` objects once per run, several requests at a time (thousands
        of large objects take minutes one by one): in the first namespace, or spread over the scenario's
        namespaces as its `per_namespace` says (made here when the steps did not), or without one for a
        cluster-scoped kind; with `top_up`, only what the cluster lacks of the entry's count. They stay until the
        end."""
        started, made = time.monotonic(), 0
        for i, template in enumerate(self.prefills):
            where = self._where("prefill", i, template)
            spread = template.per_namespace or (template.replicas,)
            homes = [objects_namespace(n) for n, count in enumerate(spread) for _ in range(count)]
            kind = self._resolve(template.render(name="sample", namespace="", index=0, run=self.run), where)
            if kind.namespaced:
                self._namespaces([objects_namespace(n) for n, count in enumerate(spread) if count])
            else:
                homes = [""] * template.replicas
            if template.top_up:  # the cluster's own count toward the entry's: the last namespaces get fewer
                besides = sorted((set(self.namespaces) | set(HARNESS_NAMESPACES)) if kind.namespaced else ())
                homes = homes[:max(0, len(homes) - self._count(kind, besides))]
            objects = [template.render(name=f"prefill-{self.run}-{i}-{k}", namespace=home, index=k, run=self.run)
                       for k, home in enumerate(homes)]
            self._create(objects, kind, where)
            self.prefilled.append(kind)
            made += len(objects)
        self.say(f"prefilled {made:,} objects in {time.monotonic() - started:.1f} s")

    def _count(self, kind: Kind, besides: list[str]) -> int:
        """The kind's objects in the cluster now, but for those in the namespaces `besides` (the scenario's, where
        the control plane makes a kube-root-ca.crt and a default ServiceAccount with each namespace and the
        compiled entry counted them already; the harness's own, no part of the cluster's): counted as the window's
        objects are (a LIST with a selector gives no remainingItemCount), the whole cluster and each of those
        namespaces at one resourceVersion: the control plane makes a namespace's kube-root-ca.crt moments after
        the namespace, and a count between two reads left the top-up one object short of the cluster's own."""
        counts = count_objects(self.client, (), {namespace: kind.collection(namespace)
                                                 for namespace in ("", *besides)}, one_instant=True)
        return counts[""] - sum(counts[namespace] for namespace in besides)

    def _namespaces(self, wanted: list[str]) -> None:
        """Namespaces of the scenario beyond the steps' (removed at the end with them)."""
        new = [name for name in wanted if name not in self.namespaces]
        self.namespaces += new
        ensure_namespaces(self.client, new)

    def _create(self, objects: list[dict[str, Any]], kind: Kind, where: str) -> None:
        """Objects of one kind made, PREFILL_CONCURRENCY requests at a time; a refusal is one line."""
        try:
            with ThreadPoolExecutor(PREFILL_CONCURRENCY) as pool:
                list(pool.map(lambda obj: self.client.create(kind.collection(obj["metadata"].get("namespace", "")),
                                                             obj), objects))
        except ApiError as error:
            if error.status == 0 or error.status >= 500:
                raise
            raise PlanError(f"{where}: the apiserver refused it: {error.reason}") from None

    def prepare(self, nodes: int) -> None:
        """All of the above that a step needs before its window: install once, namespaces, the check once,
        the prefill once."""
        if not self.active:
            return
        if not self.installed and self.installs:
            self.install()
        self.ensure(nodes)
        self.check()
        if self.prefills and not self.prefilled:
            self.prefill()

    def counted(self) -> dict[str, str]:
        """The templates' kinds as collections to count at each window's close: built-in kinds by their
        plural, custom resources by plural.group (as the apiserver's storage metrics name them)."""
        found = {}
        for kind in [*self.kinds, *self.prefilled]:
            group = kind.api_version.rpartition("/")[0]
            found[f"{kind.plural}.{group}" if "." in group else kind.plural] = kind.collection()
        return found

    def controlled(self) -> list[str]:
        """The templates' kinds whose controllers make pods (their pods are timed per window)."""
        return sorted({k.kind for k in self.kinds if k.kind in CONTROLLERS})

    @property
    def selector(self) -> str:
        """The label selector of every object the run's load made."""
        return f"{RUN_LABEL}={self.run}"

    def scenarios(self, load: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The plan's load with the objects scenario's resolved kinds, as the Locust processes read it."""
        if not self.active:
            return load
        return {**load, SCENARIO: {**load[SCENARIO], "kinds": [k.to_dict() for k in self.kinds]}}

    # ---------------------------------------------------------------------------------------- after
    def remove(self) -> list[str]:
        """Everything of the scenario gone: the namespaces, the cluster-scoped objects the load made (by the
        run's label), then what was installed, newest first. Problems come back as lines, never raised: the
        run's own outcome stands."""
        if not self.active:
            return []
        problems: list[str] = []
        for kind in {k for k in [*self.kinds, *self.prefilled] if not k.namespaced}:
            try:
                self.client.request("DELETE", kind.collection(), params={"labelSelector": self.selector})
            except ApiError as error:
                problems.append(f"{kind.kind} objects of this run: {error}")
        paths = [resource_path("namespaces", name=name) for name in self.namespaces]
        left = remove_owned(self.client, [*paths, *reversed(self.installed)])
        if not left:
            self.installed, self.namespaces = [], []
        return problems + left
