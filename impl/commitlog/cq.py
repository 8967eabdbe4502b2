"""Consume queues: per topic incarnation, fixed-size entries that index the commit log.

``consumequeue/<20-digit incarnation>/<20-digit first entry index>``: files of
``entries_per_file`` entries of 20 bytes (RocketMQ's ``CQ_STORE_UNIT_SIZE``): commit-log
offset u64, record size u32, message id u64 (where RocketMQ keeps a tag hash; the id lets
recovery check that an entry points at the right record). Entry ``i`` is the message with
id ``base_id + i`` of the incarnation. A zero entry (size 0) is "none". Consume queues are
derived data: the dispatcher writes them after the log, they are synced at checkpoints and
at close, and recovery rebuilds what the log holds beyond the checkpoint.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from typing import NamedTuple

from rmqsim.impl.commitlog.fs import FileSystem
from rmqsim.impl.commitlog.log import all_zero
from rmqsim.impl.errors import CorruptDatabaseError

__all__ = ["ENTRY_SIZE_BYTES", "ConsumeQueue", "Entry", "correct_min_offset"]

_ENTRY = struct.Struct(">QIQ")
_ENTRY_PLACE = struct.Struct(">QI")  # the first two fields of _ENTRY
_U64 = struct.Struct(">Q")
ENTRY_SIZE_BYTES = _ENTRY.size  # 20
_NAME_DIGITS = 20


class Entry(NamedTuple):
    """One consume-queue entry (a named tuple: a read makes one per message)."""

    offset: int
    size_bytes: int
    msg_id: int


class ConsumeQueue:
    """The consume queue of one incarnation (its files are opened on demand)."""

    def __init__(self, fs: FileSystem, directory: str, entries_per_file: int) -> None:
        self.fs = fs
        self.directory = directory
        self.entries_per_file = entries_per_file
        self.handles: dict[int, int] = {}  # first index -> handle
        self.dirty: set[int] = set()
        self.created = False

    @property
    def file_size_bytes(self) -> int:
        return self.entries_per_file * ENTRY_SIZE_BYTES

    def path_of(self, first_index: int) -> str:
        return f"{self.directory}/{first_index:0{_NAME_DIGITS}d}"

    def load(self, report: list[str]) -> None:
        """Open the files that exist; a file of the wrong length is resized (its entries
        are checked by recovery) and reported; a foreign name is an error."""
        if not self.fs.exists(self.directory):
            return
        self.created = True
        for name in self.fs.list(self.directory):
            path = f"{self.directory}/{name}"
            if len(name) != _NAME_DIGITS or not name.isdigit():
                raise CorruptDatabaseError(f"{path}: not a consume-queue file name")
            first = int(name)
            if first % self.entries_per_file:
                raise CorruptDatabaseError(f"{path}: does not start at a file boundary")
            if self.fs.is_dir(path):
                raise CorruptDatabaseError(f"{path}: a directory, not a consume-queue file")
            handle = self.fs.open(path, create=False)
            size = self.fs.size(handle)
            if size != self.file_size_bytes:
                report.append(f"{path}: {size} bytes, not {self.file_size_bytes}: resized")
                self.fs.truncate(handle, self.file_size_bytes)
                self.dirty.add(first)
            self.handles[first] = handle

    def _handle(self, index: int, *, create: bool) -> tuple[int | None, int]:
        first = index - index % self.entries_per_file
        handle = self.handles.get(first)
        if handle is None and create:
            if not self.created:
                self.fs.make_dir(self.directory)
                self.created = True
            handle = self.fs.open(self.path_of(first), create=True)
            self.fs.truncate(handle, self.file_size_bytes)
            self.handles[first] = handle
        return handle, (index - first) * ENTRY_SIZE_BYTES

    def put(self, index: int, entry: Entry) -> None:
        handle, position = self._handle(index, create=True)
        assert handle is not None
        self.fs.write_at(handle, position, _ENTRY.pack(entry.offset, entry.size_bytes,
                                                       entry.msg_id))
        self.dirty.add(index - index % self.entries_per_file)

    def put_run(self, first_index: int, entries: Sequence[tuple[int, int, int]]) -> None:
        """``put`` of consecutive entries ``(offset, size, msg_id)`` from ``first_index``
        on (``put_packed``)."""
        self.put_packed(first_index, b"".join(itertools.starmap(_ENTRY.pack, entries)))

    def put_spans(self, first_index: int, spans: Sequence[tuple[int, int, int, int]]) -> None:
        """``put_run`` of the entries of consecutive run records, each given as ``(offset,
        size, first msg_id, count)``: every message of a run gets an entry pointing at the
        run, the run's 12 bytes joined between its ids (no tuple, no 3-field pack per
        entry)."""
        parts: list[bytes] = []
        for offset, size_bytes, first_id, count in spans:
            run = _ENTRY_PLACE.pack(offset, size_bytes)
            parts += (run, run.join(map(_U64.pack, range(first_id, first_id + count))))
        self.put_packed(first_index, b"".join(parts))

    def put_packed(self, first_index: int, data: bytes) -> None:
        """Write packed entries ``data`` from ``first_index`` on: one ``write_at`` per file
        they fall in (usually one)."""
        assert len(data) % ENTRY_SIZE_BYTES == 0, len(data)
        index, done = first_index, 0
        while done < len(data):
            handle, position = self._handle(index, create=True)
            assert handle is not None
            length = min(len(data) - done, self.file_size_bytes - position)
            self.fs.write_at(handle, position, data[done : done + length])
            self.dirty.add(index - index % self.entries_per_file)
            index += length // ENTRY_SIZE_BYTES
            done += length

    def get(self, first: int, count: int) -> list[Entry | None]:
        """Entries ``first .. first+count-1`` (None where there is none)."""
        return [Entry(*place) if place[1] else None for place in self.places(first, count)]

    def places(self, first: int, count: int) -> list[tuple[int, int, int]]:
        """Entries ``first .. first+count-1`` as plain tuples ``(offset, size, msg_id)``,
        unpacked in C (a read's path: no ``Entry`` per message); ``(0, 0, 0)`` where
        there is none (size 0, as ``get``'s None)."""
        result: list[tuple[int, int, int]] = []
        index = first
        while index < first + count:
            handle, position = self._handle(index, create=False)
            in_file = min(first + count - index, self.entries_per_file - position // 20)
            if handle is None:
                result += [(0, 0, 0)] * in_file
            else:
                data = self.fs.read(handle, position, in_file * ENTRY_SIZE_BYTES)
                result += _ENTRY.iter_unpack(data.ljust(in_file * ENTRY_SIZE_BYTES, b"\0"))
            index += in_file
        return result

    def clear_from(self, index: int) -> bool:
        """Zero every entry from ``index`` on; True if any was set."""
        changed = False
        for first in sorted(self.handles):
            end = first + self.entries_per_file
            if end <= index:
                continue
            start = max(index, first)
            handle = self.handles[first]
            position = (start - first) * ENTRY_SIZE_BYTES
            length = (end - start) * ENTRY_SIZE_BYTES
            if not all_zero(self.fs.read(handle, position, length)):
                self.fs.write_at(handle, position, bytes(length))
                self.dirty.add(first)
                changed = True
        return changed

    def reclaim(self, min_index: int) -> list[str]:
        """Remove the files whose every entry is below ``min_index``."""
        removed: list[str] = []
        for first in sorted(self.handles):
            if first + self.entries_per_file > min_index:
                break
            self.fs.close(self.handles.pop(first))
            self.dirty.discard(first)
            self.fs.remove(self.path_of(first))
            removed.append(self.path_of(first))
        return removed

    def flush(self) -> None:
        for first in sorted(self.dirty):
            handle = self.handles.get(first)
            if handle is not None:
                self.fs.sync(handle)
        self.dirty.clear()

    def close(self) -> None:
        for handle in self.handles.values():
            self.fs.close(handle)
        self.handles.clear()

    def destroy(self) -> None:
        """Remove every file and the directory (the incarnation is gone)."""
        self.close()
        if not self.fs.exists(self.directory):
            return
        for name in self.fs.list(self.directory):
            self.fs.remove(f"{self.directory}/{name}")
        self.fs.remove_dir(self.directory)


def correct_min_offset(entries: list[Entry | None], log_min_offset: int) -> int:
    """RocketMQ's ``ConsumeQueue.correctMinOffset``: the index of the first entry whose
    commit-log offset is at or after ``log_min_offset`` (entries below point into
    reclaimed segments); ``len(entries)`` when there is none."""
    for index, entry in enumerate(entries):
        if entry is not None and entry.offset >= log_min_offset:
            return index
    return len(entries)
