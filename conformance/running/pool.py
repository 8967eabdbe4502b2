"""Worker processes for the gate (``rmqsim gate --jobs N``): a process pool whose tasks
run with the command's liveness bound and unwind on SIGINT and SIGTERM, and that is
stopped (its tasks cancelled, its workers ended) when the command is interrupted.

The workers are forked from a ``forkserver``, a clean process that imported the gate's
modules once, not from the command's process: a fork of that one would copy it half-way
(its progress bar's and watchdog's threads do not survive a fork, locks they held stay
held). Each run makes its own RocksDB directory under a directory of the pool's own
(``rmqsim-pool-*`` under the scratch root), so workers never share one, and the command
removes the pool's directory once every worker has ended: a run interrupted where it
cannot unwind (while its database closes, or killed after ``WORKER_STOP_S``) leaves
nothing behind. Results go back to the command, which puts them in (profile, seed) order.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rmqsim.conformance.adapter import builtin_impl_modules
from rmqsim.conformance.running.scratch import (
    WORKDIR_ENV,
    owned_prefix,
    remove_stale_once,
    scratch_root,
)
from rmqsim.conformance.running.watchdog import op_timeout, op_timeout_s
from rmqsim.conformance.wire.child import preload_forked

__all__ = [
    "START_METHOD",
    "WORKER_STOP_S",
    "WorkerPool",
    "default_jobs",
    "in_worker",
    "worker_pool",
]

#: How the workers are started (see the module's docstring).
START_METHOD = "forkserver"
#: Modules the fork server imports once, so that a worker starts without importing them;
#: with what a forked server needs (``wire.child.preload_forked``: the reference server,
#: and every built-in implementation), as a forked server (``--crash-mode process``, a
#: power cut through FUSE) of the same process has the fork server this pool starts.
PRELOAD = (
    "rmqsim.conformance.running.gate",
    "rmqsim.conformance.searching.shrink",
    "rmqsim.conformance.crashing.crash_sweep",
)
#: How long a stopped worker may take to unwind its run (remove its directory) before it
#: is killed.
WORKER_STOP_S = 10.0

T = TypeVar("T")


def default_jobs() -> int:
    """The CPUs this process may run on (``--jobs``'s default)."""
    return len(os.sched_getaffinity(0))


def _start_worker(scratch: str) -> None:
    """A worker's initializer: its runs' directories go under the pool's ``scratch``;
    Ctrl-C reaches the whole process group, and an idle worker has nothing to clean up:
    the command stops the pool itself."""
    os.environ[WORKDIR_ENV] = scratch
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _raise_interrupt(signum: int, _frame: Any) -> None:
    signal.signal(signum, signal.SIG_IGN)  # one clean-up per task
    raise KeyboardInterrupt(signal.Signals(signum).name)


def in_worker(limit_s: float, func: Callable[..., T], *args: Any) -> T:
    """Run ``func(*args)`` in a worker: under the liveness bound ``limit_s`` (the
    command's ``--op-timeout-s``: a worker has none of its settings), and unwinding its
    ``with`` and ``finally`` blocks on SIGINT or SIGTERM (its run's directory is removed)."""
    chosen = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum in chosen}
    try:
        with op_timeout(limit_s):
            return func(*args)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass(frozen=True, slots=True)
class WorkerPool:
    """The pool's executor and its number of workers (and the tasks submitted to it that
    are still referenced: ``cancel_pending``)."""

    executor: ProcessPoolExecutor
    jobs: int
    submitted: weakref.WeakSet[Future[Any]] = field(default_factory=weakref.WeakSet)

    def submit(self, func: Callable[..., T], *args: Any) -> Future[T]:
        """``func(*args)`` as a task, through ``in_worker`` with the bound in force."""
        future = self.executor.submit(in_worker, op_timeout_s(), func, *args)
        self.submitted.add(future)
        return future

    def cancel_pending(self) -> int:
        """Cancel every submitted task that has not started (a gate that stopped early:
        ``--max-failures``); the running ones finish, unread. Returns how many."""
        return sum(future.cancel() for future in list(self.submitted))


def _stop(pool: ProcessPoolExecutor, before: set[int]) -> None:
    """Cancel what has not started; SIGTERM the workers (their runs unwind), then wait
    for them, killing one that does not end within ``WORKER_STOP_S``."""
    workers = [p for p in multiprocessing.active_children() if p.pid not in before]
    pool.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(WORKER_STOP_S)
        if worker.is_alive():
            worker.kill()
            worker.join()
    pool.shutdown(wait=True)


@contextmanager
def worker_pool(jobs: int) -> Iterator[WorkerPool | None]:
    """``jobs`` worker processes (None for one job: the command runs everything itself).
    Interrupted (``KeyboardInterrupt``), the pool is stopped before the block's exception
    goes on; no worker outlives the block, and neither does the pool's scratch directory."""
    if jobs <= 1:
        yield None
        return
    context = multiprocessing.get_context(START_METHOD)
    preload_forked([*PRELOAD, *builtin_impl_modules()])
    before = {p.pid for p in multiprocessing.active_children() if p.pid is not None}
    root = scratch_root()
    remove_stale_once(root)
    scratch = tempfile.mkdtemp(prefix=owned_prefix("pool"), dir=root)
    try:
        pool = ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_start_worker, initargs=(scratch,)
        )
        try:
            yield WorkerPool(pool, jobs)
        except BaseException:
            _stop(pool, before)
            raise
        pool.shutdown(wait=True)
    finally:  # every worker has ended: nothing writes in it any more
        shutil.rmtree(scratch, ignore_errors=True)
