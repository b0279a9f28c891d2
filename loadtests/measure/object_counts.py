"""How many objects of each resource exist at one moment, counted so the number is right at that moment.

The apiserver's own gauge (apiserver_resource_objects, formerly apiserver_storage_objects) is refreshed
lazily and can lag by minutes: on 1.37 it says 0 pods in a default plan's first step while 300 exist. A LIST
with limit=1 answers with one item and `remainingItemCount`, the rest of the collection at that read's
resourceVersion: one cheap request per resource, exact at the moment it is served.
"""

from __future__ import annotations

from collections.abc import Mapping

from loadtests.kube.paths import resource_path
from loadtests.kube.rest import RestClient

COUNTED = ("pods", "nodes", "leases", "namespaces", "events", "configmaps", "deployments", "replicasets",
           "endpointslices", "serviceaccounts")
SOURCE = "LIST limit=1: items + remainingItemCount, at the window's close"


def count_objects(client: RestClient, resources: tuple[str, ...] = COUNTED,
                  more: Mapping[str, str] | None = None, *, one_instant: bool = False) -> dict[str, int]:
    """Objects per resource, cluster-wide, now; `more` adds collections by name and path (the kinds the load
    made from templates, custom resources among them). `one_instant`: every count after the first read at the
    first's resourceVersion (resourceVersionMatch=Exact), so counts meant to be subtracted (a collection and its
    namespaces) agree even while a controller makes objects between the reads."""
    paths = {resource: resource_path(resource) for resource in resources}
    paths.update({name: path for name, path in (more or {}).items() if name not in paths})
    counts: dict[str, int] = {}
    at: dict[str, str] = {}
    for name, path in paths.items():
        answer = client.get(path, limit=1, **at)
        meta = answer.get("metadata") or {}
        counts[name] = len(answer.get("items") or []) + int(meta.get("remainingItemCount") or 0)
        if one_instant and not at and meta.get("resourceVersion"):
            at = {"resourceVersion": str(meta["resourceVersion"]), "resourceVersionMatch": "Exact"}
    return counts
