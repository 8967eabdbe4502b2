"""The consumer layer: its ``Layer``, lockstep run, history checks and shrinking."""

__all__: list[str] = []
