"""Whether a step that was measured was still the breaking point: nodes that turned NotReady during the window
say the control plane did not keep up with its fleet at that scale, whatever the latencies say.

A pure function of the step's recorded health, so the runner decides it when the step ends and
`loadtest report --recompute` decides it again from results.json alone. (A step whose ramp never converged is
saturated before it is measured: the runner's evidence of that ramp is not recomputable and stays as recorded.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtests.results import StepResult

# After the last joining node was Ready, a health sample may still have seen it NotReady
JOIN_SETTLE_S = 5.0


@dataclass(frozen=True)
class MeasuredSaturation:
    """The verdict on a measured step: `saturation` ({condition, evidence}) when it was the breaking point,
    and the notes that explain what the nodes joining inside the window account for."""

    saturation: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def while_measured(step: StepResult, cpus: int | None) -> MeasuredSaturation:
    """Judge a measured step by its health summary and samples; `cpus` is the machine's core count (for the
    evidence's CPU figure: the run's environment, not the machine that reads the results)."""
    summary = step.health.summary
    not_ready = summary.nodes_not_ready_max or 0
    joined_s = step.ramp.get("join_s")
    notes: list[str] = []
    if joined_s is not None and not_ready:
        # nodes that join inside the window are NotReady until kwok's first heartbeat: only those
        # NotReady once every joining node was Ready say the control plane fell behind its fleet
        after = [v for sample in step.health.samples if sample.t_s >= joined_s + JOIN_SETTLE_S
                 and (v := sample.values.get("nodes_not_ready")) is not None]
        notes.append(f"nodes NotReady while joining (up to {not_ready:.0f}) are the join itself; after "
                     f"it: up to {max(after, default=0):.0f}")
        not_ready = max(after, default=0)
    if not not_ready:
        return MeasuredSaturation(notes=tuple(notes))
    lag = summary.lease_lag_max_s
    machine = summary.cpu_machine_max
    evidence = (f"up to {not_ready:.0f} nodes NotReady during the window"
                + (f"; oldest Lease renewed {lag:.0f} s late" if lag is not None else "")
                + (f"; machine CPU up to {machine:.0f} % of {100 * (cpus or 1)} %" if machine is not None else ""))
    return MeasuredSaturation({"condition": f"{step.nodes} nodes stayed Ready", "evidence": evidence}, tuple(notes))


def apply(step: StepResult, found: MeasuredSaturation) -> None:
    """Record the verdict on the step (notes once, however often it is decided)."""
    step.notes.extend(note for note in found.notes if note not in step.notes)
    if found.saturation:
        step.status, step.saturation = "saturated", dict(found.saturation)
    elif step.status == "saturated" and step.window:  # decided again from recomputed figures: it held
        step.status, step.saturation = "measured", {}
