"""STREAM.md "Producing": channels, repacking by hash key, broadcast."""

from __future__ import annotations

import pytest

from rmqsim.model.api import InvalidArgumentError
from rmqsim.model.stream.api import (
    InvalidPackError,
    MsgPack,
    MsgType,
    NoProducerError,
    StreamFactory,
    TsMsg,
)

from .helpers import ddl, delete, drain, insert, insert_at, pack, tick


def _reader(factory: StreamFactory, channel: str):
    stream = factory.new_msg_stream()
    stream.as_consumer([channel], "reader")
    return stream


def _rows_on(factory: StreamFactory, channel: str) -> list[tuple[int, ...]]:
    return [tuple(r.row_id for r in p.msgs[0].rows) for p in drain(_reader(factory, channel))]


def test_insert_rows_go_to_the_channel_of_their_own_hash_key(
    stream_factory: StreamFactory,
) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1", "c2"])
    written = producer.produce(pack(insert(1, (10, 1, 4), (11, 1, 2), (12, 1, 7))))
    assert {channel: len(ids) for channel, ids in written.items()} == {"c1": 2, "c2": 1}
    assert _rows_on(stream_factory, "c1") == [(10,), (12,)]
    assert _rows_on(stream_factory, "c2") == [(11,)]


def test_delete_rows_are_split_by_key_too(stream_factory: StreamFactory) -> None:
    """**[Milvus: DeleteRepackFunc sends the whole delete to the channel of its first key.]**"""
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    producer.produce(pack(delete(1, (10, 1, 0), (11, 1, 1))))
    assert _rows_on(stream_factory, "c0") == [(10,)]
    assert _rows_on(stream_factory, "c1") == [(11,)]


def test_other_messages_go_whole_to_their_first_key(stream_factory: StreamFactory) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    written = producer.produce(pack(ddl(MsgType.CREATE_COLLECTION, 1, 5, key=3)))
    assert list(written) == ["c1"]


def test_a_custom_repack_function_decides_the_channels(stream_factory: StreamFactory) -> None:
    """Milvus's TestStream_PulsarMsgStream_RepackFunc: every message to each of its keys."""

    def to_every_key(msgs, buckets):
        out: dict[int, list] = {}
        for msg, keys in zip(msgs, buckets, strict=True):
            for key in keys:
                out.setdefault(key, []).append(msg)
        return out

    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    producer.set_repack_func(to_every_key)
    written = producer.produce(pack(TsMsg(MsgType.FLUSH, 1, 5, hash_keys=(0, 1))))
    assert {channel: len(ids) for channel, ids in written.items()} == {"c0": 1, "c1": 1}


def test_a_repack_function_answering_a_wrong_bucket_is_refused(
    stream_factory: StreamFactory,
) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    producer.set_repack_func(lambda msgs, buckets: {2: list(msgs)})
    with pytest.raises(InvalidPackError, match="bucket 2 for 2 channels"):
        producer.produce(pack(insert_at(1)))
    producer.set_repack_func(None)
    assert list(producer.produce(pack(insert_at(1)))) == ["c0"]


def test_broadcast_writes_every_message_to_every_channel(stream_factory: StreamFactory) -> None:
    """Milvus's TestStream_BroadcastMark: one id list per channel, one id per message."""
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    written = producer.broadcast(pack(ddl(MsgType.CREATE_COLLECTION, 1, 1), tick(2).msgs[0]))
    assert written == {"c0": [1, 2], "c1": [1, 2]}
    assert producer.broadcast(MsgPack()) == {"c0": [], "c1": []}


def test_an_empty_pack_writes_nothing(stream_factory: StreamFactory) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0"])
    assert producer.produce(MsgPack()) == {}
    reader = _reader(stream_factory, "c0")
    assert reader.consume() is None


def test_produce_and_broadcast_need_producer_channels(stream_factory: StreamFactory) -> None:
    stream = stream_factory.new_msg_stream()
    with pytest.raises(NoProducerError):
        stream.produce(pack(insert_at(1)))
    with pytest.raises(NoProducerError):
        stream.broadcast(tick(1))


def test_producer_channel_names_follow_the_queue_rules(stream_factory: StreamFactory) -> None:
    """**[Milvus: an empty channel name silently ends the list (TestMqMsgStream_AsProducer).]**"""
    stream = stream_factory.new_msg_stream()
    with pytest.raises(InvalidArgumentError):
        stream.as_producer(["c0", ""])
    with pytest.raises(InvalidArgumentError):
        stream.as_producer([])
    with pytest.raises(InvalidArgumentError):
        stream.as_producer(["a/b"])
    assert stream.snapshot().producer_channels == ()
    stream.as_producer(["c0", "c1", "c0"])
    stream.as_producer(["c1", "c2"])
    assert stream.snapshot().producer_channels == ("c0", "c1", "c2")


def test_produce_writes_buckets_in_channel_order(stream_factory: StreamFactory) -> None:
    producer = stream_factory.new_msg_stream()
    producer.as_producer(["c0", "c1"])
    written = producer.produce(pack(insert_at(1, key=1), insert_at(2, key=0)))
    assert list(written) == ["c0", "c1"]
