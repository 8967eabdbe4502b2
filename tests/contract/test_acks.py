"""SPEC "Acks": a closed page is acked once every group of its topic has position > end_id."""

from __future__ import annotations

from typing import Any

from .helpers import pages, pm, produce_sizes, small_pages


def _mq(mq_factory: Any, clock: Any, *groups: str) -> Any:
    """Topic "t" with pages end_id 2 and 4 (12 bytes each) and id 5 in the open page."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    produce_sizes(mq, "t", 6, 6, 6, 6, 3)
    assert [p.end_id for p in pages(mq, "t")] == [2, 4]
    for group in groups:
        mq.create_consumer_group("t", group)
    return mq


def _acked(mq: Any, topic: str = "t") -> list[int | None]:
    return [p.acked_ts for p in pages(mq, topic)]


def test_pages_start_unacked(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "g")
    assert _acked(mq) == [None, None]


def test_topic_without_groups_never_acks(mq_factory: Any, clock: Any) -> None:
    """At least one group is needed: with none (never, or all destroyed) nothing is acked."""
    mq = _mq(mq_factory, clock)
    clock.advance(100)
    mq.run_retention()
    assert _acked(mq) == [None, None]
    mq.create_consumer_group("t", "g")
    mq.destroy_consumer_group("t", "g")
    assert _acked(mq) == [None, None]
    produce_sizes(mq, "t", 20)
    assert _acked(mq) == [None, None, None]


def test_page_is_acked_only_when_position_is_past_its_end_id(mq_factory: Any, clock: Any) -> None:
    """position > end_id (strict): a group whose next message is the page's last one has not
    read the page."""
    mq = _mq(mq_factory, clock, "g")
    mq.consume("t", "g", 1)  # position 2 == end_id 2
    assert _acked(mq) == [None, None]
    clock.set(2000)
    mq.consume("t", "g", 1)  # position 3 > 2
    assert _acked(mq) == [2000, None]
    clock.set(3000)
    mq.consume("t", "g", 2)  # position 5 > 4
    assert _acked(mq) == [2000, 3000]


def test_lagging_group_holds_back_the_page_of_its_next_message(
    mq_factory: Any, clock: Any
) -> None:
    """[Milvus: uses end_id <= position, acking the page that holds a lagging group's next
    message] One group read everything, the other is at 2 (has not read id 2): the page
    ending at 2 is not acked."""
    mq = _mq(mq_factory, clock, "fast", "slow")
    mq.consume("t", "slow", 1)
    mq.consume("t", "fast", 5)
    assert dict(mq.snapshot().groups) == {("t", "fast"): 6, ("t", "slow"): 2}
    assert _acked(mq) == [None, None]
    mq.consume("t", "slow", 2)  # slow at 4: past page 2, not page 4
    assert _acked(mq) == [clock.now, None]


def test_group_at_minus_one_has_read_nothing(mq_factory: Any, clock: Any) -> None:
    """[Milvus: only registered consumers count] Every group counts, including one that never
    consumed (position -1)."""
    mq = _mq(mq_factory, clock, "reader", "idle")
    mq.consume("t", "reader", 5)
    assert _acked(mq) == [None, None]


def test_acked_ts_is_the_clock_when_the_last_group_passes(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "a", "b")
    clock.set(100)
    mq.consume("t", "a", 5)
    clock.set(200)
    mq.consume("t", "b", 3)
    assert _acked(mq) == [200, None]
    clock.set(300)
    mq.consume("t", "b", 2)
    assert _acked(mq) == [200, 300]


def test_acked_ts_is_kept_when_a_new_group_appears(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "a")
    clock.set(100)
    mq.consume("t", "a", 3)
    assert _acked(mq) == [100, None]
    clock.set(150)
    mq.create_consumer_group("t", "late")
    assert _acked(mq) == [100, None]
    clock.set(200)
    mq.consume("t", "a", 2)  # "late" at -1 now holds page 4 back
    assert _acked(mq) == [100, None]
    clock.set(250)
    mq.consume("t", "late", 5)
    assert _acked(mq) == [100, 250]


def test_acked_ts_is_kept_when_a_group_seeks_back(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "g")
    clock.set(100)
    mq.consume("t", "g", 5)
    assert _acked(mq) == [100, 100]
    clock.set(200)
    mq.seek("t", "g", 1)
    assert _acked(mq) == [100, 100]
    mq.seek("t", "g", -1)
    assert _acked(mq) == [100, 100]
    clock.set(300)
    mq.consume("t", "g", 5)
    assert _acked(mq) == [100, 100]


def test_forward_seek_acks_the_pages_it_skips(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "g")
    clock.set(500)
    mq.seek("t", "g", 3)
    assert _acked(mq) == [500, None]
    clock.set(600)
    mq.seek("t", "g", 5)
    assert _acked(mq) == [500, 600]


def test_seek_to_latest_acks_every_closed_page(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "g")
    clock.set(700)
    mq.seek_to_latest("t", "g")
    assert _acked(mq) == [700, 700]


def test_destroying_a_lagging_group_acks_what_it_held_back(mq_factory: Any, clock: Any) -> None:
    """[Milvus: destroying a lagging group never acks what it held back]"""
    mq = _mq(mq_factory, clock, "fast", "slow", "idle")
    clock.set(100)
    mq.consume("t", "fast", 5)
    mq.consume("t", "slow", 3)
    assert _acked(mq) == [None, None]
    clock.set(200)
    mq.destroy_consumer_group("t", "idle")
    assert _acked(mq) == [200, None]
    clock.set(300)
    mq.destroy_consumer_group("t", "slow")
    assert _acked(mq) == [200, 300]


def test_destroying_the_last_group_acks_nothing_and_keeps_acks(
    mq_factory: Any, clock: Any
) -> None:
    mq = _mq(mq_factory, clock, "g")
    clock.set(100)
    mq.consume("t", "g", 3)
    clock.set(200)
    mq.destroy_consumer_group("t", "g")
    assert _acked(mq) == [100, None]


def test_page_closed_while_every_group_is_at_the_end_is_not_acked(
    mq_factory: Any, clock: Any
) -> None:
    """A group at latest + 1 has not read the next message: the page it closes is unacked."""
    mq = _mq(mq_factory, clock, "g")
    mq.seek_to_latest("t", "g")  # position 6
    produce_sizes(mq, "t", 20)  # id 6 closes a page ending at 6
    assert [p.end_id for p in pages(mq, "t")] == [2, 4, 6]
    assert _acked(mq)[2] is None
    clock.set(5000)
    mq.consume("t", "g", 1)
    assert _acked(mq)[2] == 5000


def test_position_zero_acks_nothing(mq_factory: Any, clock: Any) -> None:
    """seek_to_latest on an empty topic gives 0, which is past no page."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.seek_to_latest("t", "g")
    produce_sizes(mq, "t", 11, 11)
    assert _acked(mq) == [None, None]


def test_acks_are_per_topic(mq_factory: Any, clock: Any) -> None:
    """A group of topic "t" acks nothing of topics "tt" or "at"."""
    mq = _mq(mq_factory, clock, "g")
    for other in ("tt", "at"):
        mq.create_topic(other)
        produce_sizes(mq, other, 6, 6, 6, 6, 3)
        mq.create_consumer_group(other, "g")
    mq.consume("t", "g", 5)
    assert _acked(mq) == [clock.now, clock.now]
    assert _acked(mq, "tt") == [None, None]
    assert _acked(mq, "at") == [None, None]


def test_acks_change_nothing_else_of_a_page(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "g")
    before = pages(mq, "t")
    clock.advance(9)
    mq.consume("t", "g", 5)
    after = pages(mq, "t")
    assert [(p.end_id, p.size_bytes, p.closed_ts) for p in after] == [
        (p.end_id, p.size_bytes, p.closed_ts) for p in before
    ]


def test_consume_of_nothing_and_failed_ops_ack_nothing(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, "g", "h")
    mq.consume("t", "g", 0)
    mq.seek("t", "h", 99)  # not retained: -1
    assert _acked(mq) == [None, None]
    mq.produce("t", [pm(b"")])
    assert _acked(mq) == [None, None]
