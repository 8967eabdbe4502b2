"""Broken implementations of every layer, loaded through ``--impl MODULE:FACTORY`` by
``tests/test_broken_impls.py`` (issue 38, "a broken implementation never crashes the
harness"): one whose every method raises, one whose ``snapshot`` raises only after
``AFTER`` operations, a factory that raises when called and one that returns an object of
the wrong type. Every one must be reported as the implementation's failure (exit 1, or exit
2 for a factory that is no factory), never as an internal error (exit 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import QUEUE_METHODS, make_model_factory
from rmqsim.conformance.consumer.run import impl_consumer_factory
from rmqsim.impl.commitlog import open_queue as commitlog_open_queue
from rmqsim.impl.stream import stream_factory
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import Clock, MessageQueue, MQConfig

__all__ = [
    "AFTER",
    "Broken",
    "consumer_raises",
    "consumer_raises_later",
    "consumer_returns_junk",
    "queue_raises",
    "queue_returns_junk",
    "queue_snapshot_raises_later",
    "raising_factory",
    "storage_raises",
    "storage_snapshot_raises",
    "storage_snapshot_raises_later",
    "stream_factory_raises",
    "stream_queue_snapshot_raises",
    "stream_raises",
    "stream_returns_junk",
    "stream_snapshot_raises_later",
    "wrong_type_factory",
    "wrong_type_stream_factory",
]

#: The operations after which a "later" implementation's snapshot starts to raise.
AFTER = 12


class Broken(RuntimeError):
    """What the broken implementations raise."""


def _raise(*_: Any, **__: Any) -> Any:
    raise Broken("this implementation is broken")


class _Raises:
    """An object every one of whose methods (named in ``QUEUE_METHODS``, the push
    consumer's and the stream factory's, and any other asked for) raises."""

    mq: Any = "not a queue"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _raise


for _name in (*QUEUE_METHODS, "start", "pull", "next_batch", "complete", "persist",
              "stored_offsets", "new_msg_stream", "new_tt_msg_stream"):  # fmt: skip
    setattr(_Raises, _name, _raise)


def queue_raises(*, path: Path, config: MQConfig, clock: Clock, faults: Any) -> MessageQueue:
    """A queue whose every method raises (``crash`` and ``close`` too)."""
    return _Raises()


class _Counting:
    """Counts the calls made through it; ``snapshot`` raises after ``AFTER`` of them."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        if name == "snapshot" and self._calls >= AFTER:
            return _raise
        self._calls += 1
        return value


class _LaterSnapshotMQ(ReferenceMQ):
    """The reference model, whose snapshot raises once it served ``AFTER`` operations."""

    served = 0

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name == "snapshot" and super().__getattribute__("served") >= AFTER:
            return _raise
        if name in QUEUE_METHODS and name not in ("snapshot", "crash", "close"):
            self.served = super().__getattribute__("served") + 1
        return value


queue_snapshot_raises_later = make_model_factory(_LaterSnapshotMQ)


def storage_raises(
    *, path: Path, config: MQConfig, clock: Clock, faults: Any, fs: Any = None
) -> MessageQueue:
    """A storage backend whose every method raises."""
    return _Raises()


def storage_snapshot_raises_later(
    *, path: Path, config: MQConfig, clock: Clock, faults: Any, fs: Any = None
) -> MessageQueue:
    """The commit-log backend, whose reads of the whole state (``snapshot``) raise once
    it served ``AFTER`` operations since it was opened (a corrupt store, say)."""
    queue = commitlog_open_queue(path=path, config=config, clock=clock, faults=faults, fs=fs)
    return _Counting(queue)


def consumer_raises(
    *, queue: Any, group: str, topic: str, config: Any, clock: Any, path: Path, send_hook: Any
) -> Any:
    """A push consumer whose every method raises."""
    return _Raises()


def consumer_raises_later(
    *, queue: Any, group: str, topic: str, config: Any, clock: Any, path: Path, send_hook: Any
) -> Any:
    """Our push consumer, every method of which raises once it served ``AFTER`` calls
    (the consumer layer reads no state of it but through its operations)."""
    core = impl_consumer_factory(queue=queue, group=group, topic=topic, config=config,
                                 clock=clock, path=path, send_hook=send_hook)  # fmt: skip
    return _RaisesLater(core)


class _RaisesLater(_Counting):
    def __getattr__(self, name: str) -> Any:
        if self._calls >= AFTER:
            return _raise
        return super().__getattr__(name)


class _RaisingStreams:
    """Streams every method of which raises (``snapshot`` and ``close`` too)."""

    def __init__(self, queue: MessageQueue) -> None:
        self.mq = queue

    def new_msg_stream(self) -> Any:
        return _Raises()

    def new_tt_msg_stream(self) -> Any:
        return _Raises()


def stream_raises(*, queue: MessageQueue) -> Any:
    """A stream factory whose streams' every method raises."""
    return _RaisingStreams(queue)


def stream_factory_raises(*, queue: MessageQueue) -> Any:
    """A stream factory whose every method raises."""
    return _Raises()


class _LaterSnapshotStreams:
    """Our stream factory, whose streams' ``snapshot`` raises once they served ``AFTER``
    calls between them, and whose queue's does too."""

    def __init__(self, queue: MessageQueue) -> None:
        self._inner = stream_factory(queue=queue)
        self.calls = [0]
        self.mq = _Counting(queue)

    def new_msg_stream(self) -> Any:
        return _Counting(self._inner.new_msg_stream())

    def new_tt_msg_stream(self) -> Any:
        return _Counting(self._inner.new_tt_msg_stream())


def stream_snapshot_raises_later(*, queue: MessageQueue) -> Any:
    """See ``_LaterSnapshotStreams``."""
    return _LaterSnapshotStreams(queue)


def raising_factory(*, path: Path, config: MQConfig, clock: Clock, faults: Any) -> MessageQueue:
    """A queue factory that raises when called."""
    raise Broken("cannot open")


def wrong_type_factory(
    *, path: Path, config: MQConfig, clock: Clock, faults: Any
) -> MessageQueue:
    """A queue factory that returns no queue."""
    return 42  # type: ignore[return-value]


def wrong_type_stream_factory(*, queue: MessageQueue) -> Any:
    """A stream factory that returns no stream factory."""
    return "not a stream factory"


def _junk(*_: Any, **__: Any) -> Any:
    return 42


class _Junk:
    """An object every one of whose methods returns 42."""

    mq: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _junk


def consumer_returns_junk(
    *, queue: Any, group: str, topic: str, config: Any, clock: Any, path: Path, send_hook: Any
) -> Any:
    """A push consumer every method of which returns 42."""
    return _Junk()


class _JunkStreams:
    def __init__(self, queue: MessageQueue) -> None:
        self.mq = queue

    def new_msg_stream(self) -> Any:
        return _Junk()

    def new_tt_msg_stream(self) -> Any:
        return _Junk()


def stream_returns_junk(*, queue: MessageQueue) -> Any:
    """A stream factory whose streams' every method returns 42."""
    return _JunkStreams(queue)


class _JunkResultsMQ(ReferenceMQ):
    """The reference model, whose results are lists of the wrong things."""

    def produce(self, topic: str, messages: Any) -> Any:
        super().produce(topic, messages)
        return ["an id"] * len(messages)

    def consume(self, topic: str, group: str, n: int) -> Any:
        return [42 for _ in super().consume(topic, group, n)]

    def get_latest_msg(self, topic: str) -> Any:
        return "latest"

    def exist_consumer_group(self, topic: str, group: str) -> Any:
        return 3


queue_returns_junk = make_model_factory(_JunkResultsMQ)


class _QueueSnapshotRaises:
    """A queue whose ``snapshot`` raises, all else the queue's."""

    def __init__(self, queue: MessageQueue) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        if name == "snapshot":
            return _raise
        return getattr(self._queue, name)


class _StreamsOverBrokenRead:
    """Our streams over the queue, which they are given as ``mq`` behind a snapshot
    that raises: only the harness's final check of the queue reads it."""

    def __init__(self, queue: MessageQueue) -> None:
        inner = stream_factory(queue=queue)
        self.new_msg_stream = inner.new_msg_stream
        self.new_tt_msg_stream = inner.new_tt_msg_stream
        self.mq = _QueueSnapshotRaises(queue)


def stream_queue_snapshot_raises(*, queue: MessageQueue) -> Any:
    """See ``_StreamsOverBrokenRead``."""
    return _StreamsOverBrokenRead(queue)


def storage_snapshot_raises(
    *, path: Path, config: MQConfig, clock: Clock, faults: Any, fs: Any = None
) -> MessageQueue:
    """The commit-log backend, whose ``snapshot`` always raises (a store whose reads
    fail: the issue's ``CorruptDatabaseError``)."""
    queue = commitlog_open_queue(path=path, config=config, clock=clock, faults=faults, fs=fs)
    return _QueueSnapshotRaises(queue)
