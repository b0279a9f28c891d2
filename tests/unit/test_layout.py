"""The package's layout rules, read from its imports (every import, at any depth of a module), so they stay
true: one direction of flow, no cycles, argparse only in the CLI, Locust and gevent only inside Locust. An
import_module/__import__ call is an import too: its name must be a string literal, so that its arrow is read."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
    "report": {"measure", "controlplane", "run", "load", "cli", "index"},
    "analysis": {"measure", "controlplane", "run", "load", "report", "cli", "index"},
    "config": {"measure", "controlplane", "run", "load", "report", "cli", "binaries"},
    "kube": {"measure", "controlplane", "run", "load", "report", "analysis", "cli", "config", "binaries"},
    "binaries": {"measure", "controlplane", "run", "load", "report", "analysis", "cli", "kube"},
    "capture": {"report", "cli", "run", "load", "controlplane"},
    # the run index reads results as analysis and the report read them; the command line writes and reads it
    "index": {"cli", "run", "measure", "controlplane", "load", "capture"},
}
SHARED = {"__init__", "errors", "polling", "shutdown"}  # the top-level modules: vocabulary every room speaks
MAX_TOP_LEVEL = 6
# rooms of shared vocabulary: every room may import them, and they import nothing of the package but themselves
# and these modules (results/: the run's frame and each part's section of it, which every stage reads)
VOCABULARY = {"results": {"errors"}}


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


IMPORT_CALLS = frozenset({"import_module", "__import__"})  # importlib.import_module(...), __import__(...)


@dataclass(frozen=True)
class Imports:
    """What a module's source imports: the modules it names, and the import calls whose module it does not."""

    names: frozenset[str]  # package modules, and outside top-level packages
    unreadable: tuple[int, ...] = ()  # lines of import_module/__import__ calls without a string-literal name


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _called_names(call: ast.Call) -> list[str] | None:
    """The modules an import_module/__import__ call imports ([] if it is no such call); None when they cannot be
    read from the source (a name that is not a string literal, a relative name without a literal anchor)."""
    func = call.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if called not in IMPORT_CALLS:
        return []
    name = _literal(_argument(call, 0, "name"))
    if name is None:
        return None
    if called == "import_module":
        if not name.startswith("."):
            return [name]
        anchor = _literal(_argument(call, 1, "package"))
        return [importlib.util.resolve_name(name, anchor)] if anchor else None
    level = _argument(call, 4, "level")
    if level is not None and not (isinstance(level, ast.Constant) and level.value == 0):
        return None  # a relative __import__
    fromlist = _argument(call, 3, "fromlist")
    items = fromlist.elts if isinstance(fromlist, ast.List | ast.Tuple) else []
    return [name, *(f"{name}.{item}" for item in map(_literal, items) if item)]


def read_imports(source: str, module: str, is_package: bool = False, filename: str = "<source>") -> Imports:
    """Every module of the package, and every outside top-level package, this source imports anywhere: import
    statements, and import_module/__import__ calls with a string-literal name (an arrow all the same)."""
    found: set[str] = set()
    unreadable: list[int] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".rstrip(".")
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        elif isinstance(node, ast.Call):
            called = _called_names(node)
            if called is None:
                unreadable.append(node.lineno)
            names = called or []
        else:
            continue
        for name in names:
            if name.startswith("loadtests"):
                target = _resolve(name)
                if target and target != module:
                    found.add(target)
            else:
                found.add(name.split(".")[0])
    return Imports(frozenset(found), tuple(sorted(unreadable)))


@cache
def imports_in(module: str) -> Imports:
    path = modules()[module]
    return read_imports(path.read_text(), module, path.name == "__init__.py", str(path))


def imports_of(module: str) -> frozenset[str]:
    """Every module of the package, and every outside top-level package, this module imports anywhere."""
    return imports_in(module).names


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


def forbidden_arrows(imports: Mapping[str, Iterable[str]]) -> list[str]:
    """The arrows (module -> what it imports) that break their room's rules."""
    return sorted(f"{m} imports {t}" for m, targets in imports.items() for t in targets
                  if t.startswith("loadtests") and room_of(t) in FORBIDDEN.get(room_of(m), ()))


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_rooms_import_only_downstream(room: str) -> None:
    wrong = forbidden_arrows({m: imports_of(m) for m in modules() if room_of(m) == room})
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


def test_every_import_call_names_its_module() -> None:
    """An import_module/__import__ call whose module is computed hides an arrow from every rule above."""
    hidden = sorted(f"{modules()[m].relative_to(PACKAGE.parent)}:{line}"
                    for m in modules() for line in imports_in(m).unreadable)
    assert not hidden, f"import calls without a string-literal module name (no rule can read them): {hidden}"


CALLS_INTO_LOAD = """
import importlib
from importlib import import_module


def lazy():
    importlib.import_module("loadtests.load.locust.scenarios.pod_churn")
    import_module(".generator", package="loadtests.load")
    __import__("loadtests.load", fromlist=["contract"])
"""


def test_import_calls_are_arrows_the_rules_judge() -> None:
    """The same source breaks config/'s rules and keeps load/locust/'s: its import calls are read as arrows."""
    calls = {"loadtests.load.locust.scenarios.pod_churn", "loadtests.load.generator", "loadtests.load.contract",
             "loadtests.load"}
    as_config = read_imports(CALLS_INTO_LOAD, "loadtests.config.fake")
    assert as_config.names == {"importlib", *calls} and as_config.unreadable == ()
    assert forbidden_arrows({"loadtests.config.fake": as_config.names}) == sorted(
        f"loadtests.config.fake imports {t}" for t in calls)
    as_locust = read_imports(CALLS_INTO_LOAD, "loadtests.load.locust.fake")
    assert forbidden_arrows({"loadtests.load.locust.fake": as_locust.names}) == []


def test_import_calls_with_a_computed_module_are_caught() -> None:
    source = ("import importlib\n"
              "def factory(module):\n"
              "    return importlib.import_module(module).build\n"
              "relative = importlib.import_module('.base')\n"
              "builtin = __import__(f'loadtests.{module}')\n")
    assert read_imports(source, "loadtests.config.fake").unreadable == (3, 4, 5)


MAX_FUNCTION_LINES = 60
# functions allowed to be longer, each "path:name" with a reason; this list only shrinks
LONG_FUNCTIONS_ALLOWED: set[str] = set()  # none: a function that must be long says why here


def function_lengths() -> dict[str, int]:
    """Every function and method of the package, "path:name" -> its lines (decorators aside); the longest of
    one name in one file when several share it."""
    lengths: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                key = f"{where}:{node.name}"
                lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)
    return lengths


def test_no_function_is_longer_than_sixty_lines() -> None:
    """A function longer than a screen does more than one job: split it where its jobs change."""
    lengths = function_lengths()
    long = sorted(f"{key} ({n} lines)" for key, n in lengths.items()
                  if n > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS_ALLOWED)
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
    stale = sorted(key for key in LONG_FUNCTIONS_ALLOWED if lengths.get(key, 0) <= MAX_FUNCTION_LINES)
    assert not stale, f"allowed to be long but no longer are (remove them from LONG_FUNCTIONS_ALLOWED): {stale}"


@pytest.mark.parametrize("room", sorted(VOCABULARY))
def test_vocabulary_rooms_import_nothing_of_the_other_rooms(room: str) -> None:
    wrong = sorted(f"{m} imports {t}" for m in modules() if room_of(m) == room
                   for t in inner_imports(m) if room_of(t) not in {room, *VOCABULARY[room]})
    assert not wrong, "\n".join(wrong)


def test_every_room_may_import_the_vocabulary() -> None:
    """No room is kept from the vocabulary rooms, and they are packages (so the top-level check does not see them)."""
    assert not any(set(VOCABULARY) & forbidden for forbidden in FORBIDDEN.values())
    assert all((PACKAGE / room / "__init__.py").is_file() for room in VOCABULARY)


def test_every_section_module_is_registered() -> None:
    """A section's module without its line in results/sections.py would be written by nobody and read by nobody:
    every module of results/ that defines a *Section dataclass is imported by the registry."""
    sections = {m for m in modules() if m.startswith("loadtests.results.")
                and any(isinstance(node, ast.ClassDef) and node.name.endswith("Section") and node.name != "Section"
                        for node in ast.parse(modules()[m].read_text()).body)}
    assert sections and sections <= inner_imports("loadtests.results.sections"), sorted(sections)
