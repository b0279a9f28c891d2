"""How long a local control plane takes to give every fake node its kubelet identity: one client certificate per
node (CN system:node:<node>, O system:nodes) signed by the cluster's CA, all for one shared key
(controlplane/pki.issue_node_certificates, as the target's node_identities issues them).

Each repeat makes a fresh CA in a temporary folder and times the first call for `--nodes` names (the shared key
made, every certificate signed and written), then a second call for the same names (every certificate kept: what a
later step of a growing run pays). No control plane: a few seconds.

    .venv/bin/python benchmarks/node_certs.py [--nodes 5000] [--repeats 3]

Writes benchmarks/results/node_certs.md and benchmarks/results/raw/node_certs.json.gz.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import keep_raw, results_head, write_results  # noqa: E402
from loadtests.controlplane.pki import NODES_FOLDER, Authority, issue_node_certificates  # noqa: E402
from loadtests.kube.objects import node_name  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "node_certs.md"
TARGET_S = 10.0  # what a 5,000-node step may spend on its nodes' identities


def cpu_model() -> str:
    """The processor's model name, as /proc/cpuinfo gives it ("unknown" where it does not)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def one_repeat(names: list[str]) -> dict[str, float]:
    """A fresh CA; the seconds to issue every name's certificate, then to find them all kept."""
    with tempfile.TemporaryDirectory(prefix="node-certs-") as scratch:
        pki = Path(scratch) / "pki"
        Authority(pki)
        started = time.perf_counter()
        issued = issue_node_certificates(pki, pki / NODES_FOLDER, names)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        again = issue_node_certificates(pki, pki / NODES_FOLDER, names)
        kept_s = time.perf_counter() - started
    assert issued == len(names) and again == 0, (issued, again)
    return {"issue_s": first_s, "kept_s": kept_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    names = [node_name(i) for i in range(args.nodes)]
    runs = [one_repeat(names) for _ in range(args.repeats)]
    issue = [r["issue_s"] for r in runs]
    median_s = statistics.median(issue)
    cpus, model = os.cpu_count(), cpu_model()
    keep_raw("node_certs.json.gz", {"nodes": args.nodes, "cpus": cpus, "cpu_model": model, "runs": runs})
    command = f".venv/bin/python benchmarks/node_certs.py --nodes {args.nodes} --repeats {args.repeats}"
    lines = results_head("Node certificates for every fake node", f"CPU: {cpus} x {model}; one process, one thread",
                         command, ["repeat", "certificates", "issued in s", "ms per certificate", "kept, s"])
    lines += [f"| {i + 1} | {args.nodes:,} | {r['issue_s']:.2f} | {1000 * r['issue_s'] / args.nodes:.3f} | "
              f"{r['kept_s']:.3f} |" for i, r in enumerate(runs)]
    verdict = "within" if max(issue) < TARGET_S else "over"
    lines += ["", f"{args.nodes:,} node certificates in {median_s:.2f} s (median of {args.repeats}; "
                  f"{1000 * median_s / args.nodes:.3f} ms each), {verdict} the {TARGET_S:g} s target; a later call "
                  "for the same names issues none and only lists the folder. Each certificate is an ECDSA P-256 "
                  "signature by the cluster's CA over the shared key, written as one 0600 file.",
              "", "Raw figures (every repeat's seconds): benchmarks/results/raw/node_certs.json.gz."]
    write_results(RESULTS, lines)
    return 0 if max(issue) < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
