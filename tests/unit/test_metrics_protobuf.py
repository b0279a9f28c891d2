"""/metrics read in protobuf give the samples the text gives: recorded from a real v1.37.2 control plane
(tests/unit/data/record_protobuf_pages.py: protobuf, text, protobuf again, each component's health families)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests.analysis import metrics_protobuf
from loadtests.analysis.metrics import INSTANCE, Snapshot
from loadtests.analysis.metrics_protobuf import go_float, protobuf_samples
from loadtests.measure.prometheus import MergedPage, page
from tests.loopback import CountingHandler, CountingServer, serving

DATA = Path(__file__).parent / "data"
COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd")


def recorded(component: str) -> tuple[bytes, str, bytes]:
    stem = f"{component}_v1.37.2"
    return ((DATA / f"{stem}_before.pb").read_bytes(), (DATA / f"{stem}_text.txt").read_text(),
            (DATA / f"{stem}_after.pb").read_bytes())


@pytest.mark.parametrize("component", COMPONENTS)
def test_protobuf_gives_the_texts_samples(component: str) -> None:
    """Every series the protobuf read before the text had, the text has under the same name and labels (the
    `le` and `quantile` labels spelled alike); each one unchanged between the two protobuf reads has that very
    value in the text; the text holds nothing the protobuf read after it lacks."""
    before_page, text, after_page = recorded(component)
    before, after = protobuf_samples(before_page), protobuf_samples(after_page)
    from_text = dict(Snapshot.parse(text))
    assert set(before) <= set(from_text) <= set(after)
    unchanged = [key for key, value in before.items() if after[key] == value]
    assert len(unchanged) >= len(before) // 3  # enough to mean something on every page
    assert {key: from_text[key] for key in unchanged} == {key: before[key] for key in unchanged}
    assert any(name.endswith("_bucket") for name, _ in before) or component == "kube-scheduler"


def test_only_the_asked_families_are_decoded() -> None:
    page_bytes = recorded("kube-controller-manager")[0]
    everything = protobuf_samples(page_bytes)
    depth = protobuf_samples(page_bytes, {"workqueue_depth"})
    assert depth and set(depth) == {key for key in everything if key[0] == "workqueue_depth"}
    # a family asked by the name its samples go by in the text (a counter's `_total`) is found the same way
    adds = protobuf_samples(page_bytes, {"workqueue_adds"})
    assert adds and all(name == "workqueue_adds_total" for name, _ in adds)


def test_a_page_cut_short_is_refused() -> None:
    page_bytes = recorded("etcd")[0]
    with pytest.raises(ValueError, match="ends inside"):
        protobuf_samples(page_bytes[:-3])


@pytest.mark.parametrize(("value", "spelled"), [
    (0.005, "0.005"), (10.0, "10"), (1.0, "1"), (0.0, "0"), (-1.0, "-1"), (2.5, "2.5"), (100000.0, "100000"),
    (1e6, "1e+06"), (1234567.0, "1.234567e+06"), (1e-05, "1e-05"), (0.0001, "0.0001"), (2.5e-05, "2.5e-05"),
    (9.999999999999999e-06, "9.999999999999999e-06"), (float("inf"), "+Inf"), (float("-inf"), "-Inf"),
    (0.99, "0.99"), (60.0, "60"),
])
def test_floats_are_spelled_as_gos_text_writer_spells_them(value: float, spelled: str) -> None:
    assert go_float(value) == spelled


TEXT_PAGE = "# TYPE up gauge\nup 1\n# TYPE requests counter\nrequests{code=\"200\"} 7\n"


class _TextOnly(CountingHandler):
    """An exporter that speaks only the text format, whatever it is asked; it keeps what it was asked."""

    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self.asked.append(self.headers.get("Accept", ""))
        body = TEXT_PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def text_only_exporter() -> Iterator[str]:
    _TextOnly.asked = []
    with serving(CountingServer, _TextOnly) as server:
        yield f"http://127.0.0.1:{server.server_port}/metrics"
    assert _TextOnly.asked and all(a.startswith(metrics_protobuf.MEDIA_TYPE) for a in _TextOnly.asked)


def test_an_exporter_answering_in_text_is_read_as_text(text_only_exporter: str) -> None:
    one = page(text_only_exporter)
    try:
        assert one.samples() == dict(Snapshot.parse(TEXT_PAGE))
        assert one.samples({"up"}) == {("up", frozenset()): 1.0}
    finally:
        one.close()
    merged = MergedPage({"a": page(text_only_exporter), "b": page(text_only_exporter)})
    try:
        found = merged.samples({"requests"})
    finally:
        merged.close()
    assert not merged.missed
    assert found == {("requests_total", frozenset({("code", "200"), (INSTANCE, name)})): 7.0 for name in "ab"}
