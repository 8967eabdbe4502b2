"""The harness's own cost, and the floor it puts under lockstep / SUT alone:
``rmqsim bench --breakdown``, for the queue (smoke) and the stream layer.

A lockstep operation is the implementation's work plus the harness's: the simulation
choosing the operation, the reference model applying it, the dispatch, the outcome and
state comparisons, the watchdog, the trace. The harness's part is measured with a SUT
that costs next to nothing: the reference model itself (``conformance.adapter``'s
``make_model_factory``; for the stream layer, the model's streams over it), in lockstep
with every check on, less what that SUT's own operations cost (the model alone over the
same operations) and less the CPU its ``snapshot`` calls took (reading a SUT's state back
is the implementation's work: ``SUT_READS``).

So ``slowdown_floor = (SUT alone + harness) / SUT alone`` bounds from below what the
lockstep can achieve against the SUT alone (``lockstep.<profile>.cpu_slowdown_vs_sut``)
for *any* implementation as fast as ``impl.RocksMQ``, even one whose state could be read
back for free: a ratio target under it cannot be met by making the implementation's side
cheaper, only by making the harness (model, simulation, comparison) cheaper. Times are
CPU seconds of the process (``time.process_time``), so a shared machine's other jobs do
not count; the two sides are measured seed by seed, in alternation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory
from rmqsim.conformance.bench.lockstep import model_alone, steps_of, sut_alone
from rmqsim.conformance.bench.stream import (
    STREAM_BENCH_IMPL,
    STREAM_BENCH_PROFILE,
    stream_impl_alone,
    stream_model_alone,
    stream_steps,
)
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.stream.run import resolve_stream_impl
from rmqsim.conformance.stream.side import forget_memories
from rmqsim.conformance.wire.client import QUEUE_FACTORY_ATTRIBUTE
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import State
from rmqsim.model.stream import StreamModelFactory
from rmqsim.model.stream.api import StreamState
from rmqsim.model.stream.reference import PlainStreamModel, TtStreamModel

__all__ = [
    "SUT_READS",
    "HarnessFloor",
    "ReadTime",
    "SnapshotTimedModel",
    "SnapshotTimedStreams",
    "harness_streams",
    "harness_sut",
    "measure_harness_floor",
    "measure_stream_harness_floor",
]


@dataclass(frozen=True, slots=True)
class HarnessFloor:
    """CPU µs per operation of the harness alone and of the implementation alone."""

    profile: str
    operations: int
    harness_us_per_op: float
    sut_us_per_op: float

    @property
    def slowdown_floor(self) -> float:
        """The least lockstep / SUT-alone CPU ratio this harness allows this SUT."""
        return (self.sut_us_per_op + self.harness_us_per_op) / self.sut_us_per_op


@dataclass(slots=True)
class ReadTime:
    """CPU seconds the harness's SUT spent answering ``snapshot`` calls."""

    cpu_s: float = 0.0

    def timed(self, snapshot: Callable[[], Any]) -> Any:
        started = time.process_time()
        try:
            return snapshot()
        finally:
            self.cpu_s += time.process_time() - started


#: The reads of the harness's SUT's state, since the last reset (``cpu_s = 0``).
SUT_READS = ReadTime()


class SnapshotTimedModel(ReferenceMQ):
    """The reference model as a SUT, its ``snapshot`` calls timed into ``SUT_READS``."""

    def snapshot(self, *args: Any, **kwargs: Any) -> State:
        return SUT_READS.timed(lambda: super(SnapshotTimedModel, self).snapshot(*args, **kwargs))


class _TimedPlain(PlainStreamModel):
    def snapshot(self) -> StreamState:
        return SUT_READS.timed(super().snapshot)


class _TimedTt(TtStreamModel):
    def snapshot(self) -> StreamState:
        return SUT_READS.timed(super().snapshot)


class SnapshotTimedStreams(StreamModelFactory):
    """The model's streams as a SUT, their ``snapshot`` calls timed into ``SUT_READS``."""

    def new_msg_stream(self) -> PlainStreamModel:
        return _TimedPlain(self.mq)

    def new_tt_msg_stream(self) -> TtStreamModel:
        return _TimedTt(self.mq)


#: The SUT of the harness's queue runs.
harness_sut = make_model_factory(SnapshotTimedModel)


def harness_streams(*, queue: Any) -> SnapshotTimedStreams:
    """The SUT of the harness's stream runs: the model's streams over ``queue``, which is
    ``harness_sut``'s (the attribute a stream factory names its queue factory by)."""
    return SnapshotTimedStreams(queue)


setattr(harness_streams, QUEUE_FACTORY_ATTRIBUTE, harness_sut)

#: One seed's side of a floor: (operations, CPU seconds).
_Side = Callable[[int], tuple[int, float]]


def _measure(profile: str, seeds: Sequence[int], harness: _Side, sut: _Side) -> HarnessFloor:
    """Both sides over ``seeds``, seed by seed, after one unmeasured warm-up of each."""
    if not seeds:
        raise ValueError("a harness floor needs at least one seed")
    harness(seeds[0])  # warm-up: imports, first open, caches
    sut(seeds[0])
    harness_ops = sut_ops = 0
    harness_s = sut_s = 0.0
    for seed in seeds:
        operations, cpu_s = harness(seed)
        harness_ops, harness_s = harness_ops + operations, harness_s + cpu_s
        operations, cpu_s = sut(seed)
        sut_ops, sut_s = sut_ops + operations, sut_s + cpu_s
    return HarnessFloor(profile, harness_ops, max(harness_s, 0.0) / harness_ops * 1e6,
                        max(sut_s, 1e-6) / sut_ops * 1e6)


def _lockstep_cpu_s(profile: str, seed: int, impl: Any) -> tuple[Any, float]:
    """One lockstep run of the harness's SUT, and its CPU seconds less the SUT's reads."""
    SUT_READS.cpu_s = 0.0
    started = time.process_time()
    result = run_seed(profile, seed, impl=impl)
    cpu_s = time.process_time() - started - SUT_READS.cpu_s
    assert result.ok, f"{profile} seed {seed}: the model diverges from itself"
    return result, cpu_s


def measure_harness_floor(
    profile: str, seeds: Sequence[int], impl: str = DEFAULT_IMPL
) -> HarnessFloor:
    """The harness's CPU per operation on ``seeds`` of the queue profile ``profile`` (the
    model as the SUT, every check), and ``impl``'s alone on the operations of its own
    lockstep runs."""

    def harness(seed: int) -> tuple[int, float]:
        result, cpu_s = _lockstep_cpu_s(profile, seed, harness_sut)
        config, steps = steps_of(result.trace_lines)
        return len(steps), cpu_s - model_alone(config, steps).cpu_s

    def sut(seed: int) -> tuple[int, float]:
        result = run_seed(profile, seed, impl=impl)
        assert result.ok, f"{profile} seed {seed} diverges: measure a conforming SUT"
        config, steps = steps_of(result.trace_lines)
        return len(steps), sut_alone(impl, config, steps).cpu_s

    return _measure(profile, seeds, harness, sut)


def measure_stream_harness_floor(
    seeds: Sequence[int], profile: str = STREAM_BENCH_PROFILE, impl: str = STREAM_BENCH_IMPL
) -> HarnessFloor:
    """As ``measure_harness_floor``, for the stream layer: the model's streams over the
    model as the SUT, and the streams ``impl`` alone (each way from the stream layer's
    memories empty, as ``measure_stream_lockstep`` runs them)."""
    _, pair = resolve_stream_impl(impl)

    def harness(seed: int) -> tuple[int, float]:
        forget_memories()
        result, cpu_s = _lockstep_cpu_s(profile, seed, harness_streams)
        stream_profile, steps = stream_steps(result.trace_lines)
        forget_memories()
        return len(steps), cpu_s - stream_model_alone(stream_profile, steps).cpu_s

    def sut(seed: int) -> tuple[int, float]:
        forget_memories()
        result = run_seed(profile, seed, impl=impl)
        assert result.ok, f"{profile} seed {seed} diverges: measure a conforming SUT"
        stream_profile, steps = stream_steps(result.trace_lines)
        forget_memories()
        return len(steps), stream_impl_alone(pair, stream_profile, steps).cpu_s

    return _measure(profile, seeds, harness, sut)
