"""The process queue: messages pulled from one queue and not yet finished.

RocketMQ's ``ProcessQueue`` (docs/CONSUMER.md, "Process queue"): a map from message id to
message, with a count and a byte total for flow control. Concurrent consumption removes
finished messages and commits the lowest id still cached; orderly consumption takes messages
into a "consuming" map and commits past all of them at once. The model keeps plain dicts and
sorts on demand: clarity over speed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqsim.model.api import ConsumerMessage

__all__ = ["Entry", "ProcessQueue"]


@dataclass(slots=True, eq=False)
class Entry:
    """A cached message with what the consumer tracks about it."""

    message: ConsumerMessage
    origin_topic: str
    origin_id: int
    #: Failed deliveries of the origin before the next one (grows on a local retry).
    reconsume_times: int

    @property
    def msg_id(self) -> int:
        return self.message.msg_id

    @property
    def size_bytes(self) -> int:
        return len(self.message.payload)


class ProcessQueue:
    """Cached messages of one queue, by id."""

    def __init__(self) -> None:
        self.cache: dict[int, Entry] = {}
        self.consuming: dict[int, Entry] = {}
        #: Highest id ever put, ``-1`` before the first (RocketMQ's ``queueOffsetMax``).
        self.max_offset = -1

    @property
    def cached_count(self) -> int:
        return len(self.cache) + len(self.consuming)

    @property
    def cached_bytes(self) -> int:
        entries = [*self.cache.values(), *self.consuming.values()]
        return sum(e.size_bytes for e in entries)

    def put(self, entries: list[Entry]) -> list[Entry]:
        """Cache ``entries``; ids already cached (or being consumed) are ignored. Returns
        the entries actually added, in the order given."""
        added = []
        for entry in entries:
            if entry.msg_id in self.cache or entry.msg_id in self.consuming:
                continue
            self.cache[entry.msg_id] = entry
            self.max_offset = max(self.max_offset, entry.msg_id)
            added.append(entry)
        return added

    def remove(self, ids: list[int]) -> int:
        """Drop finished ids; return the offset to commit.

        That is the lowest id still cached, or ``max_offset + 1`` once the cache is empty,
        or ``-1`` when the cache was already empty (nothing to commit).
        """
        if not self.cache:
            return -1
        for msg_id in ids:
            self.cache.pop(msg_id, None)
        return min(self.cache) if self.cache else self.max_offset + 1

    def take(self, n: int) -> list[Entry]:
        """Orderly: move the ``n`` lowest cached messages into the consuming map."""
        taken = [self.cache.pop(msg_id) for msg_id in sorted(self.cache)[:n]]
        for entry in taken:
            self.consuming[entry.msg_id] = entry
        return taken

    def make_consume_again(self, entries: list[Entry]) -> None:
        """Orderly: put taken messages back, to be taken again first."""
        for entry in entries:
            del self.consuming[entry.msg_id]
            self.cache[entry.msg_id] = entry

    def commit(self) -> int:
        """Orderly: finish every consuming message; return the highest id + 1, or ``-1``
        when nothing was being consumed."""
        if not self.consuming:
            return -1
        offset = max(self.consuming) + 1
        self.consuming.clear()
        return offset
