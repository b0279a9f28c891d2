"""The README stays short and points into docs/; what it and the docs pages name exists; its plan parses."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

from loadtests.config import plan as plan_mod

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 300


def test_the_readme_is_short_and_links_the_reference_pages() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)", text))
    assert len(linked) >= 4, linked
    assert all((ROOT / page).is_file() for page in linked), linked


def test_every_path_the_docs_name_exists() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    path_pattern = r"((?:loadtests|benchmarks|tests|docs)/[\w./-]+\.(?:py|md|json|yaml|yml|png)(?:\.gz)?)"
    named = {(page.name, path) for page in pages for path in re.findall(path_pattern, page.read_text())}
    placeholder = re.compile(r"[A-Z]{2,}")  # loadtests/lessons/NAME.yaml: a name to fill in
    missing = sorted(f"{page}: {path}" for page, path in named
                     if not placeholder.search(path) and not (ROOT / path).exists())
    assert not missing, missing


def test_the_readme_plan_example_is_a_valid_plan(tmp_path: Path) -> None:
    example = README.read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.yaml"
    path.write_text(example)
    plan = plan_mod.load(str(path))
    assert [step.nodes for step in plan.steps] == [100, 1000]


# --- docs/plans.md: every plan field the parser accepts, with its default -------------------------------------

PLANS_DOC = ROOT / "docs" / "plans.md"
REQUIRED = object()  # a field without a default: the plan must give it
OPAQUE = object()  # a field whose value is data (templates, RBAC rules), not fields of the plan
# Fields the doc's first block shows with an example value rather than the default, and why.
EXAMPLE_VALUES = {
    "name": "the default is the plan file's name, which a doc cannot show",
    "steps[].pods_per_node": "0 by default (the comment says so); an example plan runs pods",
    "steps[].warmup_s": "5 by default (the comment says so); the example waits longer",
    "target.tenants.*.groups": "none by default; the example puts its tenants in a group",
}


def _plan_schema() -> dict[str, Any]:
    """Every field the plan parser accepts, as a dotted path (`[]` a list's items, `*` a name the plan chooses),
    with its default; derived from the dataclasses and tables the parser validates against (config/plan.py and
    the modules it reads sections with)."""
    from loadtests.config import measure, scenarios, tenants

    def section(prefix: str, value: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for item in dataclasses.fields(value):
            fields.update(walk(f"{prefix}{item.name}", getattr(value, item.name), item))
        return fields

    def walk(path: str, value: Any, item: dataclasses.Field[Any] | None = None) -> dict[str, Any]:
        if dataclasses.is_dataclass(value):
            return section(f"{path}.", value)
        if item is not None and item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
            return {path: REQUIRED}
        return {path: value}

    plan = plan_mod.Plan(name="", target=plan_mod.Target(), steps=[], load={})
    schema = section("", plan)
    for key in ("source", "steps", "load", "slo", "compare", "measure", "target.component_args",
                "target.tenants"):
        schema.pop(key)
    schema.update(section("steps[].", plan_mod.Step(nodes=0)))
    schema["steps[].nodes"] = REQUIRED
    schema["steps"] = schema["steps[].join"] = OPAQUE
    for name, scenario in scenarios.SCENARIOS.items():
        for key, default in scenario.defaults.items():
            schema[f"load.scenarios.{name}.{key}"] = OPAQUE if key in scenario.template_lists else default
    schema.update({f"slo.{key}": value for key, value in plan_mod.DEFAULT_SLO.items()})
    schema.update({f"compare.{key}": value for key, value in plan_mod.REGRESSION_DEFAULTS.items()})
    schema.update({f"measure.{probe.name}": probe.default for probe in measure.PROBES})
    schema.update({f"target.component_args.{component}": [] for component in plan_mod.COMPONENTS})
    tenant = "target.tenants.*."
    schema.update({f"{tenant}{item.name}": REQUIRED for item in dataclasses.fields(tenants.Tenant)})
    schema[f"{tenant}groups"] = []
    schema[f"{tenant}rules"] = OPAQUE
    schema.update(section(f"{tenant}flow_schema.", tenants.FlowSchemaSpec()))
    # sections: a path of their own too, so that `audit: {...}` and `audit.enabled` are both known
    for path in list(schema):
        parts = path.split(".")
        for i in range(1, len(parts)):
            schema.setdefault(".".join(parts[:i]), OPAQUE)
    return schema


def _yaml_blocks(path: Path) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S)


def _flatten(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """(path, value) of every field of a doc's YAML block, in order, with the schema's `[]` and `*`."""
    found = [(path, value)] if path else []
    if isinstance(value, dict):
        opaque = path.endswith(("rules", "templates", "install", "prefill"))
        for key, item in ([] if opaque else value.items()):
            name = "*" if path == "target.tenants" else str(key)
            found += _flatten(item, f"{path}.{name}" if path else name)
    elif isinstance(value, list) and path == "steps":
        for item in value:
            found += [(f"steps[]{sub[len('steps[]'):]}", v) for sub, v in _flatten(item, "steps[]")]
    return found


def _documented() -> list[tuple[str, Any]]:
    import yaml

    return [pair for block in _yaml_blocks(PLANS_DOC) for pair in _flatten(yaml.safe_load(block))]


def test_every_plan_field_is_in_the_plans_doc() -> None:
    documented = {path for path, _ in _documented()}
    missing = sorted(set(_plan_schema()) - documented)
    assert not missing, f"plan fields the parser accepts that docs/plans.md does not show: {missing}"


def test_the_plans_doc_shows_no_field_the_parser_refuses() -> None:
    unknown = sorted({path for path, _ in _documented()} - set(_plan_schema()))
    assert not unknown, f"fields docs/plans.md shows that the plan parser does not accept: {unknown}"


def test_the_plans_doc_shows_each_field_first_with_its_default() -> None:
    """Where docs/plans.md first shows a field, the value it gives is the parser's default (or an example,
    listed in EXAMPLE_VALUES with the reason)."""
    schema, seen, wrong = _plan_schema(), set(), []
    for path, value in _documented():
        if path in seen or path not in schema:
            continue
        seen.add(path)
        default = schema[path]
        if default is OPAQUE or default is REQUIRED or path in EXAMPLE_VALUES:
            continue
        if isinstance(default, list | tuple) and isinstance(value, list):
            value, default = list(value), list(default)
        if value != default or isinstance(value, bool) != isinstance(default, bool):
            wrong.append(f"{path}: the doc shows {value!r}, the default is {default!r}")
    assert not wrong, wrong
    assert set(EXAMPLE_VALUES) <= seen, sorted(set(EXAMPLE_VALUES) - seen)


def test_the_plans_doc_reference_block_is_a_valid_plan(tmp_path: Path) -> None:
    path = tmp_path / "reference.yaml"
    path.write_text(_yaml_blocks(PLANS_DOC)[0])
    plan_mod.load(str(path))


def _listed_plans(page: Path) -> set[str]:
    paragraph = next(p for p in page.read_text().split("\n\n") if "in `loadtests/plans/`" in p)
    return set(re.findall(r"`([\w-]+)`", paragraph))


def test_every_bundled_plan_is_listed_where_the_docs_list_them() -> None:
    bundled = {path.stem for path in plan_mod.PLANS_DIR.glob("*.yaml")}
    for page in (PLANS_DOC, README):
        missing = sorted(bundled - _listed_plans(page))
        assert not missing, f"{page.name} does not list the bundled plans {missing}"


# --- the command line: every option explained in --help, every flag the docs name real -----------------------

# Flags the docs name in a code span of their own that are not the harness's: the components' (kube-apiserver,
# etcd), which a plan passes through `target.component_args` or a lesson sets.
COMPONENT_FLAGS = {
    "--enable-priority-and-fairness": "kube-apiserver's; the apf-noisy-neighbour lesson turns it off",
    "--shutdown-watch-termination-grace-period": "kube-apiserver's; the relist-storm lesson passes it",
    "--etcd-servers-overrides": "kube-apiserver's; the events-etcd and leases-etcd lessons set it",
    "--quota-backend-bytes": "etcd's; the etcd-quota lesson sets it",
    "--profiling": "kube-apiserver's; profiles on or off",
    "--enable-pprof": "etcd's; profiles on or off",
    "--no-such-flag": "docs/faults.md's example of a component refusing a bad flag",
}
# Options without a help text on purpose, and why (none so far).
HIDDEN_OPTIONS: dict[tuple[str, str], str] = {}


def _commands() -> dict[str, argparse.ArgumentParser]:
    from loadtests.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _doc_pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _code(page: Path) -> list[str]:
    """The page's inline code spans (which may run over a line end), and each line of its fenced blocks other
    than YAML (comments dropped, lines continued with a backslash joined)."""
    text = page.read_text()
    spans: list[str] = []
    for language, block in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if language != "yaml":
            spans += [line.split(" #", 1)[0] for line in block.replace("\\\n", " ").splitlines()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    spans += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    return spans


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _flags_named() -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(page, command, flag) of every flag written after `loadtest <command>` (or after a command's bare name
    at the start of a code span, as `status --json`), and (page, flag) of flags in code spans of their own."""
    commands = _commands()
    with_command: list[tuple[str, str, str]] = []
    bare: list[tuple[str, str]] = []
    for page in _doc_pages():
        for span in _code(page):
            parts = re.split(r"(?:^|(?<=[\s/]))loadtest\s+(?=[a-z])", span)
            head, rest = parts[0], parts[1:]
            first = head.split(maxsplit=1)
            if first and first[0] in commands and FLAG.search(head):
                rest.insert(0, head)
            elif head.lstrip().startswith("--"):
                bare += [(page.name, flag) for flag in FLAG.findall(head)]
            for part in rest:
                command = part.split(maxsplit=1)[0]
                if command not in commands:  # a word after "loadtest" that is not a command: not an example
                    continue
                with_command += [(page.name, command, flag) for flag in FLAG.findall(part)]
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S):  # "(--no-gate overrides)"
            bare += [(page.name, flag) for line in block.splitlines() for flag in FLAG.findall(line.partition("#")[2])]
    return with_command, bare


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def test_every_command_and_option_has_a_help_sentence() -> None:
    from loadtests.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    unexplained = sorted(choice.dest for choice in sub._choices_actions if not (choice.help or "").strip())
    assert not unexplained, f"commands without a help line in `loadtest --help`: {unexplained}"
    missing = []
    for name, parser in _commands().items():
        for action in parser._actions:
            key = (name, action.option_strings[0] if action.option_strings else action.dest)
            if key in HIDDEN_OPTIONS:
                continue
            if action.help == argparse.SUPPRESS or not (action.help or "").strip():
                missing.append(" ".join(key))
    assert not missing, f"options without a help text: {missing}"


def test_every_flag_the_docs_give_a_command_exists_on_it() -> None:
    commands = _commands()
    with_command, _ = _flags_named()
    assert len(with_command) > 50, "the docs' command lines were not found"
    wrong = sorted({f"{page}: loadtest {command} {flag}" for page, command, flag in with_command
                    if flag not in _options(commands[command])})
    assert not wrong, f"flags the docs give a command that it does not have: {wrong}"


def test_every_flag_the_docs_name_alone_exists_on_some_command() -> None:
    every = set().union(*(_options(parser) for parser in _commands().values()))
    _, bare = _flags_named()
    assert bare, "the docs' flags in code spans of their own were not found"
    wrong = sorted({f"{page}: {flag}" for page, flag in bare if flag not in every and flag not in COMPONENT_FLAGS})
    assert not wrong, f"flags the docs name that no loadtest command has: {wrong}"


# --- environment variables: every one the harness reads is in docs/clusters.md's table -----------------------

ENV_DOC = ROOT / "docs" / "clusters.md"
PACKAGE = ROOT / "loadtests"


def _variables_read() -> set[str]:
    """Every LOADTEST_* name in the package's code, and every variable it reads by a literal name."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        found.update(re.findall(r"\bLOADTEST_[A-Z][A-Z0-9_]*", text))
        found.update(re.findall(r"(?:environ\.get|getenv|environ\[)\(?\s*[\"']([A-Z][A-Z0-9_]*)[\"']", text))
    return found


def _variables_documented() -> set[str]:
    section = ENV_DOC.read_text().split("# Environment variables\n", 1)[1]
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", section, re.M))


def test_every_environment_variable_the_harness_reads_is_documented() -> None:
    read = _variables_read()
    assert {"LOADTEST_CACHE", "LOADTEST_OFFLINE", "XDG_CACHE_HOME"} <= read, read
    missing = sorted(read - _variables_documented())
    assert not missing, f"variables the harness reads that docs/clusters.md's table lacks: {missing}"


def test_the_environment_table_names_only_variables_the_harness_reads() -> None:
    stale = sorted(_variables_documented() - _variables_read())
    assert not stale, f"variables in docs/clusters.md's table that loadtests/ never reads: {stale}"
