"""The object counts' section of a step (the object-counts probe, at the window's close).

Step keys (results.json):

    objects: {"pods": n, ...} counted when the window closed by a LIST with limit=1 (its items plus
        remainingItemCount): right at that moment (absent in older files)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ObjectsSection:
    """Objects per resource when the window closed (empty: not counted)."""

    objects: dict[str, int] = field(default_factory=dict)
