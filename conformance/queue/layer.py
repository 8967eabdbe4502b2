"""The queue layer: ``model.ReferenceMQ`` against an implementation of ``model.api``'s
``MessageQueue`` (``impl.RocksMQ`` by default), driven by ``scenarios.Simulation`` through
``conformance.running.lockstep.Lockstep``; crashes in process or by SIGKILL, at a rate or armed
at named crash points. Its traces' headers do not name the layer (they predate the field):
a header whose ``profile_config`` has no ``clients`` is a queue run's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rmqsim.conformance.adapter import (
    DEFAULT_IMPL,
    Factory,
    load_factory,
    load_impl,
    queue_factory,
)
from rmqsim.conformance.crashing.crash_rate import with_crash_rate
from rmqsim.conformance.crashing.crash_record import CRASH_RECORD_FIELDS, CrashRecord
from rmqsim.conformance.layer import (
    LayerLockstep,
    ResolvedProfile,
    RunSpec,
    ShrinkPass,
    StepCodec,
)
from rmqsim.conformance.queue.shrink import merge_produces
from rmqsim.conformance.reporting.anomalies import ANOMALIES
from rmqsim.conformance.running.lockstep import (
    CRASHED,
    Divergence,
    Lockstep,
    PointPass,
    Stats,
    StepRecord,
)
from rmqsim.conformance.running.run_result import RunResult, build_result
from rmqsim.conformance.running.statediff import state_digest
from rmqsim.conformance.running.trace import Trace, TraceFormatError
from rmqsim.model.api import InvalidArgumentError, MQConfig
from rmqsim.scenarios.catalog import queue_profile
from rmqsim.scenarios.queue.ops import (
    ArmCrash,
    Consume,
    Message,
    Outcome,
    Produce,
    Step,
    op_from_json,
    op_to_json,
    outcome_from_json,
    outcome_to_json,
)
from rmqsim.scenarios.queue.profiles import PROFILES, resolve
from rmqsim.scenarios.queue.sim import Simulation

__all__ = [
    "CRASH_FIELDS",
    "QUEUE_GATE_PROFILES",
    "QUEUE_LAYER",
    "QueueLayer",
    "QueueLockstep",
    "check_recorded_crashes",
    "lockstep_result",
    "simpler_messages",
    "trace_header",
]

#: The queue profiles the gate runs, in this order (each seed of each).
QUEUE_GATE_PROFILES = ("smoke", "crashy", "retention", "seek-storm", "churn", "digits", "swarm")
#: The fields of a step's ``crash`` record (``CrashRecord``'s JSON form: where the crash
#: fired, and which state it left: the one ``before`` the operation or the one ``after``).
CRASH_FIELDS = CRASH_RECORD_FIELDS


class QueueLockstep:
    """``Lockstep`` as a ``LayerLockstep``."""

    def __init__(self, lockstep: Lockstep) -> None:
        self.lockstep = lockstep

    @property
    def records(self) -> list[StepRecord]:
        return self.lockstep.records

    @property
    def stats(self) -> Stats:
        return self.lockstep.stats

    def execute(self, step: Step) -> Outcome:
        return self.lockstep.execute(step)

    def finish(self) -> None:
        """The final full comparison, after the last step (none if there was none)."""
        if self.records:
            self.lockstep.finish(self.stats.steps, self.records[-1].step)

    def close(self) -> None:
        self.lockstep.close()

    def state_digest(self) -> str:
        return state_digest(self.lockstep.model.snapshot())

    def last_crash(self) -> CrashRecord | None:
        return self.records[-1].crash if self.records else None

    @property
    def fault_points(self) -> Mapping[str, int]:
        return {f"{k}:{p}": n for (k, p), n in self.lockstep.faults.seen.items()}

    @property
    def fault_log(self) -> list[PointPass]:
        return self.lockstep.faults.log or []


def trace_header(
    *,
    profile: str,
    profile_config: dict[str, Any],
    config: MQConfig,
    seed: int,
    impl: str,
    steps: int | None,
) -> dict[str, Any]:
    """The header of a queue run that no profile describes (the fuzzer's, a test's)."""
    return RunSpec(
        layer=QUEUE_LAYER.name,
        profile=profile,
        seed=seed,
        impl=impl,
        profile_config=profile_config,
        config=dataclasses.asdict(config),
        steps=steps,
        named_in_header=False,
    ).to_header()


def check_recorded_crashes(trace: Trace) -> None:
    """Each step's crash record is whole, and agrees with its outcome: a crash resolved
    ``before`` its operation has the outcome ``Crashed``, and only such a crash has it
    (else an edited ``resolved`` would pass for a crash resolved the other way, and stop
    the comparison of recorded outcomes: see ``execute_recorded``). TraceFormatError
    naming the step's line otherwise."""
    for step in trace.steps:
        problem = _crash_problem(step.crash, step.outcome)
        if problem is not None:
            raise TraceFormatError(trace.path, step.line, f"step {step.index}: {problem}")


def _crash_problem(crash: CrashRecord | None, outcome: Outcome | None) -> str | None:
    """What is wrong with a step's crash record given its outcome (its shape was checked
    when the line was parsed: ``CrashRecord.from_json``)."""
    crashed = outcome is not None and outcome.error == CRASHED
    if crash is None:
        return f"outcome {CRASHED} without a crash record" if crashed else None
    if outcome is not None and crashed != crash.undid_operation:
        return (
            f"a crash resolved {crash.resolved} the operation cannot have the outcome "
            f"{'error ' + str(outcome.error) if outcome.error else 'a value'} "
            f"(the outcome {CRASHED} is a crash resolved before it, and only that)"
        )
    return None


def simpler_messages(messages: tuple[Message, ...]) -> Iterator[tuple[Message, ...]]:
    """Simpler variants of a produce's messages, most aggressive first."""
    if len(messages) > 1:
        yield messages[:1]
        yield messages[: len(messages) // 2]
    if any(m.payload or m.properties for m in messages):
        yield tuple(Message(b"") for _ in messages)
    if any(m.properties for m in messages):
        yield tuple(Message(m.payload) for m in messages)
    if any(len(m.payload) > 1 for m in messages):
        yield tuple(
            dataclasses.replace(m, payload=m.payload[: len(m.payload) // 2]) for m in messages
        )


class QueueLayer:
    """The queue layer (see the module's docstring)."""

    name = "queue"
    implicit_in_header = True
    anomalies: Mapping[str, str] = MappingProxyType(ANOMALIES)
    gate_profiles = QUEUE_GATE_PROFILES
    codec = StepCodec(op_to_json, op_from_json, outcome_to_json, outcome_from_json)
    crash_modes = ("inprocess", "process")
    supports_crash_rate = True
    final_check_needs_whole_run = False
    crash_sweep_refusal = None

    def profile_names(self) -> Sequence[str]:
        return tuple(PROFILES)

    def resolve_profile(self, name: str, seed: int) -> ResolvedProfile:
        profile = resolve(queue_profile(name), seed)
        config = dataclasses.asdict(MQConfig(**profile.config))
        return ResolvedProfile(profile.name, profile.to_json(), config)

    def claims_header(self, header: Mapping[str, Any]) -> bool:
        config = header.get("profile_config")
        return not (type(config) is dict and "clients" in config)

    def check_trace(self, trace: Trace) -> None:
        try:
            MQConfig(**trace.header["config"])
        except (TypeError, InvalidArgumentError) as exc:
            raise TraceFormatError(
                trace.path, 1, f"header config is not an MQConfig: {exc}"
            ) from None
        check_recorded_crashes(trace)

    def resolve_impl(self, impl: str | Factory, *, for_replay: bool) -> tuple[str, Any]:
        """A replay needs a queue factory; a run given a push consumer factory checks our
        queue (``--impl`` names either layer); a stream factory is refused. The SUT is
        ``(spec, factory)``: ``spec`` is what a child process loads in ``--crash-mode
        process``."""
        loaded = load_impl(impl)
        if loaded.layer == "consumer" and not for_replay:
            return loaded.name, (DEFAULT_IMPL, load_factory(DEFAULT_IMPL))
        needed_by = "replaying a queue trace" if for_replay else "a queue profile"
        name, factory = queue_factory(impl, needed_by)
        return name, (impl, factory)

    def simulate(self, spec: RunSpec, lockstep: LayerLockstep) -> None:
        assert isinstance(lockstep, QueueLockstep), lockstep
        profile = resolve(queue_profile(spec.profile), spec.seed)
        execute: Callable[[Step], Outcome] = lockstep.execute
        if spec.crash_rate:
            execute = with_crash_rate(lockstep.lockstep, spec.seed, spec.crash_rate)
        Simulation(profile, spec.seed, steps=spec.steps).run(execute)

    def open_lockstep(
        self, spec: RunSpec, root: Path, *, sut: Any, recorded: bool, log_faults: bool
    ) -> LayerLockstep:
        """A ``Lockstep`` on ``sut``; a header's ``open_crash`` (``{"point", "hit"}``) arms a
        crash in the first open."""
        impl, factory = sut
        if spec.crash_mode == "process":
            from rmqsim.conformance.running.process_sut import process_factory

            factory = process_factory(impl)
        armed = None if spec.open_crash is None else spec.open_crash.as_tuple()
        lockstep = Lockstep(
            factory,
            MQConfig(**spec.config),
            root,
            check_every=spec.check_every,
            log_faults=log_faults,
            open_crash=armed,
        )
        return QueueLockstep(lockstep)

    def shrink_passes(self) -> Sequence[ShrinkPass]:
        return (merge_produces,)  # volume, not order: produces to a topic merged

    def simpler_ops(self, op: Any) -> Iterable[Any]:
        if isinstance(op, Produce):
            for messages in simpler_messages(op.messages):
                yield dataclasses.replace(op, messages=messages)
        elif isinstance(op, Consume) and op.n > 1:
            yield dataclasses.replace(op, n=1)
            yield dataclasses.replace(op, n=op.n // 2)
        elif isinstance(op, ArmCrash) and op.hit > 1:
            yield dataclasses.replace(op, hit=1)
            yield dataclasses.replace(op, hit=op.hit - 1)

    def sweep_fields(self, result: Any) -> Mapping[str, Any]:
        """No knobs beyond the queue configuration every row has."""
        return {"consumer_config": None}


#: The queue layer (registered by ``conformance.layers``).
QUEUE_LAYER = QueueLayer()


def lockstep_result(
    lockstep: Lockstep, header: dict[str, Any], divergence: Divergence | None, started: float
) -> RunResult:
    """The result of whatever a queue ``lockstep`` driven by hand (the fuzzer's) executed,
    with the trace header ``header``."""
    spec = RunSpec.from_header(header, layer=QUEUE_LAYER)
    return build_result(spec, QueueLockstep(lockstep), divergence, started=started, header=header)
