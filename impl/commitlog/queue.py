"""``CommitLogMQ``: the queue of SPEC.md on a commit log and consume queues.

Each writing operation: check serving, validate, take the queue's lock, check topic and
group, compute its *events* (message records and control records), call the fault hook
(``<op>.before_write``), append them to the log as one batch (the last record carries the
batch-end flag), flush as the mode says, call the hook (``<op>.after_write``), and only
then apply the same events to the in-memory metadata and dispatch the messages to the
consume queues. Recovery applies the same events read back from the log, so an operation
is in the recovered state exactly when its batch is whole in the log.

Flush modes: ``sync`` syncs the log before an operation returns (and before its
``after_write`` point); ``async`` returns once the bytes are in the OS and syncs when at
least ``flush_least_pages`` pages (4 KiB) are dirty or ``flush_thorough_interval_s`` of
the injected clock passed since the last flush (RocketMQ's defaults: 4 pages, 10 s), so a
run is deterministic; ``background_flush_interval_s`` adds a real flusher thread.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NoReturn, TypeVar

from rmqsim.impl.commitlog import records
from rmqsim.impl.commitlog.cq import ConsumeQueue
from rmqsim.impl.commitlog.fs import FileSystem, OsFileSystem
from rmqsim.impl.commitlog.log import PendingRecord
from rmqsim.impl.commitlog.recovery import (
    DEFAULT_GEOMETRY,
    Geometry,
    OpenStore,
    RecoveryHooks,
    open_store,
    write_checkpoint,
)
from rmqsim.impl.commitlog.state import (
    TopicMeta,
    apply_event,
    apply_message_run,
    apply_messages,
    page_closings,
)
from rmqsim.impl.errors import CorruptDatabaseError, StorageError
from rmqsim.impl.faults import FaultHook, write_points
from rmqsim.impl.lifecycle import CLOSED, CRASHED, FAILED, SERVING, check_serving
from rmqsim.impl.retention import pages_to_delete
from rmqsim.model.api import (
    Clock,
    ConsumerMessage,
    GroupExistsError,
    GroupNotFoundError,
    InvalidArgumentError,
    MQConfig,
    NotServingError,
    ProducerMessage,
    State,
    TopicNotFoundError,
    TopicState,
    validate_count,
    validate_messages,
    validate_msg_id,
    validate_name,
)

__all__ = ["FLUSH_MODES", "PAGE_SIZE_BYTES", "CommitLogMQ", "FlushPolicy"]

FLUSH_MODES = ("sync", "async")
#: The OS page, the unit of RocketMQ's ``flushCommitLogLeastPages``.
PAGE_SIZE_BYTES = 4096
_DEFAULT_CONFIG = MQConfig()
_T = TypeVar("_T")
_PAYLOAD = operator.attrgetter("payload")
_PROPERTIES = operator.attrgetter("properties")
#: A control record's JSON: ``json.dumps(event, sort_keys=True, separators=(",", ":"))``
#: and ``json.loads`` without building an encoder or detecting the encoding at every call
#: (ASCII: ``ensure_ascii``).
_EVENT_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_EVENT_DECODER = json.JSONDecoder()
_SIZE = operator.itemgetter(1)  # of a consume-queue entry
_MSG_ID = operator.itemgetter(2)  # of a consume-queue entry


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """When the log is synced (module docstring)."""

    mode: str = "sync"
    flush_least_pages: int = 4
    flush_thorough_interval_s: int = 10
    background_flush_interval_s: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in FLUSH_MODES:
            raise InvalidArgumentError(f"flush mode must be one of {FLUSH_MODES}: {self.mode!r}")
        interval = self.background_flush_interval_s
        if interval is not None and not (isinstance(interval, (int, float)) and
                                         math.isfinite(interval) and interval > 0):
            raise InvalidArgumentError(f"background_flush_interval_s must be > 0: {interval!r}")


@dataclass(slots=True)
class _Run:
    """Consecutive message records of one topic incarnation, applied together."""

    incarnation: int = 0
    first_id: int = 0
    next_id: int = 0
    messages: list[tuple[int, bool, int]] = field(default_factory=list)  # size, closes, time
    entries: list[tuple[int, int, int]] = field(default_factory=list)  # consume-queue entries


def _system_clock() -> int:
    return int(time.time())


def _plain_bodies(messages: object) -> list[bytes] | None:
    """The payloads of a produce's messages when each is a ``ProducerMessage`` with a
    ``bytes`` payload and no properties, the common case, checked by passes of C functions
    over the batch (what ``validate_messages`` accepts). None otherwise (an empty batch,
    or one to check message by message: ``validate_messages`` then decides)."""
    if (type(messages) is not list and type(messages) is not tuple) or not messages:
        return None
    if set(map(type, messages)) != {ProducerMessage}:
        return None
    properties = list(map(_PROPERTIES, messages))
    if set(map(type, properties)) != {dict} or any(properties):
        return None
    bodies = list(map(_PAYLOAD, messages))
    return bodies if set(map(type, bodies)) == {bytes} else None


class CommitLogMQ:
    """SPEC.md's ``MessageQueue`` on files, plus ``close()``, ``crash()`` and ``flush()``.
    Make one with ``CommitLogMQ.open(path, ...)``."""

    def __init__(
        self, store: OpenStore, config: MQConfig, clock: Clock, faults: FaultHook | None,
        policy: FlushPolicy,
    ) -> None:  # fmt: skip
        """Private: use ``CommitLogMQ.open``."""
        self._store = store
        self._config = config
        self._clock = clock
        self._faults = faults
        self._policy = policy
        self._state = SERVING
        self._lock = threading.RLock()
        self._last_flush_s: int | None = None
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: MQConfig = _DEFAULT_CONFIG,
        clock: Clock | None = None,
        faults: FaultHook | None = None,
        *,
        policy: FlushPolicy | None = None,
        fs: FileSystem | None = None,
        geometry: Geometry | None = None,
        hooks: RecoveryHooks | None = None,
    ) -> CommitLogMQ:
        """Open (create or recover) the store at directory ``path``. ``fs``: the file
        system (default the OS); ``geometry``: file sizes of a new store (default
        ``DEFAULT_GEOMETRY``: 16 MiB segments); ``hooks``:
        recovery's extension points (``RecoveryHooks``; default the correct ones)."""
        if not isinstance(config, MQConfig):
            raise InvalidArgumentError(f"config must be an MQConfig, got {type(config).__name__}")
        policy = policy or FlushPolicy()
        store = open_store(fs or OsFileSystem(), os.fspath(path), geometry or DEFAULT_GEOMETRY,
                           faults, hooks)
        mq = cls(store, config, clock or _system_clock, faults, policy)
        if policy.background_flush_interval_s is not None:
            mq._start_flusher(float(policy.background_flush_interval_s))
        return mq

    @property
    def recovery_report(self) -> tuple[str, ...]:
        """What the last open found wrong and dropped or repaired (empty when clean)."""
        return tuple(self._store.report)

    @property
    def path(self) -> str:
        return self._store.root

    # ----------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Stop serving, sync everything, remove the abort marker. Twice is fine."""
        self._stop_flusher(join=True)
        with self._lock:
            if self._state in (CLOSED, CRASHED):
                return
            self._state = CLOSED
            self._fault("close.before_flush")
            store = self._store
            try:
                self._sync_all()
                store.fs.remove(f"{store.root}/abort")
                store.fs.sync_dir(store.root)
            except OSError as exc:
                store.release()
                raise StorageError(
                    f"close of {self.path} failed ({exc}); the store is recovered when it is "
                    "reopened"
                ) from exc
            self._fault("close.after_flush")
            store.release()

    def crash(self) -> None:
        """Stop as a killed process would: close every handle, sync and write nothing."""
        self._stop_flusher(join=False)
        if self._state == CRASHED:
            return
        self._state = CRASHED
        self._store.release()

    def flush(self) -> None:
        """Sync the log and the consume queues now."""
        with self._lock:
            self._check_serving()
            try:
                self._sync_all()
            except OSError as exc:
                self._io_failed("flush", exc)

    def _sync_all(self) -> None:
        self._store.log.flush()
        for queue in self._store.cqs.values():
            queue.flush()

    # ----------------------------------------------------------------------- topics

    def create_topic(self, topic: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        with self._lock:
            self._check_serving()
            if topic in self._store.meta.topics:
                return
            inc = self._store.meta.next_incarnation
            self._commit("create_topic", [], {"op": "create_topic", "name": topic, "inc": inc})

    def destroy_topic(self, topic: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        with self._lock:
            cached = self._topic(topic)
            self._commit("destroy_topic", [], {"op": "destroy_topic", "inc": cached.incarnation})
            queue = self._store.cqs.pop(cached.incarnation, None)
            try:
                if queue is not None:
                    queue.destroy()
                self._reclaim()
            except OSError as exc:
                self._io_failed("destroy_topic", exc)

    # ----------------------------------------------------------------------- groups

    def create_consumer_group(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._lock:
            cached = self._topic(topic)
            if group in cached.groups:
                raise GroupExistsError(f"group {group!r} already exists on topic {topic!r}")
            event = {"op": "create_group", "inc": cached.incarnation, "group": group}
            self._commit("create_consumer_group", [], event)

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._lock:
            cached = self._topic(topic)
            if group not in cached.groups:
                return
            remaining = {name: pos for name, pos in cached.groups.items() if name != group}
            event = {"op": "destroy_group", "inc": cached.incarnation, "group": group}
            self._commit("destroy_consumer_group", [], self._with_acks(cached, remaining, event))

    def exist_consumer_group(self, topic: str, group: str) -> bool:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._lock:
            cached = self._store.meta.topics.get(topic)
            return cached is not None and group in cached.groups

    # ----------------------------------------------------------------------- messages

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        self._check_serving()
        validate_name("topic", topic)
        bodies = _plain_bodies(messages)
        batch = validate_messages(messages) if bodies is None else list(messages)
        with self._lock:
            cached = self._topic(topic)
            if not batch:
                return []
            now = self._now()
            if bodies is not None:
                self._produce_plain(cached, topic, bodies, now)
                return list(range(cached.last_id - len(bodies) + 1, cached.last_id + 1))
            topic_bytes = topic.encode()
            pending: list[PendingRecord] = []
            open_bytes = cached.open_page_bytes
            page_size = self._config.page_size_bytes
            inc = cached.incarnation
            encode = records.encode_properties
            for msg_id, message in enumerate(batch, start=cached.last_id + 1):
                payload = bytes(message.payload)
                closes = open_bytes + len(payload) > page_size
                open_bytes = 0 if closes else open_bytes + len(payload)
                properties = encode(message.properties) if message.properties else b""
                pending.append(PendingRecord(records.FLAG_PAGE_CLOSE if closes else 0, msg_id,
                                             now, inc, topic_bytes, properties, payload))
            self._commit("produce", pending, None, now)
            return list(range(cached.last_id - len(batch) + 1, cached.last_id + 1))

    def _produce_plain(self, cached: TopicMeta, topic: str, bodies: list[bytes], now: int
                       ) -> None:
        """``produce`` of messages without properties as run records (``records.
        encode_run``: one header and CRC per run), each step done for the whole batch
        (``page_closings``, ``apply_message_run``, one consume-queue write)."""
        log, topic_bytes = self._store.log, topic.encode()
        lengths = list(map(len, bodies))
        closing = page_closings(cached.open_page_bytes, lengths, self._config.page_size_bytes)
        closes = bytearray(len(bodies))
        for index in closing:
            closes[index] = 1
        first_id, inc = cached.last_id + 1, cached.incarnation

        def encode(position: int, start: int, end: int) -> list[bytes]:
            flags = records.FLAG_BATCH_END if end == len(bodies) else 0
            return records.encode_run(position, flags, first_id + start, now, inc, topic_bytes,
                                      bodies[start:end], bytes(closes[start:end]))

        costs = list(map(records.RUN_PER_MESSAGE_BYTES.__add__, lengths))
        overhead = records.RUN_HEADER_SIZE_BYTES + len(topic_bytes)
        runs, rolled = self._written("produce", lambda: log.append_grouped(
            costs, overhead, records.RUN_BODIES_MAX_BYTES, encode))
        applied = apply_message_run(self._store.meta, inc, first_id, lengths, closing, now)
        assert applied is cached, (applied, cached)
        spans = [(offset, size, first_id + start, end - start) for offset, size, start, end in runs]
        try:  # the batch is in the log: a failure from here on stops the queue (_io_failed)
            self._store.cq(inc).put_spans(cached.cq_index(first_id), spans)
            self._after_write(rolled)
        except OSError as exc:
            self._io_failed("produce", exc)

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        validate_count(n)
        with self._lock:
            cached = self._topic(topic)
            position = cached.groups.get(group)
            if position is None:
                raise GroupNotFoundError(f"group {group!r} does not exist on topic {topic!r}")
            first_id = max(position, cached.trim_id + 1)
            last_id = min(cached.last_id, first_id + n - 1)
            if n == 0 or first_id > last_id:
                return []
            result = self._read(cached, first_id, last_id)
            self._move(cached, "consume", group, last_id + 1)
            return result

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        validate_msg_id(msg_id)
        with self._lock:
            cached = self._group_topic(topic, group)
            retained = cached.trim_id < msg_id <= cached.last_id
            self._move(cached, "seek", group, msg_id if retained else -1)

    def seek_to_latest(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._lock:
            cached = self._group_topic(topic, group)
            latest = cached.latest_retained()
            self._move(cached, "seek_to_latest", group, latest + 1 if latest != -1 else 0)

    def get_latest_msg(self, topic: str) -> int:
        self._check_serving()
        validate_name("topic", topic)
        with self._lock:
            return self._topic(topic).latest_retained()

    # ----------------------------------------------------------------------- retention

    def run_retention(self) -> None:
        """One retention pass over every topic, written as one control record."""
        self._check_serving()
        with self._lock:
            self._check_serving()
            trims: list[list[int]] = []
            now_value: list[int] = []

            def now() -> int:
                if not now_value:
                    now_value.append(self._now())
                return now_value[0]

            for cached in sorted(self._store.meta.topics.values(), key=lambda t: t.incarnation):
                count = pages_to_delete(
                    cached.pages[: cached.acked_count],
                    retention_time_s=self._config.retention_time_s,
                    retention_size_bytes=self._config.retention_size_bytes,
                    now=now,
                )
                if count:
                    trims.append([cached.incarnation, cached.pages[count - 1].end_id])
            if not trims:
                return
            self._commit("retention", [], {"op": "retention", "trims": trims})
            try:
                self._reclaim()
            except OSError as exc:
                self._io_failed("retention", exc)

    # ----------------------------------------------------------------------- state

    def snapshot(
        self, topics: Iterable[str] | None = None, messages_from: Mapping[str, int] | None = None
    ) -> State:
        """The logical state; messages are read back from the log through the consume
        queues. ``topics`` and ``messages_from`` restrict it (as ``impl.RocksMQ``)."""
        self._check_serving()
        with self._lock:
            self._check_serving()
            meta = self._store.meta
            names = sorted(meta.topics) if topics is None else list(topics)
            result: dict[str, TopicState] = {}
            groups: dict[tuple[str, str], int] = {}
            for name in names:
                cached = meta.topics.get(name) if isinstance(name, str) else None
                if cached is None:
                    continue
                first = max(cached.trim_id + 1, (messages_from or {}).get(name, 0))
                messages = self._read(cached, first, cached.last_id)
                result[name] = TopicState(tuple(messages), tuple(cached.pages),
                                          cached.open_page_bytes, cached.last_id)
                for group, position in cached.groups.items():
                    groups[(name, group)] = position
            return State.build(result, groups)

    # ----------------------------------------------------------------------- store level

    def bounds(self, topic: str) -> tuple[int, int] | None:
        """``(trim_id, last_id)`` of ``topic`` (its retained ids are ``trim_id + 1 ..
        last_id``), or None when it does not exist: the storage contract's offsets
        (``impl.store.commitlog``)."""
        self._check_serving()
        validate_name("topic", topic)
        with self._lock:
            cached = self._store.meta.topics.get(topic)
            return None if cached is None else (cached.trim_id, cached.last_id)

    def read(self, topic: str, first_id: int, n: int) -> list[ConsumerMessage]:
        """Up to ``n`` retained messages of ``topic`` from ``first_id`` on, read without a
        group (nothing is written); ``[]`` when ``first_id`` is not retained."""
        self._check_serving()
        validate_name("topic", topic)
        validate_count(n)
        with self._lock:
            cached = self._topic(topic)
            if not cached.trim_id < first_id <= cached.last_id or n == 0:
                return []
            return self._read(cached, first_id, min(cached.last_id, first_id + n - 1))

    def expire(self, cutoff_s: int) -> None:
        """Retention by age, the storage contract's: in every topic, the messages stored
        (the clock's seconds) before ``cutoff_s``, up to the first stored at or after it,
        are deleted, as one retention record; then the segments only they held go."""
        self._check_serving()
        with self._lock:
            self._check_serving()
            trims: list[list[int]] = []
            for cached in sorted(self._store.meta.topics.values(), key=lambda t: t.incarnation):
                trim_id = cached.trim_id
                for record in self._records(cached, cached.trim_id + 1, cached.last_id):
                    if record.store_time >= cutoff_s:
                        break
                    trim_id = record.queue_offset
                if trim_id > cached.trim_id:
                    trims.append([cached.incarnation, trim_id])
            if not trims:
                return
            self._commit("retention", [], {"op": "retention", "trims": trims})
            try:
                self._reclaim()
            except OSError as exc:
                self._io_failed("retention", exc)

    # ----------------------------------------------------------------------- internals

    def _check_serving(self) -> None:
        check_serving(self._state)

    def _topic(self, name: str) -> TopicMeta:
        self._check_serving()
        cached = self._store.meta.topics.get(name)
        if cached is None:
            raise TopicNotFoundError(f"topic {name!r} does not exist")
        return cached

    def _group_topic(self, name: str, group: str) -> TopicMeta:
        cached = self._topic(name)
        if group not in cached.groups:
            raise GroupNotFoundError(f"group {group!r} does not exist on topic {name!r}")
        return cached

    def _now(self) -> int:
        value = self._clock()
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"the clock must return int seconds, got {type(value).__name__}")
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"the clock returned {value}, outside the i64 range")
        return value

    def _fault(self, point: str) -> None:
        if self._faults is None:
            return
        try:
            self._faults(point)
        except BaseException:
            if self._state == SERVING:
                self._state = FAILED
            raise

    def _with_acks(self, cached: TopicMeta, groups: dict[str, int], event: dict[str, Any]
                   ) -> dict[str, Any]:
        """``event`` plus the pages these ``groups`` ack (SPEC "Acks": every position >
        end_id, at least one group) and the time, read only if a page is acked."""
        ack_end_id = None
        if groups and cached.acked_count < len(cached.pages):
            lowest = min(groups.values())
            for page in cached.pages[cached.acked_count :]:
                if page.end_id >= lowest:
                    break
                ack_end_id = page.end_id
        return {**event, "ack_end_id": ack_end_id,
                "ts": self._now() if ack_end_id is not None else 0}

    def _move(self, cached: TopicMeta, operation: str, group: str, position: int) -> None:
        after = dict(cached.groups)
        after[group] = position
        event = {"op": "move", "inc": cached.incarnation, "group": group, "position": position}
        self._commit(operation, [], self._with_acks(cached, after, event))

    def _commit(
        self, operation: str, pending: list[PendingRecord], event: dict[str, Any] | None,
        now: int = 0,
    ) -> None:  # fmt: skip
        """Write one operation's records as one batch, then apply them (module docstring)."""
        batch = list(pending)
        if event is not None:
            body = _EVENT_ENCODER.encode(event).encode()
            batch.append(PendingRecord(records.FLAG_CONTROL, 0, now, event.get("inc", 0), b"",
                                       b"", body))
        last = batch[-1]
        batch[-1] = PendingRecord(last.flags | records.FLAG_BATCH_END, last.queue_offset,
                                  last.store_time, last.incarnation, last.topic,
                                  last.properties, last.body)
        log = self._store.log
        placed, rolled = self._written(operation, lambda: log.append(batch))
        try:  # the batch is in the log: a failure from here on stops the queue (_io_failed)
            self._apply(batch, placed)
            self._after_write(rolled)
        except OSError as exc:
            self._io_failed(operation, exc)

    def _written(self, operation: str, append: Callable[[], _T]) -> tuple[_T, bool]:
        """``append`` one operation's batch to the log between its fault points, synced
        as the mode says: its result, and whether it started a segment."""
        log = self._store.log
        segments_before = len(log.segments)
        before, after = write_points(operation)
        self._fault(before)
        try:
            result = append()
            if self._policy.mode == "sync":
                log.flush()
        except OSError as exc:
            self._io_failed(operation, exc)
        self._fault(after)
        return result, len(log.segments) != segments_before

    def _io_failed(self, operation: str, exc: OSError) -> NoReturn:
        """A failed write or sync is never swallowed (RocketMQ #2706, #9713): the queue
        stops serving, since what is on disk is unknown; reopening recovers."""
        self._state = FAILED
        raise StorageError(
            f"{operation} on {self.path} failed ({exc}); the queue stopped serving: "
            "crash() or close() it and reopen the store to recover"
        ) from exc

    def _apply(self, batch: list[PendingRecord], placed: list[tuple[int, int]]) -> None:
        """Apply the written records (the same functions recovery replays) and dispatch:
        consecutive messages of one topic as one run (one ``apply_messages``, one write of
        their consume-queue entries)."""
        meta = self._store.meta
        run = _Run()
        for (flags, msg_id, store_time, inc, _topic, _props, body), (offset, size) in zip(
            batch, placed, strict=True
        ):
            if flags & records.FLAG_CONTROL:
                self._apply_run(run)
                run = _Run()
                apply_event(meta, _EVENT_DECODER.decode(body.decode()))  # ASCII JSON
                continue
            if run.messages and (inc != run.incarnation or msg_id != run.next_id):
                self._apply_run(run)
                run = _Run()
            if not run.messages:
                run.incarnation, run.first_id = inc, msg_id
            run.messages.append((len(body), bool(flags & records.FLAG_PAGE_CLOSE), store_time))
            run.entries.append((offset, size, msg_id))
            run.next_id = msg_id + 1
        self._apply_run(run)

    def _apply_run(self, run: _Run) -> None:
        if not run.messages:
            return
        topic = apply_messages(self._store.meta, run.incarnation, run.first_id, run.messages)
        assert topic is not None
        self._store.cq(run.incarnation).put_run(topic.cq_index(run.first_id), run.entries)

    def _after_write(self, rolled: bool) -> None:
        """Async flush policy, and a checkpoint when a new segment was started."""
        log = self._store.log
        if self._policy.mode == "async" and log.dirty_bytes:
            now = self._now()
            if self._last_flush_s is None:
                self._last_flush_s = now
            due = now - self._last_flush_s >= self._policy.flush_thorough_interval_s
            if due or log.dirty_bytes >= self._policy.flush_least_pages * PAGE_SIZE_BYTES:
                try:
                    log.flush()
                except OSError as exc:
                    self._io_failed("flush", exc)
                self._last_flush_s = now
        if rolled:
            self._reclaim(force_checkpoint=True)

    def _reclaim(self, *, force_checkpoint: bool = False) -> None:
        """Checkpoint, then remove log segments and consume-queue files that hold nothing
        live: every segment below the oldest retained message of every topic."""
        store = self._store
        live = [t for t in store.meta.topics.values() if t.last_id > t.trim_id]
        oldest = store.log.end_offset
        for topic in live:
            entry = store.cq(topic.incarnation).get(topic.cq_index(topic.trim_id + 1), 1)[0]
            if entry is None:
                raise CorruptDatabaseError(
                    f"{store.cq(topic.incarnation).directory}: no entry for id {topic.trim_id + 1}"
                )
            oldest = min(oldest, entry.offset)
        reclaimable = len(store.log.segments) > 1 and store.log.segments[0].end <= oldest
        if not (reclaimable or force_checkpoint):
            return
        write_checkpoint(store)
        store.log.reclaim(oldest)
        for topic in store.meta.topics.values():
            store.cq(topic.incarnation).reclaim(topic.cq_index(topic.trim_id + 1))
        store.log.flush()

    def _read(self, cached: TopicMeta, first_id: int, last_id: int) -> list[ConsumerMessage]:
        """Messages ``first_id..last_id`` through the consume queue, each record checked
        (as ``_records``: every entry that id's, each record valid, CRC once per run, a
        message of this incarnation with that id), built straight from the bodies read. A
        read the OS refuses (``EIO``) is a ``StorageError``; the queue goes on serving
        (nothing was written)."""
        if first_id > last_id:
            return []
        queue = self._store.cq(cached.incarnation)
        places = self._places(queue, cached, first_id, last_id)
        try:
            found = self._store.log.read_bodies(places)
        except OSError as exc:
            raise StorageError(f"reading {self._store.log.directory} failed ({exc})") from exc
        result: list[ConsumerMessage] = []
        at = 0  # the index in places of the record's first message
        for got in found:
            if (got.is_control or got.incarnation != cached.incarnation
                    or got.ids.start != first_id + at):
                raise CorruptDatabaseError(
                    f"{queue.directory}: the entry of id {first_id + at} points at another "
                    f"record (offset {places[at][0]})"
                )
            if got.properties is None:
                result += map(ConsumerMessage, got.ids, got.bodies, map(dict, repeat((),
                                                                                 len(got.ids))))
            else:
                result += map(ConsumerMessage, got.ids, got.bodies,
                              map(self._properties(queue), got.ids, got.properties))
            at += len(got.ids)
        return result

    @staticmethod
    def _properties(queue: ConsumeQueue) -> Callable[[int, bytes], dict[str, str]]:
        """Decodes one message's properties block, a damaged one refused naming its id."""
        def decode(msg_id: int, data: bytes) -> dict[str, str]:
            try:
                return records.decode_properties(data)
            except records.RecordError as exc:
                raise CorruptDatabaseError(f"{queue.directory}: id {msg_id}: {exc}") from None
        return decode

    @staticmethod
    def _places(queue: ConsumeQueue, cached: TopicMeta, first_id: int, last_id: int
                ) -> list[tuple[int, int, int]]:
        """The consume-queue entries of ids ``first_id..last_id``, checked to be there
        and to be those ids' (compared in C); ``CorruptDatabaseError`` naming the first
        id that has none, ``StorageError`` when the OS refuses the read."""
        try:
            places = queue.places(cached.cq_index(first_id), last_id - first_id + 1)
        except OSError as exc:
            raise StorageError(f"reading {queue.directory} failed ({exc})") from exc
        ids = list(map(_MSG_ID, places))
        if ids != list(range(first_id, last_id + 1)) or not all(map(_SIZE, places)):
            wrong = next(at for at, (_offset, size, msg_id) in enumerate(places)
                         if not size or msg_id != first_id + at)
            raise CorruptDatabaseError(f"{queue.directory}: no entry for id {first_id + wrong}")
        return places

    def _records(self, cached: TopicMeta, first_id: int, last_id: int) -> list[records.Record]:
        """The records of ids ``first_id..last_id`` through the consume queue, each checked
        to be that id's message (``_read``)."""
        if first_id > last_id:
            return []
        queue = self._store.cq(cached.incarnation)
        places = self._places(queue, cached, first_id, last_id)
        try:
            found = self._store.log.read_messages(places)
        except OSError as exc:
            raise StorageError(f"reading {self._store.log.directory} failed ({exc})") from exc
        for msg_id, (offset, _size, _id), record in zip(itertools.count(first_id), places, found,
                                                        strict=False):
            if (record.is_control or record.incarnation != cached.incarnation
                    or record.queue_offset != msg_id):
                raise CorruptDatabaseError(
                    f"{queue.directory}: the entry of id {msg_id} points at another record "
                    f"(offset {offset})"
                )
        return list(found)

    # ----------------------------------------------------------------------- flusher

    def _start_flusher(self, interval_s: float) -> None:
        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.flush()
                except NotServingError:
                    return

        self._flusher = threading.Thread(target=loop, name=f"rmqsim-flush:{self.path}",
                                         daemon=True)
        self._flusher.start()

    def _stop_flusher(self, *, join: bool) -> None:
        self._stop.set()
        flusher = self._flusher
        if join and flusher is not None and flusher is not threading.current_thread():
            flusher.join(30.0)
