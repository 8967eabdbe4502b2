"""The storage layer's simulation: operations (``ops``), profiles (``profiles``) and the
seeded simpy actors (``sim``)."""

__all__: list[str] = []
