"""Ctrl-C and SIGTERM as exceptions (``signals_raise``), and one that a finalizer swallowed
raised again.

CPython runs a Python signal handler in the main thread between two bytecodes, whatever
runs there: a finalizer too (an object's ``__del__``, a weakref callback run by the
garbage collector). An exception the handler raises there cannot propagate: CPython prints
it as "Exception ignored in ..." and the command goes on as if the signal had never come
(a gate ran every seed to exit 0; after SIGTERM, whose handler sets the signal to be
ignored for the clean-up's sake, a second one would not have stopped it either).

So the handlers that ``signals_raise`` (below) installs ``record`` the
exception they raise, and the loops that take the longest call ``raise_if_interrupted``
before each next piece of work: the gate's runs and sweeps, ``rmqsim run``'s seeds, the
fuzzer's rounds, and every command that draws progress, at each update
(``conformance.cli.common.InterruptibleProgress``: a crash sweep's cases, a shrink's runs,
the mutants' kills, a Spark sweep's tasks). An interruption that was swallowed is raised
there, once the finalizer has returned; one that propagated has ended the loop already.
``clear`` forgets it (a command's start and end).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "Terminated",
    "clear",
    "interrupt_exit_code",
    "interrupt_signal",
    "pending",
    "raise_if_interrupted",
    "record",
    "signals_raise",
]

#: The interruption a signal handler raised last, until ``clear``.
_raised: list[KeyboardInterrupt] = []


def record(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """Note ``exc``, which a signal handler is about to raise, and return it."""
    _raised[:] = [exc]
    return exc


def pending() -> KeyboardInterrupt | None:
    """The interruption recorded since the last ``clear``, if any."""
    return _raised[0] if _raised else None


def raise_if_interrupted() -> None:
    """Raise the recorded interruption again, if there is one (see the module's doc), in
    the main thread only: the thread signals interrupt, and whose exception ends the
    command (a progress update from another thread, a Spark job's listener, passes)."""
    if _raised and threading.current_thread() is threading.main_thread():
        raise _raised[0]


def clear() -> None:
    """Forget the recorded interruption."""
    _raised.clear()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises ``KeyboardInterrupt`` (of which
    it is a kind, so that code which stops on Ctrl-C stops on it too): every ``with`` and
    ``finally`` on the way out runs, so temporary directories are removed, child processes
    killed, and a command can write what it has finished."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def interrupt_signal(exc: KeyboardInterrupt) -> signal.Signals:
    """The signal behind ``exc``: SIGTERM for ``Terminated``, else SIGINT (Ctrl-C)."""
    return signal.Signals(exc.signum) if isinstance(exc, Terminated) else signal.SIGINT


def interrupt_exit_code(exc: KeyboardInterrupt) -> int:
    """The shell's convention, 128 + the signal: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + interrupt_signal(exc)


def _raise_terminated(signum: int, _frame: Any) -> None:
    # One clean-up per process: a second SIGTERM must not cut the first one's short.
    signal.signal(signum, signal.SIG_IGN)
    raise record(Terminated(signum))


def _raise_interrupted(_signum: int, _frame: Any) -> None:
    """Ctrl-C: ``KeyboardInterrupt``, as Python's own handler raises it, recorded."""
    raise record(KeyboardInterrupt())


@contextmanager
def signals_raise(*signums: int) -> Iterator[None]:
    """Within the block, each of ``signums`` (default: SIGTERM) raises ``Terminated`` in
    the main thread, where by default it kills the process at once and leaves its
    temporary directories behind; and Ctrl-C, where Python's own handler has it, raises
    ``KeyboardInterrupt`` as that handler does. Both are ``record``ed: one that a finalizer
    swallowed is raised again by the longest loops. The block that installs the Ctrl-C
    recorder (the outermost) forgets the record at its start and end."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers (and receives signals)
        return
    chosen = signums or (signal.SIGTERM,)
    records_ctrl_c = (signal.SIGINT not in chosen
                      and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in chosen}
    if records_ctrl_c:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupted)
        clear()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if records_ctrl_c:
            clear()
