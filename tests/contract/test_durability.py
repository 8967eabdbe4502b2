"""SPEC "Durability, crash and recovery": every operation that returned is durable, positions
included. These need a store to reopen, so they run against impl.RocksMQ only; the model
parameter skips with the reason (the model is an in-memory value)."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import InvalidArgumentError, MQError, NotServingError

from .helpers import (
    ALL_OPS,
    assert_fails,
    ids_of,
    pm,
    position,
    produce_sizes,
    retained_ids,
    small_pages,
)

#: Reopen after a clean close, and after a crash (handles dropped, nothing more written).
HOW = pytest.mark.parametrize("crash", [False, True], ids=["close", "crash"])


def _rich(store_factory: Any, clock: Any, **retention: int) -> Any:
    """Two topics with messages (properties, an empty payload), closed, acked and open pages,
    and groups at -1, 0, an advanced position and a sought-back position."""
    mq = store_factory(small_pages(10, **retention), clock)
    mq.create_topic("t")
    mq.create_topic("tt")
    mq.produce("t", [pm(b"x" * 11, {"k": "v"}), pm(b"", {"empty": "yes"}), pm(b"y" * 12)])
    clock.advance(1)
    mq.produce("t", [pm(b"z" * 3)])
    mq.create_consumer_group("t", "idle")
    mq.create_consumer_group("t", "fast")
    mq.create_consumer_group("t", "back")
    mq.create_consumer_group("tt", "zero")
    mq.seek_to_latest("tt", "zero")
    clock.advance(1)
    mq.consume("t", "fast", 4)
    mq.consume("t", "back", 3)
    mq.seek("t", "back", 2)
    return mq


@HOW
def test_reopen_restores_the_whole_state(store_factory: Any, clock: Any, crash: bool) -> None:
    mq = _rich(store_factory, clock)
    before = mq.snapshot()
    reopened = store_factory.reopen(mq, crash=crash)
    assert reopened.snapshot() == before


@HOW
def test_groups_and_positions_survive_reopen(store_factory: Any, clock: Any, crash: bool) -> None:
    """[Milvus: groups and positions live in memory only and vanish on restart]"""
    mq = _rich(store_factory, clock)
    expected = {("t", "idle"): -1, ("t", "fast"): 5, ("t", "back"): 2, ("tt", "zero"): 0}
    assert dict(mq.snapshot().groups) == expected
    reopened = store_factory.reopen(mq, crash=crash)
    assert dict(reopened.snapshot().groups) == expected
    assert reopened.exist_consumer_group("t", "fast")
    assert ids_of(reopened.consume("t", "back", 10)) == [2, 3, 4]
    assert reopened.consume("t", "fast", 10) == []
    assert ids_of(reopened.consume("t", "idle", 1)) == [1]


@HOW
def test_ids_continue_after_reopen(store_factory: Any, clock: Any, crash: bool) -> None:
    mq = _rich(store_factory, clock)
    reopened = store_factory.reopen(mq, crash=crash)
    assert reopened.produce("t", [pm(b"n")]) == [5]
    assert reopened.produce("tt", [pm(b"n")]) == [1]


@HOW
def test_ids_continue_after_destroy_and_reopen(store_factory: Any, clock: Any, crash: bool) -> None:
    """The high-water mark of a destroyed name is durable too."""
    mq = _rich(store_factory, clock)
    mq.destroy_topic("t")
    reopened = store_factory.reopen(mq, crash=crash)
    assert "t" not in reopened.snapshot().topics
    reopened.create_topic("t")
    assert reopened.snapshot().topics["t"].last_id == 4
    assert reopened.produce("t", [pm(b"n")]) == [5]


@HOW
def test_ids_continue_after_retention_emptied_topic_and_reopen(
    store_factory: Any, clock: Any, crash: bool
) -> None:
    mq = store_factory(small_pages(1, retention_time_s=0), clock)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    produce_sizes(mq, "t", 2, 2, 2)
    mq.consume("t", "g", 3)
    clock.advance(1)
    mq.run_retention()
    assert retained_ids(mq, "t") == []
    reopened = store_factory.reopen(mq, crash=crash)
    assert reopened.snapshot().topics["t"].last_id == 3
    assert reopened.produce("t", [pm(b"n")]) == [4]


@HOW
def test_destroyed_topic_and_group_stay_destroyed(
    store_factory: Any, clock: Any, crash: bool
) -> None:
    mq = _rich(store_factory, clock)
    mq.destroy_consumer_group("t", "idle")
    mq.destroy_topic("tt")
    before = mq.snapshot()
    reopened = store_factory.reopen(mq, crash=crash)
    assert reopened.snapshot() == before
    assert not reopened.exist_consumer_group("t", "idle")
    assert not reopened.exist_consumer_group("tt", "zero")
    reopened.create_topic("tt")
    assert reopened.snapshot().topics["tt"].messages == ()


@HOW
def test_retention_deleted_messages_never_come_back(
    store_factory: Any, clock: Any, crash: bool
) -> None:
    mq = _rich(store_factory, clock, retention_time_s=0)
    mq.destroy_consumer_group("t", "idle")
    mq.destroy_consumer_group("t", "back")
    clock.advance(5)
    mq.run_retention()
    before = mq.snapshot()
    assert retained_ids(mq, "t") == [4]
    reopened = store_factory.reopen(mq, crash=crash)
    assert reopened.snapshot() == before
    reopened.create_consumer_group("t", "late")
    assert ids_of(reopened.consume("t", "late", 10)) == [4]


@HOW
def test_acks_survive_reopen_with_their_timestamps(
    store_factory: Any, clock: Any, crash: bool
) -> None:
    mq = _rich(store_factory, clock)
    mq.destroy_consumer_group("t", "idle")
    acked = [p.acked_ts for p in mq.snapshot().topics["t"].pages]
    assert acked == [clock.now, None]
    reopened = store_factory.reopen(mq, crash=crash)
    assert [p.acked_ts for p in reopened.snapshot().topics["t"].pages] == acked
    clock.advance(7)
    reopened.consume("t", "back", 10)
    assert [p.acked_ts for p in reopened.snapshot().topics["t"].pages] == [acked[0], clock.now]


@HOW
def test_reopened_queue_keeps_paging_from_the_open_count(
    store_factory: Any, clock: Any, crash: bool
) -> None:
    """The open page's byte count is durable: 3 open bytes + 8 closes a page."""
    mq = _rich(store_factory, clock)
    reopened = store_factory.reopen(mq, crash=crash)
    produce_sizes(reopened, "t", 8)
    state = reopened.snapshot().topics["t"]
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(1, 11), (3, 12), (5, 11)]
    assert state.open_page_bytes == 0


def test_operations_after_close_write_nothing(store_factory: Any, clock: Any) -> None:
    """NotServing changes nothing, on disk too."""
    mq = _rich(store_factory, clock)
    before = mq.snapshot()
    mq.close()
    for op in ALL_OPS.values():
        with pytest.raises(NotServingError):
            op(mq)
    reopened = store_factory.reopen(mq)
    assert reopened.snapshot() == before


def test_failed_operations_write_nothing(store_factory: Any, clock: Any) -> None:
    """An operation that raises changes nothing, on disk too."""
    mq = _rich(store_factory, clock)
    before = mq.snapshot()
    assert_fails(mq, InvalidArgumentError, mq.produce, "t", [pm(b"ok"), pm(b"bad", {"k": 1})])
    for call in (
        lambda: mq.create_consumer_group("t", "fast"),
        lambda: mq.consume("t", "nobody", 1),
        lambda: mq.produce("missing", [pm(b"x")]),
        lambda: mq.seek("t", "fast", "1"),
    ):
        with pytest.raises(MQError):
            call()
    reopened = store_factory.reopen(mq)
    assert reopened.snapshot() == before
    assert reopened.produce("t", [pm(b"next")]) == [5]


def test_reopen_twice(store_factory: Any, clock: Any) -> None:
    mq = _rich(store_factory, clock)
    before = mq.snapshot()
    again = store_factory.reopen(store_factory.reopen(mq))
    assert again.snapshot() == before
    assert position(again, "t", "back") == 2
