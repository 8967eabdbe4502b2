"""``ConsumerCore``: the push consumer's state machine on ``impl.RocksMQ`` (docs/CONSUMER.md).

Every public method takes one re-entrant lock, so the threaded ``PushConsumer`` (pull
thread, worker pool, persist thread) and the single-threaded simulation drive the same
code. Handlers never run under the lock: a worker takes a ``Delivery`` with
``next_batch``, runs the handler, and reports with ``complete``.

Per subscribed queue (the topic, and in concurrent mode the group's retry topic) the core
keeps a process queue, the pull floor (pulled ids below it are dropped after a restart) and
the offset in the ``RocksOffsetStore``. On the queue it uses two groups per queue: the pull
cursor ``%PULL%<group>`` that ``consume`` advances, and the guard ``<group>`` that
``persist`` moves to the persisted offset when that id exists, so retention never deletes
a message the group has not finished (the guard stays behind when the id is not issued yet).
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from rmqsim.impl.consumer.offsets import RocksOffsetStore
from rmqsim.impl.consumer.process_queue import Cached, ProcessQueue
from rmqsim.model.api import (
    DLQ_PREFIX,
    PROP_ORIGIN_ID,
    PROP_ORIGIN_TOPIC,
    PROP_RECONSUME_TIMES,
    RESULTS_BY_MODE,
    RETRY_PREFIX,
    SYSTEM_PROPERTIES,
    Clock,
    Completion,
    ConsumeMode,
    ConsumerConfig,
    ConsumeResult,
    ConsumerMessage,
    Delivered,
    Delivery,
    InvalidArgumentError,
    MessageQueue,
    MQError,
    NotServingError,
    ProducerMessage,
    ReadType,
    dlq_topic,
    pull_group,
    retry_topic,
    validate_consumer_group,
    validate_name,
)

__all__ = ["ConsumerCore", "SendHook"]

#: Called before each send-back with (target topic, message id); an ``MQError`` it raises
#: is a failed send (the simulation injects failures this way).
SendHook = Callable[[str, int], None]


@dataclass(slots=True)
class _Queue:
    """What the core tracks for one consumed queue."""

    name: str
    pq: ProcessQueue
    floor: int = -1
    dirty: bool = False
    inflight: int = 0  # batches of this queue handed out and not completed
    suspended_until: int = -1


@dataclass(slots=True)
class _Batch:
    queue: _Queue
    items: list[Cached] = field(default_factory=list)


class ConsumerCore:
    """One group's push consumer; make it with ``ConsumerCore.open``.

    Hooks a subclass may override (the consumer layer's seeded bugs,
    ``conformance.mutants.consumer``, are such subclasses):

    - ``process_queue_cls``, ``offset_store_cls``: the process queue and the offset store;
    - ``removable(done, failed)``: which ids a concurrent batch's completion removes from
      the process queue (and so lets its offset pass).
    """

    #: Overridable parts (the consumer-layer mutants replace them).
    process_queue_cls: type[ProcessQueue] = ProcessQueue
    offset_store_cls: type[RocksOffsetStore] = RocksOffsetStore

    def __init__(
        self,
        queue: MessageQueue,
        *,
        group: str,
        topic: str,
        config: ConsumerConfig,
        clock: Clock,
        path: str | os.PathLike[str],
        send_hook: SendHook | None = None,
    ) -> None:
        validate_consumer_group(group)
        validate_name("topic", topic)
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            raise InvalidArgumentError(f"cannot subscribe to a retry or dead-letter topic: {topic}")
        if not isinstance(config, ConsumerConfig):
            raise InvalidArgumentError("config must be a ConsumerConfig")
        self._mq = queue
        self._group = group
        self._topic = topic
        self._config = config
        self._clock = clock
        self._send_hook = send_hook
        self._orderly = config.mode is ConsumeMode.ORDERLY
        names = [topic] if self._orderly else [topic, retry_topic(group)]
        self._queues = {name: _Queue(name, self.process_queue_cls()) for name in names}
        self._offsets = self.offset_store_cls(path, group)
        self._ready: collections.deque[_Batch] = collections.deque()
        self._inflight: dict[int, _Batch] = {}
        self._seq = 0
        self._lock = threading.RLock()
        self._serving = False

    @classmethod
    def open(
        cls,
        *,
        queue: MessageQueue,
        group: str,
        topic: str,
        config: ConsumerConfig,
        clock: Clock,
        path: str | os.PathLike[str],
        send_hook: SendHook | None = None,
    ) -> ConsumerCore:
        """Build the consumer; ``start()`` it before pulling."""
        return cls(
            queue,
            group=group,
            topic=topic,
            config=config,
            clock=clock,
            path=path,
            send_hook=send_hook,
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> dict[str, int]:
        """Create the retry/dead-letter topics and the groups, read every offset from the
        store and point the pull cursor there. Returns the offsets read (-1: none)."""
        with self._lock:
            mq, pull = self._mq, pull_group(self._group)
            mq.get_latest_msg(self._topic)  # TopicNotFound if the topic is not there
            if not self._orderly:
                mq.create_topic(retry_topic(self._group))
            mq.create_topic(dlq_topic(self._group))
            offsets = {}
            for name, state in self._queues.items():
                for group in (self._group, pull):
                    if not mq.exist_consumer_group(name, group):
                        mq.create_consumer_group(name, group)
                offset = self._offsets.read(name, ReadType.STORE)
                # An id that is not retained (not issued yet, or -1) resets the cursor to
                # the earliest message; the floor drops what lies below the offset.
                mq.seek(name, pull, offset)
                state.floor = offset
                offsets[name] = offset
            self._serving = True
            return offsets

    def crash(self) -> None:
        """Stop as a killed client: memory is gone, only what was persisted stays."""
        with self._lock:
            self._serving = False
            self._offsets.crash()

    def close(self) -> None:
        """Persist what moved, then release the offset store. Twice is fine."""
        with self._lock:
            if self._serving:
                self._persist_locked()
            self._serving = False
            self._offsets.close()

    def _check(self) -> None:
        if not self._serving:
            raise NotServingError("the consumer is not started, crashed or closed")

    # ------------------------------------------------------------------ pulling

    def pull(self) -> dict[str, tuple[int, ...] | None]:
        """Pull once from every queue whose process queue is within the flow-control limits
        (``None`` for one that is not); returns the ids added."""
        with self._lock:
            self._check()
            config = self._config
            result: dict[str, tuple[int, ...] | None] = {}
            for name, state in self._queues.items():
                pq = state.pq
                if pq.count > config.max_cached_count or pq.bytes > config.max_cached_bytes:
                    result[name] = None
                    continue
                pulled = self._mq.consume(name, pull_group(self._group), config.pull_batch_size)
                added = pq.put([_cached(name, m) for m in pulled if m.msg_id >= state.floor])
                if not self._orderly:
                    step = config.consume_batch_size
                    self._ready.extend(
                        _Batch(state, added[i : i + step]) for i in range(0, len(added), step)
                    )
                result[name] = tuple(c.message.msg_id for c in added)
            return result

    # ------------------------------------------------------------------ consuming

    def next_batch(self) -> Delivery | None:
        """A batch for a free worker (concurrent: the oldest ready; orderly: the lowest ids
        of a queue no other worker holds and that is not suspended), or None."""
        with self._lock:
            self._check()
            batch = self._next_orderly() if self._orderly else self._next_ready()
            if batch is None:
                return None
            self._seq += 1
            self._inflight[self._seq] = batch
            batch.queue.inflight += 1
            name = batch.queue.name
            return Delivery(self._seq, name, tuple(_delivered(name, c) for c in batch.items))

    def _next_ready(self) -> _Batch | None:
        return self._ready.popleft() if self._ready else None

    def _next_orderly(self) -> _Batch | None:
        now = None
        for state in self._queues.values():
            if state.inflight:
                continue
            if state.suspended_until >= 0:
                now = self._clock() if now is None else now
                if now < state.suspended_until:
                    continue
            items = state.pq.take(self._config.consume_batch_size)
            if items:
                return _Batch(state, items)
        return None

    def complete(self, seq: int, result: ConsumeResult) -> Completion:
        """Apply the handler's ``result`` to batch ``seq`` (docs/CONSUMER.md)."""
        with self._lock:
            self._check()
            batch = self._inflight.get(seq)
            if batch is None:
                raise InvalidArgumentError(f"batch {seq} is not being consumed")
            if result not in RESULTS_BY_MODE[self._config.mode]:
                raise InvalidArgumentError(
                    f"{result!r} is not a result of {self._config.mode.value} consumption"
                )
            del self._inflight[seq]
            batch.queue.inflight -= 1
            if self._orderly:
                return self._complete_orderly(seq, batch, result)
            return self._complete_concurrently(seq, batch, result)

    def _complete_concurrently(self, seq: int, batch: _Batch, result: ConsumeResult) -> Completion:
        state = batch.queue
        acked: list[int] = []
        retried: list[tuple[int, int]] = []
        dead: list[tuple[int, int]] = []
        failed: list[Cached] = []
        limit = self._config.max_reconsume_times
        for item in batch.items:
            msg_id = item.message.msg_id
            if result is ConsumeResult.SUCCESS:
                acked.append(msg_id)
                continue
            to_dlq = item.reconsume_times >= limit
            new_id = self._send_back(item, to_dlq)
            if new_id is None:
                failed.append(item)
            else:
                (dead if to_dlq else retried).append((msg_id, new_id))
        done = acked + [old for old, _ in retried] + [old for old, _ in dead]
        offset = state.pq.remove(self.removable(done, failed))
        if offset >= 0:
            self._move(state, offset, increase_only=True)
        for item in failed:
            item.reconsume_times += 1
        if failed:  # retried here, after the batches already waiting
            self._ready.append(_Batch(state, failed))
        return self._completion(seq, state, acked, retried, dead, failed)

    def removable(self, done: list[int], failed: list[Cached]) -> list[int]:
        """Ids to remove from the process queue: the finished ones. A message whose
        send-back failed stays cached, so the offset cannot pass it. A hook."""
        return done

    def _complete_orderly(self, seq: int, batch: _Batch, result: ConsumeResult) -> Completion:
        state, items = batch.queue, batch.items
        acked: list[int] = []
        dead: list[tuple[int, int]] = []
        held = 0  # index of the first message put back
        if result is ConsumeResult.SUCCESS:
            acked = [c.message.msg_id for c in items]
            held = len(items)
        else:
            # Dead-letter the leading messages that used up their deliveries, in order;
            # the first one that may still be retried (or whose send fails) and everything
            # after it go back, and the queue pauses.
            for item in items:
                if item.reconsume_times < self._config.max_reconsume_times:
                    break
                new_id = self._send_back(item, True)
                if new_id is None:
                    break
                dead.append((item.message.msg_id, new_id))
                held += 1
        back = items[held:]
        for item in back:
            item.reconsume_times += 1
        state.pq.make_consume_again(back)
        if back:
            state.suspended_until = self._clock() + self._config.suspend_s
        offset = state.pq.commit()
        if offset >= 0:  # -1: nothing left in the consuming map
            self._move(state, offset, increase_only=False)
        return self._completion(seq, state, acked, [], dead, back)

    def _completion(
        self,
        seq: int,
        state: _Queue,
        acked: list[int],
        retried: list[tuple[int, int]],
        dead: list[tuple[int, int]],
        kept: list[Cached],
    ) -> Completion:
        return Completion(
            seq=seq,
            queue=state.name,
            acked=tuple(acked),
            retried=tuple(retried),
            dead=tuple(dead),
            kept=tuple(c.message.msg_id for c in kept),
            offset=self._offsets.read(state.name, ReadType.MEMORY),
        )

    def _send_back(self, item: Cached, to_dlq: bool) -> int | None:
        """Produce a copy to the retry or dead-letter topic: its id, or None if refused."""
        topic = dlq_topic(self._group) if to_dlq else retry_topic(self._group)
        message = item.message
        properties = _user_properties(message)
        properties[PROP_ORIGIN_TOPIC] = item.origin_topic
        properties[PROP_ORIGIN_ID] = str(item.origin_id)
        properties[PROP_RECONSUME_TIMES] = str(item.reconsume_times + 1)
        try:
            if self._send_hook is not None:
                self._send_hook(topic, message.msg_id)
            ids = self._mq.produce(topic, [ProducerMessage(message.payload, properties)])
        except MQError:
            return None
        return ids[0]

    def _move(self, state: _Queue, offset: int, *, increase_only: bool) -> None:
        self._offsets.update(state.name, offset, increase_only=increase_only)
        state.dirty = True

    # ------------------------------------------------------------------ persisting

    def persist(self) -> dict[str, int]:
        """Persist the offsets that moved since the last persist (one batch); move each
        one's guard group to it when that id exists. Returns the stored offsets."""
        with self._lock:
            self._check()
            return self._persist_locked()

    def _persist_locked(self) -> dict[str, int]:
        moved = [name for name, state in self._queues.items() if state.dirty]
        self._offsets.persist(moved)
        for name in moved:
            self._queues[name].dirty = False
            offset = self._offsets.read(name, ReadType.MEMORY)
            if 1 <= offset <= self._mq.get_latest_msg(name):
                self._mq.seek(name, self._group, offset)
        return self._offsets.stored(self._queues)

    def stored_offsets(self) -> dict[str, int]:
        """The offsets on disk, for this consumer's queues."""
        with self._lock:
            return self._offsets.stored(self._queues)

    @property
    def cached(self) -> dict[str, tuple[int, int]]:
        """(messages, bytes) cached per queue: what flow control looks at."""
        with self._lock:
            return {name: (s.pq.count, s.pq.bytes) for name, s in self._queues.items()}


def _user_properties(message: ConsumerMessage) -> dict[str, str]:
    return {k: v for k, v in message.properties.items() if k not in SYSTEM_PROPERTIES}


def _cached(queue: str, message: ConsumerMessage) -> Cached:
    props = message.properties
    if queue.startswith(RETRY_PREFIX) and PROP_ORIGIN_ID in props:
        return Cached(
            message,
            props[PROP_ORIGIN_TOPIC],
            int(props[PROP_ORIGIN_ID]),
            int(props[PROP_RECONSUME_TIMES]),
        )
    return Cached(message, queue, message.msg_id, 0)


def _delivered(queue: str, item: Cached) -> Delivered:
    message = item.message
    return Delivered(
        queue=queue,
        msg_id=message.msg_id,
        payload=message.payload,
        properties=_user_properties(message),
        origin_topic=item.origin_topic,
        origin_id=item.origin_id,
        reconsume_times=item.reconsume_times,
    )
