"""Stream lockstep throughput: the operations of stream runs three ways in one process, as
``bench_lockstep`` does for the queue: in lockstep (the model's streams, the streams under
test, the stream checks and every snapshot comparison), the stream implementation alone
(over its own queue), and the model's streams alone (over ``ReferenceMQ``). The operations
are those of the lockstep run's own trace, so the three ways run exactly the same ones.

Each way is timed by the wall and by the process's CPU time (every thread). The lockstep's
wall time is its run's own (``RunResult.wall_s``); its CPU time is taken around
``run_seed``, so it also holds the scenario's generation."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import checked_queue
from rmqsim.conformance.bench.lockstep import LockstepMeasurement
from rmqsim.conformance.bench.raw import Timing, stopwatch
from rmqsim.conformance.running.run import parse_run_lines, run_seed
from rmqsim.conformance.running.scratch import scratch_root
from rmqsim.conformance.stream.run import StreamSut, resolve_stream_impl, stream_profile_of
from rmqsim.conformance.stream.side import StreamSide, forget_memories
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MessageQueue, MQConfig
from rmqsim.model.stream import StreamModelFactory
from rmqsim.model.stream.api import StreamFactory
from rmqsim.scenarios.queue.ops import Step
from rmqsim.scenarios.stream.profiles import StreamProfile

__all__ = [
    "STREAM_BENCH_IMPL",
    "STREAM_BENCH_PROFILE",
    "measure_stream_lockstep",
    "stream_impl_alone",
    "stream_model_alone",
    "stream_steps",
]

#: What ``rmqsim bench`` measures of the stream layer: our streams on our queue.
STREAM_BENCH_PROFILE = "stream"
STREAM_BENCH_IMPL = "stream"


class _Clock:
    """The simulated clock a queue reads: the current step's ``time_s``."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def _run_steps(side: StreamSide, clock: _Clock, steps: list[Step[Any]]) -> None:
    for step in steps:
        clock.now = step.time_s
        side.apply(step.op)
    side.close_streams()


def stream_impl_alone(sut: StreamSut, profile: StreamProfile, steps: list[Step[Any]]) -> Timing:
    """The steps on the streams under test over a fresh queue of their own, unchecked."""
    queue_factory, stream_factory_fn = sut
    config, clock = MQConfig(**profile.config), _Clock()
    with (
        tempfile.TemporaryDirectory(prefix="rmqsim-bench-stream-", dir=scratch_root()) as tmp,
        stopwatch() as timing,
    ):

        def open_queue() -> MessageQueue:
            queue = queue_factory(path=Path(tmp) / "queue", config=config, clock=clock, faults=None)
            return checked_queue(queue, queue_factory)

        def reopen(factory: StreamFactory) -> StreamFactory:
            factory.mq.crash()  # type: ignore[attr-defined]  # checked_queue: it has crash()
            return stream_factory_fn(queue=open_queue())

        side = StreamSide(stream_factory_fn(queue=open_queue()), profile.channel_names, reopen)
        _run_steps(side, clock, steps)
        side.factory.mq.crash()  # type: ignore[attr-defined]  # as the lockstep releases it
    return timing


def stream_model_alone(profile: StreamProfile, steps: list[Step[Any]]) -> Timing:
    """The steps on the model's streams over ``ReferenceMQ``, timed."""
    clock = _Clock()
    with stopwatch() as timing:
        queue = ReferenceMQ(config=MQConfig(**profile.config), clock=clock)
        side = StreamSide(StreamModelFactory(queue), profile.channel_names, lambda f: f)
        _run_steps(side, clock, steps)
    return timing


def stream_steps(trace_lines: list[str]) -> tuple[StreamProfile, list[Step[Any]]]:
    """The stream profile and the operations a stream run's trace recorded."""
    trace = parse_run_lines(trace_lines)
    return stream_profile_of(trace.header, "<bench>"), [
        Step(s.time_s, s.actor, s.op) for s in trace.steps
    ]


def _timed_run(profile_name: str, seed: int, impl: str) -> tuple[Timing, list[str]]:
    """One lockstep run, timed; it must conform (a divergence is no throughput)."""
    cpu_started = time.process_time()
    result = run_seed(profile_name, seed, impl=impl)
    cpu_s = time.process_time() - cpu_started
    assert result.ok, f"{profile_name} seed {seed} diverges: measure a conforming SUT"
    return Timing(result.wall_s, cpu_s), result.trace_lines


def measure_stream_lockstep(
    seeds: range, profile_name: str = STREAM_BENCH_PROFILE, impl: str = STREAM_BENCH_IMPL
) -> LockstepMeasurement:
    """Run ``seeds`` of the stream profile ``profile_name`` in lockstep on ``impl``, then
    the same operations on ``impl`` alone and on the model alone; return the three rates.
    The first seed runs once unmeasured first (a process's first run pays one-time costs).
    Each way starts with the stream layer's memories empty (``side.forget_memories``): the
    ways run the same records and packs, which the one before would have left remembered."""
    _, sut = resolve_stream_impl(impl)
    totals = {"lockstep": Timing(), "impl": Timing(), "model": Timing()}
    operations = 0
    for index, seed in enumerate([*seeds[:1], *seeds]):
        forget_memories()  # each way from cold, as a process of its own would run it
        lockstep, trace_lines = _timed_run(profile_name, seed, impl)
        profile, steps = stream_steps(trace_lines)
        forget_memories()
        impl_alone = stream_impl_alone(sut, profile, steps)
        forget_memories()
        model_alone = stream_model_alone(profile, steps)
        timings = {"lockstep": lockstep, "impl": impl_alone, "model": model_alone}
        if index == 0:
            continue  # the warm-up
        operations += len(steps)
        for name, timing in timings.items():
            totals[name].wall_s += timing.wall_s
            totals[name].cpu_s += timing.cpu_s
    return LockstepMeasurement(
        profile_name,
        operations,
        *(operations / max(totals[name].wall_s, 1e-6) for name in ("lockstep", "impl", "model")),
        *(operations / max(totals[name].cpu_s, 1e-6) for name in ("lockstep", "impl", "model")),
    )
