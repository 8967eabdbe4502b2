"""``--crash-mode process``: the SUT in a child process, crashed by a real SIGKILL.

In-process crashes stop the SUT by raising at a point and then calling its ``crash()``;
that trusts ``crash()`` to drop everything a killed process would lose. Here the queue runs
in a child process behind a small request/response protocol over a pipe, and a crash is
``SIGKILL`` of that child at the armed point: whatever the implementation buffered in
memory (or in RocksDB's unsynced state of that process) is really gone. Reopening starts a
new child on the same path.

The parent keeps the lockstep's ``FaultInjector``. Each request carries the simulated time
(the child's clock returns it) and the armed ``(point, hit)`` with how many calls of it the
current operation already made; the child counts the calls itself and, at the armed one,
reports the points it passed and kills itself. Every reply carries the points passed, and
the parent feeds them through its own hook in order: the hook learns the points (``seen``,
the sweep's log) exactly as in process, and raises ``InjectedCrash`` at the same call, so
``Lockstep`` resolves the crash unchanged. A child that dies anywhere else raises
``ChildDiedError`` (an ``Exception``: the lockstep reports it as the SUT's outcome, or as
``unrecoverable`` when reopening). A child that does not answer within the liveness bound
(``conformance.watchdog.op_timeout_s()``, ``--op-timeout-s``) is killed, and the call
raises ``OperationHang``: the anomaly ``hang``, whatever the child was stuck in.

Arguments and results cross the pipe pickled: this is IPC between two processes of rmqsim,
never storage; traces stay JSON.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import BadImplError, Factory, FaultHook, load_factory
from rmqsim.conformance.watchdog import OperationHang, op_timeout_s, running_s
from rmqsim.model.api import (
    Clock,
    ConsumerMessage,
    MessageQueue,
    MQConfig,
    NotServingError,
    ProducerMessage,
    State,
)

__all__ = [
    "CRASH_MODES",
    "DEFAULT_CRASH_MODE",
    "FORWARDED",
    "JOIN_TIMEOUT_S",
    "Arm",
    "ChildDiedError",
    "ProcessQueue",
    "check_crash_mode",
    "child_main",
    "process_factory",
]

#: ``_dead`` of a proxy whose queue was closed (not crashed, not killed).
_CLOSED = "was closed"

CRASH_MODES = ("inprocess", "process")
DEFAULT_CRASH_MODE = "inprocess"
#: How long reaping a killed (or closing) child may take.
JOIN_TIMEOUT_S = 30.0

#: The queue methods forwarded to the child.
FORWARDED = (
    "create_topic",
    "destroy_topic",
    "create_consumer_group",
    "destroy_consumer_group",
    "exist_consumer_group",
    "produce",
    "consume",
    "seek",
    "seek_to_latest",
    "get_latest_msg",
    "run_retention",
)

#: (point or None, hit, calls of it already made in the current operation), or None.
Arm = tuple[str | None, int, int] | None


class ChildDiedError(RuntimeError):
    """The SUT's child process died (or stopped answering) other than at an armed point."""


# ---------------------------------------------------------------------------- child side


class _ChildFaults:
    """The hook the SUT gets in the child: counts calls, kills the process when armed."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.arm: Arm = None
        self.calls = 0
        self.passed: list[str] = []

    def reset(self, arm: Arm) -> None:
        self.arm = arm
        self.calls = 0
        self.passed = []

    def __call__(self, point: str) -> None:
        self.passed.append(point)
        if self.arm is None:
            return
        want, hit, already = self.arm
        if want is None:
            reached = already + len(self.passed) == hit
        else:
            reached = point == want and already + self.passed.count(point) == hit
        if reached:
            self.conn.send(("killed", None, self.passed))
            os.kill(os.getpid(), signal.SIGKILL)


class _ChildClock:
    __slots__ = ("now_s",)

    def __init__(self) -> None:
        self.now_s = 0

    def __call__(self) -> int:
        return self.now_s


def _reply(conn: Connection, status: str, value: Any, passed: list[str]) -> None:
    try:
        conn.send((status, value, passed))
    except Exception as exc:  # an unpicklable result or error: send what it was
        error = RuntimeError(f"cannot send {type(value).__name__} to the parent: {exc}")
        conn.send(("error", error, passed))


def child_main(conn: Connection, impl: str, path: str, config: MQConfig) -> None:
    """The child's loop: open the queue, then serve requests until close (or a kill)."""
    clock = _ChildClock()
    faults = _ChildFaults(conn)
    _, _, _, now_s, arm = conn.recv()
    clock.now_s = now_s
    faults.reset(arm)
    try:
        sut = load_factory(impl)(path=Path(path), config=config, clock=clock, faults=faults)
        features = _snapshot_features(sut)
    except BaseException as exc:
        _reply(conn, "error", exc, faults.passed)
        return
    _reply(conn, "ok", features, faults.passed)
    while True:
        try:
            method, args, kwargs, now_s, arm = conn.recv()
        except EOFError:  # the parent is gone
            return
        clock.now_s = now_s
        faults.reset(arm)
        try:
            value = getattr(sut, method)(*args, **kwargs)
        except BaseException as exc:
            _reply(conn, "error", exc, faults.passed)
        else:
            if isinstance(value, State):  # its read-only mappings do not pickle
                _reply(conn, "state", (dict(value.topics), dict(value.groups)), faults.passed)
            else:
                _reply(conn, "ok", value, faults.passed)
        if method == "close":
            return


def _snapshot_features(sut: object) -> tuple[str, ...]:
    import inspect

    try:
        parameters = inspect.signature(sut.snapshot).parameters  # type: ignore[attr-defined]  # sut: object
    except (TypeError, ValueError, AttributeError):
        return ()
    return tuple(name for name in ("topics", "messages_from") if name in parameters)


# ---------------------------------------------------------------------------- parent side


def _context() -> Any:
    """Forkserver where there is one (a fork of a server that imported rmqsim and the
    implementation: milliseconds per child instead of a fresh interpreter), else spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


_LIVE: weakref.WeakSet[ProcessQueue] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """Safety net: no child outlives the parent."""
    for proxy in list(_LIVE):
        proxy.crash()


class ProcessQueue:
    """A ``MessageQueue`` whose calls run in a child process; ``crash()`` SIGKILLs it."""

    def __init__(
        self, impl: str, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> None:
        self.impl = impl
        self._clock = clock
        self._faults = faults
        self._conn, child_conn = _context().Pipe()
        self.process = _context().Process(
            target=child_main, args=(child_conn, impl, str(path), config), daemon=True
        )
        self.process.start()
        child_conn.close()
        _LIVE.add(self)
        self._dead: str | None = None
        try:
            features = self._call("open", (), {})
        except BaseException:  # an error or a crash in open: nothing of the child stays
            self.crash()
            raise
        # The proxy's snapshot takes the arguments the child's takes: the lockstep reads
        # its signature to know which partial snapshots it may ask for.
        if "topics" not in features:
            self.snapshot = self._full_snapshot  # type: ignore[method-assign,assignment]  # narrower on purpose (above)
        elif "messages_from" not in features:
            self.snapshot = self._topics_snapshot  # type: ignore[method-assign,assignment]  # narrower on purpose (above)

    # -- protocol

    def _arm(self) -> Arm:
        armed = getattr(self._faults, "armed", None)
        if armed is None:
            return None
        want, hit = armed
        faults: Any = self._faults
        calls = faults.calls_in_op if want is None else faults.point_calls_in_op.get(want, 0)
        return (want, hit, calls)

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._dead == _CLOSED:
            # The child closed its queue and exited; this proxy is that closed queue, and
            # answers as SPEC says a closed queue does (so in process mode the lockstep's
            # probe after close() checks the proxy, not the child's queue).
            raise NotServingError("the queue is closed")
        if self._dead is not None:
            raise ChildDiedError(self._dead)
        limit_s = op_timeout_s()
        try:
            self._conn.send((method, args, kwargs, self._clock(), self._arm()))
            # Twice the bound: the lockstep's own bound on this call (which looks at the
            # calling thread first: slow is not stuck) speaks first; this wait is what
            # ends a call that no bound watches.
            if not self._answers_within(2 * limit_s):
                self._hung(method, limit_s)
            status, value, passed = self._conn.recv()
        except (EOFError, OSError):
            self._died(f"died during {method}")
        if status == "killed":
            self._reap()
            self._dead = f"was killed at an armed crash point during {method}"
        self._pass(passed)
        if status == "killed":  # the parent's injector must have raised at the last point
            raise ChildDiedError(f"the child crashed at {passed[-1]!r}, not armed in the parent")
        if status == "error":
            raise value
        if status == "state":
            return State.build(*value)
        return value

    def _answers_within(self, wait_s: float) -> bool:
        """Whether the child's answer came within ``wait_s`` (0: no limit) of running time:
        a Ctrl-Z in the wait (``watchdog.running_s``) does not count against it."""
        if not wait_s:
            return self._conn.poll(None)
        deadline_s = running_s() + wait_s
        while (left_s := deadline_s - running_s()) > 0:
            if self._conn.poll(left_s):
                return True
        return self._conn.poll(0)

    def _pass(self, passed: list[str]) -> None:
        if self._faults is not None:
            for point in passed:
                self._faults(point)

    def _died(self, what: str) -> None:
        self.crash()
        self._dead = f"the SUT's child process (pid {self.process.pid}) {what}"
        self._dead += f" (exit code {self.process.exitcode})"
        raise ChildDiedError(self._dead)

    def _hung(self, method: str, limit_s: float) -> None:
        """The child did not answer within the bound: kill it, and the call hangs."""
        self.crash()
        self._dead = (
            f"the SUT's child process (pid {self.process.pid}) did not answer {method} within "
            f"{limit_s:g} s and was killed"
        )
        raise OperationHang(method, limit_s)

    def _reap(self) -> None:
        self.process.join(JOIN_TIMEOUT_S)
        if self.process.is_alive():  # pragma: no cover - a kill that did not take
            self.process.kill()
            self.process.join(JOIN_TIMEOUT_S)
        self._conn.close()
        _LIVE.discard(self)

    # -- lifecycle

    def crash(self) -> None:
        """SIGKILL the child (if still alive) and reap it: nothing more is written."""
        if self.process.is_alive():
            self.process.kill()
        self._reap()
        self._dead = self._dead or "was crashed"

    def close(self) -> None:
        if self._dead is None:
            try:
                self._call("close", (), {})
            finally:
                self._dead = _CLOSED
        self._reap()

    # -- the queue

    def snapshot(
        self, topics: list[str] | None = None, messages_from: dict[str, int] | None = None
    ) -> State:
        return self._call("snapshot", (), {"topics": topics, "messages_from": messages_from})

    def _topics_snapshot(self, topics: list[str] | None = None) -> State:
        return self._call("snapshot", (), {"topics": topics})

    def _full_snapshot(self) -> State:
        return self._call("snapshot", (), {})

    def create_topic(self, topic: str) -> None:
        self._call("create_topic", (topic,), {})

    def destroy_topic(self, topic: str) -> None:
        self._call("destroy_topic", (topic,), {})

    def create_consumer_group(self, topic: str, group: str) -> None:
        self._call("create_consumer_group", (topic, group), {})

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        self._call("destroy_consumer_group", (topic, group), {})

    def exist_consumer_group(self, topic: str, group: str) -> bool:
        return self._call("exist_consumer_group", (topic, group), {})

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        return self._call("produce", (topic, messages), {})

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        return self._call("consume", (topic, group, n), {})

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        self._call("seek", (topic, group, msg_id), {})

    def seek_to_latest(self, topic: str, group: str) -> None:
        self._call("seek_to_latest", (topic, group), {})

    def get_latest_msg(self, topic: str) -> int:
        return self._call("get_latest_msg", (topic,), {})

    def run_retention(self) -> Any:
        return self._call("run_retention", (), {})


def process_factory(impl: object) -> Factory:
    """A factory opening ``impl`` (``MOD:FACTORY``: the child imports it by name) in a new
    child process each time; a factory object cannot cross to a child (``BadImplError``)."""
    if not isinstance(impl, str):
        raise BadImplError("--crash-mode process needs --impl as MOD:FACTORY, not a factory object")
    load_factory(impl)  # a bad name is the user's input: say so here, not in a child
    _preload(impl)

    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue:
        return ProcessQueue(impl, path, config, clock, faults)

    return factory


def _preload(impl: str) -> None:
    """Have the fork server import the implementation once, so that a child costs a fork
    (~7 ms here) and not imports (~45 ms; ``impl`` too, which our adapter imports lazily).
    It takes effect when the server starts, i.e. before the first child; ``__main__`` is
    preloaded so that a child does not re-run the main module's imports either."""
    context = _context()
    if context.get_start_method() == "forkserver":
        modules = ["__main__", __name__, "impl", impl.partition(":")[0]]
        context.set_forkserver_preload(list(dict.fromkeys(modules)))


def check_crash_mode(mode: str) -> str:
    if mode not in CRASH_MODES:
        raise BadImplError(f"--crash-mode must be one of {', '.join(CRASH_MODES)}, got {mode!r}")
    return mode
