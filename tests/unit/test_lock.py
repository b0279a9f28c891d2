"""The Python packages are locked: requirements.lock pins every package the suite passes with (and pip and the
build backend) to one version with the sha256 of its files, requirements-otava.lock pins Apache Otava, which is
installed without its own requirements; and the environment the suite runs in is exactly the locks, so what
`pip freeze` shows is what a fresh machine's `make setup` installs."""

from __future__ import annotations

import importlib.metadata
import re
import sysconfig
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
OTAVA_LOCK = ROOT / "requirements-otava.lock"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = canonicalize_name(PYPROJECT["project"]["name"])
OTAVA = "apache-otava"
# What Otava's change-point analysis imports: locked with the project's own packages, since Otava comes
# without its requirements.
OTAVA_NEEDS = ("numpy", "scipy")

RELOCK = "run `make lock` (KEEP=1 keeps the other pins) and then `make setup`"
REINSTALL = ("run `make setup`, which builds .venv from the locks again when a lock changed (a package installed "
             "or upgraded by hand: `rm -rf .venv && make setup`)")
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Pin:
    requirement: Requirement
    hashes: tuple[str, ...]
    lock: str

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str | None:
        """The pinned version, or None where the line is not one exact `==` pin."""
        specs = [*self.requirement.specifier]
        if len(specs) != 1 or specs[0].operator != "==" or specs[0].version.endswith(".*"):
            return None
        return specs[0].version


@cache
def _pins(path: Path) -> tuple[Pin, ...]:
    """The requirements of a lock in pip's requirements format: a line continued with a backslash is one line;
    comments and the `--hash=` options of a requirement are read apart from it."""
    pins = []
    for line in path.read_text().replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        text, *hashes = re.split(r"\s+--hash=", line)
        assert not text.startswith("-"), f"{path.name}: {text!r} is an option, not a pinned package: {RELOCK}"
        pins.append(Pin(Requirement(text), tuple(hashes), path.name))
    return tuple(pins)


def _by_name(*paths: Path) -> dict[str, Pin]:
    return {pin.name: pin for path in paths for pin in _pins(path)}


def _pyproject_requirements() -> list[tuple[str, Requirement]]:
    """(where, requirement) of every dependency pyproject.toml names (runtime, each extra, the build backend),
    but those whose marker leaves them out on this platform and Python."""
    project = PYPROJECT["project"]
    named = [("dependencies", text) for text in project.get("dependencies", [])]
    for extra, texts in project.get("optional-dependencies", {}).items():
        named += [(f"the {extra} extra", text) for text in texts]
    named += [("build-system.requires", text) for text in PYPROJECT["build-system"]["requires"]]
    requirements = [(where, Requirement(text)) for where, text in named]
    return [(where, r) for where, r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def _outside(requirement: Requirement, pin: Pin | None) -> str | None:
    """Why the pin does not meet the requirement (None when it does)."""
    if pin is None:
        return f"which {LOCK.name} lacks"
    if pin.version is None or not requirement.specifier.contains(pin.version, prereleases=True):
        return f"but {pin.lock} has {pin.requirement}"
    return None


def _installed() -> dict[str, set[str]]:
    """name -> versions of every distribution installed in this interpreter's environment (its site-packages,
    not what PYTHONPATH adds), but the project itself. More than one version is a broken install."""
    paths = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    found: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions(path=paths):
        found.setdefault(canonicalize_name(dist.metadata["Name"]), set()).add(dist.version)
    found.pop(PROJECT, None)
    return found


def test_every_line_pins_one_version_with_its_hashes() -> None:
    wrong = []
    for path in (LOCK, OTAVA_LOCK):
        pins = _pins(path)
        assert pins, f"{path.name} pins nothing: {RELOCK}"
        for pin in pins:
            if pin.version is None:
                wrong.append(f"{path.name}: {pin.requirement} is not one exact == pin")
            if not pin.hashes:
                wrong.append(f"{path.name}: {pin.requirement} has no --hash=sha256: (pip's hash-checking mode "
                             "refuses the whole lock)")
            wrong += [f"{path.name}: {pin.requirement} has a hash that is not sha256:<64 hex digits>: {digest}"
                      for digest in pin.hashes if not SHA256.fullmatch(digest)]
        names = [pin.name for pin in pins]
        wrong += [f"{path.name}: {name} is pinned twice" for name in sorted({n for n in names if names.count(n) > 1})]
    assert not wrong, "\n".join([*wrong, RELOCK])


def test_the_project_itself_is_not_pinned() -> None:
    """It is installed editable from the work tree (`pip install --no-deps -e .`), never from the index."""
    pinned = [pin.lock for pin in (*_pins(LOCK), *_pins(OTAVA_LOCK)) if pin.name == PROJECT]
    assert not pinned, f"{PROJECT} is pinned in {pinned}: {RELOCK}"


def test_every_dependency_pyproject_names_is_pinned_within_its_range() -> None:
    pins = _by_name(LOCK)
    wrong = [f"pyproject.toml ({where}) asks for {r}, {why}" for where, r in _pyproject_requirements()
             if (why := _outside(r, pins.get(canonicalize_name(r.name))))]
    assert not wrong, "\n".join([*wrong, RELOCK])


def test_otava_is_locked_alone_and_what_it_needs_is_in_the_main_lock() -> None:
    names = [pin.name for pin in _pins(OTAVA_LOCK)]
    assert names == [OTAVA], (f"{OTAVA_LOCK.name} pins {names}: only {OTAVA}, installed without its own "
                              f"requirements (`make lock` writes it so)")
    missing = [name for name in OTAVA_NEEDS if name not in _by_name(LOCK)]
    assert not missing, f"Otava's analysis needs {missing}, which {LOCK.name} lacks: {RELOCK}"


def test_the_lock_holds_what_every_locked_package_requires() -> None:
    """What `pip check` checks, for the lock: the requirements of each package it pins (as installed here) are
    pinned too, within their ranges, so installing it with no resolver misses nothing. Otava is in its own lock:
    it is installed without its requirements on purpose."""
    pins = _by_name(LOCK)
    needed: list[tuple[str, Requirement]] = []
    for name in sorted(pins):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed: the environment test says so
        requirements = [Requirement(text) for text in dist.requires or []]
        needed += [(f"{name} {dist.version}", r) for r in requirements
                   if r.marker is None or r.marker.evaluate({"extra": ""})]
    wrong = [f"{who} requires {requirement}, {why}" for who, requirement in needed
             if (why := _outside(requirement, pins.get(canonicalize_name(requirement.name))))]
    assert not wrong, "\n".join([*wrong, RELOCK])


def test_the_installed_packages_are_exactly_the_locks() -> None:
    """pip freeze equals the locks: every package installed here (but the editable project) at its pinned
    version, and every pin installed."""
    pins = {name: pin for name, pin in _by_name(LOCK, OTAVA_LOCK).items()
            if pin.requirement.marker is None or pin.requirement.marker.evaluate({"extra": ""})}
    installed = _installed()
    unlocked = sorted(f"{name} {', '.join(sorted(versions))}" for name, versions in installed.items()
                      if name not in pins)
    missing = sorted(f"{pin.requirement} ({pin.lock})" for name, pin in pins.items() if name not in installed)
    different = sorted(f"{name} {', '.join(sorted(installed[name]))} installed, {pin.requirement} in {pin.lock}"
                       for name, pin in pins.items()
                       if name in installed and (pin.version is None
                                                  or {Version(v) for v in installed[name]} != {Version(pin.version)}))
    lines = [*(f"installed but in no lock: {x}" for x in unlocked),
             *(f"locked but not installed: {x}" for x in missing),
             *(f"another version: {x}" for x in different)]
    assert not lines, "\n".join([f"this environment ({sysconfig.get_path('purelib')}) is not the locks:", *lines,
                                 REINSTALL, "(a package the suite now needs: add it to pyproject.toml and "
                                 "run `make lock`)"])
