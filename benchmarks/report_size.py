"""How much a run report weighs, and what carrying its results and its comparison card adds.

Builds the report of a recorded run (default: the default plan's, benchmarks/results/raw/plan_default/run-1)
and measures the page and its parts: plotly.js (embedded once so the page opens offline), the results the page
carries (results.embedded), the comparison card and the script that compares with a dropped report. "Without"
is the page less those three parts: what the report weighed before it carried them. Writes
benchmarks/results/report_size.md and its raw sizes.
"""

from __future__ import annotations

import gzip
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.markdown import RAW_DIR, keep_raw, results_head, write_results  # noqa: E402
from benchmarks.recorded import chosen_raw_run, raw_run_folder  # noqa: E402
from loadtests import results  # noqa: E402
from loadtests.report.html import write_report  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "report_size.md"
PARTS = {  # part -> the element that holds it
    "plotly.js": r'<script id="plotly-js">.*?</script>',
    "results carried": r'<script type="application/json" id="loadtest-results">.*?</script>',
    "comparison section (its card and script included)": r'<section id="compare-section">.*?</section>',
    "of which the comparison card": r'<script type="application/json" id="loadtest-compare-card">.*?</script>',
}


def measure(raw_run: Path) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = raw_run_folder(raw_run, Path(tmp) / "run")
        html = write_report(folder).read_text(encoding="utf-8")
        sizes = {"results.json": len((folder / results.RESULTS_FILE).read_bytes())}
    sizes["page"] = len(html.encode())
    sizes["page gzipped"] = len(gzip.compress(html.encode()))
    for part, pattern in PARTS.items():
        sizes[part] = sum(len(m.group(0).encode()) for m in re.finditer(pattern, html, re.S))
    added = ("results carried", "comparison section (its card and script included)")
    sizes["page without them"] = sizes["page"] - sum(sizes[p] for p in added)
    return sizes


def main() -> int:
    raw_run = chosen_raw_run(__doc__.splitlines()[0], RAW_DIR / "plan_default" / "run-1.json.gz")
    sizes = measure(raw_run)
    keep_raw("report_size.json.gz", {"run": str(raw_run), "sizes": sizes})
    shown = raw_run.resolve().relative_to(Path(__file__).resolve().parent.parent)
    lines = results_head("The run report's size", f"the report of the recorded run {shown}",
                         ".venv/bin/python benchmarks/report_size.py", ["part", "bytes", "share"])
    for part, size in sizes.items():
        lines.append(f"| {part} | {size:,} | {size / sizes['page']:.1%} |")
    lines += ["", f"Carrying the results and the comparison section took the page from "
                  f"{sizes['page without them']:,} to {sizes['page']:,} bytes "
                  f"(+{sizes['page'] / sizes['page without them'] - 1:.1%}); plotly.js is most of any page.",
              "", "Raw sizes: benchmarks/results/raw/report_size.json.gz."]
    write_results(RESULTS, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
