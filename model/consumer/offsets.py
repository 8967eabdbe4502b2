"""The offset store: committed offsets in memory, persisted to a durable store on demand.

RocketMQ's ``RemoteBrokerOffsetStore``/``LocalFileOffsetStore`` rules (docs/CONSUMER.md,
"Offset store"). An offset is the id of the next message of a queue (topic) that the group
has not finished; ``-1`` means none is known. The durable store is a plain ``dict`` here, so
the model can keep it across a simulated client crash by handing the same dict to the next
consumer.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmqsim.model.api import ReadType

__all__ = ["OffsetStore"]


class OffsetStore:
    """One group's offsets: ``table`` (memory, lost on a crash) and ``store`` (durable)."""

    def __init__(self, store: dict[str, int] | None = None) -> None:
        self.table: dict[str, int] = {}
        self.store: dict[str, int] = {} if store is None else store

    def update(self, queue: str, offset: int, *, increase_only: bool) -> None:
        """Set ``queue``'s offset in memory; with ``increase_only`` it never moves back.

        An unknown queue takes ``offset`` as it is, whatever ``increase_only`` says.
        """
        current = self.table.get(queue)
        if current is None or not increase_only or offset > current:
            self.table[queue] = offset

    def read(self, queue: str, read_type: ReadType) -> int:
        """The offset from memory, from the store, or from memory and else the store.

        Reading from the store also raises the memory offset to it (increase-only), so a
        restarted consumer continues from what was persisted. ``-1`` when nothing is known.
        """
        if read_type is not ReadType.STORE and queue in self.table:
            return self.table[queue]
        if read_type is ReadType.MEMORY:
            return -1
        stored = self.store.get(queue)
        if stored is None:
            return -1
        self.update(queue, stored, increase_only=True)
        return stored

    def persist(self, queues: Iterable[str]) -> None:
        """Write the memory offsets of ``queues`` to the store in one step.

        Queues not listed keep their memory and stored offsets. [Go client: entries of every
        queue not listed are deleted from the table, so the next whole-table persist drops
        their stored offsets too.]
        """
        update = {q: self.table[q] for q in queues if q in self.table}
        self.store.update(update)

    def persist_all(self) -> None:
        """Persist every queue in memory."""
        self.persist(list(self.table))

    def remove(self, queue: str) -> None:
        """Forget ``queue``'s memory offset (the store keeps what it had)."""
        self.table.pop(queue, None)
