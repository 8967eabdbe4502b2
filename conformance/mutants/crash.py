"""Crash-consistency mutants of ``impl.RocksMQ``: four ways to be right until a crash.

Each is the real implementation with one durability bug, as a small subclass (or a thin
wrapper of its storage), and each is invisible to a run without crashes: the state the
queue reports while it runs is right; only what survives a crash is wrong. They exist so
the tests can show that the crash sweep, crash-rate runs and shrinking find such bugs:

- ``two_step_produce``: a produce written as two batches (messages and high-water mark,
  then the topic record and closed pages);
- ``positions_in_memory``: group positions kept in memory, written only on a clean close;
- ``acks_before_messages``: a poll's acks written in a batch of their own, before the
  batch that moves the position past the messages it hands out;
- ``hwm_not_persisted``: the id high-water mark never written; recovered on open from
  the highest stored message id.

Each one passes the crash points the real one passes, plus one of its own between its two
writes where it has two, so a sweep reaches the window. Use them like any implementation:
``rmqsim crash-sweep --profile crashy --seed 0 --impl conformance.mutants.crash:two_step_produce``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import FaultHook
from rmqsim.conformance.mutants import Mutant
from rmqsim.impl import RocksMQ, codec, keys
from rmqsim.impl.storage import LOCK_FILE_NAME, Plan, Store
from rmqsim.model.api import Clock, MessageQueue, MQConfig, State

__all__ = [
    "MUTANTS",
    "acks_before_messages",
    "hwm_not_persisted",
    "positions_in_memory",
    "two_step_produce",
]

_MODULE = __name__
_POSITION_MOVES = frozenset({"consume", "seek", "seek_to_latest"})


def _is_hwm(key: bytes) -> bool:
    return key[:1] == keys.TAG_HWM


def _is_group(key: bytes) -> bool:
    return key[:1] == keys.TAG_GROUP


def _is_page(key: bytes) -> bool:
    return key[:1] == keys.TAG_PAGE


class TwoStepProduce(RocksMQ):
    """Bug class: torn batch (one logical write split into two physical writes).

    ``produce`` writes the messages and the high-water mark first, then the topic record
    (open page bytes) and the pages it closed. A crash between the two (point
    ``produce.between_writes``) leaves the messages without their page accounting: a state
    that is neither before nor after the produce.
    """

    def write_plan(self, operation: str, plan: Plan) -> None:
        if operation != "produce":
            super().write_plan(operation, plan)
            return
        first = Plan(msg_puts=plan.msg_puts, meta_puts=[p for p in plan.meta_puts if _is_hwm(p[0])])
        second = Plan(meta_puts=[p for p in plan.meta_puts if not _is_hwm(p[0])])
        self._fault("produce.before_write")
        self._store.write(first)
        self._fault("produce.between_writes")
        self._store.write(second)
        self._fault("produce.after_write")


class PositionsInMemory(RocksMQ):
    """Bug class: volatile acknowledged state (positions cached, flushed on close only).

    ``consume``, ``seek`` and ``seek_to_latest`` update the group's position in memory and
    write only the acks they cause; ``snapshot`` reports the in-memory positions and
    ``close`` writes them all. Right until a crash, which rolls every group back to its
    last clean close (Milvus keeps positions in memory only).
    """

    def write_plan(self, operation: str, plan: Plan) -> None:
        if operation in _POSITION_MOVES:
            plan = replace(plan, meta_puts=[p for p in plan.meta_puts if not _is_group(p[0])])
        super().write_plan(operation, plan)

    def snapshot(
        self, topics: Iterable[str] | None = None, messages_from: Mapping[str, int] | None = None
    ) -> State:
        state = super().snapshot(topics, messages_from)
        groups = {(t, g): self._topics[t].groups[g] for (t, g) in state.groups}
        return State.build(state.topics, groups)

    def close(self) -> None:
        if self._state == "serving":
            plan = Plan(
                meta_puts=[
                    (keys.group_key(cached.incarnation, group), codec.encode_position(position))
                    for cached in self._topics.values()
                    if cached.alive
                    for group, position in cached.groups.items()
                ]
            )
            self._store.write(plan)
        super().close()


class AcksBeforeMessages(RocksMQ):
    """Bug class: acknowledgement before delivery (ack and position in separate writes).

    A poll (or seek) that acks pages writes those acks in a batch of their own first, then
    the batch that moves the position past the messages it hands out. A crash between them
    (point ``<op>.after_acks``) leaves pages acked that no group has read past, and
    retention may then delete messages a group never received.
    """

    def write_plan(self, operation: str, plan: Plan) -> None:
        acks = [p for p in plan.meta_puts if _is_page(p[0])]
        if operation not in _POSITION_MOVES or not acks:
            super().write_plan(operation, plan)
            return
        rest = [p for p in plan.meta_puts if not _is_page(p[0])]
        self._fault(f"{operation}.before_write")
        self._store.write(Plan(meta_puts=acks))
        self._fault(f"{operation}.after_acks")
        self._store.write(replace(plan, meta_puts=rest))
        self._fault(f"{operation}.after_write")


class _VolatileHwmStore(Store):
    """A ``Store`` that drops high-water-mark writes and serves them from memory (the
    ``RocksMQ.store_class`` seam), so the queue above it sees its own high-water marks
    while it runs; they are simply never on disk."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hwm: dict[bytes, bytes] = {}

    def write(self, plan: Plan, *, logged: bool = True) -> None:
        for key, value in plan.meta_puts:
            if _is_hwm(key):
                self._hwm[key] = value
        kept = [p for p in plan.meta_puts if not _is_hwm(p[0])]
        super().write(replace(plan, meta_puts=kept), logged=logged)

    def get_meta(self, key: bytes) -> bytes | None:
        if key in self._hwm:
            return self._hwm[key]
        return super().get_meta(key)

    def scan_meta(self) -> list[tuple[bytes, bytes]]:
        merged = dict(super().scan_meta())
        merged.update(self._hwm)
        return sorted(merged.items())


def _recover_hwms(store: Store) -> dict[bytes, bytes]:
    """What the buggy recovery believes: each live topic's last id is its highest stored
    message id (or its trim id when none is stored); a destroyed name's is forgotten."""
    recovered: dict[bytes, bytes] = {}
    for key, value in store.scan_meta():
        if key[:1] != keys.TAG_TOPIC:
            continue
        record = codec.decode_topic(value)
        bounds = store.message_id_bounds(record.incarnation)
        last_id = bounds[1] if bounds is not None else record.trim_id
        recovered[keys.TAG_HWM + key[1:]] = codec.encode_u64(last_id)
    return recovered


class HwmNotPersisted(RocksMQ):
    """Bug class: volatile counter (the id high-water mark is never persisted).

    The high-water mark lives in memory; on open it is recovered from the highest stored
    message id of each live topic. That is right until the ids above it are gone with no
    trace: a topic destroyed and re-created after a restart starts its ids again at 1
    (id reuse), where SPEC says ids continue under the name.
    """

    store_class = _VolatileHwmStore

    @classmethod
    def open(cls, path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> RocksMQ:
        if os.path.exists(os.path.join(path, LOCK_FILE_NAME)):
            # The buggy recovery: rewrite every live topic's mark from its messages.
            store = Store.open(path)
            try:
                recovered = _recover_hwms(store)
                if recovered:
                    store.write(Plan(meta_puts=sorted(recovered.items())))
            finally:
                store.close()
        return super().open(path, *args, **kwargs)


def _factory(cls: type[RocksMQ]):
    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue:
        return cls.open(path, config=config, clock=clock, faults=faults)

    factory.__doc__ = cls.__doc__
    return factory


two_step_produce = _factory(TwoStepProduce)
positions_in_memory = _factory(PositionsInMemory)
acks_before_messages = _factory(AcksBeforeMessages)
hwm_not_persisted = _factory(HwmNotPersisted)

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "two-step-produce",
        "crash-consistency",
        "produce writes messages and high-water mark, then the page accounting, in two batches",
        f"{_MODULE}:two_step_produce",
    ),
    Mutant(
        "positions-in-memory",
        "crash-consistency",
        "group positions live in memory and are written only on a clean close",
        f"{_MODULE}:positions_in_memory",
    ),
    Mutant(
        "acks-before-messages",
        "crash-consistency",
        "a poll writes its acks in a batch before the one that moves the position",
        f"{_MODULE}:acks_before_messages",
    ),
    Mutant(
        "hwm-not-persisted",
        "crash-consistency",
        "the id high-water mark is never written; open recovers it from the stored messages",
        f"{_MODULE}:hwm_not_persisted",
    ),
)
