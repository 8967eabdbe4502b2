"""The contract between rmqsim and every queue it checks (``../shared/SPEC.md``).

This module holds the contract and nothing else: configuration, message and state value
types, the error hierarchy, the clock type and the ``MessageQueue`` protocol. Both the
reference model (``model``) and the real implementation (``impl``) import it; ``impl``
imports nothing else of ``model``. The names here are fixed: other tools import them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

__all__ = [
    "MIB",
    "NAME_MAX_BYTES",
    "Clock",
    "ConsumerMessage",
    "GroupExistsError",
    "GroupNotFoundError",
    "InvalidArgumentError",
    "MQConfig",
    "MQError",
    "MessageQueue",
    "NotServingError",
    "Page",
    "ProducerMessage",
    "State",
    "TopicNotFoundError",
    "TopicState",
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
        """Freeze ``topics`` and ``groups`` into a canonical ``State``."""
        return State(
            topics=MappingProxyType({name: topics[name] for name in sorted(topics)}),
            groups=MappingProxyType({key: groups[key] for key in sorted(groups)}),
        )


# --------------------------------------------------------------------------- validation


def validate_name(what: str, name: object) -> str:
    """Return ``name`` if it is a valid topic or group name, else raise InvalidArgumentError.

    A name is a non-empty ``str`` of at most ``NAME_MAX_BYTES`` UTF-8 bytes with no ``/``
    and no NUL. Shared by every implementation so that the rule is written once.
    """
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{what} name must be a str, got {type(name).__name__}")
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
    return name


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_count(n: object) -> int:
    """``consume``'s ``n``: an int >= 0."""
    if not _is_int(n):
        raise InvalidArgumentError(f"n must be an int, got {type(n).__name__}")
    if n < 0:  # type: ignore[operator]
        raise InvalidArgumentError(f"n must be >= 0, got {n}")
    return n  # type: ignore[return-value]


def validate_msg_id(msg_id: object) -> int:
    """``seek``'s id: any int (one that names no retained message resets to -1)."""
    if not _is_int(msg_id):
        raise InvalidArgumentError(f"msg_id must be an int, got {type(msg_id).__name__}")
    return msg_id  # type: ignore[return-value]


def validate_messages(messages: object) -> list[ProducerMessage]:
    """``produce``'s messages: a list or tuple of ``ProducerMessage`` whose payload is
    ``bytes`` and whose properties map ``str`` to ``str``. Returns them as a list."""
    if not isinstance(messages, (list, tuple)):
        raise InvalidArgumentError(
            f"messages must be a list of ProducerMessage, got {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
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
