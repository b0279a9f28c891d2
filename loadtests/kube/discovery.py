"""Which resource serves a kind: the apiserver's own discovery (GET /api/v1, /apis/<group>/<version>), for
objects the harness knows only from a template (any built-in kind, or a custom resource a plan installs).

The fixed table of kube/paths.py covers what the harness itself creates; this answers for everything else,
once per kind and run, so the load's requests go to the right path without guessing plurals."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient


class UnknownKind(ValueError):
    """The apiserver serves no such kind (its group/version, or the kind within it)."""


@dataclass(frozen=True)
class Kind:
    """One kind as the apiserver serves it: where its objects live and what they support."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    scalable: bool = False  # it has a /scale subresource (Deployments, StatefulSets, some custom resources)

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def collection(self, namespace: str = "", query: dict[str, Any] | None = None) -> str:
        """The path objects of this kind are created at (namespace ignored for cluster-scoped kinds)."""
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{self.prefix}{scope}/{self.plural}" + (f"?{urlencode(query)}" if query else "")

    def path(self, namespace: str, name: str, subresource: str = "") -> str:
        return f"{self.collection(namespace)}/{name}" + (f"/{subresource}" if subresource else "")

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _resources(client: RestClient, api_version: str) -> list[dict[str, Any]]:
    """The resources discovery lists for one group/version (subresources included: `<name>/<sub>`)."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    try:
        listing = client.get(prefix)
    except ApiError as error:
        if error.status == 404:
            raise UnknownKind(f"the apiserver serves no API group/version {api_version!r}") from None
        raise
    return [r for r in listing.get("resources") or [] if isinstance(r, dict)]


def resolve(client: RestClient, api_version: str, kind: str) -> Kind:
    """The resource serving `kind` in `api_version`; UnknownKind (one line, what is served instead) if none."""
    resources = _resources(client, api_version)
    names = {str(r.get("name")) for r in resources}
    for resource in resources:
        name = str(resource.get("name", ""))
        if resource.get("kind") == kind and "/" not in name:
            return Kind(api_version, kind, name, bool(resource.get("namespaced")), scalable=f"{name}/scale" in names)
    served = sorted({str(r.get("kind")) for r in resources if "/" not in str(r.get("name", ""))})
    raise UnknownKind(f"{api_version} has no kind {kind!r} (it serves: {', '.join(served) or 'nothing'})")


def preferred_versions(client: RestClient) -> list[str]:
    """Every API group's preferred version ("v1" for the core group, then "apps/v1", ...), in discovery's order:
    one version per group, as kubectl api-resources lists them, so objects served in several versions count once."""
    core = [str(v) for v in client.get("/api").get("versions") or []][:1]
    groups = [g for g in client.get("/apis").get("groups") or [] if isinstance(g, dict)]
    return core + [str(g["preferredVersion"]["groupVersion"]) for g in groups if g.get("preferredVersion")]


def listable(client: RestClient, api_version: str) -> list[Kind]:
    """The kinds of one group/version whose collections answer LIST (subresources aside), in discovery's order."""
    resources = _resources(client, api_version)
    names = {str(r.get("name")) for r in resources}
    return [Kind(api_version, str(r.get("kind")), str(r["name"]), bool(r.get("namespaced")),
                 scalable=f"{r['name']}/scale" in names)
            for r in resources if "/" not in str(r.get("name", "/")) and "list" in (r.get("verbs") or ())]
