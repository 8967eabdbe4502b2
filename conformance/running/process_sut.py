"""``--crash-mode process``: the SUT in a child process, crashed by a real SIGKILL.

In-process crashes stop the SUT by raising at a point and then calling its ``crash()``;
that trusts ``crash()`` to drop everything a killed process would lose. Here the queue runs
in a child process, and a crash is ``SIGKILL`` of that child at the armed point: whatever
the implementation buffered in memory (or in RocksDB's unsynced state of that process) is
really gone. Reopening starts a new child on the same path.

The child is the wire protocol's reference server (``conformance.wire.server``) over the
named Python factory, spoken to exactly as a server in any other language is
(``conformance.wire.client``; docs/PROTOCOL.md): every process-mode run proves the
protocol. An ``exec:`` implementation already lives in another process and is its own
process mode (as are the named drivers of real systems, ``--impl milvus``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqsim.conformance.adapter import (
    BUILTIN_IMPLS,
    BadImplError,
    Factory,
    builtin_impl_modules,
    load_factory,
)
from rmqsim.conformance.wire.client import (
    ChildDiedError,
    forked_factory,
)
from rmqsim.conformance.wire.server import serve_forked

__all__ = [
    "CRASH_MODES",
    "DEFAULT_CRASH_MODE",
    "ChildDiedError",
    "check_crash_mode",
    "process_factory",
]

CRASH_MODES = ("inprocess", "process")
DEFAULT_CRASH_MODE = "inprocess"


def process_factory(
    impl: object, serve: Callable[[Any, Any, str], None] = serve_forked
) -> Factory:
    """A factory opening ``impl`` (``MOD:FACTORY`` or a built-in name: the child imports it
    by name; or ``exec:COMMAND``) in a new child process each time; a factory object
    cannot cross to a child (``BadImplError``). ``serve``: the forked child's body (a
    module-level function wrapping ``serve_forked``)."""
    if not isinstance(impl, str):
        raise BadImplError("--crash-mode process needs --impl as MOD:FACTORY, not a factory object")
    factory = load_factory(impl)  # a bad name is the user's input: say so here, not in a child
    if getattr(factory, "rmqsim_hello", None) is not None:  # already a protocol server
        return factory
    return forked_factory(serve, impl, [*builtin_impl_modules(),
                                 BUILTIN_IMPLS.get(impl, impl).partition(":")[0],
                                 getattr(factory, "__module__", "") or "",
                                 serve.__module__])  # fmt: skip


def check_crash_mode(mode: str) -> str:
    if mode not in CRASH_MODES:
        raise BadImplError(f"--crash-mode must be one of {', '.join(CRASH_MODES)}, got {mode!r}")
    return mode
