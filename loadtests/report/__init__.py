"""Rendering only: one self-contained HTML page per run, repeats, comparison and lesson, its charts and JUnit.
It reads results and analysis, nothing else."""
