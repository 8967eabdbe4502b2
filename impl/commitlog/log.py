"""The commit log: preallocated segment files named by their start offset.

``commitlog/<20-digit start offset>``; every segment is ``segment_size_bytes`` long (a
record bigger than that gets a segment of the next multiple). Records are appended at the
log's end and never span segments: when a record plus an 8-byte filler does not fit, a
blank filler closes the segment and the record starts the next one. Offsets are physical
(bytes since the log began), so reclaimed segments leave the later offsets unchanged.

Writes go to the OS at once (``FileSystem.write_at``); ``flush`` syncs every segment
written since the last flush, and the directory when a segment was created or removed.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from rmqsim.impl.commitlog import records
from rmqsim.impl.commitlog.fs import FileSystem
from rmqsim.impl.commitlog.records import Record, RecordError
from rmqsim.impl.errors import CorruptDatabaseError

__all__ = [
    "CommitLog",
    "GroupEncoder",
    "PendingRecord",
    "ScanResult",
    "Segment",
    "all_zero",
    "segment_name",
]

_NAME_DIGITS = 20
_ZERO_CHUNK_BYTES = 1 << 20
_OFFSET_OF = operator.itemgetter(0)  # of a consume-queue entry
_SIZE_OF = operator.itemgetter(1)  # of a consume-queue entry
_PLACE_OF = operator.itemgetter(0, 1)  # of a consume-queue entry: a record's offset, size
#: ``encode(position, start, end)``: the bytes (as parts to join) of messages ``start`` to
#: ``end - 1`` of an operation (their records, or one run record), from physical offset
#: ``position`` on.
GroupEncoder = Callable[[int, int, int], list[bytes]]


def all_zero(data: bytes, start: int = 0) -> bool:
    """Whether ``data[start:]`` holds only zero bytes (counted in C: ``any()`` over a 1 MiB
    segment's bytes took ≈25 ms in Python, at every recovery)."""
    return data.count(0, start) == len(data) - start


def segment_name(start_offset: int) -> str:
    return f"{start_offset:0{_NAME_DIGITS}d}"


@dataclass(slots=True)
class Segment:
    start: int
    size_bytes: int
    handle: int
    path: str

    @property
    def end(self) -> int:
        return self.start + self.size_bytes


class PendingRecord(NamedTuple):
    """A record to append; its physical offset is decided by the log. (A named tuple: a
    produce makes one per message, and a tuple is built ≈4x faster than a frozen
    dataclass.)"""

    flags: int
    queue_offset: int
    store_time: int
    incarnation: int
    topic: bytes
    properties: bytes
    body: bytes


@dataclass(slots=True)
class ScanResult:
    """What a scan found: the valid records, where validity ends, and why it ended (None
    for the clean end of the log: zeros, or no more segments)."""

    records: list[Record]
    end_offset: int
    problem: str | None


class CommitLog:
    """The segments of one store, open for reading and appending."""

    def __init__(self, fs: FileSystem, directory: str, segment_size_bytes: int) -> None:
        self.fs = fs
        self.directory = directory
        self.segment_size_bytes = segment_size_bytes
        self.segments: list[Segment] = []
        self.end_offset = 0
        self.dirty: set[int] = set()  # starts of segments written since the last flush
        self.dirty_bytes = 0
        self.dir_dirty = False

    # ----------------------------------------------------------------- loading

    def load(self, report: list[str]) -> None:
        """Open every segment, checking names (a wrong one raises ``CorruptDatabaseError``
        naming the file); ``check_lengths`` then checks their lengths."""
        del report  # what load finds wrong, check_lengths reports
        names = self.fs.list(self.directory)
        for name in names:
            path = f"{self.directory}/{name}"
            if len(name) != _NAME_DIGITS or not name.isdigit():
                raise CorruptDatabaseError(f"{path}: not a commit-log segment name")
            if self.fs.is_dir(path):
                raise CorruptDatabaseError(f"{path}: a directory, not a commit-log segment")
            handle = self.fs.open(path, create=False)
            segment = Segment(int(name), self.fs.size(handle), handle, path)
            self.segments.append(segment)
        self.end_offset = self.segments[0].start if self.segments else 0

    def check_lengths(self, durable_offset: int, report: list[str]) -> None:
        """Check that the segments are consecutive and a multiple of the segment size
        long. A last segment of the wrong length (a kill while preallocating) is resized;
        what it holds is left to the scan. A wrong one before the last, or a gap, is the
        tail of an operation cut short (a power cut while one batch started two
        segments) when it starts at or after ``durable_offset`` (what the checkpoint says
        was synced): it is resized and the later segments are removed; before that it
        raises ``CorruptDatabaseError`` naming the file."""
        for index, segment in enumerate(self.segments):
            if index and self.segments[index - 1].end != segment.start:
                before = self.segments[index - 1]
                problem = (f"{before.path}: {before.size_bytes} bytes, but the next segment "
                           f"starts at {segment.start} (wrong length or a gap)")
                self._cut_chain(index, segment.start, durable_offset, problem, report)
                return
            good = segment.size_bytes > 0 and segment.size_bytes % self.segment_size_bytes == 0
            if not good:
                problem = (f"{segment.path}: {segment.size_bytes} bytes, not a multiple of the "
                           f"segment size {self.segment_size_bytes}")
                if index + 1 < len(self.segments):
                    self._cut_chain(index + 1, segment.start, durable_offset, problem, report)
                size = max(1, -(-segment.size_bytes // self.segment_size_bytes))
                size *= self.segment_size_bytes
                report.append(f"{problem}: resized to {size}")
                self.fs.truncate(segment.handle, size)
                segment.size_bytes = size
                self.dirty.add(segment.start)
                return

    def _cut_chain(self, keep: int, damaged_from: int, durable_offset: int, problem: str,
                   report: list[str]) -> None:
        """Remove the segments from index ``keep`` on, the log being damaged from offset
        ``damaged_from``; ``CorruptDatabaseError`` (``problem``) if that is before
        ``durable_offset``."""
        if damaged_from < durable_offset or (keep < len(self.segments) and
                                             self.segments[keep].start < durable_offset):
            raise CorruptDatabaseError(problem)
        for segment in self.segments[keep:]:
            self.fs.close(segment.handle)
            self.fs.remove(segment.path)
            report.append(f"{problem}: removed {segment.path} (after the damaged segment)")
            self.dir_dirty = True
        del self.segments[keep:]

    @property
    def min_offset(self) -> int:
        return self.segments[0].start if self.segments else self.end_offset

    def close(self) -> None:
        for segment in self.segments:
            self.fs.close(segment.handle)
        self.segments.clear()

    # ----------------------------------------------------------------- scanning

    def scan(self, from_offset: int) -> ScanResult:
        """Every valid record from ``from_offset`` on, stopping at the first invalid one."""
        found: list[Record] = []
        index = self._segment_index(from_offset, allow_end=True)
        position = from_offset
        while index is not None and index < len(self.segments):
            segment = self.segments[index]
            data = self.fs.read(segment.handle, 0, segment.size_bytes)
            relative = position - segment.start
            while relative < segment.size_bytes:
                try:
                    parsed = records.parse_records(data, relative, segment.start + relative)
                except RecordError as exc:
                    return ScanResult(found, segment.start + relative, self._why(index, data,
                                                                                relative, exc))
                if isinstance(parsed, int):
                    relative += parsed
                    continue
                found += parsed
                relative += parsed[0].size_bytes
            index += 1
            position = segment.end
        return ScanResult(found, position, None)

    def _why(self, index: int, data: bytes, relative: int, exc: RecordError) -> str | None:
        """None when the scan reached the clean end (zeros to the end of the last
        segment); otherwise what is wrong and where."""
        last = index == len(self.segments) - 1
        if last and all_zero(data, relative):
            return None
        segment = self.segments[index]
        return f"{segment.path} at byte {relative}: {exc}"

    def _segment_index(self, offset: int, *, allow_end: bool = False) -> int | None:
        starts = [segment.start for segment in self.segments]
        index = bisect.bisect_right(starts, offset) - 1
        if index < 0:
            return None
        if offset >= self.segments[index].end:
            return index + 1 if allow_end else None
        return index

    # ----------------------------------------------------------------- reading

    def read_messages(self, entries: Sequence[tuple[int, int, int]]) -> list[Record]:
        """The messages that consume-queue entries ``(offset, size, msg_id)`` point at,
        each from a checked record (CRC, lengths, place; a run record checked once per
        call however many of its messages are read): one read per span of entries that
        lie in one segment (consecutive ids usually do). ``CorruptDatabaseError`` naming
        the segment when a record is not valid or does not hold the message."""
        result: list[Record] = []
        for segment, data, low, span in self._segment_reads(entries):
            for offset, group in itertools.groupby(span, key=_OFFSET_OF):
                result += self._check(segment, data, offset - low, list(group))
        return result

    def read_bodies(self, entries: Sequence[tuple[int, int, int]]) -> list[records.Bodies]:
        """``read_messages`` as a read needs it: per record, the asked messages' ids and
        bodies (``records.parse_bodies``: the same checks, no ``Record`` per message)."""
        result: list[records.Bodies] = []
        for segment, data, low, span in self._segment_reads(entries):
            for offset, group in itertools.groupby(span, key=_OFFSET_OF):
                asked = list(group)
                result.append(_checked(
                    segment, asked,
                    functools.partial(records.parse_bodies, data, offset - low, offset,
                                      (asked[0][2], len(asked))),
                    lambda bodies: (bodies.size_bytes, len(bodies.ids)),
                ))  # fmt: skip
        return result

    def _segment_reads(self, entries: Sequence[tuple[int, int, int]]
                       ) -> Iterator[tuple[Segment, bytes, int, Sequence[tuple[int, int, int]]]]:
        """Per span of consecutive ``entries`` lying in one segment: the segment, the
        bytes read (one read from the span's lowest offset to its highest end), that
        offset, and the span. ``CorruptDatabaseError`` when no segment holds an entry."""
        all_offsets = list(map(_OFFSET_OF, entries))
        start = 0
        while start < len(entries):
            offset, size_bytes, _msg_id = entries[start]
            index = self._segment_index(offset)
            if index is None or offset + size_bytes > self.segments[index].end:
                raise CorruptDatabaseError(
                    f"{self.directory}: no segment holds bytes {offset}..{offset + size_bytes}"
                )
            segment = self.segments[index]
            seg_start, seg_end = segment.start, segment.end
            end, rest = start, all_offsets[start:]
            if seg_start <= min(rest) and max(rest) < seg_end:  # all in it: the usual case
                end = len(entries)
            while end < len(entries) and seg_start <= all_offsets[end] < seg_end:
                end += 1
            span, offsets = entries[start:end], all_offsets[start:end]
            low = min(offsets)
            high = min(seg_end, max(map(operator.add, offsets, map(_SIZE_OF, span))))
            yield segment, self.fs.read(segment.handle, low - seg_start, high - low), low, span
            start = end

    def misplaced(self, entries: Sequence[tuple[int, int, int]], incarnation: int) -> int | None:
        """The position in ``entries`` (consume-queue entries ``(offset, size, msg_id)`` of
        ``incarnation``) of the first one that points at another record than the one
        holding its message, by the records' headers (``records.record_ids``: bytes that
        hold no record header are left to the reads, which refuse them); None when there
        is none. Entries sharing a place (a run's) are grouped in C and checked by their
        first and last ids: one header parse per record, each segment read whole once
        (when the entries go in log order, as they do unless damaged)."""
        starts = [segment.start for segment in self.segments]
        read_index, data = -1, b""
        position = 0
        for (offset, size_bytes), group in itertools.groupby(entries, key=_PLACE_OF):
            members = list(group)
            index = bisect.bisect_right(starts, offset) - 1
            if index < 0 or offset + size_bytes > self.segments[index].end:
                return position
            segment = self.segments[index]
            if index != read_index:
                read_index, data = index, self.fs.read(segment.handle, 0, segment.size_bytes)
            ids = records.record_ids(data, offset - segment.start, offset, size_bytes,
                                     incarnation)
            first, last = members[0][2], members[-1][2]
            if ids is not None and not (first in ids and last in ids
                                        and last - first == len(members) - 1):
                wrong = next((step for step, member in enumerate(members)
                              if member[2] not in ids), None)
                if wrong is None:  # every id is in the record, but not once each
                    wrong = len(members) - 1
                if self._whole_record_at(segment, offset):
                    return position + wrong
            position += len(members)
        return None

    def _whole_record_at(self, segment: Segment, offset: int) -> bool:
        """Whether a whole, valid record (CRC included) lies at ``offset``: a header that
        names another record than an entry's is then that record, not damaged bytes."""
        head = self.fs.read(segment.handle, offset - segment.start, 4)
        size = int.from_bytes(head, "big") if len(head) == 4 else 0
        data = self.fs.read(segment.handle, offset - segment.start,
                            min(size, segment.end - offset))
        try:
            parsed = records.parse_records(data, 0, offset)
        except RecordError:
            return False
        return not isinstance(parsed, int)

    @staticmethod
    def _check(segment: Segment, data: bytes, position: int,
               asked: Sequence[tuple[int, int, int]]) -> list[Record]:
        """The messages of consecutive entries ``asked`` (one offset and size, ids from
        the first's on) from the record at ``data[position:]``, checked; the caller checks
        the ids of a message record's."""
        offset, _size_bytes, first_id = asked[0]
        return _checked(
            segment, asked,
            functools.partial(records.parse_records, data, position, offset,
                              (first_id, len(asked))),
            lambda parsed: (parsed[0].size_bytes, len(parsed)),
        )  # fmt: skip

    # ----------------------------------------------------------------- writing

    def append(self, batch: Iterable[PendingRecord]) -> list[tuple[int, int]]:
        """Append the records (one operation), returning ``(offset, size)`` of each
        (``append_grouped`` with ``records.encode_batch``: a group is the records that fit
        in one segment, usually all of them)."""
        pending = list(batch)
        fixed = records.HEADER_SIZE_BYTES  # records.record_size, inlined: once per message
        sizes = [fixed + len(p.topic) + len(p.properties) + len(p.body) for p in pending]

        def encode(position: int, start: int, end: int) -> list[bytes]:
            return records.encode_batch(position, pending[start:end])[0]

        placed: list[tuple[int, int]] = []
        for offset, _size, start, end in self.append_grouped(sizes, 0, None, encode):
            offsets = itertools.accumulate(sizes[start : end - 1], initial=offset)
            placed += zip(offsets, sizes[start:end], strict=True)
        return placed

    def append_grouped(self, costs: Sequence[int], overhead_bytes: int, limit_bytes: int | None,
                       encode: GroupEncoder) -> list[tuple[int, int, int, int]]:
        """Append one operation's messages in groups, written with one ``write_at`` per
        segment: message ``i`` adds ``costs[i]`` bytes to its group, a group adds
        ``overhead_bytes`` (a run record's header) and holds at most ``limit_bytes`` of
        costs (or one message; None: no limit), within one segment. Returns each group's
        ``(offset, size, start, end)``: it holds messages ``start`` to ``end - 1``,
        encoded by ``encode``."""
        totals = list(itertools.accumulate(costs, initial=0))
        groups: list[tuple[int, int, int, int]] = []
        chunks: dict[int, list[bytes]] = {}
        first_of: dict[int, int] = {}
        position, start = self.end_offset, 0
        while start < len(costs):
            segment = self.segments[-1] if self.segments else None
            room = segment.end - records.BLANK_SIZE_BYTES - position if segment else -1
            room -= overhead_bytes
            if limit_bytes is not None:
                room = min(room, max(limit_bytes, costs[start]))
            end = bisect.bisect_right(totals, totals[start] + room, lo=start) - 1
            if end <= start:  # the next message needs a new segment
                segment = self._room_for(position, overhead_bytes + costs[start], chunks,
                                         first_of)
                position = max(position, segment.start)
                continue
            assert segment is not None
            parts = encode(position, start, end)
            size = overhead_bytes + totals[end] - totals[start]
            assert sum(map(len, parts)) == size, (start, end)
            first_of.setdefault(segment.start, position)
            chunks.setdefault(segment.start, []).extend(parts)
            groups.append((position, size, start, end))
            position, start = position + size, end
        self._write(chunks, first_of)
        self.end_offset = position
        return groups

    def _room_for(
        self, position: int, size: int, chunks: dict[int, list[bytes]], first_of: dict[int, int]
    ) -> Segment:
        """The segment the record of ``size`` at ``position`` goes in: the last one, or a
        new one after a blank filler."""
        last = self.segments[-1] if self.segments else None
        if last is not None and position + size + records.BLANK_SIZE_BYTES <= last.end:
            return last
        if last is not None and position < last.end:
            first_of.setdefault(last.start, position)
            chunks.setdefault(last.start, []).append(records.blank(last.end - position))
        start = last.end if last is not None else position
        unit = self.segment_size_bytes
        return self.new_segment(start, -(-(size + records.BLANK_SIZE_BYTES) // unit) * unit)

    def new_segment(self, start: int, size_bytes: int) -> Segment:
        path = f"{self.directory}/{segment_name(start)}"
        handle = self.fs.open(path, create=True)
        self.fs.truncate(handle, size_bytes)
        segment = Segment(start, size_bytes, handle, path)
        self.segments.append(segment)
        self.dir_dirty = True
        self.dirty.add(start)
        return segment

    def _by_start(self, starts: Iterable[int]) -> dict[int, Segment]:
        """The segments that start at ``starts`` (the ones written lately, so searched from
        the log's end: a log of many segments is not walked at every write)."""
        wanted = set(starts)
        found: dict[int, Segment] = {}
        for segment in reversed(self.segments):
            if not wanted:
                break
            if segment.start in wanted:
                found[segment.start] = segment
                wanted.discard(segment.start)
        return found

    def _write(self, chunks: dict[int, list[bytes]], first_of: dict[int, int]) -> None:
        by_start = self._by_start(chunks)
        for start, parts in chunks.items():
            segment = by_start[start]
            data = b"".join(parts)
            self.fs.write_at(segment.handle, first_of[start] - start, data)
            self.dirty.add(start)
            self.dirty_bytes += len(data)

    def flush(self) -> None:
        """Sync every segment written since the last flush (and the directory)."""
        by_start = self._by_start(self.dirty)
        for start in sorted(self.dirty):
            segment = by_start.get(start)
            if segment is not None:
                self.fs.sync(segment.handle)
        if self.dir_dirty:
            self.fs.sync_dir(self.directory)
        self.dirty.clear()
        self.dirty_bytes = 0
        self.dir_dirty = False

    # ----------------------------------------------------------------- truncating, reclaiming

    def truncate(self, end_offset: int) -> list[str]:
        """Drop everything from ``end_offset`` on: zero the rest of its segment (so no
        stale record can come back at a later recovery) and remove later segments.
        Returns the removed paths."""
        removed: list[str] = []
        while self.segments and self.segments[-1].start > end_offset:
            segment = self.segments.pop()
            self.fs.close(segment.handle)
            self.fs.remove(segment.path)
            removed.append(segment.path)
            self.dir_dirty = True
        if self.segments and end_offset < self.segments[-1].end:
            segment = self.segments[-1]
            position = end_offset - segment.start
            while position < segment.size_bytes:
                length = min(_ZERO_CHUNK_BYTES, segment.size_bytes - position)
                self.fs.write_at(segment.handle, position, bytes(length))
                position += length
            self.dirty.add(segment.start)
        self.end_offset = end_offset
        return removed

    def reclaim(self, below_offset: int) -> list[str]:
        """Remove the segments that end at or before ``below_offset``, never the last."""
        removed: list[str] = []
        while len(self.segments) > 1 and self.segments[0].end <= below_offset:
            segment = self.segments.pop(0)
            self.fs.close(segment.handle)
            self.fs.remove(segment.path)
            self.dirty.discard(segment.start)
            removed.append(segment.path)
            self.dir_dirty = True
        return removed


_Parsed = TypeVar("_Parsed")


def _checked(segment: Segment, asked: Sequence[tuple[int, int, int]],
             parse: Callable[[], _Parsed | int],
             size_and_count: Callable[[_Parsed], tuple[int, int]]) -> _Parsed:
    """What ``parse`` makes of the record that consecutive consume-queue entries ``asked``
    (one offset and size) point at, checked to be that record and to hold one message per
    entry (``size_and_count``: the record's size and its messages parsed);
    ``CorruptDatabaseError`` naming the segment and the byte otherwise."""
    offset, size_bytes, _first_id = asked[0]
    where = f"{segment.path} at byte {offset - segment.start}"
    try:
        parsed = parse()
    except RecordError as exc:
        raise CorruptDatabaseError(f"{where}: {exc}") from None
    if isinstance(parsed, int):
        raise CorruptDatabaseError(f"{where}: not the expected record")
    parsed_size, parsed_count = size_and_count(parsed)
    if parsed_size != size_bytes:
        raise CorruptDatabaseError(f"{where}: not the expected record")
    if parsed_count != len(asked):
        raise CorruptDatabaseError(f"{where}: {len(asked)} entries point at one message")
    return parsed
