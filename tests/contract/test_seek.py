"""SPEC "Operations": seek and seek_to_latest."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import GroupNotFoundError, MQConfig

from .helpers import assert_fails, ids_of, pm, position, retained_ids, small_pages


def _topic_with(mq: Any, count: int, topic: str = "t", group: str = "g") -> list[int]:
    mq.create_topic(topic)
    ids = mq.produce(topic, [pm(f"message_{i}") for i in range(count)]) if count else []
    mq.create_consumer_group(topic, group)
    return ids


# --------------------------------------------------------------------------- seek


def test_seek_then_consume_reads_from_that_id(mq: Any) -> None:
    """Milvus TestRocksmq_Seek: seek to the 51st message, consume it, then the 52nd."""
    ids = _topic_with(mq, 100, "channel_seek", "group_dummy")
    assert mq.seek("channel_seek", "group_dummy", ids[50]) is None
    assert position(mq, "channel_seek", "group_dummy") == ids[50]
    assert ids_of(mq.consume("channel_seek", "group_dummy", 1)) == [ids[50]]
    assert ids_of(mq.consume("channel_seek", "group_dummy", 1)) == [ids[51]]


def test_seek_forward_skips_messages(mq: Any) -> None:
    _topic_with(mq, 10)
    mq.consume("t", "g", 2)
    mq.seek("t", "g", 7)
    assert position(mq, "t", "g") == 7
    assert ids_of(mq.consume("t", "g", 10)) == [7, 8, 9, 10]


def test_seek_backward_after_advancing_rereads(mq: Any) -> None:
    """[Milvus: a backward move panics the process] Seeking back re-delivers messages."""
    _topic_with(mq, 10)
    mq.consume("t", "g", 8)
    assert position(mq, "t", "g") == 9
    mq.seek("t", "g", 3)
    assert position(mq, "t", "g") == 3
    assert ids_of(mq.consume("t", "g", 3)) == [3, 4, 5]
    mq.seek("t", "g", 1)
    assert ids_of(mq.consume("t", "g", 100)) == list(range(1, 11))


def test_seek_to_the_current_position_keeps_it(mq: Any) -> None:
    _topic_with(mq, 5)
    mq.consume("t", "g", 2)
    before = mq.snapshot()
    mq.seek("t", "g", 3)
    assert mq.snapshot() == before


@pytest.mark.parametrize("target", [0, 11, 12, 1000, 10**12])
def test_seek_to_never_issued_id_resets_position_to_minus_one(
    mq_factory: Any, clock: Any, target: int
) -> None:
    """An id that no message has (yet) is not retained: the position becomes -1."""
    mq = mq_factory(MQConfig(), clock)
    _topic_with(mq, 10)
    mq.consume("t", "g", 5)
    mq.seek("t", "g", target)
    assert position(mq, "t", "g") == -1
    assert ids_of(mq.consume("t", "g", 3)) == [1, 2, 3]


@pytest.mark.parametrize("target", [-1, -2, -(10**12)])
def test_seek_to_negative_id_resets_position_to_minus_one(
    mq_factory: Any, clock: Any, target: int
) -> None:
    """[Milvus: a reset to -1 after the group advanced panics]"""
    mq = mq_factory(MQConfig(), clock)
    _topic_with(mq, 4)
    mq.consume("t", "g", 4)
    mq.seek("t", "g", target)
    assert position(mq, "t", "g") == -1
    assert ids_of(mq.consume("t", "g", 10)) == [1, 2, 3, 4]


def test_seek_on_empty_topic_resets_to_minus_one(mq: Any) -> None:
    _topic_with(mq, 0)
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 0
    mq.seek("t", "g", 1)
    assert position(mq, "t", "g") == -1


def test_seek_to_id_removed_by_retention_resets_to_minus_one(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRmqRetention_NotConsumed, per SPEC: 100 messages in pages of 10 bytes, 5
    consumed, retention removes the two acked pages; seeking to a removed id resets to -1 and
    the next consume starts at the earliest retained message (id 5)."""
    mq = mq_factory(small_pages(10, retention_time_s=0, retention_size_bytes=0), clock)
    mq.create_topic("topic_a")
    ids = mq.produce("topic_a", [pm(f"message_{i}") for i in range(100)])
    mq.create_consumer_group("topic_a", "test_group")
    consumed = [mq.consume("topic_a", "test_group", 1)[0] for _ in range(5)]
    acked = [p for p in mq.snapshot().topics["topic_a"].pages if p.acked_ts is not None]
    assert [p.end_id for p in acked] == [2, 4]
    clock.advance(1)
    mq.run_retention()
    assert len(mq.snapshot().topics["topic_a"].pages) == 48
    mq.seek("topic_a", "test_group", consumed[1].msg_id)
    assert position(mq, "topic_a", "test_group") == -1
    assert ids_of(mq.consume("topic_a", "test_group", 1)) == [ids[0] + 4]


def test_seek_to_id_of_a_destroyed_incarnation_resets_to_minus_one(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a"), pm(b"b"), pm(b"c")])
    mq.destroy_topic("t")
    mq.create_topic("t")
    mq.produce("t", [pm(b"d")])
    mq.create_consumer_group("t", "g")
    mq.seek("t", "g", 2)
    assert position(mq, "t", "g") == -1
    mq.seek("t", "g", 4)
    assert position(mq, "t", "g") == 4


def test_seek_to_id_that_exists_only_in_another_topic_resets(mq: Any) -> None:
    _topic_with(mq, 3)
    mq.create_topic("tt")
    mq.produce("tt", [pm(b"x")] * 10)
    mq.seek("t", "g", 7)
    assert position(mq, "t", "g") == -1


def test_seek_moves_only_that_group(mq: Any) -> None:
    _topic_with(mq, 5)
    mq.create_consumer_group("t", "h")
    mq.consume("t", "h", 2)
    mq.seek("t", "g", 4)
    assert dict(mq.snapshot().groups) == {("t", "g"): 4, ("t", "h"): 3}


def test_seek_to_id_in_open_page_and_in_closed_page(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * 11), pm(b"y"), pm(b"z")])
    mq.create_consumer_group("t", "g")
    state = mq.snapshot().topics["t"]
    assert [p.end_id for p in state.pages] == [1]
    mq.seek("t", "g", 1)  # in the closed page
    assert position(mq, "t", "g") == 1
    mq.seek("t", "g", 3)  # in the open page
    assert position(mq, "t", "g") == 3
    assert ids_of(mq.consume("t", "g", 5)) == [3]


def test_seek_is_group_not_found_without_a_group(mq: Any) -> None:
    """Milvus TestRocksmq_SeekWithNoConsumerError (group "" is InvalidArgument here, so an
    absent valid group name is used)."""
    mq.create_topic("test")
    assert_fails(mq, GroupNotFoundError, mq.seek, "test", "nobody", 0)


# --------------------------------------------------------------------------- seek_to_latest


def test_seek_to_latest_goes_past_the_latest_message(mq: Any) -> None:
    """Milvus TestRocksmq_SeekToLatest, per SPEC."""
    mq.create_topic("channel_test")
    assert_fails(mq, GroupNotFoundError, mq.seek_to_latest, "channel_test", "dummy_group")
    mq.create_consumer_group("channel_test", "group_test")
    mq.seek_to_latest("channel_test", "group_test")
    assert position(mq, "channel_test", "group_test") == 0
    # a topic whose name is a prefix of this one has messages: no effect here
    mq.create_topic("channel_tes")
    batch = [pm(f"message_{i}") for i in range(100)]
    mq.produce("channel_tes", batch)
    mq.seek_to_latest("channel_test", "group_test")
    assert position(mq, "channel_test", "group_test") == 0
    ids = mq.produce("channel_test", batch)
    assert ids_of(mq.consume("channel_test", "group_test", 100)) == ids
    mq.seek_to_latest("channel_test", "group_test")
    assert position(mq, "channel_test", "group_test") == 101
    assert mq.consume("channel_test", "group_test", 100) == []
    ids = mq.produce("channel_test", [pm(f"message_{i + 100}") for i in range(100)])
    assert ids_of(mq.consume("channel_test", "group_test", 100)) == ids


def test_seek_to_latest_without_consuming_skips_everything(mq: Any) -> None:
    _topic_with(mq, 5)
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 6
    assert mq.consume("t", "g", 10) == []
    mq.produce("t", [pm(b"new")])
    assert ids_of(mq.consume("t", "g", 10)) == [6]


def test_seek_to_latest_on_empty_topic_is_zero(mq: Any) -> None:
    _topic_with(mq, 0)
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 0


def test_seek_to_latest_after_destroy_and_recreate_is_zero(mq: Any) -> None:
    """Nothing is retained in a re-created topic, even though its ids continue."""
    mq.create_topic("t")
    mq.produce("t", [pm(b"a"), pm(b"b")])
    mq.destroy_topic("t")
    _topic_with(mq, 0)
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 0
    mq.produce("t", [pm(b"c")])
    assert ids_of(mq.consume("t", "g", 5)) == [3]


def test_seek_to_latest_after_retention_emptied_the_topic_is_zero(
    mq_factory: Any, clock: Any
) -> None:
    """When every message sat in closed pages and retention deleted them all, nothing is
    retained: seek_to_latest gives 0, not last_id + 1."""
    mq = mq_factory(small_pages(1, retention_time_s=0), clock)
    _topic_with(mq, 0)
    mq.produce("t", [pm(b"aa"), pm(b"bb")])
    mq.consume("t", "g", 2)
    clock.advance(1)
    mq.run_retention()
    assert retained_ids(mq, "t") == []
    mq.create_consumer_group("t", "h")
    mq.seek_to_latest("t", "h")
    assert position(mq, "t", "h") == 0
    mq.produce("t", [pm(b"cc")])
    assert ids_of(mq.consume("t", "h", 5)) == [3]


def test_seek_to_latest_after_retention_kept_the_open_page(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(small_pages(10, retention_time_s=0), clock)
    _topic_with(mq, 0)
    mq.produce("t", [pm(b"x" * 11), pm(b"y"), pm(b"z")])
    mq.consume("t", "g", 3)
    clock.advance(1)
    mq.run_retention()
    assert retained_ids(mq, "t") == [2, 3]
    mq.seek("t", "g", 2)
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 4


def test_seek_to_latest_moves_only_that_group(mq: Any) -> None:
    _topic_with(mq, 5)
    mq.create_consumer_group("t", "h")
    mq.seek_to_latest("t", "g")
    assert dict(mq.snapshot().groups) == {("t", "g"): 6, ("t", "h"): -1}
