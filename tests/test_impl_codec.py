"""Encodings of ``impl``: messages with properties round-trip exactly (hypothesis), keys
sort as their ids do, records round-trip, and damage is reported as corruption."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqsim.impl import CorruptDatabaseError, codec, keys
from rmqsim.impl.retention import pages_to_delete
from rmqsim.model.api import ConsumerMessage, Page

texts = st.text(max_size=50)
properties = st.dictionaries(texts, texts, max_size=8)
ids = st.integers(min_value=0, max_value=keys.MSG_ID_MAX)


@given(payload=st.binary(max_size=2048), props=properties)
def test_message_round_trip(payload: bytes, props: dict[str, str]) -> None:
    value = codec.encode_message(payload, props)
    decoded_payload, decoded_props = codec.decode_message(value)
    assert decoded_payload == payload and type(decoded_payload) is bytes
    assert decoded_props == props and type(decoded_props) is dict


def test_empty_payload_and_properties_and_unicode() -> None:
    assert codec.decode_message(codec.encode_message(b"", {})) == (b"", {})
    props = {"": "", "ключ": "値 ✓", "emoji 🎉": "\u0000 nul inside"}
    assert codec.decode_message(codec.encode_message(b"", props)) == (b"", props)
    assert codec.encode_message(b"abc", {}) == b"\x01abc"  # one byte of overhead


def _with_block(block: bytes, payload: bytes = b"") -> bytes:
    return b"\x02" + len(block).to_bytes(4, "big") + block + payload


@pytest.mark.parametrize(
    "value",
    [
        b"",  # no tag
        b"\x07abc",  # unknown tag
        b"\x02\x00\x00",  # no block length
        b"\x02\x00\x00\x00\x09ab",  # a block longer than the record
        _with_block(b"\x00\x00\x00\x01\x00\x00\x00\x09ab"),  # a key past its block
        _with_block(b"\x00\x00\x00\x01\x00"),  # a key length cut short
        _with_block(b"\x00\x00\x00\x00junk"),  # bytes after the last property
        _with_block(b"\x00\x00\x00\x01\x00\x00\x00\x01\xff\x00\x00\x00\x00"),  # not UTF-8
    ],
)
def test_damaged_message_is_corrupt(value: bytes) -> None:
    with pytest.raises(CorruptDatabaseError):
        codec.decode_message(value)
    with pytest.raises(CorruptDatabaseError):  # a damaged block is never cached
        codec.decode_message(value)


def test_cached_property_blocks_still_give_each_caller_a_fresh_dict() -> None:
    value = codec.encode_message(b"p", {"k": "v"})
    _, first = codec.decode_message(value)
    first["k"] = "changed by a caller"
    assert codec.decode_message(value) == (b"p", {"k": "v"})
    big = {"k": "v" * (codec.PROPERTIES_CACHE_BLOCK_BYTES_MAX + 1)}  # decoded, not cached
    assert codec.decode_message(codec.encode_message(b"", big)) == (b"", big)


@given(inc=st.integers(min_value=0, max_value=keys.INCARNATION_MAX), a=ids, b=ids)
def test_message_keys_sort_as_ids(inc: int, a: int, b: int) -> None:
    assert (keys.msg_key(inc, a) < keys.msg_key(inc, b)) == (a < b)
    assert keys.parse_msg_key(keys.msg_key(inc, a)) == (inc, a)
    begin, end = keys.msg_range(inc)
    assert begin <= keys.msg_key(inc, a) < end


def test_decimal_trap_of_milvus_does_not_apply() -> None:
    """Milvus's decimal keys sort "10" before "9"; big-endian keys do not."""
    assert keys.msg_key(1, 9) < keys.msg_key(1, 10) < keys.msg_key(1, 100)


@given(
    inc=st.integers(min_value=0, max_value=keys.INCARNATION_MAX - 1),
    group=st.text(min_size=1).filter(lambda s: "/" not in s and "\0" not in s),
)
def test_group_keys_stay_inside_their_incarnation(inc: int, group: str) -> None:
    key = keys.group_key(inc, group)
    begin, end = keys.group_range(inc)
    assert begin <= key < end
    assert keys.parse_group_key(key) == (inc, group)


@given(
    end_id=ids,
    size=st.integers(min_value=0, max_value=2**64 - 1),
    closed=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    acked=st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_page_record_round_trip(end_id: int, size: int, closed: int, acked: int | None) -> None:
    page = Page(end_id, size, closed, acked)
    assert codec.decode_page(end_id, codec.encode_page(page)) == page


@given(
    inc=st.integers(min_value=1, max_value=2**64 - 1),
    open_bytes=st.integers(min_value=0, max_value=2**64 - 1),
    trim=st.integers(min_value=0, max_value=2**64 - 1),
)
def test_topic_record_round_trip(inc: int, open_bytes: int, trim: int) -> None:
    record = codec.TopicRecord(inc, open_bytes, trim)
    assert codec.decode_topic(codec.encode_topic(record)) == record


def test_positions_and_format() -> None:
    for position in (-1, 0, 1, 2**63 - 1):
        assert codec.decode_position(codec.encode_position(position)) == position
    with pytest.raises(CorruptDatabaseError):
        codec.decode_position((-2).to_bytes(8, "big", signed=True))
    assert codec.decode_format(codec.encode_format()) == codec.FORMAT_VERSION
    assert codec.decode_format(b"RMQSIM-ROCKSMQ") is None


def test_fast_consumer_message_is_the_contract_class() -> None:
    built = codec.consumer_message(7, b"p", {"k": "v"})
    assert type(built) is ConsumerMessage
    assert built == ConsumerMessage(7, b"p", {"k": "v"})
    assert hash(ConsumerMessage(7, b"p", ())) == hash(codec.consumer_message(7, b"p", ()))
    with pytest.raises(AttributeError):
        built.msg_id = 8  # type: ignore[misc]  # still frozen


def _acked(*pages: tuple[int, int]) -> list[Page]:
    return [Page(end_id, size, 0, acked_ts) for end_id, (size, acked_ts) in enumerate(pages, 1)]


def test_retention_rule() -> None:
    now_calls = []

    def now() -> int:
        now_calls.append(1)
        return 100

    pages = _acked((10, 50), (10, 80), (10, 95))
    # time pass: acked_ts + 10 < 100 for the first two
    assert pages_to_delete(pages, retention_time_s=10, retention_size_bytes=-1, now=now) == 2
    # size pass: total 30; delete while 30 - (deleted + 10) > 10
    assert pages_to_delete(pages, retention_time_s=-1, retention_size_bytes=10, now=now) == 1
    # both disabled: nothing, and the clock is not read
    now_calls.clear()
    assert pages_to_delete(pages, retention_time_s=-1, retention_size_bytes=-1, now=now) == 0
    assert pages_to_delete([], retention_time_s=5, retention_size_bytes=-1, now=now) == 0
    assert now_calls == []
    # size pass continues after the time pass
    assert pages_to_delete(pages, retention_time_s=30, retention_size_bytes=0, now=now) == 2
