"""SPEC: after ``close()`` every operation but ``close()`` raises NotServing, checked
before the arguments, and ``close()`` twice is fine. Every ``close_reopen`` step asks the
closed SUT one read and closes it again; a queue that still serves, checks its
arguments first, or fails a second close diverges at that step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.adapter import model_factory
from rmqsim.conformance.running.lockstep import Lockstep
from rmqsim.conformance.running.run import replay_trace, run_seed
from rmqsim.conformance.running.trace import parse_lines
from rmqsim.model.api import InvalidArgumentError, MQConfig
from rmqsim.scenarios.queue import ops
from rmqsim.scenarios.queue.ops import Step


class _Wrapped:
    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


class ServesWhenClosed(_Wrapped):
    """``close()`` releases nothing: later calls are served."""

    def close(self) -> None:
        pass


class ArgumentsFirst(_Wrapped):
    """Checks a name before checking that it is closed."""

    def __init__(self, queue: Any) -> None:
        super().__init__(queue)
        self._closed = False

    def close(self) -> None:
        self._closed = True
        self._queue.close()

    def get_latest_msg(self, topic: str) -> int:
        if not topic:
            raise InvalidArgumentError("empty name")
        return self._queue.get_latest_msg(topic)


class CloseOnce(_Wrapped):
    """A second ``close()`` raises."""

    def __init__(self, queue: Any) -> None:
        super().__init__(queue)
        self._closed = False

    def close(self) -> None:
        if self._closed:
            raise RuntimeError("already closed")
        self._closed = True
        self._queue.close()


def _factory(cls: type) -> Any:
    def factory(**kwargs: Any) -> Any:
        return cls(model_factory(**kwargs))

    factory.__qualname__ = cls.__name__
    factory.rmqsim_layer = "queue"  # type: ignore[attr-defined]
    return factory


def _a_close_reopen_seed() -> int:
    """A smoke seed whose run closes and reopens the queue."""
    for seed in range(20):
        lines = run_seed("smoke", seed).trace_lines
        if any(step.op.kind == "close_reopen" for step in parse_lines(lines).steps):
            return seed
    raise AssertionError("no smoke seed in 0:20 closes the queue")


@pytest.mark.parametrize(
    ("cls", "sut_outcome"),
    [
        (ServesWhenClosed, "InvalidArgument"),  # it serves, so it checks the name
        (ArgumentsFirst, "InvalidArgument"),
        (CloseOnce, "unexpected:RuntimeError: already closed"),
    ],
)
def test_a_queue_that_serves_after_close_diverges_at_the_close(cls: type, sut_outcome: str) -> None:
    seed = _a_close_reopen_seed()
    result = run_seed("smoke", seed, impl=_factory(cls))
    divergence = result.divergence
    assert divergence is not None and divergence.anomaly == "error-mismatch"
    assert divergence.step.op.kind == "close_reopen"
    assert "after close(), every operation but close() raises NotServing" in divergence.detail
    assert divergence.actual is not None and divergence.actual.error == sut_outcome
    # The trace reproduces it.
    again = replay_trace(parse_lines(result.trace_lines), impl=_factory(cls))
    assert again.anomaly == "error-mismatch" and again.divergence is not None
    assert again.divergence.step_index == divergence.step_index


def test_a_queue_that_honours_close_passes_the_same_seed() -> None:
    assert run_seed("smoke", _a_close_reopen_seed(), impl=model_factory).ok


class FaultsInClose(_Wrapped):
    """Passes a crash point at every ``close()``, closed or not."""

    def __init__(self, queue: Any, faults: Any) -> None:
        super().__init__(queue)
        self._faults = faults

    def close(self) -> None:
        self._faults("close.point")
        self._queue.close()


def test_the_probe_is_not_an_operation_its_crash_points_neither_count_nor_fire(
    tmp_path: Path,
) -> None:
    """A crash armed at the 2nd point of a close must not fire in the probe's second
    ``close()``: the probe would otherwise change which crash a trace's step injects."""

    def factory(**kwargs: Any) -> Any:
        return FaultsInClose(model_factory(**kwargs), kwargs["faults"])

    lockstep = Lockstep(factory, MQConfig(), tmp_path)
    lockstep.execute(Step(1, "t", ops.CreateTopic("t")))
    lockstep.execute(Step(2, "t", ops.ArmCrash(hit=2, point=None)))
    lockstep.execute(Step(3, "t", ops.CloseReopen()))
    assert lockstep.stats.crashes_injected == 0
    assert lockstep.faults.seen[("close", "close.point")] == 1
    lockstep.close()
