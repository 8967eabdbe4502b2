"""Run one seeded scenario (or replay one trace) in lockstep and collect the result.

Everything the trace holds is derived from the seed, the profile and the code; wall time
and temporary paths stay out of it, so the same seed gives a byte-identical trace.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import platform
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from conformance.adapter import (
    DEFAULT_IMPL,
    BadImplError,
    Factory,
    is_consumer_factory,
    queue_factory,
    resolve_impl,
)
from conformance.lockstep import CRASHED, Divergence, Lockstep, PointPass, Stats, StepRecord
from conformance.scratch import scratch_root
from conformance.shrink_budget import ShrinkStats
from conformance.statediff import state_digest
from conformance.trace import FORMAT, FORMAT_VERSION, Trace, TraceFormatError, dumps
from model.api import InvalidArgumentError, MQConfig
from scenarios.ops import Outcome, Step, op_to_json, outcome_to_json
from scenarios.profiles import Profile, get_profile, resolve
from scenarios.simulation import Simulation

#: Packages whose versions go into a trace header (they decide behaviour).
VERSIONED_PACKAGES = ("rmqsim", "rocksdict", "simpy", "hypothesis")


@functools.cache
def versions() -> dict[str, str]:
    """Versions of Python and the packages that decide a run's behaviour."""
    found = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


@functools.cache
def git_commit() -> str | None:
    """The commit of the rmqsim checkout, when it is one (None otherwise)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


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


def _header(profile: Profile, seed: int, impl: str, steps: int | None) -> dict[str, Any]:
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


def lockstep_result(
    lockstep: Lockstep, header: dict[str, Any], divergence: Divergence | None, started: float
) -> RunResult:
    """The result (and trace lines) of whatever ``lockstep`` executed: the one builder of
    trace lines for seeded runs, replays and the fuzzer."""
    last = lockstep.records[-1].step if lockstep.records else None
    final = None if divergence else state_digest(lockstep.model.snapshot())
    status = "divergence" if divergence else "ok"
    anomaly = divergence.anomaly if divergence else None
    end = {
        "type": "end",
        "steps": lockstep.stats.steps,
        "status": status,
        "anomaly": anomaly,
        "state_digest": final,
    }
    return RunResult(
        profile=header["profile"],
        seed=header["seed"],
        impl=header["impl"],
        status=status,
        steps=lockstep.stats.steps,
        anomaly=anomaly,
        divergence=divergence,
        trace=TraceRender(dict(header), list(lockstep.records), end),  # copies: fixed now
        state_digest=final,
        stats=lockstep.stats,
        fault_points={f"{k}:{p}": n for (k, p), n in lockstep.faults.seen.items()},
        wall_s=time.perf_counter() - started,
        sim_time_s=last.time_s if last else 0,
        step_budget=header.get("steps"),
        fault_log=lockstep.faults.log or [],
        crash_rate=header.get("crash_rate") or 0.0,
        crash_mode=header.get("crash_mode") or "inprocess",
        repro=header.get("repro"),
    )


def _lockstep_run(
    factory: Factory,
    config: MQConfig,
    header: dict[str, Any],
    check_every: int,
    body: Callable[[Lockstep], None],
    workdir: Path | None = None,
    *,
    log_faults: bool = False,
) -> RunResult:
    """Run ``body`` on a fresh Lockstep in a temporary directory, finish with the final
    full comparison, always release the SUT, and collect the result. A header's
    ``open_crash`` (``{"point", "hit"}``) arms a crash in the first open."""
    started = time.perf_counter()
    open_crash = header.get("open_crash")
    armed = None if open_crash is None else (open_crash["point"], open_crash["hit"])
    with tempfile.TemporaryDirectory(prefix="rmqsim-", dir=workdir or scratch_root()) as tmp:
        lockstep = Lockstep(
            factory,
            config,
            Path(tmp),
            check_every=check_every,
            log_faults=log_faults,
            open_crash=armed,
        )
        divergence: Divergence | None = None
        try:
            body(lockstep)
            if lockstep.records:
                lockstep.finish(lockstep.stats.steps, lockstep.records[-1].step)
        except Divergence as found:
            divergence = found
        finally:
            lockstep.close()
        return lockstep_result(lockstep, header, divergence, started)


def run_seed(
    profile_name: str,
    seed: int,
    *,
    impl: str | Factory = DEFAULT_IMPL,
    steps: int | None = None,
    check_every: int = 1,
    workdir: Path | None = None,
    log_faults: bool = False,
    crash_rate: float = 0.0,
    crash_mode: str = "inprocess",
) -> RunResult:
    """Run one scenario in lockstep against ``impl`` (``MOD:FACTORY`` or a factory) and
    return its result (with every crash point passed, if ``log_faults``). ``crash_rate``:
    probability of arming a crash before each state-changing operation. ``crash_mode``
    ``process``: the SUT runs in a child process, SIGKILLed at crashes
    (``conformance.process_sut``). A consumer profile
    runs in ``consumer_run``; a push consumer factory on a queue profile checks our queue
    (``--impl`` names either layer)."""
    from conformance.consumer_run import run_consumer_seed  # it imports this module
    from conformance.crash_rate import check_rate, with_crash_rate
    from scenarios.consumer_profiles import CONSUMER_PROFILES

    if profile_name in CONSUMER_PROFILES:
        if crash_mode != "inprocess":
            raise BadImplError("--crash-mode process applies to queue profiles only")
        return run_consumer_seed(profile_name, seed, impl=impl, steps=steps, workdir=workdir)
    profile = resolve(get_profile(profile_name), seed)
    spec: str | Factory = impl
    impl, factory = resolve_impl(impl)
    if is_consumer_factory(factory):
        spec, factory = DEFAULT_IMPL, resolve_impl(DEFAULT_IMPL)[1]
    header = _header(profile, seed, impl, steps)
    if check_rate(crash_rate):
        header["crash_rate"] = crash_rate
    factory = _with_crash_mode(header, crash_mode, spec, factory)

    def body(lockstep: Lockstep) -> None:
        execute = with_crash_rate(lockstep, seed, crash_rate) if crash_rate else lockstep.execute
        Simulation(profile, seed, steps=steps).run(execute)

    return _lockstep_run(
        factory,
        MQConfig(**profile.config),
        header,
        check_every,
        body,
        workdir,
        log_faults=log_faults,
    )


def replay_trace(
    trace: Trace,
    *,
    impl: str | Factory | None = None,
    check_every: int = 1,
    workdir: Path | None = None,
) -> RunResult:
    """Re-execute a trace on the model and the SUT; every recorded outcome must recur, and
    the final state the end line records (``check_final_state``).

    ``impl`` overrides the implementation named in the header.
    """
    spec = impl or trace.header.get("impl") or DEFAULT_IMPL
    try:
        impl, factory = queue_factory(spec, "replaying a queue trace")
    except BadImplError as exc:
        if impl:
            raise
        raise BadImplError(
            f"{trace.path}: the implementation its header names cannot be used ({exc}); "
            "give another with --impl"
        ) from None
    try:
        config = MQConfig(**trace.header["config"])
    except (TypeError, InvalidArgumentError) as exc:
        raise TraceFormatError(trace.path, 1, f"header config is not an MQConfig: {exc}") from None
    open_crash = trace.header.get("open_crash")
    if open_crash is not None and not (
        isinstance(open_crash, dict)
        and isinstance(open_crash.get("point"), str | None)
        and type(open_crash.get("hit")) is int
    ):
        raise TraceFormatError(trace.path, 1, "header open_crash must be {point, hit}")
    check_recorded_crashes(trace)

    header = dict(trace.header, impl=impl)
    factory = _with_crash_mode(header, header.pop("crash_mode", "inprocess"), spec, factory)

    flipped: list[CrashFlip] = []

    def body(lockstep: Lockstep) -> None:
        execute_recorded(
            trace, lockstep.execute, crash_of=lambda: _crash_of(lockstep), on_flip=flipped.append
        )

    result = _lockstep_run(factory, config, header, check_every, body, workdir)
    final_state = trace.end is not None and trace.end.get("state_digest") is not None
    result.notes.extend(flip.describe(final_state) for flip in flipped)
    return check_final_state(result, trace, flipped=bool(flipped))


#: The fields of a step's ``crash`` record (``Lockstep``: where the crash fired, and which
#: state it left: the one ``before`` the operation or the one ``after``).
CRASH_FIELDS = frozenset({"point", "hit", "resolved"})


def check_recorded_crashes(trace: Trace) -> None:
    """Each step's crash record is whole, and agrees with its outcome: a crash resolved
    ``before`` its operation has the outcome ``Crashed``, and only such a crash has it
    (else an edited ``resolved`` would pass for a crash resolved the other way, and stop
    the comparison of recorded outcomes: see ``execute_recorded``). TraceFormatError
    naming the step's line otherwise."""
    for step in trace.steps:
        crash = step.crash
        crashed = step.outcome is not None and step.outcome.error == CRASHED
        problem = None
        if crash is None:
            problem = f"outcome {CRASHED} without a crash record" if crashed else None
        elif set(crash) != CRASH_FIELDS:
            problem = "crash must hold exactly point, hit and resolved"
        elif type(crash["point"]) is not str or type(crash["hit"]) is not int:
            problem = "crash point must be a string and hit an integer"
        elif crash["resolved"] not in ("before", "after"):
            problem = f"crash resolved must be 'before' or 'after', got {crash['resolved']!r:.80}"
        elif step.outcome is not None and crashed != (crash["resolved"] == "before"):
            problem = (
                f"a crash resolved {crash['resolved']} the operation cannot have the outcome "
                f"{'error ' + str(step.outcome.error) if step.outcome.error else 'a value'} "
                f"(the outcome {CRASHED} is a crash resolved before it, and only that)"
            )
        if problem is not None:
            raise TraceFormatError(trace.path, step.line, f"step {step.index}: {problem}")


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


def _crash_of(lockstep: Lockstep) -> dict[str, Any] | None:
    """The crash the step just executed resolved (its record's), if one fired in it."""
    return lockstep.records[-1].crash if lockstep.records else None


def _with_crash_mode(
    header: dict[str, Any], mode: Any, spec: str | Factory, factory: Factory
) -> Factory:
    """The factory for ``mode`` (``inprocess`` or ``process``: ``spec`` must then be
    ``MOD:FACTORY``), noted in ``header`` only when not the default, so that in-process
    traces stay as they were."""
    from conformance.process_sut import check_crash_mode, process_factory

    if check_crash_mode(mode) == "inprocess":
        return factory
    header["crash_mode"] = mode
    return process_factory(spec)


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
