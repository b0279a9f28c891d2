"""Which step comes next: the plan's own steps in order, or a capacity search that grows the fleet until the
control plane stops holding, then narrows the range to the breaking point.

A step "held" when it was not saturated (nodes Ready and pods Running within its budget) and no SLO failed.
The summary (largest scale that held, the first that did not, and what broke there) is computed from the
results alone, so a report can say it too.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Protocol

from loadtests.analysis.slo import step_verdicts, thresholds
from loadtests.config.plan import Plan, Step
from loadtests.errors import PlanError
from loadtests.results import RunResult, StepResult


def step_failures(step: StepResult, limits: dict[str, Any]) -> list[str]:
    """What did not hold at a step, in words (empty: it held): saturation, an SLO, and for a phase of
    ClusterLoader2's load the scheduler's throughput and objects whose controllers were not done in time."""
    if step.status == "saturated":
        return [f"{step.saturation.get('condition', 'did not converge')}: {step.saturation.get('evidence', '')}"]
    failed = [f"{v.slo} p99 {v.value_s:.3f} s > {v.threshold_s:g} s" for v in step_verdicts(step, limits)
              if v.passed is False]
    scheduling = step.scheduling
    if scheduling is not None and scheduling.passed is False:
        failed.append(f"scheduler throughput at best {scheduling.max:g} pods/s < {scheduling.threshold:g} pods/s")
    failed += [f"{c.unfinished} {kind} generation(s) not done when the window closed "
               f"({', '.join(c.unfinished_named[:3])})" for kind, c in sorted(step.controlled.items()) if c.unfinished]
    return failed


class StepChooser(Protocol):
    def first(self) -> Step | None: ...

    def next(self, done: StepResult, held: bool) -> Step | None: ...


class PlannedSteps:
    """The plan's steps in order; the run stops growing after a step that saturated."""

    def __init__(self, plan: Plan) -> None:
        self.steps = plan.steps

    def first(self) -> Step | None:
        return self.steps[0] if self.steps else None

    def next(self, done: StepResult, held: bool) -> Step | None:
        if done.status == "saturated" or done.index + 1 >= len(self.steps):
            return None
        return self.steps[done.index + 1]


class CapacitySearch:
    """Grow from the plan's first step until a step does not hold or max_nodes is reached, then bisect
    between the largest scale that held and the smallest that did not."""

    def __init__(self, plan: Plan, max_nodes: int | None = None) -> None:
        settings = plan.capacity
        self.template = plan.steps[0]
        self.max_nodes = max_nodes if max_nodes is not None else settings.max_nodes
        self.resolution = settings.resolution
        if self.max_nodes < self.template.nodes:
            raise PlanError(f"--max-nodes {self.max_nodes} is below the plan's first step "
                            f"({self.template.nodes} nodes); give a larger one")
        self.sizes = [s.nodes for s in plan.steps]
        if settings.growth is None and len(self.sizes) < 2:
            raise PlanError(f"{plan.source}: capacity: a capacity search needs a growth rule: set capacity.growth "
                            "(e.g. 1.5) or give the plan two or more growing steps")
        if settings.growth is None and any(b <= a for a, b in zip(self.sizes, self.sizes[1:], strict=False)):
            raise PlanError(f"{plan.source}: steps: a capacity search grows along steps whose nodes increase")
        self.explicit_growth = settings.growth
        self.growth = settings.growth or self.sizes[-1] / self.sizes[-2]
        self.held: int | None = None
        self.failed: int | None = None

    def step(self, nodes: int) -> Step:
        step = copy.deepcopy(self.template)
        step.nodes, step.name = nodes, f"{nodes} nodes"
        return step

    def first(self) -> Step | None:
        return self.step(self.template.nodes)

    def _grown(self, nodes: int) -> int:
        """The next scale up: the plan's next larger step, or `growth` times this one."""
        planned = [n for n in self.sizes if n > nodes] if self.explicit_growth is None else []
        return planned[0] if planned else max(nodes + 1, math.ceil(nodes * self.growth))

    def next(self, done: StepResult, held: bool) -> Step | None:
        nodes = done.nodes
        if held:
            self.held = max(self.held or 0, nodes)
        else:
            self.failed = min(self.failed or nodes, nodes)
        if self.failed is None:
            if nodes >= self.max_nodes:
                return None
            return self.step(min(self.max_nodes, self._grown(nodes)))
        if self.held is None:
            return None  # the first scale did not hold: there is nothing to narrow
        gap = self.failed - self.held
        if gap <= max(1, math.ceil(self.resolution * self.held)):
            return None
        return self.step(self.held + gap // 2)


@dataclass
class CapacitySummary:
    held: int | None  # the largest scale where every SLO held and the step converged
    failed: int | None  # the smallest scale that did not hold
    cause: list[str]  # what broke at `failed`
    max_nodes: int | None = None
    judged: tuple[int, int] | None = None  # SLO checks judged at `held`, of all there: "held" rests on those only
    aborted: str | None = None  # why the search stopped before it finished (a component died, a signal, ...)

    @property
    def judged_text(self) -> str:
        """" (3 of 11 SLO checks judged there)" where some had too few samples to judge; "" where all were."""
        if self.judged is None or self.judged[0] == self.judged[1]:
            return ""
        return f" ({self.judged[0]} of {self.judged[1]} SLO checks judged there; the others had too few samples)"

    def line(self) -> str:
        """The search's last line: its answer, or, for a search that did not finish, that it did not and what
        the steps before the abort found (never the limit it did not reach)."""
        if self.aborted is not None:
            return self._aborted_line()
        if self.held is None and self.failed is not None:
            return f"no scale held: at {self.failed:,} nodes (the first step): {'; '.join(self.cause)}"
        if self.failed is None:
            limit = (f" (the search stopped at its limit of {self.max_nodes:,} nodes; no breaking point below it)"
                     if self.max_nodes else "")
            return f"largest scale where every SLO held: {self.held or 0:,} nodes{self.judged_text}{limit}"
        return (f"largest scale where every SLO held: {self.held or 0:,} nodes{self.judged_text}; at "
                f"{self.failed:,}: {'; '.join(self.cause)}")


    def _aborted_line(self) -> str:
        head = f"the search did not finish ({self.aborted})"
        if self.held is None and self.failed is None:
            return f"{head}: no step finished, so no scale is known to hold"
        held = (f"the largest scale where every SLO held was {self.held:,} nodes{self.judged_text}" if self.held
                else "no step held")
        failed = f"; at {self.failed:,}: {'; '.join(self.cause)}" if self.failed is not None else ""
        return f"{head}; before it stopped, {held}{failed}"


def summarize(run: RunResult, max_nodes: int | None = None) -> CapacitySummary:
    """From the results alone: the largest scale held, the first that did not, and why."""
    limits = thresholds(run)
    held = [s.nodes for s in run.steps if not step_failures(s, limits)]
    failed = [s for s in run.steps if step_failures(s, limits)]
    first_failed = min(failed, key=lambda s: s.nodes) if failed else None
    judged = None
    if held:
        largest = max((s for s in run.steps if s.nodes == max(held) and not step_failures(s, limits)),
                      key=lambda s: s.index)
        found = [v for v in step_verdicts(largest, limits) if v.count > 0]  # SLOs with no request: none to judge
        judged = (sum(v.passed is not None for v in found), len(found))
    aborted = (run.error or "aborted") if run.status == "aborted" else None
    return CapacitySummary(held=max(held) if held else None, failed=first_failed.nodes if first_failed else None,
                           cause=step_failures(first_failed, limits) if first_failed else [],
                           max_nodes=None if aborted else max_nodes, judged=judged, aborted=aborted)
