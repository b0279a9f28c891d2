"""Capture: a read-only profile of a real cluster's objects and traffic, to replay at a multiple."""
