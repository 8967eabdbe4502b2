"""Run a consumer profile: the push consumer under test and the model's, in lockstep.

Each side has its queue and one push consumer per client of the profile: the model side
``model.ReferenceMQ`` with ``model.consumer.PushConsumerModel`` (offsets in dicts that
survive its crashes), the SUT side a queue factory (``impl.RocksMQ`` by default) with a
consumer factory (``impl.consumer.ConsumerCore`` by default), in a temporary directory.
``--impl`` names either layer; ours stands in for the other. Every simulated step goes to
both sides; the SUT's reports feed ``consumer_check.GroupHistory`` (the guarantees, named
anomalies) and then must equal the model's (``consumer-mismatch`` otherwise). Once the run
drained, ``finish`` checks that nothing was lost. The whole run is deterministic: the same
seed gives a byte-identical trace. ``replay_consumer_trace`` re-executes a trace's recorded
operations (not its seed) with the profile its header recorded, so a trace stands alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import (
    DEFAULT_IMPL,
    BadImplError,
    Factory,
    checked_queue,
    is_consumer_factory,
    resolve_impl,
)
from rmqsim.conformance.apply import error_outcome
from rmqsim.conformance.consumer_check import ConsumerViolation, GroupHistory
from rmqsim.conformance.lockstep import Divergence, Stats
from rmqsim.conformance.run_result import (
    RunResult,
    check_final_state,
    execute_recorded,
    profile_header,
)
from rmqsim.conformance.scratch import scratch_root
from rmqsim.conformance.statediff import state_digest
from rmqsim.conformance.trace import Trace, TraceFormatError, dumps, parse_lines, read_trace
from rmqsim.conformance.watchdog import CallBound, OperationHang
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import (
    RESULTS_BY_MODE,
    Completion,
    ConsumeMode,
    ConsumerConfig,
    ConsumeResult,
    Delivery,
    InvalidArgumentError,
    MessageQueue,
    MQConfig,
    NotServingError,
    ProducerMessage,
)
from rmqsim.model.consumer import PushConsumerModel
from rmqsim.scenarios.consumer_ops import (
    CONSUMER_OP_TYPES,
    Complete,
    ConsumerOp,
    CrashClient,
    CrashQueue,
    Deliver,
    Persist,
    ProduceBatch,
    Pull,
    RunRetention,
    StartClient,
    consumer_op_from_json,
    consumer_op_to_json,
    consumer_outcome_from_json,
    plain_to_json,
)
from rmqsim.scenarios.consumer_profiles import CONSUMER_PROFILES, ClientSpec, ConsumerProfile
from rmqsim.scenarios.consumer_sim import ConsumerSimulation
from rmqsim.scenarios.ops import Outcome, Step
from rmqsim.scenarios.profiles import ProfileError

__all__ = [
    "DEFAULT_CONSUMER_IMPL",
    "check_consumer_trace",
    "consumer_trace_header",
    "failed_at_final_check",
    "impl_consumer_factory",
    "is_consumer_header",
    "parse_run_lines",
    "read_run_trace",
    "replay_consumer",
    "replay_consumer_trace",
    "run_consumer_seed",
    "run_consumer_steps",
    "trace_decoders",
]

DEFAULT_CONSUMER_IMPL = "rmqsim.conformance.consumer_run:impl_consumer_factory"


def impl_consumer_factory(
    *,
    queue: MessageQueue,
    group: str,
    topic: str,
    config: ConsumerConfig,
    clock: Any,
    path: Path,
    send_hook: Any,
) -> Any:
    """Our push consumer: ``impl.consumer.ConsumerCore``."""
    from rmqsim.impl.consumer import ConsumerCore

    return ConsumerCore.open(
        queue=queue,
        group=group,
        topic=topic,
        config=config,
        clock=clock,
        path=path,
        send_hook=send_hook,
    )


def consumer_config(spec: ClientSpec) -> ConsumerConfig:
    return ConsumerConfig(mode=ConsumeMode(spec.mode), **spec.consumer)


class _Clock:
    """The simulated clock both sides read: the runner sets it before each step."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class _SendHook:
    """Refuses the send-backs of the ids a ``Complete`` step names."""

    def __init__(self) -> None:
        self.refuse: frozenset[int] = frozenset()

    def __call__(self, topic: str, msg_id: int) -> None:
        if msg_id in self.refuse:
            raise NotServingError(f"send-back of {msg_id} to {topic} refused (injected)")


class _Side:
    """One side of the lockstep: a queue and a consumer per client."""

    def __init__(
        self,
        profile: ConsumerProfile,
        clock: _Clock,
        open_queue: Callable[[], MessageQueue],
        crash_queue: Callable[[MessageQueue], None],
        open_consumer: Callable[..., Any],
    ) -> None:
        self.profile = profile
        self.clock = clock
        self._open_queue = open_queue
        self._crash_queue = crash_queue
        self._open_consumer = open_consumer
        self.queue = open_queue()
        self.queue.create_topic(profile.topic)
        self.hooks = {c.group: _SendHook() for c in profile.clients}
        self.consumers: dict[str, Any] = {}
        #: The message ids of each batch delivered and not yet completed, by (client,
        #: seq): what a ``Complete``'s refused positions name.
        self.batches: dict[tuple[str, int], tuple[int, ...]] = {}
        #: The ids whose send-back the last ``Complete`` refused.
        self.refused: tuple[int, ...] = ()

    def start(self, group: str) -> dict[str, int]:
        spec = next(c for c in self.profile.clients if c.group == group)
        consumer = self._open_consumer(
            queue=self.queue,
            group=group,
            topic=self.profile.topic,
            config=consumer_config(spec),
            clock=self.clock,
            send_hook=self.hooks[group],
        )
        self.consumers[group] = consumer
        # A (re)started client numbers its batches from 1 again.
        self.batches = {key: ids for key, ids in self.batches.items() if key[0] != group}
        return consumer.start()

    def apply(self, op: ConsumerOp) -> Any:
        """Apply ``op``; its raw value (raises what the side raises)."""
        if isinstance(op, ProduceBatch):
            return self.queue.produce(op.topic, [ProducerMessage(p) for p in op.payloads])
        if isinstance(op, StartClient):
            return self.start(op.client)
        if isinstance(op, CrashClient):
            self.consumers.pop(op.client).crash()
            return self.start(op.client)
        if isinstance(op, CrashQueue):
            for consumer in self.consumers.values():
                consumer.crash()
            self._crash_queue(self.queue)
            self.queue = self._open_queue()
            return {group: self.start(group) for group in list(self.consumers)}
        if isinstance(op, RunRetention):
            return self.queue.run_retention()
        return self._apply_to_client(op)

    def _apply_to_client(self, op: Pull | Deliver | Complete | Persist) -> Any:
        """Apply ``op``, an operation of one client's consumer."""
        consumer = self.consumers[op.client]
        if isinstance(op, Pull):
            return consumer.pull()
        if isinstance(op, Deliver):
            delivery = consumer.next_batch()
            if isinstance(delivery, Delivery):
                ids = tuple(m.msg_id for m in delivery.messages)
                self.batches[(op.client, delivery.seq)] = ids
            return delivery
        if isinstance(op, Complete):
            ids = self.batches.pop((op.client, op.seq), ())
            self.refused = tuple(ids[i] for i in op.refused_positions if i < len(ids))
            hook = self.hooks[op.client]
            hook.refuse = frozenset(self.refused)
            try:
                return consumer.complete(op.seq, ConsumeResult(op.result))
            finally:
                hook.refuse = frozenset()
        if isinstance(op, Persist):
            return consumer.persist()
        raise AssertionError(f"unknown consumer operation {op!r}")

    def close(self) -> None:
        # Releasing after a failure: the failure is what gets reported, not this.
        for consumer in self.consumers.values():
            with contextlib.suppress(Exception):
                consumer.crash()
        self.consumers.clear()
        with contextlib.suppress(Exception):
            self._crash_queue(self.queue)


def plain(value: Any) -> Any:
    """A side's raw value as the plain data ``Outcome`` holds (and traces show)."""
    if isinstance(value, Delivery):
        messages = tuple(
            (m.msg_id, m.origin_topic, m.origin_id, m.reconsume_times, m.payload)
            for m in value.messages
        )
        return (value.seq, value.queue, messages)
    if isinstance(value, Completion):
        return (value.queue, value.acked, value.retried, value.dead, value.kept, value.offset)
    if isinstance(value, dict):
        return tuple((key, plain(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(value)
    return value


def _outcome(apply: Callable[[], Any]) -> tuple[Any, Outcome]:
    try:
        raw = apply()
    except Exception as exc:  # an MQError, or a SUT bug: compared and traced
        return None, error_outcome(exc)
    try:
        return raw, Outcome(plain(raw))
    except Exception as exc:
        return None, Outcome(error=f"unexpected:unencodable {type(raw).__name__}: {exc}")


def _history(spec: ClientSpec, topic: str) -> GroupHistory:
    config = consumer_config(spec)
    return GroupHistory(
        spec.group,
        topic,
        max_reconsume_times=config.max_reconsume_times,
        orderly=config.mode is ConsumeMode.ORDERLY,
        max_cached_count=config.max_cached_count,
        max_cached_bytes=config.max_cached_bytes,
    )


class _Histories:
    """One ``GroupHistory`` per client, fed with the SUT's reports."""

    def __init__(self, profile: ConsumerProfile) -> None:
        self.groups = {c.group: _history(c, profile.topic) for c in profile.clients}

    def observe(self, op: ConsumerOp, raw: Any, refused: tuple[int, ...] = ()) -> None:
        """Feed one SUT report; ``refused``: the ids whose send-back a ``Complete``
        refused (its positions, resolved against the SUT's batch)."""
        if isinstance(op, ProduceBatch):
            sizes = [len(payload) for payload in op.payloads]
            for history in self.groups.values():
                history.produced(raw, sizes)
        elif isinstance(op, (StartClient, CrashClient)):
            self.groups[op.client].started(raw)
        elif isinstance(op, CrashQueue):
            for group, offsets in raw.items():
                self.groups[group].started(offsets)
        elif isinstance(op, Deliver) and raw is not None:
            self.groups[op.client].delivered(raw)
        elif isinstance(op, Pull):
            self.groups[op.client].pulled(raw)
        elif isinstance(op, Complete):
            self.groups[op.client].completed(
                raw,
                ConsumeResult(op.result),
                refused,
            )
        elif isinstance(op, Persist):
            self.groups[op.client].persisted(raw)

    def finish(self) -> None:
        for history in self.groups.values():
            history.finish()


def _step_line(
    index: int, step: Step[ConsumerOp], outcome: Outcome, sut: Outcome | None = None
) -> str:
    def encode(o: Outcome) -> dict[str, Any]:
        return {"value": plain_to_json(o.value), "error": o.error}

    line: dict[str, Any] = {
        "type": "step",
        "i": index,
        "t": step.time_s,
        "actor": step.actor,
        "op": consumer_op_to_json(step.op),
        "outcome": encode(outcome),
    }
    if sut is not None:
        line["sut_outcome"] = encode(sut)
    return dumps(line)


def _factories(impl: str | Factory) -> tuple[str, Factory, Callable[..., Any]]:
    """(name, queue factory, consumer factory): ``impl`` is one of them, ours the other."""
    if impl == DEFAULT_IMPL:
        impl = DEFAULT_CONSUMER_IMPL
    name, factory = resolve_impl(impl)
    if is_consumer_factory(factory):
        return name, resolve_impl(DEFAULT_IMPL)[1], factory
    return name, factory, impl_consumer_factory


#: Runs the operations: calls ``execute(step)`` for each (it returns the model's outcome,
#: or raises ``Divergence``). The simulation, or a recorded trace's steps.
Drive = Callable[[Callable[[Step[ConsumerOp]], Outcome]], object]


def run_consumer_seed(
    profile_name: str,
    seed: int,
    *,
    impl: str | Factory = DEFAULT_IMPL,
    steps: int | None = None,
    workdir: Path | None = None,
) -> RunResult:
    """Run consumer profile ``profile_name`` with ``seed`` in lockstep; the result."""
    profile = CONSUMER_PROFILES[profile_name]
    return _run(
        _RunSpec(profile, seed, impl, steps, workdir),
        lambda execute: ConsumerSimulation(profile, seed, steps).run(execute),
    )


def run_consumer_steps(
    header: Mapping[str, Any], steps: Sequence[Step[ConsumerOp]], *, impl: str | Factory
) -> RunResult:
    """Execute ``steps`` as they stand, with the profile and seed ``header`` recorded: a
    shrinker's candidate. Unlike a replay, no recorded outcome is expected (dropping a
    step changes what later ones return); the model decides each outcome. The result's
    trace keeps the header's ``shrunk_from_steps``.

    Only the checks made at each step count, not the final one: that one requires every
    message to have been finished, which a cut trace (without the simulation's drain at
    the end) fails on any implementation. So a run that fails only at its final check
    does not fail here, and is not shrunk. The header says ``"final_check": false``, so
    that replaying the trace skips it too (and passes once the bug is fixed)."""
    profile = _profile_of(header, "<shrink candidate>")

    def drive(execute: Callable[[Step[ConsumerOp]], Outcome]) -> None:
        for step in steps:
            execute(step)

    extra = {k: header[k] for k in ("shrunk_from_steps",) if k in header}
    spec = _RunSpec(profile, header["seed"], impl, extra_header=extra, final_check=False)
    return _run(spec, drive)


class _PastTheBatch(Exception):
    """A replayed ``Complete`` names a position its batch does not have (see ``_run``)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True, slots=True)
class _RunSpec:
    """One consumer run: its profile and seed, what it runs on, and which checks it makes
    (see ``_run``)."""

    profile: ConsumerProfile
    seed: int
    impl: str | Factory
    #: The step budget the run was given (None: the profile's), as its header records it.
    steps: int | None = None
    workdir: Path | None = None
    #: Fields added to the trace header (a shrunk trace's ``shrunk_from_steps``).
    extra_header: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    final_check: bool = True
    positions_in_batch: bool = False


def _run(spec: _RunSpec, drive: Drive) -> RunResult:
    """Execute what ``drive`` emits on both sides, checking the SUT's histories (at the
    end too, unless ``final_check`` is off: the trace's header then says so, so that
    replaying it skips that check too).

    A ``Complete``'s refused positions past the end of its batch (the model's, which is
    the SUT's too, or the delivery would have diverged) refuse nothing. A shrinker's
    candidate holds such positions legitimately: cutting produces or payloads makes
    later batches smaller, and cutting a delivery leaves its completion naming no batch.
    So by default they are dropped from the operation, which changes nothing it does,
    and the trace records the positions that took effect: any trace this writes,
    shrunk ones included, has every position within its batch. With
    ``positions_in_batch`` (replaying a recorded trace, whose positions were written so)
    such a position is bad input instead: ``_PastTheBatch``, before the step runs."""
    name, queue_factory, consumer_factory = _factories(spec.impl)
    header = profile_header(spec.profile, spec.seed, name, spec.steps)
    header.update(spec.extra_header)
    if not spec.final_check:
        header["final_check"] = False
    started = time.perf_counter()
    run = _ConsumerLockstep(spec, header)
    with (
        tempfile.TemporaryDirectory(
            prefix="rmqsim-consumer-", dir=scratch_root(spec.workdir)
        ) as tmp,
        CallBound() as bound,  # every call into the SUT side: a hang is a finding
    ):
        run.open(Path(tmp), bound, queue_factory, consumer_factory)
        divergence = run.drive(drive)
    return run.result(name, divergence, started)


class _ConsumerLockstep:
    """One consumer run in progress: both sides, the SUT's histories, the trace lines."""

    def __init__(self, spec: _RunSpec, header: dict[str, Any]) -> None:
        self.spec = spec
        self.clock = _Clock()
        self.config = MQConfig(**spec.profile.config)
        self.model_queue = ReferenceMQ(config=self.config, clock=self.clock)
        self.stores: dict[str, dict[str, int]] = {c.group: {} for c in spec.profile.clients}
        self.lines = [dumps(header)]
        self.index = 0
        self.last: Step[ConsumerOp] | None = None
        self.stats = Stats()
        self.histories = _Histories(spec.profile)
        #: Set when the queue cannot be created in a fresh directory: the SUT's failure,
        #: reported at the first step (as the queue layer's lockstep does).
        self.open_failure: str | None = None
        self.open_anomaly = "unrecoverable"
        self.sut: _Side | None = None
        self.bound = CallBound()

    def open(
        self,
        root: Path,
        bound: CallBound,
        queue_factory: Factory,
        consumer_factory: Callable[..., Any],
    ) -> None:
        """Open the SUT side in ``root`` (its failure is the run's, at the first step),
        then the model's."""
        self.bound = bound
        profile = self.spec.profile
        # One offset store directory per group (a group name may not be a file name).
        slot = {c.group: index for index, c in enumerate(profile.clients)}

        def open_queue() -> MessageQueue:
            queue = queue_factory(
                path=root / "queue", config=self.config, clock=self.clock, faults=None
            )
            return checked_queue(queue, queue_factory)

        try:
            self.sut = bound.call(
                "open",
                _Side,
                profile,
                self.clock,
                open_queue,
                lambda q: q.crash(),
                lambda **kw: consumer_factory(path=root / f"offsets-{slot[kw['group']]}", **kw),
            )
        except BadImplError:
            raise
        except OperationHang as hang:
            self.open_failure = f"opening a fresh directory: {hang.detail}"
            self.open_anomaly = "hang"
        except Exception as exc:
            self.open_failure = f"opening a fresh directory raised {type(exc).__name__}: {exc}"
        self.model = _Side(
            profile,
            self.clock,
            lambda: self.model_queue,
            lambda q: None,  # the model's queue is perfectly durable: a crash changes nothing
            lambda **kw: PushConsumerModel(store=self.stores[kw["group"]], **kw),
        )

    def execute(self, step: Step[ConsumerOp]) -> Outcome:
        """Run ``step`` on both sides; the model's outcome, or ``Divergence``."""
        self.index += 1
        index = self.index
        self.last = step
        self.clock.now = step.time_s
        op: ConsumerOp = step.op
        if type(op) is Complete:
            step = _within_batch(
                index, step, op, self.model.batches, self.spec.positions_in_batch
            )
            op = step.op
        _count(self.stats, op)
        model, sut, lines = self.model, self.sut, self.lines
        if sut is None:
            assert self.open_failure is not None
            _, want = _outcome(lambda: model.apply(op))
            lines.append(_step_line(index, step, want))
            raise Divergence(self.open_anomaly, index, step, want, None, [], self.open_failure)
        try:
            raw, got = _outcome(lambda: self.bound.call(op.kind, sut.apply, op))
        except OperationHang as hang:
            _, want = _outcome(lambda: model.apply(op))
            lines.append(_step_line(index, step, want))
            raise Divergence("hang", index, step, want, None, [], hang.detail) from None
        _, want = _outcome(lambda: model.apply(op))
        try:
            if got.error is None:
                self.histories.observe(op, raw, sut.refused if type(op) is Complete else ())
        except ConsumerViolation as found:
            lines.append(_step_line(index, step, want, got))
            raise Divergence(found.anomaly, index, step, want, got, [], found.detail) from None
        if got != want:
            lines.append(_step_line(index, step, want, got))
            raise Divergence(
                "consumer-mismatch",
                index,
                step,
                want,
                got,
                [],
                "the consumer under test and the model returned different values",
            )
        lines.append(_step_line(index, step, want))
        return want

    def drive(self, drive: Drive) -> Divergence | None:
        """Run what ``drive`` emits, then the final check (if on); the divergence found.
        Both sides are released in the end."""
        divergence: Divergence | None = None
        try:
            drive(self.execute)
            try:
                if self.spec.final_check:
                    self.histories.finish()
            except ConsumerViolation as found:
                assert self.last is not None
                # No outcomes: what marks a failure of the final check (see
                # ``failed_at_final_check``); a failing step always has both.
                divergence = Divergence(
                    found.anomaly, self.index, self.last, None, None, [], found.detail
                )
        except Divergence as found:
            divergence = found
        finally:
            if self.sut is not None:
                with contextlib.suppress(OperationHang):  # the run's result is known
                    self.bound.call("crash()", self.sut.close)
            self.model.close()
        return divergence

    def result(self, name: str, divergence: Divergence | None, started: float) -> RunResult:
        """The run's result, its trace ended."""
        final = None if divergence else state_digest(self.model_queue.snapshot())
        status = "divergence" if divergence else "ok"
        anomaly = divergence.anomaly if divergence else None
        end = {
            "type": "end",
            "steps": self.index,
            "status": status,
            "anomaly": anomaly,
            "state_digest": final,
        }
        self.lines.append(dumps(end))
        return RunResult(
            profile=self.spec.profile.name,
            seed=self.spec.seed,
            impl=name,
            status=status,
            steps=self.index,
            anomaly=anomaly,
            divergence=divergence,
            trace=self.lines,
            state_digest=final,
            stats=self.stats,
            wall_s=time.perf_counter() - started,
            sim_time_s=self.last.time_s if self.last else 0,
            step_budget=self.spec.steps,
        )


def _within_batch(
    index: int,
    step: Step[ConsumerOp],
    op: Complete,
    batches: Mapping[tuple[str, int], tuple[int, ...]],
    strict: bool,
) -> Step[ConsumerOp]:
    """``step`` with only the refused positions that ``op``'s batch has (see ``_run``);
    with ``strict``, a position it lacks raises ``_PastTheBatch`` instead."""
    size = len(batches.get((op.client, op.seq), ()))
    kept = tuple(i for i in op.refused_positions if i < size)
    if kept == op.refused_positions:
        return step
    if strict:
        past = next(i for i in op.refused_positions if i >= size)
        where = (
            f"batch {op.seq} of client {op.client!r} holds {size} message(s), so its "
            f"positions are below {size}"
            if size
            else f"client {op.client!r} has no batch {op.seq} being consumed, so a "
            "completion of it refuses no send-back: the positions must be []"
        )
        raise _PastTheBatch(
            index,
            f"step {index}: op(complete).refused_positions: {past} is past the batch: {where} "
            "(such a position refuses nothing, so deleting it keeps what the trace does; "
            "shrunk traces of older rmqsim versions may hold one)",
        )
    return dataclasses.replace(step, op=dataclasses.replace(op, refused_positions=kept))


def _count(stats: Stats, op: ConsumerOp) -> None:
    """A consumer run's counters, as the lockstep keeps a queue run's: operations by
    kind; crashes (of a client or of the whole process); reopens of the queue."""
    stats.steps += 1
    stats.op_counts[op.kind] += 1
    if type(op) is CrashClient or type(op) is CrashQueue:
        stats.crashes_injected += 1
    if type(op) is CrashQueue:
        stats.reopens += 1


def _consumer_steps(execute: Callable[[Step[ConsumerOp]], Outcome]) -> Callable[[Step], Outcome]:
    """``execute`` for the steps of a consumer trace, which ``trace.TraceStep`` types as a
    queue profile's: the consumer decoders (``trace_decoders``) parse only consumer
    operations, so any other is a bug of rmqsim."""

    def execute_step(step: Step) -> Outcome:
        op: object = step.op
        assert isinstance(op, _CONSUMER_OP_CLASSES), f"not a consumer operation: {op!r}"
        return execute(Step(step.time_s, step.actor, op))

    return execute_step


_CONSUMER_OP_CLASSES = tuple(CONSUMER_OP_TYPES.values())


def failed_at_final_check(result: RunResult) -> bool:
    """Whether a failed consumer run failed at its final check, so that its trace holds
    every step, the drain included; otherwise it failed at a step, and its trace stops
    there (replaying it with the final check on would fail on any implementation)."""
    divergence = result.divergence
    assert divergence is not None, "only a failed run"
    return divergence.expected is None and divergence.actual is None


def consumer_trace_header(path: Path) -> dict[str, Any] | None:
    """The header of a consumer profile's trace at ``path`` (its ``profile_config`` has
    clients), or None for any other file (which ``trace.read_trace`` then reads, or
    rejects with its own message)."""
    try:
        with path.open("rb") as file:
            return _consumer_header_of(file.readline())
    except OSError:
        return None


def _consumer_header_of(first_line: str | bytes) -> dict[str, Any] | None:
    """The consumer trace header that ``first_line`` holds, or None (whatever it holds)."""
    try:
        header = json.loads(first_line)
    except (ValueError, RecursionError):
        return None
    return header if is_consumer_header(header) else None


def is_consumer_header(header: object) -> bool:
    """Whether ``header`` is a consumer profile's trace header (its ``profile_config``
    has clients)."""
    if type(header) is not dict or header.get("type") != "header":
        return False
    config = header.get("profile_config")
    return type(config) is dict and "clients" in config


def trace_decoders(consumer: bool) -> dict[str, Any]:
    """``parse_lines``/``read_trace`` keywords for a consumer trace's operations and
    outcomes (none for a queue trace: the defaults)."""
    if not consumer:
        return {}
    return {"decode_op": consumer_op_from_json, "decode_outcome": consumer_outcome_from_json}


def parse_run_lines(lines: list[str]) -> Trace:
    """A run's trace lines, of a queue or a consumer profile, parsed with its vocabulary
    (and a consumer trace checked: ``check_consumer_trace``)."""
    try:
        consumer = bool(lines) and is_consumer_header(json.loads(lines[0]))
    except ValueError:
        consumer = False  # parse_lines names the bad line
    trace = parse_lines(lines, **trace_decoders(consumer))
    if consumer:
        check_consumer_trace(trace)
    return trace


def _profile_of(header: Mapping[str, Any], path: Path | str) -> ConsumerProfile:
    """The profile a consumer trace's header records, its queue and client configurations
    checked here, so that a bad value is the trace's error (file and line), not the run's."""
    try:
        profile = ConsumerProfile.from_json(header.get("profile_config"))
        MQConfig(**profile.config)
        for spec in profile.clients:
            consumer_config(spec)
    except (ProfileError, InvalidArgumentError, TypeError, ValueError) as exc:
        raise TraceFormatError(path, 1, f"header profile_config: {exc}") from None
    return profile


def check_consumer_trace(trace: Trace) -> ConsumerProfile:
    """The profile a consumer trace's header records, once its steps were checked against
    it; a ``TraceFormatError`` naming the file and line otherwise. What one line cannot
    say alone (``consumer_op_from_json`` checked the rest): every client an operation
    names is one of the profile's, and every ``Complete``'s result is one its client's
    mode allows (``RESULTS_BY_MODE``). Refused positions past their batch are refused
    when replayed (``_run``): the batch is the model's, which only replaying builds."""
    profile = _profile_of(trace.header, trace.path)
    modes = {spec.group: ConsumeMode(spec.mode) for spec in profile.clients}
    for step in trace.steps:
        op = step.op
        client = getattr(op, "client", None)
        if client is None:
            continue
        if client not in modes:
            raise TraceFormatError(
                trace.path,
                step.line,
                f"step {step.index}: op({op.kind}).client: {client!r} is not a client of "
                f"the header's profile_config (clients: {', '.join(map(repr, modes))})",
            )
        if type(op) is Complete:
            allowed = RESULTS_BY_MODE[modes[client]]
            if op.result not in allowed:
                raise TraceFormatError(
                    trace.path,
                    step.line,
                    f"step {step.index}: op(complete).result: {op.result!r} is not a result "
                    f"of client {client!r}, which consumes in {modes[client].value} mode: "
                    f"allowed {' or '.join(repr(r.value) for r in allowed)}",
                )
    return profile


def read_run_trace(path: Path) -> Trace:
    """The trace file of a queue or a consumer run, parsed with its vocabulary (and a
    consumer trace checked: ``check_consumer_trace``). The file is read once, so it may
    be a pipe (``/dev/stdin``)."""
    trace = read_trace(
        path,
        choose_decoders=lambda first: trace_decoders(_consumer_header_of(first) is not None),
    )
    if is_consumer_header(trace.header):
        check_consumer_trace(trace)
    return trace


def replay_consumer_trace(path: Path, *, impl: str | Factory | None = None) -> RunResult:
    """Replay the consumer trace at ``path`` (see ``replay_consumer``)."""
    return replay_consumer(read_trace(path, **trace_decoders(True)), impl)


def replay_consumer(trace: Trace, impl: str | Factory | None) -> RunResult:
    """Re-execute a consumer trace's recorded operations, with the profile its header
    recorded, on the model and the SUT; every recorded outcome must recur
    (``trace-mismatch`` at the first that does not: the trace was written by other code),
    and so must the final state its end line records (``run.check_final_state``).
    The trace is self-contained: neither the seed nor the simulation is consulted, so an
    edited or shrunk trace replays as it stands; a shrunk one's header turns the final
    check off (``"final_check": false``, see ``run_consumer_steps``).

    The trace is checked first (``check_consumer_trace``; again, if it was read by
    ``read_run_trace``, for a trace built in memory); a refused position past its batch
    is bad input too (``TraceFormatError`` naming the step's line), not ignored as in a
    shrinker's candidate: every trace rmqsim writes records only positions within their
    batch (see ``_run``), so such a one was edited. It shows when its step comes: a
    divergence before it is reported instead, as the steps before it are valid."""
    header = trace.header
    profile = check_consumer_trace(trace)
    steps = header.get("steps")
    final_check = header.get("final_check", True)
    if type(final_check) is not bool:
        raise TraceFormatError(trace.path, 1, "header final_check must be true or false")
    spec = impl or header.get("impl") or DEFAULT_IMPL
    if not impl:
        try:
            _factories(spec)
        except BadImplError as exc:
            raise BadImplError(
                f"{trace.path}: the implementation its header names cannot be used ({exc}); "
                "give another with --impl"
            ) from None

    try:
        result = _run(
            _RunSpec(
                profile,
                header["seed"],
                spec,
                steps if type(steps) is int else None,
                final_check=final_check,
                positions_in_batch=True,
            ),
            lambda execute: execute_recorded(trace, _consumer_steps(execute)),
        )
    except _PastTheBatch as bad:
        raise TraceFormatError(trace.path, trace.steps[bad.index - 1].line, str(bad)) from None
    return check_final_state(result, trace, flipped=False)
