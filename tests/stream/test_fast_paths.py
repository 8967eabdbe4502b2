"""The stream layer's fast paths answer what the slow ways answer.

``validate_pack``'s fast path (``_is_plain_valid_pack``) accepts only packs that the
field-by-field checks (``_checked_pack``) accept, with the same messages: a pack of exact
types skips those checks, so a fast path that let through one value they refuse (a bool
id, an int subclass, a list where a tuple is checked, a DML message with a timestamp...)
would let a malformed pack be written. Every value below is tried in every field of
valid messages and packs, and random mixes of them, against both.

The memories (a pack validated once, a record decoded once, a name checked once, an
operation's messages converted once) answer only for what they saw: another pack, record,
name or operation is checked, decoded or converted anew."""

from __future__ import annotations

from dataclasses import replace
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqsim.conformance.stream.side import pack_of
from rmqsim.impl.stream.codec import RecordError, unpack_record
from rmqsim.model.api import InvalidArgumentError, validate_name
from rmqsim.model.stream.api import (
    MAX_HASH_KEY,
    MAX_MSG_ID,
    MAX_TIMESTAMP,
    InvalidPackError,
    MsgPack,
    MsgPosition,
    MsgType,
    Row,
    TsMsg,
    _checked_pack,
    _is_plain_valid_pack,
    validate_pack,
)
from rmqsim.model.stream.codec import MessageDecodeError, decode_msg, encode_msg
from rmqsim.scenarios.stream.ops import INSERT, Broadcast, Produce, StreamMsg


class _Int(int):
    """An int subclass: the checks accept it, the fast path must leave it to them."""


class _Code(IntEnum):
    INSERT = 400
    UNKNOWN = 999


class _Msg(TsMsg):
    """A TsMsg subclass (no fields of its own)."""

    __slots__ = ()


def _ints(high: int) -> list[Any]:
    return [0, 1, high, high + 1, -1, 2**64, True, False, 1.0, _Int(1), None, "1"]


#: Field -> the values tried in it (valid ones, and every kind of wrong one).
MSG_VALUES: dict[str, list[Any]] = {
    "msg_type": [*MsgType, 400, 402, 1200, 999, -1, True, 400.0, _Code.INSERT, _Code.UNKNOWN,
                 _Int(400), "INSERT", None],
    "msg_id": _ints(MAX_MSG_ID),
    "timestamp": _ints(MAX_TIMESTAMP),
    "hash_keys": [(), (0,), (1, 2), (MAX_HASH_KEY,), (MAX_HASH_KEY + 1,), (-1,), (True,),
                  (1.0,), (_Int(1),), [3], [3, 4], ["a"], None, "ab", b"\x01"],
    "payload": [b"", b"x", bytearray(b"x"), "x", None, memoryview(b"x")],
    "rows": [(), (Row(1, 5),), (Row(1, 5), Row(2, 6)), (Row(-1, 5),), (Row(1, MAX_TIMESTAMP + 1),),
             (Row(True, 5),), (Row(1, 5.0),), (Row(_Int(1), 5),), ((1, 5),), [Row(1, 5)],
             [Row(1, 5), Row(2, 6)], None, "r"],
}  # fmt: skip

BASE_MSGS = (
    TsMsg(MsgType.INSERT, 1, 0, (7,), b"p", (Row(1, 5),)),
    TsMsg(MsgType.DELETE, 2, 0, (1, 2), b"", (Row(1, 5), Row(2, 6))),
    TsMsg.time_tick(9),
    TsMsg(MsgType.CREATE_COLLECTION, 3, 4, (0, 5), b"schema"),
    TsMsg(MsgType.FLUSH, 4, 4, ()),
)

POSITION = MsgPosition.at("ch0", 1, "g", 0)

PACK_VALUES: dict[str, list[Any]] = {
    "begin_ts": _ints(MAX_TIMESTAMP),
    "end_ts": _ints(MAX_TIMESTAMP),
    "start_positions": [(), (POSITION,), [POSITION], ("ch0",), None],
    "end_positions": [(), (POSITION, POSITION), [POSITION], (None,), None],
    "msgs": [(), BASE_MSGS, list(BASE_MSGS), (BASE_MSGS[0], "msg"), (_Msg(MsgType.INSERT, 1, 0,
             (7,), b"", (Row(1, 5),)),), None, "msgs"],
}  # fmt: skip


def _checked(pack: object, need_keys: bool) -> tuple[str, Any]:
    try:
        return "ok", _checked_pack(pack, need_keys)
    except InvalidPackError as exc:
        return "error", str(exc)


def _assert_same_verdict(pack: object, need_keys: bool) -> bool:
    """The fast path accepts only what the checks accept; validate_pack says what they
    say. Returns whether the fast path took the pack."""
    checked = _checked(pack, need_keys)
    fast = _is_plain_valid_pack(pack, need_keys)
    if fast:
        assert checked == ("ok", pack.msgs), (pack, need_keys, checked)  # type: ignore[attr-defined]
    try:
        got: tuple[str, Any] = "ok", validate_pack(pack, need_keys)
    except InvalidPackError as exc:
        got = "error", str(exc)
    assert got == checked
    return fast


def _msg_variants() -> list[TsMsg]:
    variants = []
    for base in BASE_MSGS:
        for field_name, values in MSG_VALUES.items():
            variants += [replace(base, **{field_name: value}) for value in values]
    return variants


@pytest.mark.parametrize("need_keys", [True, False])
def test_every_field_value_in_a_message_gets_the_checks_verdict(need_keys: bool) -> None:
    variants = _msg_variants()
    fast = [_assert_same_verdict(MsgPack((msg,)), need_keys) for msg in variants]
    # Both ways are exercised: the fast path takes the well-formed exact-typed variants
    # (the base messages among them), and leaves the others to the checks.
    assert all(_is_plain_valid_pack(MsgPack((msg,)), True) for msg in BASE_MSGS[:4])
    assert 20 < sum(fast) < len(variants) - 100, sum(fast)


@pytest.mark.parametrize("need_keys", [True, False])
def test_every_field_value_in_a_pack_gets_the_checks_verdict(need_keys: bool) -> None:
    base = MsgPack(BASE_MSGS[:3], 1, 2, (POSITION,), (POSITION,))
    assert _assert_same_verdict(base, need_keys)
    for field_name, values in PACK_VALUES.items():
        for value in values:
            _assert_same_verdict(replace(base, **{field_name: value}), need_keys)
    for junk in (None, [BASE_MSGS[0]], (BASE_MSGS[0],), BASE_MSGS[0], "pack"):
        assert not _assert_same_verdict(junk, need_keys)


_messages = st.builds(
    TsMsg,
    **{name: st.sampled_from(values) for name, values in MSG_VALUES.items()},
)


@settings(max_examples=150, derandomize=True, deadline=None, database=None)
@given(msgs=st.lists(_messages, max_size=3), need_keys=st.booleans(),
       begin_ts=st.sampled_from(PACK_VALUES["begin_ts"]))  # fmt: skip
def test_random_mixes_get_the_checks_verdict(
    msgs: list[TsMsg], need_keys: bool, begin_ts: Any
) -> None:
    _assert_same_verdict(MsgPack(tuple(msgs), begin_ts), need_keys)


def test_a_pack_validated_for_broadcast_is_checked_again_for_produce() -> None:
    """``produce`` needs a hash key on every message, ``broadcast`` does not: what a
    broadcast's check remembers does not pass a keyless pack to ``produce``."""
    keyless = MsgPack((TsMsg(MsgType.FLUSH, 1, 4, ()),))
    assert validate_pack(keyless, need_keys=False) == keyless.msgs
    with pytest.raises(InvalidPackError, match="no hash key"):
        validate_pack(keyless, need_keys=True)
    assert validate_pack(keyless, need_keys=False) == keyless.msgs


def test_a_pack_of_a_list_is_checked_every_time() -> None:
    """A pack holding a list can change after its check: it is never remembered."""
    msgs = [BASE_MSGS[0]]
    pack = MsgPack(msgs)  # type: ignore[arg-type]  # the list is the point
    assert validate_pack(pack, need_keys=True) == (BASE_MSGS[0],)
    msgs.append(replace(BASE_MSGS[0], msg_id=-1))
    with pytest.raises(InvalidPackError, match=r"pack.msgs\[1\].msg_id"):
        validate_pack(pack, need_keys=True)


def test_a_record_is_decoded_by_its_bytes() -> None:
    """Records of the same length differing in one byte decode to their own messages;
    an undecodable record is refused after a good one of the same length."""
    first = encode_msg(TsMsg(MsgType.INSERT, 1, 0, (7,), b"a", (Row(1, 5),)))
    second = encode_msg(TsMsg(MsgType.INSERT, 1, 0, (7,), b"b", (Row(1, 5),)))
    assert len(first) == len(second)
    for _ in range(2):
        assert decode_msg(first).payload == b"a"
        assert decode_msg(second).payload == b"b"
        assert decode_msg(bytearray(second)).payload == b"b"  # type: ignore[arg-type]
    with pytest.raises(MessageDecodeError):
        decode_msg(b"RSTX" + first[4:])
    for _ in range(2):  # the implementation's reader too
        assert unpack_record(first).payload == b"a"
        assert unpack_record(second).payload == b"b"
        assert unpack_record(bytearray(second)).payload == b"b"  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        unpack_record(b"RSTX" + first[4:])


class _SneakyName(str):
    """A str that hashes and compares as a valid name but holds another."""

    def __hash__(self) -> int:
        return hash("ch0")

    def __eq__(self, other: object) -> bool:
        return other == "ch0"


@pytest.mark.parametrize("bad", ["", "a/b", "a\0b", "x" * 5000, _SneakyName("a/b"), 7])
def test_a_bad_name_is_refused_after_good_ones(bad: object) -> None:
    for good in ("ch0", "g", "x" * 300):
        assert validate_name("topic", good) == good
    for _ in range(2):  # and again
        with pytest.raises(InvalidArgumentError):
            validate_name("topic", bad)


def _msg(msg_id: int) -> StreamMsg:
    return StreamMsg(INSERT, msg_id, 0, (1,), b"", ((msg_id, 5),))


def test_each_operation_is_converted_to_its_own_pack() -> None:
    """Equal operations are other objects: each gets the pack of its own messages; one
    operation object gets the same pack every time."""
    first, second, again = (Produce("p", (_msg(i),)) for i in (1, 2, 1))
    assert [m.msg_id for m in pack_of(first).msgs] == [1]
    assert [m.msg_id for m in pack_of(second).msgs] == [2]
    assert pack_of(first) is pack_of(first) and pack_of(again) == pack_of(first)
    assert [m.msg_id for m in pack_of(Broadcast("p", (_msg(3),))).msgs] == [3]


def test_forget_memories_empties_every_memory() -> None:
    """``rmqsim bench`` times each way of running the same operations from cold: nothing
    one way remembered may speed up the next."""
    import rmqsim.conformance.stream.side as side
    import rmqsim.impl.stream.codec as impl_codec
    import rmqsim.model.api as model_api
    import rmqsim.model.stream.api as stream_api
    import rmqsim.model.stream.codec as model_codec

    record = encode_msg(BASE_MSGS[0])
    decode_msg(record), unpack_record(record), validate_name("topic", "ch0")
    validate_pack(pack_of(Produce("p", (_msg(1),))), need_keys=True)
    memories = (side._PACKS, stream_api._VALID_PACKS, model_codec._DECODED,
                impl_codec._UNPACKED, model_api._VALID_NAMES)  # fmt: skip
    assert all(memories)
    side.forget_memories()
    assert not any(memories)
