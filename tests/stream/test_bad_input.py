"""STREAM.md "Errors": malformed packs and positions get typed errors and change nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmqsim.model.api import InvalidArgumentError
from rmqsim.model.stream.api import (
    InvalidPackError,
    InvalidPositionError,
    MsgPack,
    MsgPosition,
    MsgType,
    Row,
    SeekAfterConsumeError,
    StreamClosedError,
    StreamFactory,
    TsMsg,
)

from .helpers import drain, insert, insert_at, pack, tick

GOOD = insert_at(1)

BAD_MESSAGES = {
    "unknown type": TsMsg(999, 1, 1, hash_keys=(0,)),  # type: ignore[arg-type]
    "bool type": TsMsg(True, 1, 1, hash_keys=(0,)),  # type: ignore[arg-type]
    "negative timestamp": TsMsg(MsgType.FLUSH, 1, -1, hash_keys=(0,)),
    "float timestamp": TsMsg(MsgType.FLUSH, 1, 1.5, hash_keys=(0,)),  # type: ignore[arg-type]
    "bool timestamp": TsMsg(MsgType.FLUSH, 1, True, hash_keys=(0,)),
    "timestamp over 64 bits": TsMsg(MsgType.FLUSH, 1, 2**64, hash_keys=(0,)),
    "negative row timestamp": insert(1, (1, -5, 0)),
    "str row timestamp": replace(GOOD, rows=(Row(1, "5"),)),  # type: ignore[arg-type]
    "negative msg id": TsMsg(MsgType.FLUSH, -1, 1, hash_keys=(0,)),
    "str hash key": TsMsg(MsgType.FLUSH, 1, 1, hash_keys=("0",)),  # type: ignore[arg-type]
    "hash key over 32 bits": TsMsg(MsgType.FLUSH, 1, 1, hash_keys=(2**32,)),
    "hash keys not a list": TsMsg(MsgType.FLUSH, 1, 1, hash_keys=0),  # type: ignore[arg-type]
    "no hash key": TsMsg(MsgType.FLUSH, 1, 1),
    "str payload": TsMsg(MsgType.FLUSH, 1, 1, (0,), "x"),  # type: ignore[arg-type]
    "rows and keys differ": replace(GOOD, hash_keys=(0, 1)),
    "insert without rows": TsMsg(MsgType.INSERT, 1, 0, ()),
    "insert with a timestamp": replace(GOOD, timestamp=3),
    "rows on a flush": TsMsg(MsgType.FLUSH, 1, 1, (0,), rows=(Row(1, 1),)),
    "row not a Row": replace(GOOD, rows=((1, 1),)),  # type: ignore[arg-type]
    "not a TsMsg": "insert",
}


@pytest.mark.parametrize("fault", sorted(BAD_MESSAGES))
def test_a_malformed_message_is_refused_and_nothing_is_written(
    stream_factory: StreamFactory, fault: str
) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    bad = MsgPack(msgs=(GOOD, BAD_MESSAGES[fault]))  # type: ignore[arg-type]
    with pytest.raises(InvalidPackError):
        producer.produce(bad)
    if fault != "no hash key":  # broadcast needs no key
        with pytest.raises(InvalidPackError):
            producer.broadcast(bad)
    reader = stream_factory.new_msg_stream()
    reader.as_consumer(["c0"], "r")
    assert reader.consume() is None


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [GOOD],
        MsgPack(msgs=GOOD),  # type: ignore[arg-type]
        MsgPack(msgs=(GOOD,), begin_ts=-1),
        MsgPack(msgs=(GOOD,), end_ts=2.0),  # type: ignore[arg-type]
        MsgPack(msgs=(GOOD,), start_positions=("c0",)),  # type: ignore[arg-type]
    ],
    ids=["none", "list", "msgs-not-a-list", "negative-begin", "float-end", "bad-positions"],
)
def test_a_malformed_pack_is_refused(stream_factory: StreamFactory, bad: object) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    with pytest.raises(InvalidPackError):
        producer.produce(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidPackError):
        producer.broadcast(bad)  # type: ignore[arg-type]


def _subscribed(factory: StreamFactory, tt: bool):
    producer = factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    producer.produce(pack(insert_at(1)))
    stream = factory.new_tt_msg_stream() if tt else factory.new_msg_stream()
    stream.as_consumer(["c0", "c1"], "g")
    return stream


BAD_POSITIONS = {
    "unknown channel": [MsgPosition.at("nowhere", 1, "g", 0)],
    "empty id": [MsgPosition("c0", b"", "g", 0)],
    "short id": [MsgPosition("c0", b"\x01", "g", 0)],
    "str id": [MsgPosition("c0", "1", "g", 0)],  # type: ignore[arg-type]
    "negative timestamp": [MsgPosition.at("c0", 1, "g", -1)],
    "channel twice": [MsgPosition.at("c0", 1, "g", 0), MsgPosition.at("c0", 1, "g", 0)],
    "never issued id": [MsgPosition.at("c0", 2, "g", 0)],
    "not a position": ["c0"],
    "not a list": MsgPosition.at("c0", 1, "g", 0),
}


@pytest.mark.parametrize("tt", [False, True], ids=["plain", "tt"])
@pytest.mark.parametrize("fault", sorted(BAD_POSITIONS))
def test_a_malformed_position_is_refused_and_nothing_moves(
    stream_factory: StreamFactory, fault: str, tt: bool
) -> None:
    stream = _subscribed(stream_factory, tt)
    good = MsgPosition.at("c1", 0, "g", 0)
    before = stream.snapshot()
    with pytest.raises(InvalidPositionError):
        stream.seek([good, *BAD_POSITIONS[fault]] if fault != "not a list" else good)  # type: ignore[arg-type]
    assert stream.snapshot() == before


def test_a_time_tick_stream_seeks_only_before_consuming(stream_factory: StreamFactory) -> None:
    stream = _subscribed(stream_factory, tt=True)
    assert stream.consume() is None
    with pytest.raises(SeekAfterConsumeError):
        stream.seek([MsgPosition.at("c0", 1, "g", 0)])


def test_a_closed_stream_refuses_everything_but_close(stream_factory: StreamFactory) -> None:
    for stream in (_subscribed(stream_factory, False), _subscribed(stream_factory, True)):
        stream.close()
        stream.close()
        calls = [
            lambda s=stream: s.as_producer(["c0"]),
            lambda s=stream: s.as_consumer(["c0"], "g"),
            lambda s=stream: s.set_repack_func(None),
            lambda s=stream: s.produce(None),  # closed is checked before arguments
            lambda s=stream: s.broadcast(tick(1)),
            lambda s=stream: s.consume(),
            lambda s=stream: s.seek([]),
            lambda s=stream: s.get_latest_msg_id("c0"),
        ]
        for call in calls:
            with pytest.raises(StreamClosedError):
                call()
        assert stream.snapshot().closed


def test_bad_subscription_arguments(stream_factory: StreamFactory) -> None:
    stream = stream_factory.new_tt_msg_stream()
    with pytest.raises(InvalidArgumentError):
        stream.as_consumer(["c0"], "")
    with pytest.raises(InvalidArgumentError):
        stream.as_consumer(["c0"], "g", "earliest-ish")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        stream.set_repack_func(42)  # type: ignore[arg-type]
    assert stream.snapshot().channels == ()


def test_consume_before_subscribing(stream_factory: StreamFactory) -> None:
    from rmqsim.model.stream.api import NotSubscribedError

    for stream in (stream_factory.new_msg_stream(), stream_factory.new_tt_msg_stream()):
        with pytest.raises(NotSubscribedError):
            stream.consume()


def test_an_undecodable_queue_message_is_passed_over_and_listed(
    stream_factory: StreamFactory,
) -> None:
    """A payload that is not a stream message (another writer on the channel's queue topic)
    is never delivered; the stream lists its id."""
    from rmqsim.model.api import ProducerMessage

    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    consumer = stream_factory.new_tt_msg_stream()
    consumer.as_consumer(["c0"], "g")
    producer.produce(pack(insert_at(1)))
    (junk_id,) = stream_factory.mq.produce("c0", [ProducerMessage(b"not a stream message")])
    producer.broadcast(tick(2))
    assert [len(p.msgs) for p in drain(consumer)] == [1]
    assert consumer.snapshot().channels[0].undecodable_ids == (junk_id,)


def test_seek_to_no_position_changes_nothing(stream_factory: StreamFactory) -> None:
    for stream in (stream_factory.new_msg_stream(), stream_factory.new_tt_msg_stream()):
        stream.seek([])
        stream.as_consumer(["c0"], "g")
        before = stream.snapshot()
        stream.seek([])
        assert stream.snapshot() == before


def test_a_repack_function_answering_no_list_is_refused(stream_factory: StreamFactory) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    producer.set_repack_func(lambda msgs, buckets: {0: None})
    with pytest.raises(InvalidPackError, match="not a list"):
        producer.produce(pack(insert_at(1)))
    producer.set_repack_func(lambda msgs, buckets: [msgs])
    with pytest.raises(InvalidPackError, match="not a dict"):
        producer.produce(pack(insert_at(1)))
