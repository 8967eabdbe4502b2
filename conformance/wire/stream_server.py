"""The reference server's stream layer (docs/PROTOCOL.md "The stream layer"): a stream
factory (``impl.stream``'s, a stream mutant, a user's ``factory(queue=...)``) served over
the queue the server opens on the request's directory (our ``impl.RocksMQ``, as in
process), with the streams rmqsim creates by number.

``conformance.wire.server`` serves the queue operations on ``StreamHost.queue`` and the
``stream_*`` operations of ``STREAM_CALLS`` on its streams; a request of the wrong shape
(an unknown stream number, a value of the wrong type) breaks the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqsim.conformance.wire.codec import WireProtocolError
from rmqsim.conformance.wire.stream_codec import (
    SUBSCRIPTIONS,
    decode_positions,
    decode_ts_msgs,
    encode_pack,
    encode_stream_state,
    encode_written,
)
from rmqsim.conformance.wire.streams import QUEUE_FACTORY_ATTRIBUTE, REPACKS
from rmqsim.model.api import Clock, MessageQueue, MQConfig
from rmqsim.model.stream.api import MsgPack, MsgStream, StreamFactory

__all__ = ["STREAM_CALLS", "StreamHost", "open_stream_host"]


class StreamHost:
    """A stream factory over the queue it was opened on, and its streams by number. The
    queue's operations are its queue's (``__getattr__``)."""

    def __init__(self, streams: StreamFactory, queue: MessageQueue) -> None:
        self.factory = streams
        self.queue = queue
        self.streams: dict[int, MsgStream] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    def new(self, number: object, kind: object) -> None:
        if type(number) is not int or number in self.streams:
            raise WireProtocolError(f"stream_new: stream must be a new number, got {number!r}")
        if kind == "plain":
            self.streams[number] = self.factory.new_msg_stream()
        elif kind == "time_tick":
            self.streams[number] = self.factory.new_tt_msg_stream()
        else:
            raise WireProtocolError(f"stream_new: kind must be 'plain' or 'time_tick': {kind!r}")

    def stream(self, number: object) -> MsgStream:
        stream = self.streams.get(number) if type(number) is int else None
        if stream is None:
            raise WireProtocolError(f"no stream numbered {number!r} in this process")
        return stream


def open_stream_host(
    factory: Callable[..., StreamFactory], path: Path, config: MQConfig, clock: Clock,
    faults: Callable[[str], None],
) -> StreamHost:
    """The streams of ``factory`` over the queue it names (``rmqsim_queue_factory``), else
    over ours, opened on ``path``."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL, load_factory

    open_queue = getattr(factory, QUEUE_FACTORY_ATTRIBUTE, None) or load_factory(DEFAULT_IMPL)
    queue = open_queue(path=path, config=config, clock=clock, faults=faults)
    return StreamHost(factory(queue=queue), queue)


def _strings(value: object, what: str) -> list[str]:
    if type(value) is not list or not all(type(item) is str for item in value):
        raise WireProtocolError(f"{what}: expected a list of strings, got {value!r:.80}")
    return value


def _subscription(value: object) -> Any:
    if value not in SUBSCRIPTIONS:
        raise WireProtocolError(f"initial_position must be 'earliest' or 'latest': {value!r:.40}")
    return SUBSCRIPTIONS[value]


def _repack(value: object) -> Any:
    if value is not None and value not in REPACKS:
        raise WireProtocolError(f"repack must be null or one of {list(REPACKS)}: {value!r:.40}")
    return None if value is None else REPACKS[value]


def _flag(value: object) -> bool:
    if type(value) is not bool:
        raise WireProtocolError(f"include_current must be true or false: {value!r:.40}")
    return value


def _pack(msgs: object) -> MsgPack:
    return MsgPack(decode_ts_msgs(msgs, "msgs"))


#: ``call(server, host, *arguments)`` for each ``stream_*`` operation, its arguments in
#: ``stream_codec.STREAM_OPS``' order.
STREAM_CALLS: dict[str, Callable[..., Any]] = {
    "stream_new": lambda s, h, n, kind: h.new(n, kind),
    "stream_as_producer": lambda s, h, n, c: h.stream(n).as_producer(_strings(c, "channels")),
    "stream_as_consumer": lambda s, h, n, c, g, start: h.stream(n).as_consumer(
        _strings(c, "channels"), g, _subscription(start)),
    "stream_set_repack": lambda s, h, n, r: h.stream(n).set_repack_func(_repack(r)),
    "stream_produce": lambda s, h, n, m: encode_written(h.stream(n).produce(_pack(m))),
    "stream_broadcast": lambda s, h, n, m: encode_written(h.stream(n).broadcast(_pack(m))),
    "stream_consume": lambda s, h, n: encode_pack(h.stream(n).consume()),
    "stream_seek": lambda s, h, n, p, inclusive: h.stream(n).seek(
        list(decode_positions(p, "positions")), _flag(inclusive)),
    "stream_get_latest_msg_id": lambda s, h, n, c: h.stream(n).get_latest_msg_id(c),
    "stream_close": lambda s, h, n: h.stream(n).close(),
    "stream_snapshot": lambda s, h, n: encode_stream_state(h.stream(n).snapshot()),
}
