"""How a ``TsMsg`` is stored in a queue message's payload (docs/STREAM.md "Encoding").

A versioned, fixed-layout binary record; no pickle, nothing executable. Every integer is
big-endian and unsigned:

    offset  size       field
    0       4          magic b"RSTM"
    4       1          version (1)
    5       2          msg_type (the MsgType code)
    7       8          msg_id
    15      8          timestamp
    23      4          k = number of hash keys, then k x 4 bytes: the keys
    ...     4          r = number of rows, then r x 16 bytes: row_id (8), timestamp (8)
    ...     4          p = payload length, then p bytes: the payload

The record ends exactly after the payload. The queue message's properties are left empty.
A queue id inside a ``MsgPosition`` is 8 bytes little-endian signed (``MsgPosition.at``).
"""

from __future__ import annotations

import struct

from rmqsim.model.memo import BytesMemo
from rmqsim.model.stream.api import TYPE_CODES, MsgType, Row, TsMsg

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "MessageDecodeError",
    "decode_msg",
    "encode_msg",
    "forget_decoded",
]

MAGIC = b"RSTM"
FORMAT_VERSION = 1
_HEAD = struct.Struct(">4sBHQQ")
_COUNT = struct.Struct(">I")
_ROW = struct.Struct(">QQ")


class MessageDecodeError(ValueError):
    """A queue payload that is not a stream message of a version this code reads."""


def encode_msg(msg: TsMsg) -> bytes:
    """The record of a validated message (``validate_pack`` checked every field's range)."""
    parts = [
        _HEAD.pack(MAGIC, FORMAT_VERSION, int(msg.msg_type), msg.msg_id, msg.timestamp),
        _COUNT.pack(len(msg.hash_keys)),
        struct.pack(f">{len(msg.hash_keys)}I", *msg.hash_keys),
        _COUNT.pack(len(msg.rows)),
        *(_ROW.pack(row.row_id, row.timestamp) for row in msg.rows),
        _COUNT.pack(len(msg.payload)),
        msg.payload,
    ]
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def take(self, layout: struct.Struct) -> tuple[int, ...]:
        end = self.offset + layout.size
        if end > len(self.data):
            raise MessageDecodeError(f"record truncated at byte {self.offset} of {len(self.data)}")
        values = layout.unpack_from(self.data, self.offset)
        self.offset = end
        return values

    def count(self, item_bytes: int) -> int:
        (count,) = self.take(_COUNT)
        if self.offset + count * item_bytes > len(self.data):
            raise MessageDecodeError(f"record truncated: {count} items announced at {self.offset}")
        return int(count)


#: At most this many records are remembered (then the memory starts again, empty).
_DECODED_KEPT = 8192
_DECODED_MAX_BYTES = 1024
#: Records decoded lately (``bytes`` of at most ``_DECODED_MAX_BYTES``) and their messages:
#: every consumer of a channel reads the same records, and a message is immutable, so a
#: record is decoded once and its message shared.
_DECODED: BytesMemo[TsMsg] = BytesMemo(
    lambda data: _decoded(data), kept=_DECODED_KEPT, max_bytes=_DECODED_MAX_BYTES
)


def forget_decoded() -> None:
    """Empty ``_DECODED`` (a measurement's way of running starts cold)."""
    _DECODED.clear()


def decode_msg(data: bytes) -> TsMsg:
    """The message stored in ``data``; ``MessageDecodeError`` if it is not a whole record
    of this format (wrong magic, unknown version or type, truncated, trailing bytes).
    A record decoded lately is not decoded again (``_DECODED``)."""
    return _DECODED(data)


def _decoded(data: bytes) -> TsMsg:
    """``decode_msg``'s decoding: the record read field by field."""
    reader = _Reader(data)
    magic, version, code, msg_id, timestamp = reader.take(_HEAD)
    if magic != MAGIC:
        raise MessageDecodeError(f"not a stream message (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise MessageDecodeError(f"stream message format version {version} is not {FORMAT_VERSION}")
    if code not in TYPE_CODES:
        raise MessageDecodeError(f"unknown message type {code}")
    key_count = reader.count(4)
    keys = reader.take(struct.Struct(f">{key_count}I"))
    rows = tuple(Row(*reader.take(_ROW)) for _ in range(reader.count(_ROW.size)))
    payload_bytes = reader.count(1)
    payload = data[reader.offset : reader.offset + payload_bytes]
    if reader.offset + payload_bytes != len(data):
        raise MessageDecodeError(f"{len(data) - reader.offset - payload_bytes} trailing bytes")
    return TsMsg(MsgType(code), msg_id, timestamp, tuple(keys), payload, rows)
