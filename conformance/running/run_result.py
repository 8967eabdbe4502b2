"""What a run gives: its result (``RunResult``, built by ``build_result`` alone) and its
trace's lines (``TraceRender``, in the layer's ``StepCodec``), plus the checks a replay
makes against a recorded trace (``execute_recorded``, ``check_final_state``). Generic: no
layer is named here (``conformance.layer``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.crashing.crash_record import CrashRecord
from rmqsim.conformance.layer import (
    VERSIONED_PACKAGES,
    LayerLockstep,
    RunSpec,
    StepCodec,
    git_commit,
    layer_named,
    versions,
)
from rmqsim.conformance.running.lockstep import CRASHED, Divergence, PointPass, Stats, StepRecord
from rmqsim.conformance.running.trace import Trace, TraceFormatError, dumps
from rmqsim.conformance.searching.shrink_budget import ShrinkStats
from rmqsim.scenarios.queue.ops import Outcome, Step

__all__ = [
    "VERSIONED_PACKAGES",
    "CrashFlip",
    "RunResult",
    "TraceRender",
    "build_result",
    "check_final_state",
    "execute_recorded",
    "failed_at_final_check",
    "git_commit",
    "versions",
]


@dataclass(slots=True)
class RunResult:
    """The outcome of one run: what a report, a gate or a sweep row needs."""

    #: What was run (its trace's header): profile, seed, implementation, budget, ...
    spec: RunSpec
    status: str  # "ok" | "divergence"
    steps: int
    anomaly: str | None = None
    divergence: Divergence | None = None
    #: The trace: its lines, or what renders them on first use of ``trace_lines`` (a
    #: passing run's trace is rarely read: the gate drops it unread).
    trace: list[str] | TraceRender = field(default_factory=list)
    state_digest: str | None = None
    stats: Stats = field(default_factory=Stats)
    fault_points: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    sim_time_s: int = 0
    trace_path: Path | None = None
    #: Every crash point the SUT passed, in order (only when run with ``log_faults``).
    fault_log: list[PointPass] = field(default_factory=list)
    #: Reproduced only by replaying its trace (a crash-sweep case, a shrunk trace), not
    #: by re-running its seed.
    replay_only: bool = False
    #: The shrunk reproduction of a failing run, when it was shrunk
    #: (``conformance.searching.shrink``).
    shrunk: RunResult | None = None
    #: On a shrunk result: how the search that found it went.
    shrink_stats: ShrinkStats | None = None
    #: What a person reading the result should know beyond pass or fail (a replay whose
    #: crash resolved the other legal way: ``CrashFlip``).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def profile(self) -> str:
        return self.spec.profile

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def impl(self) -> str:
        return self.spec.impl

    @property
    def step_budget(self) -> int | None:
        return self.spec.steps

    @property
    def crash_rate(self) -> float:
        return self.spec.crash_rate

    @property
    def crash_mode(self) -> str:
        return self.spec.crash_mode

    @property
    def repro(self) -> str | None:
        """The command that reproduces this result, when it is not ``rmqsim run`` (fuzz,
        corpus)."""
        return self.spec.repro

    @repro.setter
    def repro(self, command: str | None) -> None:
        self.spec = self.spec.replace(repro=command)

    @property
    def trace_lines(self) -> list[str]:
        """The trace's JSON lines (rendered now if they were not yet)."""
        if isinstance(self.trace, TraceRender):
            self.trace = self.trace.lines()
        return self.trace

    @trace_lines.setter
    def trace_lines(self, lines: list[str]) -> None:
        self.trace = lines

    @property
    def trace_digest(self) -> str:
        text = "".join(line + "\n" for line in self.trace_lines)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    def repro_command(self) -> str:
        """The command line that repeats this run, its words quoted for a POSIX shell."""
        if self.repro is not None:
            return self.repro
        if self.replay_only:
            if self.trace_path is None:
                return "rmqsim replay <trace file>"
            return shlex.join(["rmqsim", "replay", str(self.trace_path)])
        parts = ["rmqsim", "run", "--profile", self.profile, "--seed", str(self.seed)]
        if self.impl != DEFAULT_IMPL:
            parts += ["--impl", self.impl]
        if self.step_budget is not None:
            parts += ["--steps", str(self.step_budget)]
        if self.crash_rate:
            parts += ["--crash-rate", str(self.crash_rate)]
        if self.crash_mode != "inprocess":
            parts += ["--crash-mode", self.crash_mode]
        return shlex.join(parts)


def _step_line(index: int, record: StepRecord, codec: StepCodec) -> str:
    step = record.step
    line: dict[str, Any] = {
        "type": "step",
        "i": index,
        "t": step.time_s,
        "actor": step.actor,
        "op": codec.encode_op(step.op),
        "outcome": None if record.outcome is None else _outcome_json(record.outcome, codec),
    }
    if record.crash is not None:
        line["crash"] = record.crash.to_json()
    if record.sut_outcome is not None:
        line["sut_outcome"] = _outcome_json(record.sut_outcome, codec)
    return dumps(line)


def _outcome_json(outcome: Outcome, codec: StepCodec) -> Any:
    try:
        return codec.encode_outcome(outcome)
    except (TypeError, ValueError):  # a SUT returned something outside the vocabulary
        return {"unencodable": repr(outcome)[:2000]}


@dataclass(frozen=True, slots=True)
class TraceRender:
    """What a run's trace lines are rendered from, when they are first asked for.

    Rendering costs ≈3 ms per smoke run of 300 steps (≈10 µs per operation, measured),
    which a passing gate run would spend for nothing. The records are values: the lines
    are the same whenever they are rendered, and this object pickles (the codec's
    functions are module-level ones).
    """

    header: dict[str, Any]
    records: list[StepRecord]
    end: dict[str, Any]
    codec: StepCodec

    def lines(self) -> list[str]:
        lines = [dumps(self.header)]
        for index, record in enumerate(self.records, start=1):
            lines.append(_step_line(index, record, self.codec))
        lines.append(dumps(self.end))
        return lines


def build_result(
    spec: RunSpec,
    lockstep: LayerLockstep,
    divergence: Divergence | None,
    *,
    started: float,
    header: dict[str, Any] | None = None,
) -> RunResult:
    """The result (and trace lines) of whatever ``lockstep`` executed for ``spec``: the one
    builder of ``RunResult``s, for seeded runs, replays, shrink candidates and the fuzzer.
    ``header``: the trace's header line (default: ``spec.to_header()``)."""
    records = lockstep.records
    final = None if divergence else lockstep.state_digest()
    status = "divergence" if divergence else "ok"
    anomaly = divergence.anomaly if divergence else None
    end = {
        "type": "end",
        "steps": lockstep.stats.steps,
        "status": status,
        "anomaly": anomaly,
        "state_digest": final,
    }
    header = spec.to_header() if header is None else dict(header)
    codec = layer_named(spec.layer).codec
    return RunResult(
        spec=spec,
        status=status,
        steps=lockstep.stats.steps,
        anomaly=anomaly,
        divergence=divergence,
        trace=TraceRender(header, list(records), end, codec),  # copies: fixed now
        state_digest=final,
        stats=lockstep.stats,
        fault_points=dict(lockstep.fault_points),
        wall_s=time.perf_counter() - started,
        sim_time_s=records[-1].step.time_s if records else 0,
        fault_log=list(lockstep.fault_log),
    )


def check_final_state(result: RunResult, trace: Trace, *, flipped: bool) -> RunResult:
    """``result``, failed with ``trace-mismatch`` at the last step if it passed but ended
    in another state than the one the trace's end line records (``state_digest``; a trace
    that ended in a divergence records none). Equal outcomes do not make equal states:
    the times of the steps, say, change what the queue holds and not what it returns.

    When a crash resolved the other legal way than recorded (``flipped``), the recorded
    state belongs to the other history: it is not compared (``CrashFlip``'s note says so)."""
    recorded = None if trace.end is None else trace.end.get("state_digest")
    if not result.ok or recorded is None or flipped or result.state_digest == recorded:
        return result
    detail = (
        f"the final state differs from the one the trace recorded (state_digest "
        f"{recorded} recorded, {result.state_digest} replayed): the trace was written by "
        "other code, or edited"
    )
    if not trace.steps:
        raise TraceFormatError(trace.path, trace.end_line, f"no steps, yet {detail}")
    last = trace.steps[-1]
    step = Step(last.time_s, last.actor, last.op)
    divergence = Divergence(
        anomaly="trace-mismatch", step_index=last.index, step=step, detail=detail
    )
    end = {
        "type": "end",
        "steps": result.steps,
        "status": "divergence",
        "anomaly": divergence.anomaly,
        "state_digest": None,
    }
    lines = result.trace_lines
    return dataclasses.replace(
        result,
        status="divergence",
        anomaly=divergence.anomaly,
        divergence=divergence,
        state_digest=None,
        trace=[*lines[:-1], dumps(end)],
    )


@dataclass(frozen=True, slots=True)
class CrashFlip:
    """A replay's SUT resolved a crash the other legal way than the recorded run's SUT."""

    index: int
    recorded: str  # "before" | "after"
    replayed: str

    def describe(self, final_state: bool = False) -> str:
        """The note; ``final_state``: the trace recorded a final state, not compared."""
        recorded = (
            "outcomes from there on and the final state_digest"
            if final_state
            else "outcomes from there on"
        )
        return (
            f"the crash armed for operation {self.index} resolved {self.replayed} it, where "
            f"the trace recorded {self.recorded} (SPEC: either is legal); the recorded "
            f"{recorded} belong to the other history and were not compared, "
            "the model and the implementation were"
        )


def _resolution(crash: CrashRecord | None, outcome: Outcome | None) -> str:
    """How a step with an armed crash ended: ``before`` (the operation did not happen:
    crashed) or ``after`` (it did, or the armed crash never fired)."""
    if crash is not None:
        return crash.resolved
    return "before" if outcome is not None and outcome.error == CRASHED else "after"


def execute_recorded(
    trace: Trace,
    execute: Callable[[Step], Outcome],
    *,
    crash_of: Callable[[], CrashRecord | None] | None = None,
    on_flip: Callable[[CrashFlip], None] | None = None,
) -> None:
    """``execute`` every recorded step; ``trace-mismatch`` at the first whose outcome (the
    model's) differs from the recorded one: the trace was written by other code.

    One exception, with ``crash_of`` (what crash the step just executed resolved, if one
    fired): a crash armed for an operation may leave the state before or after it, and
    which one is the implementation's choice. A trace recorded on one queue (a corpus
    file found on a buggy one, say) may see the other choice on another, or no crash at
    all where that queue has no such crash point. From such a step on, the recorded
    outcomes describe another legal history: they are no longer compared (the lockstep
    still compares the model and the SUT at every step), and ``on_flip`` hears of it at
    once (a divergence later in the run must be reported with it)."""
    flip: CrashFlip | None = None
    armed = False
    for recorded in trace.steps:
        step = Step(recorded.time_s, recorded.actor, recorded.op)
        outcome = execute(step)
        if armed and flip is None and crash_of is not None:
            was = _resolution(recorded.crash, recorded.outcome)
            now = _resolution(crash_of(), outcome)
            if was != now and recorded.outcome is not None:
                flip = CrashFlip(recorded.index, was, now)
                if on_flip is not None:
                    on_flip(flip)
        armed = recorded.op.kind == "arm_crash"
        if flip is None and recorded.outcome is not None and recorded.outcome != outcome:
            raise Divergence(
                anomaly="trace-mismatch",
                step_index=recorded.index,
                step=step,
                expected=recorded.outcome,
                actual=outcome,
                detail="the model's outcome differs from the one recorded in the trace "
                "(the trace was written by other code)",
            )


def failed_at_final_check(result: RunResult) -> bool:
    """Whether a failed run failed at its layer's final check (a divergence without
    outcomes), so that its trace holds every step; otherwise it failed at a step, and its
    trace stops there (replaying it with a final check that needs the whole run, as the
    consumer layer's does, would fail on any implementation)."""
    divergence = result.divergence
    assert divergence is not None, "only a failed run"
    return divergence.expected is None and divergence.actual is None
