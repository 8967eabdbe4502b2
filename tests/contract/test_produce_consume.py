"""SPEC "Operations": produce and consume."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqsim.model.api import ConsumerMessage, MQConfig, ProducerMessage

from .helpers import ids_of, payloads_of, pm, position, retained_ids, small_pages

# --------------------------------------------------------------------------- produce


def test_produce_appends_in_order_and_returns_the_ids(mq: Any) -> None:
    """Milvus TestRocksmq_Basic: one message, then two; consume 1 then 2."""
    mq.create_topic("channel_rocks")
    assert mq.produce("channel_rocks", [pm("a_message")]) == [1]
    assert mq.produce("channel_rocks", [pm("b_message"), pm("c_message")]) == [2, 3]
    mq.destroy_consumer_group("channel_rocks", "test_group")
    mq.create_consumer_group("channel_rocks", "test_group")
    assert payloads_of(mq.consume("channel_rocks", "test_group", 1)) == [b"a_message"]
    assert payloads_of(mq.consume("channel_rocks", "test_group", 2)) == [b"b_message",
                                                                           b"c_message"]


def test_produce_returns_a_list_of_ints(mq: Any) -> None:
    mq.create_topic("t")
    ids = mq.produce("t", [pm(b"a"), pm(b"b")])
    assert isinstance(ids, list)
    assert all(type(i) is int for i in ids)


def test_produce_empty_list_returns_empty_list_and_changes_nothing(
    mq_factory: Any, clock: Any
) -> None:
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * 4)])
    before = mq.snapshot()
    clock.advance(3)
    assert mq.produce("t", []) == []
    assert mq.snapshot() == before


def test_produce_stores_messages_and_pages_together(mq_factory: Any, clock: Any) -> None:
    """The messages and the page updates of one produce are one step: after it returns, the
    snapshot shows both."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    ids = mq.produce("t", [pm(b"x" * 6), pm(b"y" * 6), pm(b"z" * 3)])
    state = mq.snapshot().topics["t"]
    assert [m.msg_id for m in state.messages] == ids
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(2, 12)]
    assert state.open_page_bytes == 3
    assert state.last_id == 3


def test_snapshot_messages_are_the_produced_messages(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"a", {"k": "v"}), pm(b"", {}), pm(b"\x00\xff", {"x": "", "": "y"})])
    assert mq.snapshot().topics["t"].messages == (
        ConsumerMessage(1, b"a", {"k": "v"}),
        ConsumerMessage(2, b"", {}),
        ConsumerMessage(3, b"\x00\xff", {"x": "", "": "y"}),
    )


def test_properties_round_trip(mq: Any) -> None:
    props = [{}, {"k": "v"}, {"ключ": "значение", "emoji": "😀", "": ""}, {str(i): "v" * i
                                                                         for i in range(20)}]
    mq.create_topic("t")
    mq.produce("t", [pm(f"p{i}", p) for i, p in enumerate(props)])
    mq.create_consumer_group("t", "g")
    got = mq.consume("t", "g", 10)
    assert [dict(m.properties) for m in got] == props
    assert [m.payload for m in got] == [f"p{i}".encode() for i in range(len(props))]


def test_empty_payload_comes_back_as_empty_bytes_with_its_properties(mq: Any) -> None:
    """[Milvus: an empty payload comes back as nil with nil properties] Milvus
    TestRocksmq_CopyData: empty payloads are b"", never None, and keep their properties."""
    mq.create_topic("test_chan01")
    mq.create_topic("test_chan11")
    mq.produce("test_chan01", [pm(b"abcde")])
    mq.produce("test_chan11", [pm(b"", {"k": "v"})])
    mq.produce("test_chan11", [ProducerMessage(b"")])
    mq.produce("test_chan11", [pm(b"", {"a": "1", "b": "2"})])
    mq.create_consumer_group("test_chan01", "test_group")
    assert payloads_of(mq.consume("test_chan01", "test_group", 1)) == [b"abcde"]
    mq.create_consumer_group("test_chan11", "test_group")
    got = mq.consume("test_chan11", "test_group", 3)
    assert len(got) == 3
    for message in got:
        assert type(message.payload) is bytes
        assert message.payload == b""
        assert message.properties is not None
    assert [dict(m.properties) for m in got] == [{"k": "v"}, {}, {"a": "1", "b": "2"}]


def test_consumed_payload_is_bytes(mq: Any) -> None:
    mq.create_topic("t")
    mq.produce("t", [pm(b"abc")])
    mq.create_consumer_group("t", "g")
    (message,) = mq.consume("t", "g", 1)
    assert isinstance(message, ConsumerMessage)
    assert type(message.payload) is bytes
    assert type(message.msg_id) is int


def test_changing_a_produced_properties_dict_afterwards_changes_nothing(mq: Any) -> None:
    mq.create_topic("t")
    props = {"k": "v"}
    mq.produce("t", [ProducerMessage(b"a", props)])
    props["k"] = "changed"
    props["new"] = "x"
    mq.create_consumer_group("t", "g")
    assert dict(mq.consume("t", "g", 1)[0].properties) == {"k": "v"}


def test_changing_a_consumed_message_changes_nothing(mq: Any) -> None:
    """A consumed message is a copy: mutating its properties (if mutable at all) does not
    change the stored message."""
    mq.create_topic("t")
    mq.produce("t", [pm(b"a", {"k": "v"})])
    mq.create_consumer_group("t", "g")
    (message,) = mq.consume("t", "g", 1)
    with contextlib.suppress(TypeError):  # a read-only mapping is fine too
        message.properties["k"] = "changed"  # type: ignore[index]
    mq.seek("t", "g", 1)
    assert dict(mq.consume("t", "g", 1)[0].properties) == {"k": "v"}
    assert dict(mq.snapshot().topics["t"].messages[0].properties) == {"k": "v"}


_payloads = st.binary(max_size=64)
_properties = st.dictionaries(st.text(max_size=8), st.text(max_size=16), max_size=4)
_round_trip_topics = itertools.count()


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.tuples(_payloads, _properties), max_size=6))
def test_payload_and_properties_round_trip(mq: Any, batch: list[tuple[bytes, dict]]) -> None:
    """Property: what consume returns is exactly what produce was given, in order, with the
    ids produce returned (one queue, a fresh topic per example)."""
    topic = f"t{next(_round_trip_topics)}"
    mq.create_topic(topic)
    ids = mq.produce(topic, [ProducerMessage(p, props) for p, props in batch])
    mq.create_consumer_group(topic, "g")
    got = mq.consume(topic, "g", len(batch) + 1)
    assert [(m.msg_id, m.payload, dict(m.properties)) for m in got] == [
        (i, p, props) for i, (p, props) in zip(ids, batch, strict=True)
    ]
    assert ids == list(range(1, len(batch) + 1))
    mq.destroy_topic(topic)


# --------------------------------------------------------------------------- consume


def _topic_with(mq: Any, count: int, topic: str = "t", group: str = "g") -> list[int]:
    mq.create_topic(topic)
    ids = mq.produce(topic, [pm(f"message_{i}") for i in range(count)]) if count else []
    mq.create_consumer_group(topic, group)
    return ids


def test_consume_zero_returns_nothing_and_keeps_the_position(mq: Any) -> None:
    _topic_with(mq, 3)
    before = mq.snapshot()
    assert mq.consume("t", "g", 0) == []
    assert mq.snapshot() == before
    mq.consume("t", "g", 1)
    before = mq.snapshot()
    assert mq.consume("t", "g", 0) == []
    assert mq.snapshot() == before


def test_consume_returns_at_most_n_in_id_order(mq: Any) -> None:
    _topic_with(mq, 10)
    assert ids_of(mq.consume("t", "g", 3)) == [1, 2, 3]
    assert ids_of(mq.consume("t", "g", 1)) == [4]
    assert ids_of(mq.consume("t", "g", 100)) == [5, 6, 7, 8, 9, 10]


def test_consume_moves_the_position_to_last_id_plus_one(mq: Any) -> None:
    _topic_with(mq, 5)
    assert position(mq, "t", "g") == -1
    mq.consume("t", "g", 2)
    assert position(mq, "t", "g") == 3
    mq.consume("t", "g", 10)
    assert position(mq, "t", "g") == 6


def test_consume_returning_nothing_keeps_the_position(mq: Any) -> None:
    """Nothing returned: the position stays (-1 on an empty topic; last+1 at the end)."""
    _topic_with(mq, 0)
    before = mq.snapshot()
    assert mq.consume("t", "g", 5) == []
    assert mq.snapshot() == before
    assert position(mq, "t", "g") == -1
    mq.produce("t", [pm(b"a")])
    mq.consume("t", "g", 5)
    before = mq.snapshot()
    assert mq.consume("t", "g", 5) == []
    assert mq.snapshot() == before
    assert position(mq, "t", "g") == 2


def test_consume_one_by_one_then_nothing_then_new_messages(mq: Any) -> None:
    """Milvus TestRocksmq_Loop: 100 single produces and one batch of 100; consume 100 at once,
    then one at a time, then nothing; messages produced later are delivered next."""
    mq.create_topic("channel_test")
    for i in range(100):
        mq.produce("channel_test", [pm(f"message_{i}")])
    mq.produce("channel_test", [pm(f"message_{i + 100}") for i in range(100)])
    mq.create_consumer_group("channel_test", "test_group")
    got = mq.consume("channel_test", "test_group", 100)
    assert len(got) == 100
    assert got[0].payload == b"message_0"
    assert got[-1].payload == b"message_99"
    for i in range(100):
        (one,) = mq.consume("channel_test", "test_group", 1)
        assert one.payload == f"message_{i + 100}".encode()
    assert mq.consume("channel_test", "test_group", 1) == []
    mq.produce("channel_test", [pm(b"late")])
    assert [(m.msg_id, m.payload) for m in mq.consume("channel_test", "test_group", 5)] == [
        (201, b"late")
    ]


def test_consume_from_minus_one_starts_at_earliest_retained(mq_factory: Any, clock: Any) -> None:
    """After retention deleted the oldest pages, a group at -1 starts at the first message
    still retained."""
    mq = mq_factory(small_pages(10, retention_time_s=0), clock)
    _topic_with(mq, 0)
    mq.produce("t", [pm(b"x" * 11), pm(b"y" * 11), pm(b"z")])
    mq.consume("t", "g", 2)
    clock.advance(1)
    mq.run_retention()
    assert retained_ids(mq, "t") == [3]
    mq.create_consumer_group("t", "late")
    assert ids_of(mq.consume("t", "late", 10)) == [3]


def test_consume_skips_nothing_and_repeats_nothing_between_groups(mq: Any) -> None:
    """Groups read independently: one group's consume does not move another's position."""
    _topic_with(mq, 6)
    mq.create_consumer_group("t", "h")
    assert ids_of(mq.consume("t", "g", 4)) == [1, 2, 3, 4]
    assert ids_of(mq.consume("t", "h", 2)) == [1, 2]
    assert dict(mq.snapshot().groups) == {("t", "g"): 5, ("t", "h"): 3}


def test_consume_reads_only_its_own_topic(mq: Any) -> None:
    """Topic "b" is not fed by topic "ab" or "bb" (names sharing a suffix or prefix)."""
    for name in ("ab", "b", "bb"):
        mq.create_topic(name)
        mq.produce(name, [pm(f"{name}-{i}") for i in range(3)])
    mq.create_consumer_group("b", "g")
    assert payloads_of(mq.consume("b", "g", 100)) == [b"b-0", b"b-1", b"b-2"]


def test_consume_from_position_zero_reads_everything_new(mq: Any) -> None:
    """seek_to_latest on an empty topic gives position 0; later messages are all delivered."""
    _topic_with(mq, 0)
    mq.seek_to_latest("t", "g")
    assert position(mq, "t", "g") == 0
    mq.produce("t", [pm(b"a"), pm(b"b")])
    assert ids_of(mq.consume("t", "g", 10)) == [1, 2]


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_consume_large_n_returns_all_remaining(mq_factory: Any, clock: Any, n: int) -> None:
    mq = mq_factory(MQConfig(), clock)
    _topic_with(mq, 7)
    assert ids_of(mq.consume("t", "g", n)) == list(range(1, min(n, 7) + 1))
