"""SPEC "Retention": the time pass, the size pass, and what deleting a page deletes."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import MQConfig

from .helpers import ids_of, pages, pm, position, produce_sizes, retained_ids, small_pages


def _three_pages(mq_factory: Any, clock: Any, **retention: int) -> Any:
    """Topic "t": pages end_id 1, 2, 3 of 11, 12, 13 bytes; id 4 (2 bytes) in the open page;
    group "g" at -1."""
    mq = mq_factory(small_pages(10, **retention), clock)
    mq.create_topic("t")
    produce_sizes(mq, "t", 11, 12, 13, 2)
    mq.create_consumer_group("t", "g")
    state = mq.snapshot().topics["t"]
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(1, 11), (2, 12), (3, 13)]
    assert state.open_page_bytes == 2
    return mq


def _end_ids(mq: Any, topic: str = "t") -> list[int]:
    return [p.end_id for p in pages(mq, topic)]


# --------------------------------------------------------------------------- time pass


def test_time_pass_deletes_a_page_once_acked_ts_plus_retention_is_before_now(
    mq_factory: Any, clock: Any
) -> None:
    """acked_ts + retention_time_s < now, strictly."""
    mq = _three_pages(mq_factory, clock, retention_time_s=10)
    clock.set(100)
    mq.consume("t", "g", 3)
    clock.set(110)
    mq.run_retention()
    assert _end_ids(mq) == [1, 2, 3]
    clock.set(111)
    mq.run_retention()
    state = mq.snapshot().topics["t"]
    assert state.pages == ()
    assert [m.msg_id for m in state.messages] == [4]
    assert state.open_page_bytes == 2


def test_time_pass_stops_at_the_first_page_too_young(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock, retention_time_s=50)
    for now in (100, 200, 300):
        clock.set(now)
        mq.consume("t", "g", 1)
    assert [p.acked_ts for p in pages(mq, "t")] == [100, 200, 300]
    clock.set(251)
    mq.run_retention()
    assert _end_ids(mq) == [3]
    assert retained_ids(mq, "t") == [3, 4]


def test_time_zero_deletes_from_the_next_second(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock, retention_time_s=0)
    mq.consume("t", "g", 4)
    mq.run_retention()
    assert _end_ids(mq) == [1, 2, 3]
    clock.advance(1)
    mq.run_retention()
    assert _end_ids(mq) == []


def test_retention_reads_the_injected_clock(mq_factory: Any, clock: Any) -> None:
    """Retention's now is the clock's, not the wall clock's (which is far past 5 + 100)."""
    mq = _three_pages(mq_factory, clock, retention_time_s=100)
    clock.set(5)
    mq.consume("t", "g", 4)
    clock.set(50)
    mq.run_retention()
    assert _end_ids(mq) == [1, 2, 3]
    clock.set(106)
    mq.run_retention()
    assert _end_ids(mq) == []


def test_default_retention_time_is_three_days(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(MQConfig(page_size_bytes=10), clock)
    mq.create_topic("t")
    produce_sizes(mq, "t", 11, 1)
    mq.create_consumer_group("t", "g")
    clock.set(1000)
    mq.consume("t", "g", 2)
    clock.set(1000 + 259_200)
    mq.run_retention()
    assert _end_ids(mq) == [1]
    clock.advance(1)
    mq.run_retention()
    assert _end_ids(mq) == []
    assert retained_ids(mq, "t") == [2]


# --------------------------------------------------------------------------- size pass


@pytest.mark.parametrize(
    ("limit", "kept"),
    [(-1, [1, 2, 3]), (36, [1, 2, 3]), (25, [1, 2, 3]), (24, [2, 3]), (13, [2, 3]),
     (12, [3]), (1, [3]), (0, [3])],
)
def test_size_pass_formula(mq_factory: Any, clock: Any, limit: int, kept: list[int]) -> None:
    """total = 36 (11 + 12 + 13, all acked); delete while
    total - (deleted + page.size_bytes) > retention_size_bytes (strict)."""
    mq = _three_pages(mq_factory, clock, retention_size_bytes=limit)
    mq.consume("t", "g", 4)
    mq.run_retention()
    assert _end_ids(mq) == kept
    assert retained_ids(mq, "t") == list(range(kept[0], 5))


def test_size_total_counts_only_the_acked_prefix(mq_factory: Any, clock: Any) -> None:
    """Pages 1, 2 acked (23 bytes), page 3 not: with limit 0, page 1 goes (23 - 11 > 0) and
    page 2 stays (23 - 23 = 0); the unacked page is neither counted nor deleted."""
    mq = _three_pages(mq_factory, clock, retention_size_bytes=0)
    mq.consume("t", "g", 2)
    assert [p.acked_ts is not None for p in pages(mq, "t")] == [True, True, False]
    mq.run_retention()
    assert _end_ids(mq) == [2, 3]


@pytest.mark.parametrize(("limit", "kept"), [(13, [2, 3]), (12, [3])])
def test_size_pass_continues_after_the_time_pass(
    mq_factory: Any, clock: Any, limit: int, kept: list[int]
) -> None:
    """The time pass deletes page 1 (11 bytes): the size pass starts at page 2 with
    deleted = 11, so page 2 goes only if 36 - (11 + 12) = 13 > limit."""
    mq = _three_pages(mq_factory, clock, retention_time_s=50, retention_size_bytes=limit)
    clock.set(100)
    mq.consume("t", "g", 1)
    clock.set(200)
    mq.consume("t", "g", 3)
    assert [p.acked_ts for p in pages(mq, "t")] == [100, 200, 200]
    clock.set(160)
    mq.run_retention()
    assert _end_ids(mq) == kept


def test_size_pass_alone_with_time_disabled(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRmqRetention_PageSizeExpire, scaled down: only the size limit applies, and
    the oldest acked pages go first."""
    mq = mq_factory(small_pages(10, retention_size_bytes=30), clock)
    mq.create_topic("topic_a")
    ids = mq.produce("topic_a", [pm(f"message_{i}") for i in range(20)])
    mq.create_consumer_group("topic_a", "test_group")
    for _ in range(20):
        mq.consume("topic_a", "test_group", 1)
    clock.advance(10**6)
    mq.run_retention()
    # ten pages of 18 or 20 bytes; at most 30 bytes + one page stay
    assert sum(p.size_bytes for p in pages(mq, "topic_a")) <= 30 + 20
    mq.seek("topic_a", "test_group", ids[0])
    got = mq.consume("topic_a", "test_group", 1)
    assert got and got[0].msg_id > ids[0]


# --------------------------------------------------------------------------- never deleted


def test_both_limits_minus_one_delete_nothing(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock)
    mq.consume("t", "g", 4)
    clock.advance(10**9)
    before = mq.snapshot()
    mq.run_retention()
    assert mq.snapshot() == before


def test_unacked_pages_are_never_deleted(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRmqRetention_MultipleTopic: a topic without groups keeps every page."""
    mq = _three_pages(mq_factory, clock, retention_time_s=0, retention_size_bytes=0)
    mq.create_topic("topic_b")
    produce_sizes(mq, "topic_b", 11, 11, 11)
    clock.advance(10**6)
    before = mq.snapshot()
    mq.run_retention()
    assert mq.snapshot() == before


def test_open_page_is_never_deleted(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock, retention_time_s=0, retention_size_bytes=0)
    mq.consume("t", "g", 4)
    clock.advance(10)
    mq.run_retention()
    state = mq.snapshot().topics["t"]
    assert state.pages == ()
    assert [m.msg_id for m in state.messages] == [4]
    assert state.open_page_bytes == 2


def test_retention_stops_at_the_first_unacked_page(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock, retention_time_s=0, retention_size_bytes=0)
    mq.consume("t", "g", 2)
    clock.advance(10)
    mq.run_retention()
    assert _end_ids(mq) == [3]
    assert retained_ids(mq, "t") == [3, 4]


# --------------------------------------------------------------------------- what goes


def test_deleting_a_page_deletes_every_message_up_to_its_end_id(
    mq_factory: Any, clock: Any
) -> None:
    """Milvus TestRmqRetention_NotConsumed: pages of two messages; 5 consumed; the two acked
    pages and their four messages go, the rest stays."""
    mq = mq_factory(small_pages(10, retention_time_s=0, retention_size_bytes=0), clock)
    mq.create_topic("topic_a")
    mq.produce("topic_a", [pm(f"message_{i}") for i in range(100)])
    mq.create_consumer_group("topic_a", "test_group")
    for _ in range(5):
        mq.consume("topic_a", "test_group", 1)
    clock.advance(3)
    mq.run_retention()
    state = mq.snapshot().topics["topic_a"]
    assert len(state.pages) == 48
    assert state.pages[0].end_id == 6
    assert [m.msg_id for m in state.messages] == list(range(5, 101))
    assert state.open_page_bytes == 0


def test_deleting_pages_compares_ids_as_integers(mq_factory: Any, clock: Any) -> None:
    """[Milvus: decimal keys] A page ending at 10 deletes ids 1..10, not just "1" and "10"."""
    mq = mq_factory(small_pages(9, retention_time_s=0), clock)
    mq.create_topic("t")
    produce_sizes(mq, "t", *([1] * 25))
    assert _end_ids(mq) == [10, 20]
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 10)
    clock.advance(1)
    mq.run_retention()
    assert retained_ids(mq, "t") == list(range(11, 26))
    assert _end_ids(mq) == [20]


def test_everything_acked_and_expired_is_deleted(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRmqRetention_Basic: all 100 messages consumed, all pages expire; seeking to a
    deleted id resets to -1 and there is nothing left to consume."""
    mq = mq_factory(small_pages(10, retention_time_s=0, retention_size_bytes=0), clock)
    mq.create_topic("topic_a")
    ids = mq.produce("topic_a", [pm(f"message_{i}") for i in range(100)])
    mq.create_consumer_group("topic_a", "test_group")
    consumed = [mq.consume("topic_a", "test_group", 1)[0] for _ in range(100)]
    assert ids_of(consumed) == ids
    clock.advance(3)
    mq.run_retention()
    state = mq.snapshot().topics["topic_a"]
    assert state.messages == ()
    assert state.pages == ()
    assert state.open_page_bytes == 0
    assert state.last_id == 100
    mq.seek("topic_a", "test_group", consumed[50].msg_id)
    assert position(mq, "topic_a", "test_group") == -1
    assert mq.consume("topic_a", "test_group", 1) == []


def test_pages_acked_later_survive_the_time_pass(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRmqRetention_PageTimeExpire: the first 100 messages are acked early and
    expire; the next 100 are acked later and stay."""
    mq = mq_factory(small_pages(10, retention_time_s=30), clock)
    mq.create_topic("topic_a")
    ids = mq.produce("topic_a", [pm(f"message_{i}") for i in range(100)])
    mq.create_consumer_group("topic_a", "test_group")
    clock.set(1000)
    assert ids_of(mq.consume("topic_a", "test_group", 100)) == ids
    clock.set(1040)
    ids2 = mq.produce("topic_a", [pm(f"message_{i + 100}") for i in range(100)])
    assert ids_of(mq.consume("topic_a", "test_group", 100)) == ids2
    clock.set(1060)
    mq.run_retention()
    state = mq.snapshot().topics["topic_a"]
    assert len(state.pages) == 100
    assert all(p.acked_ts == 1040 for p in state.pages)
    assert [m.msg_id for m in state.messages] == ids2
    mq.seek("topic_a", "test_group", ids[0])
    assert ids_of(mq.consume("topic_a", "test_group", 1)) == [ids2[0]]


def test_retention_covers_every_topic(mq_factory: Any, clock: Any) -> None:
    """Milvus TestRmqRetention_MultipleTopic: one pass trims every topic whose pages are acked
    and expired, and only those."""
    mq = mq_factory(small_pages(10, retention_time_s=1), clock)
    for name in ("topic_a", "topic_b", "topic_c"):
        mq.create_topic(name)
        mq.produce(name, [pm(f"message_{i}") for i in range(10)])
    for name in ("topic_a", "topic_c"):
        mq.create_consumer_group(name, "test_group")
        mq.consume(name, "test_group", 10)
    clock.advance(3)
    mq.run_retention()
    state = mq.snapshot()
    assert state.topics["topic_a"].pages == ()
    assert state.topics["topic_c"].pages == ()
    assert len(state.topics["topic_b"].pages) == 5
    assert len(state.topics["topic_b"].messages) == 10
    assert all(p.acked_ts is None for p in state.topics["topic_b"].pages)


def test_retention_does_not_change_positions(mq_factory: Any, clock: Any) -> None:
    """A group that sought back into a deleted page keeps its position; consume then starts
    at the first retained id >= it."""
    mq = _three_pages(mq_factory, clock, retention_time_s=0)
    mq.create_consumer_group("t", "h")
    mq.consume("t", "g", 4)
    mq.consume("t", "h", 4)
    mq.seek("t", "h", 2)
    groups_before = dict(mq.snapshot().groups)
    clock.advance(1)
    mq.run_retention()
    assert dict(mq.snapshot().groups) == groups_before
    assert position(mq, "t", "h") == 2
    assert ids_of(mq.consume("t", "h", 10)) == [4]


def test_retention_keeps_acked_ts_of_pages_it_keeps(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock, retention_size_bytes=24)
    clock.set(4242)
    mq.consume("t", "g", 4)
    mq.run_retention()
    assert [(p.end_id, p.acked_ts) for p in pages(mq, "t")] == [(2, 4242), (3, 4242)]


def test_retention_with_nothing_to_do_changes_nothing(mq_factory: Any, clock: Any) -> None:
    mq = _three_pages(mq_factory, clock, retention_time_s=0, retention_size_bytes=0)
    mq.consume("t", "g", 4)
    clock.advance(1)
    mq.run_retention()
    after_first = mq.snapshot()
    clock.advance(1000)
    mq.run_retention()
    assert mq.snapshot() == after_first


def test_run_retention_on_empty_queue(mq: Any) -> None:
    before = mq.snapshot()
    assert mq.run_retention() is None
    assert mq.snapshot() == before
