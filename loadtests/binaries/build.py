"""Go builds of the pinned binaries from their modules (the last way to provide a set): wrapper modules,
`go build` with progress, and which Kubernetes releases the module proxy knows."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from loadtests.binaries.cache import BinarySet, cache_root
from loadtests.binaries.progress import (
    PACKAGE_LINE,
    PROGRESS_INTERVAL_S,
    BuildScope,
    parse_go_list,
    progress_line,
    run_counting,
    scope_line,
)
from loadtests.config.versions import (
    VERSION_RE,
)
from loadtests.errors import SetupError


def require_go(binary_set: BinarySet, why_build: str) -> None:
    """A SetupError when there is no `go` to build a set with; `why_build` says why it is built ("the download
    failed (...)")."""
    if shutil.which("go") is None:
        raise SetupError(
            f"cannot provide {binary_set.name} {binary_set.version}: {why_build} "
            "and there is no Go toolchain to build it; install Go 1.26 or newer (https://go.dev/dl/) "
            f"or put the binaries in {binary_set.directory}"
        )


def _go(args: list[str], cwd: Path, log: Callable[[str], None], env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["go", *args], cwd=cwd, env=_go_env(env), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise SetupError(f"`go {' '.join(args[:3])} ...` failed in {cwd}:\n{tail}")
    return result.stdout


def _go_env(env: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod", **(env or {})}


def _build_scope(flags: list[str], packages: list[str], cwd: Path, env: dict[str, str]) -> BuildScope | None:
    """Ask `go list` with the build's own flags and env (they decide what is cached); None if it cannot say."""
    result = subprocess.run(
        ["go", "list", "-deps", *flags, "-f", "{{.ImportPath}}\t{{.Stale}}\t{{.StaleReason}}", *packages],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        return None
    scope = parse_go_list(result.stdout)
    return scope if scope.packages else None


def _go_build(label: str, flags: list[str], packages: list[str], output: str, cwd: Path,
              log: Callable[[str], None]) -> None:
    """`go build -v` with a progress line every PROGRESS_INTERVAL_S; -v names each package as it is compiled."""
    env = _go_env()
    scope = _build_scope(flags, packages, cwd, env)
    log(scope_line(label, scope))
    total = scope.to_compile if scope else None
    code, others = run_counting(
        ["go", "build", "-v", *flags, "-o", output, *packages], cwd, env,
        counts=(lambda line: line in scope.packages) if scope else (lambda line: bool(PACKAGE_LINE.fullmatch(line))),
        tick=lambda done, elapsed: log(progress_line(label, done, total, elapsed)),
        interval_s=PROGRESS_INTERVAL_S,
    )
    if code != 0:
        tail = "\n".join(others[-15:])
        raise SetupError(f"`go build` of {label} failed in {cwd}:\n{tail}")


def _module_gomod(module: str, version: str, cwd: Path, log: Callable[[str], None]) -> str:
    """The go.mod text of a published module version, via the module proxy."""
    try:
        out = _go(["mod", "download", "-json", f"{module}@{version}"], cwd, log)
    except SetupError as error:
        if "unknown revision" in str(error) or "invalid version" in str(error) or "not found" in str(error):
            raise SetupError(f"{module} {version} is not published; check the version (see `go list -m -versions "
                             f"{module}`)") from error
        raise
    return Path(json.loads(out)["GoMod"]).read_text()


def known_kube_versions() -> list[str]:
    """Released Kubernetes versions the module proxy knows, oldest first (empty when it cannot be asked)."""
    if shutil.which("go") is None:
        return []
    result = subprocess.run(
        ["go", "list", "-m", "-versions", "k8s.io/kubernetes"],
        capture_output=True, text=True, check=False, cwd=tempfile.gettempdir(),
    )
    if result.returncode != 0:
        return []
    return [v for v in result.stdout.split()[1:] if VERSION_RE.match(v)]


def _wrapper_module(directory: Path, name: str, requires: list[str], replaces: list[str], tools: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"module loadtest.local/{name}", "", "go 1.26.0", "", "require ("]
    lines += [f"\t{r}" for r in requires] + [")", ""]
    if replaces:
        lines += ["replace ("] + [f"\t{r}" for r in replaces] + [")", ""]
    if tools:
        lines += ["tool ("] + [f"\t{t}" for t in tools] + [")", ""]
    (directory / "go.mod").write_text("\n".join(lines))
    (directory / "go.sum").unlink(missing_ok=True)


def _build_kube(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    """Commands of k8s.io/kubernetes (`cmd/<binary>` for each of the set's binaries) at the set's version: the
    control plane ("kube") or kubemark. Each set has a wrapper module of its own (build/<name>-<version>); Go's
    build cache is shared, so the packages an earlier set compiled are not compiled again."""
    version, label = binary_set.version, f"{binary_set.name} {binary_set.version}"
    work = cache_root() / "build" / f"{binary_set.name}-{version}"
    work.mkdir(parents=True, exist_ok=True)
    gomod = _module_gomod("k8s.io/kubernetes", version, work, log)
    staging_version = "v0." + version.removeprefix("v1.")
    staging = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", gomod, flags=re.MULTILINE)
    packages = [f"k8s.io/kubernetes/cmd/{b}" for b in binary_set.binaries]
    _wrapper_module(
        work,
        f"{binary_set.name}build",
        requires=[f"k8s.io/kubernetes {version}"],
        replaces=[f"{m} => {m} {staging_version}" for m in staging],
        tools=packages,
    )
    log(f"{label}: resolving modules (go mod tidy)")
    _go(["mod", "tidy"], work, log)
    log(f"{label}: compiling {', '.join(binary_set.binaries)} (minutes on 2 cores; the progress lines "
        "estimate what is left)")
    _go_build(label, ["-trimpath", "-tags=notest", "-ldflags", " ".join(_kube_ldflags(version))], packages,
              str(dest) + "/", work, log)


def _kube_ldflags(version: str) -> list[str]:
    """The version stamped into a Kubernetes build (what `--version` and the user agents say)."""
    major, minor = version.removeprefix("v").split(".")[:2]
    ldflags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        ldflags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return ldflags


def _build_etcd(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    version = binary_set.version
    work = cache_root() / "build" / f"etcd-{version}"
    gomod = _module_gomod("go.etcd.io/etcd/server/v3", version, cache_root(), log)
    local = re.findall(r"^\s*(go\.etcd\.io/etcd/[\w./-]+)\s*=>\s*\.\./", gomod, flags=re.MULTILINE)
    _wrapper_module(
        work,
        "etcdbuild",
        requires=[f"go.etcd.io/etcd/server/v3 {version}"],
        replaces=[f"{m} => {m} {version}" for m in local],
        tools=["go.etcd.io/etcd/server/v3"],
    )
    log(f"etcd {version}: building")
    _go(["mod", "tidy"], work, log)
    _go_build(f"etcd {version}", ["-trimpath", "-ldflags", "-s -w"], ["go.etcd.io/etcd/server/v3"],
              str(dest / "etcd"), work, log)


def _build_kwok(binary_set: BinarySet, dest: Path, log: Callable[[str], None]) -> None:
    # A wrapper module (not `go install pkg@version`) so that `go list` can count the packages for the progress
    # lines; kwok's go.mod has no replace directives, so the selected dependency versions are the same.
    version = binary_set.version
    work = cache_root() / "build" / f"kwok-{version}"
    packages = [f"sigs.k8s.io/kwok/cmd/{b}" for b in binary_set.binaries]
    _wrapper_module(work, "kwokbuild", requires=[f"sigs.k8s.io/kwok {version}"], replaces=[], tools=packages)
    log(f"kwok {version}: building kwok and kwokctl")
    _go(["mod", "tidy"], work, log)
    ldflags = f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={version}"
    _go_build(f"kwok {version}", ["-trimpath", "-ldflags", ldflags], packages, str(dest) + "/", work, log)


BUILDERS: dict[str, Callable[[BinarySet, Path, Callable[[str], None]], None]] = {
    "kube": _build_kube,
    "kubemark": _build_kube,  # the same builder: another command of the same module at the same version
    "etcd": _build_etcd,
    "kwok": _build_kwok,
}
