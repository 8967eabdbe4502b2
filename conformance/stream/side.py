"""One side of a stream run: a ``StreamFactory`` over a queue, the streams the actors
opened on it (by name), and ``apply(op) -> Outcome`` with plain-data outcomes
(``scenarios.stream.ops`` lists their shapes). The model side and the implementation side
are both a ``StreamSide``; only how they reopen after a crash differs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqsim.impl.stream.codec import forget_unpacked
from rmqsim.model.api import MQError, forget_valid_names
from rmqsim.model.stream.api import (
    TYPE_CODES,
    MsgPack,
    MsgPosition,
    MsgStream,
    MsgType,
    Row,
    StreamFactory,
    SubscriptionPosition,
    TsMsg,
    forget_valid_packs,
)
from rmqsim.model.stream.codec import forget_decoded
from rmqsim.scenarios.queue.ops import Outcome, RunRetention
from rmqsim.scenarios.stream.ops import (
    Broadcast,
    Consume,
    CrashQueue,
    OpenConsumer,
    OpenProducer,
    Produce,
    RecreateChannel,
    Seek,
    StreamMsg,
    StreamOp,
)

__all__ = [
    "NO_STREAM",
    "StreamSide",
    "forget_memories",
    "pack_of",
    "pack_to_plain",
    "to_ts_msg",
    "whole_messages",
]

#: The outcome error of an operation on a stream no actor opened (a shrunk trace's).
NO_STREAM = "NoStream"

#: Crash the side's queue, reopen it and return a factory over the reopened queue.
Reopen = Callable[[StreamFactory], StreamFactory]


def to_ts_msg(msg: StreamMsg) -> TsMsg:
    """The ``TsMsg`` a plain message stands for (an unknown type code stays an int, which
    the stream refuses as ``InvalidPack``)."""
    msg_type: Any = MsgType(msg.msg_type) if msg.msg_type in TYPE_CODES else msg.msg_type
    rows = tuple(Row(row_id, ts) for row_id, ts in msg.rows)
    return TsMsg(msg_type, msg.msg_id, msg.timestamp, msg.hash_keys, msg.payload, rows)


#: The pack of each recent ``Produce``/``Broadcast``, by the operation's identity, with the
#: operation (held, so that its id names no other object while it is here): both sides of
#: a lockstep apply the same operation objects, and so does every re-run of a shrink's
#: candidates, so each operation's messages are converted once, into one immutable pack
#: that ``validate_pack`` then checks once (``model.stream.api``).
_PACKS: dict[int, tuple[Produce | Broadcast, MsgPack]] = {}
#: At most this many packs are kept (then the cache starts again, empty).
_PACKS_KEPT = 4096


def pack_of(op: Produce | Broadcast) -> MsgPack:
    """The ``MsgPack`` of ``op``'s messages (``to_ts_msg``), converted once per operation
    object; a pack's values are immutable, so every side may be given the same one."""
    cached = _PACKS.get(id(op))
    if cached is not None and cached[0] is op:
        return cached[1]
    pack = MsgPack(tuple(map(to_ts_msg, op.msgs)))
    if len(_PACKS) >= _PACKS_KEPT:
        _PACKS.clear()
    _PACKS[id(op)] = (op, pack)
    return pack


def forget_memories() -> None:
    """Empty every memory of the stream layer's fast paths (``_PACKS``, the valid packs
    and names, the decoded and unpacked records), so that a measurement times each way of
    running the same operations from cold, as a process of its own would
    (``bench.stream``): a way run after another would find the records it reads, the
    packs it checks, already remembered."""
    _PACKS.clear()
    forget_valid_packs()
    forget_decoded()
    forget_unpacked()
    forget_valid_names()


def _msg_to_plain(msg: TsMsg) -> tuple[Any, ...]:
    channel, queue_id = (
        ("", -1) if msg.position is None else (msg.position.channel, msg.position.queue_id)
    )
    rows = tuple(row.row_id for row in msg.rows)
    return (int(msg.msg_type), msg.msg_id, rows, msg.begin_ts, msg.end_ts, channel, queue_id,
            tuple(msg.hash_keys), msg.payload)  # fmt: skip


def _positions(positions: tuple[MsgPosition, ...]) -> tuple[tuple[str, int, int], ...]:
    return tuple((p.channel, p.queue_id, p.timestamp) for p in positions)


def pack_to_plain(pack: MsgPack | None) -> Any:
    """A consumed pack as plain data (None stays None)."""
    if pack is None:
        return None
    msgs = tuple(_msg_to_plain(msg) for msg in pack.msgs)
    return (pack.begin_ts, pack.end_ts, msgs, _positions(pack.start_positions),
            _positions(pack.end_positions))  # fmt: skip


def whole_messages(
    msgs: tuple[TsMsg, ...], buckets: tuple[tuple[int, ...], ...]
) -> dict[int, list[TsMsg]]:
    """A repack function keeping each message whole, on its first hash key's channel."""
    out: dict[int, list[TsMsg]] = {}
    for msg, keys in zip(msgs, buckets, strict=True):
        out.setdefault(keys[0], []).append(msg)
    return out


class StreamSide:
    """A stream factory and the actors' streams on it."""

    def __init__(self, factory: StreamFactory, channels: tuple[str, ...], reopen: Reopen) -> None:
        self.factory = factory
        self.channels = channels
        self.reopen = reopen
        self.streams: dict[str, MsgStream] = {}
        self.groups: dict[str, str] = {}

    def apply(self, op: StreamOp) -> Outcome:
        if not isinstance(op, OpenProducer | OpenConsumer):
            for name in (getattr(op, "producer", None), getattr(op, "consumer", None)):
                if name is not None and name not in self.streams:
                    return Outcome(error=NO_STREAM)
        try:
            return Outcome(value=self._apply(op))
        except MQError as exc:
            return Outcome(error=exc.kind)

    def _apply(self, op: StreamOp) -> Any:
        if isinstance(op, OpenProducer | OpenConsumer):
            return self._open(op)
        if isinstance(op, Produce):
            written = self.streams[op.producer].produce(pack_of(op))
            return tuple((channel, tuple(ids)) for channel, ids in written.items())
        if isinstance(op, Broadcast):
            written = self.streams[op.producer].broadcast(pack_of(op))
            return tuple((channel, tuple(ids)) for channel, ids in written.items())
        if isinstance(op, Consume):
            return pack_to_plain(self.streams[op.consumer].consume())
        if isinstance(op, Seek):
            stream, group = self.streams[op.consumer], self.groups[op.consumer]
            positions = [MsgPosition.at(c, queue_id, group, ts) for c, queue_id, ts in op.positions]
            stream.seek(positions, op.include_current)
            return None
        if isinstance(op, CrashQueue):
            self.close_streams()
            self.factory = self.reopen(self.factory)
            return None
        if isinstance(op, RecreateChannel):
            self.factory.mq.destroy_topic(op.channel)
            self.factory.mq.create_topic(op.channel)
            return None
        assert isinstance(op, RunRetention), op
        self.factory.mq.run_retention()
        return None

    def _open(self, op: OpenProducer | OpenConsumer) -> None:
        name = op.producer if isinstance(op, OpenProducer) else op.consumer
        old = self.streams.pop(name, None)
        if old is not None:
            old.close()
        if isinstance(op, OpenProducer):
            stream = self.factory.new_msg_stream()
            stream.as_producer(list(self.channels))
            if op.whole:
                stream.set_repack_func(whole_messages)
        else:
            stream = self.factory.new_tt_msg_stream() if op.tt else self.factory.new_msg_stream()
            start = SubscriptionPosition.LATEST if op.latest else SubscriptionPosition.EARLIEST
            stream.as_consumer(list(self.channels), op.group, start)
            self.groups[name] = op.group
        self.streams[name] = stream

    def close_streams(self) -> None:
        for stream in self.streams.values():
            stream.close()
        self.streams.clear()
