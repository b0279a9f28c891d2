"""What a run is, checked before anything starts: the plan's schema (plan.py), the pinned versions, whether a
plan fits this machine (sizing.py), and lessons as data (lesson.py)."""
