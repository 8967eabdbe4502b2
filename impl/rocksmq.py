"""``RocksMQ``: the queue of SPEC.md on one RocksDB database.

Each operation: check serving, validate arguments, take the topic's lock, check the topic
and group, compute the *whole* effect as a ``Plan`` (plain bytes), call the fault hook,
write the plan as one ``WriteBatch``, call the fault hook, and only then update the
in-memory caches. So an operation that raises (bad argument, missing topic, I/O error,
fault hook) changes nothing on disk, and what is on disk is always the state before or
after an operation.

Memory holds caches only, rebuilt from disk on open: per topic its incarnation, id
high-water mark, trim id (every id in ``(trim_id, last_id]`` is retained, nothing else),
open page bytes, closed pages with the count of acked ones (a prefix), and group positions.
``consume`` reads one bounded range of message keys; ``seek``, ``seek_to_latest`` and
``get_latest_msg`` read nothing (the retained range is ``(trim_id, last_id]``).

Locks: one per topic (every operation on a topic holds it, as Go RocksMQ's per-topic
locks), plus a table lock for creating topics. A thread that holds a topic lock never
waits for the table lock; ``run_retention``, ``snapshot`` and ``close`` take the table lock
and then every topic lock in incarnation order. RocksDB itself is thread-safe.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import ClassVar

from rmqsim.impl import codec, keys
from rmqsim.impl.errors import CorruptDatabaseError
from rmqsim.impl.faults import FaultHook, write_points
from rmqsim.impl.lifecycle import CLOSED, CRASHED, FAILED, SERVING, check_serving
from rmqsim.impl.loader import DiskState, DiskTopic, read_database, read_topic
from rmqsim.impl.retention import pages_to_delete
from rmqsim.impl.storage import Plan, Store
from rmqsim.model.api import (
    Clock,
    ConsumerMessage,
    GroupExistsError,
    GroupNotFoundError,
    InvalidArgumentError,
    MQConfig,
    NotServingError,
    Page,
    ProducerMessage,
    State,
    TopicNotFoundError,
    TopicState,
    validate_count,
    validate_messages,
    validate_msg_id,
    validate_name,
)

__all__ = ["CachedTopic", "LazyNow", "RocksMQ"]

_log = logging.getLogger(__name__)

_DEFAULT_CONFIG = MQConfig()
#: Timestamps are stored as i64.
_TIMESTAMP_MIN = -(2**63)
_TIMESTAMP_MAX = 2**63 - 1
#: How long ``close`` waits for the background retention thread to finish a pass.
_RETENTION_JOIN_TIMEOUT_S = 30.0


def _system_clock() -> int:
    """The default clock: whole seconds of the wall clock."""
    return int(time.time())


class LazyNow:
    """Reads the clock at most once per operation, and only if a timestamp is needed: the
    ``now`` of ``RocksMQ``'s hooks."""

    __slots__ = ("_clock", "_value")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._value: int | None = None

    def __call__(self) -> int:
        if self._value is None:
            value = self._clock()
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"the clock must return int seconds, got {type(value).__name__}")
            if not _TIMESTAMP_MIN <= value <= _TIMESTAMP_MAX:
                raise ValueError(f"the clock returned {value}, outside the i64 range")
            self._value = value
        return self._value


@dataclass(slots=True, eq=False)
class CachedTopic:
    """The cache of one live topic (rebuilt from disk on open): what ``RocksMQ``'s hooks
    receive as ``cached``."""

    name: str
    incarnation: int
    last_id: int  # the name's id high-water mark
    trim_id: int  # ids <= trim_id are not retained
    open_page_bytes: int
    pages: list[Page]  # closed, retained, in id order
    acked_count: int  # pages[:acked_count] are acked
    groups: dict[str, int]  # group -> position
    topic_key: bytes
    hwm_key: bytes
    lock: threading.Lock = field(default_factory=threading.Lock)
    alive: bool = True

    def record(self, *, open_page_bytes: int, trim_id: int) -> bytes:
        return codec.encode_topic(codec.TopicRecord(self.incarnation, open_page_bytes, trim_id))

    def latest_retained(self) -> int:
        """The highest retained id, or -1."""
        return self.last_id if self.last_id > self.trim_id else -1


class _Held:
    """A topic whose lock is held, released on leaving the ``with`` block. A class, not a
    ``@contextmanager`` generator: every operation takes one, and a generator costs
    ≈0.8 µs more per operation (1.22 vs 0.44 µs, measured)."""

    __slots__ = ("_cached",)

    def __init__(self, cached: CachedTopic) -> None:
        self._cached = cached

    def __enter__(self) -> CachedTopic:
        return self._cached

    def __exit__(self, *_exc: object) -> None:
        self._cached.lock.release()


class RocksMQ:
    """SPEC.md's ``MessageQueue`` on RocksDB, plus ``close()`` and ``crash()``.

    Make one with ``RocksMQ.open(path, ...)``.

    Hooks a subclass may override (the seams of variants, such as the harness's seeded
    bugs in ``conformance.mutants``):

    - ``store_class``, ``unlogged_operations``: the storage and which batches skip the WAL;
    - ``write_plan(operation, plan)``: write one operation's batch between its crash points;
    - ``retention_count(cached, now)``: how many of a topic's oldest pages a pass deletes;
    - ``move_group(cached, operation, group, position)``: set a group's position (and ack);
    - ``plan_acks(cached, groups, plan, now)``: the pages these positions make acked;
    - ``ack_floor(topic, positions)``: below which id every group has read.

    ``cached`` is the topic's ``CachedTopic``, ``now`` a ``LazyNow``; ``group_positions``
    and ``retention_passes`` are introspection for them.
    """

    #: The storage class ``open`` uses (a seam for variants, e.g. another key layout).
    store_class: ClassVar[type[Store]] = Store
    #: Operations whose batches are written without the write-ahead log (``Store.write``'s
    #: ``logged=False``). Empty: every write of rmqsim is logged. A seam for variants.
    unlogged_operations: ClassVar[frozenset[str]] = frozenset()

    # ----------------------------------------------------------------------- lifecycle

    def __init__(
        self,
        store: Store,
        disk: DiskState,
        *,
        config: MQConfig,
        clock: Clock,
        faults: FaultHook | None,
    ) -> None:
        """Private: use ``RocksMQ.open``."""
        self._store = store
        self._config = config
        self._clock = clock
        self._faults = faults
        self._state = SERVING
        self._table_lock = threading.Lock()
        self._next_incarnation = disk.next_incarnation
        self._topics: dict[str, CachedTopic] = {}
        for name, stored in disk.topics.items():
            acked = sum(1 for page in stored.pages if page.acked_ts is not None)
            self._topics[name] = CachedTopic(
                name=name,
                incarnation=stored.record.incarnation,
                last_id=stored.last_id,
                trim_id=stored.record.trim_id,
                open_page_bytes=stored.record.open_page_bytes,
                pages=list(stored.pages),
                acked_count=acked,
                groups=dict(stored.groups),
                topic_key=keys.topic_key(name),
                hwm_key=keys.hwm_key(name),
            )
        self._retention_stop = threading.Event()
        self._retention_thread: threading.Thread | None = None
        self._retention_passes = 0

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        config: MQConfig = _DEFAULT_CONFIG,
        clock: Clock | None = None,
        faults: FaultHook | None = None,
        *,
        retention_interval_s: float | None = None,
        sync_writes: bool = False,
    ) -> RocksMQ:
        """Open (or create) the queue stored at directory ``path``.

        ``clock``: int seconds, default ``int(time.time())``. ``faults``: crash-point hook
        (``impl.faults``). ``retention_interval_s``: if set, a daemon thread runs
        ``run_retention`` every that many seconds of real time (off by default; the
        simulation never uses it). ``sync_writes``: fsync every batch (power-loss safe;
        the default is process-crash safe). Raises ``impl.errors`` types for a path that
        is not an rmqsim database, is locked, or is corrupt; nothing is written then.
        """
        if not isinstance(config, MQConfig):
            raise InvalidArgumentError(f"config must be an MQConfig, got {type(config).__name__}")
        if clock is not None and not callable(clock):
            raise InvalidArgumentError("clock must be a callable returning int seconds")
        if faults is not None and not callable(faults):
            raise InvalidArgumentError("faults must be a callable taking a point name")
        if retention_interval_s is not None and not (
            isinstance(retention_interval_s, (int, float))
            and not isinstance(retention_interval_s, bool)
            and math.isfinite(retention_interval_s)
            and retention_interval_s > 0
        ):
            raise InvalidArgumentError(
                f"retention_interval_s must be a number > 0 or None, got {retention_interval_s!r}"
            )
        store = cls.store_class.open(path, sync_writes=sync_writes)
        try:
            if store.needs_init:
                plan = Plan(
                    meta_puts=[
                        (keys.FORMAT_KEY, codec.encode_format()),
                        (keys.COUNTER_KEY, codec.encode_u64(1)),
                    ]
                )
                before, after = write_points("open")
                if faults is not None:
                    faults(before)
                store.write(plan)
                if faults is not None:
                    faults(after)
            disk = read_database(store, with_messages=False)
            for topic in disk.topics.values():
                _check_message_bounds(store, topic.name, topic.record, topic.last_id)
            mq = cls(store, disk, config=config, clock=clock or _system_clock, faults=faults)
        except BaseException:
            store.crash()  # release without writing anything more
            raise
        if retention_interval_s is not None:
            mq._start_retention_thread(float(retention_interval_s))
        return mq

    @property
    def path(self) -> str:
        """The database directory."""
        return self._store.path

    @property
    def config(self) -> MQConfig:
        return self._config

    @property
    def retention_passes(self) -> int:
        """How many passes the background retention thread has completed."""
        return self._retention_passes

    def close(self) -> None:
        """Stop serving, flush and release the database. Closing twice is fine."""
        if self._state in (CLOSED, CRASHED):
            return
        self._stop_retention_thread(join=True)
        with self._all_topics_locked():
            if self._state in (CLOSED, CRASHED):
                return
            self._state = CLOSED
            self._fault("close.before_flush")
            self._store.close()
            self._fault("close.after_flush")

    def crash(self) -> None:
        """Stop as a killed process would: release every handle, write nothing more."""
        self._state = CRASHED
        self._stop_retention_thread(join=False)
        self._store.crash()

    # ----------------------------------------------------------------------- topics

    def create_topic(self, topic: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        with self._table_lock:
            self._check_serving()
            existing = self._topics.get(topic)
            if existing is not None and existing.alive:
                return
            hwm_key = keys.hwm_key(topic)
            stored_hwm = self._store.get_meta(hwm_key)
            last_id = 0 if stored_hwm is None else codec.decode_u64(stored_hwm, "high-water mark")
            incarnation = self._next_incarnation
            assert incarnation < keys.INCARNATION_MAX, "incarnation space exhausted"
            created = CachedTopic(
                name=topic,
                incarnation=incarnation,
                last_id=last_id,
                trim_id=last_id,
                open_page_bytes=0,
                pages=[],
                acked_count=0,
                groups={},
                topic_key=keys.topic_key(topic),
                hwm_key=hwm_key,
            )
            plan = Plan(
                meta_puts=[
                    (created.topic_key, created.record(open_page_bytes=0, trim_id=last_id)),
                    (keys.COUNTER_KEY, codec.encode_u64(incarnation + 1)),
                ]
            )
            self.write_plan("create_topic", plan)
            self._next_incarnation = incarnation + 1
            self._topics[topic] = created

    def destroy_topic(self, topic: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        with self._locked(topic) as cached:
            inc = cached.incarnation
            plan = Plan(
                meta_deletes=[cached.topic_key],
                msg_range_deletes=[self._store.message_keys.msg_range(inc)],
                meta_range_deletes=[keys.group_range(inc), keys.page_range(inc)],
            )
            # The name's high-water mark (``H``) stays: ids continue after re-create.
            self.write_plan("destroy_topic", plan)
            cached.alive = False
        with self._table_lock:
            if self._topics.get(topic) is cached:
                del self._topics[topic]

    # ----------------------------------------------------------------------- groups

    def create_consumer_group(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._locked(topic) as cached:
            if group in cached.groups:
                raise GroupExistsError(f"group {group!r} already exists on topic {topic!r}")
            # A new group at -1 has read nothing: it can ack nothing new (acks are kept).
            plan = Plan(
                meta_puts=[(keys.group_key(cached.incarnation, group), codec.encode_position(-1))]
            )
            self.write_plan("create_consumer_group", plan)
            cached.groups[group] = -1

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._locked(topic) as cached:
            if group not in cached.groups:
                return  # SPEC: an absent group is not an error
            remaining = {name: pos for name, pos in cached.groups.items() if name != group}
            plan = Plan(meta_deletes=[keys.group_key(cached.incarnation, group)])
            acked = self.plan_acks(cached, remaining, plan, LazyNow(self._clock))
            self.write_plan("destroy_consumer_group", plan)
            del cached.groups[group]
            self._apply_acks(cached, acked)

    def exist_consumer_group(self, topic: str, group: str) -> bool:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        cached = self._topics.get(topic)
        return cached is not None and cached.alive and group in cached.groups

    # ----------------------------------------------------------------------- messages

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        self._check_serving()
        validate_name("topic", topic)
        batch = validate_messages(messages)
        with self._locked(topic) as cached:
            if not batch:
                return []
            first_id = cached.last_id + 1
            last_id = cached.last_id + len(batch)
            if last_id > keys.MSG_ID_MAX:
                raise InvalidArgumentError(f"topic {topic!r} has no ids left below 2**63")
            inc = cached.incarnation
            page_size = self._config.page_size_bytes
            open_bytes = cached.open_page_bytes
            now = LazyNow(self._clock)
            msg_key = self._store.message_keys.msg_key
            if msg_key is keys.msg_key:  # not a variant's layout: the same keys, cheaper
                msg_key = keys.msg_key_packer
            bare = b"\x01"
            encode = codec.encode_message
            plan = Plan()
            puts = plan.msg_puts
            closed: list[Page] = []
            msg_id = first_id
            for message in batch:
                payload = message.payload
                properties = message.properties
                value = bare + payload if not properties else encode(payload, properties)
                puts.append((msg_key(inc, msg_id), value))
                size = len(payload)
                if open_bytes + size > page_size:
                    closed.append(Page(msg_id, open_bytes + size, now(), None))
                    open_bytes = 0
                else:
                    open_bytes += size
                msg_id += 1
            assert msg_id == last_id + 1
            meta = plan.meta_puts
            meta.append(
                (
                    cached.topic_key,
                    cached.record(open_page_bytes=open_bytes, trim_id=cached.trim_id),
                )
            )
            meta.append((cached.hwm_key, codec.encode_u64(last_id)))
            for page in closed:
                meta.append((keys.page_key(inc, page.end_id), codec.encode_page(page)))
            self.write_plan("produce", plan)
            cached.last_id = last_id
            cached.open_page_bytes = open_bytes
            cached.pages.extend(closed)
            return list(range(first_id, last_id + 1))

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        validate_count(n)
        with self._locked(topic) as cached:
            position = cached.groups.get(group)
            if position is None:
                raise GroupNotFoundError(f"group {group!r} does not exist on topic {topic!r}")
            first_id = max(position, cached.trim_id + 1)
            last_id = min(cached.last_id, first_id + n - 1)
            if n == 0 or first_id > last_id:
                return []
            values = self._store.read_message_values(cached.incarnation, first_id, last_id)
            if len(values) != last_id - first_id + 1:
                raise CorruptDatabaseError(
                    f"topic {topic!r} should retain ids {first_id}..{last_id}, but "
                    f"{len(values)} of them are stored"
                )
            result = _decode_messages(first_id, values)
            self.move_group(cached, "consume", group, last_id + 1)
            return result

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        validate_msg_id(msg_id)
        with self._locked(topic) as cached:
            if group not in cached.groups:
                raise GroupNotFoundError(f"group {group!r} does not exist on topic {topic!r}")
            retained = cached.trim_id < msg_id <= cached.last_id
            self.move_group(cached, "seek", group, msg_id if retained else -1)

    def seek_to_latest(self, topic: str, group: str) -> None:
        self._check_serving()
        validate_name("topic", topic)
        validate_name("group", group)
        with self._locked(topic) as cached:
            if group not in cached.groups:
                raise GroupNotFoundError(f"group {group!r} does not exist on topic {topic!r}")
            latest = cached.latest_retained()
            self.move_group(cached, "seek_to_latest", group, latest + 1 if latest != -1 else 0)

    def get_latest_msg(self, topic: str) -> int:
        self._check_serving()
        validate_name("topic", topic)
        with self._locked(topic) as cached:
            return cached.latest_retained()

    # ----------------------------------------------------------------------- retention

    def run_retention(self) -> None:
        """One retention pass over every topic, written as one batch."""
        self._check_serving()
        now = LazyNow(self._clock)
        message_keys = self._store.message_keys
        with self._all_topics_locked() as topics:
            self._check_serving()
            plan = Plan()
            trims: list[tuple[CachedTopic, int, int]] = []  # (topic, pages deleted, new trim id)
            for cached in topics:
                count = self.retention_count(cached, now)
                if count == 0:
                    continue
                trim_id = cached.pages[count - 1].end_id
                assert cached.trim_id < trim_id <= cached.last_id
                inc = cached.incarnation
                plan.msg_range_deletes.append(message_keys.msg_range(inc, 0, trim_id + 1))
                plan.meta_range_deletes.append(keys.page_range(inc, trim_id + 1))
                plan.meta_puts.append(
                    (
                        cached.topic_key,
                        cached.record(open_page_bytes=cached.open_page_bytes, trim_id=trim_id),
                    )
                )
                trims.append((cached, count, trim_id))
            if plan.is_empty():
                return
            self.write_plan("retention", plan)
            for cached, count, trim_id in trims:
                del cached.pages[:count]
                cached.acked_count = max(cached.acked_count - count, 0)
                cached.trim_id = trim_id

    def retention_count(self, cached: CachedTopic, now: LazyNow) -> int:
        """How many of the topic's closed pages, from the oldest, this pass deletes: only
        acked ones (``pages_to_delete``). A hook for variants of the retention rule."""
        config = self._config
        return pages_to_delete(
            cached.pages[: cached.acked_count],
            retention_time_s=config.retention_time_s,
            retention_size_bytes=config.retention_size_bytes,
            now=now,
        )

    def _start_retention_thread(self, interval_s: float) -> None:
        thread = threading.Thread(
            target=self._retention_loop,
            args=(interval_s,),
            name=f"rmqsim-retention:{self.path}",
            daemon=True,
        )
        self._retention_thread = thread
        thread.start()

    def _retention_loop(self, interval_s: float) -> None:
        """Background retention: a pass every ``interval_s`` of real time until stopped."""
        while not self._retention_stop.wait(interval_s):
            try:
                self.run_retention()
            except NotServingError:
                return
            except Exception:  # keep serving; the next pass retries
                if self._state != SERVING:
                    return
                _log.exception("background retention pass failed on %s", self.path)
                continue
            self._retention_passes += 1

    def _stop_retention_thread(self, *, join: bool) -> None:
        self._retention_stop.set()
        thread = self._retention_thread
        if join and thread is not None and thread is not threading.current_thread():
            thread.join(_RETENTION_JOIN_TIMEOUT_S)

    # ----------------------------------------------------------------------- state

    def snapshot(
        self,
        topics: Iterable[str] | None = None,
        messages_from: Mapping[str, int] | None = None,
    ) -> State:
        """The logical state, read from disk (not from the caches).

        Optional extensions of the protocol, so that a checker can look at only what an
        operation touched: ``topics`` restricts the state to those topics and their groups,
        and ``messages_from[t]`` lists only topic ``t``'s messages with id >= that value.
        """
        self._check_serving()
        if topics is not None:
            return self._snapshot_topics(list(topics), messages_from or {})
        with self._all_topics_locked():
            self._check_serving()
            disk = read_database(self._store, with_messages=True)
        result: dict[str, TopicState] = {}
        groups: dict[tuple[str, str], int] = {}
        for name, stored in disk.topics.items():
            assert stored.messages is not None
            first = None if messages_from is None else messages_from.get(name)
            messages = stored.messages
            if first is not None:
                messages = [m for m in messages if m.msg_id >= first]
            result[name] = _topic_state(stored, messages)
            for group, position in stored.groups.items():
                groups[(name, group)] = position
        return State.build(result, groups)

    def _snapshot_topics(self, names: list[str], messages_from: Mapping[str, int]) -> State:
        result: dict[str, TopicState] = {}
        groups: dict[tuple[str, str], int] = {}
        for name in names:
            if not isinstance(name, str):
                continue
            try:
                with self._locked(name) as cached:
                    stored = read_topic(
                        self._store, name, messages_from.get(name), cached.topic_key, cached.hwm_key
                    )
            except TopicNotFoundError:
                continue
            if stored is None:
                continue
            result[name], topic_groups = stored
            for group, position in topic_groups.items():
                groups[(name, group)] = position
        return State.build(result, groups)

    # ----------------------------------------------------------------------- internals

    def _check_serving(self) -> None:
        check_serving(self._state)

    def _locked(self, name: str) -> _Held:
        """``with self._locked(name) as cached``: hold the lock of live topic ``name``;
        ``TopicNotFoundError`` if there is none. The lock is taken here, so use it only as
        a ``with`` expression."""
        while True:
            cached = self._topics.get(name)
            if cached is None:
                raise TopicNotFoundError(f"topic {name!r} does not exist")
            cached.lock.acquire()
            if self._state == SERVING and cached.alive:
                return _Held(cached)
            cached.lock.release()
            self._check_serving()
            if self._topics.get(name) is cached:  # destroyed, not yet re-created
                raise TopicNotFoundError(f"topic {name!r} does not exist")

    @contextmanager
    def _all_topics_locked(self) -> Iterator[list[CachedTopic]]:
        """The table lock, then every topic lock in incarnation order: no operation runs."""
        with self._table_lock, contextlib.ExitStack() as stack:
            topics = sorted(self._topics.values(), key=lambda cached: cached.incarnation)
            for cached in topics:
                stack.enter_context(cached.lock)
            yield [cached for cached in topics if cached.alive]

    def _fault(self, point: str) -> None:
        """Call the hook; if it raises, the caches may disagree with disk: stop serving."""
        if self._faults is None:
            return
        try:
            self._faults(point)
        except BaseException:
            if self._state == SERVING:
                self._state = FAILED
            raise

    def write_plan(self, operation: str, plan: Plan) -> None:
        """Write ``operation``'s batch ``plan``, passing its crash points (``write_points``)
        before and after. A hook: a variant may split or reorder the write."""
        before, after = write_points(operation)
        self._fault(before)
        if operation in self.unlogged_operations:
            self._store.write(plan, logged=False)
        else:
            self._store.write(plan)  # a variant's Store wrapper may not know ``logged``
        self._fault(after)

    def move_group(self, cached: CachedTopic, operation: str, group: str, position: int) -> None:
        """Set ``group``'s position, acking what it makes acked, in one batch. A hook."""
        assert position >= -1
        inc = cached.incarnation
        plan = Plan(meta_puts=[(keys.group_key(inc, group), codec.encode_position(position))])
        acked: list[Page] = []
        if cached.acked_count < len(cached.pages):
            after = dict(cached.groups)
            after[group] = position
            acked = self.plan_acks(cached, after, plan, LazyNow(self._clock))
        self.write_plan(operation, plan)
        cached.groups[group] = position
        self._apply_acks(cached, acked)

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        """Every group of ``topic`` has read every id below this, with its groups at
        ``positions`` (SPEC "Acks": a page is acked when every position > end_id); -1 when
        some group has read nothing or there is no group. A seam for variants (the
        harness's seeded bugs): the one place that says which positions count."""
        return min(positions.values(), default=-1)  # -1 (read nothing) is below every end id

    def group_positions(self, topic: str) -> dict[str, int]:
        """The position of every group of ``topic`` as this queue holds it (a copy; empty
        when there is no such topic): introspection for variants and tests, as
        ``retention_passes``, not part of the queue's contract. Takes no lock, so an
        operation on the topic (or an ``ack_floor`` inside one) may call it."""
        cached = self._topics.get(topic)
        return dict(cached.groups) if cached is not None else {}

    def plan_acks(
        self, cached: CachedTopic, groups: dict[str, int], plan: Plan, now: LazyNow
    ) -> list[Page]:
        """Pages that become acked with these ``groups`` (every position > end_id), their
        records added to ``plan``. A hook."""
        if not groups or cached.acked_count == len(cached.pages):
            return []
        lowest = self.ack_floor(cached.name, groups)
        acked: list[Page] = []
        index = cached.acked_count
        pages = cached.pages
        while index < len(pages) and pages[index].end_id < lowest:
            page = replace(pages[index], acked_ts=now())
            plan.meta_puts.append(
                (keys.page_key(cached.incarnation, page.end_id), codec.encode_page(page))
            )
            acked.append(page)
            index += 1
        return acked

    @staticmethod
    def _apply_acks(cached: CachedTopic, acked: list[Page]) -> None:
        start = cached.acked_count
        for offset, page in enumerate(acked):
            assert cached.pages[start + offset].end_id == page.end_id
            cached.pages[start + offset] = page
        cached.acked_count = start + len(acked)


def _check_message_bounds(store: Store, name: str, record: codec.TopicRecord, last_id: int) -> None:
    """On open: the stored ids of a topic must be exactly ``(trim_id, last_id]``."""
    bounds = store.message_id_bounds(record.incarnation)
    expected = (record.trim_id + 1, last_id) if last_id > record.trim_id else None
    if bounds != expected:
        raise CorruptDatabaseError(
            f"topic {name!r} stores message ids {bounds}, but its records say {expected}"
        )


def _decode_messages(first_id: int, values: list[bytes]) -> list[ConsumerMessage]:
    """``ConsumerMessage``s of consecutive ids from ``first_id``: the hot loop of consume,
    with a fast path for messages without properties (tag 0x01)."""
    build = codec.consumer_message
    try:
        return [
            build(msg_id, value[1:], {}) if value[0] == 0x01 else _decode_one(msg_id, value)
            for msg_id, value in zip(itertools.count(first_id), values, strict=False)
        ]
    except IndexError:  # an empty value has no tag: let the decoder name the damage
        for value in values:
            codec.decode_message(value)
        raise


def _decode_one(msg_id: int, value: bytes) -> ConsumerMessage:
    payload, properties = codec.decode_message(value)
    return codec.consumer_message(msg_id, payload, properties)


def _topic_state(stored: DiskTopic, messages: list[ConsumerMessage]) -> TopicState:
    return TopicState(
        messages=tuple(messages),
        pages=tuple(stored.pages),
        open_page_bytes=stored.record.open_page_bytes,
        last_id=stored.last_id,
    )
