"""The queue layer's simulation: its operations, profiles, actors and beliefs."""

__all__: list[str] = []
