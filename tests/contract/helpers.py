"""Helpers shared by the contract tests (SPEC.md as tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from rmqsim.model.api import (
    ConsumerMessage,
    MessageQueue,
    MQConfig,
    MQError,
    Page,
    ProducerMessage,
    TopicState,
)

#: Pages close quickly and nothing is retained unless a test asks for it.
NO_RETENTION = {"retention_time_s": -1, "retention_size_bytes": -1}


def small_pages(page_size_bytes: int = 10, **retention: int) -> MQConfig:
    """A config with small pages; retention disabled unless given."""
    limits = {**NO_RETENTION, **retention}
    return MQConfig(page_size_bytes=page_size_bytes, **limits)


def pm(payload: bytes | str = b"", properties: Mapping[str, str] | None = None) -> ProducerMessage:
    """A ProducerMessage; a ``str`` payload is encoded as UTF-8 for brevity."""
    data = payload.encode() if isinstance(payload, str) else payload
    return ProducerMessage(data, dict(properties or {}))


def sized(*sizes: int) -> list[ProducerMessage]:
    """Messages whose payloads have the given byte sizes."""
    return [ProducerMessage(b"x" * size) for size in sizes]


def produce_sizes(mq: MessageQueue, topic: str, *sizes: int) -> list[int]:
    """Produce one message per size (one ``produce`` call) and return the ids."""
    return mq.produce(topic, sized(*sizes))


def topic_state(mq: MessageQueue, topic: str) -> TopicState:
    return mq.snapshot().topics[topic]


def pages(mq: MessageQueue, topic: str) -> tuple[Page, ...]:
    return mq.snapshot().topics[topic].pages


def retained_ids(mq: MessageQueue, topic: str) -> list[int]:
    return [m.msg_id for m in mq.snapshot().topics[topic].messages]


def position(mq: MessageQueue, topic: str, group: str) -> int:
    return mq.snapshot().groups[(topic, group)]


def ids_of(messages: Iterable[ConsumerMessage]) -> list[int]:
    return [m.msg_id for m in messages]


def payloads_of(messages: Iterable[ConsumerMessage]) -> list[bytes]:
    return [m.payload for m in messages]


def assert_fails(
    mq: MessageQueue, error: type[MQError], op: Callable[..., Any], *args: Any
) -> MQError:
    """``op(*args)`` raises exactly the kind ``error`` and changes nothing (SPEC "Errors").

    "Changes nothing" is checked by comparing ``snapshot()`` before and after.
    """
    before = mq.snapshot()
    with pytest.raises(MQError) as info:
        op(*args)
    assert isinstance(info.value, error), (
        f"expected {error.kind}, got {type(info.value).__name__}: {info.value}"
    )
    assert info.value.kind == error.kind
    after = mq.snapshot()
    assert after == before, "an operation that raises must change nothing"
    return info.value


def assert_raises_kind(error: type[MQError], op: Callable[..., Any], *args: Any) -> MQError:
    """``op(*args)`` raises exactly the kind ``error`` (for a closed queue: no snapshot)."""
    with pytest.raises(MQError) as info:
        op(*args)
    assert isinstance(info.value, error), (
        f"expected {error.kind}, got {type(info.value).__name__}: {info.value}"
    )
    assert info.value.kind == error.kind
    return info.value


# --------------------------------------------------------------------------- operation tables

#: Every operation that takes a topic, called with ``topic`` and otherwise valid arguments
#: (group ``"g"``, one message, n = 1, id 1).
TOPIC_OPS: dict[str, Callable[[MessageQueue, Any], Any]] = {
    "create_topic": lambda mq, t: mq.create_topic(t),
    "destroy_topic": lambda mq, t: mq.destroy_topic(t),
    "create_consumer_group": lambda mq, t: mq.create_consumer_group(t, "g"),
    "destroy_consumer_group": lambda mq, t: mq.destroy_consumer_group(t, "g"),
    "exist_consumer_group": lambda mq, t: mq.exist_consumer_group(t, "g"),
    "produce": lambda mq, t: mq.produce(t, [pm(b"x")]),
    "consume": lambda mq, t: mq.consume(t, "g", 1),
    "seek": lambda mq, t: mq.seek(t, "g", 1),
    "seek_to_latest": lambda mq, t: mq.seek_to_latest(t, "g"),
    "get_latest_msg": lambda mq, t: mq.get_latest_msg(t),
}

#: Every operation that takes a group, called with ``(topic, group)`` and otherwise valid
#: arguments.
GROUP_OPS: dict[str, Callable[[MessageQueue, Any, Any], Any]] = {
    "create_consumer_group": lambda mq, t, g: mq.create_consumer_group(t, g),
    "destroy_consumer_group": lambda mq, t, g: mq.destroy_consumer_group(t, g),
    "exist_consumer_group": lambda mq, t, g: mq.exist_consumer_group(t, g),
    "consume": lambda mq, t, g: mq.consume(t, g, 1),
    "seek": lambda mq, t, g: mq.seek(t, g, 1),
    "seek_to_latest": lambda mq, t, g: mq.seek_to_latest(t, g),
}

#: Every operation of the queue but ``close``, with valid arguments on topic "t", group "g".
ALL_OPS: dict[str, Callable[[MessageQueue], Any]] = {
    **{name: (lambda mq, op=op: op(mq, "t")) for name, op in TOPIC_OPS.items()},
    "run_retention": lambda mq: mq.run_retention(),
    "snapshot": lambda mq: mq.snapshot(),
}
