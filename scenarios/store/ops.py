"""The storage layer's operations (docs/STORAGE.md "The storage contract"), and their JSON
form for traces. Plain data only: this leaf package knows nothing of ``model.store``.

Outcome values (built by the runner, read by ``StoreWorld.learn``):

- ``put``: the first offset (an int);
- ``get``: the bodies returned (a tuple of bytes);
- ``offsets``: ``(min, max)``;
- ``retain``: ``((topic, queue, min), ...)``, each queue's minimum after it;
- ``crash``: ``((topic, queue, min, max), ...)``, each queue as recovered;
- ``flush``, ``reopen``: ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rmqsim.scenarios.codec import (
    OpCodec,
    decode_plain,
    outcome_fields,
    plain_field,
    plain_to_json,
)
from rmqsim.scenarios.queue.ops import Outcome

__all__ = [
    "STATE_CHANGING_STORE_OPS",
    "STORE_OP_TYPES",
    "CrashStore",
    "Flush",
    "Get",
    "Offsets",
    "Put",
    "ReopenStore",
    "Retain",
    "StoreOp",
    "store_op_from_json",
    "store_op_to_json",
    "store_outcome_from_json",
    "store_outcome_to_json",
]


@dataclass(frozen=True, slots=True)
class Put:
    """Append ``bodies`` (a batch) to queue ``queue`` of ``topic``."""

    kind: ClassVar[str] = "put"
    topic: str
    queue: int
    bodies: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Get:
    """Read up to ``max_count`` bodies from ``offset``."""

    kind: ClassVar[str] = "get"
    topic: str
    queue: int
    offset: int
    max_count: int


@dataclass(frozen=True, slots=True)
class Offsets:
    """Ask a queue's ``(min, max)``."""

    kind: ClassVar[str] = "offsets"
    topic: str
    queue: int


@dataclass(frozen=True, slots=True)
class Flush:
    """Make every put so far durable."""

    kind: ClassVar[str] = "flush"


@dataclass(frozen=True, slots=True)
class Retain:
    """Delete whole files of messages put before ``cutoff_s``."""

    kind: ClassVar[str] = "retain"
    cutoff_s: int


@dataclass(frozen=True, slots=True)
class CrashStore:
    """Crash the store (a killed process) and reopen it; ``twice``: crash the recovered
    store again at once and reopen it (a second recovery must change nothing)."""

    kind: ClassVar[str] = "crash"
    twice: bool


@dataclass(frozen=True, slots=True)
class ReopenStore:
    """Close the store cleanly and open it again."""

    kind: ClassVar[str] = "reopen"


StoreOp = Put | Get | Offsets | Flush | Retain | CrashStore | ReopenStore
STORE_OP_TYPES: tuple[type[Any], ...] = (Put, Get, Offsets, Flush, Retain, CrashStore,
                                         ReopenStore)
#: The kinds that change what a store holds.
STATE_CHANGING_STORE_OPS = frozenset({"put", "flush", "retain", "crash", "reopen"})


def _bodies(value: object) -> bool:
    return type(value) is tuple and all(type(body) is bytes for body in value)


def _is_int(value: object) -> bool:
    return type(value) is int


_CODEC: OpCodec[Any] = OpCodec(
    "storage operation",
    {t.kind: t for t in STORE_OP_TYPES},
    {
        # Any string and any int: invalid names and ids are sent on purpose (the store
        # answers InvalidArgument).
        "topic": plain_field(str),
        "queue": plain_field(_is_int),
        "bodies": plain_field(_bodies),
        "offset": plain_field(_is_int),
        "max_count": plain_field(_is_int),
        "cutoff_s": plain_field(_is_int),
        "twice": plain_field(bool),
    },
)


def store_op_to_json(op: StoreOp) -> dict[str, Any]:
    return _CODEC.to_json(op)


def store_op_from_json(obj: object) -> StoreOp:
    """Strict: ``OpDecodeError`` naming the field (``scenarios.codec``)."""
    op: StoreOp = _CODEC.from_json(obj)
    return op


def store_outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    return {"value": plain_to_json(outcome.value), "error": outcome.error}


def store_outcome_from_json(obj: object) -> Outcome:
    value, error = outcome_fields(obj, decode_plain, "an error kind or 'unexpected:...'")
    return Outcome(value, error)

