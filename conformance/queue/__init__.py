"""The queue layer: its ``Layer`` and its own shrinking pass."""

__all__: list[str] = []
