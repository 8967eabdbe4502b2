"""The harness's own cost, and the floor it puts under lockstep / SUT alone:
``rmqsim bench --breakdown``.

A lockstep operation is the implementation's work plus the harness's: the simulation
choosing the operation, the reference model applying it, the dispatch, the outcome and
state comparisons, the watchdog, the trace. The harness's part is measured with a SUT
that costs next to nothing: the reference model itself (``conformance.adapter``'s
``make_model_factory``), in lockstep with every check on, less what that SUT's own
operations cost (the model alone over the same operations) and less the CPU its
``snapshot`` calls took (reading a SUT's state back is the implementation's work).

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory
from rmqsim.conformance.bench.lockstep import model_alone, steps_of, sut_alone
from rmqsim.conformance.running.run import run_seed
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import State

__all__ = ["HarnessFloor", "SnapshotTimedModel", "harness_sut", "measure_harness_floor"]


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


class SnapshotTimedModel(ReferenceMQ):
    """The reference model as a SUT, adding the CPU seconds of its ``snapshot`` calls to
    ``snapshot_cpu_s``: what reading its state back cost the harness."""

    snapshot_cpu_s: list[float] = [0.0]  # noqa: RUF012  # the one total, of every instance

    def snapshot(self, *args: Any, **kwargs: Any) -> State:
        started = time.process_time()
        try:
            return super().snapshot(*args, **kwargs)
        finally:
            self.snapshot_cpu_s[0] += time.process_time() - started


#: The SUT of the harness's runs.
harness_sut = make_model_factory(SnapshotTimedModel)


def _harness_cpu_s(profile: str, seed: int) -> tuple[int, float]:
    """Operations of one lockstep run with the model as the SUT, and the CPU seconds it
    took beyond that SUT's own operations and the reads of its state."""
    SnapshotTimedModel.snapshot_cpu_s[0] = 0.0
    started = time.process_time()
    result = run_seed(profile, seed, impl=harness_sut)
    lockstep_cpu_s = time.process_time() - started
    assert result.ok, f"{profile} seed {seed}: the model diverges from itself"
    config, steps = steps_of(result.trace_lines)
    sut_work_s = model_alone(config, steps).cpu_s + SnapshotTimedModel.snapshot_cpu_s[0]
    return len(steps), lockstep_cpu_s - sut_work_s


def _sut_cpu_s(profile: str, seed: int, impl: str) -> tuple[int, float]:
    """Operations of one lockstep run of ``impl`` and the CPU seconds ``impl`` alone
    takes for them."""
    result = run_seed(profile, seed, impl=impl)
    assert result.ok, f"{profile} seed {seed} diverges: measure a conforming SUT"
    config, steps = steps_of(result.trace_lines)
    return len(steps), sut_alone(impl, config, steps).cpu_s


def measure_harness_floor(
    profile: str, seeds: Sequence[int], impl: str = DEFAULT_IMPL
) -> HarnessFloor:
    """The harness's CPU per operation on ``seeds`` of ``profile`` (the model as the SUT,
    every check), and ``impl``'s alone on the operations of its own lockstep runs."""
    if not seeds:
        raise ValueError("measure_harness_floor needs at least one seed")
    _harness_cpu_s(profile, seeds[0])  # warm-up: imports, first open, caches
    _sut_cpu_s(profile, seeds[0], impl)
    harness_ops = sut_ops = 0
    harness_s = sut_s = 0.0
    for seed in seeds:
        operations, cpu_s = _harness_cpu_s(profile, seed)
        harness_ops, harness_s = harness_ops + operations, harness_s + cpu_s
        operations, cpu_s = _sut_cpu_s(profile, seed, impl)
        sut_ops, sut_s = sut_ops + operations, sut_s + cpu_s
    return HarnessFloor(profile, harness_ops, max(harness_s, 0.0) / harness_ops * 1e6,
                        max(sut_s, 1e-6) / sut_ops * 1e6)
