"""Prometheus /metrics text: parse, and the counter and histogram arithmetic over a step (fetching is
measure/prometheus.py: this module reads pages, live or kept, and never opens a connection).

A step is measured as the difference between two scrapes (start and end): no Prometheus server is needed.
Pages in the plain text format Go components write are parsed here (plain_samples), to the samples prometheus_client's
parser gives, which reads any other page; beyond parsing this module only does the maths Prometheus itself would do
(`increase()` with counter resets, `histogram_quantile()` with linear interpolation inside a bucket).
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

LabelSet = frozenset[tuple[str, str]]
SeriesKey = tuple[str, LabelSet]  # (sample name as exposed, e.g. "apiserver_request_total", labels)
Matcher = str | Callable[[str], bool]  # a label value to equal, or a predicate on the value

INF = math.inf


def labels_of(labels: Mapping[str, str]) -> LabelSet:
    return frozenset(labels.items())


def _matches(labels: LabelSet, match: Mapping[str, Matcher]) -> bool:
    if not match:
        return True
    as_dict = dict(labels)
    for key, want in match.items():
        value = as_dict.get(key, "")  # Prometheus semantics: a missing label equals ""
        if callable(want):
            if not want(value):
                return False
        elif value != want:
            return False
    return True


SUFFIXES = ("", "_bucket", "_sum", "_count", "_total", "_created")


def _family_blocks(text: str) -> Iterator[tuple[str, int, int]]:
    """(family, start, end) of each family's lines: from its first HELP or TYPE line to the next family's. The
    text format keeps a family's lines together, its HELP and TYPE first; found by str.find, in C, where
    splitting a kube-apiserver's 3 MB page into lines took 14 ms a scrape. Its comment lines are found by their
    "#" alone (a one-character find is a memchr: 0.2 ms over a 1,000-node step's 3 MB apiserver page, where
    looking for "\\n#" took 2.7), each kept when it begins a line."""
    comments = []  # where each comment line starts
    at = text.find("#")
    while at != -1:
        if at == 0 or text[at - 1] == "\n":
            comments.append(at)
        at = text.find("#", at + 1)
    family, begin = "", 0
    for at in comments:
        if text.startswith(("# HELP ", "# TYPE "), at):
            found = _PLAIN_NAME.match(text, at + 7)
            name = found.group(0) if found else ""
            if name != family:
                if family:
                    yield family, begin, at
                family, begin = name, at
    if family:
        yield family, begin, len(text)


def _sample_name(line: str) -> str:
    """The metric name a sample line is of."""
    return line.split("{", 1)[0].strip().split(" ", 1)[0]


def _loose_lines(text: str, prefix: str, names: Collection[str]) -> Iterator[tuple[int, str]]:
    """(where, line) of each sample line that begins with `prefix` and is of one of `names`: samples no HELP or
    TYPE line covers (an untyped sample may have none), looked for by one str.find per line found."""
    at = 0 if text.startswith(prefix) else text.find("\n" + prefix) + 1 or -1
    while at != -1:
        end = text.find("\n", at)
        line = text[at:] if end == -1 else text[at:end]
        if _sample_name(line) in names:
            yield at, line
        at = -1 if end == -1 else text.find("\n" + prefix, end) + 1 or -1


def select_families(text: str, families: Collection[str]) -> str:
    """The lines of the named families only, still exposition text for the parser to read.

    Lines are kept by metric name alone (never by value), so the parser still does all the parsing; this only
    spares it the families no probe reads, which are most of a kube-apiserver's page. A family is its HELP and
    TYPE lines and the samples after them (_family_blocks); within a kept one, only samples of its names; a name
    no HELP or TYPE line covers is looked for as a sample on its own.
    """
    wanted = {family + suffix for family in families for suffix in SUFFIXES}
    blocks = list(_family_blocks(text))
    loose = wanted - {family + suffix for family, _, _ in blocks for suffix in SUFFIXES}
    inside = wanted - loose  # a loose name is found below, once, wherever its samples are
    kept: list[tuple[int, str]] = []
    for family, begin, end in blocks:
        if family not in wanted:
            continue
        for line in text[begin:end].splitlines():
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") and parts[2] in wanted:
                    kept.append((begin, line))
            elif _sample_name(line) in inside:
                kept.append((begin, line))
    strays: dict[int, str] = {}  # by where: one family's name may begin another's
    for family in families:
        if any(family + suffix in loose for suffix in SUFFIXES):
            strays.update(_loose_lines(text, family, loose))
    kept.extend(strays.items())
    kept.sort(key=lambda found: found[0])  # stable: a block's lines keep their order
    return "\n".join(line for _, line in kept) + "\n"


INSTANCE = "instance"  # the label merge_pages gives each sample: which instance's page it came from
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?(\s.*)$")


def merge_pages(pages: Mapping[str, str], label: str = INSTANCE) -> str:
    """The pages of several instances of one component (apiservers behind a load balancer) as one page, each
    sample labelled with its instance: counters and histograms then sum over the instances as over any other
    label, and the page can be kept and parsed again like one instance's. A family's HELP and TYPE are written
    once, its samples from every page after them (the text format wants a family's samples together)."""
    order: list[str] = []
    comments: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    described_by: dict[str, str] = {}  # family -> the instance whose HELP and TYPE lines are kept
    for instance, text in pages.items():
        current = ""
        for line in text.splitlines():
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    current = parts[2]
                    if current not in comments:
                        order.append(current)
                        comments[current], samples[current] = [], []
                    if described_by.setdefault(current, instance) == instance:
                        comments[current].append(line)
                continue
            found = _SAMPLE.match(line)
            if not found:
                continue
            name, labels, rest = found.groups()
            if current not in comments:  # a sample with no TYPE line before it: its own (untyped) family
                current = name
                order.append(current)
                comments[current], samples[current] = [], []
            inside = labels[1:-1] if labels else ""
            tag = f'{label}="{instance}"'
            samples[current].append(f"{name}{{{tag}{',' + inside if inside.strip() else ''}}}{rest}")
    return "\n".join(line for family in order for line in (*comments[family], *samples[family])) + "\n"


def parsed_samples(text: str) -> dict[SeriesKey, float]:
    """Every sample as prometheus_client's parser reads it (the reference plain_samples must equal)."""
    samples: dict[SeriesKey, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, labels_of(sample.labels))] = float(sample.value)
    return samples


# One sample line of the text format as Go's client libraries write it: a legacy metric name, optional labels,
# a value and an optional timestamp; one label pair with its escapes (\\, \n, \").
_PLAIN_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+([^ \t]+)(?:[ \t]+-?[0-9]+)?")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_PLAIN_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_ALLOWED = {"counter": ("",), "gauge": ("",), "summary": ("_count", "_sum", ""),
            "histogram": ("_count", "_sum", "_bucket")}

_LABELS = re.compile(r'(?:[ \t]*[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\]|\\.)*"[ \t]*(?:,|$))*')


@functools.lru_cache(maxsize=16384)
def _plain_labels(text: str | None) -> LabelSet | None:
    """A sample's labels, or None when they are not plain pairs (a reserved or repeated name). Remembered: the
    same series come back at every scrape of a page, and reading their labels was most of the parsing."""
    if not text:
        return frozenset()
    if not _LABELS.fullmatch(text):
        return None
    pairs = _LABEL.findall(text)
    if "\\" in text:
        pairs = [(k, _ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], v)) for k, v in pairs]
    found = frozenset(pairs)
    if len({k for k, _ in pairs}) != len(pairs) or any(k.startswith("__") for k, _ in pairs):
        return None
    return found


def plain_samples(text: str) -> dict[SeriesKey, float] | None:
    """The samples of a page in the plain text format Go's client libraries write, read as prometheus_client's
    parser reads them (a counter's samples named *_total, a sample outside its family's names on its own), six
    times faster: a controller-manager's work queues took the health sampler 50 ms a sample to parse. None for
    any line outside that plain form (quoted names, a `{` or `}` in a HELP, exemplars): parsed_samples reads it."""
    samples: dict[SeriesKey, float] = {}
    family, kind, allowed = "", "untyped", frozenset[str]()
    family_has_samples = False  # a TYPE after its family's samples retypes them all in the parser: not plain
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
                continue
            if '"' in parts[2] or not _PLAIN_NAME.fullmatch(parts[2]):
                return None
            if parts[1] == "TYPE" and len(parts) < 4:
                return None
            if parts[2] != family:
                family, kind, allowed = parts[2], "untyped", frozenset({parts[2]})
                family_has_samples = False
            if parts[1] == "TYPE":
                if family_has_samples:
                    return None
                kind = parts[3]
                allowed = frozenset(family + suffix for suffix in _ALLOWED.get(kind, ("",)))
            continue
        found = _PLAIN_SAMPLE.fullmatch(line)
        labels = _plain_labels(found.group(2)) if found else None
        if found is None or labels is None or "_" in found.group(3):
            return None
        name = found.group(1)
        if name not in allowed:
            family, kind, allowed = "", "untyped", frozenset()  # on its own, as the parser yields it
        elif kind == "counter" and not family.endswith("_total"):
            name += "_total"
        family_has_samples = True
        try:
            samples[(name, labels)] = float(found.group(3))
        except ValueError:
            return None
    return samples


def _page_samples(text: str, families: Collection[str] | None) -> dict[SeriesKey, float]:
    """The samples of a page (only `families`, when given: a kube-apiserver page is mostly other ones)."""
    if families is not None:
        text = select_families(text, families)
    samples = plain_samples(text)
    return parsed_samples(text) if samples is None else samples


class Snapshot(Mapping[SeriesKey, float]):
    """One scrape: every sample keyed by (sample name, frozenset of labels), plus when it was taken."""

    def __init__(self, samples: Mapping[SeriesKey, float], taken_at: float | None = None, text: str = "") -> None:
        self._samples = dict(samples)
        self.taken_at = time.monotonic() if taken_at is None else taken_at
        self.text = text  # the page as scraped (kept with the results, so its figures can be recomputed)
        self._families: Collection[str] | None = None  # what a deferred parse keeps (Snapshot.deferred)

    @classmethod
    def parse(cls, text: str, taken_at: float | None = None,
              families: Collection[str] | None = None) -> Snapshot:
        """Parse exposition text; with `families`, only those (a kube-apiserver page is mostly other ones)."""
        return cls(_page_samples(text, families), taken_at, text)

    @classmethod
    def deferred(cls, text: str, taken_at: float | None = None,
                 families: Collection[str] | None = None) -> Snapshot:
        """The same, parsed when first read: the page that opens a window is read only after it closes, and
        parsing it as it came (an idle 1,000-node plane's 3.4 MB apiserver page, 15-19 ms; a profile of a
        loaded 1,000-node window caught 170 ms) was the harness's CPU inside the window it measures."""
        snapshot = cls.__new__(cls)
        snapshot.taken_at = time.monotonic() if taken_at is None else taken_at
        snapshot.text, snapshot._families = text, families
        return snapshot

    @functools.cached_property
    def _samples(self) -> dict[SeriesKey, float]:
        """A deferred snapshot's samples, parsed at the first reading (a parsed one has them from __init__)."""
        return _page_samples(self.text, self._families)

    @functools.cached_property
    def _by_name(self) -> dict[str, list[tuple[LabelSet, float]]]:
        by_name: dict[str, list[tuple[LabelSet, float]]] = {}
        for (name, labels), value in self._samples.items():
            by_name.setdefault(name, []).append((labels, value))
        return by_name

    def __getitem__(self, key: SeriesKey) -> float:
        return self._samples[key]

    def __iter__(self) -> Iterator[SeriesKey]:
        return iter(self._samples)

    def __len__(self) -> int:
        return len(self._samples)

    def has(self, name: str) -> bool:
        return name in self._by_name

    def series(self, name: str, /, **match: Matcher) -> list[tuple[LabelSet, float]]:
        """Samples of one name whose labels match (value equality or predicate per label)."""
        return [(labels, value) for labels, value in self._by_name.get(name, ()) if _matches(labels, match)]

    def select(self, name: str, /, **match: Matcher) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), value) for labels, value in self.series(name, **match)]

    def total(self, name: str, /, **match: Matcher) -> float | None:
        """Sum of the matching samples; None when nothing matches (absent differs from zero)."""
        found = self.series(name, **match)
        return sum(value for _, value in found) if found else None

    def shared_total(self, name: str, /, **match: Matcher) -> float | None:
        """Sum of a gauge that every instance of a merged page reports for the same thing (etcd's size, the
        objects in storage): per series the largest instance's value, so two apiservers do not count one etcd
        twice. On one instance's page, the same as total()."""
        found: dict[LabelSet, float] = {}
        for labels, value in self.series(name, **match):
            key = frozenset((k, v) for k, v in labels if k != INSTANCE)
            found[key] = max(found.get(key, value), value)
        return sum(found.values()) if found else None

    def sum_by(self, name: str, label: str, /, **match: Matcher) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in self.series(name, **match):
            key = dict(labels).get(label, "")
            out[key] = out.get(key, 0.0) + value
        return out


# ---- counters ---------------------------------------------------------------------------------------------


def _series_delta(start_value: float | None, end_value: float) -> float:
    """increase() of one series: a counter that went down was restarted, so all of its end value is new."""
    if start_value is None or end_value < start_value:
        return end_value
    return end_value - start_value


def counter_deltas(start: Snapshot | None, end: Snapshot, name: str, /,
                   **match: Matcher) -> dict[LabelSet, float]:
    """Per-series increase between two scrapes (series that appeared during the step count from zero)."""
    before = dict(start.series(name, **match)) if start is not None else {}
    return {labels: _series_delta(before.get(labels), value) for labels, value in end.series(name, **match)}


def counter_delta(start: Snapshot | None, end: Snapshot, name: str, /, **match: Matcher) -> float | None:
    """Summed increase of the matching series; None when the end scrape has no such series."""
    deltas = counter_deltas(start, end, name, **match)
    return sum(deltas.values()) if deltas else None


def counter_delta_by(start: Snapshot | None, end: Snapshot, name: str, label: str, /,
                     **match: Matcher) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, delta in counter_deltas(start, end, name, **match).items():
        key = dict(labels).get(label, "")
        out[key] = out.get(key, 0.0) + delta
    return out


# ---- histograms -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Histogram:
    """Cumulative buckets of one histogram (upper bound, count), sorted, the last one +Inf."""

    buckets: tuple[tuple[float, float], ...]
    sum: float = 0.0

    @property
    def count(self) -> float:
        return self.buckets[-1][1] if self.buckets else 0.0

    def minus(self, start: Histogram | None) -> Histogram:
        """Observations made since `start`; a bucket that shrank means a restart, so all of self is new."""
        if start is None:
            return self
        before = dict(start.buckets)
        if self.count < start.count or any(count < before.get(bound, 0.0) for bound, count in self.buckets):
            return self
        return Histogram(tuple((bound, count - before.get(bound, 0.0)) for bound, count in self.buckets),
                         self.sum - start.sum)

    def plus(self, other: Histogram) -> Histogram:
        """Merge two histograms of the same family (same bucket bounds), e.g. across API versions."""
        counts = dict(self.buckets)
        for bound, count in other.buckets:
            counts[bound] = counts.get(bound, 0.0) + count
        return Histogram(tuple(sorted(counts.items())), self.sum + other.sum)

    def bounded_quantile(self, q: float) -> Quantile:
        """The one way the harness reads a quantile off a histogram: the value and whether it is only a bound."""
        return bounded_quantile(q, self.buckets)

    def p99(self) -> Quantile:
        """p99 of what the histogram counted: None-valued when it counted nothing (not measured, never 0)."""
        return self.bounded_quantile(0.99) if self.count > 0 else Quantile(None)


@dataclass(frozen=True)
class Quantile:
    """A quantile of a histogram (Prometheus' interpolation), and whether the data says only a bound: "<" when
    its rank falls in the first bucket (all it says is "under that bucket's upper bound"), ">" when it falls in
    the open +Inf bucket ("at least the highest finite bound"); `limit` is that bound."""

    value: float | None
    bound: str = ""
    limit: float | None = None

    @property
    def honest(self) -> float | None:
        """The figure to show and compare: the bound itself where the data gives no more."""
        return self.limit if self.bound else self.value


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile() on cumulative (upper bound, count) buckets; None where it gives NaN.

    Linear interpolation inside the bucket holding the rank, 0 as the lower bound of the first bucket, and the
    highest finite bound when the rank falls in the +Inf bucket.
    """
    return bounded_quantile(q, buckets).value


def bounded_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> Quantile:
    """histogram_quantile(), saying where the value is only a bound (the first bucket's upper bound, or the
    highest finite bound for a rank in the +Inf bucket) rather than an interpolation between two bounds."""
    if math.isnan(q):
        return Quantile(None)
    if q < 0:
        return Quantile(-INF)
    if q > 1:
        return Quantile(INF)
    if not buckets:
        return Quantile(None)
    ordered = sorted(buckets, key=lambda bucket: bucket[0])
    if not math.isinf(ordered[-1][0]):
        return Quantile(None)
    # coalesce equal bounds (e.g. le="1" and le="1.0" from two sources)
    merged: list[list[float]] = []
    for bound, count in ordered:
        if merged and merged[-1][0] == bound:
            merged[-1][1] += count
        else:
            merged.append([bound, count])
    # force monotonic counts, ignoring float noise, as Prometheus' ensureMonotonicAndIgnoreSmallDeltas does
    previous = merged[0][1]
    for bucket in merged[1:]:
        current = bucket[1]
        if current == previous:
            continue
        if math.isclose(previous, current, rel_tol=1e-12) or current < previous:
            bucket[1] = previous
            continue
        previous = current
    if len(merged) < 2:
        return Quantile(None)
    observations = merged[-1][1]
    if observations == 0:
        return Quantile(None)
    rank = q * observations
    # first bucket (excluding +Inf) whose count reaches the rank; len-1 (the +Inf bucket) when none does
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)
    if b == len(merged) - 1:
        return Quantile(merged[-2][0], ">", merged[-2][0])
    if b == 0 and merged[0][0] <= 0:
        return Quantile(merged[0][0])
    bucket_start, bucket_end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        bucket_start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    value = bucket_start + (bucket_end - bucket_start) * (rank / count)
    return Quantile(value, "<", bucket_end) if b == 0 else Quantile(value)


def _histogram_series(snapshot: Snapshot, name: str,
                      match: Mapping[str, Matcher]) -> dict[LabelSet, Histogram]:
    """Every series of a histogram family, keyed by its labels without `le`."""
    buckets: dict[LabelSet, list[tuple[float, float]]] = {}
    for labels, value in snapshot.series(f"{name}_bucket", **match):
        as_dict = dict(labels)
        bound = float(as_dict.pop("le"))
        buckets.setdefault(labels_of(as_dict), []).append((bound, value))
    sums = dict(snapshot.series(f"{name}_sum", **match))
    return {key: Histogram(tuple(sorted(found)), sums.get(key, 0.0)) for key, found in buckets.items()}


def _group(histograms: Mapping[LabelSet, Histogram], by: Sequence[str] | None) -> dict[LabelSet, Histogram]:
    if by is None:
        return dict(histograms)
    grouped: dict[LabelSet, Histogram] = {}
    for labels, histogram in histograms.items():
        as_dict = dict(labels)
        key = labels_of({label: as_dict.get(label, "") for label in by})
        grouped[key] = grouped[key].plus(histogram) if key in grouped else histogram
    return grouped


def histograms(snapshot: Snapshot, name: str, by: Sequence[str] | None = None, /,
               **match: Matcher) -> dict[LabelSet, Histogram]:
    """Cumulative histograms of a family, summed over every label not in `by` (all labels kept when None)."""
    return _group(_histogram_series(snapshot, name, match), by)


def histogram_deltas(start: Snapshot | None, end: Snapshot, name: str, by: Sequence[str] | None = None, /,
                     **match: Matcher) -> dict[LabelSet, Histogram]:
    """Observations made between two scrapes, per series (resets handled per series), then grouped by `by`."""
    before = _histogram_series(start, name, match) if start is not None else {}
    after = _histogram_series(end, name, match)
    return _group({labels: histogram.minus(before.get(labels)) for labels, histogram in after.items()}, by)


def histogram_delta(start: Snapshot | None, end: Snapshot, name: str, /,
                    **match: Matcher) -> Histogram | None:
    """All matching series of a family merged into one delta histogram; None when the family is absent."""
    merged = histogram_deltas(start, end, name, (), **match)
    return next(iter(merged.values()), None)


# ---- fetching ---------------------------------------------------------------------------------------------
