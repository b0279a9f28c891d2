"""Recorded noise floors for comparison tests: measured from repeats of the sample run, as the benchmark does."""

from __future__ import annotations

import json
from pathlib import Path

from loadtests.analysis import noise
from loadtests.analysis.noise import NoiseFloor
from loadtests.analysis.samples import load_side
from tests.unit.reportdata import repeated_run

# five runs of one build whose latencies differ by up to 1.04 / 0.96 - 1 = 8 % (everything else identical): a
# floor of +22.9 % (a second run may be that far above a first, stats.prediction_ratio)
NOISE_RUNS = (0.96, 0.98, 1.0, 1.02, 1.04)
# and five whose latencies differ by up to 22 %: a floor of +67.6 %
WIDE_NOISE_RUNS = (0.9, 0.95, 1.0, 1.05, 1.1)


def recorded_floor(folder: Path, factors: tuple[float, ...] = NOISE_RUNS) -> NoiseFloor:
    """The noise floor of repeats of the sample whose latencies are scaled by `factors` (plan "default")."""
    side = load_side(repeated_run(folder, factors), "noise")
    return noise.measure(side, date="2026-12-01", machine="8 cores (recorded)", command="recorded repeats")


def floor_file(folder: Path, factors: tuple[float, ...] = NOISE_RUNS) -> Path:
    """That noise floor written as the JSON `loadtest compare` reads (for LOADTEST_NOISE_FLOOR)."""
    path = folder / "noise_floor.json"
    path.write_text(json.dumps(recorded_floor(folder / "runs", factors).to_dict(), indent=1))
    return path
