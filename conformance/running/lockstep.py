"""The lockstep runner: every operation goes to the reference model and to the SUT, and
the two must agree on the outcome and on the state.

One ``Lockstep`` owns one model, one SUT (reopened on the same path after each crash or
close), the simulated clock both read, and the faults hook handed to the SUT. ``execute``
is the callback a ``scenarios.Simulation`` drives and that replay and shrinking reuse, so
there is one checking code path for every way of running.

Snapshots: after every state-changing operation the touched topic is compared (the whole
state when the operation has no single topic, or when the SUT cannot snapshot part of its
state); the whole state is compared every ``full_check_every`` state-changing operations,
after every reopen and at the end. A partial comparison costs the touched topic only, so a
long run is not quadratic in the number of topics.

Liveness: every call into the SUT (operations, snapshots, opens, closes, crashes) goes
through a ``CallBound`` (``conformance.running.watchdog``); one that does not return within the
bound is the anomaly ``hang`` at the step that made it.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import BadImplError, Factory, checked_queue, forget_run_state
from rmqsim.conformance.crashing.crash_record import CrashRecord
from rmqsim.conformance.reporting.anomalies import (
    Before,
    classify_outcome,
    classify_state,
    is_protocol_error,
)
from rmqsim.conformance.running.apply import (
    RUNNER_KINDS,
    SUT_FAILURES,
    apply_op,
    error_outcome,
    exception_text,
)
from rmqsim.conformance.running.statediff import Difference, diff_states
from rmqsim.conformance.running.watchdog import CallBound, OperationHang
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MessageQueue, MQConfig, State
from rmqsim.scenarios.queue.ops import STATE_CHANGING, ArmCrash, GetLatest, Outcome, Step

__all__ = [
    "CRASHED",
    "DEFAULT_FULL_CHECK_EVERY",
    "MAX_DIFFS",
    "Divergence",
    "FaultInjector",
    "InjectedCrash",
    "Lockstep",
    "PointPass",
    "SimClock",
    "Stats",
    "StepRecord",
]

#: Compare the whole state at least this often (state-changing operations) by default.
DEFAULT_FULL_CHECK_EVERY = 64
#: A crash that does not resolve to before/after is still reported after this many diffs.
MAX_DIFFS = 40


#: The outcome error of an operation that a crash undid (it resolved to "before").
CRASHED = "Crashed"


class InjectedCrash(BaseException):
    """Raised by the faults hook to stop the SUT at a point. A ``BaseException`` so that an
    implementation's ``except Exception`` cannot swallow it."""

    def __init__(self, point: str, hit: int) -> None:
        super().__init__(f"injected crash at {point} (hit {hit})")
        self.point = point
        self.hit = hit


class SimClock:
    """The one clock model and SUT read: set by the runner to each step's time."""

    __slots__ = ("now_s",)

    def __init__(self, now_s: int = 0) -> None:
        self.now_s = now_s

    def __call__(self) -> int:
        return self.now_s


@dataclass(frozen=True, slots=True)
class PointPass:
    """One call of the faults hook: in which step (0 = the first open), during what
    (the operation's kind, ``open`` or ``close``), at which point, and which hit of that
    point within the operation (``ArmCrash(hit, point)`` before that step crashes there)."""

    step: int
    during: str
    point: str
    hit: int


class FaultInjector:
    """The ``faults`` hook handed to the SUT.

    It learns the points from the calls it sees (so a user's implementation with points of
    its own is covered) and, when armed with ``(point, hit)``, raises ``InjectedCrash`` at
    the ``hit``-th call of ``point`` (of any point when ``point`` is None) during the
    current operation. With ``log`` set it also records every call as a ``PointPass``: the
    list a crash sweep turns into one case each.
    """

    def __init__(self, *, log: bool = False) -> None:
        self.armed: tuple[str | None, int] | None = None
        self.op_kind = "open"
        self.calls_in_op = 0
        self.point_calls_in_op: dict[str, int] = {}
        #: (operation kind, point) -> how many times passed, in first-seen order.
        self.seen: dict[tuple[str, str], int] = {}
        #: The step being executed (0: the first open; None: after the run, not logged).
        self.step: int | None = 0
        #: Every call in order, when logging.
        self.log: list[PointPass] | None = [] if log else None
        #: The most calls one operation of each kind has made.
        self.max_calls: dict[str, int] = {}
        #: Set while the runner probes the SUT between operations (``_probe_closed``):
        #: calls are then not operations' points, so they are not counted, logged or fired.
        self.suspended = False

    def begin(self, op_kind: str) -> None:
        self.op_kind = op_kind
        self.calls_in_op = 0
        self.point_calls_in_op = {}

    def __call__(self, point: str) -> None:
        # Called at every point the SUT passes (a few per operation): plain dicts, no
        # Counter, since this is per-operation overhead of every run.
        if self.suspended:
            return
        calls = self.calls_in_op = self.calls_in_op + 1
        point_calls = self.point_calls_in_op
        hits = point_calls[point] = point_calls.get(point, 0) + 1
        op_kind = self.op_kind
        key = (op_kind, point)
        seen = self.seen
        seen[key] = seen.get(key, 0) + 1
        if calls > self.max_calls.get(op_kind, 0):
            self.max_calls[op_kind] = calls
        if self.log is not None and self.step is not None:
            self.log.append(PointPass(self.step, op_kind, point, hits))
        if self.armed is not None:
            want_point, hit = self.armed
            if (want_point is None and calls == hit) or (want_point == point and hits == hit):
                self.armed = None
                raise InjectedCrash(point, hit)


class Divergence(Exception):
    """The model and the SUT disagreed. Carries everything a report needs: the anomaly's
    name, the step (its 1-based index), the model's and the SUT's outcomes (None where
    there is none: a state check, a final check), the state differences and a detail.
    Built by keyword: ``Divergence(anomaly=..., step_index=..., step=..., ...)``."""

    def __init__(
        self,
        anomaly: str,
        step_index: int,
        step: Step[Any],  # an operation of the run's layer
        expected: Outcome | None = None,
        actual: Outcome | None = None,
        diffs: Sequence[Difference] = (),
        detail: str = "",
    ) -> None:
        super().__init__(f"{anomaly} at step {step_index} ({step.op.kind}): {detail}")
        self.anomaly = anomaly
        self.step_index = step_index
        self.step = step
        self.expected = expected
        self.actual = actual
        self.diffs = list(diffs[:MAX_DIFFS])
        self.detail = detail

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle as ``cls(*args)``, which this constructor cannot take; a
        # sweep's tasks send failing results (and their divergence) back to the driver.
        args = (self.anomaly, self.step_index, self.step, self.expected, self.actual)
        return (Divergence, (*args, self.diffs, self.detail))


@dataclass(slots=True)
class StepRecord:
    """What happened at one step, for the trace."""

    step: Step[Any]
    outcome: Outcome | None
    crash: CrashRecord | None = None
    sut_outcome: Outcome | None = None


@dataclass(slots=True)
class Stats:
    """Counters of one run (sweeps aggregate them)."""

    steps: int = 0
    op_counts: Counter[str] = field(default_factory=Counter)
    crashes_injected: int = 0
    reopens: int = 0
    full_checks: int = 0
    partial_checks: int = 0
    #: The operation cells the run's operations were in, for the layers that name them
    #: (the stream layer's ``conformance.stream.cells``).
    cells: Counter[str] = field(default_factory=Counter)


class Lockstep:
    """Drives the model and a SUT in lockstep; ``execute(step)`` is the only entry point."""

    def __init__(
        self,
        factory: Factory,
        config: MQConfig,
        workdir: Path,
        *,
        check_every: int = 1,
        full_check_every: int = DEFAULT_FULL_CHECK_EVERY,
        record: bool = True,
        log_faults: bool = False,
        open_crash: tuple[str | None, int] | None = None,
    ) -> None:
        """Each call into the SUT is bounded by the liveness bound in force when the
        lockstep is made (``conformance.running.watchdog.op_timeout``); ``close()`` ends that."""
        assert check_every >= 1 and full_check_every >= 1
        self.factory = factory
        self.config = config
        self.path = workdir / "sut"
        self.clock = SimClock()
        self.model = ReferenceMQ(config=config, clock=self.clock)
        self.faults = FaultInjector(log=log_faults)
        self.check_every = check_every
        self.full_check_every = full_check_every
        self.record = record
        self.records: list[StepRecord] = []
        self.stats = Stats()
        self._changes_since_full = 0
        self._changes_since_check = 0
        #: The model's outcome of the step being executed (recorded if it diverges).
        self._pending: Outcome | None = None
        #: Set when the first open crashed (``open_crash``): checked at the first step.
        self.open_crash_info: CrashRecord | None = None
        #: Set when opening again after that crash raised: reported at the first step.
        self.open_crash_failure: str | None = None
        #: Set when the first open raised: reported as a divergence at the first step.
        self.open_failure: str | None = None
        #: Set when the first open did not return (``hang`` at the first step).
        self.open_hang: str | None = None
        self.bound = CallBound().activate()
        self.sut: MessageQueue = _Unopened()  # type: ignore[assignment]  # until opened
        try:
            self._open_first(open_crash)
        except OperationHang as hang:
            self.open_hang = f"opening a fresh directory: {hang.detail}"
            self.sut = _Unopened()  # type: ignore[assignment]  # only crash() and close() are called
        except BaseException:  # no Lockstep to close(): stop watching its calls here
            self.bound.deactivate()
            raise
        self._partial = _snapshot_accepts(self.sut, "topics")
        self._tail = self._partial and _snapshot_accepts(self.sut, "messages_from")

    # ------------------------------------------------------------------ SUT lifecycle

    def _open_first(self, open_crash: tuple[str | None, int] | None) -> None:
        """Open the SUT on the fresh directory (crashing in the open when armed)."""
        self.faults.armed = open_crash
        try:
            self.sut = self._open()
        except InjectedCrash as crash:
            # The factory must release what it holds, as a killed process would; the
            # first step then checks that opening again gives the empty state.
            self.open_crash_info = CrashRecord(crash.point, crash.hit, "before")
            self.stats.crashes_injected += 1
            self.faults.armed = None
            try:
                self.sut = self._open()
            except BadImplError:
                raise
            except SUT_FAILURES as exc:  # reported as a divergence at the first step
                self.open_crash_failure = f"{type(exc).__name__}: {exception_text(exc)}"
                self.sut = _Unopened()  # type: ignore[assignment]  # only crash() and close() are called
        except BadImplError:
            raise
        except SUT_FAILURES as exc:
            # The queue cannot even be created in a fresh directory: the SUT's failure
            # (SPEC: opening a new path gives an empty queue), so a divergence with its
            # report and repro line, not an error of rmqsim's.
            self.open_failure = (f"opening a fresh directory raised {type(exc).__name__}: "
                                 f"{exception_text(exc)}")
            self.sut = _Unopened()  # type: ignore[assignment]  # only crash() and close() are called
        finally:
            self.faults.armed = None

    def _open(self) -> MessageQueue:
        self.faults.begin("open")
        sut = self.bound.call("open", self._call_factory)
        return checked_queue(sut, self.factory)

    def _call_factory(self) -> Any:
        return self.factory(
            path=self.path, config=self.config, clock=self.clock, faults=self.faults
        )

    def _reopen(self, index: int, step: Step, *, crash: bool) -> None:
        """Crash (or close) the SUT and open a new instance on the same path."""
        try:
            if crash:
                self.bound.call("crash()", self.sut.crash)  # type: ignore[attr-defined]  # checked_queue: it has
            else:
                self.faults.begin("close")
                self.bound.call("close()", self.sut.close)
                self._probe_closed(index, step)
        finally:
            self.stats.reopens += 1
        self.sut = self._open()

    def _probe_closed(self, index: int, step: Step) -> None:
        """SPEC: after ``close()`` every operation but ``close()`` raises NotServing, and
        checks run closed first, arguments next. Ask the closed SUT one read with an
        invalid name (so a queue that checks its arguments first shows too), and close it
        twice; the model, closed alike, says what is expected. Reads only: a queue that
        still serves must not change what the reopen then compares."""
        closed_model = self.model.fork()
        closed_model.close()
        probes: list[tuple[str, Callable[[MessageQueue], Outcome]]] = [
            ("get_latest_msg('') after close()", lambda mq: apply_op(mq, GetLatest(""))),
            ("a second close()", _closing),
        ]
        self.faults.suspended = True  # not an operation: no crash point inside it counts
        try:
            for what, probe in probes:
                expected, actual = probe(closed_model), self.bound.call(what, probe, self.sut)
                if actual != expected:
                    raise Divergence(
                        anomaly="error-mismatch",
                        step_index=index,
                        step=step,
                        expected=expected,
                        actual=actual,
                        detail=f"{what} answered otherwise than the closed model (SPEC: after "
                        "close(), every operation but close() raises NotServing; close() "
                        "twice is fine)",
                    )
        finally:
            self.faults.suspended = False

    def _recover(self, index: int, step: Step, *, crash: bool, doing: str) -> None:
        """``_reopen``, but a SUT that cannot come back is a divergence, not an error."""
        try:
            self._reopen(index, step, crash=crash)
        except (InjectedCrash, BadImplError, Divergence):
            raise
        except SUT_FAILURES as exc:
            raise _unrecoverable(
                index, step,
                f"{doing}, reopening raised {type(exc).__name__}: {exception_text(exc)}",
            ) from None

    def _reopen_step(self, index: int, step: Step, *, crash: bool) -> CrashRecord | None:
        """A ``crash_reopen``/``close_reopen`` step. A crash armed before it fires in the
        close or in the open (where an implementation may write); the SUT is then crashed
        and opened once more, and either way the state must be unchanged."""
        info: CrashRecord | None = None
        try:
            self._recover(index, step, crash=crash, doing=f"at {step.op.kind}")
        except InjectedCrash as injected:
            self.faults.armed = None
            self.stats.crashes_injected += 1
            info = CrashRecord(injected.point, injected.hit, "after")
            with contextlib.suppress(Exception):  # the half-closed (or unopened) instance
                self.bound.call("crash()", self.sut.crash)  # type: ignore[attr-defined]  # checked_queue: it has
            self._recover(
                index,
                step,
                crash=True,
                doing=f"after a crash at {injected.point} in {step.op.kind}",
            )
        finally:
            self.faults.armed = None
        self._compare(index, step, None, f"state after {step.op.kind}")
        return info

    def close(self) -> None:
        """Release the SUT (end of run) as a killed process would, with ``crash()``:
        nothing is checked after the last step, and a clean close would only flush files
        that the run's directory removal deletes (≈0.8 ms per run, measured). Clean
        closes are checked where they are operations (``close_reopen``). A crash still
        armed (the run ended on an ``arm_crash``) is disarmed first: it belongs to an
        operation that never came. A ``crash()`` that hangs is given up on (the run's
        result is already known); the watchdog stops watching this run."""
        self.faults.armed = None
        self.faults.step = None
        # A broken SUT must not hide the run's result.
        with contextlib.suppress(Exception, OperationHang):
            self.bound.call("crash()", self.sut.crash)  # type: ignore[attr-defined]  # checked_queue: it has
        self.bound.deactivate()
        with contextlib.suppress(Exception):  # the implementation's, after the verdict
            forget_run_state(self.sut, self.path)

    # ------------------------------------------------------------------ checks

    def _sut_snapshot(
        self, topics: list[str] | None = None, messages_from: dict[str, int] | None = None
    ) -> State:
        state = self.bound.call("snapshot()", self._read_sut, topics, messages_from)
        if not isinstance(state, State):  # the adapter's contract, not a state divergence
            raise BadImplError(
                f"snapshot() returned {type(state).__name__}, not model.api.State: build it "
                "with State.build(topics, groups)"
            )
        return state

    def _read_sut(self, topics: list[str] | None, messages_from: dict[str, int] | None) -> Any:
        if topics is None or not self._partial:
            return self.sut.snapshot()
        if messages_from is not None and self._tail:
            return self.sut.snapshot(topics=topics, messages_from=messages_from)  # type: ignore[call-arg]  # _tail
        return self.sut.snapshot(topics=topics)  # type: ignore[call-arg]  # _partial: it accepts topics

    def _compare(
        self,
        index: int,
        step: Step,
        topics: list[str] | None,
        note: str = "",
        messages_from: dict[str, int] | None = None,
    ) -> None:
        """Compare model and SUT state (within ``topics`` if given, and only messages from
        ``messages_from`` when the SUT supports it); raise ``Divergence`` on a difference."""
        if topics is None or not self._partial:
            self._full_check_done()
            topics = None
        else:
            self.stats.partial_checks += 1
        if not self._tail:
            messages_from = None
        expected = self.model.snapshot(topics=topics, messages_from=messages_from)
        try:
            actual = self._sut_snapshot(topics, messages_from)
        except BadImplError:
            raise
        except SUT_FAILURES as exc:
            raised = f"{type(exc).__name__}: {exception_text(exc)}"
            raise Divergence(
                anomaly="protocol-error" if is_protocol_error("unexpected:" + raised) else
                "outcome-mismatch",
                step_index=index,
                step=step,
                detail=f"snapshot() raised {raised}",
            ) from None
        if _equal(expected, actual, topics):
            return
        diffs = diff_states(expected, actual, topics)
        anomaly = classify_state(diffs, retention=step.op.kind == "run_retention")
        raise Divergence(
            anomaly=anomaly,
            step_index=index,
            step=step,
            diffs=diffs,
            detail=note or "states differ",
        )

    def _full_check_done(self) -> None:
        """Count a whole-state comparison (it resets the cadence) and check the model."""
        self.stats.full_checks += 1
        self._changes_since_full = 0
        self.model.check_invariants()

    def _before(self, op: Any) -> Before:
        topic = getattr(op, "topic", None)
        if not isinstance(topic, str):
            return Before(0, None, None)
        group = getattr(op, "group", "")
        peeked = self.model.peek(topic, group if isinstance(group, str) else "")
        return Before(0, None, None) if peeked is None else Before(*peeked)

    # ------------------------------------------------------------------ execution

    def execute(self, step: Step) -> Outcome:
        """Apply ``step`` to both sides, check, record; return the model's outcome."""
        self.stats.steps += 1
        index = self.stats.steps
        self.stats.op_counts[step.op.kind] += 1
        self.clock.now_s = step.time_s
        self._pending = None
        self.faults.step = index
        try:
            outcome, crash_info = self._checked_dispatch(index, step)
        except Divergence as divergence:
            if self.record:
                expected = divergence.expected or self._pending
                self.records.append(StepRecord(step, expected, None, divergence.actual))
            raise
        if self.record:
            self.records.append(StepRecord(step, outcome, crash_info))
        return outcome

    def _checked_dispatch(self, index: int, step: Step) -> tuple[Outcome, CrashRecord | None]:
        """``_dispatch``, after the first step's look at how the first open went; a call
        into the SUT that did not return is the divergence ``hang``."""
        try:
            if index == 1 and self.open_hang is not None:
                raise Divergence(anomaly="hang", step_index=index, step=step, detail=self.open_hang)
            if index == 1 and self.open_failure is not None:
                raise _unrecoverable(index, step, self.open_failure)
            if index == 1 and self.open_crash_info is not None:
                failure = self.open_crash_failure
                where = f"after a crash at {self.open_crash_info.point} in the first open"
                if failure is not None:
                    raise _unrecoverable(index, step, f"{where}, reopening raised {failure}")
                self._compare(index, step, None, f"state {where}")
            return self._dispatch(index, step)
        except OperationHang as hang:
            expected = self._pending  # a queue operation's: the model's outcome
            raise Divergence(
                anomaly="hang", step_index=index, step=step, expected=expected, detail=hang.detail
            ) from None

    def _dispatch(self, index: int, step: Step) -> tuple[Outcome, CrashRecord | None]:
        op = step.op
        kind = op.kind
        crash_info: CrashRecord | None = None
        if kind in RUNNER_KINDS:
            outcome = Outcome()
            if isinstance(op, ArmCrash):
                self.faults.armed = (op.point, op.hit)
            elif kind in ("crash_reopen", "close_reopen"):
                crash_info = self._reopen_step(index, step, crash=kind == "crash_reopen")
        else:
            outcome, crash_info = self._execute_queue_op(index, step)
        return outcome, crash_info

    def _execute_queue_op(self, index: int, step: Step) -> tuple[Outcome, CrashRecord | None]:
        op = step.op
        kind = op.kind
        armed = self.faults.armed is not None
        saved_model = self.model.fork() if armed else None
        before = self._before(op)
        expected = apply_op(self.model, op)
        self.faults.begin(kind)
        try:
            actual = self.bound.call(kind, apply_op, self.sut, op)
        except InjectedCrash as crash:
            assert saved_model is not None
            return self._resolve_crash(index, step, expected, saved_model, crash)
        except OperationHang:
            self._pending = expected  # the trace's step records the model's outcome
            raise
        finally:
            self.faults.armed = None
        self._pending = expected
        if expected != actual:
            anomaly = classify_outcome(kind, expected, actual, before)
            raise Divergence(
                anomaly=anomaly,
                step_index=index,
                step=step,
                expected=expected,
                actual=actual,
                detail="outcomes differ",
            )
        if kind in STATE_CHANGING:
            self._changes_since_full += 1
            self._changes_since_check += 1
            if self._changes_since_full >= self.full_check_every or kind == "run_retention":
                self._compare(index, step, None)
            elif self._changes_since_check >= self.check_every:
                self._changes_since_check = 0
                topic = getattr(op, "topic", None)
                if isinstance(topic, str):
                    # Only produce adds messages, all with ids above the old high-water
                    # mark; the rest are compared in full every full_check_every changes.
                    self._compare(index, step, [topic], messages_from={topic: before.last_id + 1})
                else:
                    self._compare(index, step, None)
        return expected, None

    def _resolve_crash(
        self,
        index: int,
        step: Step,
        expected: Outcome,
        saved_model: ReferenceMQ,
        crash: InjectedCrash,
    ) -> tuple[Outcome, CrashRecord]:
        """The SUT stopped inside an operation: crash it, reopen, and require the state to
        equal the model's state before or after that operation (SPEC "Durability")."""
        self.stats.crashes_injected += 1
        doing = f"after a crash at {crash.point} (hit {crash.hit})"
        self._recover(index, step, crash=True, doing=doing)
        try:
            actual = self._sut_snapshot()
        except BadImplError:
            raise
        except SUT_FAILURES as exc:
            detail = f"{doing}, snapshot() raised {type(exc).__name__}: {exception_text(exc)}"
            raise _unrecoverable(index, step, detail, expected) from None
        after = self.model.snapshot()
        if actual == after:
            info = CrashRecord(crash.point, crash.hit, "after")
            outcome = expected
        elif actual == saved_model.snapshot():
            info = CrashRecord(crash.point, crash.hit, "before")
            self.model = saved_model
            outcome = Outcome(error=CRASHED)
        else:
            diffs = diff_states(after, actual)
            before_diffs = diff_states(saved_model.snapshot(), actual)
            raise Divergence(
                anomaly="torn-operation",
                step_index=index,
                step=step,
                expected=expected,
                diffs=diffs if len(diffs) <= len(before_diffs) else before_diffs,
                detail=f"after a crash at {crash.point} (hit {crash.hit}) the state is neither "
                "before nor after the operation",
            )
        # ``actual`` was just compared in full with the state the model now holds; reading
        # the SUT again would compare the same state twice.
        self._full_check_done()
        return outcome, info

    def finish(self, index: int, step: Step) -> State:
        """Final full comparison; returns the final (model) state."""
        self.faults.armed = None
        self._compare(index, step, None, "final state")
        return self.model.snapshot()


def _unrecoverable(
    index: int, step: Step, detail: str, expected: Outcome | None = None
) -> Divergence:
    """The SUT cannot be reopened (or read) after a crash or a close."""
    return Divergence(
        anomaly="unrecoverable", step_index=index, step=step, expected=expected, detail=detail
    )


def _closing(mq: MessageQueue) -> Outcome:
    """The outcome of ``close()`` (the closed-queue probe's second close)."""
    try:
        mq.close()
    except SUT_FAILURES as exc:
        return error_outcome(exc)
    return Outcome()


class _Unopened:
    """Stands for a SUT that could not be opened again after a crash in its first open."""

    def close(self) -> None:
        pass

    def crash(self) -> None:
        pass


def _equal(expected: State, actual: State, topics: list[str] | None) -> bool:
    if expected == actual:  # the common case, also for a partial state that holds just ``topics``
        return True
    if topics is None:
        return False
    for topic in topics:
        if expected.topics.get(topic) != actual.topics.get(topic):
            return False
    want = {k: v for k, v in expected.groups.items() if k[0] in topics}
    got = {k: v for k, v in actual.groups.items() if k[0] in topics}
    return want == got


def _snapshot_accepts(sut: object, parameter: str) -> bool:
    """Whether ``sut.snapshot`` accepts ``parameter`` (optional extensions of the protocol:
    ``topics=`` and ``messages_from=``)."""
    try:
        return parameter in inspect.signature(sut.snapshot).parameters  # type: ignore[attr-defined]  # sut: object
    except (TypeError, ValueError, AttributeError):
        return False
