"""The registry of a step's sections, in the order results.json writes them after the step's frame.

A new section is a module of this package (its dataclass, whose fields are the step keys it owns, and the
docstring saying what they hold) and one line here. Raise a section's version when its layout changes, and give
it a loader that reads the older layouts too (schema.Section).
"""

from __future__ import annotations

from loadtests.results import (
    apiserver,
    audit,
    controlled,
    etcd,
    fidelity,
    flow_control,
    health,
    loadgen,
    objects,
    processes,
    profiles,
    promql,
    roll,
    scheduling,
    watchers,
)
from loadtests.results.schema import Registry, Section

SECTIONS = Registry(
    Section("loadgen", loadgen.LoadgenSection),
    Section("apiserver", apiserver.ApiserverSection),
    Section("flow_control", flow_control.FlowControlSection),
    Section("objects", objects.ObjectsSection),
    Section("etcd", etcd.EtcdSection),
    Section("watchers", watchers.WatchersSection),
    Section("controlled", controlled.ControlledSection),
    Section("scheduling", scheduling.SchedulingSection),
    Section("processes", processes.ProcessesSection),
    Section("health", health.HealthSection),
    Section("audit", audit.AuditSection),
    Section("roll", roll.RollSection),
    Section("profiles", profiles.ProfilesSection),
    Section("replay_fidelity", fidelity.FidelitySection),
    Section("promql", promql.PromqlSection),
)
