"""The stream record (docs/STREAM.md "Encoding"), written and read by ``impl.stream``.

Format version 1: ``RSTM``, version byte, then big-endian unsigned fields (type u16,
message id u64, timestamp u64, counted hash keys u32 each, counted rows of row id u64 and
timestamp u64, counted payload bytes). No pickle, nothing executable. This is the
implementation's own reader and writer of the record the contract fixes, so that a
stream written by the model is read by the implementation and the other way round.
"""

from __future__ import annotations

import struct

from rmqsim.model.memo import BytesMemo
from rmqsim.model.stream.api import TYPE_CODES, MsgType, Row, TsMsg

__all__ = [
    "RECORD_MAGIC",
    "RECORD_VERSION",
    "RecordError",
    "forget_unpacked",
    "pack_record",
    "unpack_record",
]

RECORD_MAGIC = b"RSTM"
RECORD_VERSION = 1
_FIXED = struct.Struct(">4sBHQQ")
_U32 = struct.Struct(">I")
_ROW = struct.Struct(">QQ")


class RecordError(ValueError):
    """Bytes that are not a whole version-1 stream record."""


def pack_record(msg: TsMsg) -> bytes:
    """The record of a message that ``validate_pack`` accepted."""
    out = bytearray(
        _FIXED.pack(RECORD_MAGIC, RECORD_VERSION, msg.msg_type, msg.msg_id, msg.timestamp)
    )
    out += _U32.pack(len(msg.hash_keys))
    for key in msg.hash_keys:
        out += _U32.pack(key)
    out += _U32.pack(len(msg.rows))
    for row in msg.rows:
        out += _ROW.pack(row.row_id, row.timestamp)
    out += _U32.pack(len(msg.payload))
    out += msg.payload
    return bytes(out)


def _counted(data: bytes, offset: int, item_bytes: int, what: str) -> tuple[int, int]:
    """(count, offset after the count) of a counted section that fits in ``data``."""
    if offset + _U32.size > len(data):
        raise RecordError(f"record ends before the {what} count (byte {offset})")
    (count,) = _U32.unpack_from(data, offset)
    offset += _U32.size
    if offset + count * item_bytes > len(data):
        raise RecordError(f"record announces {count} {what} past its end")
    return count, offset


#: At most this many records are remembered (then the memory starts again, empty).
_UNPACKED_KEPT = 8192
_UNPACKED_MAX_BYTES = 1024
#: Records unpacked lately (``bytes`` of at most ``_UNPACKED_MAX_BYTES``) and their
#: messages: every stream consuming a channel reads the same records, and a message is
#: immutable, so a record is unpacked once and its message shared.
_UNPACKED: BytesMemo[TsMsg] = BytesMemo(
    lambda data: _unpacked(data), kept=_UNPACKED_KEPT, max_bytes=_UNPACKED_MAX_BYTES
)


def forget_unpacked() -> None:
    """Empty ``_UNPACKED`` (a measurement's way of running starts cold)."""
    _UNPACKED.clear()


def unpack_record(data: bytes) -> TsMsg:
    """The message of a whole record; ``RecordError`` for anything else. A record
    unpacked lately is not unpacked again (``_UNPACKED``)."""
    return _UNPACKED(data)


def _unpacked(data: bytes) -> TsMsg:
    """``unpack_record``'s reading of the record, field by field."""
    if len(data) < _FIXED.size:
        raise RecordError(f"record of {len(data)} bytes is shorter than its header")
    magic, version, code, msg_id, timestamp = _FIXED.unpack_from(data, 0)
    if magic != RECORD_MAGIC:
        raise RecordError(f"magic {magic!r} is not {RECORD_MAGIC!r}")
    if version != RECORD_VERSION:
        raise RecordError(f"record version {version} is not {RECORD_VERSION}")
    if code not in TYPE_CODES:
        raise RecordError(f"message type {code} is unknown")
    count, offset = _counted(data, _FIXED.size, _U32.size, "hash keys")
    keys = struct.unpack_from(f">{count}I", data, offset)
    offset += count * _U32.size
    count, offset = _counted(data, offset, _ROW.size, "rows")
    rows = tuple(Row(*_ROW.unpack_from(data, offset + i * _ROW.size)) for i in range(count))
    offset += count * _ROW.size
    count, offset = _counted(data, offset, 1, "payload bytes")
    if offset + count != len(data):
        raise RecordError(f"{len(data) - offset - count} bytes after the payload")
    return TsMsg(MsgType(code), msg_id, timestamp, tuple(keys), data[offset:], rows)
