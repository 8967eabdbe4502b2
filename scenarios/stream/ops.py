"""The stream simulation's operations (docs/STREAM.md), and their JSON form for traces.

Plain data only, as ``consumer_ops``: this leaf package knows nothing of ``model.stream``;
the stream runner turns a ``StreamMsg`` into a ``TsMsg`` and a position triple into a
``MsgPosition``. Every stream is named by the actor that owns it (a producer, a time-tick
consumer or a plain consumer); the channels are the profile's, in its order.

Outcome values (built by the runner, read by ``StreamWorld.learn``):

- ``produce``/``broadcast``: ``((channel, (queue ids...)), ...)`` in producer-channel order;
- ``consume``: ``None``, or a pack ``(begin_ts, end_ts, msgs, start_positions,
  end_positions)`` with each msg ``(msg_type, msg_id, (row ids...), begin_ts, end_ts,
  channel, queue_id)`` and each position ``(channel, queue_id, timestamp)``;
- the others: ``None``.
"""

from __future__ import annotations

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
    "CREATE_COLLECTION",
    "DELETE",
    "DROP_COLLECTION",
    "INSERT",
    "STREAM_OP_TYPES",
    "TIME_TICK",
    "Broadcast",
    "Consume",
    "CrashQueue",
    "OpenConsumer",
    "OpenProducer",
    "PlainPosition",
    "Produce",
    "RecreateChannel",
    "RunRetention",
    "Seek",
    "StreamMsg",
    "StreamOp",
    "stream_op_from_json",
    "stream_op_to_json",
    "stream_outcome_from_json",
    "stream_outcome_to_json",
]

#: ``(channel, queue_id, timestamp)``: a seek position as plain data.
PlainPosition = tuple[str, int, int]

#: Message type codes (``MsgType``) a simulation writes.
INSERT, DELETE, CREATE_COLLECTION, DROP_COLLECTION, TIME_TICK = 400, 401, 100, 101, 1200


@dataclass(frozen=True, slots=True)
class StreamMsg:
    """A ``TsMsg`` as plain data: ``rows`` are ``(row_id, timestamp)`` pairs."""

    msg_type: int
    msg_id: int
    timestamp: int = 0
    hash_keys: tuple[int, ...] = ()
    payload: bytes = b""
    rows: tuple[tuple[int, int], ...] = ()

    def to_json(self) -> list[Any]:
        return [
            self.msg_type,
            self.msg_id,
            self.timestamp,
            list(self.hash_keys),
            plain_to_json(self.payload),
            [list(row) for row in self.rows],
        ]

    @staticmethod
    def from_json(obj: object) -> StreamMsg:
        if type(obj) is not list or len(obj) != 6:
            raise OpDecodeError(f"msg: expected a list of 6 fields, got {str(obj)[:80]}")
        msg_type, msg_id, timestamp, keys, payload, rows = obj
        msg = StreamMsg(
            msg_type, msg_id, timestamp, json_to_plain(keys), json_to_plain(payload),
            json_to_plain(rows),
        )  # fmt: skip
        if not _is_stream_msg(msg):
            raise OpDecodeError(f"msg: wrong field types in {str(obj)[:80]}")
        return msg


def _is_int(value: object) -> bool:
    return type(value) is int


def _ints(value: object, size: int | None = None) -> bool:
    return (
        type(value) is tuple
        and (size is None or len(value) == size)
        and all(_is_int(item) for item in value)
    )


def _is_stream_msg(msg: StreamMsg) -> bool:
    """Field types only: ranges and rules are the stream's to check (a malformed message
    is an operation whose outcome is ``InvalidPack``)."""
    return (
        _is_int(msg.msg_type)
        and _is_int(msg.msg_id)
        and _is_int(msg.timestamp)
        and _ints(msg.hash_keys)
        and type(msg.payload) is bytes
        and type(msg.rows) is tuple
        and all(_ints(row, 2) for row in msg.rows)
    )


@dataclass(frozen=True, slots=True)
class OpenProducer:
    """A new plain stream ``producer``, a producer of every channel (the old one closed);
    ``whole``: its repack function keeps each message whole, on its first hash key's
    channel (so multi-row messages reach the consumers), else the default repack."""

    kind: ClassVar[str] = "open_producer"
    producer: str
    whole: bool = False


@dataclass(frozen=True, slots=True)
class OpenConsumer:
    """A new stream ``consumer`` (``tt``: time-tick, else plain) consuming every channel
    through ``group`` from the earliest or the latest message; the old one is closed."""

    kind: ClassVar[str] = "open_consumer"
    consumer: str
    tt: bool
    group: str
    latest: bool = False


@dataclass(frozen=True, slots=True)
class Produce:
    """``produce`` a pack of ``msgs`` on ``producer`` (routed by hash key)."""

    kind: ClassVar[str] = "stream_produce"
    producer: str
    msgs: tuple[StreamMsg, ...]


@dataclass(frozen=True, slots=True)
class Broadcast:
    """``broadcast`` a pack of ``msgs`` on ``producer`` (to every channel)."""

    kind: ClassVar[str] = "stream_broadcast"
    producer: str
    msgs: tuple[StreamMsg, ...]


@dataclass(frozen=True, slots=True)
class Consume:
    """``consume()`` on ``consumer``."""

    kind: ClassVar[str] = "stream_consume"
    consumer: str


@dataclass(frozen=True, slots=True)
class Seek:
    """``seek`` ``consumer`` to ``positions`` (in the consumer's group)."""

    kind: ClassVar[str] = "stream_seek"
    consumer: str
    positions: tuple[PlainPosition, ...]
    include_current: bool


@dataclass(frozen=True, slots=True)
class CrashQueue:
    """The process dies: the queue crashes and reopens; every stream is gone (each actor
    opens its stream again)."""

    kind: ClassVar[str] = "stream_crash_queue"


@dataclass(frozen=True, slots=True)
class RecreateChannel:
    """The queue underneath destroys ``channel``'s topic (its messages and groups) and
    creates it again, empty (a dropped and re-created collection's channel); the
    streams are left as they are (each actor opens its stream again)."""

    kind: ClassVar[str] = "stream_recreate_channel"
    channel: str


StreamOp = (
    OpenProducer | OpenConsumer | Produce | Broadcast | Consume | Seek | CrashQueue | RunRetention
    | RecreateChannel
)
STREAM_OP_TYPES: dict[str, type[StreamOp]] = {
    t.kind: t
    for t in (
        OpenProducer,
        OpenConsumer,
        Produce,
        Broadcast,
        Consume,
        Seek,
        CrashQueue,
        RunRetention,
        RecreateChannel,
    )
}


def _is_positions(value: object) -> bool:
    return type(value) is tuple and all(
        type(p) is tuple and len(p) == 3 and type(p[0]) is str and _is_int(p[1]) and _is_int(p[2])
        for p in value
    )


def _msgs(value: object, where: str) -> tuple[StreamMsg, ...]:
    if type(value) is not list:
        raise OpDecodeError(f"{where}: expected a list")
    msgs = []
    for index, item in enumerate(value):
        try:
            msgs.append(StreamMsg.from_json(item))
        except OpDecodeError as exc:
            raise OpDecodeError(f"{where}[{index}]: {exc}") from None
    return tuple(msgs)


#: The codec of the stream operations: messages as ``StreamMsg.to_json`` lists, the other
#: fields as plain data.
_CODEC: OpCodec[StreamOp] = OpCodec(
    "stream operation",
    STREAM_OP_TYPES,
    {
        "producer": plain_field(str),
        "consumer": plain_field(str),
        "channel": plain_field(str),
        "group": plain_field(str),
        "tt": plain_field(bool),
        "latest": plain_field(bool),
        "whole": plain_field(bool),
        "include_current": plain_field(bool),
        "positions": plain_field(_is_positions),
        "msgs": Field(_msgs, lambda msgs: [m.to_json() for m in msgs]),
    },
)


def stream_op_to_json(op: StreamOp) -> dict[str, Any]:
    """``{"kind": ..., <fields>...}``; messages as ``StreamMsg.to_json`` lists."""
    return _CODEC.to_json(op)


def stream_op_from_json(obj: object) -> StreamOp:
    """The inverse of ``stream_op_to_json``; strict (``OpDecodeError`` names the field)."""
    return _CODEC.from_json(obj)


def stream_outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    return {"value": plain_to_json(outcome.value), "error": outcome.error}


def stream_outcome_from_json(obj: object) -> Outcome:
    """An outcome as the stream runner records it: plain data or an error string."""
    value, error = outcome_fields(obj, decode_plain, "a string")
    return Outcome(value=value, error=error)
