"""One capture from start to end: the server's version, every kind's figures (objects.py), and the capture's own
cost (time, requests, this process's peak memory), as one Profile. It sends GETs and LISTs only.

The traffic part (audit log or /metrics) is a section of its own, added to the Profile's `traffic` by the command
that takes both."""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil
import yaml

from loadtests.capture.objects import PAGE_LIMIT, ObjectReader
from loadtests.capture.profile import CaptureFigures, Profile
from loadtests.errors import AccessRefused, TargetError
from loadtests.kube.errors import ApiError
from loadtests.kube.rest import RestClient
from loadtests.measure.processes import peak_rss_bytes
from loadtests.results import utc_now

USER_AGENT = "k8s-loadtest-capture"
ROLE_NAME = "k8s-loadtest-capture"


def reset_peak_rss() -> bool:
    """Set this process's peak resident set (VmHWM) to its current one (Linux: 5 to /proc/self/clear_refs), so the
    peak read afterwards is the capture's; False where the kernel does not offer it."""
    with suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
        return True
    return False


def take(client: RestClient, *, page_limit: int = PAGE_LIMIT, salt: bytes | None = None,
         progress: Callable[[str], None] = lambda _line: None, reset_peak: bool = True) -> Profile:
    """The profile of the cluster `client` reaches, read with GETs and LISTs only. `reset_peak`: the process's
    peak memory is reset first, so the profile's is the capture's (not inside a run, whose peak is measured)."""
    started_at, started = utc_now(), time.monotonic()
    since = "capture start" if reset_peak and reset_peak_rss() else "process start"
    rss_at_start = psutil.Process().memory_info().rss
    sent_before = client.sent()
    where = client.access.server
    try:
        version = str(client.get("/version").get("gitVersion", "unknown"))
        inventory = ObjectReader(client, page_limit=page_limit, salt=salt, progress=progress).read()
    except ApiError as error:
        if error.status == 401:
            raise AccessRefused(f"{where} refused the credentials (HTTP 401: {error.reason})") from None
        lost = "cannot reach" if not error.status else f"HTTP {error.status} from"
        raise TargetError(f"{lost} {where} ({error.method} {error.path}): {error.reason}") from None
    requests: collections.Counter[str] = collections.Counter()
    for (verb, resource), count in client.sent().items():
        requests[verb] += count - sent_before.get((verb, resource), 0)
    figures = CaptureFigures(started_at=started_at, seconds=round(time.monotonic() - started, 2),
                             server_version=version, objects_read=inventory.objects_read,
                             pages_read=inventory.pages_read, page_limit=page_limit,
                             requests={verb: n for verb, n in sorted(requests.items()) if n},
                             rss_at_start_bytes=rss_at_start, peak_rss_bytes=peak_rss_bytes(os.getpid()),
                             peak_rss_since=since, user_agent=client.headers.get("User-Agent", ""))
    return Profile(capture=figures, kinds=inventory.kinds, skipped=inventory.skipped)


def cluster_role() -> dict[str, Any]:
    """The read-only ClusterRole a capture needs: get and list of every resource (Secrets included: they are
    sized, never kept), and GET of the discovery paths and /metrics (the traffic part's scrapes)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": ROLE_NAME},
        "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]},
            {"nonResourceURLs": ["/metrics", "/version", "/api", "/api/*", "/apis", "/apis/*"], "verbs": ["get"]},
        ],
    }


def cluster_role_yaml() -> str:
    """cluster_role() as a manifest to apply, with how to bind it."""
    return (f"# the read-only ClusterRole `loadtest capture` needs; bind it to the capturing user, e.g.\n"
            f"#   kubectl create clusterrolebinding {ROLE_NAME} --clusterrole={ROLE_NAME} --user=NAME\n"
            + yaml.safe_dump(cluster_role(), sort_keys=False, default_flow_style=None))
