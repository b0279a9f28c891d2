"""A file the harness reads that is not text (binary bytes, UTF-16, Latin-1) is bad input: exit 2 and one line
naming the file and what it holds, never a UnicodeDecodeError from inside a parser."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadtests.errors import UnreadableFile, not_text, text_of
from tests.cli import error_lines, loadtest

BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"  # the head of a PNG image
SAMPLE_RESULTS = Path(__file__).resolve().parent / "data" / "results_sample"


@pytest.mark.parametrize(("data", "said"), [
    (BINARY, "binary bytes, not text: 0x1a at offset 6"),
    (bytes(range(256)), "binary bytes, not text: 0x00 at offset 0"),
    ("name: smoke\n".encode("utf-16"), "UTF-16 text, not UTF-8"),
    ("name: smoke\nsteps: []\n".encode("utf-16-le"), "UTF-16 text, not UTF-8"),
    ("name: smoke\n".encode("utf-32"), "UTF-32 text, not UTF-8"),
    ("name: café\n".encode("latin-1"), "not UTF-8 text: byte 0xe9 at offset 9, another encoding such as Latin-1?"),
])
def test_what_is_not_text_is_said_by_what_it_holds(data: bytes, said: str) -> None:
    assert not_text(data) == said


def test_utf8_text_is_text_with_or_without_a_byte_order_mark() -> None:
    assert not_text("name: café\n\tx: 1\r\n".encode()) is None
    assert text_of("\ufeffname: café\n".encode(), Path("p.yaml"), "plan") == "name: café\n"


def test_the_refusal_names_the_file_and_what_to_do() -> None:
    with pytest.raises(UnreadableFile) as refused:
        text_of("a: 1\n".encode("utf-16"), Path("plan.yaml"), "plan")
    assert str(refused.value) == "plan.yaml: not a readable plan (UTF-16 text, not UTF-8); save it as UTF-8 text"
    with pytest.raises(UnreadableFile) as refused:
        text_of(BINARY, Path("results.json"), "results file", "restore the file")
    assert str(refused.value) == ("results.json: not a readable results file (binary bytes, not text: 0x1a at "
                                  "offset 6); restore the file")


def refused_in_one_line(*args: str) -> str:
    """The one line a command that must refuse its input says, after checking it exits 2."""
    done = loadtest(*args, timeout=60)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = error_lines(done)
    assert len(lines) == 1 and lines[0].startswith("loadtest: "), done.stderr
    return lines[0]


def test_a_binary_plan_is_bad_input_naming_it(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_bytes(BINARY)
    line = refused_in_one_line("run", "--plan", str(plan), "--out", str(tmp_path / "run"))
    assert line == f"loadtest: {plan}: not a readable plan (binary bytes, not text: 0x1a at offset 6); give a plan " \
                   "file (YAML)"
    assert not (tmp_path / "run").exists()


def test_a_utf16_plan_is_bad_input_saying_to_save_it_as_utf8(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_bytes("name: smoke\nsteps:\n  - {nodes: 5}\n".encode("utf-16"))
    line = refused_in_one_line("run", "--plan", str(plan), "--out", str(tmp_path / "run"))
    assert line == f"loadtest: {plan}: not a readable plan (UTF-16 text, not UTF-8); save it as UTF-8 text"


def test_a_binary_template_is_bad_input_naming_it_and_the_plan_entry(tmp_path: Path) -> None:
    (tmp_path / "blob.yaml").write_bytes(BINARY)
    plan = tmp_path / "plan.yaml"
    plan.write_text("""
name: objects
steps:
  - {nodes: 5, pods_per_node: 1, warmup_s: 1, duration_s: 5}
load:
  scenarios:
    objects: {rate: 1, templates: [{template: blob.yaml}]}
""")
    line = refused_in_one_line("run", "--plan", str(plan), "--out", str(tmp_path / "run"))
    assert line.startswith(f"loadtest: {plan}: load.scenarios.objects.templates[0].template: ")
    assert line.endswith(f"{tmp_path / 'blob.yaml'}: not a readable template (binary bytes, not text: 0x1a at "
                         "offset 6)")


def test_a_binary_kubeconfig_is_bad_input_before_anything_starts(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(BINARY)
    line = refused_in_one_line("run", "--plan", "smoke", "--kubeconfig", str(kubeconfig), "--context", "x",
                               "--allow-context", "x", "--out", str(tmp_path / "run"))
    assert line == f"loadtest: {kubeconfig}: not a readable kubeconfig (binary bytes, not text: 0x1a at offset 6)"


@pytest.mark.parametrize("given", ["folder", "file"])
def test_a_binary_results_file_is_bad_input_naming_it(tmp_path: Path, given: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLE_RESULTS, run)
    (run / "results.json").write_bytes(BINARY)
    line = refused_in_one_line("report", str(run if given == "folder" else run / "results.json"))
    assert line == (f"loadtest: {run / 'results.json'}: not a readable results file (binary bytes, not text: 0x1a "
                    "at offset 6); rerun the run, or restore the file")


def test_a_binary_page_given_to_report_from_is_bad_input_naming_it(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_bytes(BINARY)
    line = refused_in_one_line("report", "--from", str(page), str(tmp_path / "out"))
    assert line.startswith(f"loadtest: {page}: not a readable report page (binary bytes, not text: ")
