"""SPEC "Operations": create_topic and destroy_topic."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import MQConfig, TopicNotFoundError, TopicState

from .helpers import assert_fails, ids_of, pm, small_pages

FAMILY = ("t", "t1", "tt", "at", "ta", "T")


def test_create_topic_creates_an_empty_topic(mq: Any) -> None:
    assert mq.create_topic("t") is None
    state = mq.snapshot()
    assert dict(state.topics) == {"t": TopicState((), (), 0, 0)}
    assert dict(state.groups) == {}
    assert mq.get_latest_msg("t") == -1


def test_create_existing_topic_does_nothing(mq_factory: Any, clock: Any) -> None:
    """create_topic is idempotent: a topic with messages, pages, acks and groups is kept as is
    (Milvus TestRocksmq_Dummy: "create topic twice should be ignored")."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * 11), pm(b"y" * 3)])
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 1)
    before = mq.snapshot()
    assert before.topics["t"].pages[0].acked_ts is not None
    clock.advance(5)
    mq.create_topic("t")
    assert mq.snapshot() == before


def test_topics_are_independent(mq: Any) -> None:
    mq.create_topic("a")
    mq.create_topic("b")
    mq.produce("a", [pm(b"1"), pm(b"2")])
    state = mq.snapshot()
    assert state.topics["b"] == TopicState((), (), 0, 0)
    assert len(state.topics["a"].messages) == 2


def _populate(mq: Any, clock: Any, name: str, index: int) -> None:
    """Messages, closed pages (one acked), an open page and two groups under ``name``."""
    mq.create_topic(name)
    mq.produce(name, [pm(f"{name}-{k}".encode() * 4, {"k": name}) for k in range(index + 3)])
    mq.produce(name, [pm(b"o")])  # stays in the open page
    mq.create_consumer_group(name, "g")
    mq.create_consumer_group(name, name)  # a group named like the topic
    mq.consume(name, "g", 2)
    mq.consume(name, name, 2)
    clock.advance(1)


@pytest.mark.parametrize("victim", FAMILY)
def test_destroy_topic_removes_only_that_topic(mq_factory: Any, clock: Any, victim: str) -> None:
    """[Milvus: page metadata of every topic whose name starts with t is deleted too]
    destroy_topic removes the topic, its messages, pages, acks and groups, and nothing of
    topics whose names share a prefix or suffix with it."""
    mq = mq_factory(small_pages(10), clock)
    for index, name in enumerate(FAMILY):
        _populate(mq, clock, name, index)
    before = mq.snapshot()
    assert all(before.topics[name].pages for name in FAMILY)
    assert mq.destroy_topic(victim) is None
    after = mq.snapshot()
    assert victim not in after.topics
    assert dict(after.topics) == {n: s for n, s in before.topics.items() if n != victim}
    assert dict(after.groups) == {k: p for k, p in before.groups.items() if k[0] != victim}
    assert not mq.exist_consumer_group(victim, "g")
    # the survivors still work: ids, consumption and latest are their own
    for name in FAMILY:
        if name == victim:
            continue
        last = before.topics[name].last_id
        assert mq.get_latest_msg(name) == last
        assert mq.produce(name, [pm(b"z")]) == [last + 1]
        assert ids_of(mq.consume(name, "g", 100)) == list(range(3, last + 2))


def test_destroy_topic_keeps_groups_of_other_topics_named_like_it(mq: Any) -> None:
    """Destroying topic "g" keeps group "g" of topic "t"."""
    mq.create_topic("t")
    mq.create_topic("g")
    mq.create_consumer_group("t", "g")
    mq.create_consumer_group("g", "t")
    mq.destroy_topic("g")
    assert dict(mq.snapshot().groups) == {("t", "g"): -1}
    assert mq.exist_consumer_group("t", "g")


def test_recreated_topic_is_empty(mq_factory: Any, clock: Any) -> None:
    """[Milvus: messages stay in the store and reappear after re-create] A re-created topic has
    no messages, pages, acks or groups; only the id high-water mark survives."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * 11, {"a": "b"}), pm(b"y" * 11), pm(b"z")])
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 2)
    mq.destroy_topic("t")
    assert "t" not in mq.snapshot().topics
    mq.create_topic("t")
    state = mq.snapshot()
    assert state.topics["t"] == TopicState(messages=(), pages=(), open_page_bytes=0, last_id=3)
    assert dict(state.groups) == {}
    assert not mq.exist_consumer_group("t", "g")
    assert mq.get_latest_msg("t") == -1
    mq.create_consumer_group("t", "g")
    assert mq.consume("t", "g", 10) == []
    assert mq.produce("t", [pm(b"new")]) == [4]
    got = mq.consume("t", "g", 10)
    assert [(m.msg_id, m.payload) for m in got] == [(4, b"new")]


def test_recreated_topic_pages_start_from_an_empty_open_page(mq_factory: Any, clock: Any) -> None:
    """The open page's byte count does not survive destroy."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * 9)])
    mq.destroy_topic("t")
    mq.create_topic("t")
    mq.produce("t", [pm(b"y" * 9)])
    state = mq.snapshot().topics["t"]
    assert state.pages == ()
    assert state.open_page_bytes == 9


def test_destroy_twice_is_topic_not_found(mq: Any) -> None:
    mq.create_topic("t")
    mq.destroy_topic("t")
    assert_fails(mq, TopicNotFoundError, mq.destroy_topic, "t")


def test_destroy_then_create_other_topics_keeps_ids_separate(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRocksmq_GetLatestMsg tail: destroying one topic leaves another's latest."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic("one")
    mq.create_topic("two")
    mq.produce("one", [pm(b"m")] * 10)
    ids = mq.produce("two", [pm(b"2m")] * 10)
    mq.destroy_topic("one")
    assert mq.get_latest_msg("two") == ids[-1]
