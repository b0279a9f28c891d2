"""The one place versions are pinned, and the check of a Kubernetes version a user asks for.

Kept apart from binaries/ (which downloads and builds) so that a plan, a report or a status command can
name versions without loading the machinery that provides them.
"""

from __future__ import annotations

import re

from loadtests.errors import SetupError

DEFAULT_KUBE_VERSION = "v1.37.2"
PREVIOUS_KUBE_VERSION = "v1.36.3"  # the "from" side of upgrade rehearsals in the test suite and README
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
# Prometheus for plans with `prometheus: {enabled: true}`: Debian bookworm's package (prometheus and promtool)
PROMETHEUS_VERSION = "2.42.0"
MIN_KUBE_MINOR = 30  # the SLI histograms and the flags used here exist from 1.30 on

VERSION_RE = re.compile(r"^v1\.(\d+)\.(\d+)$")


def check_kube_version(version: str) -> str:
    """Refuse a malformed or unsupported Kubernetes version with one line that says what to pass instead."""
    match = VERSION_RE.match(version or "")
    if not match:
        raise SetupError(
            f"Kubernetes version {version!r} is not of the form v1.MINOR.PATCH (for example {DEFAULT_KUBE_VERSION})"
        )
    if int(match.group(1)) < MIN_KUBE_MINOR:
        raise SetupError(
            f"Kubernetes version {version} is too old for this harness; use v1.{MIN_KUBE_MINOR}.0 or newer"
        )
    return version


def minor(version: str) -> int:
    return int(check_kube_version(version).split(".")[1])


def upgrade_problem(from_version: str, to_version: str) -> str | None:
    """Why a control plane cannot be rolled from one version to the other, or None: Kubernetes upgrades one
    minor version at a time (the version skew policy), and never down (a rollback is the way back)."""
    step = minor(to_version) - minor(from_version)
    if step < 0 or (step == 0 and from_version == to_version):
        return (f"{to_version} is not newer than {from_version}: roll to a newer version (a rollback to the first "
                "comes with --rollback)")
    if step > 1:
        return (f"{from_version} to {to_version} skips a minor version: Kubernetes upgrades an apiserver one minor "
                f"version at a time (roll to v1.{minor(from_version) + 1}.x first)")
    return None
