"""The package's layout rules, read from its imports (every import, at any depth of a module), so they stay
true: one direction of flow, no cycles, argparse only in the CLI, Locust and gevent only inside Locust."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "loadtests"

# room -> rooms it must never import
FORBIDDEN = {
    "run": {"report", "cli"},
    "measure": {"report", "cli", "run"},
    "controlplane": {"report", "cli", "run", "load", "measure", "analysis"},
    "load": {"report", "cli", "run", "measure"},
    "report": {"measure", "controlplane", "run", "load", "cli"},
    "analysis": {"measure", "controlplane", "run", "load", "report", "cli"},
    "config": {"measure", "controlplane", "run", "load", "report", "cli", "binaries"},
    "kube": {"measure", "controlplane", "run", "load", "report", "analysis", "cli", "config", "binaries"},
    "binaries": {"measure", "controlplane", "run", "load", "report", "analysis", "cli", "kube"},
}
SHARED = {"__init__", "errors", "polling", "results", "shutdown"}  # the top-level modules: vocabulary every room speaks
MAX_TOP_LEVEL = 6


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The package module an import names (`from a.b import c` may name module a.b.c or a name in a.b)."""
    known = modules()
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports_of(module: str) -> frozenset[str]:
    """Every module of the package, and every outside top-level package, this module imports anywhere."""
    path = modules()[module]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".rstrip(".")
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        else:
            continue
        for name in names:
            if name.startswith("loadtests"):
                target = _resolve(name)
                if target and target != module:
                    found.add(target)
            else:
                found.add(name.split(".")[0])
    return frozenset(found)


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def inner_imports(module: str) -> set[str]:
    return {m for m in imports_of(module) if m.startswith("loadtests")}


def test_no_import_cycle() -> None:
    graph = {m: inner_imports(m) - {m} for m in modules()}
    # a package imports its own package __init__ implicitly: that is not an edge of the flow
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_rooms_import_only_downstream(room: str) -> None:
    wrong = sorted(f"{m} imports {t}" for m in modules() if room_of(m) == room
                   for t in inner_imports(m) if room_of(t) in FORBIDDEN[room])
    assert not wrong, "\n".join(wrong)


def test_only_the_cli_sees_argparse() -> None:
    wrong = sorted(m for m in modules() if "argparse" in imports_of(m) and room_of(m) != "cli")
    assert not wrong, f"argparse outside cli/: {wrong}"


def test_only_locust_processes_import_locust_or_gevent() -> None:
    wrong = sorted(m for m in modules() if imports_of(m) & {"locust", "gevent"}
                   and not m.startswith("loadtests.load.locust"))
    assert not wrong, f"locust or gevent outside load/locust/: {wrong}"


def test_only_the_statistics_module_imports_scipy() -> None:
    """The rank test and every distribution are analysis/stats.py's: the judge applies them, report/ renders."""
    wrong = sorted(m for m in modules() if "scipy" in imports_of(m) and m != "loadtests.analysis.stats")
    assert not wrong, f"scipy outside analysis/stats.py: {wrong}"


def test_few_top_level_modules() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL and set(top) <= SHARED, top


def test_the_rules_see_imports_inside_functions() -> None:
    """A lazy import counts like any other: the runner's lazy import of the locust process helpers is seen."""
    assert any(m.startswith("loadtests.load") for m in inner_imports("loadtests.run.runner"))
