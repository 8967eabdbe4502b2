"""The consumer simulation's operations: what producers, pullers, workers, persisters and
the crasher emit, and the JSON form of these operations and their outcomes for traces.

Outcome values are plain data (``None``, ints, strings, bytes, tuples of those), built by
the runner from what the consumers returned, so that this leaf package needs nothing of
``model``/``impl`` and a trace line stays readable.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

from rmqsim.scenarios.ops import OpDecodeError, Outcome, RunRetention

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
    batch the model delivers when the trace is replayed, so ``conformance.consumer_run``
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
#: Kind -> operation type; ``RunRetention`` is the queue's own (``scenarios.ops``): a
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


def plain_to_json(value: Any) -> Any:
    """Plain outcome data as JSON: tuples become lists, bytes ``{"b64": ...}``."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is bytes:
        return {"b64": base64.b64encode(value).decode("ascii")}
    if type(value) is tuple:
        return [plain_to_json(item) for item in value]
    raise TypeError(f"not plain outcome data: {type(value).__name__}")


def consumer_op_to_json(op: ConsumerOp) -> dict[str, Any]:
    """``{"kind": ..., <fields>...}`` with payloads in base64."""
    obj: dict[str, Any] = {"kind": op.kind}
    for name in op.__slots__:
        obj[name] = plain_to_json(getattr(op, name))
    return obj


def json_to_plain(value: Any) -> Any:
    """The inverse of ``plain_to_json``: lists become tuples, ``{"b64": ...}`` bytes."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is list:
        return tuple(json_to_plain(item) for item in value)
    if type(value) is dict and set(value) == {"b64"} and type(value["b64"]) is str:
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise OpDecodeError(f"not valid base64: {value['b64'][:80]!r}") from None
    raise OpDecodeError(f"not plain outcome data: {str(value)[:80]}")


def _is_int(value: Any) -> bool:
    return type(value) is int


#: What each operation field must hold once decoded (``json_to_plain``).
_FIELD_CHECKS: dict[str, Any] = {
    "client": lambda v: type(v) is str,
    "topic": lambda v: type(v) is str,
    "result": lambda v: type(v) is str,
    "seq": _is_int,
    "payloads": lambda v: type(v) is tuple and all(type(p) is bytes for p in v),
    "refused_positions": lambda v: type(v) is tuple and all(_is_int(i) and i >= 0 for i in v),
}


def consumer_op_from_json(obj: object) -> ConsumerOp:
    """Decode one operation from the JSON shape of ``consumer_op_to_json``; strict: an
    unknown kind, a missing or extra field or a wrong type raises ``OpDecodeError``."""
    if type(obj) is not dict:
        raise OpDecodeError(f"op: expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("kind")
    op_type = CONSUMER_OP_TYPES.get(kind) if type(kind) is str else None
    if op_type is None:
        raise OpDecodeError(f"op.kind: unknown consumer operation {kind!r}")
    names = [f.name for f in dataclasses.fields(op_type)]
    if op_type is Complete and "failed_sends" in obj:
        raise OpDecodeError(
            "op(complete).failed_sends: an older rmqsim named refused send-backs by message "
            "id; they are positions in the batch now (refused_positions): re-run the seed"
        )
    if set(obj) != {"kind", *names}:
        raise OpDecodeError(f"op({kind}): fields must be {sorted(names)}, got {sorted(obj)}")
    values = {name: json_to_plain(obj[name]) for name in names}
    for name, value in values.items():
        if not _FIELD_CHECKS[name](value):
            raise OpDecodeError(f"op({kind}).{name}: wrong value {str(obj[name])[:80]}")
    positions = values.get("refused_positions", ())
    if any(a >= b for a, b in itertools.pairwise(positions)):
        raise OpDecodeError(
            f"op({kind}).refused_positions: positions must be distinct and ascending, "
            f"got {str(obj['refused_positions'])[:80]}"
        )
    return op_type(**values)


def consumer_outcome_from_json(obj: object) -> Outcome:
    """An outcome as the consumer runner records it: plain data or an error string."""
    if type(obj) is not dict or set(obj) != {"value", "error"}:
        raise OpDecodeError("outcome: expected an object with value and error")
    error = obj["error"]
    if error is not None and (type(error) is not str or not error):
        raise OpDecodeError(f"outcome.error: expected null or a string, got {error!r:.80}")
    if error is not None and obj["value"] is not None:
        raise OpDecodeError("outcome.value: must be null when outcome.error is set")
    return Outcome(value=json_to_plain(obj["value"]), error=error)
