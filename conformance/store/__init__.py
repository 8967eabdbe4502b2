"""The storage layer's lockstep (``run``) and checks (``check``): docs/STORAGE.md."""

__all__: list[str] = []
