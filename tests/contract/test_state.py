"""SPEC "State": snapshot() is frozen, canonical and comparable with ``==``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from rmqsim.model.api import ConsumerMessage, Page, State, TopicState

from .helpers import pm, produce_sizes, small_pages


def _build(mq: Any, clock: Any, order: int) -> None:
    """The same logical state, reached in two different orders (order 0 or 1)."""
    topics = ["a", "b", "c"] if order == 0 else ["c", "b", "a"]
    for name in topics:
        mq.create_topic(name)
    if order == 0:
        mq.produce("a", [pm(b"x" * 11, {"k": "v"}), pm(b"y" * 3)])
        mq.produce("b", [pm(b"z" * 4)])
        mq.create_consumer_group("a", "g2")
        mq.create_consumer_group("a", "g1")
        mq.create_consumer_group("b", "g1")
    else:
        mq.produce("b", [pm(b"z" * 4)])
        mq.produce("a", [pm(b"x" * 11, {"k": "v"})])
        mq.produce("a", [pm(b"y" * 3)])
        mq.create_consumer_group("b", "g1")
        mq.create_consumer_group("a", "g1")
        mq.create_consumer_group("a", "temp")
        mq.create_consumer_group("a", "g2")
        mq.destroy_consumer_group("a", "temp")
    clock.set(50)
    mq.consume("a", "g1", 1)
    mq.consume("a", "g2", 2)


def test_fresh_queue_snapshot_is_empty(mq: Any) -> None:
    state = mq.snapshot()
    assert isinstance(state, State)
    assert state == State.build({}, {})
    assert dict(state.topics) == {}
    assert dict(state.groups) == {}


def test_snapshot_is_canonical_whatever_the_order_of_operations(
    mq_factory: Any, clock: Any
) -> None:
    """Equal logical states give equal snapshots, which also iterate in the same order."""
    first = mq_factory(small_pages(10), clock)
    _build(first, clock, 0)
    clock.set(1000)
    second = mq_factory(small_pages(10), clock)
    _build(second, clock, 1)
    a, b = first.snapshot(), second.snapshot()
    assert a == b
    assert list(a.topics) == list(b.topics) == ["a", "b", "c"]
    assert list(a.groups) == list(b.groups) == [("a", "g1"), ("a", "g2"), ("b", "g1")]
    assert repr(a) == repr(b)


def test_snapshot_differs_when_the_state_differs(mq_factory: Any, clock: Any) -> None:
    """== is not trivially true: one differing position, ack or byte breaks equality."""
    first = mq_factory(small_pages(10), clock)
    second = mq_factory(small_pages(10), clock)
    for mq in (first, second):
        clock.set(1000)
        _build(mq, clock, 0)
    assert first.snapshot() == second.snapshot()
    second.consume("a", "g1", 1)
    assert first.snapshot() != second.snapshot()
    first.consume("a", "g1", 1)
    assert first.snapshot() == second.snapshot()
    first.produce("c", [pm(b"1")])
    second.produce("c", [pm(b"2")])
    assert first.snapshot() != second.snapshot()


def test_snapshot_contents_have_the_spec_types(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(small_pages(10), clock)
    _build(mq, clock, 0)
    state = mq.snapshot()
    assert isinstance(state.topics, Mapping)
    assert isinstance(state.groups, Mapping)
    for name, topic in state.topics.items():
        assert type(name) is str
        assert isinstance(topic, TopicState)
        assert isinstance(topic.messages, tuple)
        assert isinstance(topic.pages, tuple)
        assert all(isinstance(m, ConsumerMessage) for m in topic.messages)
        assert all(isinstance(p, Page) for p in topic.pages)
        assert type(topic.open_page_bytes) is int
        assert type(topic.last_id) is int
    for key, pos in state.groups.items():
        assert isinstance(key, tuple)
        assert [type(part) for part in key] == [str, str]
        assert type(pos) is int
    assert state.topics["a"] == TopicState(
        messages=(ConsumerMessage(1, b"x" * 11, {"k": "v"}), ConsumerMessage(2, b"yyy", {})),
        pages=(Page(end_id=1, size_bytes=11, closed_ts=1000, acked_ts=50),),
        open_page_bytes=3,
        last_id=2,
    )
    assert dict(state.groups) == {("a", "g1"): 2, ("a", "g2"): 3, ("b", "g1"): -1}


def test_snapshot_is_frozen(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(small_pages(10), clock)
    _build(mq, clock, 0)
    state = mq.snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.topics = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        state.topics["new"] = TopicState((), (), 0, 0)  # type: ignore[index]
    with pytest.raises(TypeError):
        del state.topics["a"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        state.groups[("a", "g1")] = 99  # type: ignore[index]
    topic = state.topics["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic.last_id = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic.pages[0].acked_ts = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic.messages[0].payload = b""  # type: ignore[misc]
    assert mq.snapshot() == state


def test_snapshot_properties_cannot_change_the_queue(mq: Any) -> None:
    """Mutating a snapshot's properties (if they are mutable at all) leaves the queue as is."""
    mq.create_topic("t")
    mq.produce("t", [pm(b"a", {"k": "v"})])
    state = mq.snapshot()
    try:
        state.topics["t"].messages[0].properties["k"] = "changed"  # type: ignore[index]
    except TypeError:
        return
    assert dict(mq.snapshot().topics["t"].messages[0].properties) == {"k": "v"}


def test_earlier_snapshot_does_not_change_with_the_queue(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(small_pages(10), clock)
    _build(mq, clock, 0)
    old = mq.snapshot()
    old_repr = repr(old)
    mq.produce("a", [pm(b"q" * 20)])
    mq.consume("a", "g1", 5)
    mq.create_consumer_group("c", "new")
    mq.destroy_topic("b")
    assert repr(old) == old_repr
    assert list(old.topics) == ["a", "b", "c"]
    assert old.groups[("a", "g1")] == 2
    assert mq.snapshot() != old


def test_snapshot_changes_nothing(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(small_pages(10), clock)
    _build(mq, clock, 0)
    first = mq.snapshot()
    clock.advance(100)
    assert mq.snapshot() == first
    assert mq.snapshot() == first


def test_same_history_in_different_batches_gives_equal_snapshots(
    mq_factory: Any, clock: Any
) -> None:
    """One produce of three messages and three produces of one are the same logical state."""
    one = mq_factory(small_pages(10), clock)
    three = mq_factory(small_pages(10), clock)
    for mq in (one, three):
        mq.create_topic("t")
    produce_sizes(one, "t", 6, 6, 6)
    for size in (6, 6, 6):
        produce_sizes(three, "t", size)
    assert one.snapshot() == three.snapshot()


def test_model_and_impl_agree_on_a_mixed_history(both_factories: Any, clock: Any) -> None:
    """Two implementations conform when every outcome and every snapshot is equal: a short
    history touching every operation, run on both, step by step."""
    queues = {kind: f(small_pages(10, retention_time_s=5, retention_size_bytes=20), clock)
              for kind, f in both_factories.items()}

    def step(call: Any) -> None:
        outcomes = {}
        for kind, mq in queues.items():
            try:
                outcomes[kind] = ("ok", call(mq))
            except Exception as exc:  # compare the kind of error, not its text
                outcomes[kind] = ("error", getattr(exc, "kind", type(exc).__name__))
        assert outcomes["model"] == outcomes["impl"]
        assert queues["model"].snapshot() == queues["impl"].snapshot()
        for kind in queues:  # every other backend (the commit log's two modes) as well
            assert outcomes[kind] == outcomes["model"], kind
            assert queues[kind].snapshot() == queues["model"].snapshot(), kind

    step(lambda mq: mq.create_topic("t"))
    step(lambda mq: mq.create_topic("tt"))
    step(lambda mq: mq.produce("t", [pm(b"x" * 11), pm(b"", {"e": ""}), pm(b"y" * 9)]))
    step(lambda mq: mq.produce("tt", [pm(b"z" * 30)]))
    step(lambda mq: mq.create_consumer_group("t", "g"))
    step(lambda mq: mq.create_consumer_group("t", "g"))
    step(lambda mq: mq.create_consumer_group("t", "h"))
    clock.advance(3)
    step(lambda mq: mq.consume("t", "g", 2))
    step(lambda mq: mq.seek_to_latest("t", "h"))
    step(lambda mq: mq.produce("t", [pm(b"w" * 12)]))
    step(lambda mq: mq.consume("t", "g", 10))
    step(lambda mq: mq.consume("t", "h", 10))
    clock.advance(10)
    step(lambda mq: mq.run_retention())
    step(lambda mq: mq.seek("t", "g", 1))
    step(lambda mq: mq.get_latest_msg("t"))
    step(lambda mq: mq.destroy_consumer_group("t", "h"))
    step(lambda mq: mq.destroy_topic("tt"))
    step(lambda mq: mq.get_latest_msg("tt"))
    step(lambda mq: mq.create_topic("tt"))
    step(lambda mq: mq.produce("tt", [pm(b"again")]))
    step(lambda mq: mq.consume("t", "nobody", 1))
    step(lambda mq: mq.seek("t", "g", -5))
