"""An append-only sequence that is trimmed from the front: the shape of a topic's messages
and of its closed pages.

A topic's retained messages are always one run of consecutive ids (retention deletes a
prefix, produce appends), so position ``i`` of the log holds id ``first_id + i`` and every
lookup is arithmetic, never a scan. Trimming moves a head index instead of shifting the
list, and the dead prefix is compacted away once it outweighs the live part, so both
append and trim are amortized O(1) per element.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = [
    "COMPACT_MIN_DEAD",
    "TrimLog",
]

T = TypeVar("T")

#: Compact once the dead prefix holds at least this many slots and outweighs the live part.
COMPACT_MIN_DEAD = 1024


class TrimLog(Generic[T]):
    """A list with O(1) append, amortized O(1) front trim, and O(1) indexing."""

    __slots__ = ("_head", "_items")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._head = 0

    def __len__(self) -> int:
        return len(self._items) - self._head

    def __getitem__(self, index: int) -> T:
        assert 0 <= index < len(self), (index, len(self))
        return self._items[self._head + index]

    def __setitem__(self, index: int, item: T) -> None:
        assert 0 <= index < len(self), (index, len(self))
        self._items[self._head + index] = item

    def __iter__(self) -> Iterator[T]:
        return iter(self._items[self._head :])

    def copy(self) -> TrimLog[T]:
        """A copy sharing the (immutable) items: O(live items)."""
        clone: TrimLog[T] = TrimLog()
        clone._items = self._items[self._head :]
        return clone

    def append(self, item: T) -> None:
        self._items.append(item)

    def slice(self, start: int, stop: int) -> list[T]:
        """Items ``start`` up to but excluding ``stop`` (clamped to the live part)."""
        assert 0 <= start <= stop, (start, stop)
        return self._items[self._head + start : self._head + min(stop, len(self))]

    def trim(self, count: int) -> None:
        """Drop the first ``count`` live items."""
        assert 0 <= count <= len(self), (count, len(self))
        self._head += count
        if self._head >= COMPACT_MIN_DEAD and self._head * 2 >= len(self._items):
            del self._items[: self._head]
            self._head = 0
