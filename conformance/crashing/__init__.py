"""Crashing: crashes inside operations, crash-point sweeps, and power cuts on a simulated
disk (in process or through FUSE)."""

__all__: list[str] = []
