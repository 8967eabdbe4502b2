"""Searching: shrinking failures, coverage and steering, and fuzzing."""

__all__: list[str] = []
