"""STREAM.md "Encoding": the byte layout of a message in a queue payload."""

from __future__ import annotations

import struct

import pytest

from rmqsim.model.stream.api import MsgPosition, MsgType, Row, TsMsg
from rmqsim.model.stream.codec import (
    FORMAT_VERSION,
    MAGIC,
    MessageDecodeError,
    decode_msg,
    encode_msg,
)

from .helpers import insert

SAMPLES = [
    TsMsg.time_tick(0),
    TsMsg.time_tick(2**64 - 1, msg_id=2**63 - 1),
    TsMsg(MsgType.CREATE_COLLECTION, 7, 12, (3, 2**32 - 1), b"schema\x00bytes"),
    insert(5, (1, 10, 0), (2, 11, 9)),
    TsMsg(MsgType.DELETE, 6, 0, (4,), b"", (Row(2**63 - 1, 3),)),
]


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: m.msg_type.name)
def test_every_message_round_trips(msg: TsMsg) -> None:
    assert decode_msg(encode_msg(msg)) == msg
    assert type(decode_msg(encode_msg(msg)).msg_type) is MsgType


def test_the_byte_layout_is_the_documented_one() -> None:
    msg = TsMsg(MsgType.INSERT, 9, 0, (7,), b"py", (Row(4, 5),))
    expected = (
        b"RSTM"
        + bytes([1])
        + struct.pack(">H", 400)
        + struct.pack(">Q", 9)
        + struct.pack(">Q", 0)
        + struct.pack(">I", 1)
        + struct.pack(">I", 7)
        + struct.pack(">I", 1)
        + struct.pack(">QQ", 4, 5)
        + struct.pack(">I", 2)
        + b"py"
    )
    assert encode_msg(msg) == expected
    assert (MAGIC, FORMAT_VERSION) == (b"RSTM", 1)


def test_a_position_id_is_eight_little_endian_bytes() -> None:
    position = MsgPosition.at("c", 258, "g", 0)
    assert position.msg_id == b"\x02\x01\x00\x00\x00\x00\x00\x00"
    assert position.queue_id == 258
    assert MsgPosition.at("c", -1, "g", 0).msg_id == b"\xff" * 8


GOOD = encode_msg(insert(5, (1, 10, 0)))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"RSTM",
        b"XSTM" + GOOD[4:],
        GOOD[:4] + bytes([2]) + GOOD[5:],
        GOOD[:5] + struct.pack(">H", 999) + GOOD[7:],
        GOOD[:-1],
        GOOD + b"\x00",
        GOOD[:23] + struct.pack(">I", 2**31) + GOOD[27:],
        b"\x80\x04\x95" + GOOD[3:],  # a pickle's opening bytes are not a record
    ],
    ids=[
        "empty",
        "magic-only",
        "bad-magic",
        "future-version",
        "unknown-type",
        "truncated",
        "trailing-byte",
        "huge-key-count",
        "pickle",
    ],
)
def test_anything_else_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(MessageDecodeError):
        decode_msg(data)
