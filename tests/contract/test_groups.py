"""SPEC "Operations": create_consumer_group, destroy_consumer_group, exist_consumer_group."""

from __future__ import annotations

from typing import Any

from rmqsim.model.api import GroupExistsError, TopicNotFoundError

from .helpers import assert_fails, ids_of, payloads_of, pm, position


def test_new_group_has_position_minus_one(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a")])
    assert mq.create_consumer_group("t", "g") is None
    assert dict(mq.snapshot().groups) == {("t", "g"): -1}
    assert mq.exist_consumer_group("t", "g") is True


def test_create_group_on_missing_topic_is_topic_not_found(mq: Any) -> None:
    """[Milvus: does not check that the topic exists]"""
    assert_fails(mq, TopicNotFoundError, mq.create_consumer_group, "missing", "g")
    mq.create_topic("t")
    mq.destroy_topic("t")
    assert_fails(mq, TopicNotFoundError, mq.create_consumer_group, "t", "g")
    assert dict(mq.snapshot().groups) == {}


def test_create_existing_group_is_group_exists(mq: Any) -> None:
    """Milvus TestRocksmq_Basic: "double create consumer group" is an error."""
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    assert_fails(mq, GroupExistsError, mq.create_consumer_group, "t", "g")


def test_same_group_name_on_two_topics_are_two_groups(mq: Any) -> None:
    for name in ("a", "b"):
        mq.create_topic(name)
        mq.produce(name, [pm(b"1"), pm(b"2"), pm(b"3")])
        mq.create_consumer_group(name, "g")
    mq.consume("a", "g", 2)
    assert dict(mq.snapshot().groups) == {("a", "g"): 3, ("b", "g"): -1}
    assert ids_of(mq.consume("b", "g", 1)) == [1]
    mq.destroy_consumer_group("a", "g")
    assert not mq.exist_consumer_group("a", "g")
    assert mq.exist_consumer_group("b", "g")


def test_destroy_group_removes_it(mq: Any) -> None:
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.create_consumer_group("t", "h")
    assert mq.destroy_consumer_group("t", "g") is None
    assert dict(mq.snapshot().groups) == {("t", "h"): -1}
    assert mq.exist_consumer_group("t", "g") is False


def test_destroy_absent_group_is_not_an_error_and_changes_nothing(mq: Any) -> None:
    mq.create_topic("t")
    mq.create_consumer_group("t", "h")
    before = mq.snapshot()
    mq.destroy_consumer_group("t", "g")
    mq.destroy_consumer_group("t", "g")
    assert mq.snapshot() == before


def test_destroy_group_on_missing_topic_is_topic_not_found(mq: Any) -> None:
    assert_fails(mq, TopicNotFoundError, mq.destroy_consumer_group, "missing", "g")


def test_recreated_group_starts_again_at_minus_one(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a"), pm(b"b")])
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 2)
    mq.destroy_consumer_group("t", "g")
    mq.create_consumer_group("t", "g")
    assert position(mq, "t", "g") == -1
    assert payloads_of(mq.consume("t", "g", 5)) == [b"a", b"b"]


def test_exist_consumer_group_is_false_for_absent_topic_or_group(mq: Any) -> None:
    assert mq.exist_consumer_group("t", "g") is False
    mq.create_topic("t")
    assert mq.exist_consumer_group("t", "g") is False
    mq.create_consumer_group("t", "g")
    assert mq.exist_consumer_group("t", "g") is True
    assert mq.exist_consumer_group("t", "G") is False
    assert mq.exist_consumer_group("t", "g2") is False
    assert mq.exist_consumer_group("tt", "g") is False
    mq.create_topic("u")
    assert mq.exist_consumer_group("u", "g") is False


def test_exist_consumer_group_changes_nothing(mq: Any) -> None:
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    before = mq.snapshot()
    mq.exist_consumer_group("t", "g")
    mq.exist_consumer_group("t", "x")
    mq.exist_consumer_group("x", "g")
    assert mq.snapshot() == before


def test_many_groups_each_read_every_message(mq: Any) -> None:
    """Milvus TestRocksmq_MultiConsumer: 11 groups each read the 10 messages from the start."""
    mq.create_topic("channel_rocks")
    mq.produce("channel_rocks", [pm(f"message_{i}") for i in range(10)])
    for i in range(11):
        mq.destroy_consumer_group("channel_rocks", f"group_{i}")
        mq.create_consumer_group("channel_rocks", f"group_{i}")
    for i in range(11):
        got = mq.consume("channel_rocks", f"group_{i}", 10)
        assert len(got) == 10
        assert got[0].payload == b"message_0"
    assert set(mq.snapshot().groups.values()) == {11}


def test_destroying_topic_removes_its_groups(mq: Any) -> None:
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.create_consumer_group("t", "h")
    mq.destroy_topic("t")
    assert dict(mq.snapshot().groups) == {}
    mq.create_topic("t")
    assert not mq.exist_consumer_group("t", "g")
    mq.create_consumer_group("t", "g")  # no GroupExists: the old group is gone
    assert dict(mq.snapshot().groups) == {("t", "g"): -1}
