"""The apiserver's audit log for a run: the policy the harness writes, the flags that turn it on, and the check
that its destination takes files before anything starts.

Metadata level (who, what, when, how long, which code; never a request or response body, so no secret reaches
the log), one event per request: RequestReceived is omitted, a watch is recorded when it starts
(ResponseStarted) and when it ends. Health, metrics and discovery endpoints are left out: they are the
harness's own polling and say nothing about who loads the control plane. The log is size-bounded and rotated
(`--audit-log-maxsize`, `--audit-log-maxbackup`), so a long run cannot fill the disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtests.errors import EnvironmentProblem, LoadTestError, PlanError

AUDIT_LOG = "audit.log"
POLICY_FILE = "audit-policy.yaml"

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
omitManagedFields: true
rules:
  # the harness's health and metrics polling, and discovery: not load, and not who is expensive
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/metrics", "/version", "/openapi/*", "/api", "/api/*",
                      "/apis", "/apis/*"]
  # every resource request: who sent it, verb, resource, scope, latency, response code
  - level: Metadata
"""


@dataclass(frozen=True)
class AuditLog:
    """Where the apiserver writes its audit log, and how much of it is kept."""

    directory: Path
    max_size_mb: int = 200
    max_backups: int = 4

    @property
    def path(self) -> Path:
        return self.directory / AUDIT_LOG

    def instance_path(self, instance: str, first: bool) -> Path:
        """Where one apiserver of several writes its log: the first where a single one would, each other in
        a folder of its own (a log and its rotations are one apiserver's, as the reader expects)."""
        return self.path if first else self.directory / instance / AUDIT_LOG

    def apiserver_flags(self, path: Path | None = None) -> list[str]:
        """Write the policy next to the log and return the kube-apiserver flags that use both (the log at
        `path`, by default the single apiserver's)."""
        policy = self.directory / POLICY_FILE
        policy.write_text(POLICY)
        path = path or self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={path}",
            "--audit-log-format=json",
            # blocking: every event is written before the request ends, none dropped under load (a batch
            # buffer drops events when full, and the counts must match the load's own)
            "--audit-log-mode=blocking",
            f"--audit-log-maxsize={self.max_size_mb}",
            f"--audit-log-maxbackup={self.max_backups}",
        ]


def audit_destination(configured: str | None, run_folder: Path) -> Path:
    """The folder the audit log goes to: the plan's `audit.dir`, or the run folder's `audit/`.

    Checked before anything starts: a missing or unwritable destination is one line, and the run does not start.
    """
    if configured is None:
        directory = run_folder / "audit"
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise EnvironmentProblem(f"cannot create the audit log folder {directory} ({error.strerror}); "
                                     "free the disk or set audit.enabled: false in the plan") from None
    else:
        directory = Path(configured).expanduser()
        if not directory.is_dir():
            raise PlanError(f"audit.dir {directory}: no such folder; create it, or drop audit.dir to keep the "
                            "audit log in the run folder")
    # a folder the plan names is the user's to fix (bad input); the run's own folder failing is the machine's
    problem: type[LoadTestError] = EnvironmentProblem if configured is None else PlanError
    probe = directory / ".write-check"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise problem(f"audit log folder {directory} does not take files ({error.strerror}); choose another "
                      "audit.dir or set audit.enabled: false in the plan") from None
    return directory
