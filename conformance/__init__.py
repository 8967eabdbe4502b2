"""Lockstep conformance checking: runs the reference model and an implementation side by
side over scenarios, compares every outcome and the full state, and reports divergences."""

__all__: list[str] = []
