"""STREAM.md "The time-tick stream", rule by rule."""

from __future__ import annotations

from rmqsim.model.api import MQConfig
from rmqsim.model.stream.api import (
    MsgPack,
    MsgType,
    StreamFactory,
    SubscriptionPosition,
    TsMsg,
)

from .helpers import ddl, drain, insert, insert_at, msg_ids, pack, row_ids, tick


def _streams(factory: StreamFactory, channels: tuple[str, ...] = ("c0",), group: str = "g"):
    producer = factory.new_msg_stream()
    producer.as_producer(list(channels))
    consumer = factory.new_tt_msg_stream()
    consumer.as_consumer(list(channels), group)
    return producer, consumer


def test_pack_holds_the_messages_of_its_tick_interval(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(insert_at(1), insert_at(3)))
    assert consumer.consume() is None  # no tick yet: nothing is deliverable
    producer.broadcast(tick(5))
    producer.produce(pack(insert_at(7)))
    producer.broadcast(tick(10))
    first, second = drain(consumer)
    assert (first.begin_ts, first.end_ts, row_ids(first)) == (0, 5, [1, 3])
    assert (second.begin_ts, second.end_ts, row_ids(second)) == (5, 10, [7])
    assert consumer.snapshot().last_tick == 10


def test_a_tick_with_no_data_gives_an_empty_pack(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.broadcast(tick(4))
    producer.broadcast(tick(9))
    packs = drain(consumer)
    assert [(p.begin_ts, p.end_ts, p.msgs) for p in packs] == [(0, 4, ()), (4, 9, ())]


def test_ticks_are_never_merged(stream_factory: StreamFactory) -> None:
    """Each consume() ends its pack at the next tick, however many ticks are stored
    (no pursuit mode)."""
    producer, consumer = _streams(stream_factory)
    for ts in (2, 4, 6, 8):
        producer.produce(pack(insert_at(ts - 1)))
        producer.broadcast(tick(ts))
    packs = drain(consumer)
    assert [(p.begin_ts, p.end_ts) for p in packs] == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert [row_ids(p) for p in packs] == [[1], [3], [5], [7]]


def test_membership_is_by_end_ts(stream_factory: StreamFactory) -> None:
    """A message whose rows straddle a tick waits for the tick that covers its last row."""
    producer, consumer = _streams(stream_factory)
    producer.set_repack_func(lambda msgs, keys: {0: list(msgs)})  # keep the rows together
    producer.produce(pack(insert(1, (1, 3, 0), (2, 7, 0))))
    producer.broadcast(tick(5))
    producer.broadcast(tick(10))
    first, second = drain(consumer)
    assert (row_ids(first), row_ids(second)) == ([], [1, 2])
    assert (second.begin_ts, second.end_ts) == (5, 10)


def test_repeated_and_older_ticks_are_ignored(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.broadcast(tick(5))
    producer.broadcast(tick(5))
    producer.broadcast(tick(3))
    producer.produce(pack(insert_at(6)))
    producer.broadcast(tick(8))
    packs = drain(consumer)
    assert [(p.begin_ts, p.end_ts, row_ids(p)) for p in packs] == [(0, 5, []), (5, 8, [6])]
    assert consumer.snapshot().channels[0].ignored_tick_ids == (2, 3)


def test_channels_with_different_ticks_advance_at_the_smallest(
    stream_factory: StreamFactory,
) -> None:
    """**[Milvus: all channels must hold the same tick; ticks that never coincide deliver
    nothing.]** The pack ends at the smallest tick every channel has reached."""
    consumer = _streams(stream_factory, ("a", "b"))[1]
    writer_a = stream_factory.new_msg_stream()
    writer_a.as_producer(["a"])
    writer_b = stream_factory.new_msg_stream()
    writer_b.as_producer(["b"])
    writer_a.produce(pack(insert_at(4)))
    writer_b.produce(pack(insert_at(6)))
    writer_a.broadcast(tick(5))
    writer_b.broadcast(tick(7))
    assert row_ids(consumer.consume()) == [4]
    assert consumer.consume() is None  # a has not passed 5 yet
    writer_a.broadcast(tick(10))
    got = consumer.consume()
    assert (got.begin_ts, got.end_ts, row_ids(got)) == (5, 7, [6])
    writer_b.broadcast(tick(12))
    got = consumer.consume()
    assert (got.begin_ts, got.end_ts) == (7, 10)


def test_a_stream_delivers_once_every_channel_passed_its_last_tick(
    stream_factory: StreamFactory,
) -> None:
    """Liveness: consume() returns a pack exactly when every channel holds a tick above the
    last pack's end."""
    producer, consumer = _streams(stream_factory, ("a", "b"))
    only_a = stream_factory.new_msg_stream()
    only_a.as_producer(["a"])
    only_a.broadcast(tick(5))
    assert consumer.consume() is None
    assert consumer.consume() is None
    producer.broadcast(tick(6))
    got = consumer.consume()
    assert (got.begin_ts, got.end_ts) == (0, 5)


def test_a_message_written_below_the_last_tick_is_never_delivered(
    stream_factory: StreamFactory,
) -> None:
    """**[Milvus: delivered in the next pack, outside its interval, yet dropped by a resume
    from a checkpoint.]** Live and resumed consumers agree: it is dropped and listed."""
    producer, consumer = _streams(stream_factory)
    producer.broadcast(tick(5))
    late = producer.produce(pack(insert_at(4)))["c0"]
    producer.produce(pack(insert_at(6)))
    producer.broadcast(tick(9))
    packs = drain(consumer)
    assert [row_ids(p) for p in packs] == [[], [6]]
    assert consumer.snapshot().channels[0].dropped_ids == tuple(late)
    resumed = stream_factory.new_tt_msg_stream()
    resumed.as_consumer(["c0"], "other")
    resumed.seek(list(packs[0].end_positions))
    assert [row_ids(p) for p in drain(resumed)] == [[6]]


def test_identical_dml_messages_in_a_pack_are_delivered_once(
    stream_factory: StreamFactory,
) -> None:
    """A DML message equal to one already in the pack (a producer's retry) is dropped;
    non-DML messages are never deduplicated."""
    producer, consumer = _streams(stream_factory)
    producer.broadcast(tick(0))
    for _ in range(3):
        producer.produce(pack(insert_at(1, msg_id=1)))
    producer.produce(
        pack(ddl(MsgType.CREATE_COLLECTION, 1, 1), ddl(MsgType.CREATE_COLLECTION, 1, 1))
    )
    producer.broadcast(tick(15))
    (got,) = drain(consumer)
    assert [m.msg_type for m in got.msgs] == [MsgType.INSERT] + [MsgType.CREATE_COLLECTION] * 2
    assert len(consumer.snapshot().channels[0].duplicate_ids) == 2


def test_identical_messages_on_different_channels_are_all_delivered(
    stream_factory: StreamFactory,
) -> None:
    """Deduplication is per channel: a retry lands on the channel of its first attempt."""
    producer, consumer = _streams(stream_factory, ("a", "b"))
    producer.broadcast(pack(insert_at(1)))
    producer.broadcast(tick(5))
    (got,) = drain(consumer)
    assert [m.position.channel for m in got.msgs] == ["a", "b"]


def test_distinct_inserts_sharing_a_msg_id_are_all_delivered(stream_factory: StreamFactory) -> None:
    """**[Milvus: deduplicates by msg id alone and drops distinct inserts (#18216).]**"""
    producer, consumer = _streams(stream_factory)
    producer.produce(pack(insert(9, (1, 2, 0), (2, 3, 0), (3, 4, 0))))
    producer.broadcast(tick(5))
    (got,) = drain(consumer)
    assert row_ids(got) == [1, 2, 3]
    assert {m.msg_id for m in got.msgs} == {9}


def test_positions_name_every_channel_in_subscription_order(
    stream_factory: StreamFactory,
) -> None:
    producer, consumer = _streams(stream_factory, ("b", "a"))
    producer.broadcast(tick(5))
    producer.broadcast(tick(9))
    first, second = drain(consumer)
    assert [p.channel for p in first.start_positions] == ["b", "a"]
    assert [p.channel for p in first.end_positions] == ["b", "a"]
    assert second.start_positions == first.end_positions
    assert {p.timestamp for p in first.end_positions} == {5}
    assert {p.group for p in first.end_positions} == {"g"}


def test_end_position_points_at_the_first_message_still_buffered(
    stream_factory: StreamFactory,
) -> None:
    """The worked example of Milvus's TestStream_RmqTtMsgStream_Seek, positions included."""
    producer, consumer = _streams(stream_factory)
    producer.broadcast(tick(0))
    ids = producer.produce(pack(insert_at(1), insert_at(3), insert_at(19)))["c0"]
    producer.broadcast(tick(5))
    producer.produce(pack(insert_at(14), insert_at(9)))
    producer.broadcast(tick(11))
    producer.produce(pack(insert_at(12), insert_at(13)))
    producer.broadcast(tick(15))
    producer.broadcast(tick(20))
    packs = drain(consumer)
    assert [row_ids(p) for p in packs] == [[1, 3], [9], [14, 12, 13], [19]]
    third = packs[2]
    assert (third.start_positions[0].queue_id, third.start_positions[0].timestamp) == (ids[2], 11)
    assert (third.end_positions[0].queue_id, third.end_positions[0].timestamp) == (ids[2], 15)


def test_resume_from_every_checkpoint_loses_and_repeats_nothing(
    stream_factory: StreamFactory,
) -> None:
    """Checkpoint = a pack's end positions; a new stream seeking to it delivers exactly
    the packs that followed, over two channels and messages straddling ticks."""
    producer, consumer = _streams(stream_factory, ("a", "b"))
    for step in range(1, 6):
        ts = step * 10
        producer.produce(pack(insert(step, (step, ts - 7, 0), (100 + step, ts + 3, 1))))
        producer.produce(pack(insert_at(ts - 2, key=step)))
        producer.broadcast(tick(ts))
    producer.broadcast(tick(60))
    packs = drain(consumer)
    for index, checkpoint in enumerate(packs):
        resumed = stream_factory.new_tt_msg_stream()
        resumed.as_consumer(["a", "b"], f"r{index}")
        resumed.seek(list(checkpoint.end_positions))
        again = drain(resumed)
        assert [row_ids(p) for p in again] == [row_ids(p) for p in packs[index + 1 :]]
        assert [p.end_ts for p in again] == [p.end_ts for p in packs[index + 1 :]]


def test_a_straddling_message_survives_a_resume(stream_factory: StreamFactory) -> None:
    """**[Milvus: packs take a message by EndTs but a seek drops it by BeginTs, so a message
    whose rows straddle the checkpoint's tick is lost on resume.]**"""
    producer, consumer = _streams(stream_factory)
    producer.set_repack_func(lambda msgs, keys: {0: list(msgs)})  # keep the rows together
    producer.produce(pack(insert(1, (1, 3, 0), (2, 7, 0))))
    producer.broadcast(tick(5))
    producer.broadcast(tick(10))
    first, second = drain(consumer)
    assert (row_ids(first), row_ids(second)) == ([], [1, 2])
    resumed = stream_factory.new_tt_msg_stream()
    resumed.as_consumer(["c0"], "r")
    resumed.seek(list(first.end_positions))
    assert [row_ids(p) for p in drain(resumed)] == [[1, 2]]


def test_resume_from_start_positions_replays_the_pack(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory)
    producer.broadcast(tick(0))
    producer.produce(pack(insert_at(2), insert_at(7)))
    producer.broadcast(tick(5))
    producer.broadcast(tick(9))
    second = drain(consumer)[1]
    resumed = stream_factory.new_tt_msg_stream()
    resumed.as_consumer(["c0"], "r")
    resumed.seek(list(second.start_positions))
    (again,) = drain(resumed)
    assert (again.begin_ts, again.end_ts, row_ids(again)) == (5, 9, row_ids(second))
    assert again.start_positions == second.start_positions


def test_resume_after_retention_removed_the_position(make_stream_factory) -> None:
    """A position whose id is no longer stored resumes from the earliest stored message,
    still dropping what is at or below its timestamp (no error, no hang)."""
    now_s = [0]
    config = MQConfig(page_size_bytes=1, retention_time_s=0, retention_size_bytes=-1)
    factory = make_stream_factory(config, clock=lambda: now_s[0])
    mq = factory.mq
    producer, consumer = _streams(factory)
    producer.produce(pack(insert_at(7), insert_at(2)))  # ids 1, 2
    producer.broadcast(tick(5))  # id 3
    producer.broadcast(tick(9))  # id 4
    mq.create_consumer_group("c0", "hold")
    mq.seek("c0", "hold", 2)  # holds every page from id 2 on
    first = consumer.consume()
    assert row_ids(first) == [2]
    checkpoint = first.end_positions[0]
    assert (checkpoint.queue_id, checkpoint.timestamp) == (1, 5)  # the buffered insert 7
    now_s[0] = 1
    mq.run_retention()
    assert mq.snapshot().topics["c0"].messages[0].msg_id == 2  # the checkpoint's id is gone
    resumed = factory.new_tt_msg_stream()
    resumed.as_consumer(["c0"], "r")
    resumed.seek([checkpoint])
    assert [(p.begin_ts, p.end_ts, row_ids(p)) for p in drain(resumed)] == [(5, 9, [])]
    assert resumed.snapshot().channels[0].dropped_ids == (2,)


def test_subscribing_latest_skips_what_is_stored(stream_factory: StreamFactory) -> None:
    """Milvus's TestStream_RmqTtMsgStream_AsConsumerWithPosition."""
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    for ts in range(1, 101):
        producer.broadcast(tick(ts))
    consumer = stream_factory.new_tt_msg_stream()
    consumer.as_consumer(["c0"], "late", SubscriptionPosition.LATEST)
    producer.broadcast(MsgPack.of(TsMsg.time_tick(1000)))
    (got,) = drain(consumer)
    assert (got.begin_ts, got.end_ts, got.msgs) == (0, 1000, ())


def test_messages_come_channel_by_channel_in_log_order(stream_factory: StreamFactory) -> None:
    producer, consumer = _streams(stream_factory, ("a", "b"))
    producer.produce(pack(insert_at(3, key=1), insert_at(2, key=0), insert_at(1, key=1)))
    producer.broadcast(tick(5))
    (got,) = drain(consumer)
    assert [(m.position.channel, m.rows[0].row_id) for m in got.msgs] == [
        ("a", 2),
        ("b", 3),
        ("b", 1),
    ]
    assert msg_ids([got]) == [2, 3, 1]


def test_a_channel_added_later_starts_at_the_last_tick(stream_factory: StreamFactory) -> None:
    """What a late-subscribed channel holds at or below the stream's last tick is not
    delivered: a pack never holds a message at or below its begin."""
    producer, consumer = _streams(stream_factory, ("a",))
    other = stream_factory.new_msg_stream()
    other.as_producer(["b"])
    other.produce(pack(insert_at(3), insert_at(8)))
    producer.broadcast(tick(5))
    assert consumer.consume().end_ts == 5
    consumer.as_consumer(["b"], "g")
    producer.broadcast(tick(10))
    other.broadcast(tick(10))
    got = consumer.consume()
    assert (got.begin_ts, got.end_ts, row_ids(got)) == (5, 10, [8])
    assert consumer.snapshot().channels[1].dropped_ids == (1,)
