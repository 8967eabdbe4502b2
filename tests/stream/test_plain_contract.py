"""STREAM.md "The plain stream": one message per pack, seek by id, latest id."""

from __future__ import annotations

import pytest

from rmqsim.model.stream.api import (
    MsgPosition,
    MsgType,
    NotSubscribedError,
    StreamFactory,
    SubscriptionPosition,
)

from .helpers import drain, insert_at, pack, tick


def _streams(factory: StreamFactory, channels: tuple[str, ...] = ("c0",), group: str = "g"):
    producer = factory.new_msg_stream()
    producer.as_producer(list(channels))
    consumer = factory.new_msg_stream()
    consumer.as_consumer(list(channels), group)
    return producer, consumer


def test_every_message_is_its_own_pack(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    ids = producer.produce(pack(insert_at(3), insert_at(8)))["c0"]
    producer.broadcast(tick(9))
    packs = drain(consumer)
    assert [len(p.msgs) for p in packs] == [1, 1, 1]
    assert [p.msgs[0].msg_type for p in packs] == [
        MsgType.INSERT,
        MsgType.INSERT,
        MsgType.TIME_TICK,
    ]
    first = packs[0]
    assert (first.begin_ts, first.end_ts) == (3, 3)
    position = MsgPosition.at("c0", ids[0], "g", 3)
    assert first.start_positions == first.end_positions == (position,)
    assert first.msgs[0].position == position


def test_channels_are_taken_in_turn(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory, ("a", "b"))
    producer.produce(pack(*(insert_at(ts, key=0) for ts in (1, 2, 3))))
    producer.produce(pack(insert_at(4, key=1)))
    order = [(p.end_positions[0].channel, p.begin_ts) for p in drain(consumer)]
    assert order == [("a", 1), ("b", 4), ("a", 2), ("a", 3)]


def test_seek_is_exclusive_by_default(stream_factory: StreamFactory) -> None:
    """Milvus's TestStream_MqMsgStream_Seek: keep the position of message 5, resume at 6."""
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(*(insert_at(ts) for ts in range(10))))
    packs = drain(consumer)
    resumed = stream_factory.new_msg_stream()
    resumed.as_consumer(["c0"], "other")
    resumed.seek(list(packs[5].end_positions))
    assert [p.begin_ts for p in drain(resumed)] == [6, 7, 8, 9]


def test_seek_with_include_current_starts_at_the_position(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(*(insert_at(ts) for ts in range(1, 6))))
    packs = drain(consumer)
    consumer.seek(list(packs[2].end_positions), include_current=True)
    assert [p.begin_ts for p in drain(consumer)] == [3, 4, 5]


def test_seek_applies_every_position(stream_factory: StreamFactory) -> None:
    """**[Milvus #7535: only the first position was applied.]**"""
    producer, consumer = _streams(stream_factory, ("a", "b"))
    ids = producer.broadcast(pack(*(insert_at(ts) for ts in range(1, 4))))
    drain(consumer)
    consumer.seek(
        [MsgPosition.at("a", ids["a"][0], "g", 0), MsgPosition.at("b", ids["b"][1], "g", 0)]
    )
    got = [(p.end_positions[0].channel, p.begin_ts) for p in drain(consumer)]
    assert sorted(got) == [("a", 2), ("a", 3), ("b", 3)]


def test_seek_below_the_stored_messages_delivers_all_of_them(stream_factory: StreamFactory) -> None:
    """An id no longer (or never) stored below the first stored one: everything stored after
    it is delivered, none skipped. **[Milvus: the reset to the earliest message plus the
    exclusive seek's skip-one drops the earliest message whatever its id.]**"""
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(*(insert_at(ts) for ts in range(1, 4))))
    consumer.seek([MsgPosition.at("c0", 0, "g", 0)])
    assert [p.begin_ts for p in drain(consumer)] == [1, 2, 3]


def test_subscribing_latest_delivers_only_new_messages(stream_factory: StreamFactory) -> None:
    """Milvus's TestStream_MqMsgStream_SeekLatest."""
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    producer.produce(pack(*(insert_at(ts) for ts in range(10))))
    consumer = stream_factory.new_msg_stream()
    consumer.as_consumer(["c0"], "g", SubscriptionPosition.LATEST)
    producer.produce(pack(*(insert_at(ts) for ts in range(10, 20))))
    assert [p.begin_ts for p in drain(consumer)] == list(range(10, 20))


def test_an_existing_group_keeps_its_position(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(*(insert_at(ts) for ts in range(1, 5))))
    consumer.consume()
    consumer.close()
    again = stream_factory.new_msg_stream()
    again.as_consumer(["c0"], "g")
    assert [p.begin_ts for p in drain(again)] == [2, 3, 4]


def test_subscribing_a_channel_twice_is_a_no_op(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(insert_at(1)))
    consumer.as_consumer(["c0"], "other")
    assert [c.group for c in consumer.snapshot().channels] == ["g"]
    assert len(drain(consumer)) == 1


def test_get_latest_msg_id(stream_factory: StreamFactory) -> None:
    """The last stored queue id of a consumed channel, -1 when none is stored."""
    producer, consumer = _streams(stream_factory)
    assert consumer.get_latest_msg_id("c0") == -1
    ids = producer.produce(pack(insert_at(1), insert_at(2)))["c0"]
    assert consumer.get_latest_msg_id("c0") == ids[-1]
    with pytest.raises(NotSubscribedError):
        consumer.get_latest_msg_id("elsewhere")
    with pytest.raises(NotSubscribedError):
        producer.get_latest_msg_id("c0")


def test_streams_are_deterministic(make_stream_factory) -> None:
    def run(factory: StreamFactory):
        producer, consumer = _streams(factory, ("a", "b", "c"))
        tt = factory.new_tt_msg_stream()
        tt.as_consumer(["a", "b", "c"], "tt")
        for ts in range(1, 30, 3):
            producer.produce(pack(*(insert_at(ts + k, key=ts * k) for k in range(3))))
            producer.broadcast(tick(ts + 2))
        return drain(consumer), drain(tt), consumer.snapshot(), tt.snapshot()

    first = run(make_stream_factory())
    second = run(make_stream_factory())
    assert first == second
    assert [[m.position for m in p.msgs] for p in first[1]] == [
        [m.position for m in p.msgs] for p in second[1]
    ]


def test_streams_and_factories_meet_the_protocols(stream_factory: StreamFactory) -> None:
    from rmqsim.model.api import MessageQueue
    from rmqsim.model.stream.api import MsgStream, StreamKind

    assert isinstance(stream_factory, StreamFactory)
    assert isinstance(stream_factory.mq, MessageQueue)
    plain, tt = stream_factory.new_msg_stream(), stream_factory.new_tt_msg_stream()
    assert isinstance(plain, MsgStream) and isinstance(tt, MsgStream)
    assert (plain.kind, tt.kind) == (StreamKind.PLAIN, StreamKind.TIME_TICK)
    assert (plain.snapshot().kind, tt.snapshot().kind) == (plain.kind, tt.kind)
