"""kubemark, the hollow node, as a binary set: provided on demand at the kube version, only ever built (no release
download), by the same builder as the control plane's binaries in a work folder of its own. No Go is run here:
the builder's `go` steps are replaced by recorders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from loadtests.binaries import build, cache, provide
from loadtests.binaries.cache import COMPLETE_MARKER
from loadtests.cli.main import build_parser
from loadtests.errors import SetupError

VERSION = "v1.37.2"
GOMOD = """module k8s.io/kubernetes

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/kubelet => ./staging/src/k8s.io/kubelet
)
"""


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LOADTEST_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_set_is_kubemark_at_the_kube_version_and_no_part_of_a_run() -> None:
    kubemark = cache.hollow_node_set(VERSION)
    assert (kubemark.name, kubemark.version, kubemark.binaries) == ("kubemark", VERSION, ("kubemark",))
    assert kubemark.directory.name == f"kubemark-{VERSION}"
    assert "kubemark" not in {s.name for s in cache.sets_for(VERSION)}


def test_a_missing_kubemark_says_how_to_provide_it(cache_dir: Path) -> None:
    with pytest.raises(SetupError) as missing:
        cache.find_kubemark(VERSION)
    assert f"loadtest setup --hollow-node --kube-version {VERSION}" in str(missing.value)


def test_a_cached_kubemark_is_found(cache_dir: Path) -> None:
    folder = cache_dir / "bin" / f"kubemark-{VERSION}"
    folder.mkdir(parents=True)
    (folder / "kubemark").write_text("#!/bin/sh\n")
    (folder / "kubemark").chmod(0o755)
    (folder / COMPLETE_MARKER).write_text(json.dumps({"source": "build"}))
    assert cache.find_kubemark(VERSION) == folder / "kubemark"


def _recorded_build(binary_set: cache.BinarySet, dest: Path,
                    monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, ...]], list[dict[str, object]]]:
    """Run the builder of `binary_set` with `go` replaced: the go commands it asked for, and its go build."""
    commands: list[tuple[str, ...]] = []
    builds: list[dict[str, object]] = []
    monkeypatch.setattr(build, "_module_gomod", lambda module, version, cwd, log: GOMOD)
    monkeypatch.setattr(build, "_go", lambda args, cwd, log, env=None: commands.append((str(cwd), *args)) or "")
    monkeypatch.setattr(build, "_go_build", lambda label, flags, packages, output, cwd, log: builds.append(
        {"label": label, "flags": flags, "packages": packages, "output": output, "cwd": cwd}))
    build.BUILDERS[binary_set.name](binary_set, dest, lambda _line: None)
    return commands, builds


def test_kubemark_is_built_by_the_kube_builder_in_a_folder_of_its_own(cache_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert build.BUILDERS["kubemark"] is build.BUILDERS["kube"]
    commands, builds = _recorded_build(cache.hollow_node_set(VERSION), cache_dir / "out", monkeypatch)
    work = cache_dir / "build" / f"kubemark-{VERSION}"
    assert commands == [(str(work), "mod", "tidy")]
    gomod = (work / "go.mod").read_text()
    assert "module loadtest.local/kubemarkbuild" in gomod and f"k8s.io/kubernetes {VERSION}" in gomod
    assert "\tk8s.io/kubernetes/cmd/kubemark" in gomod  # a tool of the wrapper module
    assert "k8s.io/kubelet => k8s.io/kubelet v0.37.2" in gomod  # the staging modules at their published versions
    (built,) = builds
    assert built["packages"] == ["k8s.io/kubernetes/cmd/kubemark"] and built["cwd"] == work
    assert built["label"] == f"kubemark {VERSION}" and "-tags=notest" in built["flags"]
    assert f"-X k8s.io/component-base/version.gitVersion={VERSION}" in str(built["flags"])


def test_the_control_plane_still_builds_where_it_did(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kube = cache.BinarySet("kube", VERSION, cache.KUBE_BINARIES)
    _, builds = _recorded_build(kube, cache_dir / "out", monkeypatch)
    work = cache_dir / "build" / f"kube-{VERSION}"
    assert "module loadtest.local/kubebuild" in (work / "go.mod").read_text()
    assert builds[0]["packages"] == [f"k8s.io/kubernetes/cmd/{b}" for b in cache.KUBE_BINARIES]
    assert builds[0]["label"] == f"kube {VERSION}"


def test_kubemark_is_never_downloaded_and_says_so(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_download(*_args: object) -> None:
        raise AssertionError("kubemark has no release download to try")

    def fake_build(binary_set: cache.BinarySet, dest: Path, log: object) -> None:
        (dest / "kubemark").write_text("#!/bin/sh\n")
        os.chmod(dest / "kubemark", 0o755)

    monkeypatch.setattr(provide, "download_set", no_download)
    monkeypatch.setattr(provide, "require_go", lambda *_a: None)
    monkeypatch.setattr(provide, "known_kube_versions", lambda: [VERSION])
    monkeypatch.setitem(provide.BUILDERS, "kubemark", fake_build)
    lines: list[str] = []
    path = provide.provide_hollow_node(VERSION, log=lines.append)
    assert path == cache_dir / "bin" / f"kubemark-{VERSION}" / "kubemark"
    assert lines[0] == f"kubemark {VERSION}: not published as a release download; building from Go modules"
    assert cache.hollow_node_set(VERSION).source() == "build"
    again: list[str] = []
    provide.provide_hollow_node(VERSION, log=again.append)
    assert again == [f"kubemark {VERSION}: cached in {cache.hollow_node_set(VERSION).directory}"]


def test_without_go_the_line_says_it_is_no_download(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build.shutil, "which", lambda _name: None)
    with pytest.raises(SetupError) as error:
        build.require_go(cache.hollow_node_set(VERSION), "it is not published as a release download")
    said = str(error.value)
    assert said.startswith(f"cannot provide kubemark {VERSION}: it is not published as a release download and "
                           "there is no Go toolchain") and "install Go" in said


def test_setup_offers_the_hollow_node_on_demand() -> None:
    assert build_parser().parse_args(["setup"]).hollow_node is False
    assert build_parser().parse_args(["setup", "--hollow-node"]).hollow_node is True
