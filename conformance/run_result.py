"""What a run gives: its result (``RunResult``) and its trace's header and lines, plus the
checks a replay makes against a recorded trace (``execute_recorded``, ``check_final_state``).

Shared by the queue layer's runner (``conformance.run``) and the consumer layer's
(``conformance.consumer_run``), which builds on none of the other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.layer import VERSIONED_PACKAGES, git_commit, versions
from rmqsim.conformance.lockstep import CRASHED, Divergence, PointPass, Stats, StepRecord
from rmqsim.conformance.shrink_budget import ShrinkStats
from rmqsim.conformance.trace import FORMAT, FORMAT_VERSION, Trace, TraceFormatError, dumps
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.consumer_profiles import ConsumerProfile
from rmqsim.scenarios.ops import Outcome, Step, op_to_json, outcome_to_json
from rmqsim.scenarios.profiles import Profile

__all__ = [
    "VERSIONED_PACKAGES",
    "CrashFlip",
    "RunResult",
    "TraceRender",
    "check_final_state",
    "execute_recorded",
    "git_commit",
    "profile_header",
    "trace_header",
    "versions",
]


@dataclass(slots=True)
class RunResult:
    """The outcome of one run: what a report, a gate or a sweep row needs."""

    profile: str
    seed: int
    impl: str
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
    step_budget: int | None = None
    crash_rate: float = 0.0
    crash_mode: str = "inprocess"
    trace_path: Path | None = None
    #: Every crash point the SUT passed, in order (only when run with ``log_faults``).
    fault_log: list[PointPass] = field(default_factory=list)
    #: Reproduced only by replaying its trace (a crash-sweep case, a shrunk trace), not
    #: by re-running its seed.
    replay_only: bool = False
    #: The shrunk reproduction of a failing run, when it was shrunk (``conformance.shrink``).
    shrunk: RunResult | None = None
    #: On a shrunk result: how the search that found it went.
    shrink_stats: ShrinkStats | None = None
    #: The command that reproduces this result, when it is not ``rmqsim run`` (fuzz, corpus).
    repro: str | None = None
    #: What a person reading the result should know beyond pass or fail (a replay whose
    #: crash resolved the other legal way: ``CrashFlip``).
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

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


def trace_header(
    *,
    profile: str,
    profile_config: dict[str, Any],
    config: MQConfig,
    seed: int,
    impl: str,
    steps: int | None,
) -> dict[str, Any]:
    """The header line of a trace; every way of producing a trace (seeded runs, the
    fuzzer) writes this one shape so that ``replay`` reads them all."""
    return {
        "type": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "seed": seed,
        "profile": profile,
        "profile_config": profile_config,
        "config": dataclasses.asdict(config),
        "impl": impl,
        "steps": steps,
        "versions": versions(),
        "git_commit": git_commit(),
    }


def profile_header(
    profile: Profile | ConsumerProfile, seed: int, impl: str, steps: int | None
) -> dict[str, Any]:
    """The header of a run of ``profile`` (a queue or a consumer profile)."""
    return trace_header(
        profile=profile.name,
        profile_config=profile.to_json(),
        config=MQConfig(**profile.config),
        seed=seed,
        impl=impl,
        steps=steps,
    )


def _step_line(index: int, step: Step, outcome: Outcome | None, **extra: Any) -> str:
    line: dict[str, Any] = {
        "type": "step",
        "i": index,
        "t": step.time_s,
        "actor": step.actor,
        "op": op_to_json(step.op),
        "outcome": None if outcome is None else _outcome_json(outcome),
    }
    line.update({k: v for k, v in extra.items() if v is not None})
    return dumps(line)


def _outcome_json(outcome: Outcome) -> Any:
    try:
        return outcome_to_json(outcome)
    except (TypeError, ValueError):  # a SUT returned something outside the vocabulary
        return {"unencodable": repr(outcome)[:2000]}


@dataclass(frozen=True, slots=True)
class TraceRender:
    """What a run's trace lines are rendered from, when they are first asked for.

    Rendering costs ≈3 ms per smoke run of 300 steps (≈10 µs per operation, measured),
    which a passing gate run would spend for nothing. The records are values: the lines
    are the same whenever they are rendered, and this object pickles.
    """

    header: dict[str, Any]
    records: list[StepRecord]
    end: dict[str, Any]

    def lines(self) -> list[str]:
        lines = [dumps(self.header)]
        for index, record in enumerate(self.records, start=1):
            extra: dict[str, Any] = {"crash": record.crash}
            if record.sut_outcome is not None:
                extra["sut_outcome"] = _outcome_json(record.sut_outcome)
            lines.append(_step_line(index, record.step, record.outcome, **extra))
        lines.append(dumps(self.end))
        return lines


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
    divergence = Divergence("trace-mismatch", last.index, step, None, None, [], detail)
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


def _resolution(crash: dict[str, Any] | None, outcome: Outcome | None) -> str:
    """How a step with an armed crash ended: ``before`` (the operation did not happen:
    crashed) or ``after`` (it did, or the armed crash never fired)."""
    if crash is not None and crash.get("resolved") in ("before", "after"):
        return str(crash["resolved"])
    return "before" if outcome is not None and outcome.error == CRASHED else "after"


def execute_recorded(
    trace: Trace,
    execute: Callable[[Step], Outcome],
    *,
    crash_of: Callable[[], dict[str, Any] | None] | None = None,
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
                "trace-mismatch",
                recorded.index,
                step,
                recorded.outcome,
                outcome,
                [],
                "the model's outcome differs from the one recorded in the trace "
                "(the trace was written by other code)",
            )
