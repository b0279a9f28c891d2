"""The one way the harness reads a /metrics page: over a kept-alive connection (urllib3), gzip unless the page is on
this machine, in the classic text format when the page is kept (a window's edges) and in protobuf when only its
samples are wanted (every few seconds: MetricsPage.samples), with credentials asked for at each read (an exec
plugin's token is refreshed during a run) and through the kubeconfig's proxy for the apiserver. What a page says
is read by analysis/metrics.py and analysis/metrics_protobuf.py."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

import urllib3

from loadtests.analysis import metrics_protobuf
from loadtests.analysis.metrics import INSTANCE, SeriesKey, Snapshot, merge_pages
from loadtests.kube.access import ClusterAccess
from loadtests.kube.paced import paced
from loadtests.kube.rest import TRANSPORT_ERRORS, pool_manager, short_error

ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"  # the classic text format, which the parser reads


def on_loopback(url: str) -> bool:
    """Whether the URL's host is this machine: a page read there travels no network, so gzip would only cost
    both ends CPU (3 MB of a kube-apiserver's page at 1,000 nodes, each read of every sample)."""
    host = urllib3.util.parse_url(url).host or ""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


class MetricsPage:
    """One /metrics endpoint, read as often as asked over one kept-alive connection, paced (kube/paced.py)."""

    def __init__(self, url: str, pool: urllib3.PoolManager, *, auth: Callable[[], Mapping[str, str]] = dict,
                 timeout_s: float = 30.0, user_agent: str | None = None) -> None:
        self.url, self.pool, self.auth, self.timeout_s = url, pool, auth, timeout_s
        self.headers = {"Accept-Encoding": "identity" if on_loopback(url) else "gzip"}
        if user_agent:
            self.headers["User-Agent"] = user_agent

    def _get(self, accept: str) -> urllib3.BaseHTTPResponse:
        """The page now; OSError naming the HTTP status when the endpoint answers with anything but 200."""
        response = self.pool.request("GET", self.url, headers={**self.headers, "Accept": accept, **self.auth()},
                                     retries=False,
                                     timeout=urllib3.Timeout(connect=min(5.0, self.timeout_s), read=self.timeout_s))
        if response.status != 200:
            first_line = response.data.decode("utf-8", "replace").strip().splitlines()[:1]
            raise OSError(f"HTTP {response.status}: {' '.join(first_line)[:200]}")
        return response

    def text(self) -> str:
        """The page now in the text format: what is kept with the results and can be read again."""
        return self._get(ACCEPT).data.decode("utf-8")

    def samples(self, families: Collection[str] | None = None,
                extra: tuple[tuple[str, str], ...] = ()) -> dict[SeriesKey, float]:
        """The page now as samples (only `families`, when given; `extra` labels each), asked for in protobuf,
        which is a fifth of a kube-apiserver's text and whose unread families are skipped undecoded; an
        endpoint that answers in text is parsed as text. For pages read every few seconds and never kept."""
        response = self._get(metrics_protobuf.ACCEPT)
        if metrics_protobuf.is_protobuf(response.headers.get("Content-Type", "")):
            return metrics_protobuf.protobuf_samples(response.data, families, extra)
        found = Snapshot.parse(response.data.decode("utf-8"), families=families)
        return {(name, labels | frozenset(extra)): value for (name, labels), value in found.items()}

    def close(self) -> None:
        self.pool.clear()


def page(url: str, access: ClusterAccess | None = None, *, tls: Any = None, timeout_s: float = 30.0,
         user_agent: str | None = None) -> MetricsPage:
    """A /metrics page: with `access`, read as that client (the apiserver's needs it; through its proxy when the
    kubeconfig names one); else plain, with `tls` as the SSL context (a component's own serving certificate)."""
    if access is not None and tls is None:
        return MetricsPage(url, paced(pool_manager(access, num_pools=1, maxsize=1)), auth=access.auth_headers,
                           timeout_s=timeout_s, user_agent=user_agent)
    return MetricsPage(url, paced(urllib3.PoolManager(num_pools=1, maxsize=1, ssl_context=tls)),
                       auth=access.auth_headers if access is not None else dict, timeout_s=timeout_s,
                       user_agent=user_agent)


def fetch_metrics_text(url: str, access: ClusterAccess | None = None, timeout_s: float = 30.0) -> str:
    """GET a /metrics page once; with `access`, authenticate as that client."""
    found = page(url, access, timeout_s=timeout_s)
    try:
        return found.text()
    finally:
        found.close()


def scrape(url: str, access: ClusterAccess | None = None, timeout_s: float = 30.0,
           families: Collection[str] | None = None, on_fetched: Callable[[], None] | None = None, *,
           deferred: bool = False) -> Snapshot:
    """Fetch and parse one /metrics page (only `families`, when given); taken_at is when the response came.

    on_fetched runs as soon as the page has arrived, before the (slower) parsing: what starts counting then
    lines up with the counters on the page. `deferred`: parsed when first read (Snapshot.deferred), for the
    pages that open a window.
    """
    return _parsed(page(url, access, timeout_s=timeout_s), families, on_fetched, deferred)


def _parsed(found: MetricsPage | MergedPage, families: Collection[str] | None,
            on_fetched: Callable[[], None] | None, deferred: bool = False) -> Snapshot:
    try:
        text = found.text()
    finally:
        found.close()
    taken_at = time.monotonic()
    if on_fetched is not None:
        on_fetched()
    return (Snapshot.deferred if deferred else Snapshot.parse)(text, taken_at, families)


class MergedPage:
    """The /metrics pages of several instances of one component read as one (analysis/metrics.merge_pages: each
    sample labelled with its instance), one after another over each one's kept-alive connection."""

    def __init__(self, pages: Mapping[str, MetricsPage]) -> None:
        self.pages = dict(pages)
        self.missed: dict[str, str] = {}  # instance -> why its page was not read, at the last read

    def text(self) -> str:
        """The pages merged; an instance that does not answer (one apiserver of several lost) is left out and
        named in `missed`, and only when none answers is it an error."""
        texts: dict[str, str] = {}
        self.missed = {}
        for instance, found in self.pages.items():
            try:
                texts[instance] = found.text()
            except (*TRANSPORT_ERRORS, OSError) as error:
                self.missed[instance] = short_error(error)
        self._raise_if_none_answered()
        return merge_pages(texts)

    def samples(self, families: Collection[str] | None = None) -> dict[SeriesKey, float]:
        """The pages as samples (MetricsPage.samples), each labelled with its instance as merge_pages labels
        them; an instance that does not answer is left out and named in `missed`, as for text()."""
        found: dict[SeriesKey, float] = {}
        self.missed = {}
        for instance, one in self.pages.items():
            try:
                found.update(one.samples(families, extra=((INSTANCE, instance),)))
            except (*TRANSPORT_ERRORS, OSError, ValueError) as error:
                self.missed[instance] = short_error(error)
        self._raise_if_none_answered()
        return found

    def _raise_if_none_answered(self) -> None:
        if len(self.missed) == len(self.pages):
            raise OSError("; ".join(f"{instance}: {why}" for instance, why in self.missed.items()))

    def close(self) -> None:
        for found in self.pages.values():
            found.close()


def one_page(pages: Mapping[str, MetricsPage]) -> MetricsPage | MergedPage:
    """A component's page: its only instance's as it is, several instances' merged."""
    return next(iter(pages.values())) if len(pages) == 1 else MergedPage(pages)


def apiserver_page(access: ClusterAccess, apiservers: Mapping[str, str] | None = None, *, timeout_s: float = 30.0,
                   user_agent: str | None = None) -> MetricsPage | MergedPage:
    """The apiserver's /metrics: through `access.server`, or with several apiservers behind a load balancer
    (`apiservers`: instance -> its own URL) every one's page, merged (through the balancer, each read would
    come from whichever apiserver it picked, and no two reads would make a difference)."""
    if not apiservers or len(apiservers) == 1:
        return page(access.server.rstrip("/") + "/metrics", access, timeout_s=timeout_s, user_agent=user_agent)
    return one_page({instance: page(url.rstrip("/") + "/metrics", access, timeout_s=timeout_s,
                                    user_agent=user_agent) for instance, url in apiservers.items()})


def scrape_apiserver(access: ClusterAccess, timeout_s: float = 30.0, families: Collection[str] | None = None,
                     on_fetched: Callable[[], None] | None = None, apiservers: Mapping[str, str] | None = None,
                     notes: list[str] | None = None, *, deferred: bool = False) -> Snapshot:
    """The apiservers' page(s) now; an apiserver of several that did not answer is named in `notes` (its
    requests are missing from every figure over a window this page opens or closes)."""
    found = apiserver_page(access, apiservers, timeout_s=timeout_s)
    snapshot = _parsed(found, families, on_fetched, deferred)
    _note_missed(found, notes, "its requests are missing from the server-side figures")
    return snapshot


def scrape_instances(urls: Mapping[str, str], timeout_s: float = 30.0, families: Collection[str] | None = None,
                     notes: list[str] | None = None, *, deferred: bool = False) -> Snapshot:
    """The plain /metrics pages of a component's instances (etcd's members), merged; a member that does not
    answer is named in `notes`."""
    found = MergedPage({instance: page(url, timeout_s=timeout_s) for instance, url in urls.items()})
    snapshot = _parsed(found, families, None, deferred)
    _note_missed(found, notes, "its figures are missing")
    return snapshot


def _note_missed(found: MetricsPage | MergedPage, notes: list[str] | None, consequence: str) -> None:
    if isinstance(found, MergedPage) and notes is not None:
        missed = [f"{instance} /metrics not read ({why}): {consequence}" for instance, why in found.missed.items()]
        notes += [note for note in missed if note not in notes]
