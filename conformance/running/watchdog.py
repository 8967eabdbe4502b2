"""The liveness bound: a call into the implementation under test that does not return
within ``op_timeout_s`` seconds is a finding (anomaly ``hang``), not a hung rmqsim.

A queue that deadlocks (a lock taken twice, a wait nobody signals) never returns from the
call. Nothing in the simulation can see that: the SUT's call is one simulated step and has
no steps of its own to count, so wall time is the only measure left, and it is used for
this bound only (it never reaches a trace: the trace of a hang is the steps up to the one
that hung, the same however long the bound was).

How a stuck call is stopped, in process (``--crash-mode process`` kills its child instead,
``conformance.running.process_sut``):

* **No hand-off per call.** Running each SUT call in a worker thread and waiting for it
  with a timeout would cost two thread switches per call, and a Python thread cannot be
  killed: the stuck worker would keep the implementation's locks and its RocksDB handle
  (the database's LOCK) for the life of the process. Instead the call runs where it always
  did, and ``CallBound.call`` only writes down its deadline (one ``time.monotonic()``, a
  subtraction and a tuple: 0.16 µs per call measured, the subtraction 0.01-0.03 µs more,
  two calls per lockstep operation of ≈150 µs of CPU, ≈0.2%, within the noise of
  ``rmqsim bench``; a hand-off measured 72-89 µs per call; see docs/BENCHMARKS.md).
* **A watchdog that acts only on an overrun.** One daemon thread per process sleeps until
  the earliest deadline of the calls in progress. When a call overran, it sends SIGALRM to
  the main thread (``signal.pthread_kill``), whose handler raises ``OperationHang`` there.
  A signal interrupts every wait that returns to Python: lock and ``RLock`` acquires,
  ``Event``/``Condition`` waits, ``sleep``, ``select``/``poll`` (the process mode's pipe),
  pure-Python loops (measured: all return within a millisecond of the signal). The stack
  unwinds through the implementation's ``with`` and ``finally`` blocks, so its locks are
  released; the lockstep reports ``hang`` with the trace as usual, then releases the SUT
  with ``crash()`` (bounded too) and the run's directory is removed, so the next seed runs
  on a fresh directory in the same process. ``OperationHang`` is a ``BaseException``, as
  the injected crash is, so that an implementation's ``except Exception`` cannot swallow
  it. ``signal.setitimer`` per call would do the same with two system calls per call and
  would take the one interval timer of the process from anyone else using it.
* **Slow is not stuck.** Wall time alone would call a slow machine a hang: on a CI runner
  shared with other jobs an operation of milliseconds can take seconds. An overrun call
  whose thread's CPU clock (``time.pthread_getcpuclockid``) still moves is given more time,
  probe interval by probe interval, until it has used another bound's worth of CPU (a busy
  loop is still a hang) or run ``MAX_GRACE_FACTOR`` bounds past its deadline; a call that
  used no CPU for a probe interval (a deadlock, a lost wake-up) is a hang at once.
* **Last resorts.** A call that does not give way within another ``op_timeout_s`` after
  the signal (native code that retries its wait, an implementation that swallows
  ``BaseException``), or a bound used from a thread other than the main one (signal
  handlers run in the main thread only), ends the process: one line on stderr naming the
  call, every thread's stack (``faulthandler``), exit status 1 (a finding). Native code that
  holds the GIL while it waits (rocksdict keeps the GIL during its calls: a RocksDB write
  that stalls for good stops every Python thread, the watchdog too) is caught by
  ``faulthandler.dump_traceback_later``, which runs without the GIL: the watchdog re-arms
  it ahead of time, so it fires only when the watchdog itself could not run for
  ``MIN_DEAD_MAN_S`` (30 s) or more (about a minute at most, with the default bound): it
  prints every thread's stack and exits with status 1. (While a run is under way it takes
  the process's one ``dump_traceback_later`` timer, pytest's ``faulthandler_timeout`` too.)
  ``--crash-mode process`` turns all of these into an ordinary ``hang`` with a trace.
* **Ctrl-Z is not a hang.** The deadlines and the last resort's timer count wall time, and
  a process stopped past them would end when continued. While a bound of the main thread
  is active, SIGTSTP (Ctrl-Z, when it had its default action) is taken as terminal
  programs take it (``_Watchdog._on_stop_key``): the timer is disarmed, the process stops
  itself with SIGSTOP, and when continued the time stopped is left out of the deadlines
  (``running_s``: the clock they are on) and the timer re-armed; the previous handler is
  back when the last such bound goes, and the timer is disarmed then too. SIGSTOP itself
  cannot be caught: a stop past the bound is still no hang (the resumed call uses CPU
  again), but a stop past the timer ends the process when it is continued.

The bound is a setting of the process, not of a run (it changes no trace, so it is not in
one): the CLI's ``--op-timeout-s`` applies it to a command (``op_timeout``), 0 turns it off
(to stop in a debugger inside the SUT), and shrinking and the fuzzer lower it to
``SHRINK_OP_TIMEOUT_S``: every candidate that still hangs costs the bound once, and a
shrink runs dozens of them (the deadlock mutant's smoke run: ≈20 candidates hang, ≈20 s).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_OP_TIMEOUT_S",
    "LAST_RESORT_EXIT_STATUS",
    "MAX_GRACE_FACTOR",
    "MAX_PROBE_S",
    "MIN_DEAD_MAN_S",
    "MIN_PROGRESS_SHARE",
    "SHRINK_OP_TIMEOUT_S",
    "CallBound",
    "OperationHang",
    "bounded_elsewhere",
    "op_timeout",
    "op_timeout_s",
    "running_s",
    "shrink_op_timeout_s",
]

#: The default bound of one call into the SUT, in seconds. Operations take well under a
#: millisecond and a reopen 10-120 ms (NOTES-dependencies), so this leaves a wide margin
#: for a loaded machine while a deadlock is still found in seconds.
DEFAULT_OP_TIMEOUT_S = 5.0
#: Slow is not stuck: a call past its bound whose thread is still using CPU (a machine so
#: loaded that an operation of milliseconds takes seconds) is looked at again every probe
#: interval (a fifth of the bound, at most ``MAX_PROBE_S``), while it uses at least
#: ``MIN_PROGRESS_SHARE`` of a CPU in each, until it has used another bound's worth of CPU
#: (a busy loop) or has run ``MAX_GRACE_FACTOR`` bounds past its deadline.
MAX_PROBE_S = 1.0
MIN_PROGRESS_SHARE = 0.02
MAX_GRACE_FACTOR = 5.0
#: The bound while shrinking (when the command's is longer): candidates are short runs of
#: operations that all returned in milliseconds in the original run.
SHRINK_OP_TIMEOUT_S = 1.0
#: The last resorts' exit status: a hang is a finding, as a divergence is (exit 1).
LAST_RESORT_EXIT_STATUS = 1
#: The GIL-held last resort fires when the watchdog could not run for this long, at least.
MIN_DEAD_MAN_S = 30.0

T = TypeVar("T")

_op_timeout_s = DEFAULT_OP_TIMEOUT_S


def op_timeout_s() -> float:
    """The bound of one call into the SUT now in force, in seconds (0: no bound)."""
    return _op_timeout_s


def shrink_op_timeout_s() -> float:
    """The bound for shrinking: the one in force, at most ``SHRINK_OP_TIMEOUT_S``."""
    limit_s = op_timeout_s()
    return min(limit_s, SHRINK_OP_TIMEOUT_S) if limit_s > 0 else 0.0


@contextlib.contextmanager
def op_timeout(limit_s: float) -> Iterator[None]:
    """Within the block, runs that start bound each SUT call by ``limit_s`` (0: off)."""
    global _op_timeout_s
    assert limit_s >= 0, limit_s
    saved = _op_timeout_s
    _op_timeout_s = limit_s
    try:
        yield
    finally:
        _op_timeout_s = saved


def running_s() -> float:
    """``time.monotonic()`` less the time this process was stopped by Ctrl-Z: the clock of
    the calls' deadlines, for a wait bounded by the liveness bound elsewhere (the process
    mode's pipe)."""
    return time.monotonic() - _stopped_s


class OperationHang(BaseException):
    """A call into the SUT did not return within the bound. Raised in the thread that made
    the call (by the watchdog's signal, or by the process mode's proxy)."""

    def __init__(self, what: str, limit_s: float) -> None:
        super().__init__(f"{what} did not return within {limit_s:g} s")
        self.what = what
        self.limit_s = limit_s

    def __reduce__(self) -> tuple[Any, ...]:
        return (OperationHang, (self.what, self.limit_s))

    @property
    def detail(self) -> str:
        """What a failure report says of it."""
        return (
            f"{self} (the liveness bound, --op-timeout-s): the implementation deadlocked "
            "or is stuck"
        )


#: Seconds this process spent stopped by Ctrl-Z (SIGTSTP, ``_Watchdog._on_stop_key``):
#: left out of the calls' deadlines, which are on ``time.monotonic()`` less this.
_stopped_s = 0.0
#: How long a Ctrl-Z waits for the watchdog's lock (held for microseconds, unless the main
#: thread was stopped while holding it: then it stops without it).
_STOP_LOCK_WAIT_S = 0.5

#: A call in progress: (its deadline on ``time.monotonic()`` less ``_stopped_s``, what it
#: is).
_Call = tuple[float, str]


class CallBound:
    """Bounds the calls one run makes into the SUT: ``call(what, fn, *args)``.

    ``activate()`` before the run's first call and ``deactivate()`` after its last (or use
    it as a context manager); in between, the watchdog watches its calls. ``limit_s`` None
    takes the bound in force (``op_timeout_s()``); 0 bounds nothing."""

    __slots__ = (
        "__weakref__", "_active", "_fired", "_probe", "_thread_id", "current", "limit_s"
    )

    def __init__(self, limit_s: float | None = None) -> None:
        self.limit_s = op_timeout_s() if limit_s is None else limit_s
        assert self.limit_s >= 0, self.limit_s
        #: The call in progress (read by the watchdog thread and the signal handler).
        self.current: _Call | None = None
        #: The call the watchdog signalled, and when (its own thread writes this).
        self._fired: tuple[_Call, float] | None = None
        #: An overrun call still computing: (the call, its thread's CPU clock when it
        #: overran, at the watchdog's last look) (its own thread writes this).
        self._probe: tuple[_Call, float, float] | None = None
        self._thread_id = threading.get_ident()
        self._active = False

    def call(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, or ``OperationHang`` when it runs past the bound."""
        self.current = (time.monotonic() - _stopped_s + self.limit_s, what)
        try:
            return fn(*args)
        finally:
            self.current = None

    def activate(self) -> CallBound:
        if self.limit_s > 0 and not self._active:
            self._active = True
            self._thread_id = threading.get_ident()
            _WATCHDOG.add(self)
        return self

    def deactivate(self) -> None:
        if self._active:
            self._active = False
            _WATCHDOG.discard(self)

    def __enter__(self) -> CallBound:
        return self.activate()

    def __exit__(self, *_exc: object) -> None:
        self.deactivate()

    @property
    def in_main_thread(self) -> bool:
        return self._thread_id == threading.main_thread().ident

    def check(self, now: float) -> float:
        """The watchdog's look at this bound: interrupt an overrun call (or, when that did
        not help, end the process); return when to look again."""
        call = self.current
        if call is None:
            return now + self.limit_s
        deadline, what = call
        if now < deadline:
            return deadline
        fired = self._fired
        if fired is None or fired[0] is not call:
            look_again = self._grace(call, now)
            if look_again is not None:
                return look_again
            self._fired = (call, now)
            if self.in_main_thread and hasattr(signal, "pthread_kill"):
                signal.pthread_kill(self._thread_id, signal.SIGALRM)
            return now + self.limit_s
        if now - fired[1] < self.limit_s:
            return fired[1] + self.limit_s
        _last_resort(what, self.limit_s, self.in_main_thread)
        raise AssertionError("unreachable: the process has exited")  # pragma: no cover

    def _grace(self, call: _Call, now: float) -> float | None:
        """When to look again at an overrun call that is still computing (its thread's CPU
        clock moved since the last look), or None when it is stuck: it has used no CPU for
        a probe interval, or another ``limit_s`` of CPU since it overran, or it has run
        ``MAX_GRACE_FACTOR`` times the bound past it."""
        cpu_s = _thread_cpu_s(self._thread_id)
        probe = self._probe
        if cpu_s is None:
            return None
        if probe is None or probe[0] is not call:
            self._probe = (call, cpu_s, cpu_s)
            return now + min(MAX_PROBE_S, self.limit_s / 5)
        _, overrun_cpu_s, last_cpu_s = probe
        probe_s = min(MAX_PROBE_S, self.limit_s / 5)
        computing = cpu_s - last_cpu_s >= MIN_PROGRESS_SHARE * probe_s
        within = (cpu_s - overrun_cpu_s < self.limit_s
                  and now - call[0] < MAX_GRACE_FACTOR * self.limit_s)
        if not (computing and within):
            return None
        self._probe = (call, overrun_cpu_s, cpu_s)
        return now + probe_s

    def interrupted(self) -> OperationHang | None:
        """In the signal handler: the hang to raise, if this bound's call is the one the
        watchdog signalled and it is still in progress."""
        fired, call = self._fired, self.current
        if fired is None or call is None or fired[0] is not call:
            return None
        return OperationHang(call[1], self.limit_s)


def _thread_cpu_s(thread_id: int) -> float | None:
    """The CPU time the thread ``thread_id`` has used, in seconds (None where the platform
    has no per-thread CPU clock, or the thread is gone)."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread_id))
    except (AttributeError, OSError):
        return None


def _last_resort(what: str, limit_s: float, main: bool) -> None:
    """A stuck call that could not be interrupted: say so, show every stack, exit."""
    why = (
        "and did not give way when interrupted (it waits in native code, or swallows BaseException)"
        if main
        else "in a thread other than the main one, which cannot be interrupted"
    )
    os.write(
        2,
        f"rmqsim: error: hang: {what} did not return within {limit_s:g} s {why}; exiting "
        f"(status {LAST_RESORT_EXIT_STATUS}). --crash-mode process reports such a hang "
        "with a trace.\n".encode(),
    )
    faulthandler.dump_traceback(file=2, all_threads=True)
    os._exit(LAST_RESORT_EXIT_STATUS)


@contextlib.contextmanager
def bounded_elsewhere(limit_s: float) -> Iterator[None]:
    """Within the block, the call in progress of this thread's bound (if any) is not
    bounded by the liveness bound: the block bounds itself within ``limit_s`` (a protocol
    server's process start and ``hello``, which have their own timeout). The block's time
    does not count against the call: after it, the call has the time it had left before.
    The block may run ``limit_s`` more, and the watchdog still ends it past that."""
    me = threading.get_ident()
    bound = next((b for b in _WATCHDOG.live() if b._thread_id == me and b.current), None)
    if bound is None or bound.current is None:
        yield
        return
    deadline, what = bound.current
    started = time.monotonic()
    bound.current = (deadline + limit_s, what)
    _WATCHDOG.wake()
    try:
        yield
    finally:
        bound.current = (deadline + (time.monotonic() - started), what)
        _WATCHDOG.wake()


class _Watchdog:
    """The process's one watchdog thread (a daemon, started with the first bound), and the
    SIGALRM and SIGTSTP handlers (installed while a bound of the main thread is active;
    SIGTSTP's only where it had its default action: ``_on_stop_key``)."""

    def __init__(self, *, dead_man: bool = True) -> None:
        #: Whether this process may use faulthandler's timer (not in a child forked while
        #: the parent's was armed: the timer's thread did not survive the fork, and
        #: re-arming or cancelling it would wait for that thread forever).
        self._dead_man = dead_man
        self._lock = threading.Lock()
        #: Copy-on-write, so that the signal handler reads it without the lock.
        self._bounds: tuple[weakref.ref[CallBound], ...] = ()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous_handler: Any = None
        self._handler_installed = False
        #: SIGTSTP's handler before ours, while ours is installed (None: not installed).
        self._previous_stop_handler: Any = None
        #: When the GIL-held last resort fires (``time.monotonic()``), if armed.
        self._dead_man_at: float | None = None

    def live(self) -> list[CallBound]:
        return [bound for ref in self._bounds if (bound := ref()) is not None]

    def add(self, bound: CallBound) -> None:
        with self._lock:
            self._bounds = (*self._bounds, weakref.ref(bound))
            if bound.in_main_thread and not self._handler_installed:
                self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
                self._handler_installed = True
                self._install_stop_key()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rmqsim-watchdog", daemon=True
                )
                self._thread.start()
            if self._dead_man_at is None:  # now: the first call may hold the GIL at once
                self._arm_dead_man(bound.limit_s, bound.limit_s)
        self._wake.set()

    def wake(self) -> None:
        """Look at the bounds now (a call's deadline moved)."""
        self._wake.set()

    def discard(self, bound: CallBound) -> None:
        with self._lock:
            self._bounds = tuple(ref for ref in self._bounds if ref() not in (None, bound))
            main_bounds = any(b.in_main_thread for b in self.live())
            if self._handler_installed and not main_bounds and _in_main_thread():
                signal.signal(signal.SIGALRM, self._previous_handler or signal.SIG_DFL)
                self._handler_installed = False
                self._restore_stop_key()
            if not self._bounds:
                # The wall-time timer must not outlive the runs: Ctrl-Z has its default
                # action again, and a process stopped so must not end when continued.
                self._disarm_dead_man()

    def _install_stop_key(self) -> None:
        """Take Ctrl-Z (SIGTSTP) where it would stop the process (its default action; an
        ignored or handled SIGTSTP is left alone), so that it stops it our way."""
        stop_key = getattr(signal, "SIGTSTP", None)
        if stop_key is not None and signal.getsignal(stop_key) == signal.SIG_DFL:
            self._previous_stop_handler = signal.signal(stop_key, self._on_stop_key)

    def _restore_stop_key(self) -> None:
        if self._previous_stop_handler is not None:
            signal.signal(signal.SIGTSTP, self._previous_stop_handler)
            self._previous_stop_handler = None

    def _on_stop_key(self, signum: int, frame: Any) -> None:
        """Ctrl-Z, as terminal programs take it: disarm the wall-time timer, stop with
        SIGSTOP, and when continued (``fg``, SIGCONT) leave the time stopped out of the
        calls' deadlines and re-arm it: a run suspended past the bound carries on. Under
        the lock, so that the watchdog thread cannot re-arm the timer in between."""
        global _stopped_s
        if self is not _WATCHDOG:  # a forked child's copy of its parent's: not this one's
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        locked = self._lock.acquire(timeout=_STOP_LOCK_WAIT_S)
        try:
            self._disarm_dead_man()
            stopped_at = time.monotonic()
            os.kill(os.getpid(), signal.SIGSTOP)
            _stopped_s += time.monotonic() - stopped_at
            bounds = self.live()
            if bounds:
                limit_s = max(bound.limit_s for bound in bounds)
                self._arm_dead_man(limit_s, limit_s)
        finally:
            if locked:
                self._lock.release()

    def _on_alarm(self, signum: int, frame: Any) -> None:
        for bound in self.live():
            hang = bound.interrupted()
            if hang is not None:
                raise hang
        previous = self._previous_handler
        if callable(previous):  # not ours: whoever handled SIGALRM before us
            previous(signum, frame)

    def _run(self) -> None:
        while True:
            self._wake.clear()
            pause_s: float | None = None  # None: until a bound is added
            # Under the lock: a bound cannot be discarded (and SIGALRM's handler restored,
            # perhaps to the default, which ends the process) between a check that fires
            # and its signal, nor added between finding none and disarming.
            with self._lock:
                bounds = self.live()
                if not bounds:
                    self._disarm_dead_man()
                else:
                    now = time.monotonic() - _stopped_s
                    look_at = min(bound.check(now) for bound in bounds)
                    pause_s = max(look_at - now, 0.001)
                    self._arm_dead_man(pause_s, max(bound.limit_s for bound in bounds))
            self._wake.wait(pause_s)

    def _arm_dead_man(self, pause_s: float, limit_s: float) -> None:
        """Exit (with every stack) if this thread does not run again well after its next
        planned look: then the GIL is held by a stuck call (see the module docstring).
        Re-armed only when it would fire too early (each arming starts a thread)."""
        grace_s = max(3 * limit_s, MIN_DEAD_MAN_S)
        now = time.monotonic()
        if not self._dead_man:
            return
        if self._dead_man_at is not None and self._dead_man_at >= now + pause_s + grace_s:
            return
        timeout_s = pause_s + 2 * grace_s
        faulthandler.dump_traceback_later(timeout_s, exit=True, file=2)
        self._dead_man_at = now + timeout_s

    def _disarm_dead_man(self) -> None:
        if self._dead_man_at is not None:
            faulthandler.cancel_dump_traceback_later()
            self._dead_man_at = None


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_WATCHDOG = _Watchdog()


def _reset_in_child() -> None:
    """A forked child has none of the parent's threads: it starts a watchdog of its own
    when it bounds its first call (the parent's runs are not its own), without the GIL
    last resort if the parent's timer was armed (see ``_Watchdog``)."""
    global _WATCHDOG
    parent = _WATCHDOG
    _WATCHDOG = _Watchdog(dead_man=parent._dead_man and parent._dead_man_at is None)
    if parent._previous_stop_handler is not None:  # Ctrl-Z stops the child as it would
        with contextlib.suppress(ValueError):  # else the stale handler: it only stops
            signal.signal(signal.SIGTSTP, parent._previous_stop_handler)


os.register_at_fork(after_in_child=_reset_in_child)
