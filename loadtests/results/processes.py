"""The processes' section of a step (measure/processes.py): CPU and memory per component and the machine's CPU.

Step keys (results.json), CPU in % of one core (100 = one core) and seconds, memory in bytes:

    processes: list of ProcessStat (CPU and RSS per component, for the load generator (loadgen: the Locust
        processes) and for the harness's own process (harness: its own CPU, not its children's; absent in
        older files))
    machine_cpu_percent, machine_cpu_seconds: the whole machine's busy CPU (psutil.cpu_times(), all cores,
        100 = one core) over the same interval as processes, so the rows can be set against it (null in older
        files)
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A process this busy (100 = one core) is the limit of what it drives, not the control plane: a Locust worker,
# the harness (one Python process), the load generator's processes each
CPU_BOUND_PERCENT = 90.0

@dataclass
class ProcessStat:
    """CPU and memory of one process (or process group) over the step, measured with psutil."""

    component: str
    cpu_percent: float  # average over the step, 100 = one full core
    cpu_seconds: float
    rss_max_bytes: int
    rss_end_bytes: int
    pids: list[int] = field(default_factory=list)

@dataclass
class ProcessesSection:
    """The components' and the machine's CPU over the step (empty, None: not measured)."""

    processes: list[ProcessStat] = field(default_factory=list)
    # the machine's CPU over the same interval as processes (None: not measured, e.g. older results)
    machine_cpu_percent: float | None = None
    machine_cpu_seconds: float | None = None
