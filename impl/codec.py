"""Value encodings: messages (payload + properties) and metadata records. No pickle.

Every value starts with a one-byte *tag* that names its encoding, so a later layout can add
tags and still read old records, and an unknown tag is detected as corruption instead of
being misread.

Message values (``m`` records)::

    0x01 | payload                                   no properties (the common case)
    0x02 | block bytes (u32) | block | payload       block: count (u32) |
                                                     count * (klen u32 | key | vlen u32 | value)

Keys and values of properties are UTF-8; lengths are big-endian u32. The payload is the
rest of the value, so an empty payload is an empty tail and decodes to ``b""``. (Layout 1
had no block length: ``0x02 | count | pairs | payload``.)

Metadata values (see ``keys``)::

    format   b"RMQSIM-ROCKSMQ\\0" | layout version (u16)
    counter  u64
    topic    0x01 | incarnation u64 | open page bytes u64 | trim id u64
    hwm      u64
    group    i64 position (-1 = from the earliest retained message)
    page     0x01 | size_bytes u64 | closed_ts i64 | acked (u8 0/1) | acked_ts i64

Decoders raise ``CorruptDatabaseError`` on anything they do not recognise.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from rmqsim.impl.errors import CorruptDatabaseError
from rmqsim.model.api import ConsumerMessage, Page

__all__ = [
    "FORMAT_MAGIC",
    "FORMAT_VERSION",
    "FrozenProperties",
    "TopicRecord",
    "consumer_message",
    "decode_format",
    "decode_message",
    "decode_page",
    "decode_position",
    "decode_topic",
    "decode_u64",
    "encode_format",
    "encode_message",
    "encode_page",
    "encode_position",
    "encode_topic",
    "encode_u64",
]

FORMAT_MAGIC = b"RMQSIM-ROCKSMQ\x00"
#: Layout version written by this code; ``open`` refuses a database with any other.
#: 1: two column families (metadata, messages); 2: one keyspace (``keys``).
FORMAT_VERSION = 2

MSG_BARE = 0x01
MSG_WITH_PROPERTIES = 0x02
_MSG_BARE_HEADER = bytes([MSG_BARE])
_MSG_PROPERTIES_HEADER = bytes([MSG_WITH_PROPERTIES])
#: Most properties one message may carry, and the longest key or value in UTF-8 bytes.
PROPERTIES_MAX = 2**32 - 1
PROPERTY_BYTES_MAX = 2**32 - 1

TOPIC_RECORD_V1 = 0x01
PAGE_RECORD_V1 = 0x01

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_TOPIC = struct.Struct(">BQQQ")
_PAGE = struct.Struct(">BQqBq")


# --------------------------------------------------------------------------- messages


def encode_message(payload: bytes, properties: Mapping[str, str]) -> bytes:
    """One message value. ``properties`` must already be validated (str -> str).

    Without properties: ``0x01 | payload``. With: ``0x02 | u32 block bytes | block |
    payload``, the block being ``u32 count | (u32 bytes | UTF-8)`` per key and value. The
    block's length comes first so that a reader finds the payload without walking the
    block, and can decode a block it has seen before from its cache.
    """
    if not properties:
        return _MSG_BARE_HEADER + payload
    count = len(properties)
    if count > PROPERTIES_MAX:
        raise ValueError(f"a message may carry at most {PROPERTIES_MAX} properties")
    parts = [_U32.pack(count)]
    for key, value in properties.items():
        for text in (key, value):
            raw = text.encode("utf-8")
            if len(raw) > PROPERTY_BYTES_MAX:
                raise ValueError(f"a property key or value is longer than {PROPERTY_BYTES_MAX}")
            parts.append(_U32.pack(len(raw)))
            parts.append(raw)
    block = b"".join(parts)
    if len(block) > PROPERTY_BYTES_MAX:
        raise ValueError(f"a message's properties take more than {PROPERTY_BYTES_MAX} bytes")
    return b"".join((_MSG_PROPERTIES_HEADER, _U32.pack(len(block)), block, payload))


def decode_message(value: bytes) -> tuple[bytes, dict[str, str]]:
    """``(payload, properties)`` of a message value; properties is a fresh dict."""
    if not value:
        raise CorruptDatabaseError("a message record is empty (no encoding tag)")
    tag = value[0]
    if tag == MSG_BARE:
        return value[1:], {}
    if tag != MSG_WITH_PROPERTIES:
        raise CorruptDatabaseError(f"a message record has unknown encoding tag {tag:#04x}")
    if len(value) < 5:
        raise CorruptDatabaseError("a message record's properties are damaged: no block length")
    (block_bytes,) = _U32.unpack_from(value, 1)
    end = 5 + block_bytes
    if end > len(value):
        raise CorruptDatabaseError(
            f"a message record's properties are damaged: a {block_bytes}-byte block in a "
            f"{len(value)}-byte record"
        )
    block = value[5:end]
    if block_bytes <= PROPERTIES_CACHE_BLOCK_BYTES_MAX:
        pairs = _cached_properties(block)
    else:
        pairs = _decode_properties(block)
    return value[end:], dict(pairs)


#: Decoded property blocks are cached by their bytes (messages of a workload share a few
#: property sets; decoding is a pure function of the bytes, and each caller still gets a
#: fresh dict). Bounded: at most this many blocks of at most this many bytes each.
PROPERTIES_CACHE_BLOCKS = 4096
PROPERTIES_CACHE_BLOCK_BYTES_MAX = 1024


def _decode_properties(block: bytes) -> tuple[tuple[str, str], ...]:
    """The ``(key, value)`` pairs of a properties block; ``CorruptDatabaseError`` if it
    is damaged (it must hold exactly ``count`` pairs, nothing more)."""
    try:
        (count,) = _U32.unpack_from(block, 0)
        offset = 4
        pairs: list[tuple[str, str]] = []
        for _ in range(count):
            (key_len,) = _U32.unpack_from(block, offset)
            offset += 4
            key = block[offset : offset + key_len].decode("utf-8")
            offset += key_len
            (value_len,) = _U32.unpack_from(block, offset)
            offset += 4
            text = block[offset : offset + value_len].decode("utf-8")
            offset += value_len
            if offset > len(block):
                raise ValueError("a property runs past the end of its block")
            pairs.append((key, text))
        if offset != len(block):
            raise ValueError(f"{len(block) - offset} bytes after the last property")
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise CorruptDatabaseError(f"a message record's properties are damaged: {exc}") from None
    return tuple(pairs)


_cached_properties = functools.lru_cache(maxsize=PROPERTIES_CACHE_BLOCKS)(_decode_properties)


def _consumer_message_factory() -> Callable[[int, bytes, Mapping[str, str]], ConsumerMessage]:
    """The fastest correct way to build a ``ConsumerMessage``.

    ``ConsumerMessage`` is a frozen, slotted dataclass: its ``__init__`` goes through
    ``object.__setattr__`` three times, which is most of ``consume``'s Python cost. Writing
    the slots through their member descriptors builds the very same object (same type,
    ``==`` and ``hash``) in about half the time. If the contract class ever stops being
    slotted, fall back to the constructor.
    """
    slots = getattr(ConsumerMessage, "__slots__", ())
    if tuple(slots) != ("msg_id", "payload", "properties"):
        return ConsumerMessage
    new = object.__new__
    # The slots' member descriptors, from the class's namespace: read as attributes of the
    # class, they are the same objects, but a type checker sees the fields' types there.
    members = vars(ConsumerMessage)
    set_id = members["msg_id"].__set__
    set_payload = members["payload"].__set__
    set_properties = members["properties"].__set__
    cls = ConsumerMessage

    def build(msg_id: int, payload: bytes, properties: Mapping[str, str]) -> ConsumerMessage:
        message = new(cls)
        set_id(message, msg_id)
        set_payload(message, payload)
        set_properties(message, properties)
        return message

    probe = build(1, b"p", {"k": "v"})
    if probe != ConsumerMessage(1, b"p", {"k": "v"}):  # pragma: no cover - defensive
        return ConsumerMessage
    return build


#: ``consumer_message(msg_id, payload, properties) -> ConsumerMessage``.
consumer_message = _consumer_message_factory()


class FrozenProperties(dict[str, str]):
    """A message's properties that nobody can change: for a decoded message that several
    snapshots share (``impl.loader``). A ``dict`` in every other way: it compares, prints,
    pickles (process mode sends snapshots through a pipe) and copies like one."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a snapshot's message properties are read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[FrozenProperties], tuple[dict[str, str]]]:
        # The default protocol refills a dict subclass item by item through
        # ``__setitem__``, which refuses; rebuilding from one plain dict does not.
        return (FrozenProperties, (dict(self),))


# --------------------------------------------------------------------------- metadata


def encode_format() -> bytes:
    """The format record this code writes."""
    return FORMAT_MAGIC + _U16.pack(FORMAT_VERSION)


def decode_format(value: bytes) -> int | None:
    """The layout version of a format record, or ``None`` if it is not rmqsim's magic."""
    if len(value) != len(FORMAT_MAGIC) + 2 or not value.startswith(FORMAT_MAGIC):
        return None
    return _U16.unpack_from(value, len(FORMAT_MAGIC))[0]


def encode_u64(value: int) -> bytes:
    """Counters and high-water marks."""
    return _U64.pack(value)


def decode_u64(value: bytes, what: str) -> int:
    """Inverse of ``encode_u64``; ``what`` names the record in the error."""
    if len(value) != 8:
        raise CorruptDatabaseError(f"the {what} record is {len(value)} bytes, expected 8")
    return _U64.unpack(value)[0]


def encode_position(position: int) -> bytes:
    """A group position: -1 or a non-negative id."""
    assert position >= -1, position
    return _I64.pack(position)


def decode_position(value: bytes) -> int:
    """Inverse of ``encode_position``."""
    if len(value) != 8:
        raise CorruptDatabaseError(f"a group position record is {len(value)} bytes, expected 8")
    position = _I64.unpack(value)[0]
    if position < -1:
        raise CorruptDatabaseError(f"a group position is {position}, below -1")
    return position


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """The ``T`` record of a live topic.

    ``trim_id``: every id <= trim_id is gone (never produced under this incarnation, or
    deleted by retention); every id in ``(trim_id, hwm]`` is retained. Ids are consecutive
    and retention deletes a prefix, so this one number is the whole retained range.
    """

    incarnation: int
    open_page_bytes: int
    trim_id: int


def encode_topic(record: TopicRecord) -> bytes:
    return _TOPIC.pack(TOPIC_RECORD_V1, record.incarnation, record.open_page_bytes, record.trim_id)


def decode_topic(value: bytes) -> TopicRecord:
    if len(value) != _TOPIC.size or value[0] != TOPIC_RECORD_V1:
        raise CorruptDatabaseError(f"a topic record is damaged ({value[:1].hex()}, {len(value)} B)")
    _, incarnation, open_page_bytes, trim_id = _TOPIC.unpack(value)
    return TopicRecord(incarnation, open_page_bytes, trim_id)


def encode_page(page: Page) -> bytes:
    """A closed page (its ``end_id`` is in the key)."""
    acked = page.acked_ts is not None
    return _PAGE.pack(
        PAGE_RECORD_V1,
        page.size_bytes,
        page.closed_ts,
        1 if acked else 0,
        page.acked_ts if acked else 0,
    )


def decode_page(end_id: int, value: bytes) -> Page:
    if len(value) != _PAGE.size or value[0] != PAGE_RECORD_V1:
        raise CorruptDatabaseError(f"a page record is damaged ({value[:1].hex()}, {len(value)} B)")
    _, size_bytes, closed_ts, acked, acked_ts = _PAGE.unpack(value)
    if acked not in (0, 1):
        raise CorruptDatabaseError(f"a page record has acked flag {acked}")
    return Page(end_id, size_bytes, closed_ts, acked_ts if acked else None)
