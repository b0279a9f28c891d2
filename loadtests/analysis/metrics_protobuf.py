"""/metrics pages in Prometheus's protobuf form (length-delimited io.prometheus.client.MetricFamily messages), read
to exactly the samples the text format's parser gives (analysis/metrics.py): same names, same labels, the `le` and
`quantile` labels spelled as Go's text writer spells them, so no figure can tell which form a page came in.

Why a second form: the health sampler reads every component's page every 5 s and keeps a few dozen families of
them. A 20-node plane's kube-apiserver page is 2.40 MB of text, most of it label text repeated on every histogram
bucket, and 0.47 MB of protobuf (tests/unit/data/record_protobuf_pages.py says both), in which each family is one
length-prefixed message whose name comes first: the families nobody reads are stepped over by their length, never
decoded. Like metrics.py, nothing here does I/O.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Collection, Iterator

from loadtests.analysis.metrics import SUFFIXES, SeriesKey
from loadtests.kube.pb import prometheus_metrics_pb2 as pb

MEDIA_TYPE = "application/vnd.google.protobuf"
# asked first, the text format (which every exporter speaks) as the fallback
ACCEPT = (f"{MEDIA_TYPE};proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,"
          "text/plain;version=0.0.4;q=0.3,*/*;q=0.1")
_NAME_TAG = 0x0A  # MetricFamily's field 1 (name), length-delimited: Go's marshalling writes it first


def is_protobuf(content_type: str) -> bool:
    """Whether an answer's Content-Type is the delimited MetricFamily form (else it is text)."""
    return content_type.split(";", 1)[0].strip().lower() == MEDIA_TYPE


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned varint at `at`, and where it ends."""
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ValueError("protobuf /metrics page ends inside a length")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def frames(data: bytes) -> Iterator[tuple[str | None, int, int]]:
    """(name, start, end) of each family's message on the page, stepped over by its length: the name read off the
    message's first field when it is there (None when not: the message must be decoded to know it). ValueError for a
    page cut short."""
    at, size = 0, len(data)
    while at < size:
        length, at = _varint(data, at)
        end = at + length
        if end > size:
            raise ValueError("protobuf /metrics page ends inside a family")
        name = None
        if length and data[at] == _NAME_TAG:
            name_length, begin = _varint(data, at + 1)
            name = data[begin:begin + name_length].decode("utf-8", "replace")
        yield name, at, end
        at = end


def family_messages(data: bytes, families: Collection[str] | None = None) -> Iterator[pb.MetricFamily]:
    """Each family on the page (only those named in `families`, when given), decoded; the others are never
    decoded. ValueError for a page cut short."""
    for name, start, end in frames(data):
        if families is not None and name is not None and name not in families:
            continue
        family = pb.MetricFamily.FromString(data[start:end])
        if families is None or family.name in families:
            yield family


@functools.lru_cache(maxsize=4096)
def go_float(value: float) -> str:
    """A float as Go's text writer puts it in a label (client_golang expfmt writeFloat: strconv.FormatFloat(v,
    'g', -1, 64), with 0, 1, -1, NaN and the infinities spelled out): the shortest digits that read back, %e when
    the exponent is below -4 or at least 6 ("1e+06"; "0.005"; "10")."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    _, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    point = len(digits) + int(exponent)  # digits before the decimal point
    if point - 1 < -4 or point - 1 >= 6:
        return f"{value:.{len(digits) - 1}e}"
    return f"{value:.{max(len(digits) - point, 0)}f}"


def protobuf_samples(data: bytes, families: Collection[str] | None = None,
                     extra: tuple[tuple[str, str], ...] = ()) -> dict[SeriesKey, float]:
    """The samples of a protobuf page as metrics.plain_samples gives them for its text (only `families`, when
    given, matched with their sample suffixes as metrics.select_families does); `extra` labels every sample
    (a merged page's instance). Families of types the text writer does not put in its plain form (gauge
    histograms) are left out."""
    wanted = None if families is None else {f + suffix for f in families for suffix in SUFFIXES}
    samples: dict[SeriesKey, float] = {}
    for family in family_messages(data, wanted):
        _add_family(family, samples, extra)
    return samples


def _add_family(family: pb.MetricFamily, samples: dict[SeriesKey, float], extra: tuple[tuple[str, str], ...]) -> None:
    name, kind = family.name, family.type
    counter_name = name if name.endswith("_total") else name + "_total"
    for metric in family.metric:
        pairs = (*((label.name, label.value) for label in metric.label), *extra)
        if kind == pb.COUNTER:
            samples[(counter_name, frozenset(pairs))] = metric.counter.value
        elif kind == pb.GAUGE:
            samples[(name, frozenset(pairs))] = metric.gauge.value
        elif kind == pb.UNTYPED:
            samples[(name, frozenset(pairs))] = metric.untyped.value
        elif kind == pb.HISTOGRAM:
            histogram, infinite = metric.histogram, False
            for bucket in histogram.bucket:
                bound = bucket.upper_bound
                infinite = infinite or bound == math.inf
                samples[(name + "_bucket", frozenset((*pairs, ("le", go_float(bound)))))] = float(
                    bucket.cumulative_count)
            if not infinite:  # the text writer adds the +Inf bucket a histogram does not carry
                samples[(name + "_bucket", frozenset((*pairs, ("le", "+Inf"))))] = float(histogram.sample_count)
            samples[(name + "_sum", frozenset(pairs))] = histogram.sample_sum
            samples[(name + "_count", frozenset(pairs))] = float(histogram.sample_count)
        elif kind == pb.SUMMARY:
            summary = metric.summary
            for quantile in summary.quantile:
                samples[(name, frozenset((*pairs, ("quantile", go_float(quantile.quantile)))))] = quantile.value
            samples[(name + "_sum", frozenset(pairs))] = summary.sample_sum
            samples[(name + "_count", frozenset(pairs))] = float(summary.sample_count)
