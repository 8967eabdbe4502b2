"""SPEC "Errors": the error kinds, NotServing after close, the order of checks (closed,
arguments, topic, group), and "an operation that raises changes nothing"."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import (
    GroupExistsError,
    GroupNotFoundError,
    InvalidArgumentError,
    MQConfig,
    MQError,
    NotServingError,
    ProducerMessage,
    TopicNotFoundError,
)

from .helpers import (
    ALL_OPS,
    GROUP_OPS,
    TOPIC_OPS,
    assert_fails,
    assert_raises_kind,
    pm,
    position,
    small_pages,
)


def _seeded(mq_factory: Any, clock: Any) -> Any:
    """Topic "t" with 3 messages in 2 closed pages, group "g" at 2, group "h" at -1."""
    mq = mq_factory(small_pages(10), clock)
    mq.create_topic("t")
    mq.produce("t", [pm(b"x" * 11), pm(b"y" * 11), pm(b"z")])
    mq.create_consumer_group("t", "g")
    mq.consume("t", "g", 1)
    mq.create_consumer_group("t", "h")
    return mq


# --------------------------------------------------------------------------- kinds


def test_error_kinds_are_distinct_subclasses_of_mqerror() -> None:
    """One base MQError, one subclass per kind, each named as SPEC names the kind."""
    kinds = {
        NotServingError: "NotServing",
        InvalidArgumentError: "InvalidArgument",
        TopicNotFoundError: "TopicNotFound",
        GroupNotFoundError: "GroupNotFound",
        GroupExistsError: "GroupExists",
    }
    for cls, kind in kinds.items():
        assert issubclass(cls, MQError)
        assert cls.kind == kind
        for other in kinds:
            if other is not cls:
                assert not issubclass(cls, other)


# --------------------------------------------------------------------------- closed


@pytest.mark.parametrize("op", list(ALL_OPS))
def test_every_operation_but_close_raises_not_serving_after_close(
    mq_factory: Any, clock: Any, op: str
) -> None:
    """After close(), every operation (snapshot and run_retention included) is NotServing."""
    mq = _seeded(mq_factory, clock)
    mq.close()
    assert_raises_kind(NotServingError, ALL_OPS[op], mq)


def test_close_twice_is_fine(mq_factory: Any, clock: Any) -> None:
    """close() on a closed queue does nothing and raises nothing."""
    mq = _seeded(mq_factory, clock)
    assert mq.close() is None
    assert mq.close() is None
    assert_raises_kind(NotServingError, mq.snapshot)


def test_close_of_a_fresh_queue_is_fine(mq_factory: Any, clock: Any) -> None:
    mq = mq_factory(MQConfig(), clock)
    mq.close()
    assert_raises_kind(NotServingError, mq.create_topic, "t")


@pytest.mark.parametrize("op", list(TOPIC_OPS))
def test_closed_is_checked_before_arguments(mq_factory: Any, clock: Any, op: str) -> None:
    """A closed queue says NotServing even for an invalid topic name."""
    mq = _seeded(mq_factory, clock)
    mq.close()
    for bad in ("", "a/b", None):
        assert_raises_kind(NotServingError, TOPIC_OPS[op], mq, bad)


@pytest.mark.parametrize(
    "call",
    [
        lambda mq: mq.produce("t", None),
        lambda mq: mq.produce("t", [pm(b"x"), "y"]),
        lambda mq: mq.consume("t", "g", -1),
        lambda mq: mq.consume("t", "g", True),
        lambda mq: mq.seek("t", "g", "1"),
        lambda mq: mq.create_consumer_group("t", ""),
        lambda mq: mq.exist_consumer_group("t", "a/b"),
    ],
    ids=["produce-none", "produce-bad-item", "consume-neg", "consume-bool", "seek-str",
         "create-group-empty", "exist-group-slash"],
)
def test_closed_is_checked_before_other_arguments(mq_factory: Any, clock: Any, call: Any) -> None:
    """A closed queue says NotServing even when another argument is invalid."""
    mq = _seeded(mq_factory, clock)
    mq.close()
    assert_raises_kind(NotServingError, call, mq)


@pytest.mark.parametrize("op", list(TOPIC_OPS))
def test_closed_is_checked_before_topic(mq_factory: Any, clock: Any, op: str) -> None:
    """A closed queue says NotServing for a topic that does not exist (not TopicNotFound)."""
    mq = _seeded(mq_factory, clock)
    mq.close()
    assert_raises_kind(NotServingError, TOPIC_OPS[op], mq, "missing")


@pytest.mark.parametrize("op", ["consume", "seek", "seek_to_latest", "create_consumer_group"])
def test_closed_is_checked_before_group(mq_factory: Any, clock: Any, op: str) -> None:
    """A closed queue says NotServing for an absent (or, for create, an existing) group."""
    mq = _seeded(mq_factory, clock)
    mq.close()
    group = "g" if op == "create_consumer_group" else "missing"
    assert_raises_kind(NotServingError, GROUP_OPS[op], mq, "t", group)


# --------------------------------------------------------------------------- arguments first


@pytest.mark.parametrize("op", list(GROUP_OPS))
def test_invalid_group_name_on_missing_topic_is_invalid_argument(
    mq_factory: Any, clock: Any, op: str
) -> None:
    """Arguments are checked before the topic: an invalid group name on an absent topic is
    InvalidArgument, not TopicNotFound (and exist_consumer_group does not answer False)."""
    mq = _seeded(mq_factory, clock)
    for bad in ("", "a/b", "x\0", None, "x" * 4097):
        assert_fails(mq, InvalidArgumentError, GROUP_OPS[op], mq, "missing", bad)


@pytest.mark.parametrize(
    "call",
    [
        lambda mq: mq.produce("missing", None),
        lambda mq: mq.produce("missing", [pm(b"x"), ProducerMessage("not bytes", {})]),
        lambda mq: mq.produce("missing", [pm(b"x", {"k": 1})]),  # type: ignore[dict-item]
        lambda mq: mq.consume("missing", "g", -1),
        lambda mq: mq.consume("missing", "g", 1.5),
        lambda mq: mq.seek("missing", "g", "1"),
        lambda mq: mq.seek("missing", "g", None),
    ],
    ids=["produce-none", "produce-str-payload", "produce-int-property", "consume-neg",
         "consume-float", "seek-str", "seek-none"],
)
def test_invalid_argument_on_missing_topic_is_invalid_argument(
    mq_factory: Any, clock: Any, call: Any
) -> None:
    """Arguments are checked before the topic exists."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, call, mq)


@pytest.mark.parametrize(
    "call",
    [
        lambda mq: mq.consume("t", "missing", -1),
        lambda mq: mq.consume("t", "missing", "1"),
        lambda mq: mq.seek("t", "missing", 1.0),
        lambda mq: mq.seek("t", "missing", True),
    ],
    ids=["consume-neg", "consume-str", "seek-float", "seek-bool"],
)
def test_invalid_argument_on_missing_group_is_invalid_argument(
    mq_factory: Any, clock: Any, call: Any
) -> None:
    """Arguments are checked before the group exists."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, call, mq)


def test_invalid_topic_name_is_checked_before_other_arguments_too(
    mq_factory: Any, clock: Any
) -> None:
    """With several bad arguments, the kind is still InvalidArgument."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, mq.consume, "", "", -1)
    assert_fails(mq, InvalidArgumentError, mq.produce, "a/b", None)
    assert_fails(mq, InvalidArgumentError, mq.seek, None, "g", None)


# --------------------------------------------------------------------------- topic, then group


@pytest.mark.parametrize(
    "op",
    ["destroy_topic", "create_consumer_group", "destroy_consumer_group", "produce", "consume",
     "seek", "seek_to_latest", "get_latest_msg"],
)
def test_missing_topic_is_topic_not_found(mq_factory: Any, clock: Any, op: str) -> None:
    """Every operation on an absent topic (except create_topic and exist_consumer_group) is
    TopicNotFound — also when the group does not exist either."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, TopicNotFoundError, TOPIC_OPS[op], mq, "missing")


@pytest.mark.parametrize(
    "op",
    ["destroy_topic", "create_consumer_group", "destroy_consumer_group", "produce", "consume",
     "seek", "seek_to_latest", "get_latest_msg"],
)
def test_destroyed_topic_is_topic_not_found(mq_factory: Any, clock: Any, op: str) -> None:
    """A destroyed topic is absent: its operations are TopicNotFound."""
    mq = _seeded(mq_factory, clock)
    mq.destroy_topic("t")
    assert_fails(mq, TopicNotFoundError, TOPIC_OPS[op], mq, "t")


@pytest.mark.parametrize("name", ["t", "t1", "tt", "at", "T"])
def test_topic_lookup_is_exact(mq_factory: Any, clock: Any, name: str) -> None:
    """Only the exact name finds a topic: names sharing a prefix or suffix do not."""
    mq = mq_factory(MQConfig(), clock)
    for other in {"t", "t1", "tt", "at", "T"} - {name}:
        mq.create_topic(other)
        mq.produce(other, [pm(b"m")])
        mq.create_consumer_group(other, "g")
    for op in ("destroy_topic", "produce", "consume", "seek", "seek_to_latest",
               "get_latest_msg", "create_consumer_group", "destroy_consumer_group"):
        assert_fails(mq, TopicNotFoundError, TOPIC_OPS[op], mq, name)


@pytest.mark.parametrize("op", ["consume", "seek", "seek_to_latest"])
def test_missing_group_is_group_not_found(mq_factory: Any, clock: Any, op: str) -> None:
    """consume, seek and seek_to_latest on an absent group of an existing topic are
    GroupNotFound."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, GroupNotFoundError, GROUP_OPS[op], mq, "t", "missing")


@pytest.mark.parametrize("op", ["consume", "seek", "seek_to_latest"])
def test_group_of_another_topic_is_group_not_found(mq_factory: Any, clock: Any, op: str) -> None:
    """A group belongs to its topic: the same name on another topic is not found."""
    mq = _seeded(mq_factory, clock)
    mq.create_topic("u")
    mq.produce("u", [pm(b"m")])
    assert_fails(mq, GroupNotFoundError, GROUP_OPS[op], mq, "u", "g")


@pytest.mark.parametrize("op", ["consume", "seek", "seek_to_latest"])
def test_destroyed_group_is_group_not_found(mq_factory: Any, clock: Any, op: str) -> None:
    mq = _seeded(mq_factory, clock)
    mq.destroy_consumer_group("t", "g")
    assert_fails(mq, GroupNotFoundError, GROUP_OPS[op], mq, "t", "g")


def test_existing_group_is_group_exists_and_keeps_its_position(
    mq_factory: Any, clock: Any
) -> None:
    """create_consumer_group on an existing group is GroupExists; the position stays."""
    mq = _seeded(mq_factory, clock)
    assert position(mq, "t", "g") == 2
    assert_fails(mq, GroupExistsError, mq.create_consumer_group, "t", "g")
    assert position(mq, "t", "g") == 2


def test_exist_consumer_group_on_missing_topic_is_false_not_an_error(
    mq_factory: Any, clock: Any
) -> None:
    mq = _seeded(mq_factory, clock)
    before = mq.snapshot()
    assert mq.exist_consumer_group("missing", "g") is False
    assert mq.snapshot() == before


def test_destroy_absent_group_is_not_an_error(mq_factory: Any, clock: Any) -> None:
    mq = _seeded(mq_factory, clock)
    before = mq.snapshot()
    assert mq.destroy_consumer_group("t", "missing") is None
    assert mq.snapshot() == before


def test_queue_stays_usable_after_errors(mq_factory: Any, clock: Any) -> None:
    """Errors do not poison the queue: the next valid operation works as if none happened."""
    mq = _seeded(mq_factory, clock)
    for call in (
        lambda: mq.produce("missing", [pm(b"x")]),
        lambda: mq.consume("t", "missing", 1),
        lambda: mq.create_consumer_group("t", "g"),
        lambda: mq.produce("t", [pm(b"x"), pm(1)]),  # type: ignore[arg-type]
    ):
        with pytest.raises(MQError):
            call()
    assert mq.produce("t", [pm(b"w")]) == [4]
    assert [m.msg_id for m in mq.consume("t", "g", 10)] == [2, 3, 4]


def test_empty_produce_still_checks_closed_name_and_topic(mq_factory: Any, clock: Any) -> None:
    """produce(t, []) returns [] only on an existing topic: the checks still run first."""
    mq = _seeded(mq_factory, clock)
    assert_fails(mq, InvalidArgumentError, mq.produce, "a/b", [])
    assert_fails(mq, TopicNotFoundError, mq.produce, "missing", [])
    assert mq.produce("t", []) == []
    mq.close()
    assert_raises_kind(NotServingError, mq.produce, "t", [])
