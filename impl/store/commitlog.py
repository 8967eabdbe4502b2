"""Our commit log (``impl.commitlog``) under the storage contract (docs/STORAGE.md).

A store queue ``(topic, queue)`` is the commit log's topic ``"<topic>@<queue>"``, created
by its first put; offset ``o`` is message id ``o + 1`` (the queue contract's ids start at
1 and are contiguous, as the storage contract's offsets are from 0). ``put`` is a produce,
``get`` a group-less read (``CommitLogMQ.read``), ``offsets`` the topic's retained id range
(``CommitLogMQ.bounds``), ``retain`` the commit log's retention by age
(``CommitLogMQ.expire``), ``flush``, ``close`` and ``crash`` its own. The flush mode is the
``StoreConfig``'s; the segment size too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rmqsim.impl.commitlog import CommitLogMQ, FileSystem, FlushPolicy, Geometry
from rmqsim.impl.faults import FaultHook
from rmqsim.model.api import Clock, MQConfig, ProducerMessage
from rmqsim.model.store.api import StoreConfig, validate_get, validate_put, validate_queue

__all__ = ["CQ_ENTRIES_PER_FILE", "QUEUE_CONFIG", "CommitLogStore", "open_store"]

#: Consume-queue entries per file: few, so that a run turns consume-queue files over too.
CQ_ENTRIES_PER_FILE = 64

#: The queue configuration under the store: no page ever closes, no queue retention.
QUEUE_CONFIG = MQConfig(page_size_bytes=2**62, retention_time_s=-1, retention_size_bytes=-1)


def _topic_name(topic: str, queue: int) -> str:
    return f"{topic}@{queue}"


class CommitLogStore:
    """A ``MessageStore`` over a ``CommitLogMQ`` (module docstring)."""

    def __init__(self, queue: CommitLogMQ, config: StoreConfig) -> None:
        self.queue = queue
        self.config = config

    def put(self, topic: str, queue: int, bodies: Sequence[bytes]) -> int:
        validate_put(topic, queue, bodies, self.config)
        name = _topic_name(topic, queue)
        if self.queue.bounds(name) is None:
            self.queue.create_topic(name)
        ids = self.queue.produce(name, [ProducerMessage(body) for body in bodies])
        return ids[0] - 1

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        validate_get(topic, queue, offset, max_count)
        name = _topic_name(topic, queue)
        if self.queue.bounds(name) is None:
            return []
        return [message.payload for message in self.queue.read(name, offset + 1, max_count)]

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        validate_queue(topic, queue)
        bounds = self.queue.bounds(_topic_name(topic, queue))
        return (0, 0) if bounds is None else bounds

    def flush(self) -> None:
        self.queue.flush()

    def retain(self, cutoff_s: int) -> None:
        self.queue.expire(cutoff_s)

    def close(self) -> None:
        self.queue.close()

    def crash(self) -> None:
        self.queue.crash()


def open_store(
    *, path: Path, store_config: StoreConfig, clock: Clock, faults: FaultHook | None,
    fs: FileSystem | None = None,
) -> CommitLogStore:
    """Adapter factory (the storage layer's form): our commit log at ``path`` with the
    config's flush mode and segment size; ``fs``: the file system (the power-loss sweep's
    simulated disk; default the OS's). A segment under the commit log's least
    (``impl.commitlog.MIN_SEGMENT_SIZE_BYTES``) is refused (``InvalidArgumentError``)."""
    geometry = Geometry(store_config.segment_bytes, CQ_ENTRIES_PER_FILE)
    queue = CommitLogMQ.open(path, config=QUEUE_CONFIG, clock=clock, faults=faults,
                             policy=FlushPolicy(mode=store_config.flush), fs=fs,
                             geometry=geometry)
    return CommitLogStore(queue, store_config)


# What the storage power-loss sweep holds it to (docs/STORAGE.md): a put is one batch record,
# all or nothing.
open_store.rmqsim_batch_atomic = True  # type: ignore[attr-defined]
