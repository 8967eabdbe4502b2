"""The queue layer: its ``Layer``, its own shrinking pass, and its coverage map of operation
and crash cells with the steering of the gate into the cells not yet hit."""

__all__: list[str] = []
