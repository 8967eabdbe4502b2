"""Queues that never return from a call, for ``tests/test_liveness.py`` (and one slow to
open, for ``tests/test_wire_speed.py``), as ``--impl MOD:FACTORY`` specs (a child process
of ``--crash-mode process`` imports them by name). The catalogue's deadlocking mutant
(``conformance.mutants.liveness``) is the common case: a lock taken twice. These are the
ones that resist an interruption."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from pathlib import Path
from typing import Any

from rmqsim.conformance.mutants.base import factory_of
from rmqsim.impl import RocksMQ
from rmqsim.model.api import MessageQueue


def open_never_returns(*, path: Path, **_kwargs: Any) -> MessageQueue:
    """Opening waits for an event nobody sets."""
    threading.Event().wait()
    raise AssertionError("unreachable")


open_never_returns.rmqsim_layer = "queue"  # type: ignore[attr-defined]  # it takes **_kwargs


class _SwallowsInterrupts(RocksMQ):
    """``create_topic`` sleeps forever and swallows whatever interrupts it, even a
    ``BaseException``: the watchdog's signal cannot end the call."""

    def create_topic(self, topic: str) -> None:
        while True:
            with contextlib.suppress(BaseException):  # the point of this queue
                time.sleep(3600)


class _HoldsTheGil(RocksMQ):
    """``create_topic`` waits in native code that keeps the GIL (libc's ``sleep`` called
    through ``ctypes.PyDLL``, which does not release it): no Python thread runs, the
    watchdog's neither, as when a rocksdict call blocks inside RocksDB."""

    def create_topic(self, topic: str) -> None:
        ctypes.PyDLL(None).sleep(3600)


swallows_interrupts = factory_of(_SwallowsInterrupts)
holds_the_gil = factory_of(_HoldsTheGil)


class _WholeSnapshotOnly(RocksMQ):
    """Our queue, but ``snapshot()`` takes no arguments (an implementation without the
    optional partial snapshots): the reference server must still answer a partial one."""

    def snapshot(self) -> Any:  # type: ignore[override]  # narrower on purpose
        return super().snapshot()


def whole_snapshot_only(*, path: Path, config: Any, clock: Any, faults: Any) -> MessageQueue:
    return _WholeSnapshotOnly.open(str(path), config=config, clock=clock, faults=faults)


#: CPU seconds ``burns_cpu_on_open`` spends before it opens the queue.
OPEN_BURN_CPU_S = 0.25


def burns_cpu_on_open(**kwargs: Any) -> MessageQueue:
    """Our queue, opened after ``OPEN_BURN_CPU_S`` of CPU in the opening process (for
    ``tests/test_wire_speed.py``: a forked server's CPU is counted where it is spent)."""
    started = time.process_time()
    while time.process_time() - started < OPEN_BURN_CPU_S:
        pass
    return RocksMQ.open(kwargs["path"], kwargs["config"], clock=kwargs["clock"],
                        faults=kwargs["faults"])


burns_cpu_on_open.rmqsim_layer = "queue"  # type: ignore[attr-defined]  # it takes **kwargs
