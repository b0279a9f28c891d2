"""The roll's section of a step (run/roll.py, measure/availability.py): a rolling upgrade, or a restart of the
apiservers on the same version, during the step's window, and what the availability probe saw through it.

Step keys (results.json), in seconds since the window opened unless named:

    roll: RollResult or null: a rolling upgrade during this step's window (`loadtest rehearse --rolling`):
        the instances replaced (marks), the availability probe second by second (seconds), the thresholds;
        the verdicts are derived (analysis/roll.py)
    restart: RollResult or null: the step's apiservers restarted on the same version in its window
        (steps[].restart_apiserver_at_s): a roll of the apiservers only, without the availability probe
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RollMark:
    """One instance a rolling upgrade replaced, in seconds since the step's window opened: when it left the
    load balancer's rotation (an apiserver; the others when they were stopped), when it answered as ready on
    its new version, and when it was back in rotation."""

    instance: str
    version: str
    out_at_s: float
    ready_at_s: float
    back_at_s: float
    stop_s: float  # SIGTERM until it exited (finishing its requests, closing its watches)
    start_to_ready_s: float  # started on the new version until /readyz (/healthz) answered
    # the new process's peak resident set from its start to the window's close (the kernel's VmHWM, read at the
    # close); None: not read (an older file, or no /proc)
    peak_rss_bytes: int | None = None

    @property
    def stop_to_ready_s(self) -> float:
        return self.stop_s + self.start_to_ready_s

@dataclass
class ProbeSecond:
    """One second of the availability probe: its requests sent in that second, those served (2xx), the slowest
    answered one (of so few a second, the p99 is the maximum), and the others by code ("503", "connection")."""

    t: int  # whole seconds since the window opened
    sent: int
    served: int
    slowest_s: float | None = None  # None: no request of this second was answered
    failed: dict[str, int] = field(default_factory=dict)

@dataclass
class RollResult:
    """A rolling upgrade during a step (`loadtest rehearse --rolling`): what was replaced when, and what the
    availability probe saw through it, second by second; the verdicts are derived (analysis/roll.py)."""

    from_version: str
    to_version: str
    started_at_s: float  # into the window: the steady seconds before it are the step's steady range
    finished_at_s: float | None = None  # the last instance back in rotation; None: the roll did not finish
    marks: list[RollMark] = field(default_factory=list)
    seconds: list[ProbeSecond] = field(default_factory=list)
    probe: str = ""  # what one probe request is, e.g. "GET /api/v1/namespaces/default through the load balancer"
    probe_qps: float = 0.0
    hosts_ready: dict[str, float] = field(default_factory=dict)  # apiserver -> share of seconds /readyz answered
    thresholds: dict[str, float] = field(default_factory=dict)  # availability_pct, recovery_s (the plan's)
    error: str | None = None  # why the roll stopped before its last instance
    notes: list[str] = field(default_factory=list)

@dataclass
class RollSection:
    """A change to the control plane while the window measured (None: none)."""

    roll: RollResult | None = None  # a rolling upgrade during this step's window
    # the step's apiservers restarted on the same version in its window (steps[].restart_apiserver_at_s): a roll
    # of the apiservers only, without the availability probe, and none of a roll's verdicts
    restart: RollResult | None = None
