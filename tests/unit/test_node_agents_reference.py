"""loadtests/data/node_agents_reference.yaml, the reference of what one node's kubelet and kube-proxy ask of the
apiserver: its shape holds (valid verbs and scopes, positive intervals, every watch and request naming its source),
its steady-state table is the sum of its own rows, and, where the Go module cache holds the pinned modules, every
source file it names exists there and contains the name it cites."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "loadtests" / "data" / "node_agents_reference.yaml"
REAL_NODE = ("kubelet", "kube-proxy")
SOURCE = re.compile(r"^k8s\.io/[\w-]+@v\d+\.\d+\.\d+/[\w./-]+\.(go|sh|yaml)$")
WATCH_KEYS = {"resource", "group", "version", "scope", "field_selector", "label_selector", "bookmarks", "watch_list",
              "per", "kind", "resync_s", "timeout_s", "source", "symbol"}
REQUEST_KEYS = {"verb", "resource", "group", "version", "subresource", "scope", "source", "symbol"}


@functools.cache
def _reference() -> dict[str, Any]:
    return yaml.safe_load(REFERENCE.read_text())


def _module_cache() -> Path | None:
    """The Go module cache: GOMODCACHE, else GOPATH's (or ~/go's) pkg/mod; None where it does not hold the
    pinned Kubernetes module."""
    given = os.environ.get("GOMODCACHE") or str(Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg" / "mod")
    cache = Path(given)
    return cache if (cache / f"k8s.io/kubernetes@{_reference()['kubernetes_version']}").is_dir() else None


def _cited() -> list[tuple[str, dict[str, Any]]]:
    """(where, entry) of every entry that names a source: watches, requests, startup requests, identities,
    clients."""
    reference = _reference()
    found = [(f"watches[{i}]", w) for i, w in enumerate(reference["watches"])]
    found += [(f"requests[{i}]", r) for i, r in enumerate(reference["requests"])]
    found += [(f"startup[{i}]", r) for i, r in enumerate(reference["startup"])]
    for name, agent in reference["agents"].items():
        found.append((f"{name}.identity", agent["identity"]))
        found += [(f"{name}.clients.{client}", c) for client, c in agent["clients"].items()]
    return found


def test_the_reference_names_the_four_agents_and_every_watch_and_request_is_shaped() -> None:
    reference = _reference()
    assert set(reference["agents"]) == {"kubelet", "kube-proxy", "hollow-kubelet", "hollow-proxy"}
    verbs, scopes = set(reference["verbs"]), set(reference["scopes"])
    for i, watch in enumerate(reference["watches"]):
        assert set(watch) == WATCH_KEYS, (i, set(watch) ^ WATCH_KEYS)
        assert watch["scope"] in scopes - {"resource"}, watch
        assert watch["per"] in reference["per"], watch
        assert isinstance(watch["bookmarks"], bool) and isinstance(watch["watch_list"], bool), watch
        low, high = watch["timeout_s"]
        assert 0 < low <= high and watch["resync_s"] >= 0, watch
        for selector in ("field_selector", "label_selector"):
            assert watch[selector] is None or (isinstance(watch[selector], str) and watch[selector]), watch
    for i, request in enumerate(reference["requests"] + reference["startup"]):
        assert set(request) >= REQUEST_KEYS, (i, REQUEST_KEYS - set(request))
        assert request["verb"] in verbs and request["scope"] in scopes, request
    for request in reference["requests"]:
        if "every_s" in request:
            assert request["every_s"] > 0 and request.get("per") in (None, "pod"), request
        else:
            assert request["per"] in reference["changes"] and request["count"] >= 1, request


def test_every_agent_has_an_identity_a_content_type_and_rate_limits() -> None:
    for name, agent in _reference()["agents"].items():
        assert agent["identity"]["user"] and isinstance(agent["identity"]["groups"], list), name
        assert agent["user_agent"] and agent["content_type"] == "application/vnd.kubernetes.protobuf", name
        assert agent["accept"].startswith("application/vnd.kubernetes.protobuf"), name
        assert agent["watches"], name
        for client in agent["clients"].values():
            assert client["qps"] is None or (client["qps"] > 0 and client["burst"] >= client["qps"]), name


def test_every_source_is_a_module_path_and_names_what_it_cites() -> None:
    for where, entry in _cited():
        assert SOURCE.match(entry["source"]), (where, entry["source"])
        assert entry["symbol"], where


def test_the_steady_state_table_is_the_sum_of_the_real_agents_rows() -> None:
    """fixed, per_pod and per_object per (verb, resource, subresource, scope), recomputed from the kubelet's and
    kube-proxy's own rows: a request every_s apart is 60 / every_s a minute, a watch re-opens 60 / mean(timeout_s)."""
    reference = _reference()
    totals: dict[tuple[Any, ...], dict[str, float]] = {}

    def add(key: tuple[Any, ...], part: str, rate: float) -> None:
        totals.setdefault(key, {"fixed": 0.0, "per_pod": 0.0, "per_object": 0.0})[part] += rate

    for name in REAL_NODE:
        agent = reference["agents"][name]
        for watch in agent["watches"]:
            part = "fixed" if watch["per"] == "node" else "per_object"
            add(("WATCH", watch["resource"], None, watch["scope"]), part, 60 / (sum(watch["timeout_s"]) / 2))
        for request in agent["requests"]:
            if "every_s" in request:
                part = "per_pod" if request.get("per") == "pod" else "fixed"
                key = (request["verb"], request["resource"], request["subresource"], request["scope"])
                add(key, part, 60 / request["every_s"])
    table = {(row["verb"], row["resource"], row["subresource"], row["scope"]): row
             for row in reference["steady_state_per_node_per_minute"]}
    assert set(table) == set(totals), set(table) ^ set(totals)
    for key, parts in totals.items():
        for part, rate in parts.items():
            assert table[key].get(part, 0.0) == pytest.approx(rate, rel=1e-4, abs=1e-6), (key, part)


def test_every_source_exists_in_the_module_cache_and_contains_its_symbol() -> None:
    cache = _module_cache()
    if cache is None:
        pytest.skip("the Go module cache does not hold the pinned Kubernetes modules")
    missing, unnamed = [], []
    for where, entry in _cited():
        path = cache / entry["source"]
        if not path.is_file():
            missing.append(f"{where}: {entry['source']}")
        elif entry["symbol"] not in path.read_text(errors="replace"):
            unnamed.append(f"{where}: {entry['symbol']!r} not in {entry['source']}")
    assert not missing, missing
    assert not unnamed, unnamed
