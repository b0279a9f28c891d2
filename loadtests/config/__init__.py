"""What a run is, checked before anything starts: the plan's schema (plan.py), the scenarios the load can run
(scenarios.py: each declared once), the pinned versions, whether a plan fits this machine (sizing.py), and
lessons as data (lesson.py)."""
