"""Bad input to setup gets one clear line that says what is wrong and what to do."""

from __future__ import annotations

import shutil

import pytest

from tests.cli import error_lines, loadtest


def test_malformed_kubernetes_version_is_one_line(tmp_path) -> None:
    result = loadtest("setup", "--kube-version", "1.37", env={"LOADTEST_CACHE": str(tmp_path)})
    assert result.returncode == 2
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "not of the form v1.MINOR.PATCH" in lines[0]


@pytest.mark.skipif(shutil.which("go") is None, reason="asks the Go module proxy which releases exist")
def test_unknown_kubernetes_version_is_one_line(tmp_path) -> None:
    result = loadtest("setup", "--kube-version", "v1.99.0", env={"LOADTEST_CACHE": str(tmp_path)})
    assert result.returncode == 2
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "v1.99.0 is not a published release" in lines[0] and "newest" in lines[0]
    assert not (tmp_path / "bin").exists() or not any((tmp_path / "bin").iterdir())


def test_no_go_and_no_download_names_what_to_install(tmp_path) -> None:
    # a PATH with only python: no go; downloads switched off
    bindir = tmp_path / "path"
    bindir.mkdir()
    result = loadtest("setup", env={"LOADTEST_CACHE": str(tmp_path / "cache"), "LOADTEST_OFFLINE": "1",
                                    "PATH": str(bindir)}, timeout=60)
    assert result.returncode == 2
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "no Go toolchain" in lines[0] and "install Go" in lines[0]


def test_a_cache_folder_that_cannot_be_made_is_one_line_naming_the_variable(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = loadtest("setup", env={"LOADTEST_CACHE": str(blocker / "cache"), "LOADTEST_OFFLINE": "1"})
    assert result.returncode == 2, result.stderr
    lines = error_lines(result)
    assert len(lines) == 1 and "unexpected error" not in lines[0], result.stderr
    assert f"cache folder {blocker / 'cache'}" in lines[0] and "cannot create it (Not a directory)" in lines[0]
    assert "LOADTEST_CACHE names it" in lines[0]
