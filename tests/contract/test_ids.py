"""SPEC "Message ids": per-topic, from 1, consecutive, never reused (retention, destroy and
re-create), ordered as integers."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import InvalidArgumentError, MQConfig

from .helpers import assert_fails, ids_of, pm, position, retained_ids, small_pages


def test_first_message_gets_id_one(mq: Any) -> None:
    mq.create_topic("t")
    assert mq.produce("t", [pm(b"a")]) == [1]


def test_ids_are_consecutive_within_and_across_produce_calls(mq: Any) -> None:
    mq.create_topic("t")
    assert mq.produce("t", [pm(b"a"), pm(b"b"), pm(b"c")]) == [1, 2, 3]
    assert mq.produce("t", [pm(b"d")]) == [4]
    assert mq.produce("t", [pm(b"e"), pm(b"f")]) == [5, 6]
    assert retained_ids(mq, "t") == [1, 2, 3, 4, 5, 6]


def test_ids_are_per_topic(mq: Any) -> None:
    """Each topic name has its own ids, starting at 1 (Milvus TestRocksmq_MultiChan)."""
    for name in ("chan01", "chan11"):
        mq.create_topic(name)
    for i in range(5):
        assert mq.produce("chan01", [pm(f"for_chann0_{i}")]) == [i + 1]
        assert mq.produce("chan11", [pm(f"for_chann1_{i}")]) == [i + 1]
    mq.create_consumer_group("chan11", "g")
    (first,) = mq.consume("chan11", "g", 1)
    assert (first.msg_id, first.payload) == (1, b"for_chann1_0")


def test_returned_ids_name_the_produced_messages(mq: Any) -> None:
    mq.create_topic("t")
    ids = mq.produce("t", [pm(b"a"), pm(b"b"), pm(b"c")])
    mq.create_consumer_group("t", "g")
    got = mq.consume("t", "g", 10)
    assert [(m.msg_id, m.payload) for m in got] == list(zip(ids, [b"a", b"b", b"c"], strict=True))


def test_last_id_is_zero_for_a_new_topic_and_tracks_the_highest_id(mq: Any) -> None:
    mq.create_topic("t")
    assert mq.snapshot().topics["t"].last_id == 0
    mq.produce("t", [pm(b"a"), pm(b"b")])
    assert mq.snapshot().topics["t"].last_id == 2


def test_empty_produce_uses_no_id(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a")])
    assert mq.produce("t", []) == []
    assert mq.produce("t", [pm(b"b")]) == [2]


def test_failed_produce_uses_no_id(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a")])
    assert_fails(mq, InvalidArgumentError, mq.produce, "t", [pm(b"b"), pm(b"c", {"k": None})])
    assert mq.produce("t", [pm(b"d")]) == [2]


def test_ids_continue_after_destroy_and_recreate(mq: Any) -> None:
    """[Milvus: ids repeat after destroy/re-create] The high-water mark outlives the topic."""
    mq.create_topic("t")
    mq.produce("t", [pm(b"a"), pm(b"b"), pm(b"c")])
    mq.destroy_topic("t")
    mq.create_topic("t")
    assert mq.snapshot().topics["t"].last_id == 3
    assert mq.produce("t", [pm(b"d")]) == [4]
    mq.destroy_topic("t")
    mq.create_topic("t")
    mq.destroy_topic("t")
    mq.create_topic("t")
    assert mq.produce("t", [pm(b"e"), pm(b"f")]) == [5, 6]
    assert retained_ids(mq, "t") == [5, 6]


def test_ids_of_other_names_are_unaffected_by_destroy(mq: Any) -> None:
    """Destroying "t" touches no other name's ids, including names starting with "t"."""
    for name in ("t", "t1", "tt"):
        mq.create_topic(name)
        mq.produce(name, [pm(b"x")] * 3)
    mq.destroy_topic("t")
    assert mq.produce("t1", [pm(b"y")]) == [4]
    assert mq.produce("tt", [pm(b"y")]) == [4]
    mq.create_topic("t")
    assert mq.produce("t", [pm(b"y")]) == [4]


def test_ids_continue_after_retention_empties_the_topic(mq_factory: Any, clock: Any) -> None:
    """[Milvus: ids rebuilt from the highest stored id repeat once retention empties a topic]"""
    mq = mq_factory(small_pages(1, retention_time_s=0), clock)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.produce("t", [pm(b"ab"), pm(b"cd"), pm(b"ef")])  # each message closes its own page
    mq.consume("t", "g", 3)
    clock.advance(1)
    mq.run_retention()
    state = mq.snapshot().topics["t"]
    assert state.messages == ()
    assert state.pages == ()
    assert state.last_id == 3
    assert mq.produce("t", [pm(b"gh")]) == [4]
    assert ids_of(mq.consume("t", "g", 10)) == [4]


def test_ids_are_ordered_as_integers_across_digit_boundaries(mq: Any) -> None:
    """[Milvus: unpadded decimal keys sort 10 before 9] Ids 9→10, 99→100, 999→1000 are in
    numeric order for consume, seek, get_latest_msg, seek_to_latest and snapshot."""
    mq.create_topic("t")
    ids = mq.produce("t", [pm(str(i)) for i in range(1, 1002)])
    assert ids == list(range(1, 1002))
    mq.create_consumer_group("t", "g")
    got = mq.consume("t", "g", 2000)
    assert ids_of(got) == list(range(1, 1002))
    assert [m.payload for m in got] == [str(i).encode() for i in range(1, 1002)]
    assert retained_ids(mq, "t") == list(range(1, 1002))
    for before in (9, 99, 999):
        mq.seek("t", "g", before)
        assert ids_of(mq.consume("t", "g", 2)) == [before, before + 1]
        assert position(mq, "t", "g") == before + 2
    assert mq.get_latest_msg("t") == 1001
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 1002


@pytest.mark.parametrize("boundary", [10, 100])
def test_consume_from_below_a_digit_boundary_continues_numerically(
    mq_factory: Any, clock: Any, boundary: int
) -> None:
    """Consuming one by one across 9→10 / 99→100 never skips or repeats an id."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"m")] * (boundary + 2))
    mq.create_consumer_group("t", "g")
    mq.seek("t", "g", boundary - 2)
    seen = [ids_of(mq.consume("t", "g", 1))[0] for _ in range(4)]
    assert seen == [boundary - 2, boundary - 1, boundary, boundary + 1]
