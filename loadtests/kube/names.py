"""Request names: one Locust statistics row (and one client count) per kind of request.

`VERB resource (q1, q2)`, with the apiserver's verb (LIST and WATCH are not GET), so client rows line up
with the server's per-verb metrics and its request counts.
"""

from __future__ import annotations

from dataclasses import dataclass


def request_name(verb: str, resource: str, *qualifiers: str) -> str:
    kept = [q for q in qualifiers if q]
    return f"{verb} {resource} ({', '.join(kept)})" if kept else f"{verb} {resource}"


def rv_qualifier(resource_version: str) -> str:
    """How a LIST is served: rv=0 from the watch cache as it is; "" is a consistent (quorum) read."""
    return "consistent" if resource_version == "" else f"rv={resource_version}"


def scope_qualifier(namespace: str) -> str:
    return "ns" if namespace else ""


@dataclass(frozen=True)
class ListNames:
    """Names of a paginated LIST: the first page (what pollers count) and the continuation pages."""

    first: str
    more: str

    @classmethod
    def of(cls, resource: str, namespace: str, resource_version: str, *qualifiers: str) -> ListNames:
        scope = scope_qualifier(namespace)
        return cls(
            first=request_name("LIST", resource, *qualifiers, scope, rv_qualifier(resource_version)),
            more=request_name("LIST", resource, *qualifiers, scope, "continue"),
        )


@dataclass(frozen=True)
class WatchNames:
    """Names of a watcher's first watch (its successes count established watches), its re-watches, and its
    LISTs: the initial one (None: watch from "now" without listing) and the one after a 410 Gone."""

    first: str
    again: str
    relist: ListNames | None = None
    initial_list: ListNames | None = None

    @classmethod
    def of(cls, resource: str, namespace: str, *qualifiers: str, list_rv: str | None = None) -> WatchNames:
        scope = scope_qualifier(namespace)
        lists = list_rv is not None
        return cls(
            first=request_name("WATCH", resource, *qualifiers, scope),
            again=request_name("WATCH", resource, *qualifiers, scope, "rewatch"),
            initial_list=ListNames.of(resource, namespace, list_rv, *qualifiers) if lists else None,
            relist=ListNames.of(resource, namespace, "", *qualifiers) if lists else None,
        )
