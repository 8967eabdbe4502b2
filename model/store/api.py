"""The storage layer's contract (docs/STORAGE.md "The storage contract"): a message store
in the manner of RocketMQ's ``MessageStore``, one append-only log per (topic, queue)
addressed by offset, below any notion of groups, positions or acks (those are a broker's).

Every implementation imports this module: ``MessageStore`` (the protocol), ``StoreConfig``
(what a store is opened with), the argument checks each operation makes first, and the
errors (``model.api``'s ``NotServingError`` and ``InvalidArgumentError``, so that every
layer and the wire protocol speak the same error kinds).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rmqsim.model.api import InvalidArgumentError, NotServingError

__all__ = [
    "STORE_FLUSH_MODES",
    "TOPIC_MAX_CHARS",
    "InvalidArgumentError",
    "MessageStore",
    "NotServingError",
    "QueueKey",
    "StoreConfig",
    "validate_get",
    "validate_put",
    "validate_queue",
]

#: ``sync``: a put is durable when it returns; ``async``: only what a ``flush`` covered is.
STORE_FLUSH_MODES = ("sync", "async")
#: The longest topic name (RocketMQ's ``TOPIC_MAX_LENGTH``).
TOPIC_MAX_CHARS = 127
_TOPIC_CHARACTERS = re.compile(r"[A-Za-z0-9_%|-]+")
#: A queue's address: (topic, queue id).
QueueKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """How a store is opened: its flush mode, the size of its log files (small files make
    them roll, and retention has whole files to delete) and the largest body it takes."""

    flush: str = "sync"
    segment_bytes: int = 64 * 1024
    max_body_bytes: int = 4096

    def __post_init__(self) -> None:
        if self.flush not in STORE_FLUSH_MODES:
            raise InvalidArgumentError(f"flush must be one of {STORE_FLUSH_MODES}: {self.flush!r}")
        for name in ("segment_bytes", "max_body_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidArgumentError(f"{name} must be an integer >= 1: {value!r}")


@runtime_checkable
class MessageStore(Protocol):
    """The storage contract. Offsets in a queue start at 0 and are contiguous; ``max`` is
    the next offset to be written, ``min`` the lowest retained one (``min == max``: none)."""

    def put(self, topic: str, queue: int, bodies: Sequence[bytes]) -> int:
        """Append ``bodies`` (a batch, at least one) to the queue; the first one's offset."""
        ...

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        """The bodies at ``offset``, ``offset + 1``, ...: at least one and at most
        ``max_count`` when ``min <= offset < max``; ``[]`` otherwise."""
        ...

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        """``(min, max)``; ``(0, 0)`` for a queue never written."""
        ...

    def flush(self) -> None:
        """Make every put before it durable (it survives a crash and a power cut)."""
        ...

    def retain(self, cutoff_s: int) -> None:
        """Delete whole files all of whose messages were put before ``cutoff_s`` (the
        injected clock's seconds), oldest first; never a message put at or after it."""
        ...

    def close(self) -> None:
        """Stop serving, everything written kept (flushed or not)."""
        ...

    def crash(self) -> None:
        """Stop at once, as a killed process does (what is not written is lost)."""
        ...


def _validate_topic(topic: object) -> None:
    if type(topic) is not str:
        raise InvalidArgumentError(f"topic must be a string, got {type(topic).__name__}")
    if not topic or len(topic) > TOPIC_MAX_CHARS or not _TOPIC_CHARACTERS.fullmatch(topic):
        raise InvalidArgumentError(
            f"topic must be 1..{TOPIC_MAX_CHARS} of [A-Za-z0-9_%|-]: {topic[:80]!r}"
        )


def _validate_int(name: str, value: object, least: int) -> None:
    if type(value) is not int or value < least:
        raise InvalidArgumentError(f"{name} must be an integer >= {least}: {value!r:.40}")


def validate_queue(topic: object, queue: object) -> None:
    """A queue's address: a valid topic name and a queue id >= 0."""
    _validate_topic(topic)
    _validate_int("queue", queue, 0)


def validate_put(topic: object, queue: object, bodies: object, config: StoreConfig) -> None:
    """``put``'s arguments, in order: the address, then a non-empty batch of bytes, each at
    most ``config.max_body_bytes``."""
    validate_queue(topic, queue)
    if type(bodies) not in (list, tuple) or not bodies:
        raise InvalidArgumentError("bodies must be a non-empty list")
    assert isinstance(bodies, list | tuple)
    for index, body in enumerate(bodies):
        if type(body) is not bytes:
            raise InvalidArgumentError(f"bodies[{index}] must be bytes")
        if len(body) > config.max_body_bytes:
            raise InvalidArgumentError(
                f"bodies[{index}] is {len(body)} bytes, over {config.max_body_bytes}"
            )


def validate_get(topic: object, queue: object, offset: object, max_count: object) -> None:
    """``get``'s arguments, in order: the address, ``offset >= 0``, ``max_count >= 1``."""
    validate_queue(topic, queue)
    _validate_int("offset", offset, 0)
    _validate_int("max_count", max_count, 1)

