"""SPEC "Names and values": names, message types, argument types and the config."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqsim.model.api import (
    MIB,
    InvalidArgumentError,
    MQConfig,
    ProducerMessage,
)

from .helpers import (
    GROUP_OPS,
    TOPIC_OPS,
    assert_fails,
    pm,
    position,
    retained_ids,
)

#: Valid names: 1 character, exactly 4096 UTF-8 bytes (ASCII and multi-byte), and characters
#: SPEC does not forbid (only "/" and NUL are).
VALID_NAMES = {
    "one-char": "a",
    "4096-ascii": "x" * 4096,
    "4096-two-byte": "é" * 2048,
    "4096-three-byte": "€" * 1365 + "a",
    "4096-four-byte": "😀" * 1024,
    "space": " ",
    "dots": "..",
    "backslash": "a\\b",
    "control-chars": "tab\there\nnewline",
    "digits": "0123456789",
}

#: Invalid names: empty, "/", NUL, more than 4096 UTF-8 bytes, not UTF-8, not a str.
INVALID_NAMES: dict[str, Any] = {
    "empty": "",
    "slash-only": "/",
    "slash-inside": "a/b",
    "slash-trailing": "a/",
    "nul-only": "\0",
    "nul-inside": "a\0b",
    "4097-ascii": "x" * 4097,
    "4097-two-byte": "é" * 2048 + "a",
    "4097-four-byte": "😀" * 1024 + "a",
    "lone-surrogate": "\ud800",
    "none": None,
    "bytes": b"t",
    "int": 1,
    "float": 1.5,
    "list": ["t"],
}


def _seeded(mq_factory: Any, clock: Any) -> Any:
    """A queue with topic "t" (one message) and group ("t", "g")."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"m")])
    mq.create_consumer_group("t", "g")
    return mq


# --------------------------------------------------------------------------- topic names


@pytest.mark.parametrize("op", list(TOPIC_OPS))
def test_invalid_topic_name_is_invalid_argument_and_changes_nothing(
    mq_factory: Any, clock: Any, op: str
) -> None:
    """Every operation taking a topic rejects each invalid topic name with InvalidArgument."""
    mq = _seeded(mq_factory, clock)
    for label, name in INVALID_NAMES.items():
        try:
            assert_fails(mq, InvalidArgumentError, TOPIC_OPS[op], mq, name)
        except AssertionError as exc:
            raise AssertionError(f"{op} with topic name {label}: {exc}") from exc


@pytest.mark.parametrize("op", list(GROUP_OPS))
def test_invalid_group_name_is_invalid_argument_and_changes_nothing(
    mq_factory: Any, clock: Any, op: str
) -> None:
    """Every operation taking a group rejects each invalid group name with InvalidArgument,
    even when the topic exists."""
    mq = _seeded(mq_factory, clock)
    for label, name in INVALID_NAMES.items():
        try:
            assert_fails(mq, InvalidArgumentError, GROUP_OPS[op], mq, "t", name)
        except AssertionError as exc:
            raise AssertionError(f"{op} with group name {label}: {exc}") from exc


@pytest.mark.parametrize("name", list(VALID_NAMES.values()), ids=list(VALID_NAMES))
def test_valid_topic_name_works_with_every_operation(
    mq_factory: Any, clock: Any, name: str
) -> None:
    """A non-empty str of at most 4096 UTF-8 bytes without "/" or NUL is a valid topic name."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic(name)
    assert name in mq.snapshot().topics
    assert mq.produce(name, [pm(b"a"), pm(b"b")]) == [1, 2]
    assert mq.get_latest_msg(name) == 2
    mq.create_consumer_group(name, "g")
    assert mq.exist_consumer_group(name, "g")
    assert [m.payload for m in mq.consume(name, "g", 1)] == [b"a"]
    mq.seek(name, "g", 2)
    assert position(mq, name, "g") == 2
    mq.seek_to_latest(name, "g")
    assert position(mq, name, "g") == 3
    mq.destroy_consumer_group(name, "g")
    assert not mq.exist_consumer_group(name, "g")
    mq.destroy_topic(name)
    assert name not in mq.snapshot().topics


@pytest.mark.parametrize("name", list(VALID_NAMES.values()), ids=list(VALID_NAMES))
def test_valid_group_name_works_with_every_operation(
    mq_factory: Any, clock: Any, name: str
) -> None:
    """Group names follow the same rule as topic names."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"a"), pm(b"b")])
    mq.create_consumer_group("t", name)
    assert mq.snapshot().groups == {("t", name): -1}
    assert mq.exist_consumer_group("t", name)
    assert [m.msg_id for m in mq.consume("t", name, 1)] == [1]
    mq.seek("t", name, 2)
    assert position(mq, "t", name) == 2
    mq.seek_to_latest("t", name)
    assert position(mq, "t", name) == 3
    mq.destroy_consumer_group("t", name)
    assert mq.snapshot().groups == {}


def test_names_are_exact_strings(mq_factory: Any, clock: Any) -> None:
    """Names differing in case or Unicode normalization are different topics."""
    mq = mq_factory(MQConfig(), clock)
    names = ["t", "T", "\u00e9", "e\u0301"]
    for name in names:
        mq.create_topic(name)
    for index, name in enumerate(names):
        mq.produce(name, [pm(b"x")] * (index + 1))
    state = mq.snapshot()
    assert sorted(state.topics) == sorted(names)
    for index, name in enumerate(names):
        assert state.topics[name].last_id == index + 1


def test_topic_and_group_may_share_a_name(mq_factory: Any, clock: Any) -> None:
    """A group name lives in its topic: the same string can name a topic and a group."""
    mq = mq_factory(MQConfig(), clock)
    mq.create_topic("a")
    mq.create_topic("b")
    mq.create_consumer_group("a", "b")
    mq.create_consumer_group("b", "a")
    assert mq.snapshot().groups == {("a", "b"): -1, ("b", "a"): -1}


_name_text = st.text(
    alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=40,
)


_PROPERTY_SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_PROPERTY_SETTINGS
@given(name=_name_text)
def test_any_name_without_slash_or_nul_is_valid(mq: Any, name: str) -> None:
    """Property: every short str without "/" or NUL can name a topic and a group.

    (One queue serves all examples: each example leaves it empty again.)
    """
    mq.create_topic(name)
    mq.create_consumer_group(name, name)
    state = mq.snapshot()
    assert list(state.topics) == [name]
    assert dict(state.groups) == {(name, name): -1}
    mq.destroy_topic(name)
    assert mq.snapshot().topics == {}


@_PROPERTY_SETTINGS
@given(
    prefix=_name_text | st.just(""),
    bad=st.sampled_from(["/", "\0"]),
    suffix=_name_text | st.just(""),
)
def test_any_name_with_slash_or_nul_is_invalid(
    mq: Any, prefix: str, bad: str, suffix: str
) -> None:
    """Property: a "/" or a NUL anywhere in a name makes it InvalidArgument."""
    name = prefix + bad + suffix
    assert_fails(mq, InvalidArgumentError, mq.create_topic, name)
    mq.create_topic("t")
    assert_fails(mq, InvalidArgumentError, mq.create_consumer_group, "t", name)
    assert_fails(mq, InvalidArgumentError, mq.produce, name, [pm(b"x")])


# --------------------------------------------------------------------------- message values

INVALID_PAYLOADS: dict[str, Any] = {
    "str": "x",
    "empty-str": "",
    "none": None,
    "bytearray": bytearray(b"x"),
    "memoryview": memoryview(b"x"),
    "int": 1,
    "list": [120],
}

INVALID_PROPERTIES: dict[str, Any] = {
    "int-key": {1: "a"},
    "int-value": {"a": 1},
    "none-value": {"a": None},
    "bytes-key": {b"a": "b"},
    "bytes-value": {"a": b"b"},
    "none": None,
    "list-of-pairs": [("a", "b")],
    "str": "ab",
    "one-bad-among-good": {"a": "b", "c": 3},
    "surrogate-key": {"\ud800": "x"},
    "surrogate-value": {"x": "\udfff"},
}


@pytest.mark.parametrize("payload", list(INVALID_PAYLOADS.values()), ids=list(INVALID_PAYLOADS))
def test_payload_that_is_not_bytes_is_invalid_argument(
    mq_factory: Any, clock: Any, payload: Any
) -> None:
    """A payload that is not ``bytes`` is InvalidArgument, and nothing is produced."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, mq.produce, "t", [ProducerMessage(payload, {})])


@pytest.mark.parametrize(
    "properties", list(INVALID_PROPERTIES.values()), ids=list(INVALID_PROPERTIES)
)
def test_properties_that_are_not_str_to_str_are_invalid_argument(
    mq_factory: Any, clock: Any, properties: Any
) -> None:
    """Properties that are not a ``str -> str`` mapping (of storable, UTF-8-encodable
    strings) are InvalidArgument, and nothing is produced."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, mq.produce, "t", [ProducerMessage(b"x", properties)])


INVALID_MESSAGE_LISTS: dict[str, Any] = {
    "none": None,
    "single-message": ProducerMessage(b"x"),
    "str": "abc",
    "bytes": b"abc",
    "dict": {"payload": b"x"},
    "int": 1,
    "generator": (m for m in [ProducerMessage(b"x")]),
    "list-of-bytes": [b"x"],
    "list-of-none": [None],
    "list-of-dicts": [{"payload": b"x"}],
    "good-then-str": [ProducerMessage(b"x"), "y"],
}


@pytest.mark.parametrize(
    "messages", list(INVALID_MESSAGE_LISTS.values()), ids=list(INVALID_MESSAGE_LISTS)
)
def test_messages_not_a_list_of_producer_messages_is_invalid_argument(
    mq_factory: Any, clock: Any, messages: Any
) -> None:
    """``produce`` takes a list of ProducerMessage; anything else is InvalidArgument."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, mq.produce, "t", messages)


@pytest.mark.parametrize("bad_index", [0, 1, 4])
def test_one_invalid_message_rejects_the_whole_batch(
    mq_factory: Any, clock: Any, bad_index: int
) -> None:
    """A batch with one invalid message produces nothing at all, and no id is used up."""
    mq = _seeded(mq_factory, clock)
    batch: list[Any] = [pm(b"ok")] * 5
    batch[bad_index] = ProducerMessage("not bytes", {})  # type: ignore[arg-type]
    assert_fails(mq, InvalidArgumentError, mq.produce, "t", batch)
    assert mq.produce("t", [pm(b"next")]) == [2]
    assert retained_ids(mq, "t") == [1, 2]


@pytest.mark.parametrize("n", [-1, -100, 1.0, "1", None, True, False, [1]])
def test_consume_count_that_is_not_a_non_negative_int_is_invalid_argument(
    mq_factory: Any, clock: Any, n: Any
) -> None:
    """``consume``'s n must be an int >= 0 (a bool is not a count)."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, mq.consume, "t", "g", n)


@pytest.mark.parametrize("msg_id", [1.0, "1", None, True, False, b"1"])
def test_seek_id_that_is_not_an_int_is_invalid_argument(
    mq_factory: Any, clock: Any, msg_id: Any
) -> None:
    """``seek``'s id must be an int (a bool is not an id)."""
    mq = _seeded(mq_factory, clock)
    mq.consume("t", "g", 1)
    assert_fails(mq, InvalidArgumentError, mq.seek, "t", "g", msg_id)


def test_properties_default_to_empty(mq_factory: Any, clock: Any) -> None:
    """``ProducerMessage(payload)`` has empty properties, and they come back empty."""
    mq = _seeded(mq_factory, clock)
    mq.produce("t", [ProducerMessage(b"p")])
    (message,) = mq.consume("t", "g", 2)[1:]
    assert message.payload == b"p"
    assert dict(message.properties) == {}


# --------------------------------------------------------------------------- config


def test_config_defaults_are_64_mib_3_days_and_7200_mib() -> None:
    """MQConfig() is page 64 MiB, retention 259200 s and 7200 MiB."""
    config = MQConfig()
    assert MIB == 1024 * 1024
    assert config.page_size_bytes == 64 * MIB
    assert config.retention_time_s == 259_200
    assert config.retention_size_bytes == 7200 * MIB


@pytest.mark.parametrize(
    "kwargs",
    [
        {"retention_time_s": -1},
        {"retention_size_bytes": -1},
        {"retention_time_s": -1, "retention_size_bytes": -1},
        {"retention_time_s": 0, "retention_size_bytes": 0},
        {"page_size_bytes": 1},
    ],
)
def test_config_accepts_minus_one_to_disable_retention_limits(kwargs: dict[str, int]) -> None:
    """-1 disables either retention limit; 0 and page size 1 are allowed too."""
    config = MQConfig(**kwargs)
    for key, value in kwargs.items():
        assert getattr(config, key) == value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"page_size_bytes": 0},
        {"page_size_bytes": -1},
        {"page_size_bytes": 1.5},
        {"retention_time_s": -2},
        {"retention_size_bytes": -2},
        {"retention_time_s": "1"},
        {"retention_size_bytes": None},
        {"page_size_bytes": True},
    ],
)
def test_config_rejects_other_values(kwargs: dict[str, Any]) -> None:
    """A page size below 1, or a retention limit below -1 or not an int, is InvalidArgument."""
    with pytest.raises(InvalidArgumentError):
        MQConfig(**kwargs)


def test_config_is_frozen() -> None:
    """The config is a value: it cannot be changed after construction."""
    config = MQConfig()
    with pytest.raises(AttributeError):
        config.page_size_bytes = 1  # type: ignore[misc]


# --------------------------------------------------------------------------- clock


def test_timestamps_come_from_the_injected_clock(mq_factory: Any) -> None:
    """closed_ts and acked_ts are the injected clock's readings (here far from real time)."""
    now = [7]
    mq = mq_factory(MQConfig(page_size_bytes=1), lambda: now[0])
    mq.create_topic("t")
    mq.produce("t", [pm(b"ab")])
    now[0] = 9
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 1)
    (page,) = mq.snapshot().topics["t"].pages
    assert (page.closed_ts, page.acked_ts) == (7, 9)


def test_default_clock_is_wall_time_in_whole_seconds(mq_factory: Any) -> None:
    """Without a clock, timestamps are int(time.time())."""
    mq = mq_factory(MQConfig(page_size_bytes=1))
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    before = int(time.time())
    mq.produce("t", [pm(b"ab")])
    mq.consume("t", "g", 1)
    after = int(time.time())
    (page,) = mq.snapshot().topics["t"].pages
    assert type(page.closed_ts) is int
    assert before <= page.closed_ts <= after
    assert page.acked_ts is not None
    assert before <= page.acked_ts <= after
