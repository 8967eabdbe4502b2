"""What the wire protocol costs (``rmqsim bench --protocol``), measured in one run.

The same seeds of a profile run in lockstep three ways: our queue in process; the same
queue through the protocol, served by the reference server as an ``exec:`` command (a new
interpreter per open, as a server in another language is a new process per open); and
the real Milvus RocksMQ's driver when it is built; and the reference server forked from
the preloaded fork server (``--crash-mode process``: a fork per open, by wall time only).
Time is wall and CPU, and the CPU counts the servers too (they are rmqsim's children,
reaped before the figure is taken: ``RUSAGE_CHILDREN``). Apart from whole runs, the
protocol's own cost per operation is the round trip of ``get_latest_msg`` through one open
server against the same call in process, and the cost of one open (start, ``hello``,
``open``).

A Milvus run stops at its first divergence (Milvus differs from SPEC: docs/FINDINGS.md);
its rate counts the operations it ran.
"""

from __future__ import annotations

import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError, load_factory
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.scratch import scratch_root
from rmqsim.conformance.wire.client import exec_factory, server_command
from rmqsim.model.api import MQConfig

__all__ = [
    "TARGET_PROTOCOL_SLOWDOWN",
    "ProtocolMeasurement",
    "RoundTrip",
    "measure_round_trip",
    "measure_runs",
]

#: Issue 34's target: lockstep through the protocol at most 2x the in-process run's CPU.
TARGET_PROTOCOL_SLOWDOWN = 2.0
#: Calls timed for the round trip.
ROUND_TRIP_CALLS = 2_000


def _cpu_s() -> float:
    """CPU seconds of this process and of its reaped children (the servers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True, slots=True)
class ProtocolMeasurement:
    """Lockstep runs of one profile through one way in."""

    way: str
    operations: int
    wall_s: float
    cpu_s: float
    diverged: int

    @property
    def ops_per_s(self) -> float:
        return self.operations / max(self.wall_s, 1e-9)

    @property
    def ops_per_cpu_s(self) -> float:
        return self.operations / max(self.cpu_s, 1e-9)

    @property
    def cpu_counted(self) -> bool:
        """False for forked servers: the fork server's children, whose CPU time no
        ``getrusage`` of rmqsim's sees (their wall time is the figure)."""
        return "forked" not in self.way


def _runs(
    way: str, impl: str, profile: str, seeds: range, crash_mode: str = "inprocess"
) -> ProtocolMeasurement:
    operations = diverged = 0
    wall_s = 0.0
    started_cpu_s = _cpu_s()
    for seed in seeds:
        result = run_seed(profile, seed, impl=impl, crash_mode=crash_mode)
        operations += result.steps
        wall_s += result.wall_s
        diverged += not result.ok
    return ProtocolMeasurement(way, operations, wall_s, _cpu_s() - started_cpu_s, diverged)


def measure_runs(profile: str, seeds: range) -> list[ProtocolMeasurement]:
    """In process, through the reference server, and the real Milvus when built."""
    measured = [
        _runs("in process (impl.RocksMQ)", DEFAULT_IMPL, profile, seeds),
        _runs("protocol: reference server over impl.RocksMQ", server_command("rocksmq"),
              profile, seeds),
        _runs("protocol: the same server forked (--crash-mode process)", DEFAULT_IMPL,
              profile, seeds, crash_mode="process"),
    ]  # fmt: skip
    try:
        load_factory("milvus")
    except BadImplError:
        return measured
    measured.append(_runs("protocol: real Milvus RocksMQ (Go)", "milvus", profile, seeds))
    return measured


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """The protocol's own cost: per call and per open, in µs and ms of wall time."""

    in_process_us: float
    wire_us: float
    open_ms: float

    @property
    def overhead_us(self) -> float:
        return self.wire_us - self.in_process_us


def _time_calls(queue: object) -> float:
    """µs per ``get_latest_msg`` call on ``queue`` (a topic ``t`` exists)."""
    started = time.perf_counter()
    for _ in range(ROUND_TRIP_CALLS):
        queue.get_latest_msg("t")  # type: ignore[attr-defined]  # a MessageQueue
    return (time.perf_counter() - started) / ROUND_TRIP_CALLS * 1e6


def measure_round_trip() -> RoundTrip:
    """One call through an open reference server against the same call in process."""
    wire = exec_factory(server_command("rocksmq"))
    direct = load_factory(DEFAULT_IMPL)
    timings = []
    with tempfile.TemporaryDirectory(prefix="rmqsim-bench-", dir=scratch_root()) as tmp:
        for name, factory in (("direct", direct), ("wire", wire)):
            started = time.perf_counter()
            queue = factory(path=Path(tmp) / name, config=MQConfig(), clock=lambda: 0,
                            faults=None)  # fmt: skip
            open_ms = (time.perf_counter() - started) * 1e3
            queue.create_topic("t")
            timings.append((_time_calls(queue), open_ms))
            queue.crash()  # type: ignore[union-attr]  # every SUT has crash()
    (direct_us, _), (wire_us, open_ms) = timings
    return RoundTrip(direct_us, wire_us, open_ms)
