"""Reading the whole database back into plain values: on ``open`` (to rebuild the caches)
and for ``snapshot`` (which reports what is on disk, not what the caches believe).

It also checks the layout's invariants, so a damaged database is refused on open with a
``CorruptDatabaseError`` that says which record is wrong, instead of misbehaving later.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from rmqsim.impl import codec, keys
from rmqsim.impl.errors import CorruptDatabaseError
from rmqsim.impl.storage import Store
from rmqsim.model.api import ConsumerMessage, Page, TopicState

__all__ = ["DiskState", "DiskTopic", "read_database", "read_topic"]


@dataclass(slots=True)
class DiskTopic:
    """One live topic as stored."""

    name: str
    record: codec.TopicRecord
    last_id: int  # the name's id high-water mark (0 if nothing was ever produced)
    pages: list[Page]  # closed, retained, in id order
    groups: dict[str, int]  # group -> position
    messages: list[ConsumerMessage] | None = None  # only when read with messages


@dataclass(slots=True)
class DiskState:
    """The whole database."""

    next_incarnation: int
    topics: dict[str, DiskTopic]


#: Decoded page and group records, by their raw bytes. Records are immutable values and
#: decoding is a pure function of the bytes, so a cached result is exactly what decoding
#: again would give; the bytes are still read from the database every time. Snapshots
#: re-read the same few records after nearly every operation. Bounded; errors (corrupt
#: records) are never cached.
DECODE_CACHE_RECORDS = 4096


@functools.lru_cache(maxsize=DECODE_CACHE_RECORDS)
def _page_record(key: bytes, value: bytes) -> tuple[int, Page]:
    """``(incarnation, page)`` of one ``P`` record."""
    incarnation, end_id = keys.parse_page_key(key)
    return incarnation, codec.decode_page(end_id, value)


@functools.lru_cache(maxsize=DECODE_CACHE_RECORDS)
def _group_record(key: bytes, value: bytes) -> tuple[int, str, int]:
    """``(incarnation, group, position)`` of one ``G`` record."""
    incarnation, group = keys.parse_group_key(key)
    return incarnation, group, codec.decode_position(value)


#: Decoded message records for snapshots, by their raw bytes (and the key layout that
#: parses them). A full snapshot decodes every retained message, and the checker takes one
#: after every reopen, retention pass and 64 changes: the same few hundred records again
#: and again (≈1 µs each to decode; a full smoke snapshot went from ≈170 to ≈95 µs). The
#: cached message is shared by every snapshot that lists it, so its properties are
#: read-only (``codec.FrozenProperties``); ``consume`` decodes its own. Bounded in records
#: and in bytes: a larger record is decoded on every read, so the cache holds at most
#: ≈17 MiB. Errors (corrupt records) are never cached, so a damaged record is refused on
#: every read.
MESSAGE_CACHE_RECORDS = 4096
MESSAGE_CACHE_VALUE_BYTES_MAX = 4096


def _message_record(message_keys: Any, key: bytes, value: bytes) -> tuple[int, ConsumerMessage]:
    """``(incarnation, message)`` of one ``m`` record, as a snapshot lists it."""
    if len(value) <= MESSAGE_CACHE_VALUE_BYTES_MAX:
        return _cached_message_record(message_keys, key, value)
    return _decode_message_record(message_keys, key, value)


def _decode_message_record(
    message_keys: Any, key: bytes, value: bytes
) -> tuple[int, ConsumerMessage]:
    incarnation, msg_id = message_keys.parse_msg_key(key)
    payload, properties = codec.decode_message(value)
    frozen = codec.FrozenProperties(properties)
    return incarnation, codec.consumer_message(msg_id, payload, frozen)


_cached_message_record = functools.lru_cache(maxsize=MESSAGE_CACHE_RECORDS)(
    _decode_message_record
)


def _corrupt(what: str) -> CorruptDatabaseError:
    return CorruptDatabaseError(f"the database breaks rmqsim's layout: {what}")


def read_database(store: Store, *, with_messages: bool) -> DiskState:
    """Every record of ``store``, checked. Messages are read only if ``with_messages``."""
    next_incarnation: int | None = None
    hwms: dict[str, int] = {}
    records: dict[str, codec.TopicRecord] = {}
    groups: dict[int, dict[str, int]] = {}
    pages: dict[int, list[Page]] = {}
    try:
        for key, value in store.scan_meta():
            tag = key[:1]
            if key == keys.FORMAT_KEY:
                continue  # checked by Store.open
            if key == keys.COUNTER_KEY:
                next_incarnation = codec.decode_u64(value, "incarnation counter")
            elif tag == keys.TAG_TOPIC:
                records[key[1:].decode("utf-8")] = codec.decode_topic(value)
            elif tag == keys.TAG_HWM:
                hwms[key[1:].decode("utf-8")] = codec.decode_u64(value, "high-water mark")
            elif tag == keys.TAG_GROUP:
                incarnation, group, position = _group_record(key, value)
                groups.setdefault(incarnation, {})[group] = position
            elif tag == keys.TAG_PAGE:
                incarnation, page = _page_record(key, value)
                pages.setdefault(incarnation, []).append(page)
            else:
                raise _corrupt(f"unknown metadata key {key[:40]!r}")
    except UnicodeDecodeError as exc:
        raise _corrupt(f"a metadata key cannot be parsed ({exc})") from None
    if next_incarnation is None:
        raise _corrupt("the incarnation counter record is missing")

    by_incarnation: dict[int, DiskTopic] = {}
    topics: dict[str, DiskTopic] = {}
    for name, record in records.items():
        last_id = hwms.get(name, 0)
        if not 0 < record.incarnation < next_incarnation:
            raise _corrupt(
                f"topic {name!r} has incarnation {record.incarnation}, outside "
                f"[1, {next_incarnation})"
            )
        if record.incarnation in by_incarnation:
            raise _corrupt(f"topic {name!r} shares incarnation {record.incarnation}")
        if not 0 <= record.trim_id <= last_id:
            raise _corrupt(f"topic {name!r} has trim id {record.trim_id} > last id {last_id}")
        topic_pages = pages.pop(record.incarnation, [])
        _check_pages(name, topic_pages, record.trim_id, last_id)
        topic = DiskTopic(name, record, last_id, topic_pages, groups.pop(record.incarnation, {}))
        by_incarnation[record.incarnation] = topic
        topics[name] = topic
    if groups or pages:
        orphans = sorted(set(groups) | set(pages))
        raise _corrupt(f"groups or pages of incarnations {orphans[:5]} that no topic has")

    if with_messages:
        _read_messages(store, topics, by_incarnation)
    return DiskState(next_incarnation, topics)


def _read_messages(
    store: Store, topics: dict[str, DiskTopic], by_incarnation: dict[int, DiskTopic]
) -> None:
    """Fill in every topic's messages from ``store``, checked: each belongs to a topic,
    and each topic holds exactly the ids after its trim id up to its last id."""
    for topic in topics.values():
        topic.messages = []
    message_keys = store.message_keys
    owner_incarnation = -1
    owner_messages: list[ConsumerMessage] = []
    for key, value in store.scan_messages():
        incarnation, message = _message_record(message_keys, key, value)
        if incarnation != owner_incarnation:  # keys run in incarnation order
            owner = by_incarnation.get(incarnation)
            if owner is None or owner.messages is None:
                raise _corrupt(
                    f"message {message.msg_id} of incarnation {incarnation} has no topic"
                )
            owner_incarnation, owner_messages = incarnation, owner.messages
        owner_messages.append(message)
    for topic in topics.values():
        assert topic.messages is not None
        ids = [message.msg_id for message in topic.messages]
        expected = list(range(topic.record.trim_id + 1, topic.last_id + 1))
        if ids != expected:
            raise _corrupt(
                f"topic {topic.name!r} stores ids {ids[:3]}..{ids[-3:]}, expected "
                f"({topic.record.trim_id}, {topic.last_id}]"
            )


def read_topic(
    store: Store,
    name: str,
    messages_from: int | None,
    topic_key: bytes,
    hwm_key: bytes,
) -> tuple[TopicState, dict[str, int]] | None:
    """One topic's state as stored and its groups (group -> position), or None if it
    does not exist; only its messages with id >= ``messages_from`` (all when None).
    Costs what that topic holds (and only the tail of its messages), not the whole
    database. ``topic_key`` and ``hwm_key`` are its ``T`` and ``H`` keys (the caller's
    cache holds them built).
    """
    raw = store.get_meta(topic_key)
    if raw is None:
        return None
    record = codec.decode_topic(raw)
    raw_hwm = store.get_meta(hwm_key)
    last_id = codec.decode_u64(raw_hwm, "high-water mark") if raw_hwm is not None else 0
    first_id = record.trim_id + 1 if messages_from is None else max(messages_from, 0)
    incarnation = record.incarnation
    message_keys = store.message_keys
    group_records, page_records, message_records = store.scan_ranges(
        (
            keys.group_range(incarnation),
            keys.page_range(incarnation),
            message_keys.msg_range(incarnation, first_id),
        )
    )
    groups: dict[str, int] = {}
    for key, value in group_records:
        _, group, position = _group_record(key, value)
        groups[group] = position
    pages = [_page_record(key, value)[1] for key, value in page_records]
    _check_pages(name, pages, record.trim_id, last_id)
    messages = tuple(_message_record(message_keys, key, value)[1] for key, value in message_records)
    state = TopicState(messages, tuple(pages), record.open_page_bytes, last_id)
    return state, groups


def _check_pages(name: str, topic_pages: list[Page], trim_id: int, last_id: int) -> None:
    """Closed pages: ascending end ids inside the retained range, acked ones a prefix."""
    previous_end = trim_id
    seen_unacked = False
    for page in topic_pages:
        if not previous_end < page.end_id <= last_id:
            raise _corrupt(
                f"topic {name!r} has a page ending at {page.end_id}, outside "
                f"({previous_end}, {last_id}]"
            )
        if page.acked_ts is None:
            seen_unacked = True
        elif seen_unacked:
            raise _corrupt(f"topic {name!r} has an acked page after an unacked one")
        previous_end = page.end_id
