"""The stream layer's simulation: Milvus-style message streams."""

__all__: list[str] = []
