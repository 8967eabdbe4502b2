"""The contract between rmqsim and every queue it checks (``../shared/SPEC.md``).

This module holds the contract and nothing else: configuration, message and state value
types, the error hierarchy, the clock type and the ``MessageQueue`` protocol. Both the
reference model (``model``) and the real implementation (``impl``) import it; ``impl``
imports nothing else of ``model``. The names here are fixed: other tools import them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol, TypeGuard, runtime_checkable

__all__ = [
    "DLQ_PREFIX",
    "MIB",
    "NAME_MAX_BYTES",
    "PROP_ORIGIN_ID",
    "PROP_ORIGIN_TOPIC",
    "PROP_RECONSUME_TIMES",
    "PULL_PREFIX",
    "RESULTS_BY_MODE",
    "RETRY_PREFIX",
    "SYSTEM_PROPERTIES",
    "Clock",
    "Completion",
    "ConsumeMode",
    "ConsumeResult",
    "ConsumerConfig",
    "ConsumerMessage",
    "Delivered",
    "Delivery",
    "GroupExistsError",
    "GroupNotFoundError",
    "InvalidArgumentError",
    "MQConfig",
    "MQError",
    "MessageQueue",
    "NotServingError",
    "Page",
    "ProducerMessage",
    "PushConsumerCore",
    "ReadType",
    "State",
    "TopicNotFoundError",
    "TopicState",
    "dlq_topic",
    "forget_valid_names",
    "pull_group",
    "retry_topic",
    "validate_consumer_group",
    "validate_count",
    "validate_messages",
    "validate_msg_id",
    "validate_name",
]

MIB = 1024 * 1024
#: Longest topic or group name, in UTF-8 bytes (SPEC "Names and values").
NAME_MAX_BYTES = 4096

#: An injected time source returning integer seconds; nothing else reads the time.
Clock = Callable[[], int]


# --------------------------------------------------------------------------- errors


class MQError(Exception):
    """Base of every error the queue raises; ``kind`` names it as SPEC.md does."""

    kind: str = "MQError"


class NotServingError(MQError):
    """The queue was closed: every operation but ``close()`` raises this."""

    kind = "NotServing"


class InvalidArgumentError(MQError, ValueError):
    """An argument broke SPEC.md's rules (name, type, count); nothing changed."""

    kind = "InvalidArgument"


class TopicNotFoundError(MQError):
    """The named topic does not exist."""

    kind = "TopicNotFound"


class GroupNotFoundError(MQError):
    """The named consumer group does not exist on that topic."""

    kind = "GroupNotFound"


class GroupExistsError(MQError):
    """``create_consumer_group`` on a group that already exists."""

    kind = "GroupExists"


#: Every error kind of SPEC.md, in the order the SPEC lists them.
ERROR_KINDS: tuple[type[MQError], ...] = (
    NotServingError,
    InvalidArgumentError,
    TopicNotFoundError,
    GroupNotFoundError,
    GroupExistsError,
)


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class MQConfig:
    """Paging and retention limits. ``-1`` disables a retention limit."""

    page_size_bytes: int = 64 * MIB
    retention_time_s: int = 259_200
    retention_size_bytes: int = 7200 * MIB

    def __post_init__(self) -> None:
        if type(self.page_size_bytes) is not int or self.page_size_bytes < 1:
            raise InvalidArgumentError(
                f"MQConfig.page_size_bytes must be an int >= 1, got {self.page_size_bytes!r}"
            )
        for name in ("retention_time_s", "retention_size_bytes"):
            value = getattr(self, name)
            if type(value) is not int or (value < 0 and value != -1):
                raise InvalidArgumentError(
                    f"MQConfig.{name} must be -1 or an int >= 0, got {value!r}"
                )


@dataclass(frozen=True, slots=True)
class ProducerMessage:
    """A message to produce. Not validated here: ``produce`` validates, so that a wrong
    type is an ``InvalidArgumentError`` from the queue and changes nothing."""

    payload: bytes
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConsumerMessage:
    """A stored message as ``consume`` returns it and ``snapshot`` lists it."""

    msg_id: int
    payload: bytes
    properties: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Page:
    """A closed page: its last message id, byte size, and when it closed and was acked."""

    end_id: int
    size_bytes: int
    closed_ts: int
    acked_ts: int | None


@dataclass(frozen=True, slots=True)
class TopicState:
    """One topic's logical state (SPEC "State")."""

    messages: tuple[ConsumerMessage, ...]
    pages: tuple[Page, ...]
    open_page_bytes: int
    last_id: int


@dataclass(frozen=True, slots=True)
class State:
    """The whole logical state of a queue: canonical, frozen, comparable with ``==``.

    ``topics`` and ``groups`` are read-only mappings built in sorted key order, so two
    equal states also iterate (and print) identically.
    """

    topics: Mapping[str, TopicState]
    groups: Mapping[tuple[str, str], int]

    @staticmethod
    def build(topics: Mapping[str, TopicState], groups: Mapping[tuple[str, str], int]) -> State:
        """Freeze ``topics`` and ``groups`` into a canonical ``State``. (Keys are unique,
        so sorting the items sorts by key alone; it is the cheapest way, and every
        snapshot check builds two states.)"""
        return State(
            topics=MappingProxyType(dict(sorted(topics.items()))),
            groups=MappingProxyType(dict(sorted(groups.items()))),
        )


# --------------------------------------------------------------------------- validation


#: Names found valid lately (exact ``str``, up to ``_VALID_NAME_MAX_CHARS``): whether a
#: string is a valid name depends on the string alone, and the same few names come back
#: with every operation.
_VALID_NAMES: set[str] = set()
_VALID_NAMES_KEPT = 1024
_VALID_NAME_MAX_CHARS = 256


def forget_valid_names() -> None:
    """Empty ``_VALID_NAMES`` (a measurement's way of running starts cold)."""
    _VALID_NAMES.clear()


def validate_name(what: str, name: object) -> str:
    """Return ``name`` if it is a valid topic or group name, else raise InvalidArgumentError.

    A name is a non-empty ``str`` of at most ``NAME_MAX_BYTES`` UTF-8 bytes with no ``/``
    and no NUL. Shared by every implementation so that the rule is written once. A name
    found valid lately is not checked again (``_VALID_NAMES``).
    """
    if type(name) is str and name in _VALID_NAMES:
        return name
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{what} name must be a str, got {type(name).__name__}")
    _check_name(what, name)
    if type(name) is str and len(name) <= _VALID_NAME_MAX_CHARS:
        if len(_VALID_NAMES) >= _VALID_NAMES_KEPT:
            _VALID_NAMES.clear()
        _VALID_NAMES.add(name)
    return name


def _check_name(what: str, name: str) -> None:
    """``validate_name``'s checks of a ``str``, naming the first fault."""
    if not name:
        raise InvalidArgumentError(f"{what} name must not be empty")
    if "/" in name or "\0" in name:
        raise InvalidArgumentError(f"{what} name must not contain '/' or NUL: {name[:80]!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as exc:  # lone surrogates cannot be stored
        raise InvalidArgumentError(f"{what} name is not valid UTF-8: {exc.reason}") from None
    if size > NAME_MAX_BYTES:
        raise InvalidArgumentError(f"{what} name is {size} UTF-8 bytes, more than {NAME_MAX_BYTES}")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_count(n: object) -> int:
    """``consume``'s ``n``: an int >= 0."""
    if not _is_int(n):
        raise InvalidArgumentError(f"n must be an int, got {type(n).__name__}")
    if n < 0:
        raise InvalidArgumentError(f"n must be >= 0, got {n}")
    return n


def validate_msg_id(msg_id: object) -> int:
    """``seek``'s id: any int (one that names no retained message resets to -1)."""
    if not _is_int(msg_id):
        raise InvalidArgumentError(f"msg_id must be an int, got {type(msg_id).__name__}")
    return msg_id


def validate_messages(messages: object) -> list[ProducerMessage]:
    """``produce``'s messages: a list or tuple of ``ProducerMessage`` whose payload is
    ``bytes`` and whose properties map ``str`` to ``str``. Returns them as a list."""
    if not isinstance(messages, (list, tuple)):
        raise InvalidArgumentError(
            f"messages must be a list of ProducerMessage, got {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
        if (
            type(message) is ProducerMessage
            and type(message.payload) is bytes
            and type(message.properties) is dict
            and not message.properties
        ):
            continue  # the common case, cheaply: every check below would pass
        if not isinstance(message, ProducerMessage):
            raise InvalidArgumentError(
                f"messages[{index}] must be a ProducerMessage, got {type(message).__name__}"
            )
        if not isinstance(message.payload, bytes):
            raise InvalidArgumentError(
                f"messages[{index}].payload must be bytes, got {type(message.payload).__name__}"
            )
        properties = message.properties
        if not isinstance(properties, Mapping):
            raise InvalidArgumentError(
                f"messages[{index}].properties must be a dict of str to str, "
                f"got {type(properties).__name__}"
            )
        for key, value in properties.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidArgumentError(
                    f"messages[{index}].properties must map str to str, "
                    f"got {type(key).__name__} -> {type(value).__name__}"
                )
            try:
                key.encode("utf-8")
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidArgumentError(
                    f"messages[{index}].properties hold a string that is not UTF-8: {exc.reason}"
                ) from None
    return list(messages)


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class MessageQueue(Protocol):
    """The operations of SPEC.md. Checks run in this order: closed, arguments, topic,
    group; an operation that raises changes nothing."""

    def create_topic(self, topic: str) -> None: ...

    def destroy_topic(self, topic: str) -> None: ...

    def create_consumer_group(self, topic: str, group: str) -> None: ...

    def destroy_consumer_group(self, topic: str, group: str) -> None: ...

    def exist_consumer_group(self, topic: str, group: str) -> bool: ...

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]: ...

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]: ...

    def seek(self, topic: str, group: str, msg_id: int) -> None: ...

    def seek_to_latest(self, topic: str, group: str) -> None: ...

    def get_latest_msg(self, topic: str) -> int: ...

    def run_retention(self) -> None: ...

    def snapshot(self) -> State: ...

    def close(self) -> None: ...


# =========================================================================== consumer side
# The push consumer's shared contract (docs/CONSUMER.md): its result and read kinds, its
# configuration, what it delivers and reports, and the topic names it derives from a group.
# Both ``model.consumer`` and ``impl.consumer`` import these; nothing above depends on them.

#: Retry and dead-letter topics of group ``g`` are ``%RETRY%g`` and ``%DLQ%g`` (SPEC allows
#: ``%`` in names); the consumer's pull cursor is the queue group ``%PULL%g``.
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
PULL_PREFIX = "%PULL%"
#: System properties of a sent-back message (stripped before delivery to the handler).
PROP_ORIGIN_TOPIC = "%ORIGIN_TOPIC"
PROP_ORIGIN_ID = "%ORIGIN_ID"
PROP_RECONSUME_TIMES = "%RECONSUME_TIMES"
SYSTEM_PROPERTIES = (PROP_ORIGIN_TOPIC, PROP_ORIGIN_ID, PROP_RECONSUME_TIMES)


class ConsumeResult(StrEnum):
    """What a handler returns: concurrent mode takes SUCCESS or RETRY_LATER, orderly mode
    SUCCESS or SUSPEND (RocketMQ's ConsumeConcurrentlyStatus / SuspendCurrentQueueAMoment)."""

    SUCCESS = "success"
    RETRY_LATER = "retry_later"
    SUSPEND = "suspend"


class ReadType(StrEnum):
    """Where ``OffsetStore.read`` looks: memory only, the durable store only, or memory
    and then the store (RocketMQ's
    READ_FROM_MEMORY / READ_FROM_STORE / MEMORY_FIRST_THEN_STORE)."""

    MEMORY = "memory"
    STORE = "store"
    MEMORY_THEN_STORE = "memory_then_store"


class ConsumeMode(StrEnum):
    """Concurrent: a pool of workers, retries through the retry topic. Orderly: one batch of
    a queue at a time, in id order, retried in place."""

    CONCURRENT = "concurrent"
    ORDERLY = "orderly"


#: What a handler may return in each mode (RocketMQ's ConsumeConcurrentlyStatus and
#: ConsumeOrderlyStatus); a consumer refuses any other with ``InvalidArgumentError``.
RESULTS_BY_MODE: dict[ConsumeMode, tuple[ConsumeResult, ...]] = {
    ConsumeMode.CONCURRENT: (ConsumeResult.SUCCESS, ConsumeResult.RETRY_LATER),
    ConsumeMode.ORDERLY: (ConsumeResult.SUCCESS, ConsumeResult.SUSPEND),
}


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def pull_group(group: str) -> str:
    return PULL_PREFIX + group


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A push consumer's knobs; every limit names its unit."""

    mode: ConsumeMode = ConsumeMode.CONCURRENT
    #: Messages one pull asks the queue for, per subscribed topic.
    pull_batch_size: int = 32
    #: Messages handed to the handler at once.
    consume_batch_size: int = 1
    #: Flow control: no pull while a process queue caches more messages or bytes than this.
    max_cached_count: int = 1000
    max_cached_bytes: int = 100 * MIB
    #: Deliveries after the first before a failing message goes to the dead-letter topic.
    max_reconsume_times: int = 16
    #: Committed offsets are persisted at most this many (clock) seconds apart.
    persist_interval_s: int = 5
    #: Orderly mode: how long a SUSPEND holds the queue back, in clock seconds.
    suspend_s: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.mode, ConsumeMode):
            raise InvalidArgumentError(f"ConsumerConfig.mode must be a ConsumeMode: {self.mode!r}")
        for name, low in (
            ("pull_batch_size", 1),
            ("consume_batch_size", 1),
            ("max_cached_count", 0),
            ("max_cached_bytes", 0),
            ("max_reconsume_times", 0),
            ("persist_interval_s", 0),
            ("suspend_s", 0),
        ):
            value = getattr(self, name)
            if not _is_int(value) or value < low:
                raise InvalidArgumentError(
                    f"ConsumerConfig.{name} must be an int >= {low}: {value!r}"
                )


def validate_consumer_group(group: object) -> str:
    """A consumer group name: a valid name whose retry/dead-letter/pull names are valid too."""
    name = validate_name("group", group)
    validate_name("retry topic", retry_topic(name))
    return name


@dataclass(frozen=True, slots=True)
class Delivered:
    """One message as the handler sees it: where it was read from, its origin and how many
    failed deliveries of that origin came before it."""

    queue: str
    msg_id: int
    payload: bytes
    properties: Mapping[str, str]
    origin_topic: str
    origin_id: int
    reconsume_times: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """A batch handed to one worker; ``seq`` (1, 2, ...) names it in ``complete``."""

    seq: int
    queue: str
    messages: tuple[Delivered, ...]


@dataclass(frozen=True, slots=True)
class Completion:
    """What ``complete`` did: ids acknowledged (removed from the process queue), sent back
    to the retry topic and dead-lettered (``(msg_id, new_id)`` pairs), kept for a local
    retry (send-back failed or orderly suspend), and the queue's offset in memory after."""

    seq: int
    queue: str
    acked: tuple[int, ...]
    retried: tuple[tuple[int, int], ...]
    dead: tuple[tuple[int, int], ...]
    kept: tuple[int, ...]
    offset: int


@runtime_checkable
class PushConsumerCore(Protocol):
    """The push consumer as a deterministic state machine (docs/CONSUMER.md); the threaded
    consumer drives one, and so does the simulation."""

    def start(self) -> dict[str, int]: ...

    def pull(self) -> dict[str, tuple[int, ...] | None]: ...

    def next_batch(self) -> Delivery | None: ...

    def complete(self, seq: int, result: ConsumeResult) -> Completion: ...

    def persist(self) -> dict[str, int]: ...

    def stored_offsets(self) -> dict[str, int]: ...

    def crash(self) -> None: ...

    def close(self) -> None: ...
