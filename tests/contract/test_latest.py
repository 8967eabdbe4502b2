"""SPEC "Operations": get_latest_msg."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import TopicNotFoundError

from .helpers import assert_fails, pm, small_pages


def test_get_latest_msg_is_minus_one_on_empty_topic(mq: Any) -> None:
    """Milvus TestRocksmq_GetLatestMsg: -1 before anything is produced."""
    mq.create_topic("t")
    mq.create_consumer_group("t", "last_msg_test")
    assert mq.get_latest_msg("t") == -1


def test_get_latest_msg_is_the_highest_retained_id(mq: Any) -> None:
    """Milvus TestRocksmq_GetLatestMsg: the last id of one topic, then of a second one."""
    mq.create_topic("one")
    ids = mq.produce("one", [pm(f"message_{i}") for i in range(10)])
    assert mq.get_latest_msg("one") == ids[-1] == 10
    mq.create_topic("two")
    ids2 = mq.produce("two", [pm(f"2message_{i}") for i in range(3)])
    assert mq.get_latest_msg("two") == ids2[-1] == 3
    assert mq.get_latest_msg("one") == 10


def test_get_latest_msg_changes_nothing(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a")])
    before = mq.snapshot()
    mq.get_latest_msg("t")
    assert mq.snapshot() == before


def test_get_latest_msg_of_unknown_topic_is_topic_not_found(mq: Any) -> None:
    """[Milvus: an unknown topic returns -1 with no error]"""
    assert_fails(mq, TopicNotFoundError, mq.get_latest_msg, "unknown")
    mq.create_topic("unknown2")
    mq.produce("unknown2", [pm(b"a")])
    assert_fails(mq, TopicNotFoundError, mq.get_latest_msg, "unknown")


@pytest.mark.parametrize(
    ("mine", "others"),
    [
        ("b", ["ab"]),
        ("b", ["ab", "bb", "ba", "b0"]),
        ("a", ["a1", "aa"]),
        ("ab", ["b", "a"]),
        ("x", ["xx", "zx"]),
    ],
    ids=["b-vs-ab", "b-vs-many", "a-vs-longer", "ab-vs-shorter", "x-vs-xx-zx"],
)
def test_get_latest_msg_is_not_confused_by_similar_topic_names(
    mq: Any, mine: str, others: list[str]
) -> None:
    """[Milvus: strings.Contains lets topic "b" see "ab"'s last key] Only the topic's own
    messages count, whether it is empty, shorter or longer than the others."""
    mq.create_topic(mine)
    for index, other in enumerate(others):
        mq.create_topic(other)
        mq.produce(other, [pm(f"{other}")] * (20 + index))
    assert mq.get_latest_msg(mine) == -1
    mq.produce(mine, [pm(b"m")] * 3)
    assert mq.get_latest_msg(mine) == 3
    for index, other in enumerate(others):
        assert mq.get_latest_msg(other) == 20 + index


def test_get_latest_msg_after_destroy_and_recreate_is_minus_one(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a")] * 4)
    mq.destroy_topic("t")
    mq.create_topic("t")
    assert mq.get_latest_msg("t") == -1
    mq.produce("t", [pm(b"b")])
    assert mq.get_latest_msg("t") == 5


def test_get_latest_msg_after_retention(mq_factory: Any, clock: Any) -> None:
    """Retention removes old messages: the latest is still the highest retained id, and -1
    once retention emptied the topic."""
    mq = mq_factory(small_pages(1, retention_time_s=0), clock)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.produce("t", [pm(b"aa"), pm(b"bb"), pm(b"cc")])
    mq.consume("t", "g", 2)
    clock.advance(1)
    mq.run_retention()
    assert mq.get_latest_msg("t") == 3
    mq.consume("t", "g", 1)
    clock.advance(1)
    mq.run_retention()
    assert mq.snapshot().topics["t"].messages == ()
    assert mq.get_latest_msg("t") == -1
