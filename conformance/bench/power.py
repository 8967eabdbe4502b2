"""What a power-loss case costs through FUSE (``rmqsim bench --power-steps N``), measured
in one run.

The same storage sweep (``power_loss.power_loss_sweep``: smoke seed 0, its first ``N``
steps, the commit log held to the sync promise, every point under every fault mode) runs
twice: the store in rmqsim's process on the simulated disk (``fs=``, the baseline), and
the store as a child process (the reference server, forked) on a FUSE mount of the disk
(``--through fuse``). Figures are cases per wall second and per CPU second; the CPU is
rmqsim's process (every thread: the FUSE server is one) plus, through FUSE, the children's
(read from ``/proc`` as each ends: they are the fork server's children, which no
``getrusage`` of rmqsim's counts). Where FUSE cannot be used, the section says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rmqsim.conformance.crashing.power_loss import power_loss_sweep

__all__ = ["BENCH_POWER_PROFILE", "PowerMeasurement", "measure_power"]

#: The profile (seed 0) whose sweep is timed.
BENCH_POWER_PROFILE = "smoke"


@dataclass(frozen=True, slots=True)
class PowerMeasurement:
    """One sweep: its way to the disk, cases, wall and CPU seconds, failing cases."""

    way: str
    cases: int
    wall_s: float
    cpu_s: float
    failures: int

    @property
    def cases_per_s(self) -> float:
        return self.cases / max(self.wall_s, 1e-9)

    @property
    def cases_per_cpu_s(self) -> float:
        return self.cases / max(self.cpu_s, 1e-9)

    @property
    def ms_per_case(self) -> float:
        return self.wall_s / max(self.cases, 1) * 1e3


def _measure(way: str, through: str, steps: int) -> PowerMeasurement:
    started_cpu_s = time.process_time()
    result = power_loss_sweep(BENCH_POWER_PROFILE, 0, promise="sync", steps=steps,
                              through=through)
    cpu_s = time.process_time() - started_cpu_s + result.child_cpu_s
    return PowerMeasurement(way, len(result.cases), result.wall_s, cpu_s, len(result.failures))


def measure_power(steps: int) -> tuple[list[PowerMeasurement], str | None]:
    """The sweep in process, then through FUSE; (measurements, why FUSE was skipped or
    None)."""
    from rmqsim.conformance.crashing.power_fuse import FuseUnavailableError

    measured = [_measure("fs= (in process)", "fs", steps)]
    try:
        measured.append(_measure("FUSE (a child process)", "fuse", steps))
    except FuseUnavailableError as exc:
        return measured, str(exc)
    return measured, None
