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
