"""Counting objects with LISTs of one item: counts meant to be subtracted (a collection and its namespaces) are
read at one resourceVersion, so an object made between two reads is on both sides or on neither."""

from __future__ import annotations

from typing import Any

from loadtests.measure.object_counts import count_objects


class Lists:
    """An apiserver's LIST answers for a collection that gains an object after the first read."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        self.asked.append((path, params))
        exact = params.get("resourceVersionMatch") == "Exact" and params.get("resourceVersion") == "41"
        total = 12 if path == "/api/v1/configmaps" else (1 if exact else 2)  # one made after the first read
        return {"metadata": {"resourceVersion": "41", "remainingItemCount": total - 1},
                "items": [{}]}


def test_counts_to_subtract_are_read_at_one_resource_version() -> None:
    lists = Lists()
    paths = {"": "/api/v1/configmaps", "ns": "/api/v1/namespaces/ns/configmaps"}
    counts = count_objects(lists, (), paths, one_instant=True)  # type: ignore[arg-type]
    assert counts == {"": 12, "ns": 1}
    assert lists.asked[0] == ("/api/v1/configmaps", {"limit": 1})
    assert lists.asked[1][1] == {"limit": 1, "resourceVersion": "41", "resourceVersionMatch": "Exact"}
    # the window's counts: each the newest, as before
    lists.asked.clear()
    assert count_objects(lists, (), paths)["ns"] == 2  # type: ignore[arg-type]
    assert all(params == {"limit": 1} for _path, params in lists.asked)
