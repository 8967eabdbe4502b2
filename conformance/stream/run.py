"""The stream layer's lockstep (a ``layer.LayerLockstep``): the model streams over a
``ReferenceMQ`` and the streams under test over the queue under test, fed the same steps of
``scenarios.stream.sim``; each step's outcomes must be equal, every stream's state too
(``snapshot()``), and the implementation's outcomes must keep the properties of
``check.StreamChecker``. At the end both queues must hold the same records.

``--impl`` names either a stream factory (``factory(queue=...) -> StreamFactory``, run over
our RocksMQ), one of ``STREAM_IMPLS``, or a queue factory (our streams over that queue);
``adapter.load_impl`` tells which.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from rmqsim.conformance.adapter import (
    BUILTIN_IMPLS,
    DEFAULT_IMPL,
    LAYER_FORMS,
    QUEUE_FACTORY_ATTRIBUTE,
    QUEUE_LAYERS,
    BadImplError,
    Factory,
    checked_queue,
    impl_name,
    load_factory,
    load_impl,
)
from rmqsim.conformance.layer import OperationCrashes, RunSpec
from rmqsim.conformance.reporting.anomalies import is_protocol_error
from rmqsim.conformance.running.apply import SUT_FAILURES, exception_text
from rmqsim.conformance.running.lockstep import Divergence, Stats, StepRecord
from rmqsim.conformance.running.statediff import state_digest
from rmqsim.conformance.running.trace import Trace, TraceFormatError
from rmqsim.conformance.running.watchdog import CallBound, OperationHang
from rmqsim.conformance.stream.cells import CellCounter
from rmqsim.conformance.stream.check import (
    StreamChecker,
    StreamViolation,
    describe_outcomes,
    describe_states,
)
from rmqsim.conformance.stream.side import StreamSide
from rmqsim.conformance.wire.codec import WireProtocolError
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import InvalidArgumentError, MessageQueue, MQConfig
from rmqsim.model.stream import StreamModelFactory
from rmqsim.model.stream.api import StreamFactory, StreamState
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.queue.profiles import ProfileError
from rmqsim.scenarios.stream.profiles import StreamProfile

__all__ = [
    "DEFAULT_STREAM_IMPL",
    "STREAM_FACTORY_MEMBERS",
    "STREAM_IMPLS",
    "StreamLockstep",
    "StreamSut",
    "check_stream_trace",
    "checked_stream_factory",
    "resolve_stream_impl",
    "stream_profile_of",
]

DEFAULT_STREAM_IMPL = BUILTIN_IMPLS["stream"]
#: Named built-in stream implementations for ``--impl`` (``adapter.BUILTIN_IMPLS``').
STREAM_IMPLS: dict[str, str] = {name: BUILTIN_IMPLS[name] for name in ("stream", "stream-threaded")}
StreamFactoryFn = Callable[..., StreamFactory]
#: What a stream run opens: the queue factory and the stream factory over its queues.
StreamSut = tuple[Factory, StreamFactoryFn]


def resolve_stream_impl(impl: Any) -> tuple[str, StreamSut]:
    """``(name, (queue factory, stream factory))`` for ``--impl`` (see the module doc),
    loaded by ``adapter.load_impl`` like every layer's."""
    if impl == DEFAULT_IMPL:  # our streams over our queue
        impl = "stream"
    loaded = load_impl(impl)
    if loaded.layer == "stream":  # over our queue, or the one it names (a protocol server's)
        queue = getattr(loaded.factory, QUEUE_FACTORY_ATTRIBUTE, None)
        return loaded.name, (queue or load_factory(DEFAULT_IMPL), loaded.factory)
    if loaded.layer not in QUEUE_LAYERS:
        raise BadImplError(
            f"--impl {loaded.name} is a {LAYER_FORMS[loaded.layer]} factory; a stream "
            "profile needs a stream factory(queue=) or a queue factory"
        )
    return loaded.name, (loaded.factory, load_impl(DEFAULT_STREAM_IMPL).factory)


#: What a stream factory's result must have (``model.stream.api.StreamFactory``).
STREAM_FACTORY_MEMBERS = ("new_msg_stream", "new_tt_msg_stream")


def checked_stream_factory(streams: object, factory: StreamFactoryFn) -> StreamFactory:
    """``streams``, which the stream ``factory`` just returned, if it is a stream factory
    (its two methods, and the queue it was given as ``mq``); else ``BadImplError`` naming
    what it lacks, as ``adapter.checked_queue`` refuses a queue factory's wrong result."""
    missing = [m + "()" for m in STREAM_FACTORY_MEMBERS if not callable(getattr(streams, m, None))]
    try:
        has_mq = getattr(streams, "mq", None) is not None
    except Exception:  # a property of the implementation's that raises: its to report
        has_mq = True
    if not has_mq:
        missing.append("mq")
    if not missing:
        return streams  # type: ignore[return-value]  # checked member by member above
    raise BadImplError(
        f"the stream factory {impl_name(factory)} returned a {type(streams).__name__}, which "
        f"has no {', '.join(missing)}: a stream factory returns a "
        "rmqsim.model.stream.api.StreamFactory over the queue it is given"
    )


class _Clock:
    """The simulated clock both queues read: the current step's ``time_s``."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _outcome(apply: Callable[[], Outcome]) -> Outcome:
    """``apply()``; an exception outside the contract's errors is an ``unexpected:`` one."""
    try:
        return apply()
    except SUT_FAILURES as exc:
        return Outcome(error=f"unexpected:{type(exc).__name__}: {exception_text(exc)[:200]}")


class _SnapshotFailed(Exception):
    """A ``snapshot()`` of the implementation raised or hung: its ``anomaly``."""

    def __init__(self, anomaly: str, detail: str) -> None:
        super().__init__(detail)
        self.anomaly = anomaly
        self.detail = detail


def _described(want: Outcome, got: Outcome) -> str:
    """``describe_outcomes``, or the two outcomes as they are when the implementation's
    is of a shape no stream returns."""
    try:
        return describe_outcomes(want, got)
    except Exception:
        return f"model {want!r:.300}, implementation {got!r:.300}"


class StreamLockstep(OperationCrashes):
    """One stream run in progress: ``open`` it, ``execute`` steps, ``finish``, ``close``."""

    def __init__(self, spec: RunSpec, profile: StreamProfile) -> None:
        self.spec = spec
        self.profile = profile
        self.clock = _Clock()
        self.config = MQConfig(**profile.config)
        self.model_queue = ReferenceMQ(config=self.config, clock=self.clock)
        channels = profile.channel_names
        self.model = StreamSide(StreamModelFactory(self.model_queue), channels, lambda f: f)
        self.checker = StreamChecker(channels)
        self.cells = CellCounter(self.model_queue, channels)
        self.records: list[StepRecord] = []
        self.stats = Stats()
        self.index = 0
        self.last: Step[Any] | None = None
        self.sut: StreamSide | None = None
        self.open_failure: str | None = None
        self.open_anomaly = "unrecoverable"
        self.exits = contextlib.ExitStack()
        self.bound = CallBound()

    def open(self, root: Path, sut: StreamSut) -> None:
        """Open the queue under test in ``root`` and the streams over it; a failure is
        the run's, reported at its first step."""
        queue_factory, stream_factory_fn = sut
        self.bound = self.exits.enter_context(CallBound())

        def open_queue() -> MessageQueue:
            queue = queue_factory(
                path=root / "queue", config=self.config, clock=self.clock, faults=None
            )
            return checked_queue(queue, queue_factory)

        def open_streams() -> StreamFactory:
            return checked_stream_factory(stream_factory_fn(queue=open_queue()), stream_factory_fn)

        def reopen(factory: StreamFactory) -> StreamFactory:
            # checked_queue made sure the queue under test has crash()
            factory.mq.crash()  # type: ignore[attr-defined]
            return open_streams()

        try:
            factory = self.bound.call("open", open_streams)
            self.sut = StreamSide(factory, self.profile.channel_names, reopen)
        except BadImplError:
            self.exits.close()
            raise
        except OperationHang as hang:
            self.open_failure = f"opening a fresh directory: {hang.detail}"
        except SUT_FAILURES as exc:
            if isinstance(exc, WireProtocolError):  # a server's reply broke the protocol
                self.open_anomaly = "protocol-error"
            self.open_failure = (f"opening a fresh directory raised {type(exc).__name__}: "
                                 f"{exception_text(exc)}")

    def execute(self, step: Step[Any]) -> Outcome:
        """Run ``step`` on both sides; the model's outcome, or ``Divergence``."""
        self.index += 1
        self.last = step
        self.clock.now = step.time_s
        self.stats.steps += 1
        self.stats.op_counts[step.op.kind] += 1
        if step.op.kind == "stream_crash_queue":
            self.stats.crashes_injected += 1
            self.stats.reopens += 1
        self.stats.cells.update(self.cells.before(step.op))
        sut = self.sut
        if sut is None:
            assert self.open_failure is not None
            want = _outcome(lambda: self.model.apply(step.op))
            self.records.append(StepRecord(step, want))
            raise Divergence(self.open_anomaly, self.index, step, want, None, [],
                             self.open_failure)  # fmt: skip
        try:
            got = _outcome(lambda: self.bound.call(step.op.kind, sut.apply, step.op))
        except OperationHang as hang:
            want = _outcome(lambda: self.model.apply(step.op))
            self.records.append(StepRecord(step, want))
            raise Divergence("hang", self.index, step, want, None, [], hang.detail) from None
        want = _outcome(lambda: self.model.apply(step.op))
        self.cells.after(step.op, want)
        self._compare(step, want, got)
        self.records.append(StepRecord(step, want))
        return want

    def _compare(self, step: Step[Any], want: Outcome, got: Outcome) -> None:
        if is_protocol_error(got.error):  # a stream server's reply broke the protocol
            self._diverge("protocol-error", step, want, got, str(got.error))
        try:
            self.checker.observe(step.op, got, want)
        except StreamViolation as violation:
            self._diverge(violation.anomaly, step, want, got, violation.detail)
        except Exception:
            # Only an outcome of the implementation's own making (values of other types
            # than a stream returns) can trip the checks: the model's never do.
            if got == want:
                raise
        if got != want:
            self._diverge("stream-mismatch", step, want, got, _described(want, got))
        self.stats.partial_checks += 1
        # Only the stream the operation names changes (a write changes no stream's state
        # until a consumer reads it; a crash closes them all); ``finish`` compares them all.
        name = getattr(step.op, "producer", None) or getattr(step.op, "consumer", None)
        try:
            difference = self._state_difference([name] if isinstance(name, str) else [])
        except _SnapshotFailed as failed:
            self._diverge(failed.anomaly, step, want, got, failed.detail)
        if difference is not None:
            self._diverge("stream-state-mismatch", step, want, got, difference)

    def _state_difference(self, names: list[str]) -> str | None:
        """What differs between the model's and the implementation's streams ``names``
        (those the model has), or None; ``_SnapshotFailed`` when a ``snapshot()`` of the
        implementation raised or hung."""
        assert self.sut is not None
        for name in names:
            model_stream = self.model.streams.get(name)
            if model_stream is None:
                continue
            sut_stream = self.sut.streams.get(name)
            model_state = model_stream.snapshot()
            sut_state = (
                None if sut_stream is None
                else self._sut_call(f"snapshot() of stream {name}", sut_stream.snapshot)
            )  # fmt: skip
            if sut_state is not None and not isinstance(sut_state, StreamState):
                return (f"stream {name}: snapshot() returned {type(sut_state).__name__}, not "
                        "model.stream.api.StreamState")  # fmt: skip
            if sut_state != model_state:
                return describe_states(name, model_state, sut_state)
        return None

    def _sut_call(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, a call into the implementation outside an operation (a snapshot);
        ``_SnapshotFailed`` (the implementation's anomaly) when it raises or hangs."""
        try:
            return self.bound.call(what, fn)
        except OperationHang as hang:
            raise _SnapshotFailed("hang", hang.detail) from None
        except SUT_FAILURES as exc:
            detail = f"{what} raised {type(exc).__name__}: {exception_text(exc)}"
            anomaly = ("protocol-error" if isinstance(exc, WireProtocolError)
                       else "stream-state-mismatch")  # fmt: skip
            raise _SnapshotFailed(anomaly, detail) from None

    def _diverge(
        self, anomaly: str, step: Step[Any], want: Outcome, got: Outcome, detail: str
    ) -> NoReturn:
        self.records.append(StepRecord(step, want, sut_outcome=got))
        raise Divergence(anomaly, self.index, step, want, got, [], detail)

    def finish(self) -> None:
        """The final check: both queues hold the same records (the encoding is the
        contract's)."""
        if self.sut is None or self.last is None:
            return
        self.stats.full_checks += 1
        sut = self.sut
        try:
            found = self._state_difference(sorted(self.model.streams))
            sut_state = self._sut_call("the queue's snapshot()", lambda: sut.factory.mq.snapshot())
        except _SnapshotFailed as failed:
            raise Divergence(failed.anomaly, self.index, self.last, None, None, [],
                             failed.detail) from None  # fmt: skip
        if found is not None:
            raise Divergence("stream-state-mismatch", self.index, self.last, None, None, [], found)
        if sut_state != self.model_queue.snapshot():
            raise Divergence(
                "stream-state-mismatch", self.index, self.last, None, None, [],
                "the queue under the streams holds other records than the model's queue",
            )  # fmt: skip

    def close(self) -> None:
        """Release both sides (a broken implementation's failure to let go is not the
        run's: its result is known)."""
        try:
            if self.sut is not None:
                sut = self.sut
                with contextlib.suppress(OperationHang, Exception):
                    self.bound.call("close()", sut.close_streams)
                with contextlib.suppress(OperationHang, Exception):
                    queue: Any = sut.factory.mq  # a checked queue: it has crash()
                    self.bound.call("crash()", queue.crash)
            self.model.close_streams()
        finally:
            self.exits.close()

    def state_digest(self) -> str:
        return state_digest(self.model_queue.snapshot())


def stream_profile_of(header: Mapping[str, Any], path: Path | str) -> StreamProfile:
    """The profile a stream trace's header records, its queue configuration checked, so
    that a bad value is the trace's error (file and line 1)."""
    try:
        profile = StreamProfile.from_json(header.get("profile_config"))
        MQConfig(**profile.config)
    except (ProfileError, InvalidArgumentError, TypeError, ValueError) as exc:
        raise TraceFormatError(path, 1, f"header profile_config: {exc}") from None
    if profile.swarm or profile.steered:
        raise TraceFormatError(path, 1, "header profile_config: a family, not a profile")
    return profile


def _actors(profile: StreamProfile) -> tuple[set[str], set[str]]:
    producers = {f"producer-{i}" for i in range(profile.producers)} | {"ticker", "ddl"}
    consumers = {f"tt-{i}" for i in range(profile.tt_consumers)}
    consumers |= {f"plain-{i}" for i in range(profile.plain_consumers)}
    return producers, consumers


def check_stream_trace(trace: Trace) -> StreamProfile:
    """What one line cannot say alone: every stream an operation names is one of the
    header's profile's actors; ``TraceFormatError`` naming file and line otherwise."""
    profile = stream_profile_of(trace.header, trace.path)
    producers, consumers = _actors(profile)
    for step in trace.steps:
        for field_name, known in (("producer", producers), ("consumer", consumers)):
            name = getattr(step.op, field_name, None)
            if name is not None and name not in known:
                raise TraceFormatError(
                    trace.path,
                    step.line,
                    f"step {step.index}: op({step.op.kind}).{field_name}: {name!r} is not an "
                    f"actor of the header's profile ({', '.join(sorted(known))})",
                )
    return profile
