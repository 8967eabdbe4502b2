"""Wrong message stores, each breaking one check of the storage layer (docs/STORAGE.md),
loaded by the tests through ``--impl tests.store.wrong_stores:FACTORY`` as a user's store
would be: our commit log under the storage contract with one answer changed. Most go wrong
only after a reopen (``reopened``), so that the check after a crash or a clean reopen is
the one that catches them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqsim.impl.commitlog import FileSystem
from rmqsim.impl.store import CommitLogStore, open_store
from rmqsim.model.api import Clock
from rmqsim.model.store.api import StoreConfig

__all__ = [
    "body_flipped_after_reopen",
    "close_loses_last",
    "crash_adds_phantom",
    "crash_loses_last",
    "hole_after_reopen",
    "put_off_by_one",
    "recovery_drifts",
    "retain_raises",
]

#: Opens per store directory, and the directories closed cleanly (a test's stores only).
_OPENS: dict[str, int] = {}
_CLOSED: set[str] = set()


class _Counted(CommitLogStore):
    """Knows how many times its directory was opened before (``reopened``)."""

    path = ""
    reopened = 0
    after_close = False

    def close(self) -> None:
        _CLOSED.add(self.path)
        super().close()


def _opener(cls: type[_Counted]) -> Any:
    def factory(*, path: Path, store_config: StoreConfig, clock: Clock, faults: Any,
                fs: FileSystem | None = None) -> CommitLogStore:
        base = open_store(path=path, store_config=store_config, clock=clock, faults=faults, fs=fs)
        store = cls(base.queue, store_config)
        store.path = str(path)
        store.reopened = _OPENS.get(store.path, 0)
        store.after_close = store.path in _CLOSED
        _OPENS[store.path] = store.reopened + 1
        _CLOSED.discard(store.path)
        return store

    factory.__name__ = factory.__qualname__ = cls.__name__
    return factory


class _PutOffByOne(_Counted):
    def put(self, topic: str, queue: int, bodies: Any) -> int:
        return super().put(topic, queue, bodies) + 1


class _HoleAfterReopen(_Counted):
    """After a reopen, offset 1 of every queue cannot be read (a get stops before it)."""

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        if self.reopened and offset <= 1 < offset + max_count:
            return [] if offset == 1 else super().get(topic, queue, offset, 1 - offset)
        return super().get(topic, queue, offset, max_count)


class _BodyFlippedAfterReopen(_Counted):
    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        bodies = super().get(topic, queue, offset, max_count)
        if not self.reopened:
            return bodies
        return [bytes([body[0] ^ 1]) + body[1:] if body else body for body in bodies]


class _CrashLosesLast(_Counted):
    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        low, high = super().offsets(topic, queue)
        return (low, high - 1) if self.reopened and high > low else (low, high)


class _CrashAddsPhantom(_Counted):
    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        low, high = super().offsets(topic, queue)
        return (low, high + 1) if self.reopened else (low, high)


class _RecoveryDrifts(_Counted):
    """Each reopen moves every queue's end back by the number of reopens so far (within
    what was durable at the first crash, as a store that trims its tail anew each time)."""

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        low, high = super().offsets(topic, queue)
        return (low, max(low, high - self.reopened + 1)) if self.reopened > 1 else (low, high)


class _CloseLosesLast(_Counted):
    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        low, high = super().offsets(topic, queue)
        return (low, high - 1) if self.after_close and high > low else (low, high)


class _RetainRaises(_Counted):
    def retain(self, cutoff_s: int) -> None:
        raise KeyError("retention table")


put_off_by_one = _opener(_PutOffByOne)
hole_after_reopen = _opener(_HoleAfterReopen)
body_flipped_after_reopen = _opener(_BodyFlippedAfterReopen)
crash_loses_last = _opener(_CrashLosesLast)
crash_adds_phantom = _opener(_CrashAddsPhantom)
recovery_drifts = _opener(_RecoveryDrifts)
close_loses_last = _opener(_CloseLosesLast)
retain_raises = _opener(_RetainRaises)
