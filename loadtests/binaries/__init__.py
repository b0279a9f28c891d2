"""The pinned control-plane binaries: the per-version cache (cache.py), release downloads (download.py), Go
builds (build.py, with progress.py), tried in that order by provide.py."""
