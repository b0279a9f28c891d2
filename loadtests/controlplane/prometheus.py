"""A real Prometheus beside a local control plane for one run (`prometheus: {enabled: true}`).

It scrapes every component the harness's own probes read (each apiserver, each etcd member, each scheduler and
controller-manager, kwok) over loopback, with the cluster's admin client certificate (its files in the
cluster's folder, mode 0600), and listens on loopback only. It is a component of the run like the others: started
and waited for before the first step, health-checked through every phase (a Prometheus that dies ends the run as
any component that died), stopped and reaped before the control plane goes. Its TSDB is kept compressed in the
run folder (TSDB_ARCHIVE), so `prometheus --storage.tsdb.path` or Grafana can open it later."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from loadtests.binaries.prometheus import PrometheusBinaries
from loadtests.config.promql import PrometheusSettings
from loadtests.config.topology import component_of
from loadtests.controlplane.base import TargetInfo
from loadtests.controlplane.health import HealthCheck, endpoint_check
from loadtests.controlplane.processes import LOOPBACK, ClusterState, ProcessGroup, free_ports, http_ok, wait_for
from loadtests.errors import TargetError

COMPONENT = "prometheus"
FOLDER = "prometheus"  # in the run folder: its configuration, credentials, log, and the kept TSDB
TSDB_ARCHIVE = "tsdb.tar.gz"
READY_TIMEOUT_S = 60.0
QUERY_TIMEOUT_S = 30.0

Sample = tuple[dict[str, str], float]


def scrape_targets(info: TargetInfo) -> dict[str, dict[str, str]]:
    """job (component) -> instance -> /metrics URL: what the harness's own probes scrape, kwok too."""
    apiservers = info.apiservers or {"kube-apiserver": info.access.server.rstrip("/")}
    jobs: dict[str, dict[str, str]] = {"kube-apiserver": {name: f"{url.rstrip('/')}/metrics"
                                                          for name, url in apiservers.items()}}
    members = info.etcd_members or ({"etcd": info.etcd_metrics_url} if info.etcd_metrics_url else {})
    if members:
        jobs["etcd"] = dict(members)
    for instance, url in info.metrics_urls.items():
        jobs.setdefault(component_of(instance), {})[instance] = url
    return jobs


def _scrape_config(job: str, instance: str, url: str, interval_s: float, tls: dict[str, Any]) -> dict[str, Any]:
    parsed = urllib.parse.urlsplit(url)
    found: dict[str, Any] = {
        "job_name": f"{job}/{instance}", "scheme": parsed.scheme, "metrics_path": parsed.path or "/metrics",
        "scrape_interval": f"{round(interval_s * 1000)}ms",
        "scrape_timeout": f"{round(min(interval_s, 10.0) * 1000)}ms",
        "static_configs": [{"targets": [parsed.netloc], "labels": {"instance": instance, "component": job}}],
        # the job label is the component's, whatever the instance: queries say job="kube-apiserver"
        "relabel_configs": [{"target_label": "job", "replacement": job}],
    }
    if parsed.scheme == "https":
        found["tls_config"] = tls
    return found


def config(info: TargetInfo, settings: PrometheusSettings, credentials: dict[str, str]) -> dict[str, Any]:
    """prometheus.yml: a scrape job per instance (its own scheme), all at the plan's interval. The apiservers'
    serving certificates are verified against the cluster's CA, as the harness's own scrapes verify them; the
    scheduler's and controller-manager's are self-signed on loopback (as the harness's health checks treat them),
    so they are not. The client certificate is the cluster's admin one, as the harness's own scrapes present."""
    unverified = {"insecure_skip_verify": True, **credentials}
    verified = {"ca_file": info.access.ca_file, **credentials} if info.access.ca_file else unverified
    jobs = scrape_targets(info)
    interval = f"{round(settings.scrape_interval_s * 1000)}ms"
    return {"global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [_scrape_config(job, instance, url, settings.scrape_interval_s,
                                              verified if job == "kube-apiserver" else unverified)
                               for job, instances in jobs.items() for instance, url in instances.items()]}


def epoch_of(stamp: str) -> float | None:
    """Prometheus's RFC 3339 time (nanoseconds, Z or an offset) in epoch seconds; None for its zero time."""
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp or "")
    if match is None or stamp.startswith("0001-"):
        return None
    whole = datetime.fromisoformat(match[1] + ("+00:00" if match[3] == "Z" else match[3]))
    return whole.timestamp() + float(f"0.{match[2] or '0'}")


class RunPrometheus:
    """The run's Prometheus: started beside the control plane, asked PromQL, stopped and its TSDB kept."""

    def __init__(self, binaries: PrometheusBinaries, settings: PrometheusSettings, run_dir: Path) -> None:
        self.binaries, self.settings = binaries, settings
        self.folder = run_dir / FOLDER
        self.data = self.folder / "data"
        self.port = 0
        self.group: ProcessGroup | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, info: TargetInfo) -> None:
        """Write its configuration and credentials, start it and wait until it is ready."""
        self.folder.mkdir(parents=True, exist_ok=True)
        # the cluster's own files (mode 0600, in its folder): nothing secret is copied into the run folder
        credentials = {key: path for key, path in (("cert_file", info.access.cert_file),
                                                   ("key_file", info.access.key_file)) if path}
        (self.folder / "prometheus.yml").write_text(yaml.safe_dump(config(info, self.settings, credentials)))
        self.port = free_ports(1)[0]
        state = ClusterState(name=COMPONENT, directory=str(self.folder), tied_to_owner=True)
        self.group = ProcessGroup(state, self.folder)
        record = self.group.start(COMPONENT, [
            str(self.binaries.prometheus), f"--config.file={self.folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data}", f"--web.listen-address={LOOPBACK}:{self.port}",
            "--storage.tsdb.retention.time=30d", "--log.level=warn"])
        wait_for(lambda: http_ok(f"{self.url}/-/ready"), READY_TIMEOUT_S, f"{COMPONENT} ready",
                 abort=lambda: self.group.exited(record) if self.group else None)

    def health_checks(self) -> list[HealthCheck]:
        if self.group is None or not self.group.state.processes:
            return []
        record = self.group.state.processes[0]
        return [endpoint_check(COMPONENT, record, f"{self.url}/-/healthy", "its /-/healthy",
                               exit_reason=self.group.exit_reason)]

    def pids(self) -> dict[str, list[int]]:
        """Its process, for the process sampler: its CPU and memory are a row of each step like every
        component's (what running it costs the machine)."""
        return self.group.state.pids() if self.group is not None else {}

    def dead(self) -> list[str]:
        if self.group is None:
            return []
        return [COMPONENT for record in self.group.state.processes if not record.alive()]

    def api(self, path: str, **params: str) -> Any:
        """One answer of Prometheus's HTTP API (its `data`), or a TargetError with Prometheus's own words."""
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=QUERY_TIMEOUT_S) as response:  # noqa: S310 - loopback
                body = json.loads(response.read())
        except urllib.error.HTTPError as error:
            try:
                body = json.loads(error.read())
            except ValueError:
                raise TargetError(f"{COMPONENT} /api/v1/{path}: HTTP {error.code}") from None
        except (OSError, ValueError) as error:
            raise TargetError(f"{COMPONENT} /api/v1/{path}: {error}") from None
        if body.get("status") != "success":
            raise TargetError(f"{COMPONENT}: {body.get('errorType', 'error')}: {body.get('error', body)}")
        return body["data"]

    def query(self, expr: str, at: float) -> list[Sample]:
        """An instant query at `at` (epoch seconds): each series' labels and value (a scalar as one series)."""
        data = self.api("query", query=expr, time=f"{at:.3f}")
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise TargetError(f"{COMPONENT}: {expr!r} gives a {data['resultType']}, not an instant vector")
        return [(item["metric"], float(item["value"][1])) for item in data["result"]]

    def scrape_times(self, at: float, seconds: float) -> dict[str, list[float]]:
        """Each target (job/instance) -> when each of its scrapes in the `seconds` before `at` began."""
        data = self.api("query", query=f"up[{max(1, round(seconds * 1000))}ms]", time=f"{at:.3f}")
        return {f"{item['metric'].get('job', '')}/{item['metric'].get('instance', '')}":
                [float(t) for t, _ in item["values"]] for item in data["result"]}

    def last_scrapes(self) -> dict[str, float]:
        """Each active target (its job_name) -> when its last finished scrape began (epoch seconds)."""
        found = {}
        for target in self.api("targets", state="active")["activeTargets"]:
            began = epoch_of(target.get("lastScrape", ""))
            if began is not None:
                found[target["scrapePool"]] = began
        return found

    def stop(self) -> str | None:
        """Stop and reap it, then keep its TSDB as one compressed file; where it is, or None if it never ran."""
        if self.group is None:
            return None
        self.group.stop_all()
        self.group = None
        if not self.data.exists():
            return None
        archive = self.folder / TSDB_ARCHIVE
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(self.data, arcname="data")
        shutil.rmtree(self.data)
        return str(archive)
