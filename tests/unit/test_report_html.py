"""The run report: one self-contained page, rebuilt from results.json alone, with nothing secret in it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from loadtests.report.html import write_report
from loadtests.report.redact import redact
from tests.unit.reportdata import ABORTED, SAMPLE, copy_run, edited_run, with_audit


def report_of(folder: Path) -> str:
    path = write_report(folder)
    assert path == folder / "report.html"
    assert (folder / "junit.xml").exists()
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def sample_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    return report_of(copy_run(SAMPLE, tmp_path_factory.mktemp("sample")))


def test_page_is_self_contained(sample_html: str) -> None:
    assert sample_html.count('<script id="plotly-js">') == 1
    assert sample_html.count("* plotly.js v") == 1  # the bundle's banner: embedded once
    for tag in re.findall(r"<(?:script|link|img|iframe|source)\b[^>]*>", sample_html, flags=re.IGNORECASE):
        assert not re.search(r"\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", tag, flags=re.IGNORECASE), tag
    assert not re.search(r"@import|url\(\s*[\"']?https?:", sample_html.split('<script id="plotly-js">')[0])


def test_every_chart_has_a_figure(sample_html: str) -> None:
    divs = re.findall(r'<div class="chart" id="(chart-[a-z0-9_]+)"></div>', sample_html)
    assert len([d for d in divs if not d.startswith("chart-projection")]) == 13
    # one per projected chart: the sample's cluster LIST, watch delay and etcd size grow faster than their fits
    # predict their own left-out steps, and are named as not projectable instead of charted
    assert len([d for d in divs if d.startswith("chart-projection")]) == 8
    payload = re.search(r"var figures = (\[.*?\]);\n", sample_html, flags=re.DOTALL).group(1)
    figures = json.loads(payload)
    assert [f["id"] for f in figures] == divs
    assert all(f["figure"]["data"] for f in figures)


def test_summary_shows_verdict_versions_and_scale(sample_html: str) -> None:
    assert 'class="banner pass"' in sample_html
    assert ">PASS<" in sample_html
    for text in ("v1.37.2", "v3.6.16", "v0.8.0", "100 → 500 → 1,000", "20251128-100000-default", "plan digest"):
        assert text in sample_html
    for heading in ("SLO verdicts", "Charts", "Step details", "Run metadata", "Requests by response code"):
        assert heading in sample_html
    # each figure says where it came from
    sources = re.findall(r'<div class="source">([^<]*)</div>', sample_html)
    assert len(sources) >= 12
    for origin in ("client side", "apiserver", "etcd", "process"):
        assert any(s.startswith(origin) for s in sources), origin


def test_loadgen_cpu_bound_is_warned_without_a_note(tmp_path: Path) -> None:
    def two_busy_workers(data: dict) -> None:
        for step in data["steps"]:
            step["notes"] = []
            for proc in step["processes"]:
                if proc["component"] == "loadgen":
                    proc["cpu_percent"], proc["pids"] = (182.0, [1, 2]) if step["index"] == 2 else (170.0, [1, 2])

    html = report_of(edited_run(SAMPLE, tmp_path / "run", two_busy_workers))
    assert html.count("load generator CPU-bound") == 2  # warnings list at the top and in step 2
    assert "91 % of a core each" in html


def test_each_worker_has_its_row_and_a_lost_one_is_marked(tmp_path: Path) -> None:
    def two_remote_workers(data: dict) -> None:
        data["steps"][1]["workers"] = [
            {"worker": "10.0.0.7 (pid 41)", "remote": True, "requests": 1200, "failures": 3, "cpu_seconds": 9.5,
             "cpu_percent": 31.7, "lost_after_s": None},
            {"worker": "10.0.0.8 (pid 42)", "remote": True, "requests": 300, "failures": 0, "cpu_seconds": 2.0,
             "cpu_percent": 28.0, "lost_after_s": 12.5}]

    html = report_of(edited_run(SAMPLE, tmp_path / "run", two_remote_workers))
    assert html.count("<h3>Load generator workers</h3>") == 1  # only the step that had workers
    table = html.split('<table class="workers">')[1].split("</table>")[0]
    rows = re.findall(r"<tr[^>]*>.*?</tr>", table.split("<tbody>")[1], flags=re.DOTALL)
    assert len(rows) == 3
    assert "10.0.0.7 (pid 41)" in rows[0] and "1,200" in rows[0] and "another machine" in rows[0]
    assert rows[1].startswith('<tr class="bad">') and "partial figures" in rows[1]
    assert "all workers" in rows[2] and "1,500" in rows[2]


def test_aborted_run_renders_its_steps_and_error(tmp_path: Path) -> None:
    html = report_of(copy_run(ABORTED, tmp_path / "run"))
    assert 'class="banner aborted"' in html and ">ABORTED<" in html
    assert "etcd exited with code 2 during step 1 (500 nodes)" in html
    assert "Step 0: 100 nodes" in html
    assert "1 of 3 planned" in html


def test_run_with_zero_steps_says_so(tmp_path: Path) -> None:
    def no_steps(data: dict) -> None:
        data["steps"] = []
        data["status"] = "aborted"
        data["error"] = "kube-apiserver did not become ready within 60 s"

    html = report_of(edited_run(SAMPLE, tmp_path / "run", no_steps))
    assert "No step was recorded" in html
    assert "kube-apiserver did not become ready within 60 s" in html
    assert 'id="plotly-js"' not in html


def test_secrets_are_not_rendered(tmp_path: Path) -> None:
    secrets = {"token": "FAKE-TOKEN-4f1c9e", "client-key": "FAKE-CLIENT-KEY-77a0", "key_file": "/x/FAKE-KEY.pem",
               "cert_file": "/x/FAKE-CERT.pem", "password": "FAKE-PASSWORD-31"}

    def with_secrets(data: dict) -> None:
        data["plan"]["target"].update({"token": secrets["token"], "client-key": secrets["client-key"]})
        data["environment"]["access"] = {"server": "https://127.0.0.1:36443", "ca_file": "/x/ca.crt", **secrets}
        data["environment"]["registry_password"] = secrets["password"]

    folder = edited_run(SAMPLE, tmp_path / "run", with_secrets)
    html = report_of(folder)
    junit = (folder / "junit.xml").read_text()
    for value in secrets.values():
        assert value not in html
        assert value not in junit
    assert "/x/ca.crt" in html  # not a secret: still shown


def test_redact_drops_secret_keys_at_any_depth() -> None:
    data = {"a": {"bearer_token": "t", "list": [{"Client-Key": "k", "keep": 1}]}, "sslKeyFile": "x", "keep": 2}
    assert redact(data) == {"a": {"list": [{"keep": 1}]}, "keep": 2}


def test_recorded_text_is_escaped(tmp_path: Path) -> None:
    def hostile_note(data: dict) -> None:
        data["steps"][0]["notes"] = ["<script>alert('note')</script>"]
        data["steps"][0]["client"][0]["name"] = "</script><script>alert('name')</script>"

    html = report_of(edited_run(SAMPLE, tmp_path / "run", hostile_note))
    assert "<script>alert(" not in html
    assert "&lt;script&gt;alert(&#39;note&#39;)&lt;/script&gt;" in html


def test_recorded_cpu_bound_note_is_not_repeated(tmp_path: Path) -> None:
    def noted(data: dict) -> None:
        data["steps"][2]["notes"] = ["load generator CPU-bound: 93% of a core per process (use --workers N)"]

    html = report_of(edited_run(SAMPLE, tmp_path / "run", noted))
    assert html.count("load generator CPU-bound") == 2  # the note, at the top and in its step; no measured copy
    assert "93 % of a core each" not in html


def test_who_is_expensive_from_the_audit_log(tmp_path: Path) -> None:
    html = write_report(edited_run(SAMPLE, tmp_path / "r", with_audit)).read_text()
    section = html[html.index("Who is expensive"):]
    rows = re.findall(r"<tr><td>([^<]+)</td><td class=\"n\">", section[:section.index("</table>")])
    assert rows[:2] == ["k8s-loadtest/list_pollers", "kwok"], rows  # by apiserver time, not by count
    # the cluster-wide pod LIST row says whose requests it covers
    assert "k8s-loadtest/list_pollers 92 %, kube-controller-manager (replicaset-controller) 8 %" in html
    assert "2026-11-30T12:00:00.000+00:00 to 2026-11-30T12:01:00.000+00:00 (UTC)" in html


def test_without_an_audit_log_the_report_says_so(sample_html: str) -> None:
    assert "No audit log was read for this step" in sample_html
    assert "whose requests (audit log)" not in sample_html


def test_first_bucket_quantiles_are_shown_as_bounds(tmp_path: Path) -> None:
    def first_bucket(data: dict) -> None:
        for step in data["steps"]:
            for entry in step["server"]:
                if entry["verb"] == "POST" and entry["resource"] == "pods":
                    entry.update(p99=0.05, bounds={"p99": "<"})

    html = write_report(edited_run(SAMPLE, tmp_path / "r", first_bucket)).read_text()
    assert "&lt; 50.0 ms" in html
    assert "49.5 ms" not in html
