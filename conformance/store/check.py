"""What the storage layer checks (docs/STORAGE.md "The storage contract"), given the model
(``model.store.ReferenceStore``) and what a store answered: the anomaly names, reading a
store's whole state through the contract's own operations (``observe``), and the judgement
of a recovered, retained or reopened state against the model (each a ``Difference`` list).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rmqsim.conformance.running.statediff import Difference
from rmqsim.model.store.api import MessageStore, QueueKey
from rmqsim.model.store.reference import ReferenceStore

__all__ = [
    "OBSERVE_CHUNK",
    "STORE_ANOMALIES",
    "QueueView",
    "StoreViolation",
    "check_clean",
    "check_get",
    "check_recovered",
    "check_retained",
    "observe",
]

#: The anomaly names a storage run's divergences carry, each with its meaning.
STORE_ANOMALIES: dict[str, str] = {
    "offset-mismatch": "a put or offsets() answered another offset than the next one or the "
                       "model's bounds",
    "get-mismatch": "a get returned other bodies than those at its offset (or none where "
                    "some are, or some where none are)",
    "outcome-mismatch": "an operation answered another value or error than the contract's",
    "lost-write": "after a crash, a message that had to be durable (synced or flushed) is "
                  "missing",
    "phantom-write": "after a crash or reopen, the store holds offsets that were never put",
    "corrupt-body": "a stored body came back different from what was put",
    "hole": "the store reports an offset inside its bounds that it cannot serve",
    "over-retention": "retention deleted a message put at or after its cutoff, or moved a "
                      "minimum backwards",
    "recovery-unstable": "a second crash and recovery changed what the first recovery kept",
    "lost-on-close": "after a clean close and reopen, the store lost or changed something",
    "torn-batch": "a store that promises batches all or nothing recovered part of one",
    "protocol-error": "a store in another process broke the wire protocol (docs/PROTOCOL.md)",
}
#: ``get`` chunk size when reading a queue whole.
OBSERVE_CHUNK = 64


class StoreViolation(Exception):
    """A check failed: ``anomaly`` (a key of ``STORE_ANOMALIES``), the differences."""

    def __init__(self, anomaly: str, diffs: list[Difference], detail: str) -> None:
        super().__init__(detail)
        self.anomaly = anomaly
        self.diffs = diffs
        self.detail = detail


@dataclass(frozen=True, slots=True)
class QueueView:
    """One queue as a store showed it: its bounds, and its bodies from ``min_offset`` on
    (up to where a get first came back empty: ``served_to``)."""

    min_offset: int
    max_offset: int
    bodies: tuple[bytes, ...]

    @property
    def served_to(self) -> int:
        return self.min_offset + len(self.bodies)


Call = Callable[..., Any]


def observe(store: MessageStore, keys: Iterable[QueueKey], call: Call) -> dict[QueueKey, QueueView]:
    """Each queue of ``keys`` read whole through ``offsets`` and ``get`` (``call(what, fn,
    *args)`` bounds each call: the lockstep's watchdog)."""
    views: dict[QueueKey, QueueView] = {}
    for topic, queue in keys:
        low, high = call("offsets", store.offsets, topic, queue)
        bodies: list[bytes] = []
        offset = low
        while offset < high:
            chunk = call("get", store.get, topic, queue, offset, OBSERVE_CHUNK)
            if not chunk:
                break
            bodies.extend(chunk[: high - offset])
            offset += len(chunk)
        views[(topic, queue)] = QueueView(low, high, tuple(bodies))
    return views


def _where(key: QueueKey) -> str:
    return f"{key[0]}/{key[1]}"


def _first_bad_body(model: ReferenceStore, key: QueueKey, view: QueueView) -> int | None:
    bodies = model.log(key).bodies
    for offset, body in enumerate(view.bodies, start=view.min_offset):
        if offset >= len(bodies) or bodies[offset] != body:
            return offset
    return None


def _bodies_and_holes(model: ReferenceStore, key: QueueKey, view: QueueView) -> None:
    bad = _first_bad_body(model, key, view)
    if bad is not None:
        log = model.log(key)
        want = log.bodies[bad] if bad < len(log.bodies) else None
        diff = Difference("body", f"{_where(key)}@{bad}", want, view.bodies[bad - view.min_offset])
        raise StoreViolation("corrupt-body", [diff], f"offset {bad} of {_where(key)} differs")
    if view.served_to < view.max_offset:
        diff = Difference("served", _where(key), view.max_offset, view.served_to)
        raise StoreViolation("hole", [diff], f"{_where(key)}: offsets [{view.min_offset}, "
                             f"{view.max_offset}) reported, a get at {view.served_to} found "
                             "nothing")


def check_recovered(model: ReferenceStore, views: dict[QueueKey, QueueView],
                    batch_atomic: bool = False) -> None:
    """A crash's recovery: each queue keeps every durable message and nothing never put,
    its minimum at most its maximum, its bodies the model's, no hole; a store whose
    batches are all or nothing (``batch_atomic``) ends each queue at a batch's end."""
    for key, view in views.items():
        log = model.log(key)
        bounds = Difference("bounds", _where(key), (log.min_offset, log.max_offset),
                            (view.min_offset, view.max_offset))
        if view.max_offset < log.durable:
            raise StoreViolation("lost-write", [bounds], f"{_where(key)} recovered up to "
                                 f"{view.max_offset}; offsets below {log.durable} were durable")
        if view.max_offset > log.max_offset or view.min_offset > view.max_offset:
            raise StoreViolation("phantom-write", [bounds], f"{_where(key)} recovered "
                                 f"[{view.min_offset}, {view.max_offset}) of "
                                 f"[{log.min_offset}, {log.max_offset})")
        allowed_min = max(log.min_offset, log.min_ceiling)
        if view.min_offset > min(allowed_min, view.max_offset) and view.min_offset > 0:
            raise StoreViolation("lost-write", [bounds], f"{_where(key)} recovered from "
                                 f"{view.min_offset}; no retention deleted below "
                                 f"{allowed_min}")
        _bodies_and_holes(model, key, view)
        if batch_atomic and view.max_offset not in log.batch_ends:
            ends = sorted(end for end in log.batch_ends if end <= log.max_offset)
            raise StoreViolation("torn-batch", [bounds], f"{_where(key)} recovered up to "
                                 f"{view.max_offset}, inside a batch (batches end at {ends})")


def check_clean(model: ReferenceStore, views: dict[QueueKey, QueueView], anomaly: str) -> None:
    """A state that must equal the model's exactly (after a clean reopen, at the end)."""
    for key, view in views.items():
        log = model.log(key)
        if (view.min_offset, view.max_offset) != (log.min_offset, log.max_offset):
            diff = Difference("bounds", _where(key), (log.min_offset, log.max_offset),
                              (view.min_offset, view.max_offset))
            raise StoreViolation(anomaly, [diff], f"{_where(key)}: bounds differ")
        _bodies_and_holes(model, key, view)


def check_retained(model: ReferenceStore, cutoff_s: int,
                   bounds: dict[QueueKey, tuple[int, int]]) -> None:
    """After ``retain(cutoff_s)``: every minimum moved forward at most to the first
    message put at or after the cutoff; no maximum moved."""
    for key, (low, high) in bounds.items():
        log = model.log(key)
        ceiling = log.retention_ceiling(cutoff_s)
        diff = Difference("bounds", _where(key), (f"{log.min_offset}..{ceiling}", log.max_offset),
                          (low, high))
        if high != log.max_offset:
            raise StoreViolation("offset-mismatch", [diff], f"{_where(key)}: retention "
                                 "changed the maximum")
        if not log.min_offset <= low <= ceiling:
            raise StoreViolation("over-retention", [diff], f"{_where(key)}: minimum {low} "
                                 f"after a retention allowed {log.min_offset}..{ceiling}")


def check_get(model_bodies: list[bytes], got: object, max_count: int) -> str | None:
    """Why ``got`` is not an answer the contract allows to a get whose full answer is
    ``model_bodies`` (a non-empty prefix of it, or ``[]`` for ``[]``), or None."""
    if type(got) is not list or not all(type(body) is bytes for body in got):
        return f"a get returned {type(got).__name__}, not a list of bytes"
    if not model_bodies:
        return None if not got else f"{len(got)} bodies where none are"
    if not got:
        return "nothing where bodies are"
    if len(got) > max_count:
        return f"{len(got)} bodies, over max_count {max_count}"
    if got != model_bodies[: len(got)]:
        return "bodies other than those at the offset"
    return None
