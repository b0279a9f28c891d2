"""Pure functions of results and kept /metrics pages: the exposition arithmetic (metrics.py), server and etcd
figures, SLO verdicts, the figures a report draws, projections, statistics, the noise floor. Nothing here
opens a connection or starts a process, so `loadtest report` recomputes all of it from a run folder."""
