"""Fetching /metrics pages (the apiserver's with the run's credentials, etcd's over loopback); what a page
says is read by analysis/metrics.py."""

from __future__ import annotations

import gzip
import time
import urllib.request
from collections.abc import Callable, Collection

from loadtests.analysis.metrics import Snapshot
from loadtests.kube.access import ClusterAccess

_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"  # the classic text format, which the parser reads


def fetch_metrics_text(url: str, access: ClusterAccess | None = None, timeout_s: float = 30.0) -> str:
    """GET a /metrics page; with `access`, authenticate as that client (the apiserver's /metrics needs it)."""
    headers = {"Accept": _ACCEPT, "Accept-Encoding": "gzip"}
    handlers: list[urllib.request.BaseHandler] = []
    if access is not None:
        headers.update(access.auth_headers())
        handlers.append(urllib.request.HTTPSHandler(context=access.ssl_context()))
        if access.proxy_url:  # the kubeconfig's proxy-url, not the environment's
            handlers.append(urllib.request.ProxyHandler({"http": access.proxy_url, "https": access.proxy_url}))
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.build_opener(*handlers).open(request, timeout=timeout_s) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return body.decode("utf-8")


def scrape(url: str, access: ClusterAccess | None = None, timeout_s: float = 30.0,
           families: Collection[str] | None = None, on_fetched: Callable[[], None] | None = None) -> Snapshot:
    """Fetch and parse one /metrics page (only `families`, when given); taken_at is when the response came.

    on_fetched runs as soon as the page has arrived, before the (slower) parsing: what starts counting then
    lines up with the counters on the page.
    """
    text = fetch_metrics_text(url, access, timeout_s)
    taken_at = time.monotonic()
    if on_fetched is not None:
        on_fetched()
    return Snapshot.parse(text, taken_at, families)


def scrape_apiserver(access: ClusterAccess, timeout_s: float = 30.0, families: Collection[str] | None = None,
                     on_fetched: Callable[[], None] | None = None) -> Snapshot:
    return scrape(access.server.rstrip("/") + "/metrics", access, timeout_s, families, on_fetched)
