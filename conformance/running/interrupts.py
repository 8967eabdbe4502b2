"""An interruption (Ctrl-C, SIGTERM) that a finalizer swallowed is raised again.

CPython runs a Python signal handler in the main thread between two bytecodes, whatever
runs there: a finalizer too (an object's ``__del__``, a weakref callback run by the
garbage collector). An exception the handler raises there cannot propagate: CPython prints
it as "Exception ignored in ..." and the command goes on as if the signal had never come
(a gate ran every seed to exit 0; after SIGTERM, whose handler sets the signal to be
ignored for the clean-up's sake, a second one would not have stopped it either).

So the handlers that ``conformance.cli.common.signals_raise`` installs ``record`` the
exception they raise, and the loops that take the longest call ``raise_if_interrupted``
before each next piece of work: the gate's runs and sweeps, ``rmqsim run``'s seeds, the
fuzzer's rounds, and every command that draws progress, at each update
(``conformance.cli.common.InterruptibleProgress``: a crash sweep's cases, a shrink's runs,
the mutants' kills, a Spark sweep's tasks). An interruption that was swallowed is raised
there, once the finalizer has returned; one that propagated has ended the loop already.
``clear`` forgets it (a command's start and end).
"""

from __future__ import annotations

__all__ = ["clear", "pending", "raise_if_interrupted", "record"]

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
    """Raise the recorded interruption again, if there is one (see the module's doc)."""
    if _raised:
        raise _raised[0]


def clear() -> None:
    """Forget the recorded interruption."""
    _raised.clear()
