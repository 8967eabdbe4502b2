"""Commit-log records: layout, encoding, and the checks recovery and reads apply.

A record (all integers big-endian), RocketMQ's layout reduced to what this queue stores:

====== ============================== =====
offset field                          bytes
====== ============================== =====
0      total size (whole record)      4
4      magic (``MAGIC_MESSAGE``)      4
8      CRC32 of bytes 12..total       4
12     flags (``FLAG_*``)             4
16     queue offset (message id)      8
24     physical offset (in the log)   8
32     store time (clock seconds)     8 (signed)
40     topic incarnation              8
48     topic length + topic (UTF-8)   2 + t
..     properties length + props      4 + p
..     body length + body             4 + n
====== ============================== =====

The CRC covers everything after it (header fields, topic, properties and body), so a
flipped bit anywhere but in the size and magic fails the check, and those two are checked
against the record's own lengths. A *control* record (``FLAG_CONTROL``) carries a JSON
event in its body (create/destroy of topics and groups, position moves, retention) and
queue offset 0. ``FLAG_BATCH_END`` marks the last record of one operation: recovery keeps
whole operations only. ``FLAG_PAGE_CLOSE`` marks a message that closed its topic's page.

The *blank filler* (RocketMQ's ``BLANK_MAGIC_CODE``) is 8 bytes, ``{size = the rest of the
segment, MAGIC_BLANK}``, written when a record (plus 8) does not fit in what is left of a
segment: records never span segments, and a reader jumps to the next segment.

Properties: count u32, then per pair key length u32, key, value length u32, value (UTF-8),
in the producer's order. No pickle anywhere.

A *run record* (``MAGIC_RUN``) holds consecutive messages of one topic incarnation without
properties, stored by one produce (Kafka's record batch: one header and one CRC for many
messages, so a produce pays per message only for its body and its 5 bytes of table):

====== ============================== =====
offset field                          bytes
====== ============================== =====
0      total size (whole record)      4
4      magic (``MAGIC_RUN``)          4
8      CRC32 of bytes 12..total       4
12     flags (only FLAG_BATCH_END)    4
16     first queue offset (its id)    8
24     physical offset (in the log)   8
32     store time (clock seconds)     8 (signed)
40     topic incarnation              8
48     message count c (>= 1)         4
52     topic length + topic (UTF-8)   2 + t
..     body lengths                   4 * c
..     page-close marks (0 or 1)      c
..     bodies, in id order            sum of lengths
====== ============================== =====

Message ``i`` has id ``first + i``; a mark of 1 is ``FLAG_PAGE_CLOSE``. A run's bodies
total at most ``RUN_BODIES_MAX_BYTES`` unless it holds one message (a read of one message
reads and checks at most that much: RocksDB's block size plays the same part). A run is
valid or not as a whole; ``parse_records`` gives its messages as ``Record``s that all
carry the run's offset and size, the last one ``FLAG_BATCH_END`` when the run has it.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, repeat
from typing import NamedTuple

from rmqsim.model.memo import BytesMemo

try:  # ISA-L's CRC-32 (the ``fast`` extra): zlib's values, ≈6x faster on 1 KiB
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - only without the extra
    from zlib import crc32

__all__ = [
    "BLANK_SIZE_BYTES",
    "CRC32_SOURCE",
    "FLAG_BATCH_END",
    "FLAG_CONTROL",
    "FLAG_PAGE_CLOSE",
    "HEADER_SIZE_BYTES",
    "MAGIC_BLANK",
    "MAGIC_MESSAGE",
    "MAGIC_RUN",
    "RUN_BODIES_MAX_BYTES",
    "RUN_HEADER_SIZE_BYTES",
    "RUN_PER_MESSAGE_BYTES",
    "Bodies",
    "Record",
    "RecordError",
    "blank",
    "crc32",
    "decode_properties",
    "encode_batch",
    "encode_properties",
    "encode_record",
    "encode_run",
    "parse_bodies",
    "parse_record",
    "parse_records",
    "record_ids",
    "record_size",
]

MAGIC_MESSAGE = 0xDAA320A7
MAGIC_BLANK = 0xCBD43194
MAGIC_RUN = 0xDAA320B1
FLAG_BATCH_END = 1
FLAG_PAGE_CLOSE = 2
FLAG_CONTROL = 4
_KNOWN_FLAGS = FLAG_BATCH_END | FLAG_PAGE_CLOSE | FLAG_CONTROL

_HEAD = struct.Struct(">IIIIQQqQ")  # size, magic, crc, flags, queue off, phys off, time, inc
_HEAD_TOPIC = struct.Struct(">IIIIQQqQH")  # _HEAD, then the topic length
_PREFIX = struct.Struct(">III")  # size, magic, crc: the part of _HEAD before the CRC'd bytes
_FIELDS = struct.Struct(">IQQqQH")  # the rest of _HEAD, then the topic length
_BLANK = struct.Struct(">II")
_RUN_HEAD = struct.Struct(">IIIIQQqQIH")  # _HEAD, then the message count and topic length
_RUN_FIELDS = struct.Struct(">IQQqQIH")  # _RUN_HEAD after the CRC
_MARK_FLAGS = bytes.maketrans(b"\1", bytes([FLAG_PAGE_CLOSE]))  # a run's page mark -> flags
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
#: Where the records' CRC-32 comes from: "isal" (the ``fast`` extra) or "zlib".
CRC32_SOURCE = "zlib" if crc32 is zlib.crc32 else "isal"
#: The fixed part of a record: header plus the three length fields.
HEADER_SIZE_BYTES = _HEAD.size + 2 + 4 + 4
BLANK_SIZE_BYTES = _BLANK.size
#: The fixed part of a run record (before its topic), and what each message adds to it
#: besides its body (a length and a page-close mark).
RUN_HEADER_SIZE_BYTES = _RUN_HEAD.size
RUN_PER_MESSAGE_BYTES = 5
#: The most body bytes a run record of more than one message holds.
RUN_BODIES_MAX_BYTES = 64 << 10


class RecordError(ValueError):
    """The bytes at an offset are not a whole, valid record (the reason says why)."""


class Record(NamedTuple):
    """One decoded record and where it lies. (A named tuple: a read makes one per
    message, and a tuple is built ≈4x faster than a frozen dataclass.)"""

    offset: int
    size_bytes: int
    flags: int
    queue_offset: int
    store_time: int
    incarnation: int
    topic: str
    properties: bytes
    body: bytes

    @property
    def is_control(self) -> bool:
        return bool(self.flags & FLAG_CONTROL)

    @property
    def is_batch_end(self) -> bool:
        return bool(self.flags & FLAG_BATCH_END)


def encode_properties(properties: Mapping[str, str]) -> bytes:
    if not properties:
        return b""
    parts = [_U32.pack(len(properties))]
    for key, value in properties.items():
        key_bytes, value_bytes = key.encode(), value.encode()
        parts += [_U32.pack(len(key_bytes)), key_bytes, _U32.pack(len(value_bytes)), value_bytes]
    return b"".join(parts)


def _decode_properties(data: bytes) -> dict[str, str]:
    try:
        (count,) = _U32.unpack_from(data, 0)
        position = 4
        result: dict[str, str] = {}
        for _ in range(count):
            pair = []
            for _side in range(2):
                (length,) = _U32.unpack_from(data, position)
                position += 4
                if position + length > len(data):
                    raise RecordError("a property runs past the record")
                pair.append(data[position : position + length].decode())
                position += length
            result[pair[0]] = pair[1]
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordError(f"properties do not parse: {exc}") from None
    if position != len(data):
        raise RecordError("properties have trailing bytes")
    return result


#: Decoded properties by their bytes (the same few recur across messages): at most 4,096
#: blocks of at most 4,096 bytes each, emptied when full.
_decoded = BytesMemo(_decode_properties, kept=4096, max_bytes=4096)


def decode_properties(data: bytes) -> dict[str, str]:
    """The properties of ``encode_properties`` (a fresh dict each time); ``RecordError``
    if they do not parse (never remembered: a damaged record is refused on every read)."""
    if not data:
        return {}
    return dict(_decoded(data))


def record_size(topic: bytes, properties: bytes, body: bytes) -> int:
    return HEADER_SIZE_BYTES + len(topic) + len(properties) + len(body)


def encode_record(
    *,
    offset: int,
    flags: int,
    queue_offset: int,
    store_time: int,
    incarnation: int,
    topic: bytes,
    properties: bytes,
    body: bytes,
) -> bytes:
    """The bytes of one record to be written at physical ``offset``."""
    fields = (flags, queue_offset, store_time, incarnation, topic, properties, body)
    return b"".join(encode_batch(offset, [fields])[0])


def encode_batch(
    offset: int, batch: Iterable[tuple[int, int, int, int, bytes, bytes, bytes]]
) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Consecutive records from physical ``offset`` on, each given as ``(flags,
    queue_offset, store_time, incarnation, topic, properties, body)``. Returns the parts
    to join into the bytes to write (a body is not copied here) and each record's
    ``(offset, size)``. One loop with no call per record: a produce's hot path."""
    parts: list[bytes] = []
    placed: list[tuple[int, int]] = []
    join, fields_pack, prefix_pack, u32, crc = (
        b"".join, _FIELDS.pack, _PREFIX.pack, _U32.pack, crc32
    )
    for flags, queue_offset, store_time, incarnation, topic, properties, body in batch:
        fields = join((
            fields_pack(flags, queue_offset, offset, store_time, incarnation, len(topic)),
            topic, u32(len(properties)), properties, u32(len(body)),
        ))  # fmt: skip
        size = _PREFIX.size + len(fields) + len(body)
        parts += (prefix_pack(size, MAGIC_MESSAGE, crc(body, crc(fields))) + fields, body)
        placed.append((offset, size))
        offset += size
    return parts, placed


def encode_run(
    offset: int, flags: int, first_id: int, store_time: int, incarnation: int, topic: bytes,
    bodies: Sequence[bytes], closes: bytes,
) -> list[bytes]:  # fmt: skip
    """The run record of ``bodies`` (ids from ``first_id`` on, ``closes[i]`` 1 where
    ``bodies[i]`` closes its topic's page), to be written at physical ``offset``, as the
    parts to join: the header, then the bodies themselves, copied once, by the log's join
    (joining them here first copied each twice: 2.9-4.0 against 2.0-3.1 µs of CPU per
    message produced, alternated, load ≈5); one
    header, one CRC, carried from body to body (``crc32(body, crc)``: the CRC of the
    bodies joined)."""
    count = len(bodies)
    data_length = sum(map(len, bodies))
    if not 0 < count == len(closes) or closes.strip(b"\0\1"):
        raise ValueError(f"a run needs a 0/1 page-close mark per body: {closes!r} for {count}")
    if count > 1 and data_length > RUN_BODIES_MAX_BYTES:
        raise ValueError(f"a run of {count} bodies of {data_length} bytes in all exceeds "
                         f"RUN_BODIES_MAX_BYTES")
    fields = b"".join((_RUN_FIELDS.pack(flags, first_id, offset, store_time, incarnation, count,
                                        len(topic)), topic,
                       _lengths_struct(count).pack(*map(len, bodies)), closes))
    size = _PREFIX.size + len(fields) + data_length
    crc = crc32(fields)
    for body in bodies:
        crc = crc32(body, crc)
    return [_PREFIX.pack(size, MAGIC_RUN, crc) + fields, *bodies]


@functools.lru_cache(maxsize=256)
def _lengths_struct(count: int) -> struct.Struct:
    """``count`` big-endian u32: a run's body lengths."""
    return struct.Struct(f">{count}I")


def blank(remaining_bytes: int) -> bytes:
    """The end-of-segment filler for the ``remaining_bytes`` left in a segment."""
    assert remaining_bytes >= BLANK_SIZE_BYTES, remaining_bytes
    return _BLANK.pack(remaining_bytes, MAGIC_BLANK)


def parse_records(data: bytes | memoryview, position: int, offset: int,
                  wanted: tuple[int, int] | None = None) -> list[Record] | int:
    """The messages of the record at ``data[position:]`` (physical ``offset``): one
    ``Record`` for a message record, the messages of a run record (the whole run checked,
    all-or-nothing; only the ``count`` messages from id ``first`` on when ``wanted`` is
    ``(first, count)``: a read builds what it asked for), or, for a blank filler, its
    size. ``RecordError`` as ``parse_record`` says, or when the run does not hold the
    wanted ids."""
    if len(data) - position >= 8 and _U32.unpack_from(data, position + 4)[0] == MAGIC_RUN:
        return _parse_run(data, position, offset, wanted)
    parsed = parse_record(data, position, offset)
    return parsed if isinstance(parsed, int) else [parsed]


class _Run(NamedTuple):
    """A run record's checked header and table (``_check_run``)."""

    size: int
    flags: int
    first_id: int
    store_time: int
    incarnation: int
    topic: str
    lengths: tuple[int, ...]
    closes: bytes
    bodies_at: int


def _check_run(data: bytes | memoryview, position: int, offset: int) -> _Run:
    """The run record at ``data[position:]`` (physical ``offset``), checked whole: size,
    CRC, place, flags, table and topic; ``RecordError`` when any is wrong."""
    size = _U32.unpack_from(data, position)[0]
    if not RUN_HEADER_SIZE_BYTES + RUN_PER_MESSAGE_BYTES <= size <= len(data) - position:
        raise RecordError(f"run record size {size} outside {RUN_HEADER_SIZE_BYTES + 5}.."
                          f"{len(data) - position}")
    end = position + size
    _s, _m, crc, flags, first_id, physical, store_time, inc, count, topic_length = (
        _RUN_HEAD.unpack_from(data, position)
    )
    if crc32(memoryview(data)[position + 12 : end]) != crc:  # a view: no copy of the run
        raise RecordError("CRC mismatch")
    if physical != offset:
        raise RecordError(f"record says it lies at {physical}")
    if flags & ~FLAG_BATCH_END or count == 0:
        raise RecordError(f"run record with flags {flags:#x} and {count} messages")
    table_at = position + RUN_HEADER_SIZE_BYTES + topic_length
    bodies_at = table_at + RUN_PER_MESSAGE_BYTES * count
    if bodies_at > end:
        raise RecordError("the run's table runs past the record")
    lengths = _lengths_struct(count).unpack_from(data, table_at)
    closes = bytes(data[bodies_at - count : bodies_at])
    if sum(lengths) != end - bodies_at or closes.strip(b"\0\1"):
        raise RecordError(f"the run's lengths add up to {bodies_at + sum(lengths) - position}, "
                          f"the record is {size} bytes (or a page mark is not 0/1)")
    try:
        topic = bytes(data[position + RUN_HEADER_SIZE_BYTES : table_at]).decode()
    except UnicodeDecodeError:
        raise RecordError("topic is not UTF-8") from None
    return _Run(size, flags, first_id, store_time, inc, topic, lengths, closes, bodies_at)


def _wanted_indices(run: _Run, wanted: tuple[int, int] | None) -> tuple[int, int]:
    """The indices ``low, high`` in ``run`` of the messages ``wanted`` (``(first id,
    count)``, None for all); ``RecordError`` when the run does not hold them."""
    count = len(run.lengths)
    if wanted is None:
        return 0, count
    low, high = wanted[0] - run.first_id, wanted[0] - run.first_id + wanted[1]
    if not 0 <= low < high <= count:
        raise RecordError(f"the run holds ids {run.first_id}..{run.first_id + count - 1}, not "
                          f"{wanted[0]}..{wanted[0] + wanted[1] - 1}")
    return low, high


def _run_bodies(data: bytes | memoryview, run: _Run, low: int, high: int) -> list[bytes]:
    """The bodies of messages ``low .. high - 1`` of ``run`` (sliced in C, no loop)."""
    lengths = run.lengths
    starts = list(accumulate(lengths[low:high], initial=run.bodies_at + sum(lengths[:low])))
    if type(data) is bytes:  # slices of bytes are bytes: no second copy
        return list(map(data.__getitem__, map(slice, starts, starts[1:])))
    return list(map(bytes, map(data.__getitem__, map(slice, starts, starts[1:]))))


def _parse_run(data: bytes | memoryview, position: int, offset: int,
               wanted: tuple[int, int] | None) -> list[Record]:
    """The messages of the run record at ``data[position:]`` (``parse_records``)."""
    run = _check_run(data, position, offset)
    low, high = _wanted_indices(run, wanted)
    marks = list(run.closes[low:high].translate(_MARK_FLAGS))
    if high == len(run.lengths):
        marks[-1] |= run.flags
    return list(map(Record, repeat(offset), repeat(run.size), marks,
                    range(run.first_id + low, run.first_id + high), repeat(run.store_time),
                    repeat(run.incarnation), repeat(run.topic), repeat(b""),
                    _run_bodies(data, run, low, high)))


class Bodies(NamedTuple):
    """What a read of one record's messages needs (``parse_bodies``): ``properties`` is
    None for a run record's messages (they have none), else one block per message."""

    size_bytes: int
    is_control: bool
    incarnation: int
    ids: range
    properties: list[bytes] | None
    bodies: list[bytes]


def parse_bodies(data: bytes | memoryview, position: int, offset: int,
                 wanted: tuple[int, int]) -> Bodies | int:
    """``parse_records`` for a read: the same checks (a run checked whole, its CRC once),
    but the ``wanted`` messages given as their ids and bodies, with no ``Record`` built per
    message; a blank filler's size as an int."""
    if len(data) - position >= 8 and _U32.unpack_from(data, position + 4)[0] == MAGIC_RUN:
        run = _check_run(data, position, offset)
        low, high = _wanted_indices(run, wanted)
        return Bodies(run.size, False, run.incarnation,
                      range(run.first_id + low, run.first_id + high), None,
                      _run_bodies(data, run, low, high))
    parsed = parse_record(data, position, offset)
    if isinstance(parsed, int):
        return parsed
    return Bodies(parsed.size_bytes, parsed.is_control, parsed.incarnation,
                  range(parsed.queue_offset, parsed.queue_offset + 1), [parsed.properties],
                  [parsed.body])


def record_ids(data: bytes | memoryview, position: int, offset: int, size_bytes: int,
               incarnation: int) -> range | None:
    """The message ids that a consume queue's entry ``(offset, size_bytes)`` of
    ``incarnation`` may point at in the record at ``data[position:]``, by its header alone
    (recovery checks entries so, without reading bodies): the record's ids; an empty range
    when the record there is another one (another size, incarnation or kind); None when
    no record header is there at all (damaged bytes: every read checks the CRC and refuses
    them, as for any record damaged before the checkpoint). A header is not checked by
    its CRC here: an empty range may be a damaged header (``CommitLog.misplaced`` tells)."""
    if len(data) - position < RUN_HEADER_SIZE_BYTES:  # shorter than any record's header
        return None
    size, magic, _crc, flags, first_id, physical, _time, inc = _HEAD.unpack_from(data, position)
    if magic not in (MAGIC_MESSAGE, MAGIC_RUN) or physical != offset:
        return None
    if size != size_bytes or inc != incarnation or flags & FLAG_CONTROL:
        return range(0)
    if magic == MAGIC_RUN:
        return range(first_id, first_id + _U32.unpack_from(data, position + _HEAD.size)[0])
    return range(first_id, first_id + 1)


def parse_record(data: bytes | memoryview, position: int, offset: int) -> Record | int:
    """The record at ``data[position:]`` (physical ``offset``), or, for a blank filler,
    its size (an int: skip to the next segment). ``RecordError`` when the bytes there are
    not a valid record: too short, unknown magic (zeros: the end of the log), wrong CRC,
    lengths that do not add up, a physical offset other than ``offset``."""
    remaining = len(data) - position
    if remaining < BLANK_SIZE_BYTES:
        raise RecordError(f"only {remaining} bytes left")
    size, magic = _BLANK.unpack_from(data, position)
    if magic == MAGIC_BLANK:
        if size != remaining:
            raise RecordError(f"blank filler of {size} bytes where {remaining} are left")
        return size
    if magic != MAGIC_MESSAGE:
        raise RecordError("no record here" if size == magic == 0 else f"bad magic {magic:#x}")
    if not HEADER_SIZE_BYTES <= size <= remaining:
        raise RecordError(f"record size {size} outside {HEADER_SIZE_BYTES}..{remaining}")
    end = position + size
    _s, _m, crc, flags, queue_offset, physical, store_time, inc, topic_length = (
        _HEAD_TOPIC.unpack_from(data, position)
    )
    if crc32(data[position + 12 : end]) != crc:
        raise RecordError("CRC mismatch")
    if physical != offset:
        raise RecordError(f"record says it lies at {physical}")
    if flags & ~_KNOWN_FLAGS:
        raise RecordError(f"unknown flags {flags:#x}")
    fields = _fields(data, position, topic_length, end)
    try:
        topic = fields[0].decode()
    except UnicodeDecodeError:
        raise RecordError("topic is not UTF-8") from None
    return Record(offset, size, flags, queue_offset, store_time, inc, topic, fields[1], fields[2])


def _fields(data: bytes | memoryview, position: int, topic_length: int, end: int
            ) -> tuple[bytes, bytes, bytes]:
    """Topic, properties and body of the record at ``data[position:end]`` whose topic is
    ``topic_length`` bytes; ``RecordError`` when the lengths do not add up."""
    topic_at = position + _HEAD_TOPIC.size
    properties_at = topic_at + topic_length + 4
    if properties_at > end:
        raise RecordError("lengths run past the record")
    (properties_length,) = _U32.unpack_from(data, properties_at - 4)
    body_at = properties_at + properties_length + 4
    if body_at > end:
        raise RecordError("lengths run past the record")
    (body_length,) = _U32.unpack_from(data, body_at - 4)
    if body_at + body_length != end:
        raise RecordError(f"lengths add up to {body_at + body_length - position}, the record "
                          f"is {end - position} bytes")
    return (bytes(data[topic_at : properties_at - 4]), bytes(data[properties_at : body_at - 4]),
            bytes(data[body_at:end]))
