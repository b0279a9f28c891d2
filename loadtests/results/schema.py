"""How a step's sections are registered, and how results.json's data becomes dataclasses again.

A section is a dataclass whose fields are top-level keys of a step in results.json: the part of the harness that
measures them owns them (the etcd probe `etcd`, the load generator `client`, `rates`, `workers`). The step keeps
its keys flat, as files have always held them, so the registry (results/sections.py) says which section owns
which key. Each section has a schema version of its own; a section whose layout changes raises it and gives a
loader that reads the older layouts too.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# (a step's keys as results.json holds them, the section's version in that file) -> the section
Loader = Callable[[Mapping[str, Any], int], Any]

def build(cls: Any, data: Any, *, strict: bool = False) -> Any:
    """Rebuild a dataclass tree from JSON data (unknown keys are ignored, so newer files still load). `strict`:
    data not of a dataclass's or a list's shape is a TypeError (a file read as input), not passed on as it is."""
    if dataclasses.is_dataclass(cls) and isinstance(data, dict):
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                kwargs[f.name] = build(hints[f.name], data[f.name], strict=strict)
        return cls(**kwargs)
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType) and isinstance(data, dict):  # X | None: the dataclass X
        members = [arg for arg in typing.get_args(cls) if dataclasses.is_dataclass(arg)]
        return build(members[0], data, strict=strict) if members else data
    if origin in (typing.Union, types.UnionType) and isinstance(data, list):  # list[X] | None: the list
        members = [arg for arg in typing.get_args(cls) if typing.get_origin(arg) is list]
        return build(members[0], data, strict=strict) if members else data
    if origin is list and isinstance(data, list):
        (item,) = typing.get_args(cls)
        return [build(item, x, strict=strict) for x in data]
    if origin is dict and isinstance(data, dict):
        _, item = typing.get_args(cls)
        return {key: build(item, value, strict=strict) for key, value in data.items()}
    if strict and data is not None and (dataclasses.is_dataclass(cls) or origin is list):
        raise TypeError(f"{getattr(cls, '__name__', cls)}: expected a {'list' if origin is list else 'mapping'}, "
                        f"got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class Section:
    """One registered section: its key, its dataclass, the version of its layout this code writes, and its
    loader (None: the generic builder, which leaves a field the file lacks at its default, "not measured")."""

    key: str
    cls: type
    version: int = 1
    loader: Loader | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.cls))

    def read(self, step: Mapping[str, Any], version: int = 1) -> Any:
        """This section of a step's data (the step's flat keys: the section takes its own)."""
        if self.loader is not None:
            return self.loader(step, version)
        return build(self.cls, {name: step[name] for name in self.fields if name in step})

    def empty(self) -> Any:
        return self.cls()

class Registry:
    """The sections of a step, in the order results.json writes them; every key is owned by one section."""

    def __init__(self, *sections: Section) -> None:
        self._sections = sections
        self._by_key = {s.key: s for s in sections}
        self._by_class = {s.cls: s for s in sections}
        self._by_field: dict[str, Section] = {}
        for section in sections:
            for name in section.fields:
                if name in self._by_field:
                    raise ValueError(f"step key {name!r} is owned by both the {self._by_field[name].key!r} and the "
                                     f"{section.key!r} sections")
                self._by_field[name] = section
        if len(self._by_key) != len(sections) or len(self._by_class) != len(sections):
            raise ValueError("two sections share a key or a class")

    def __iter__(self) -> Iterator[Section]:
        return iter(self._sections)

    def __getitem__(self, key: str) -> Section:
        return self._by_key[key]

    def of(self, cls: type) -> Section:
        """The registration of a section's class (KeyError: a class that is not a registered section)."""
        try:
            return self._by_class[cls]
        except KeyError:
            raise KeyError(f"{cls.__name__} is not a registered section of a step") from None

    def owner(self, name: str) -> Section | None:
        """The section that owns a step's key, None for the step's frame (or no key at all)."""
        return self._by_field.get(name)

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(self._by_field)
