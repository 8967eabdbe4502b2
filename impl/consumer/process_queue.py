"""The process queue of one consumed queue: cached messages by id, sorted, with counts.

Ids are kept in a sorted list (``bisect``) beside a dict, so the lowest cached id, the one
a concurrent commit needs after every batch, is ``ids[0]``; orderly consumption takes from
the front into a "consuming" dict and commits past them all. Not locked: the consumer core
that owns it serialises every call.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from rmqsim.model.api import ConsumerMessage

__all__ = ["Cached", "ProcessQueue"]


@dataclass(slots=True, eq=False)
class Cached:
    """A cached message: the message, its origin and its failed deliveries so far."""

    message: ConsumerMessage
    origin_topic: str
    origin_id: int
    reconsume_times: int


class ProcessQueue:
    __slots__ = ("_ids", "_msgs", "bytes", "consuming", "max_offset")

    def __init__(self) -> None:
        self._msgs: dict[int, Cached] = {}
        self._ids: list[int] = []  # sorted keys of _msgs
        self.consuming: dict[int, Cached] = {}
        self.bytes = 0  # payload bytes cached, consuming included
        self.max_offset = -1

    @property
    def count(self) -> int:
        """Messages cached, consuming included."""
        return len(self._ids) + len(self.consuming)

    def put(self, cached: list[Cached]) -> list[Cached]:
        """Add messages not already held; return those added, in order."""
        added = []
        for item in cached:
            msg_id = item.message.msg_id
            if msg_id in self._msgs or msg_id in self.consuming:
                continue
            self._msgs[msg_id] = item
            bisect.insort(self._ids, msg_id)
            self.bytes += len(item.message.payload)
            if msg_id > self.max_offset:
                self.max_offset = msg_id
            added.append(item)
        return added

    def _drop(self, msg_id: int) -> Cached | None:
        item = self._msgs.pop(msg_id, None)
        if item is not None:
            del self._ids[bisect.bisect_left(self._ids, msg_id)]
        return item

    def remove(self, ids: list[int]) -> int:
        """Remove finished ids; the offset to commit: lowest id left, else the highest id
        ever put + 1, or -1 if nothing was cached to begin with."""
        if not self._ids:
            return -1
        for msg_id in ids:
            item = self._drop(msg_id)
            if item is not None:
                self.bytes -= len(item.message.payload)
        return self._ids[0] if self._ids else self.max_offset + 1

    def take(self, n: int) -> list[Cached]:
        """Orderly: move the ``n`` lowest cached messages to ``consuming``."""
        taken = []
        for msg_id in self._ids[:n]:
            item = self._drop(msg_id)
            assert item is not None
            self.consuming[msg_id] = item
            taken.append(item)
        return taken

    def make_consume_again(self, cached: list[Cached]) -> None:
        """Orderly: return taken messages to the cache (they are taken again first)."""
        for item in cached:
            msg_id = item.message.msg_id
            del self.consuming[msg_id]
            self._msgs[msg_id] = item
            bisect.insort(self._ids, msg_id)

    def commit(self) -> int:
        """Orderly: finish every consuming message. Highest id + 1, or -1 if none."""
        if not self.consuming:
            return -1
        offset = max(self.consuming) + 1
        self.bytes -= sum(len(c.message.payload) for c in self.consuming.values())
        self.consuming.clear()
        return offset
