"""How fast this machine runs rmqsim's own Python, measured in the run that reports a time.

A time measured on one machine says little about another, or about the same machine on
another night: the 2-core machine rmqsim is measured on ran the test command of the same
code (b8f9ca0, then e3dfa2b: ten lines apart) in 9 min 32 s one evening and 16 min 6 s
the next night (docs/BENCHMARKS.md).
So a figure of time comes with this machine's speed, measured in the same run: the
reference model (``model.ReferenceMQ``, pure Python, no I/O) running the operations of
``smoke`` seed 0 alone, per CPU second, as ``rmqsim bench``'s "model alone" column does.

``REFERENCE_MODEL_OPS_PER_CPU_S`` is that figure on the quiet 2-core machine issues 40 and
41 set their targets on; ``MachineSpeed.slower_than_reference`` is how many times slower
this machine runs the same Python. Since that figure was taken the model has only been
made faster, so the factor errs low: a time scaled by it to the reference machine is, if
anything, too long. It scales CPU work; a JVM's start or a test that sleeps scales less.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = [
    "PROBE_PROFILE",
    "REFERENCE_MODEL_OPS_PER_CPU_S",
    "MachineSpeed",
    "measure_machine_speed",
]

#: The reference model alone on smoke, operations per second, on the quiet (load 0.05)
#: 2-core machine of issue 40's filing (2026-11-27): the machine of issues 40 and 41's
#: targets. Quiet, its wall and CPU figures were the same.
REFERENCE_MODEL_OPS_PER_CPU_S = 140_289
#: The profile and seed whose operations the probe runs.
PROBE_PROFILE = "smoke"
PROBE_SEED = 0


@dataclass(frozen=True, slots=True)
class MachineSpeed:
    """The reference model's operations per CPU second on this machine, now (its
    median round), and how many operations and CPU seconds the measurement took."""

    model_ops_per_cpu_s: float
    operations: int
    cpu_s: float
    #: The slowest and the fastest round's: how steady the machine was while measured.
    slowest_ops_per_cpu_s: float = 0.0
    fastest_ops_per_cpu_s: float = 0.0

    @property
    def slower_than_reference(self) -> float:
        """How many times slower than the reference machine (below 1: faster)."""
        return REFERENCE_MODEL_OPS_PER_CPU_S / self.model_ops_per_cpu_s


def measure_machine_speed(min_cpu_s: float = 1.0) -> MachineSpeed:
    """Run the model alone over smoke seed 0's operations (taken from one lockstep run's
    trace), round after round, until at least ``min_cpu_s`` of CPU, after one unmeasured
    round; the speed is the median round's (a round is 300 operations, a few ms: the
    median leaves out the rounds another process on the machine slowed down, or sped up
    by leaving the core's sibling idle)."""
    if not min_cpu_s > 0:
        raise ValueError(f"min_cpu_s must be positive, got {min_cpu_s!r}")
    from rmqsim.conformance.bench.lockstep import model_alone, steps_of
    from rmqsim.conformance.running.run import run_seed

    result = run_seed(PROBE_PROFILE, PROBE_SEED)
    config, steps = steps_of(result.trace_lines)
    model_alone(config, steps)  # the first round pays for lazy imports and cold caches
    rounds_cpu_s: list[float] = []
    while sum(rounds_cpu_s) < min_cpu_s:
        rounds_cpu_s.append(model_alone(config, steps).cpu_s)

    def rate(round_cpu_s: float) -> float:
        return len(steps) / max(round_cpu_s, 1e-6)

    return MachineSpeed(rate(statistics.median(rounds_cpu_s)), len(steps) * len(rounds_cpu_s),
                        sum(rounds_cpu_s), rate(max(rounds_cpu_s)), rate(min(rounds_cpu_s)))
