"""The real message streams (docs/STREAM.md) on any ``MessageQueue``, ``impl.RocksMQ`` by
default. Imports only the contract modules (``model.api``, ``model.stream.api``).

- ``codec``    the stream record (versioned header, no pickle);
- ``routing``  the default repack by hash key and a user's repack function, checked;
- ``channel``  ``ChannelReader``: one consumed channel, read through its group;
- ``core``     ``PlainStream`` and ``TtStream``: deterministic, never block, stepped by
               the simulation;
- ``threaded`` ``ThreadedTtStream``: a reader thread per channel feeding the time-tick
               merge, as Milvus's ``MqTtMsgStream``.

``RocksStreamFactory(mq)`` makes the deterministic streams over a queue,
``ThreadedStreamFactory(mq)`` the threaded time-tick stream (its plain stream is the
core's: a plain stream reads one message per call). ``stream_factory(queue=...)`` and
``threaded_stream_factory(queue=...)`` are the same as ``--impl`` factories.
"""

from __future__ import annotations

from rmqsim.impl.stream.core import PlainStream, StreamBase, TtStream
from rmqsim.impl.stream.threaded import ThreadedTtStream
from rmqsim.model.api import MessageQueue

__all__ = [
    "PlainStream",
    "RocksStreamFactory",
    "StreamBase",
    "ThreadedStreamFactory",
    "ThreadedTtStream",
    "TtStream",
    "stream_factory",
    "threaded_stream_factory",
]


class RocksStreamFactory:
    """Deterministic streams over one queue, ``mq`` (Milvus's ``msgstream.Factory``).
    ``plain_cls``/``tt_cls`` are the stream classes it makes (a variant overrides them)."""

    plain_cls: type[PlainStream] = PlainStream
    tt_cls: type[TtStream] = TtStream

    def __init__(self, mq: MessageQueue) -> None:
        self.mq = mq

    def new_msg_stream(self) -> PlainStream:
        return self.plain_cls(self.mq)

    def new_tt_msg_stream(self) -> TtStream:
        return self.tt_cls(self.mq)


class ThreadedStreamFactory(RocksStreamFactory):
    """As ``RocksStreamFactory``, with a reader thread per channel in time-tick streams."""

    tt_cls = ThreadedTtStream


def stream_factory(*, queue: MessageQueue) -> RocksStreamFactory:
    """The deterministic streams over ``queue`` (the ``--impl`` form)."""
    return RocksStreamFactory(queue)


def threaded_stream_factory(*, queue: MessageQueue) -> ThreadedStreamFactory:
    """The threaded time-tick streams over ``queue`` (the ``--impl`` form)."""
    return ThreadedStreamFactory(queue)
