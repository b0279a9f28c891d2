"""The README stays short and points into docs/; what it and the docs pages name exists; its plan parses."""

from __future__ import annotations

import re
from pathlib import Path

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
