"""The push consumer as a deterministic state machine (docs/CONSUMER.md).

``PushConsumerModel`` is the oracle for ``impl.consumer``: the same steps (``start``,
``pull``, ``next_batch``, ``complete``, ``persist``) over any ``MessageQueue``, with the
durable offset store a plain dict that the caller keeps across a simulated crash. Nothing
here has threads or reads the time except through the injected clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

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
from rmqsim.model.consumer.offsets import OffsetStore
from rmqsim.model.consumer.process_queue import Entry, ProcessQueue

__all__ = ["PushConsumerModel", "SendHook", "entry_of"]

#: Called before each send-back with (target topic, message id); raising ``MQError`` makes
#: that send fail, as a queue refusing it would.
SendHook = Callable[[str, int], None]


def entry_of(queue: str, message: ConsumerMessage) -> Entry:
    """A cached entry for a pulled message: a retry-topic message carries its origin and
    reconsume count in system properties, a subscribed topic's message is its own origin."""
    props = message.properties
    if queue.startswith(RETRY_PREFIX) and PROP_ORIGIN_ID in props:
        return Entry(
            message,
            props[PROP_ORIGIN_TOPIC],
            int(props[PROP_ORIGIN_ID]),
            int(props[PROP_RECONSUME_TIMES]),
        )
    return Entry(message, queue, message.msg_id, 0)


class PushConsumerModel:
    """One group's push consumer on ``topic`` (plus its retry topic in concurrent mode)."""

    def __init__(
        self,
        queue: MessageQueue,
        *,
        group: str,
        topic: str,
        config: ConsumerConfig,
        clock: Clock,
        store: dict[str, int] | None = None,
        send_hook: SendHook | None = None,
    ) -> None:
        validate_consumer_group(group)
        validate_name("topic", topic)
        if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
            raise InvalidArgumentError(f"cannot subscribe to a retry or dead-letter topic: {topic}")
        self.queue = queue
        self.group = group
        self.topic = topic
        self.config = config
        self.clock = clock
        self.send_hook = send_hook
        self.offsets = OffsetStore(store)
        self.orderly = config.mode is ConsumeMode.ORDERLY
        self.queues: tuple[str, ...] = (topic,) if self.orderly else (topic, retry_topic(group))
        self.pqs = {q: ProcessQueue() for q in self.queues}
        self.floor = dict.fromkeys(self.queues, -1)
        self.dispatch: deque[tuple[str, list[Entry]]] = deque()
        self.inflight: dict[int, tuple[str, list[Entry]]] = {}
        self.dirty: list[str] = []
        self.suspended_until = -1
        self.seq = 0
        self.serving = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> dict[str, int]:
        """Create what is missing (retry and dead-letter topics, the guard and pull groups),
        read each queue's offset from the store and resume pulling there."""
        queue, group, pull = self.queue, self.group, pull_group(self.group)
        queue.get_latest_msg(self.topic)  # TopicNotFound for a topic that is not there
        for name in (*self.queues[1:], dlq_topic(group)):
            queue.create_topic(name)
        started = {}
        for q in self.queues:
            for g in (group, pull):
                if not queue.exist_consumer_group(q, g):
                    queue.create_consumer_group(q, g)
            offset = self.offsets.read(q, ReadType.STORE)
            queue.seek(q, pull, offset)  # not retained (or -1): from the earliest, filtered
            self.floor[q] = offset
            started[q] = offset
        self.serving = True
        return started

    def crash(self) -> None:
        """Stop as a killed client: memory is lost, the store keeps what was persisted."""
        self.serving = False

    def close(self) -> None:
        """Persist every offset, then stop."""
        if self.serving:
            self.persist()
        self.serving = False

    def _check(self) -> None:
        if not self.serving:
            raise NotServingError("the consumer is not started (or crashed, or closed)")

    # ------------------------------------------------------------------ pulling

    def pull(self) -> dict[str, tuple[int, ...] | None]:
        """One pull per queue, skipped (``None``) while its process queue is over a limit."""
        self._check()
        config, pull = self.config, pull_group(self.group)
        pulled: dict[str, tuple[int, ...] | None] = {}
        for q in self.queues:
            pq = self.pqs[q]
            if (
                pq.cached_count > config.max_cached_count
                or pq.cached_bytes > config.max_cached_bytes
            ):
                pulled[q] = None
                continue
            got = self.queue.consume(q, pull, config.pull_batch_size)
            fresh = [entry_of(q, m) for m in got if m.msg_id >= self.floor[q]]
            added = pq.put(fresh)
            if not self.orderly:
                size = config.consume_batch_size
                for i in range(0, len(added), size):
                    self.dispatch.append((q, added[i : i + size]))
            pulled[q] = tuple(e.msg_id for e in added)
        return pulled

    # ------------------------------------------------------------------ consuming

    def next_batch(self) -> Delivery | None:
        """The next batch for a free worker, or None when there is none to hand out."""
        self._check()
        if self.orderly:
            q = self.topic
            if self.inflight or self.clock() < self.suspended_until:
                return None
            entries = self.pqs[q].take(self.config.consume_batch_size)
            if not entries:
                return None
        else:
            if not self.dispatch:
                return None
            q, entries = self.dispatch.popleft()
        self.seq += 1
        self.inflight[self.seq] = (q, entries)
        return Delivery(self.seq, q, tuple(_delivered(q, e) for e in entries))

    def complete(self, seq: int, result: ConsumeResult) -> Completion:
        """Apply a handler's result to batch ``seq`` and move the offset (docs/CONSUMER.md)."""
        self._check()
        if seq not in self.inflight:
            raise InvalidArgumentError(f"no batch {seq} is being consumed")
        if result not in RESULTS_BY_MODE[self.config.mode]:
            raise InvalidArgumentError(f"{result!r} is not a {self.config.mode.value} result")
        q, entries = self.inflight.pop(seq)
        if self.orderly:
            return self._complete_orderly(seq, q, entries, result)
        return self._complete_concurrently(seq, q, entries, result)

    def _complete_concurrently(
        self, seq: int, q: str, entries: list[Entry], result: ConsumeResult
    ) -> Completion:
        acked: list[int] = []
        retried: list[tuple[int, int]] = []
        dead: list[tuple[int, int]] = []
        kept: list[Entry] = []
        for entry in entries:
            if result is ConsumeResult.SUCCESS:
                acked.append(entry.msg_id)
                continue
            to_dlq = entry.reconsume_times >= self.config.max_reconsume_times
            new_id = self._send_back(entry, dlq=to_dlq)
            if new_id is None:
                entry.reconsume_times += 1
                kept.append(entry)
            else:
                (dead if to_dlq else retried).append((entry.msg_id, new_id))
        finished = acked + [old for old, _ in retried] + [old for old, _ in dead]
        offset = self.pqs[q].remove(finished)
        if offset >= 0:
            self._update(q, offset, increase_only=True)
        if kept:
            self.dispatch.append((q, kept))
        return Completion(
            seq,
            q,
            tuple(acked),
            tuple(retried),
            tuple(dead),
            tuple(e.msg_id for e in kept),
            self.offsets.read(q, ReadType.MEMORY),
        )

    def _complete_orderly(
        self, seq: int, q: str, entries: list[Entry], result: ConsumeResult
    ) -> Completion:
        pq = self.pqs[q]
        acked: list[int] = []
        dead: list[tuple[int, int]] = []
        rest: list[Entry] = []
        if result is ConsumeResult.SUCCESS:
            acked = [e.msg_id for e in entries]
        else:
            # Dead-letter the prefix that used up its deliveries; suspend on the rest.
            for index, entry in enumerate(entries):
                if entry.reconsume_times < self.config.max_reconsume_times:
                    rest = entries[index:]
                    break
                new_id = self._send_back(entry, dlq=True)
                if new_id is None:
                    rest = entries[index:]
                    break
                dead.append((entry.msg_id, new_id))
            for entry in rest:
                entry.reconsume_times += 1
            pq.make_consume_again(rest)
            if rest:
                self.suspended_until = self.clock() + self.config.suspend_s
        offset = pq.commit()  # -1 when everything was put back
        if offset >= 0:
            self._update(q, offset, increase_only=False)
        return Completion(
            seq,
            q,
            tuple(acked),
            (),
            tuple(dead),
            tuple(e.msg_id for e in rest),
            self.offsets.read(q, ReadType.MEMORY),
        )

    def _send_back(self, entry: Entry, *, dlq: bool) -> int | None:
        """Produce a copy of ``entry`` to the retry (or dead-letter) topic; its new id, or
        None when the queue refused it."""
        target = dlq_topic(self.group) if dlq else retry_topic(self.group)
        message = entry.message
        properties = {k: v for k, v in message.properties.items() if k not in SYSTEM_PROPERTIES}
        properties[PROP_ORIGIN_TOPIC] = entry.origin_topic
        properties[PROP_ORIGIN_ID] = str(entry.origin_id)
        properties[PROP_RECONSUME_TIMES] = str(entry.reconsume_times + 1)
        try:
            if self.send_hook is not None:
                self.send_hook(target, entry.msg_id)
            (new_id,) = self.queue.produce(target, [ProducerMessage(message.payload, properties)])
        except MQError:
            return None
        return new_id

    def _update(self, q: str, offset: int, *, increase_only: bool) -> None:
        self.offsets.update(q, offset, increase_only=increase_only)
        if q not in self.dirty:
            self.dirty.append(q)

    # ------------------------------------------------------------------ persisting

    def persist(self) -> dict[str, int]:
        """Persist the offsets that moved since the last persist; move the guard group of
        each to its offset when that id exists, so retention keeps what is not finished.
        Returns the stored offsets."""
        self._check()
        changed = [q for q in self.queues if q in self.dirty]
        self.offsets.persist(changed)
        for q in changed:
            offset = self.offsets.read(q, ReadType.MEMORY)
            if 1 <= offset <= self.queue.get_latest_msg(q):
                self.queue.seek(q, self.group, offset)
        self.dirty = []
        return self.stored_offsets()

    def stored_offsets(self) -> dict[str, int]:
        """The durable offsets of this consumer's queues (absent ones left out)."""
        store = self.offsets.store
        return {q: store[q] for q in self.queues if q in store}


def _delivered(queue: str, entry: Entry) -> Delivered:
    message = entry.message
    properties = {k: v for k, v in message.properties.items() if k not in SYSTEM_PROPERTIES}
    return Delivered(
        queue,
        message.msg_id,
        message.payload,
        properties,
        entry.origin_topic,
        entry.origin_id,
        entry.reconsume_times,
    )
