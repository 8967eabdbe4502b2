"""Queues for the signal tests (``tests/test_signals.py``), as ``--impl MOD:FACTORY`` specs:
a queue that sends a signal to its own process when it is opened for the N-th time, so a
command is interrupted at an exact point of its work, not at a moment chosen by a timer."""

from __future__ import annotations

import os
import signal
from typing import Any

from tests.spark_impls import lost_write

#: ``SIGNAL@N``: send SIGNAL (``SIGTERM``, ``SIGINT``) when the N-th queue is opened.
SIGNAL_AT_ENV = "RMQSIM_TEST_SIGNAL_AT"

_opened = 0


def ctrl_c_default() -> None:
    """``preexec_fn`` of a child a test sends SIGINT to: SIGINT back to its default, as
    in a terminal's foreground. A test run started in the background of a script
    (``bash -c './scripts/test.sh &'``) has SIGINT ignored, and its children inherit that:
    Python then never raises ``KeyboardInterrupt`` in them, and the child runs on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def lost_write_then_signal(**kwargs: Any) -> Any:
    """A queue that loses the last message of a batch (``lost-write``; smoke seed 0 at its
    third operation), whose N-th opening signals this process (``SIGNAL_AT_ENV``)."""
    global _opened
    _opened += 1
    name, _, at = os.environ[SIGNAL_AT_ENV].partition("@")
    if _opened == int(at):
        os.kill(os.getpid(), signal.Signals[name])
    return lost_write(**kwargs)


lost_write_then_signal.rmqsim_layer = "queue"  # type: ignore[attr-defined]


class _SignalsWhenCollected:
    """An object whose finalizer signals this process and runs on (Python bytecode) until
    the handler has run: inside the finalizer, where CPython ignores what it raises."""

    def __init__(self, signum: signal.Signals) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        for _ in range(10_000):  # the handler runs between two of these bytecodes
            pass


def signal_in_a_finalizer(**kwargs: Any) -> Any:
    """Our queue, whose N-th opening (``SIGNAL_AT_ENV``) drops an object whose finalizer
    signals this process: the handler's exception is swallowed by the finalizer."""
    global _opened
    _opened += 1
    name, _, at = os.environ[SIGNAL_AT_ENV].partition("@")
    if _opened == int(at):
        _SignalsWhenCollected(signal.Signals[name])  # dropped at once: its __del__ runs
    from rmqsim.conformance.adapter import rocksmq_factory

    return rocksmq_factory(**kwargs)


signal_in_a_finalizer.rmqsim_layer = "queue"  # type: ignore[attr-defined]
