"""Measurements of a step: probes started before the load and gathered after it (see probes.StepProbes)."""

from loadtests.measure.probes import StepProbes

__all__ = ["StepProbes"]
