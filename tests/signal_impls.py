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
