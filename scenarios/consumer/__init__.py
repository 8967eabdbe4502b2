"""The consumer layer's simulation: push consumers over a queue."""

__all__: list[str] = []
