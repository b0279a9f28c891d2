"""The window's raw /metrics pages, kept with the results, give back the step's server-side figures."""

from __future__ import annotations

from pathlib import Path

from loadtests.analysis import etcd
from loadtests.analysis import server as apiserver
from loadtests.analysis.metrics import Snapshot
from loadtests.analysis.scrapes import recompute, save_scrapes, scrape_path
from loadtests.results import StepResult

DATA = Path(__file__).parent / "data"


def page(name: str) -> Snapshot:
    return Snapshot.parse((DATA / name).read_text())


def test_kept_pages_reproduce_the_server_figures(tmp_path: Path) -> None:
    pages = {("apiserver", "start"): page("apiserver_metrics_start.txt"),
             ("apiserver", "end"): page("apiserver_metrics_end.txt"),
             ("etcd", "start"): page("etcd_metrics_start.txt"), ("etcd", "end"): page("etcd_metrics_end.txt")}
    save_scrapes(tmp_path, pages)
    assert scrape_path(tmp_path, "apiserver", "end").stat().st_size < len(pages["apiserver", "end"].text)  # gzip
    step = StepResult(0, "s", 10, 0, "", 60)
    assert recompute(step, tmp_path) == []
    start, end = pages["apiserver", "start"], pages["apiserver", "end"]
    assert step.server == apiserver.server_latencies(start, end) and step.server
    assert step.requests_by_code == apiserver.requests_by_code(start, end)
    assert step.apiserver == apiserver.apiserver_scalars(start, end)
    assert step.etcd == etcd.etcd_stats(pages["etcd", "start"], pages["etcd", "end"])


def test_missing_pages_are_named_and_figures_left_alone(tmp_path: Path) -> None:
    step = StepResult(2, "s", 10, 0, "", 60, requests_by_code={"200": 5})
    missing = recompute(step, tmp_path)
    assert len(missing) == 2 and missing[0].startswith("step 3: no apiserver end page kept")
    assert step.requests_by_code == {"200": 5}
