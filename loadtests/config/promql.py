"""A plan's own figures and checks in PromQL, answered by a real Prometheus the run starts (`prometheus:`).

    prometheus: {enabled: true, scrape_interval_s: 5}
    figures:                      # recorded per step, shown in the report, carried by compare, repeats, history
      - {name: POST pods p99, query: 'histogram_quantile(0.99, sum by (le) (increase(
            apiserver_request_sli_duration_seconds_bucket{verb="POST", resource="pods"}[%v])))', unit: s,
         rule: latency}
    figures: {profile: metrics.yml}   # or a kube-burner metrics profile, as is (its `query`/`metricName` list)
    checks:                       # judged like the SLOs: results, JUnit, exit code 1
      - {name: no 5xx, query: 'sum(increase(apiserver_request_total{code=~"5.."}[%v]))', max: 0}
    checks: {profile: alerts.yml}     # or a kube-burner alert profile (`expr`/`description`/`severity`)

Each query is evaluated once per step, as an instant query at the window's close; `%v` (ClusterLoader2's
placeholder) or `{{ .elapsed }}` (kube-burner's) stands for the window's length, e.g. `[60000ms]`. A query must
give one series, or say how its series combine (`aggregate: sum | max | min | avg`); one that gives none is "not
measured", never 0. An alert-profile check fails when its expression gives any series (the alert fires) and its
severity is error or critical; a warning or info is shown and fails nothing. A query Prometheus cannot parse is
refused before the run starts (run/promql.py asks promtool).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtests.errors import PlanError, read_text

PLACEHOLDER = re.compile(r"%v|\{\{\s*\.elapsed\s*\}\}")
AGGREGATES = ("sum", "max", "min", "avg")
UNITS = ("", "s", "bytes", "%", "count")
RULES = ("latency", "memory", "cpu", "errors_5xx", "throttled_429")  # analysis/rules.py's (a unit test holds them)
SEVERITIES = ("info", "warning", "error", "critical")  # kube-burner's; the last two fail the run
FAILING_SEVERITIES = ("error", "critical")
MIN_SCRAPE_INTERVAL_S = 1.0


@dataclass
class PrometheusSettings:
    """A real Prometheus beside the control plane for the run: every component scraped every
    `scrape_interval_s`, its TSDB kept (compressed) in the run folder."""

    enabled: bool = False
    scrape_interval_s: float = 5.0


@dataclass
class PromQuery:
    """One named PromQL query: a figure (recorded), or a check (`max`/`min`, or an alert's `severity`)."""

    name: str
    query: str
    max: float | None = None
    min: float | None = None
    aggregate: str = ""  # how several series combine into the figure; "": refused
    unit: str = ""  # how the report shows it (s, bytes, %, count; "": as it comes)
    rule: str = ""  # compare's regression rule (analysis/rules.py); "": shown, not compared
    severity: str = ""  # an alert-profile check: fires when its expression gives any series
    description: str = ""
    profile: str = ""  # the file it was read from ("": the plan itself)

    @property
    def alert(self) -> bool:
        return bool(self.severity)

    def for_window(self, seconds: float) -> str:
        """The query as sent for a window of `seconds`: the placeholder as a PromQL duration (whole ms)."""
        return PLACEHOLDER.sub(f"{max(1, round(seconds * 1000))}ms", self.query)


def _error(source: str, path: str, reason: str) -> PlanError:
    return PlanError(f"{source}: {path}: {reason}")  # as config.plan.field_error words it (plan imports this)


def parse_settings(source: str, value: Any) -> PrometheusSettings:
    if value is None:
        return PrometheusSettings()
    if not isinstance(value, dict):
        raise _error(source, "prometheus", f"must be a mapping, e.g. {{enabled: true}} (got {value!r})")
    unknown = sorted(set(value) - {"enabled", "scrape_interval_s"})
    if unknown:
        raise _error(source, f"prometheus.{unknown[0]}", "unknown field; expected one of: enabled, scrape_interval_s")
    settings = PrometheusSettings(**value)
    if not isinstance(settings.enabled, bool):
        raise _error(source, "prometheus.enabled", f"must be true or false (got {settings.enabled!r})")
    interval = settings.scrape_interval_s
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not 1 <= interval <= 3600:
        raise _error(source, "prometheus.scrape_interval_s", f"must be a number of seconds from "
                                                             f"{MIN_SCRAPE_INTERVAL_S:g} to 3600 (got {interval!r})")
    return settings


def _profile_entries(source: str, path: str, file: Any) -> tuple[str, list[Any]]:
    """A profile file's list of entries, the file found beside the plan (or as given)."""
    if not isinstance(file, str) or not file:
        raise _error(source, f"{path}.profile", f"must be a file path (got {file!r})")
    beside = Path(source).parent / file
    found = beside if not Path(file).is_absolute() and beside.exists() else Path(file)
    try:
        data = yaml.safe_load(read_text(found, "profile", "give a kube-burner profile (YAML)"))
    except OSError as error:
        raise _error(source, f"{path}.profile", f"cannot read {found} ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        raise _error(source, f"{path}.profile", f"{found} is not valid YAML ({' '.join(str(error).split())})") from None
    if not isinstance(data, list):
        raise _error(source, f"{path}.profile", f"{found} must hold a list of entries (got {type(data).__name__})")
    return str(found), data


# each kind of entry: its fields (name and query under the names the file uses), and the optional ones kept
PLAN_FIGURE = {"name": "name", "query": "query", "optional": ("aggregate", "unit", "rule")}
PLAN_CHECK = {"name": "name", "query": "query", "optional": ("aggregate", "max", "min")}
METRICS_PROFILE = {"name": "metricName", "query": "query", "optional": ()}  # instant, captureStart... ignored
ALERT_PROFILE = {"name": "description", "query": "expr", "optional": ("severity",)}


def _entry(source: str, path: str, raw: Any, kind: dict[str, Any], profile: str) -> PromQuery:
    if not isinstance(raw, dict):
        raise _error(source, path, f"must be a mapping with {kind['name']} and {kind['query']} (got {raw!r})")
    if not profile:
        allowed = {kind["name"], kind["query"], *kind["optional"]}
        if unknown := sorted(set(raw) - allowed):
            raise _error(source, f"{path}.{unknown[0]}",
                         f"unknown field; expected one of: {', '.join(sorted(allowed))}")
    for key in (kind["name"], kind["query"]):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _error(source, f"{path}.{key}", f"must be a non-empty string (got {raw.get(key)!r})")
    found = PromQuery(name=raw[kind["name"]].strip(), query=raw[kind["query"]].strip(), profile=profile,
                      **{key: raw[key] for key in kind["optional"] if key in raw})
    if kind is ALERT_PROFILE:
        found.severity, found.description = str(raw.get("severity") or "warning").lower(), found.name
    return _checked(source, path, found)


def _checked(source: str, path: str, found: PromQuery) -> PromQuery:
    for key, allowed in (("aggregate", AGGREGATES), ("unit", UNITS), ("rule", RULES), ("severity", SEVERITIES)):
        if getattr(found, key) and getattr(found, key) not in allowed:
            raise _error(source, f"{path}.{key}", f"must be one of: {', '.join(a for a in allowed if a)} "
                                                  f"(got {getattr(found, key)!r})")
    for key in ("max", "min"):
        value = getattr(found, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise _error(source, f"{path}.{key}", f"must be a number (got {value!r})")
    return found


def parse_queries(source: str, key: str, value: Any) -> list[PromQuery]:
    """`figures:` or `checks:` (key): a list of entries, or {profile: FILE}, a kube-burner profile as is."""
    if value is None:
        return []
    profile = ""
    if isinstance(value, dict):
        if set(value) != {"profile"}:
            raise _error(source, key, "must be a list of entries, or {profile: FILE} (a kube-burner "
                                      f"{'metrics' if key == 'figures' else 'alert'} profile)")
        profile, value = _profile_entries(source, key, value["profile"])
    if not isinstance(value, list):
        raise _error(source, key, f"must be a list of entries, or {{profile: FILE}} (got {type(value).__name__})")
    kind = {("figures", False): PLAN_FIGURE, ("checks", False): PLAN_CHECK,
            ("figures", True): METRICS_PROFILE, ("checks", True): ALERT_PROFILE}[key, bool(profile)]
    where = f"{key} ({profile})" if profile else key
    found = [_entry(source, f"{where}[{i}]", raw, kind, profile) for i, raw in enumerate(value)]
    names: set[str] = set()
    for i, entry in enumerate(found):
        if entry.name in names:
            raise _error(source, f"{where}[{i}].name", f"{entry.name!r} names two entries; each needs its own name")
        names.add(entry.name)
        if key == "checks" and not entry.alert and entry.max is None and entry.min is None:
            raise _error(source, f"{where}[{i}]", f"check {entry.name!r} needs a threshold: max, min or both")
    return found


@dataclass
class PromqlPlan:
    """What a plan asks of Prometheus (the plan's `prometheus`, `figures` and `checks`)."""

    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    figures: list[PromQuery] = field(default_factory=list)
    checks: list[PromQuery] = field(default_factory=list)


def parse(source: str, data: dict[str, Any]) -> PromqlPlan:
    """The three sections together: figures and checks need the Prometheus that answers them."""
    found = PromqlPlan(parse_settings(source, data.get("prometheus")),
                       parse_queries(source, "figures", data.get("figures")),
                       parse_queries(source, "checks", data.get("checks")))
    if (found.figures or found.checks) and not found.prometheus.enabled:
        key = "figures" if found.figures else "checks"
        raise _error(source, key, "PromQL needs a Prometheus: add `prometheus: {enabled: true}`")
    return found

