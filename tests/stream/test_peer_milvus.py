"""Milvus's MQ-neutral stream tests, ported: ``factory_stream_test.go`` (the suite
``testMsgStreamOperation`` runs on every MQ), the stream-level cases of
``mq_rocksmq_msgstream_test.go`` and the wrapper-level seeks of ``stream_test.go``.

Each test is named after the Go test it ports. Go's blocking ``consume(ctx, stream)``
becomes ``consume()``, which returns ``None`` when nothing is deliverable; a Go test that
relies on the stream blocking asserts ``None`` instead. Where our contract deliberately
differs from Milvus, the docstring says **Differs:** and why (docs/STREAM.md).
"""

from __future__ import annotations

import random

import pytest

from rmqsim.model.api import InvalidArgumentError
from rmqsim.model.stream.api import (
    InvalidPackError,
    InvalidPositionError,
    MsgPack,
    MsgPosition,
    MsgStream,
    MsgType,
    NoProducerError,
    NotSubscribedError,
    StreamFactory,
    SubscriptionPosition,
    TsMsg,
)

from .helpers import ddl, delete, drain, insert, insert_at, pack, tick

# --------------------------------------------------------------------------- helpers


def _create_stream(factory: StreamFactory, channels: list[str], tt: bool = False):
    """Go's createStream: a plain producer and a consumer of a fresh group, from earliest."""
    producer = factory.new_msg_stream()
    producer.as_producer(channels)
    consumer = factory.new_tt_msg_stream() if tt else factory.new_msg_stream()
    consumer.as_consumer(channels, "sub-" + "-".join(channels))
    return producer, consumer


def _seek_consumer(
    factory: StreamFactory, channels: list[str], positions, group: str, tt: bool
) -> MsgStream:
    """Go's createAndSeekConsumer (a new group, then ``Seek(positions, false)``)."""
    consumer = factory.new_tt_msg_stream() if tt else factory.new_msg_stream()
    consumer.as_consumer(channels, group)
    consumer.seek(list(positions), include_current=False)
    return consumer


def _received(stream: MsgStream) -> int:
    """Go's receiveAndValidateMsg: messages received until nothing more is deliverable."""
    return sum(len(got.msgs) for got in drain(stream))


def _ten_inserts(first: int = 0) -> MsgPack:
    """Go's loop of getTsMsg(Insert, i): message id i, timestamp i."""
    return pack(*(insert(i, (i, i, 0)) for i in range(first, first + 10)))


def _repack_to_every_key(msgs, buckets):
    """Go's repackFunc: each message to the bucket of each of its keys."""
    out: dict[int, list[TsMsg]] = {}
    for msg, keys in zip(msgs, buckets, strict=True):
        for key in keys:
            out.setdefault(key, []).append(msg)
    return out


# --------------------------------------------------------------------------- factory_stream_test.go


def test_insert(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.produce(pack(insert_at(1), insert_at(3)))
    assert _received(consumer) == 2


def test_delete(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a"])
    producer.produce(pack(delete(1, (1, 1, 0))))
    assert _received(consumer) == 1


def test_time_tick(stream_factory: StreamFactory) -> None:
    """Two ticks produced (not broadcast) to one channel, read by a time-tick consumer.
    **Differs:** Go counts "1 message" loosely (its reader stops at the first empty pack);
    our packs never carry ticks, so the two ticks give two empty packs, checked exactly."""
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["a"])
    consumer = stream_factory.new_tt_msg_stream()
    consumer.as_consumer(["a"], "g")
    producer.produce(pack(TsMsg.time_tick(1), TsMsg.time_tick(3)))
    assert [(p.begin_ts, p.end_ts, p.msgs) for p in drain(consumer)] == [(0, 1, ()), (1, 3, ())]


def test_broad_cast(stream_factory: StreamFactory) -> None:
    """Two ticks broadcast to two channels: 2 x 2 messages arrive. **Differs:** Go reads
    them with a time-tick consumer and counts ticks, which our time-tick packs never carry,
    so the count is taken with a plain consumer."""
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.broadcast(pack(TsMsg.time_tick(1), TsMsg.time_tick(3)))
    assert _received(consumer) == 4


def test_insert_with_repack(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.set_repack_func(_repack_to_every_key)
    producer.produce(pack(insert_at(1), insert_at(3)))
    assert _received(consumer) == 2


def test_insert_repack_func_with_different_client(stream_factory: StreamFactory) -> None:
    """One two-row insert, hash values [1, 3], split by the repack function into both rows."""
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.set_repack_func(_repack_to_every_key)
    producer.produce(pack(insert(1, (1, 1, 1), (3, 1, 3))))
    # Go's repackFunc sends the whole message once per key: both keys map to channel b.
    assert _received(consumer) == 2


def test_delete_repack_func_with_different_client(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.set_repack_func(_repack_to_every_key)
    producer.produce(pack(delete(1, (1, 1, 1))))
    assert _received(consumer) == 1


def test_default_repack(stream_factory: StreamFactory) -> None:
    """TimeTick, Insert and Delete in one pack, default repack: 3 messages arrive."""
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.produce(pack(TsMsg.time_tick(1), insert_at(2), delete(3, (3, 3, 0))))
    assert _received(consumer) == 3


def test_time_ticker_and_insert(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"], tt=True)
    producer.broadcast(tick(0))
    producer.produce(pack(insert_at(1), insert_at(3)))
    producer.broadcast(tick(5))
    assert _received(consumer) == 2


def test_time_ticker_no_seek(stream_factory: StreamFactory) -> None:
    """Two fresh consumers of the same channels see the same pack boundaries."""
    producer, consumer = _create_stream(stream_factory, ["a"], tt=True)
    producer.broadcast(tick(0))
    producer.produce(pack(insert_at(1), insert_at(19)))
    producer.broadcast(tick(5))
    producer.produce(pack(insert_at(14), insert_at(9)))
    producer.broadcast(tick(11))
    producer.broadcast(tick(15))
    first = [consumer.consume() for _ in range(3)]
    consumer.close()
    again = stream_factory.new_tt_msg_stream()
    again.as_consumer(["a"], "second")
    second = [again.consume() for _ in range(3)]
    assert [p.begin_ts for p in first] == [p.begin_ts for p in second] == [0, 5, 11]


def test_seek_to_last(stream_factory: StreamFactory) -> None:
    """Seek after message 5, then read until the latest id: exactly 4 messages (6..9)."""
    producer, consumer = _create_stream(stream_factory, ["a"])
    producer.produce(_ten_inserts())
    packs = drain(consumer)
    assert [p.msgs[0].msg_id for p in packs] == list(range(10))
    resumed = _seek_consumer(stream_factory, ["a"], packs[5].end_positions, "unknown", tt=False)
    latest = resumed.get_latest_msg_id("a")
    seen = []
    while True:
        got = resumed.consume()
        assert got is not None and len(got.msgs) == 1
        seen.append(got.msgs[0].msg_id)
        if latest <= got.msgs[0].position.queue_id:
            break
    assert seen == [6, 7, 8, 9]


def _ticker_seek_log(producer: MsgStream) -> None:
    producer.broadcast(tick(0))
    producer.produce(pack(insert_at(1), insert_at(3), insert_at(19)))
    producer.broadcast(tick(5))
    producer.produce(pack(insert_at(14), insert_at(9)))
    producer.broadcast(tick(11))
    producer.produce(pack(insert_at(12), insert_at(13)))
    producer.broadcast(tick(15))
    producer.broadcast(tick(20))


def test_time_ticker_seek(stream_factory: StreamFactory) -> None:
    """Also mq_rocksmq_msgstream_test.go's TestStream_RmqTtMsgStream_Seek."""
    producer, consumer = _create_stream(stream_factory, ["a"], tt=True)
    _ticker_seek_log(producer)
    packs = [consumer.consume() for _ in range(4)]
    shape = [
        (
            len(p.msgs),
            p.begin_ts,
            p.end_ts,
            p.start_positions[0].timestamp,
            p.end_positions[0].timestamp,
        )
        for p in packs
    ]
    assert shape == [(2, 0, 5, 0, 5), (1, 5, 11, 5, 11), (3, 11, 15, 11, 15), (1, 15, 20, 15, 20)]
    consumer.close()
    from_start = _seek_consumer(stream_factory, ["a"], packs[2].start_positions, "s1", tt=True)
    first, second = from_start.consume(), from_start.consume()
    assert [m.begin_ts for m in first.msgs] == [14, 12, 13]
    assert [m.begin_ts for m in second.msgs] == [19]
    from_end = _seek_consumer(stream_factory, ["a"], packs[2].end_positions, "s2", tt=True)
    assert [m.begin_ts for m in from_end.consume().msgs] == [19]


def test_time_tick_unmarshal_header(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"], tt=True)
    producer.broadcast(tick(0))
    producer.produce(pack(insert_at(1), insert_at(3)))
    producer.broadcast(tick(5))
    got = drain(consumer)
    assert [m.msg_type for p in got for m in p.msgs] == [MsgType.INSERT, MsgType.INSERT]


def _rand_msg_packs(rng: random.Random, inserts_per_pack: int, packs: int, delta_ts: int):
    """Go's createRandMsgPacks + sendMsgPacks: an insert pack (random timestamps in the
    coming interval) then a tick, ``packs`` times; ticks at delta_ts, 2 * delta_ts, ..."""
    out = []
    for step in range(1, packs + 1):
        low, high = (step - 1) * delta_ts + 1, step * delta_ts
        rows = [rng.randint(low, high) for _ in range(inserts_per_pack)]
        msg_ids = range(step * 100, step * 100 + inserts_per_pack)  # distinct, as Go's are
        out.append(pack(*(insert(i, (i, ts, 0)) for i, ts in zip(msg_ids, rows, strict=True))))
        out.append(tick(step * delta_ts))
    return out


def _send(producer: MsgStream, packs: list[MsgPack]) -> None:
    for index, msg_pack in enumerate(packs):  # Go: even index produce, odd broadcast
        (producer.produce if index % 2 == 0 else producer.broadcast)(msg_pack)


def _two_producers(factory: StreamFactory) -> int:
    rng = random.Random(1)
    total = 0
    for channel, per_pack in (("a", 3), ("b", 5)):
        producer = factory.new_msg_stream()
        producer.as_producer([channel])
        _send(producer, _rand_msg_packs(rng, per_pack, 10, 10))
        total += per_pack * 10
    return total


def test_time_ticker_stream1(stream_factory: StreamFactory) -> None:
    """Two producers on two channels, random inserts between ticks: every message lies in
    its pack, and the consumer gets every message. (Go reads only half the packs and
    subtracts one pack per channel from its count; reading all packs checks more.)"""
    total = _two_producers(stream_factory)
    consumer = stream_factory.new_tt_msg_stream()
    consumer.as_consumer(["a", "b"], "g")
    packs = drain(consumer)
    for got in packs:
        for msg in got.msgs:
            assert got.begin_ts < msg.begin_ts <= got.end_ts
    assert sum(len(p.msgs) for p in packs) == total
    assert [p.end_ts for p in packs] == list(range(10, 101, 10))


def test_time_ticker_stream2(stream_factory: StreamFactory) -> None:
    """The same data, the consumer re-created before every pack and seeked to the previous
    pack's end positions: nothing lost, nothing repeated."""
    total = _two_producers(stream_factory)
    received: list[MsgPack] = []
    for step in range(10):
        if not received:
            consumer = stream_factory.new_tt_msg_stream()
            consumer.as_consumer(["a", "b"], "g0")
        else:
            positions = received[-1].end_positions
            consumer = _seek_consumer(stream_factory, ["a", "b"], positions, f"g{step}", tt=True)
        got = consumer.consume()
        for msg in got.msgs:
            assert got.begin_ts < msg.begin_ts <= got.end_ts
        received.append(got)
        consumer.close()
    assert sum(len(p.msgs) for p in received) == total


def test_mq_msg_stream_seek(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a"])
    producer.produce(_ten_inserts())
    packs = [consumer.consume() for _ in range(10)]
    assert [p.msgs[0].msg_id for p in packs] == list(range(10))
    consumer.close()
    resumed = _seek_consumer(stream_factory, ["a"], packs[5].end_positions, "other", tt=False)
    assert [resumed.consume().msgs[0].msg_id for _ in range(4)] == [6, 7, 8, 9]


def test_mq_msg_stream_seek_invalid_message(stream_factory: StreamFactory) -> None:
    """**Differs:** Go seeks a new group to an id never written and expects no error and the
    first message received to be ID 1 (the reset to earliest plus the exclusive seek's
    skip-one drop message 0 and repeat the rest). Our seek refuses an id never issued with
    InvalidPosition, and a position below the stored ids loses nothing."""
    producer, consumer = _create_stream(stream_factory, ["a"])
    producer.produce(_ten_inserts())
    last = [consumer.consume() for _ in range(10)][-1].end_positions[0]
    unwritten = MsgPosition.at("a", last.queue_id + 13, last.group, last.timestamp)
    with pytest.raises(InvalidPositionError, match="never issued"):
        _seek_consumer(stream_factory, ["a"], [unwritten], "second", tt=False)
    before = MsgPosition.at("a", 0, last.group, last.timestamp)
    second = _seek_consumer(stream_factory, ["a"], [before], "third", tt=False)
    producer.produce(_ten_inserts(10))
    assert second.consume().msgs[0].msg_id == 0


def test_mq_msg_stream_seek_latest(stream_factory: StreamFactory) -> None:
    producer, _ = _create_stream(stream_factory, ["a"])
    producer.produce(_ten_inserts())
    latest = stream_factory.new_msg_stream()
    latest.as_consumer(["a"], "latest", SubscriptionPosition.LATEST)
    producer.produce(_ten_inserts(10))
    assert [latest.consume().msgs[0].msg_id for _ in range(10)] == list(range(10, 20))
    assert latest.consume() is None


def test_broadcast_mark(stream_factory: StreamFactory) -> None:
    """**Differs:** Go's ``MarshalFailTsMsg`` has no twin (our messages always encode); a
    malformed message is the nearest failure and is refused before anything is written."""
    producer, _ = _create_stream(stream_factory, ["a", "b"])
    ids = producer.broadcast(tick(0))
    assert sorted(ids) == ["a", "b"] and all(len(v) == 1 for v in ids.values())
    ids = producer.broadcast(pack(insert_at(1), insert_at(3)))
    assert sorted(ids) == ["a", "b"] and all(len(v) == 2 for v in ids.values())
    with pytest.raises(InvalidPackError):
        producer.broadcast(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidPackError):
        producer.broadcast(pack(TsMsg(MsgType.INSERT, 1, 0, (0,))))  # no rows


# ---------------------------------------------------------------- mq_rocksmq_msgstream_test.go


def test_mq_msg_stream_as_producer(stream_factory: StreamFactory) -> None:
    """**Differs:** Go ignores an empty channel name (and every name after it); ours is
    InvalidArgument and adds no channel."""
    stream = stream_factory.new_msg_stream()
    with pytest.raises(InvalidArgumentError):
        stream.as_producer([""])
    assert stream.snapshot().producer_channels == ()


def test_mq_msg_stream_as_consumer(stream_factory: StreamFactory) -> None:
    stream = stream_factory.new_msg_stream()
    stream.as_consumer(["a"], "g")
    stream.as_consumer(["a"], "g")
    assert [c.channel for c in stream.snapshot().channels] == ["a"]


def test_mq_msg_stream_get_produce_channels(stream_factory: StreamFactory) -> None:
    stream = stream_factory.new_msg_stream()
    assert stream.snapshot().producer_channels == ()
    stream.as_producer(["a"])
    assert stream.snapshot().producer_channels == ("a",)


def test_mq_msg_stream_produce(stream_factory: StreamFactory) -> None:
    with pytest.raises(NoProducerError):
        stream_factory.new_msg_stream().produce(pack(insert_at(1)))


def test_mq_msg_stream_broadcast(stream_factory: StreamFactory) -> None:
    stream = stream_factory.new_msg_stream()
    stream.as_producer(["a"])
    with pytest.raises(InvalidPackError):
        stream.broadcast(None)  # type: ignore[arg-type]


def test_mq_msg_stream_consume(stream_factory: StreamFactory) -> None:
    """Go: a consumer whose context is cancelled returns a nil pack. Ours: consume() returns
    None when nothing is deliverable (it never blocks)."""
    stream = stream_factory.new_msg_stream()
    stream.as_consumer(["a"], "g")
    assert stream.consume() is None


def test_mq_msg_stream_seek_not_subscribed(stream_factory: StreamFactory) -> None:
    stream = stream_factory.new_msg_stream()
    stream.as_consumer(["a"], "g")
    with pytest.raises(InvalidPositionError, match="not consumed"):
        stream.seek([MsgPosition.at("b", 1, "g", 0)])
    with pytest.raises(NotSubscribedError):
        stream.get_latest_msg_id("b")


def test_stream_rmq_msg_stream_insert(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"])
    producer.produce(pack(insert_at(1), insert_at(3)))
    assert _received(consumer) == 2


def test_stream_rmq_tt_msg_stream_insert(stream_factory: StreamFactory) -> None:
    producer, consumer = _create_stream(stream_factory, ["a", "b"], tt=True)
    producer.broadcast(tick(0))
    producer.produce(pack(insert_at(1), insert_at(3)))
    producer.broadcast(tick(5))
    assert _received(consumer) == 2


def test_stream_rmq_tt_msg_stream_duplicated_ids(stream_factory: StreamFactory) -> None:
    """Three identical inserts (same id) and two CreateCollection with one id between tt0
    and tt15: the pack holds 1 insert and 2 DDL; a seek to its start positions replays the
    same 3. **Differs:** duplicates are detected by equal content, not by id alone (a
    distinct insert reusing an id is delivered: Milvus #18216)."""
    producer, consumer = _create_stream(stream_factory, ["a"], tt=True)
    producer.broadcast(tick(0))
    producer.produce(pack(*(insert(1, (1, 1, 0)) for _ in range(3))))
    producer.produce(
        pack(ddl(MsgType.CREATE_COLLECTION, 1, 1), ddl(MsgType.CREATE_COLLECTION, 1, 1))
    )
    producer.broadcast(tick(15))
    got = consumer.consume()
    assert (len(got.msgs), got.begin_ts, got.end_ts) == (3, 0, 15)
    again = _seek_consumer(stream_factory, ["a"], got.start_positions, "replay", tt=True).consume()
    assert again.msgs == got.msgs
    assert again.msgs[0].begin_ts == 1


def test_stream_rmq_tt_msg_stream_as_consumer_with_position(
    stream_factory: StreamFactory,
) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["a"])
    for ts in range(100):
        producer.broadcast(tick(ts))
    consumer = stream_factory.new_tt_msg_stream()
    consumer.as_consumer(["a"], "g", SubscriptionPosition.LATEST)
    producer.broadcast(tick(1000))
    got = consumer.consume()
    assert (got.end_ts, got.msgs) == (1000, ())


# --------------------------------------------------------------------------- stream_test.go


def _sent(factory: StreamFactory, count: int) -> tuple[MsgStream, list[int]]:
    producer = factory.new_msg_stream()
    producer.as_producer(["a"])
    ids = producer.produce(pack(*(insert_at(ts) for ts in range(1, count + 1))))["a"]
    return producer, ids


def test_concurrent_stream(stream_factory: StreamFactory) -> None:
    """Two consumers of different groups each receive every message, in order."""
    _, ids = _sent(stream_factory, 20)
    for group in ("g1", "g2"):
        consumer = stream_factory.new_msg_stream()
        consumer.as_consumer(["a"], group)
        assert [p.msgs[0].position.queue_id for p in drain(consumer)] == ids


def test_concurrent_stream_and_subscribe_last(stream_factory: StreamFactory) -> None:
    """After subscribing Latest, the latest id is the last one sent, and nothing stored is
    delivered."""
    _, ids = _sent(stream_factory, 20)
    consumer = stream_factory.new_msg_stream()
    consumer.as_consumer(["a"], "g", SubscriptionPosition.LATEST)
    assert consumer.get_latest_msg_id("a") == ids[-1]
    assert consumer.consume() is None


def test_concurrent_stream_and_seek_inclusive(stream_factory: StreamFactory) -> None:
    _, ids = _sent(stream_factory, 20)
    consumer = stream_factory.new_msg_stream()
    consumer.as_consumer(["a"], "g")
    consumer.seek([MsgPosition.at("a", ids[10], "g", 0)], include_current=True)
    assert [p.msgs[0].position.queue_id for p in drain(consumer)] == ids[10:]


def test_concurrent_stream_and_seek_no_inclusive(stream_factory: StreamFactory) -> None:
    _, ids = _sent(stream_factory, 20)
    consumer = stream_factory.new_msg_stream()
    consumer.as_consumer(["a"], "g")
    consumer.seek([MsgPosition.at("a", ids[10], "g", 0)], include_current=False)
    assert [p.msgs[0].position.queue_id for p in drain(consumer)] == ids[11:]


def test_concurrent_stream_and_seek_to_last(stream_factory: StreamFactory) -> None:
    producer, _ = _sent(stream_factory, 20)
    consumer = stream_factory.new_msg_stream()
    consumer.as_consumer(["a"], "g")
    consumer.seek([MsgPosition.at("a", consumer.get_latest_msg_id("a"), "g", 0)])
    assert consumer.consume() is None
    new_ids = producer.produce(pack(insert_at(50)))["a"]
    assert [p.msgs[0].position.queue_id for p in drain(consumer)] == new_ids
