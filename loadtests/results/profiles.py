"""The profiles' section of a step (measure/profiles.py): pprof profiles of kube-apiserver and etcd.

Step keys (results.json):

    profiles: list of ComponentProfile, pprof profiles of kube-apiserver and etcd (absent in older files; empty:
        not profiled): component, kind ("cpu" over the window, "heap" at its close), files (the raw profiles,
        relative to the run folder), sample_type and unit, total, offset_s and seconds (which seconds of the
        window), functions [{name, flat_pct, cum_pct}] and groups [{group, flat_pct, cum_pct}] in % of total
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ProfileFunction:
    """One function of a pprof profile: its own share (flat: samples where it was running) and its share with
    what it called (cum), each in % of the profile's total."""

    name: str
    flat_pct: float
    cum_pct: float

@dataclass
class ProfileGroup:
    """A group of functions (serialisation, watch cache, GC, ...; analysis/profiles.GROUPS): flat_pct are the
    samples whose innermost grouped frame is one of the group's, so the groups and "other" add up to 100;
    cum_pct the samples with any frame of the group on their stack (groups overlap there)."""

    group: str
    flat_pct: float
    cum_pct: float

@dataclass
class ComponentProfile:
    """A pprof profile of one component over the step's window (CPU) or at its close (heap), kept raw in the
    step's folder (files: paths relative to the run folder, gzipped protobuf as served: `go tool pprof` opens
    them), with its top functions and groups computed when the step was gathered."""

    component: str  # the instance: kube-apiserver (kube-apiserver-2 of several), etcd
    kind: str  # "cpu" | "heap"
    files: list[str] = field(default_factory=list)
    sample_type: str = ""  # the profile's value summed: "cpu" (nanoseconds), "inuse_space" (bytes)
    unit: str = ""
    total: float | None = None  # the sum of that value over every sample (CPU: nanoseconds on a CPU)
    offset_s: float | None = None  # seconds after the window opened that the profile began (heap: was taken)
    seconds: float | None = None  # seconds profiled (CPU); None for a heap profile
    functions: list[ProfileFunction] = field(default_factory=list)  # by flat share, largest first
    groups: list[ProfileGroup] = field(default_factory=list)  # by flat share, largest first; "other" included

@dataclass
class ProfilesSection:
    """The step's profiles (empty: not profiled; absent in older files)."""

    # pprof profiles of kube-apiserver and etcd (empty: not profiled; absent in older files)
    profiles: list[ComponentProfile] = field(default_factory=list)
