"""Record the pages the protobuf reading of /metrics is tested on: `.venv/bin/python
tests/unit/data/record_protobuf_pages.py`.

A local control plane (etcd in memory) with 20 kwok nodes; each component's page the health sampler reads is read
three times, one right after another: in protobuf, in text, in protobuf again. The text is trimmed to the families
the sampler reads (select_families) and each protobuf page to the same families' messages, as they came; written
as <component>_<version>_{before.pb,text.txt,after.pb} beside this script. A series whose value is the same in
both protobuf reads did not change while the text was read, so the text must give that value exactly.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from loadtests.analysis import metrics_protobuf  # noqa: E402
from loadtests.analysis.metrics import SUFFIXES, select_families  # noqa: E402
from loadtests.binaries.cache import find  # noqa: E402
from loadtests.controlplane.local import LocalControlPlane, LocalOptions  # noqa: E402
from loadtests.kube.rest import RestClient  # noqa: E402
from loadtests.measure.component_metrics import metrics_sources  # noqa: E402
from loadtests.measure.prometheus import MetricsPage  # noqa: E402
from loadtests.run.fleet import Fleet  # noqa: E402

HERE = Path(__file__).parent
NODES = 20


def kept_messages(data: bytes, families: frozenset[str]) -> bytes:
    """The delimited messages of `families` (with their sample suffixes), byte for byte as the page had them."""
    wanted = {family + suffix for family in families for suffix in SUFFIXES}
    kept, at = [], 0
    for name, _start, end in metrics_protobuf.frames(data):
        if name in wanted:
            kept.append(data[at:end])  # its length prefix with it
        at = end
    return b"".join(kept)


def protobuf_page(page: MetricsPage) -> bytes:
    response = page._get(metrics_protobuf.ACCEPT)
    assert metrics_protobuf.is_protobuf(response.headers["Content-Type"]), response.headers["Content-Type"]
    return response.data


def main() -> None:
    bins = find()
    with tempfile.TemporaryDirectory(prefix="record-protobuf-") as tmp:
        plane = LocalControlPlane(LocalOptions(name="record-protobuf", directory=Path(tmp) / "plane",
                                               etcd_storage="memory"), bins)
        plane.up(log=print)
        try:
            Fleet(RestClient(plane.access())).scale_nodes(NODES)
            sources, _ = metrics_sources(plane.info(), timeout_s=10)
            for source in sources:
                assert isinstance(source.page, MetricsPage)
                before, text, after = protobuf_page(source.page), source.page.text(), protobuf_page(source.page)
                stem = HERE / f"{source.name}_{bins.kube_version}"
                Path(f"{stem}_before.pb").write_bytes(kept_messages(before, source.families))
                Path(f"{stem}_text.txt").write_text(select_families(text, source.families))
                Path(f"{stem}_after.pb").write_bytes(kept_messages(after, source.families))
                print(f"{stem}_*: {len(text)} bytes of text, {len(before)} of protobuf")
        finally:
            plane.down()


if __name__ == "__main__":
    main()
