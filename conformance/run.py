"""Run one seeded scenario (or replay one trace) in lockstep and collect the result.

Everything the trace holds is derived from the seed, the profile and the code; wall time
and temporary paths stay out of it, so the same seed gives a byte-identical trace.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from rmqsim.conformance.adapter import (
    DEFAULT_IMPL,
    BadImplError,
    Factory,
    is_consumer_factory,
    queue_factory,
    resolve_impl,
)
from rmqsim.conformance.consumer_run import is_consumer_header, replay_consumer, run_consumer_seed
from rmqsim.conformance.crash_rate import check_rate, with_crash_rate
from rmqsim.conformance.lockstep import CRASHED, Divergence, Lockstep
from rmqsim.conformance.run_result import (
    VERSIONED_PACKAGES,
    CrashFlip,
    RunResult,
    TraceRender,
    check_final_state,
    execute_recorded,
    git_commit,
    profile_header,
    trace_header,
    versions,
)
from rmqsim.conformance.scratch import scratch_root
from rmqsim.conformance.statediff import state_digest
from rmqsim.conformance.trace import Trace, TraceFormatError
from rmqsim.model.api import InvalidArgumentError, MQConfig
from rmqsim.scenarios.catalog import queue_profile
from rmqsim.scenarios.consumer_profiles import CONSUMER_PROFILES
from rmqsim.scenarios.profiles import resolve
from rmqsim.scenarios.simulation import Simulation

if TYPE_CHECKING:  # typing's from Python 3.12
    from typing_extensions import Unpack

__all__ = [
    "CRASH_FIELDS",
    "VERSIONED_PACKAGES",
    "CrashFlip",
    "RunOptions",
    "RunResult",
    "TraceRender",
    "check_final_state",
    "check_recorded_crashes",
    "execute_recorded",
    "git_commit",
    "lockstep_result",
    "replay_run_trace",
    "replay_trace",
    "run_seed",
    "trace_header",
    "versions",
]


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


class RunOptions(TypedDict, total=False):
    """``run_seed``'s keyword arguments, each optional (its default in brackets)."""

    #: ``MOD:FACTORY`` or a factory [``DEFAULT_IMPL``].
    impl: str | Factory
    #: The step budget [None: the profile's].
    steps: int | None
    #: Compare the whole state at least every this many state changes [1].
    check_every: int
    #: Where the scratch directory goes [None: ``scratch.scratch_root``'s choice].
    workdir: Path | None
    #: Record every crash point the SUT passes [False].
    log_faults: bool
    #: The probability of arming a crash before each state-changing operation [0.0].
    crash_rate: float
    #: ``inprocess``, or ``process``: the SUT in a child process, SIGKILLed at crashes
    #: (``conformance.process_sut``) [``inprocess``].
    crash_mode: str


def run_seed(profile_name: str, seed: int, **options: Unpack[RunOptions]) -> RunResult:
    """Run one scenario in lockstep against ``options["impl"]`` and return its result (with
    every crash point passed, if ``log_faults``); ``RunOptions`` says what each option
    does. A consumer profile runs in ``consumer_run``; a push consumer factory on a queue
    profile checks our queue (``--impl`` names either layer)."""
    unknown = sorted(set(options) - RunOptions.__optional_keys__)
    if unknown:
        raise TypeError(f"run_seed() got an unexpected keyword argument {unknown[0]!r}")
    impl = options.get("impl", DEFAULT_IMPL)
    steps = options.get("steps")
    workdir = options.get("workdir")
    crash_rate = options.get("crash_rate", 0.0)
    crash_mode = options.get("crash_mode", "inprocess")
    if profile_name in CONSUMER_PROFILES:
        if crash_mode != "inprocess":
            raise BadImplError("--crash-mode process applies to queue profiles only")
        return run_consumer_seed(profile_name, seed, impl=impl, steps=steps, workdir=workdir)
    profile = resolve(queue_profile(profile_name), seed)
    spec: str | Factory = impl
    impl, factory = resolve_impl(impl)
    if is_consumer_factory(factory):
        spec, factory = DEFAULT_IMPL, resolve_impl(DEFAULT_IMPL)[1]
    header = profile_header(profile, seed, impl, steps)
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
        options.get("check_every", 1),
        body,
        workdir,
        log_faults=options.get("log_faults", False),
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




def _crash_of(lockstep: Lockstep) -> dict[str, Any] | None:
    """The crash the step just executed resolved (its record's), if one fired in it."""
    return lockstep.records[-1].crash if lockstep.records else None


def _with_crash_mode(
    header: dict[str, Any], mode: Any, spec: str | Factory, factory: Factory
) -> Factory:
    """The factory for ``mode`` (``inprocess`` or ``process``: ``spec`` must then be
    ``MOD:FACTORY``), noted in ``header`` only when not the default, so that in-process
    traces stay as they were."""
    from rmqsim.conformance.process_sut import check_crash_mode, process_factory

    if check_crash_mode(mode) == "inprocess":
        return factory
    header["crash_mode"] = mode
    return process_factory(spec)


def replay_run_trace(trace: Trace, *, impl: str | Factory | None = None) -> RunResult:
    """Replay a trace of either layer (``consumer_run.read_run_trace``): a consumer trace
    through ``consumer_run.replay_consumer``, a queue trace through ``replay_trace``."""
    if is_consumer_header(trace.header):
        return replay_consumer(trace, impl)
    return replay_trace(trace, impl=impl)
