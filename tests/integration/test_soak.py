"""`loadtest soak` on a real control plane: a planted leak (ConfigMaps created and never deleted) is judged to grow
on etcd's database and keys within a short soak, every series is on disk as it was sampled, and the harness's and
the load generator's own rows are measured beside the components'."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from loadtests.errors import EXIT_SLO_FAILED
from loadtests.results.soak import load_meta, load_samples
from tests.cli import loadtest

LEAK_PLAN = {
    "name": "soak-leak",
    "target": {"kind": "local"},
    "steps": [{"nodes": 3, "pods_per_node": 1, "warmup_s": 1, "duration_s": 30}],
    "measure": {"profiles": False, "audit": False},
    # the leak: 20 ConfigMaps of 4 kB a second whose lifetime outlasts the soak (the scenario removes them at its end)
    "load": {"scenarios": {"objects": {"rate": 20, "users": 1, "lifetime_s": 100000, "templates": [
        {"template": "configmap.yaml", "replicas": 1, "input_vars": {"size": 4000}}]}}},
}
SOAK_HOURS = "0.0125"  # 45 s
INTERVAL_S = "2"


def test_a_planted_leak_is_judged_to_grow(bins, tmp_path: Path) -> None:
    plan = tmp_path / "leak.yaml"
    plan.write_text(yaml.safe_dump(LEAK_PLAN))
    out = tmp_path / "soak"
    started = time.monotonic()
    result = loadtest("soak", "--plan", str(plan), "--hours", SOAK_HOURS, "--interval-s", INTERVAL_S,
                      "--out", str(out), timeout=240)
    took = time.monotonic() - started
    said = result.stdout + result.stderr
    assert result.returncode == EXIT_SLO_FAILED, said[-3000:]
    grown = [line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("GROWS ")]
    # the keys grow with every ConfigMap; etcd's database grows in its in-use bytes, its file in steps of bbolt's
    # pages (in 45 s sometimes too few steps for a verdict): either of the two sizes, judged to grow
    assert "etcd.keys" in grown and {"etcd.db_in_use_bytes", "etcd.db_size_bytes"} & set(grown), said[-3000:]
    assert "min left" in result.stdout  # progress with the time left
    assert "shorter than an hour" in result.stdout  # and that it is too short to call a growth a leak
    samples = load_samples(out)
    assert len(samples) >= 15, len(samples)  # every sample on disk, about one every 2 s over 45 s
    meta = load_meta(out)
    assert meta.etcd_quota_bytes and meta.etcd_quota_bytes > 0  # etcd says its quota on its page
    last = samples[-1].values
    for row in ("harness.rss_bytes", "loadgen.rss_bytes", "kube-apiserver.rss_bytes", "etcd.db_size_bytes",
                "harness.python_blocks"):
        assert (last.get(row) or 0) > 0, row  # measured, the harness's and the load generator's among them
    junit = (out / "junit.xml").read_text()
    assert 'classname="soak" name="etcd.keys"' in junit and (out / "soak.html").is_file()
    print(f"soak test: {took:.1f} s; grew: {', '.join(grown)}")
