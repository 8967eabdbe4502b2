"""Run a consumer profile: the push consumer under test and the model's, in lockstep.

Each side has its queue and one push consumer per client of the profile: the model side
``model.ReferenceMQ`` with ``model.consumer.PushConsumerModel`` (offsets in dicts that
survive its crashes), the SUT side a queue factory (``impl.RocksMQ`` by default) with a
consumer factory (``impl.consumer.ConsumerCore`` by default), in a temporary directory.
``--impl`` names either layer; ours stands in for the other. Every simulated step goes to
both sides; the SUT's reports feed ``consumer_check.GroupHistory`` (the guarantees, named
anomalies) and then must equal the model's (``consumer-mismatch`` otherwise). Once the run
drained, ``finish`` checks that nothing was lost. The whole run is deterministic: the same
seed gives a byte-identical trace. A replay re-executes a trace's recorded operations (not
its seed) with the profile its header recorded, so a trace stands alone.

``ConsumerLockstep`` is the consumer layer's ``layer.LayerLockstep``; the layer itself
(``conformance.consumer.layer``) hands it to the generic runner (``conformance.running.run``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import (
    DEFAULT_IMPL,
    LAYER_FORMS,
    QUEUE_LAYERS,
    BadImplError,
    Factory,
    checked_queue,
    load_factory,
    load_impl,
)
from rmqsim.conformance.consumer.check import ConsumerViolation, GroupHistory
from rmqsim.conformance.layer import BadRecordedStep, OperationCrashes, RunSpec
from rmqsim.conformance.running.apply import SUT_FAILURES, error_outcome, exception_text
from rmqsim.conformance.running.lockstep import Divergence, Stats, StepRecord
from rmqsim.conformance.running.statediff import state_digest
from rmqsim.conformance.running.trace import Trace, TraceFormatError
from rmqsim.conformance.running.watchdog import CallBound, OperationHang
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
from rmqsim.scenarios.consumer.ops import (
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
)
from rmqsim.scenarios.consumer.profiles import ClientSpec, ConsumerProfile
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.queue.profiles import ProfileError

__all__ = [
    "DEFAULT_CONSUMER_IMPL",
    "ConsumerLockstep",
    "check_consumer_trace",
    "consumer_config",
    "consumer_profile_of",
    "consumer_trace_header",
    "impl_consumer_factory",
    "is_consumer_header",
    "resolve_consumer_impl",
]

DEFAULT_CONSUMER_IMPL = "rmqsim.conformance.consumer.run:impl_consumer_factory"


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
    except SUT_FAILURES as exc:  # an MQError, or a SUT bug: compared and traced
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


def resolve_consumer_impl(impl: str | Factory) -> tuple[str, Factory, Callable[..., Any]]:
    """(name, queue factory, consumer factory): ``impl`` is one of them, ours the other."""
    if impl == DEFAULT_IMPL:
        impl = DEFAULT_CONSUMER_IMPL
    loaded = load_impl(impl)
    if loaded.layer == "consumer":
        return loaded.name, load_factory(DEFAULT_IMPL), loaded.factory
    if loaded.layer not in QUEUE_LAYERS:
        raise BadImplError(
            f"--impl {loaded.name} is a {LAYER_FORMS[loaded.layer]} factory; a consumer "
            "profile needs a push consumer factory or a queue factory"
        )
    return loaded.name, loaded.factory, impl_consumer_factory


class ConsumerLockstep(OperationCrashes):
    """One consumer run in progress (a ``layer.LayerLockstep``): both sides, the SUT's
    histories, a ``StepRecord`` per step. ``open`` it, ``execute`` steps, ``finish``
    (the final check, unless the spec turns it off), ``close`` (always)."""

    def __init__(self, spec: RunSpec, profile: ConsumerProfile, *, recorded: bool) -> None:
        self.spec = spec
        self.profile = profile
        #: The steps are a recorded trace's: a refused position past its batch is bad
        #: input (``BadRecordedStep``), not dropped (see ``_within_batch``).
        self.recorded = recorded
        self.clock = _Clock()
        self.config = MQConfig(**profile.config)
        self.model_queue = ReferenceMQ(config=self.config, clock=self.clock)
        self.stores: dict[str, dict[str, int]] = {c.group: {} for c in profile.clients}
        self.records: list[StepRecord] = []
        self.index = 0
        self.last: Step[ConsumerOp] | None = None
        self.stats = Stats()
        self.histories = _Histories(profile)
        #: Set when the queue cannot be created in a fresh directory: the SUT's failure,
        #: reported at the first step (as the queue layer's lockstep does).
        self.open_failure: str | None = None
        self.open_anomaly = "unrecoverable"
        self.sut: _Side | None = None
        #: Bounds every call into the SUT side (a hang is a finding), from ``open`` to
        #: ``close``.
        self.exits = contextlib.ExitStack()
        self.bound = CallBound()

    def open(
        self, root: Path, queue_factory: Factory, consumer_factory: Callable[..., Any]
    ) -> None:
        """Open the SUT side in ``root`` (its failure is the run's, at the first step),
        then the model's."""
        self.bound = self.exits.enter_context(CallBound())
        profile = self.profile
        # One offset store directory per group (a group name may not be a file name).
        slot = {c.group: index for index, c in enumerate(profile.clients)}

        def open_queue() -> MessageQueue:
            queue = queue_factory(
                path=root / "queue", config=self.config, clock=self.clock, faults=None
            )
            return checked_queue(queue, queue_factory)

        try:
            self.sut = self.bound.call(
                "open",
                _Side,
                profile,
                self.clock,
                open_queue,
                lambda q: q.crash(),
                lambda **kw: consumer_factory(path=root / f"offsets-{slot[kw['group']]}", **kw),
            )
        except BadImplError:
            self.exits.close()
            raise
        except OperationHang as hang:
            self.open_failure = f"opening a fresh directory: {hang.detail}"
            self.open_anomaly = "hang"
        except Exception as exc:
            self.open_failure = (f"opening a fresh directory raised {type(exc).__name__}: "
                                 f"{exception_text(exc)}")
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
            step = _within_batch(index, step, op, self.model.batches, self.recorded)
            op = step.op
        _count(self.stats, op)
        model, sut, records = self.model, self.sut, self.records
        if sut is None:
            assert self.open_failure is not None
            _, want = _outcome(lambda: model.apply(op))
            records.append(StepRecord(step, want))
            raise Divergence(
                anomaly=self.open_anomaly,
                step_index=index,
                step=step,
                expected=want,
                detail=self.open_failure,
            )
        try:
            raw, got = _outcome(lambda: self.bound.call(op.kind, sut.apply, op))
        except OperationHang as hang:
            _, want = _outcome(lambda: model.apply(op))
            records.append(StepRecord(step, want))
            raise Divergence(
                anomaly="hang", step_index=index, step=step, expected=want, detail=hang.detail
            ) from None
        _, want = _outcome(lambda: model.apply(op))
        try:
            if got.error is None:
                self.histories.observe(op, raw, sut.refused if type(op) is Complete else ())
        except ConsumerViolation as found:
            records.append(StepRecord(step, want, sut_outcome=got))
            raise Divergence(
                anomaly=found.anomaly,
                step_index=index,
                step=step,
                expected=want,
                actual=got,
                detail=found.detail,
            ) from None
        except Exception:
            # Only a value of the implementation's own making (of another type than the
            # consumer contract's) can trip the histories: the model's never do.
            if got == want:
                raise
        if got != want:
            records.append(StepRecord(step, want, sut_outcome=got))
            raise Divergence(
                anomaly="consumer-mismatch",
                step_index=index,
                step=step,
                expected=want,
                actual=got,
                detail="the consumer under test and the model returned different values",
            )
        records.append(StepRecord(step, want))
        return want

    def finish(self) -> None:
        """The final check: nothing was lost once the run drained."""
        try:
            self.histories.finish()
        except ConsumerViolation as found:
            assert self.last is not None
            # No outcomes: what marks a failure of the final check (see
            # ``run_result.failed_at_final_check``); a failing step always has both.
            raise Divergence(
                anomaly=found.anomaly, step_index=self.index, step=self.last, detail=found.detail
            ) from None

    def close(self) -> None:
        """Release both sides, then the bound on calls."""
        try:
            if self.sut is not None:
                with contextlib.suppress(OperationHang, Exception):  # the result is known
                    self.bound.call("crash()", self.sut.close)
            self.model.close()
        finally:
            self.exits.close()

    def state_digest(self) -> str:
        return state_digest(self.model_queue.snapshot())


def _within_batch(
    index: int,
    step: Step[ConsumerOp],
    op: Complete,
    batches: Mapping[tuple[str, int], tuple[int, ...]],
    strict: bool,
) -> Step[ConsumerOp]:
    """``step`` with only the refused positions that ``op``'s batch has; with ``strict``
    (replaying a recorded trace, whose positions were written so), a position it lacks
    is bad input instead: ``BadRecordedStep``, before the step runs.

    A ``Complete``'s refused positions past the end of its batch (the model's, which is
    the SUT's too, or the delivery would have diverged) refuse nothing. A shrinker's
    candidate holds such positions legitimately: cutting produces or payloads makes
    later batches smaller, and cutting a delivery leaves its completion naming no batch.
    So by default they are dropped from the operation, which changes nothing it does,
    and the trace records the positions that took effect: any trace this writes,
    shrunk ones included, has every position within its batch."""
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
        raise BadRecordedStep(
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


def consumer_profile_of(header: Mapping[str, Any], path: Path | str) -> ConsumerProfile:
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
    when replayed (``_within_batch``): the batch is the model's, which only replaying
    builds."""
    profile = consumer_profile_of(trace.header, trace.path)
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
