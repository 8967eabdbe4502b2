"""Committed offsets of a push consumer: a memory table persisted to its own RocksDB.

Why its own database rather than the queue's group positions: an offset is "the next id
not finished", which is often an id not issued yet (latest + 1). The queue's ``seek`` turns
any id that is not retained into ``-1``, so a group position cannot hold that value without
racing producers (``seek_to_latest`` may already be past a message produced in between).
A small RocksDB of our own holds the exact value, persists every listed queue in one atomic
``WriteBatch`` through the WAL, and is read back on restart. (Retention is held back by the
consumer separately: see ``core``'s guard group.)

Layout (raw mode, default column family): ``b"O" | group UTF-8 | 0x00 | queue UTF-8`` ->
offset as i64 big-endian. Names never contain NUL (SPEC), so the separator is unambiguous.

Damage. Every read is a point read (``get``), never an iteration: rocksdict's iterators
end at a damaged block as at the end of their range, without an error (``impl.storage``),
while a ``get`` that meets one raises. RocksDB's errors are plain ``Exception``s; the
store maps them as ``impl.storage`` does (``map_rocksdb_error``): a damaged table file is
a ``CorruptDatabaseError`` whose message names it, whether the open or a read finds it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable

from rocksdict import Options, Rdict, WriteBatch

from rmqsim.impl.errors import CorruptDatabaseError
from rmqsim.impl.storage import map_rocksdb_error
from rmqsim.model.api import NotServingError, ReadType

__all__ = ["RocksOffsetStore"]

_OFFSET = struct.Struct(">q")
_TAG = b"O"


class RocksOffsetStore:
    """One group's offsets: ``table`` in memory, the store on disk at ``path``."""

    def __init__(self, path: str | os.PathLike[str], group: str) -> None:
        self.path = os.fspath(path)
        self.group = group
        self.table: dict[str, int] = {}
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        try:
            self._db: Rdict | None = Rdict(self.path, options)
        except Exception as exc:  # RocksDB reports everything as a plain Exception
            raise map_rocksdb_error(exc, self.path, "open the offset store") from exc

    def _key(self, queue: str) -> bytes:
        return _TAG + self.group.encode() + b"\0" + queue.encode()

    def _live(self) -> Rdict:
        if self._db is None:
            raise NotServingError(f"the offset store at {self.path} is closed")
        return self._db

    def _stored(self, queue: str) -> int | None:
        """The stored offset of ``queue``, None when absent; damage raises (module doc)."""
        db = self._live()
        try:
            raw = db.get(self._key(queue))
        except Exception as exc:  # RocksDB reports everything as a plain Exception
            raise map_rocksdb_error(exc, self.path, "read the offset store") from exc
        if raw is None:
            return None
        if len(raw) != _OFFSET.size:
            raise CorruptDatabaseError(f"offset of {queue!r} in {self.path} is {len(raw)} bytes")
        offset: int = _OFFSET.unpack(raw)[0]
        return offset

    # ------------------------------------------------------------------ the rules

    def update(self, queue: str, offset: int, *, increase_only: bool) -> None:
        """Set the memory offset; with ``increase_only`` it never moves back (an unknown
        queue takes any value)."""
        if not increase_only or self.table.get(queue, offset) <= offset:
            self.table[queue] = offset

    def read(self, queue: str, read_type: ReadType) -> int:
        """Memory, store, or memory-then-store; a store read raises the memory offset to
        what it found (increase-only). ``-1`` when nothing is known."""
        if read_type is not ReadType.STORE:
            found = self.table.get(queue)
            if found is not None or read_type is ReadType.MEMORY:
                return -1 if found is None else found
        stored = self._stored(queue)
        if stored is None:
            return -1
        self.update(queue, stored, increase_only=True)
        return stored

    def persist(self, queues: Iterable[str]) -> None:
        """Write the listed queues' memory offsets in one atomic batch; others untouched."""
        batch = WriteBatch(raw_mode=True)
        for queue in queues:
            if queue in self.table:
                batch.put(self._key(queue), _OFFSET.pack(self.table[queue]))
        db = self._live()
        try:
            db.write(batch)
        except Exception as exc:  # RocksDB reports everything as a plain Exception
            raise map_rocksdb_error(exc, self.path, "write the offset store") from exc

    def persist_all(self) -> None:
        self.persist(sorted(self.table))

    def remove(self, queue: str) -> None:
        """Forget the memory offset; the store keeps its value."""
        self.table.pop(queue, None)

    def stored(self, queues: Iterable[str]) -> dict[str, int]:
        """Stored offsets of ``queues`` (absent ones left out), read from disk."""
        found = {}
        for queue in queues:
            stored = self._stored(queue)
            if stored is not None:
                found[queue] = stored
        return found

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def crash(self) -> None:
        """Release the database writing nothing more (the WAL holds every persist)."""
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(Exception):
                db.cancel_all_background(True)
            del db  # dropping the last handle releases RocksDB's LOCK
