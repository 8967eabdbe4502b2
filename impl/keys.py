"""Key layout: which bytes name which record.

One keyspace, RocksDB's ``default`` column family, one tag byte first::

    b"C"                                     -> next topic incarnation (u64)
    b"F"                                     -> format record (magic + layout version)
    b"G" | incarnation (u64 BE) | group      -> group position (i64, -1 = from earliest)
    b"H" | topic (UTF-8)                     -> id high-water mark of the *name* (u64);
                                                kept when the topic is destroyed
    b"P" | incarnation (u64 BE) | end_id     -> closed page record
    b"T" | topic (UTF-8)                     -> topic record (incarnation, open page bytes,
                                                trim id)
    b"m" | incarnation (u64 BE) | msg_id     -> one retained message:
                                                codec.encode_message(payload, properties)

Why this shape:
- One column family, because every open of the database pays per family (layout 1 had
  two plus ``default``): each family has its own options, memtable, and after a crash its
  own recovered-WAL flush into a new table file. An open measured ≈2.3 ms with three
  families and ≈1.5 ms with one (tmpfs, 2 cores), and the crash tests reopen constantly.
- Messages take the lower-case tag ``m``, above every metadata tag, so the metadata is
  the one range ``[b"", b"m")`` and the messages ``[b"m", b"n")``: both are read with one
  bounded scan.
- Big-endian fixed-width integers make byte order equal numeric order, so a scan from
  ``(inc, id)`` visits ids in order (the Milvus decimal keys sort 10 before 9).
- Every topic has an *incarnation*, a u64 from a persisted counter that is never reused.
  Messages, groups and pages hang off the incarnation, not the name, so destroying a topic
  is three ``delete_range``s over ``[inc, inc + 1)`` and can never touch another topic
  (Milvus deletes by string prefix, so destroying ``a`` also hit ``ab``'s pages), and a
  re-created topic (new incarnation) can never see old messages.
- Names appear only as the *whole* tail of ``T``/``H`` keys (point lookups, never prefix
  scans), and as the tail after a fixed 9-byte head in ``G`` keys, so no name can be
  mistaken for a prefix of another.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

from rmqsim.impl.errors import CorruptDatabaseError

__all__ = [
    "COLUMN_FAMILIES",
    "COUNTER_KEY",
    "FORMAT_KEY",
    "INCARNATION_MAX",
    "LAYOUT_V1_COLUMN_FAMILIES",
    "META_RANGE",
    "MSGS_RANGE",
    "MSG_ID_MAX",
    "TAG_GROUP",
    "TAG_HWM",
    "TAG_MSG",
    "TAG_PAGE",
    "TAG_TOPIC",
    "group_key",
    "group_range",
    "hwm_key",
    "msg_key",
    "msg_key_packer",
    "msg_range",
    "page_key",
    "page_range",
    "parse_group_key",
    "parse_msg_key",
    "parse_page_key",
    "topic_key",
]

#: The column families of the layout: RocksDB's mandatory ``default`` only.
COLUMN_FAMILIES: tuple[str, ...] = ("default",)
#: Layout 1's families: a database with exactly these is ours, in the old layout.
LAYOUT_V1_COLUMN_FAMILIES: tuple[str, ...] = ("default", "rmqsim_meta", "rmqsim_msgs")

FORMAT_KEY = b"F"
COUNTER_KEY = b"C"
TAG_TOPIC = b"T"
TAG_HWM = b"H"
TAG_GROUP = b"G"
TAG_PAGE = b"P"
TAG_MSG = b"m"
#: ``[begin, end)`` of every metadata record, and of every message record.
META_RANGE: tuple[bytes, bytes] = (b"", TAG_MSG)
MSGS_RANGE: tuple[bytes, bytes] = (TAG_MSG, bytes([TAG_MSG[0] + 1]))

#: Ids and incarnations are u64 on disk; the queue stays below 2**63 so that ``id + 1``
#: and ``inc + 1`` (the exclusive ends of ranges) always fit.
MSG_ID_MAX = 2**63 - 1
INCARNATION_MAX = 2**63 - 1

_U64 = struct.Struct(">Q")
_TAG_U64 = struct.Struct(">cQ")
_TAG_U64_U64 = struct.Struct(">cQQ")


def topic_key(topic: str) -> bytes:
    """``T`` record of a live topic."""
    return TAG_TOPIC + topic.encode("utf-8")


def hwm_key(topic: str) -> bytes:
    """``H`` record: the highest id ever issued under this name."""
    return TAG_HWM + topic.encode("utf-8")


def group_key(incarnation: int, group: str) -> bytes:
    """``G`` record of one consumer group of one topic incarnation."""
    return _TAG_U64.pack(TAG_GROUP, incarnation) + group.encode("utf-8")


def group_range(incarnation: int) -> tuple[bytes, bytes]:
    """``[begin, end)`` of every group key of an incarnation."""
    return _TAG_U64.pack(TAG_GROUP, incarnation), _TAG_U64.pack(TAG_GROUP, incarnation + 1)


def parse_group_key(key: bytes) -> tuple[int, str]:
    """``(incarnation, group)`` of a ``G`` key (read from disk: a malformed one is refused)."""
    if key[:1] != TAG_GROUP or len(key) <= 9:
        raise _malformed("group", key)
    return _U64.unpack_from(key, 1)[0], key[9:].decode("utf-8")


def page_key(incarnation: int, end_id: int) -> bytes:
    """``P`` record of the closed page ending at ``end_id``."""
    return _TAG_U64_U64.pack(TAG_PAGE, incarnation, end_id)


def page_range(incarnation: int, end_id_exclusive: int | None = None) -> tuple[bytes, bytes]:
    """``[begin, end)`` of an incarnation's page keys, all or those below an end id."""
    begin = _TAG_U64_U64.pack(TAG_PAGE, incarnation, 0)
    if end_id_exclusive is None:
        return begin, _TAG_U64_U64.pack(TAG_PAGE, incarnation + 1, 0)
    return begin, _TAG_U64_U64.pack(TAG_PAGE, incarnation, end_id_exclusive)


def parse_page_key(key: bytes) -> tuple[int, int]:
    """``(incarnation, end_id)`` of a ``P`` key (read from disk: a malformed one is refused)."""
    if len(key) != 17 or key[:1] != TAG_PAGE:
        raise _malformed("page", key)
    _, incarnation, end_id = _TAG_U64_U64.unpack(key)
    return incarnation, end_id


def msg_key(incarnation: int, msg_id: int) -> bytes:
    """``m`` record of one message (called once per message written or bounded)."""
    return _TAG_U64_U64.pack(TAG_MSG, incarnation, msg_id)


#: ``msg_key`` without a Python frame per call (the very same bytes): produce's hot loop
#: uses it when the store's ``message_keys`` is this module's layout.
msg_key_packer: Callable[[int, int], bytes] = functools.partial(_TAG_U64_U64.pack, TAG_MSG)


def msg_range(
    incarnation: int, first_id: int = 0, end_id_exclusive: int | None = None
) -> tuple[bytes, bytes]:
    """``[begin, end)`` of an incarnation's message keys, all or ``[first_id, end)``."""
    pack = _TAG_U64_U64.pack
    if end_id_exclusive is None:
        return pack(TAG_MSG, incarnation, first_id), pack(TAG_MSG, incarnation + 1, 0)
    return pack(TAG_MSG, incarnation, first_id), pack(TAG_MSG, incarnation, end_id_exclusive)


def parse_msg_key(key: bytes) -> tuple[int, int]:
    """``(incarnation, msg_id)`` of a message key (read from disk: a malformed one is
    refused)."""
    if len(key) != 17 or key[:1] != TAG_MSG:
        raise _malformed("message", key)
    _, incarnation, msg_id = _TAG_U64_U64.unpack(key)
    return incarnation, msg_id


def _malformed(what: str, key: bytes) -> CorruptDatabaseError:
    # Keys come from the database's scans: a real error, not an assertion, so the refusal
    # stays under ``python -O`` and names what was found.
    return CorruptDatabaseError(
        f"the database breaks rmqsim's layout: a malformed {what} key {key[:40]!r}"
        f" ({len(key)} bytes)"
    )
