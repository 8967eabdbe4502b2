"""Seeded bugs in the real RocketMQ store: its driver (``impl/external/rocketmq_store/``)
with ``--bug NAME``, each injected only through RocketMQ's own extension points (its
dispatcher list, its config, its clean-up API), never by changing its code. Killed by the
storage layer's default gate: proof that the checks reach into the real store.

- ``rocketmq-cq-drop``: a ``CommitLogDispatcher`` wrapped around the consume-queue builder
  drops every entry whose offset is 4 mod 5 (the max offset comes up short, a get returns
  another message's body);
- ``rocketmq-retain-forcibly``: retention through the store's disk-full clean-up, which
  deletes every file but the last (messages put after the cutoff go);
- ``rocketmq-flush-lies``: asked for sync flush, the store is opened with ASYNC_FLUSH and
  ``flush`` does nothing: a kill -9 keeps it all (the page cache), only a power cut shows
  it (the FUSE power-loss sweep).

Each factory is a message store factory; the driver is started (and checked) at its first
call, so that the catalogue loads where the driver is not built.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.model.api import Clock
from rmqsim.model.store.api import StoreConfig

__all__ = ["MUTANTS", "driver_with_bug"]


@functools.cache
def _factory(bug: str) -> Any:
    from rmqsim.conformance.adapter import external_driver
    from rmqsim.conformance.wire.client import exec_factory

    return exec_factory(f"{external_driver('rocketmq-store')} --bug {bug}")


def driver_with_bug(bug: str, summary: str) -> Any:
    """A message store factory: the RocketMQ driver with ``--bug bug``."""

    def factory(*, path: Path, store_config: StoreConfig, clock: Clock, faults: Any) -> Any:
        return _factory(bug)(path=path, store_config=store_config, clock=clock, faults=faults)

    factory.__name__ = factory.__qualname__ = "open_" + bug.replace("-", "_")
    factory.__doc__ = f"Bug class: rocketmq (the real store, --bug {bug}). {summary}"
    return factory


open_cq_drop = driver_with_bug("cq-drop", "The consume queue drops every 5th entry.")
open_retain_forcibly = driver_with_bug("retain-forcibly",
                                       "Retention deletes every file but the last.")
open_flush_lies = driver_with_bug("flush-lies", "Sync asked, async given; flush a no-op.")

_MODULE = __name__
MUTANTS: tuple[Mutant, ...] = (
    Mutant("rocketmq-cq-drop", "rocketmq",
           "the real store's consume-queue dispatcher drops every 5th entry",
           f"{_MODULE}:open_cq_drop", "store", expect="rocketmq-store"),
    Mutant("rocketmq-flush-lies", "rocketmq",
           "the real store opened with async flush though sync was asked; flush a no-op",
           f"{_MODULE}:open_flush_lies", "store", expect="rocketmq-store"),
    Mutant("rocketmq-retain-forcibly", "rocketmq",
           "the real store's retention deletes every file but the last",
           f"{_MODULE}:open_retain_forcibly", "store", expect="rocketmq-store"),
)
