"""Storage-layer mutants: our commit log under the storage contract (``impl.store``) with
one bug, killed by the storage layer's gate (its profiles in lockstep, then its power-loss
sweep on the simulated disk).

Two families:

- **the storage mutants re-expressed**: each of ``mutants.storage``'s durability bugs
  (``no-fsync``, ``no-dir-sync``, ``truncate-one-record-off``, ...), the same broken
  commit log opened under the storage contract (``store-<name>``): what only a power cut
  shows, now judged by the store's own promises rather than the queue's;
- **contract bugs** of a store's answers, which the lockstep catches without a crash:
  ``store-get-from-next`` (a get starts one offset late), ``store-retain-past-cutoff``
  (retention deletes the first message put at the cutoff too), ``store-min-stays-zero``
  (``offsets`` never reports retention's minimum), ``store-flush-noop`` (``flush`` does
  nothing: under async flush a power cut loses what it covered), ``store-batch-split``
  (a batch written body by body: a power cut keeps part of it, which a store promising
  batches all or nothing, as ours does, must not).

Each is a subclass of ``impl.store.CommitLogStore`` overriding one public method, or the
storage mutant's own factory under it: nothing is patched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants import storage as storage_mutants
from rmqsim.impl.commitlog import FileSystem
from rmqsim.impl.store import CommitLogStore, open_store
from rmqsim.impl.store.commitlog import QUEUE_CONFIG
from rmqsim.model.api import Clock
from rmqsim.model.store.api import StoreConfig

__all__ = ["MUTANTS"]

StoreFactory = Callable[..., CommitLogStore]


def _over(open_queue: Callable[..., Any], name: str) -> StoreFactory:
    """A store factory over a (broken) commit-log queue factory of ``mutants.storage``."""

    def factory(*, path: Path, store_config: StoreConfig, clock: Clock, faults: Any,
                fs: FileSystem | None = None) -> CommitLogStore:
        queue = open_queue(path=path, config=QUEUE_CONFIG, clock=clock, faults=faults, fs=fs)
        return CommitLogStore(queue, store_config)

    factory.__qualname__ = factory.__name__ = name
    factory.__doc__ = (f"Bug class: storage, under the storage contract "
                       f"(mutants.storage:{open_queue.__name__}).")
    factory.rmqsim_batch_atomic = True  # type: ignore[attr-defined]  # as ours claims
    return factory


def _subclass(cls: type[CommitLogStore], name: str) -> StoreFactory:
    """A store factory opening our commit log as ``cls``."""

    def factory(*, path: Path, store_config: StoreConfig, clock: Clock, faults: Any,
                fs: FileSystem | None = None) -> CommitLogStore:
        store = open_store(path=path, store_config=store_config, clock=clock, faults=faults,
                           fs=fs)
        return cls(store.queue, store_config)

    factory.__qualname__ = factory.__name__ = name
    factory.__doc__ = cls.__doc__
    factory.rmqsim_batch_atomic = True  # type: ignore[attr-defined]  # as ours claims
    return factory


class _GetFromNext(CommitLogStore):
    """Bug class: contract (a read starts one offset late)."""

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        return super().get(topic, queue, offset + 1, max_count)


class _RetainPastCutoff(CommitLogStore):
    """Bug class: retention (the first message put at the cutoff goes too)."""

    def retain(self, cutoff_s: int) -> None:
        super().retain(cutoff_s + 1)


class _MinStaysZero(CommitLogStore):
    """Bug class: contract (the minimum is never reported after retention)."""

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        return (0, super().offsets(topic, queue)[1])


class _BatchSplit(CommitLogStore):
    """Bug class: atomicity (a batch written as one record per body)."""

    def put(self, topic: str, queue: int, bodies: Sequence[bytes]) -> int:
        first = super().put(topic, queue, bodies[:1])
        for body in bodies[1:]:
            super().put(topic, queue, [body])
        return first


class _FlushNoop(CommitLogStore):
    """Bug class: durability (flush does nothing)."""

    def flush(self) -> None:
        pass


open_get_from_next = _subclass(_GetFromNext, "open_get_from_next")
open_retain_past_cutoff = _subclass(_RetainPastCutoff, "open_retain_past_cutoff")
open_min_stays_zero = _subclass(_MinStaysZero, "open_min_stays_zero")
open_flush_noop = _subclass(_FlushNoop, "open_flush_noop")
open_batch_split = _subclass(_BatchSplit, "open_batch_split")

#: The storage mutants carried over (``mutants.storage``'s names, but the control).
_CARRIED: Sequence[str] = tuple(m.name for m in storage_mutants.MUTANTS)
for _name in _CARRIED:
    _function = "open_" + _name.replace("-", "_")
    globals()["store_" + _function] = _over(getattr(storage_mutants, _function),
                                            "store_" + _function)

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant("store-get-from-next", "contract", "a get starts one offset after the one asked",
           f"{_MODULE}:open_get_from_next", "store"),
    Mutant("store-retain-past-cutoff", "retention",
           "retention also deletes the messages put at its cutoff",
           f"{_MODULE}:open_retain_past_cutoff", "store"),
    Mutant("store-min-stays-zero", "contract", "offsets() never reports retention's minimum",
           f"{_MODULE}:open_min_stays_zero", "store"),
    Mutant("store-flush-noop", "durability", "flush() does nothing (async flush loses data)",
           f"{_MODULE}:open_flush_noop", "store"),
    Mutant("store-batch-split", "atomicity",
           "a batch is written as one record per body (a power cut keeps part of it)",
           f"{_MODULE}:open_batch_split", "store"),
    *(Mutant(f"store-{m.name}", m.bug_class, f"{m.summary} (under the storage contract)",
             f"{_MODULE}:store_open_{m.name.replace('-', '_')}", "store")
      for m in storage_mutants.MUTANTS),
)
