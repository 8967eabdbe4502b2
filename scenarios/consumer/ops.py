"""The consumer simulation's operations: what producers, pullers, workers, persisters and
the crasher emit, and the JSON form of these operations and their outcomes for traces.

Outcome values are plain data (``None``, ints, strings, bytes, tuples of those), built by
the runner from what the consumers returned, so that this leaf package needs nothing of
``model``/``impl`` and a trace line stays readable.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

from rmqsim.scenarios.codec import (
    Field,
    OpCodec,
    OpDecodeError,
    decode_plain,
    json_to_plain,
    outcome_fields,
    plain_field,
    plain_to_json,
)
from rmqsim.scenarios.queue.ops import Outcome, RunRetention

__all__ = [
    "CONSUMER_OP_TYPES",
    "Complete",
    "ConsumerOp",
    "CrashClient",
    "CrashQueue",
    "Deliver",
    "Persist",
    "ProduceBatch",
    "Pull",
    "RunRetention",
    "StartClient",
    "consumer_op_from_json",
    "consumer_op_to_json",
    "consumer_outcome_from_json",
    "json_to_plain",
    "plain_to_json",
]


@dataclass(frozen=True, slots=True)
class ProduceBatch:
    """Produce these payloads to ``topic`` (outcome: the ids)."""

    kind: ClassVar[str] = "produce_batch"
    topic: str
    payloads: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class StartClient:
    """Start ``client``'s consumer (outcome: the offsets it read from its store)."""

    kind: ClassVar[str] = "start_client"
    client: str


@dataclass(frozen=True, slots=True)
class Pull:
    """One pull of every queue of ``client`` (outcome: ids added per queue, or None under
    flow control)."""

    kind: ClassVar[str] = "pull"
    client: str


@dataclass(frozen=True, slots=True)
class Deliver:
    """A free worker of ``client`` asks for a batch (outcome: the batch or None)."""

    kind: ClassVar[str] = "deliver"
    client: str


@dataclass(frozen=True, slots=True)
class Complete:
    """The worker finished batch ``seq`` with ``result``; the queue refuses the
    send-back of the messages at ``refused_positions`` of the batch (0-based; outcome:
    the completion). Positions, not message ids: a shrunk trace drops earlier produces,
    which renumbers the ids, while the position of a message in its batch stays.

    What a trace may hold here, beyond the types: positions distinct and ascending
    (``consumer_op_from_json``: they name a set, and one spelling per set keeps a
    mistyped edit from passing for another); ``result`` one that the client's mode
    allows, and each position within the batch. Those need the trace's header and the
    batch the model delivers when the trace is replayed, so ``conformance.consumer.run``
    checks them (this package knows neither)."""

    kind: ClassVar[str] = "complete"
    client: str
    seq: int
    result: str
    refused_positions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Persist:
    """The persist timer of ``client`` fired (outcome: the stored offsets)."""

    kind: ClassVar[str] = "persist"
    client: str


@dataclass(frozen=True, slots=True)
class CrashClient:
    """``client`` is killed and restarted; the queue keeps running (outcome: the offsets
    the new consumer read)."""

    kind: ClassVar[str] = "crash_client"
    client: str


@dataclass(frozen=True, slots=True)
class CrashQueue:
    """The whole process dies: the queue crashes and reopens and every client restarts
    (outcome: each client's offsets read)."""

    kind: ClassVar[str] = "crash_queue"


ConsumerOp = (
    ProduceBatch
    | StartClient
    | Pull
    | Deliver
    | Complete
    | Persist
    | CrashClient
    | CrashQueue
    | RunRetention
)
#: Kind -> operation type; ``RunRetention`` is the queue's own (``scenarios.queue.ops``): a
#: retention pass at the simulated clock, which only the guard groups hold back.
CONSUMER_OP_TYPES: dict[str, type[ConsumerOp]] = {
    t.kind: t
    for t in (
        ProduceBatch,
        StartClient,
        Pull,
        Deliver,
        Complete,
        Persist,
        CrashClient,
        CrashQueue,
        RunRetention,
    )
}


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_positions(value: Any) -> bool:
    return type(value) is tuple and all(_is_int(i) and i >= 0 for i in value)


def _refused_positions(value: object, where: str) -> tuple[int, ...]:
    """Positions in a batch: one spelling per set, so distinct and ascending."""
    positions: tuple[int, ...] = decode_plain(value, where, _is_positions)
    if any(a >= b for a, b in itertools.pairwise(positions)):
        raise OpDecodeError(
            f"{where}: positions must be distinct and ascending, got {str(value)[:80]}"
        )
    return positions


#: The codec of the consumer operations: every field is plain data (payloads in base64).
_CODEC: OpCodec[ConsumerOp] = OpCodec(
    "consumer operation",
    CONSUMER_OP_TYPES,
    {
        "client": plain_field(str),
        "topic": plain_field(str),
        "result": plain_field(str),
        "seq": plain_field(int),
        "payloads": plain_field(lambda v: type(v) is tuple and all(type(p) is bytes for p in v)),
        "refused_positions": Field(_refused_positions, plain_to_json),
    },
    retired={
        ("complete", "failed_sends"): "an older rmqsim named refused send-backs by message "
        "id; they are positions in the batch now (refused_positions): re-run the seed"
    },
)


def consumer_op_to_json(op: ConsumerOp) -> dict[str, Any]:
    """``{"kind": ..., <fields>...}`` with payloads in base64."""
    return _CODEC.to_json(op)


def consumer_op_from_json(obj: object) -> ConsumerOp:
    """Decode one operation from the JSON shape of ``consumer_op_to_json``; strict: an
    unknown kind, a missing or extra field or a wrong type raises ``OpDecodeError``."""
    return _CODEC.from_json(obj)


def consumer_outcome_from_json(obj: object) -> Outcome:
    """An outcome as the consumer runner records it: plain data or an error string."""
    value, error = outcome_fields(obj, decode_plain, "a string")
    return Outcome(value=value, error=error)
