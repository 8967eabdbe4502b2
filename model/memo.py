"""A bounded memory of a pure function of ``bytes`` (``BytesMemo``): the stream layer's
codecs read the same records again and again (every stream consuming a channel, the model
and the implementation in lockstep), and a record's message is immutable, so a record is
read once and its message shared. What the function raises is not remembered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["BytesMemo"]

T = TypeVar("T")


class BytesMemo(Generic[T]):
    """``compute(data)``, remembered for exact ``bytes`` of at most ``max_bytes``; at most
    ``kept`` of them (then the memory starts again, empty). ``compute`` must be pure."""

    __slots__ = ("_compute", "_kept", "_max_bytes", "_seen")

    def __init__(self, compute: Callable[[bytes], T], *, kept: int, max_bytes: int) -> None:
        assert kept > 0 and max_bytes >= 0, (kept, max_bytes)
        self._compute = compute
        self._kept = kept
        self._max_bytes = max_bytes
        self._seen: dict[bytes, T] = {}

    def __call__(self, data: bytes) -> T:
        if type(data) is not bytes or len(data) > self._max_bytes:
            return self._compute(data)
        value = self._seen.get(data)
        if value is None:
            value = self._compute(data)
            if len(self._seen) >= self._kept:
                self._seen.clear()
            self._seen[data] = value
        return value

    def __len__(self) -> int:
        return len(self._seen)

    def clear(self) -> None:
        """Forget everything (a measurement's way of running starts cold)."""
        self._seen.clear()
