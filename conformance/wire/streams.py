"""rmqsim's end of the stream layer on the wire (docs/PROTOCOL.md "The stream layer"):
message streams served by a protocol server in another process, over the queue that
server opens.

A stream server's ``hello`` says ``"layer": "stream"``. Its factory (``--impl
exec:COMMAND``, loaded by ``conformance.adapter``) is a stream factory like any other,
``factory(queue=...) -> StreamFactory``, that names the queue its streams must run over as
``factory.rmqsim_queue_factory``: each call of that starts the server, says ``hello`` and
``open``, and returns a ``WireStreamQueue`` (the queue operations the stream layer sends:
``create_topic``, ``destroy_topic``, ``run_retention``, ``snapshot``; crash as SIGKILL).
``WireStreams`` over it makes ``WireStream`` objects whose every call is a ``stream_*``
request naming the stream by a number rmqsim gives it. A crash kills the process and
every stream in it; the lockstep opens the streams again on the new process.

What cannot travel (a repack function other than the named ones, a pack or a position
whose values have no JSON form) is answered on the server's behalf, as the queue's lone
surrogates are: ``InvalidPack``/``InvalidPosition``, or ``TypeError`` for a repack function.
The harness's own operations never make one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rmqsim.conformance.bad_impl import BadImplError
from rmqsim.conformance.stream.side import whole_messages
from rmqsim.conformance.wire.client import (  # QUEUE_FACTORY_ATTRIBUTE: also from here
    QUEUE_FACTORY_ATTRIBUTE,
    SERVED_LAYERS,
    Hello,
    WireQueue,
)
from rmqsim.conformance.wire.codec import WireProtocolError
from rmqsim.conformance.wire.stream_codec import (
    STREAM_ERROR_KINDS,
    decode_pack,
    decode_stream_state,
    decode_written,
    encode_positions,
    encode_ts_msgs,
)
from rmqsim.model.api import Clock, InvalidArgumentError, MQConfig
from rmqsim.model.stream.api import (
    MAX_TIMESTAMP,
    InvalidPackError,
    InvalidPositionError,
    MsgPack,
    MsgPosition,
    RepackFunc,
    Row,
    StreamClosedError,
    StreamKind,
    StreamState,
    SubscriptionPosition,
    TsMsg,
)

__all__ = [
    "QUEUE_FACTORY_ATTRIBUTE",
    "REPACKS",
    "WireStream",
    "WireStreamQueue",
    "WireStreams",
    "stream_server_factory",
]

#: The repack functions that have a wire form, by their wire name (``null``: the default).
REPACKS: dict[str, RepackFunc] = {"whole": whole_messages}

FaultHook = Callable[[str], None]


class WireStreamQueue(WireQueue):
    """The queue under a stream server's streams: a ``WireQueue`` whose ``hello`` asks for
    the stream layer, and whose replies may carry the stream layer's error kinds."""

    layer = "stream"
    error_kinds = STREAM_ERROR_KINDS


class WireStream:
    """One stream of a stream server (``model.stream.api.MsgStream``), number ``number``
    in its process."""

    def __init__(self, queue: WireStreamQueue, number: int, kind: StreamKind) -> None:
        self.queue = queue
        self.number = number
        self.kind = kind

    def _request(self, op: str, **arguments: Any) -> Any:
        return self.queue.request(op, stream=self.number, **arguments)

    def _changing(self, op: str, **arguments: Any) -> Any:
        """A request the lockstep follows with this stream's ``snapshot()`` (it compares
        the state of the stream an operation names): the snapshot is sent ahead, in the
        same write, and answers that call (any other next request drops it), so that one
        operation is one round trip, not two."""
        ahead = ("stream_snapshot", {"stream": self.number})
        return self.queue.request(op, ahead=ahead, stream=self.number, **arguments)

    def _refuse(self, error: Exception) -> NoReturn:
        """Refuse an argument that has no wire form on the server's behalf, after the
        check that comes first (closed: ``StreamClosed``, asked of the server)."""
        if self.snapshot().closed:
            raise StreamClosedError("the stream is closed")
        raise error

    def as_producer(self, channels: Sequence[str]) -> None:
        _none(self._request("stream_as_producer", channels=list(channels)), "stream_as_producer")

    def as_consumer(
        self,
        channels: Sequence[str],
        group: str,
        initial_position: SubscriptionPosition = SubscriptionPosition.EARLIEST,
    ) -> None:
        if not isinstance(initial_position, SubscriptionPosition):
            self._refuse(InvalidArgumentError("initial_position must be a SubscriptionPosition "
                                              "(refused by rmqsim: it has no wire form)"))
        start = str(initial_position.value)
        reply = self._request("stream_as_consumer", channels=list(channels), group=group,
                              initial_position=start)  # fmt: skip
        _none(reply, "stream_as_consumer")

    def set_repack_func(self, repack_func: RepackFunc | None) -> None:
        names = [name for name, known in REPACKS.items() if known is repack_func]
        if repack_func is not None and not callable(repack_func):
            self._refuse(InvalidArgumentError("the repack function must be callable"))
        if repack_func is not None and not names:
            raise TypeError(f"a repack function crosses the wire by name: one of {list(REPACKS)}")
        _none(self._request("stream_set_repack", repack=names[0] if names else None),
              "stream_set_repack")  # fmt: skip

    def _msgs(self, pack: object) -> list[dict[str, Any]]:
        try:
            return _wire_msgs(pack)
        except InvalidPackError as error:
            self._refuse(error)

    def produce(self, pack: MsgPack) -> dict[str, list[int]]:
        reply = self._changing("stream_produce", msgs=self._msgs(pack))
        return decode_written(reply, "the reply to stream_produce: ok")

    def broadcast(self, pack: MsgPack) -> dict[str, list[int]]:
        reply = self._changing("stream_broadcast", msgs=self._msgs(pack))
        return decode_written(reply, "the reply to stream_broadcast: ok")

    def consume(self) -> MsgPack | None:
        return decode_pack(self._changing("stream_consume"), "the reply to stream_consume: ok")

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = False) -> None:
        if not _travels_as_positions(positions):
            self._refuse(InvalidPositionError("positions with no wire form (refused by rmqsim)"))
        if type(include_current) is not bool:
            self._refuse(InvalidArgumentError("include_current must be a bool"))
        reply = self._changing("stream_seek", positions=encode_positions(positions),
                              include_current=include_current)  # fmt: skip
        _none(reply, "stream_seek")

    def get_latest_msg_id(self, channel: str) -> int:
        reply = self._request("stream_get_latest_msg_id", channel=channel)
        if type(reply) is not int:
            raise WireProtocolError(
                f"the reply to stream_get_latest_msg_id: ok: expected an integer, got {reply!r:.80}"
            )
        return reply

    def close(self) -> None:
        _none(self._request("stream_close"), "stream_close")

    def snapshot(self) -> StreamState:
        return decode_stream_state(self._request("stream_snapshot"),
                                   "the reply to stream_snapshot: ok")  # fmt: skip


class WireStreams:
    """The streams of the stream server behind ``mq`` (``model.stream.api.StreamFactory``);
    streams are numbered from 1 in each server process."""

    def __init__(self, mq: WireStreamQueue) -> None:
        self.mq = mq
        self._next = 1

    def _new(self, kind: StreamKind) -> WireStream:
        stream = WireStream(self.mq, self._next, kind)
        self._next += 1
        _none(self.mq.request("stream_new", stream=stream.number, kind=kind.value), "stream_new")
        return stream

    def new_msg_stream(self) -> WireStream:
        return self._new(StreamKind.PLAIN)

    def new_tt_msg_stream(self) -> WireStream:
        return self._new(StreamKind.TIME_TICK)


def _none(reply: object, op: str) -> None:
    if reply is not None:
        raise WireProtocolError(f"the reply to {op}: ok: expected null, got {reply!r:.80}")


def _travels(value: object) -> bool:
    return type(value) is int


def _travels_as_msg(msg: object) -> bool:
    return (
        isinstance(msg, TsMsg)
        and isinstance(msg.msg_type, int) and _travels(msg.msg_id) and _travels(msg.timestamp)
        and isinstance(msg.hash_keys, tuple | list) and all(map(_travels, msg.hash_keys))
        and type(msg.payload) is bytes
        and isinstance(msg.rows, tuple | list)
        and all(isinstance(r, Row) and _travels(r.row_id) and _travels(r.timestamp)
                for r in msg.rows)
    )  # fmt: skip


def _wire_msgs(pack: object) -> list[dict[str, Any]]:
    """A pack's messages as the wire has them. Only ``msgs`` is sent: the other fields
    of a pack are checked here (``InvalidPack`` when malformed, as the stream would)."""
    if not isinstance(pack, MsgPack) or not isinstance(pack.msgs, tuple | list):
        raise InvalidPackError(f"pack must be a MsgPack, got {type(pack).__name__}")
    for name in ("begin_ts", "end_ts"):
        value = getattr(pack, name)
        if not _travels(value) or not 0 <= value <= MAX_TIMESTAMP:
            raise InvalidPackError(f"pack.{name} must be an int in [0, 2**64)")
    for name in ("start_positions", "end_positions"):
        positions = getattr(pack, name)
        if not isinstance(positions, tuple | list) or not all(
            isinstance(p, MsgPosition) for p in positions
        ):
            raise InvalidPackError(f"pack.{name} must be a tuple of MsgPosition")
    if not all(map(_travels_as_msg, pack.msgs)):
        raise InvalidPackError("a message with no wire form (refused by rmqsim)")
    return encode_ts_msgs(pack.msgs)


def _travels_as_positions(positions: object) -> bool:
    return isinstance(positions, tuple | list) and all(
        isinstance(p, MsgPosition) and type(p.channel) is str and type(p.group) is str
        and type(p.msg_id) is bytes and _travels(p.timestamp)
        for p in positions
    )  # fmt: skip


def stream_server_factory(
    start: Callable[[], Any], impl: str, hello: Hello
) -> Callable[..., WireStreams]:
    """The stream factory of a checked stream server (``client.SERVED_LAYERS``' entry):
    its ``rmqsim_queue_factory`` starts the server on a directory."""

    def queue_factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> WireStreamQueue:
        return WireStreamQueue(start, path=path, config=config, clock=clock, faults=faults)

    def factory(*, queue: object) -> WireStreams:
        if not isinstance(queue, WireStreamQueue):
            raise BadImplError(
                f"--impl {impl}: the streams of a protocol server run over the queue it "
                f"opens itself ({QUEUE_FACTORY_ATTRIBUTE}), not over a {type(queue).__name__}"
            )
        return WireStreams(queue)

    queue_factory.__qualname__ = f"{impl} (its queue)"
    queue_factory.__module__ = "exec"
    factory.rmqsim_layer = "stream"  # type: ignore[attr-defined]  # its form
    setattr(factory, QUEUE_FACTORY_ATTRIBUTE, queue_factory)
    return factory


SERVED_LAYERS["stream"] = stream_server_factory
