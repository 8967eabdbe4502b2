"""SPEC "Pages": the open page's byte count and the strict close rule."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqsim.model.api import MIB, MQConfig, Page

from .helpers import pm, produce_sizes, small_pages, topic_state


def _expected(sizes: list[int], page_size: int, now: int) -> tuple[list[Page], int]:
    """SPEC's rule, restated: pages closed by producing ``sizes`` from an empty open page."""
    closed: list[Page] = []
    open_bytes = 0
    for msg_id, size in enumerate(sizes, start=1):
        if open_bytes + size > page_size:
            closed.append(Page(end_id=msg_id, size_bytes=open_bytes + size, closed_ts=now,
                               acked_ts=None))
            open_bytes = 0
        else:
            open_bytes += size
    return closed, open_bytes


def _mq(mq_factory: Any, clock: Any, page_size: int = 10) -> Any:
    mq = mq_factory(small_pages(page_size), clock)
    mq.create_topic("t")
    return mq


def test_new_topic_has_no_pages_and_an_empty_open_page(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock)
    state = topic_state(mq, "t")
    assert state.pages == ()
    assert state.open_page_bytes == 0


def test_filling_the_page_exactly_keeps_it_open(mq_factory: Any, clock: Any) -> None:
    """open + size == page_size is not more than the page size: the page stays open."""
    mq = _mq(mq_factory, clock)
    produce_sizes(mq, "t", 4, 6)
    state = topic_state(mq, "t")
    assert state.pages == ()
    assert state.open_page_bytes == 10


def test_one_byte_more_closes_the_page_with_that_message(mq_factory: Any, clock: Any) -> None:
    """open + size > page_size: the page closes with end_id = this message's id, size =
    open + size, closed_ts = now, and the open count becomes 0."""
    mq = _mq(mq_factory, clock)
    produce_sizes(mq, "t", 4, 6)
    clock.set(1234)
    produce_sizes(mq, "t", 1)
    state = topic_state(mq, "t")
    assert state.pages == (Page(end_id=3, size_bytes=11, closed_ts=1234, acked_ts=None),)
    assert state.open_page_bytes == 0


def test_open_count_accumulates_across_produce_calls(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock)
    for expected_open in (4, 8):
        produce_sizes(mq, "t", 4)
        assert topic_state(mq, "t").open_page_bytes == expected_open
        assert topic_state(mq, "t").pages == ()
    produce_sizes(mq, "t", 4)
    state = topic_state(mq, "t")
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(3, 12)]
    assert state.open_page_bytes == 0


def test_message_bigger_than_a_page_closes_a_page(mq_factory: Any, clock: Any) -> None:
    """A message larger than a page closes the open page by itself (with what was open)."""
    mq = _mq(mq_factory, clock)
    produce_sizes(mq, "t", 25)
    produce_sizes(mq, "t", 3, 25)
    state = topic_state(mq, "t")
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(1, 25), (3, 28)]
    assert state.open_page_bytes == 0


def test_zero_size_payloads_never_close_a_page(mq_factory: Any, clock: Any) -> None:
    """An empty payload adds 0 bytes: even on a full open page, 0 more is not > page size."""
    mq = _mq(mq_factory, clock)
    produce_sizes(mq, "t", *([0] * 20))
    assert topic_state(mq, "t").pages == ()
    assert topic_state(mq, "t").open_page_bytes == 0
    produce_sizes(mq, "t", 10, *([0] * 20))
    assert topic_state(mq, "t").pages == ()
    assert topic_state(mq, "t").open_page_bytes == 10
    produce_sizes(mq, "t", 1)
    state = topic_state(mq, "t")
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(42, 11)]


def test_page_size_one(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock, page_size=1)
    produce_sizes(mq, "t", 1, 1, 0, 2)
    state = topic_state(mq, "t")
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(2, 2), (4, 2)]
    assert state.open_page_bytes == 0


def test_one_produce_can_close_several_pages_at_the_same_time(
    mq_factory: Any, clock: Any
) -> None:
    mq = _mq(mq_factory, clock)
    clock.set(77)
    produce_sizes(mq, "t", 6, 6, 6, 6, 6)
    state = topic_state(mq, "t")
    assert state.pages == (Page(2, 12, 77, None), Page(4, 12, 77, None))
    assert state.open_page_bytes == 6


def test_closed_ts_is_the_clock_at_each_close(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock)
    clock.set(10)
    produce_sizes(mq, "t", 11)
    clock.set(20)
    produce_sizes(mq, "t", 5)
    clock.set(30)
    produce_sizes(mq, "t", 6)
    assert [p.closed_ts for p in topic_state(mq, "t").pages] == [10, 30]


def test_pages_are_per_topic(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock)
    mq.create_topic("u")
    produce_sizes(mq, "t", 7)
    produce_sizes(mq, "u", 7)
    produce_sizes(mq, "t", 7)
    assert [(p.end_id, p.size_bytes) for p in topic_state(mq, "t").pages] == [(2, 14)]
    assert topic_state(mq, "u").pages == ()
    assert topic_state(mq, "u").open_page_bytes == 7


def test_page_size_counts_payload_bytes_only(mq_factory: Any, clock: Any) -> None:
    """size = len(payload): properties do not count, and bytes (not characters) do."""
    mq = _mq(mq_factory, clock)
    mq.produce("t", [pm("é" * 5, {"a-long-key": "a-long-value" * 10})])  # 10 bytes
    state = topic_state(mq, "t")
    assert state.pages == ()
    assert state.open_page_bytes == 10


def test_an_ack_changes_only_the_acked_ts_of_a_page(mq_factory: Any, clock: Any) -> None:
    mq = _mq(mq_factory, clock)
    produce_sizes(mq, "t", 11, 3)
    before = topic_state(mq, "t")
    clock.advance(5)
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 1)  # position 2 > end_id 1: acks the page
    assert [p.acked_ts for p in topic_state(mq, "t").pages] == [clock.now]
    assert topic_state(mq, "t").open_page_bytes == before.open_page_bytes
    assert [(p.end_id, p.size_bytes, p.closed_ts) for p in topic_state(mq, "t").pages] == [
        (p.end_id, p.size_bytes, p.closed_ts) for p in before.pages
    ]


@pytest.mark.slow
def test_default_page_size_is_64_mib(mq_factory: Any, clock: Any) -> None:
    """With MQConfig(), 64 MiB of payload fits the open page; one byte more closes it."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * (64 * MIB))])
    state = topic_state(mq, "t")
    assert state.pages == ()
    assert state.open_page_bytes == 64 * MIB
    mq.produce("t", [pm(b"y")])
    state = topic_state(mq, "t")
    assert [(p.end_id, p.size_bytes) for p in state.pages] == [(2, 64 * MIB + 1)]
    assert state.open_page_bytes == 0


_topics = itertools.count()


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    page_size=st.integers(min_value=1, max_value=12),
    batches=st.lists(st.lists(st.integers(min_value=0, max_value=15), max_size=6), max_size=5),
)
def test_pages_follow_the_close_rule(
    mq_factory: Any, clock: Any, page_size: int, batches: list[list[int]]
) -> None:
    """Property: for any payload sizes, split into any produce calls, the pages and the open
    count are exactly those of SPEC's rule."""
    mq = mq_factory.cached(small_pages(page_size), clock)
    topic = f"t{next(_topics)}"
    mq.create_topic(topic)
    for batch in batches:
        if batch:
            produce_sizes(mq, topic, *batch)
    sizes = [size for batch in batches for size in batch]
    expected_pages, expected_open = _expected(sizes, page_size, clock.now)
    state = topic_state(mq, topic)
    assert list(state.pages) == expected_pages
    assert state.open_page_bytes == expected_open
    mq.destroy_topic(topic)
