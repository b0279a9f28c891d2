"""The shape of a LIST or WATCH as its request's query says it (the requestURI, which every audit level holds):
resourceVersion, limit, continue, and whether it selects by label or by field, on which fields. Selector values,
like names, are the cluster's: only the field keys (spec.nodeName) are kept."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from loadtests.capture.sketch import Sketch
from loadtests.capture.traffic_types import RequestShape

UNSET, FROM_CACHE, OTHER = "unset", "0", "other"
_FIELD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,99}")  # a field path: spec.nodeName, metadata.name
UNREADABLE_KEY = "(unreadable)"
_OPERATOR = re.compile(r"!=|==|=")
_TERMS = re.compile(r"(?<!\\),")  # terms are split at commas a backslash does not escape, as the apiserver does


def field_keys(selector: str) -> list[str]:
    """The field of each term of a field selector (`spec.nodeName=n1,status.phase!=Failed`), never its value: a
    term without an operator is no field's (a value's piece, e.g. after an escaped comma) and is unreadable."""
    keys = []
    for term in _TERMS.split(selector):
        parts = _OPERATOR.split(term, maxsplit=1)
        key = parts[0].strip()
        if key or len(parts) > 1:
            keys.append(key if len(parts) > 1 and _FIELD_KEY.fullmatch(key) else UNREADABLE_KEY)
    return keys


def _version_kind(value: str) -> str:
    return UNSET if not value else FROM_CACHE if value == "0" else OTHER


def _share(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 0.0


@dataclass
class ShapeTally:
    """The LISTs (or WATCHes) of one client class on one resource, summed request by request."""

    count: int = 0
    versions: Counter[str] = field(default_factory=Counter)
    continued: int = 0
    limited: int = 0
    limits: Sketch = field(default_factory=Sketch)
    labelled: int = 0
    fielded: int = 0
    keys: Counter[str] = field(default_factory=Counter)

    def add(self, uri: str) -> None:
        query = dict(parse_qsl(urlsplit(uri).query, keep_blank_values=True))
        self.count += 1
        self.versions[_version_kind(query.get("resourceVersion", ""))] += 1
        self.continued += bool(query.get("continue"))
        limit = query.get("limit", "")
        if limit.isdigit() and int(limit) > 0:  # limit=0 asks for no limit
            self.limited += 1
            self.limits.add(float(limit))
        self.labelled += bool(query.get("labelSelector"))
        selector = query.get("fieldSelector", "")
        if selector:
            self.fielded += 1
            self.keys.update(set(field_keys(selector)))

    def shape(self, verb: str, client_class: str, group: str, resource: str) -> RequestShape:
        return RequestShape(
            verb=verb, client_class=client_class, group=group, resource=resource, count=self.count,
            resource_version={kind: _share(self.versions[kind], self.count) for kind in (UNSET, FROM_CACHE, OTHER)},
            continued=_share(self.continued, self.count), with_limit=_share(self.limited, self.count),
            limit=self.limits.quantiles(), label_selector=_share(self.labelled, self.count),
            field_selector=_share(self.fielded, self.count),
            field_keys={key: _share(n, self.count) for key, n in sorted(self.keys.items())})
