"""The test command's closing lines: how long it took, what the machine spent, how fast the
machine was, and the target's verdict (issue 41: ≤ 6 min for the whole test command on a
quiet 2-core machine, ≤ 2 min for ``--quick``).

``scripts/test.sh`` exports when it started (``RMQSIM_TEST_STARTED_S``, seconds since the
epoch; the machine's busy and stolen CPU then, ``RMQSIM_TEST_STARTED_CPU``, in
``/proc/stat``'s ticks of 1/100 s) and, for a run of the whole suite or of ``--quick`` with no other
arguments, the target (``RMQSIM_TEST_TARGET_S``). The controller of the pytest run prints
the lines at its end: the command's wall time (set-up included), the machine's busy and
stolen CPU seconds over it (every process: the JVMs and fork servers that no
``time`` counts, and anything else the machine ran), this machine's speed
(``conformance.bench.speed``), the floor that CPU puts under the wall time (busy CPU over
the CPU count: no spreading of the work ends sooner), the verdict on the wall time
measured here, and the same times scaled to the speed of the machine the target was set
on, so that runs on two machines, or two nights, can be compared.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from rmqsim.conformance.bench.speed import REFERENCE_MODEL_OPS_PER_CPU_S, MachineSpeed

__all__ = [
    "CPU_ENV",
    "STARTED_ENV",
    "TARGET_ENV",
    "closing_lines",
    "machine_cpu_s",
    "minutes",
]

STARTED_ENV = "RMQSIM_TEST_STARTED_S"
CPU_ENV = "RMQSIM_TEST_STARTED_CPU"
TARGET_ENV = "RMQSIM_TEST_TARGET_S"
PROC_STAT = Path("/proc/stat")
#: ``/proc/stat`` counts CPU time in ticks of 1/100 s (Linux's ``USER_HZ``).
TICKS_PER_S = 100


def machine_cpu_s(stat: Path = PROC_STAT) -> tuple[float, float] | None:
    """The machine's busy and stolen CPU seconds since boot (``/proc/stat``'s first line),
    or None where there is no such file."""
    try:
        fields = stat.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    return (user + nice + system + irq + softirq) / TICKS_PER_S, steal / TICKS_PER_S


def minutes(seconds: float) -> str:
    """``14 min 21 s``; ``45 s`` under a minute."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def _float(environ: Mapping[str, str], name: str) -> float | None:
    try:
        return float(environ[name])
    except (KeyError, ValueError):
        return None


def _machine_cpu_s(environ: Mapping[str, str],
                   now_cpu: tuple[float, float] | None) -> tuple[float, float] | None:
    """The machine's busy and stolen CPU seconds since the command started, or None."""
    started = environ.get(CPU_ENV, "").split()
    if now_cpu is None or len(started) != 2:
        return None
    try:
        busy_s, stolen_s = (now - int(then) / TICKS_PER_S
                            for now, then in zip(now_cpu, started, strict=True))
    except ValueError:
        return None
    return busy_s, stolen_s


def _floor_line(busy_s: float, cpus: int, measured: MachineSpeed | None) -> str:
    """The least wall time ``busy_s`` of CPU allows on ``cpus`` CPUs however the work is
    spread (every core busy from start to end), here and scaled to the targets' machine."""
    floor_s = busy_s / cpus
    scaled = ("" if measured is None else
              f", ~{minutes(floor_s / measured.slower_than_reference)} scaled to the "
              "targets' machine's speed")
    return (f"the floor of that CPU: on {cpus} CPUs it cannot end before "
            f"{minutes(floor_s)} here{scaled}")


def closing_lines(environ: Mapping[str, str], pytest_wall_s: float,
                  speed: Callable[[], MachineSpeed], now_s: float | None = None,
                  now_cpu: tuple[float, float] | None = None,
                  cpu_count: int | None = None) -> list[str]:
    """The closing lines of a pytest run that took ``pytest_wall_s``, from what
    ``environ`` holds of the test command (above), the machine's busy and stolen CPU
    seconds now (``machine_cpu_s``), ``speed``, the machine's speed probe, and its CPU
    count (default ``os.cpu_count()``)."""
    cpus = cpu_count or os.cpu_count() or 1
    started_s = _float(environ, STARTED_ENV)
    now_s = time.time() if now_s is None else now_s
    wall_s = now_s - started_s if started_s is not None else pytest_wall_s
    what = "the test command" if started_s is not None else "pytest"
    try:
        load = "load average at the end " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # no load average on this system
        load = "no load average"
    lines = [f"{what}: {minutes(wall_s)} wall (pytest {minutes(pytest_wall_s)}), "
             f"{cpus} CPUs, {load}"]
    cpu_s = _machine_cpu_s(environ, now_cpu)
    if cpu_s is not None:
        lines.append(f"the machine over it: {cpu_s[0]:,.0f} CPU s busy (every process), "
                     f"{cpu_s[1]:,.0f} CPU s stolen by its host")
    try:
        measured: MachineSpeed | None = speed()
    except Exception as exc:  # the run's verdict is pytest's: a probe never changes it
        measured = None
        lines.append(f"this machine's speed: not measured ({type(exc).__name__}: {exc})")
    if measured is not None:
        lines.append(f"this machine's speed: the reference model "
                     f"{measured.model_ops_per_cpu_s:,.0f} ops per CPU s (its rounds "
                     f"{measured.slowest_ops_per_cpu_s:,.0f} to "
                     f"{measured.fastest_ops_per_cpu_s:,.0f}), "
                     f"{measured.slower_than_reference:.2f}x slower than the machine of the "
                     f"targets ({REFERENCE_MODEL_OPS_PER_CPU_S:,})")
    if cpu_s is not None:
        lines.append(_floor_line(cpu_s[0], cpus, measured))
    target_s = _float(environ, TARGET_ENV)
    if target_s is not None:
        verdict = "met" if wall_s <= target_s else "MISSED"
        scaled = ("" if measured is None else "; scaled to the targets' machine's speed: "
                  f"~{minutes(wall_s / measured.slower_than_reference)}")
        lines.append(f"target {what} <= {minutes(target_s)}: {minutes(wall_s)} here, "
                     f"{verdict}{scaled}")
    return lines
