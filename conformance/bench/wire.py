"""What the wire protocol costs (``rmqsim bench --protocol``), measured in one run.

The same seeds of a profile run in lockstep three ways: our queue in process; the same
queue through the protocol, served by the reference server as an ``exec:`` command (a new
interpreter per open, as a server in another language is a new process per open); and
the real Milvus RocksMQ's driver when it is built; and the reference server forked from
the preloaded fork server (``--crash-mode process``: a fork per open). Time is wall and
CPU, and the CPU counts the servers too: an ``exec:`` server is rmqsim's child, reaped
before the figure is taken (``RUSAGE_CHILDREN``); a forked one is the fork server's, read
from ``/proc`` as the fork server's own CPU and its reaped children's. Apart from whole runs, the
protocol's own cost per operation is the round trip of ``get_latest_msg`` through one open
server against the same call in process (wall, and CPU of both processes: the server's read
from ``/proc``), and the cost of one open (start, ``hello``, ``open``; wall and CPU).

Where a lockstep operation's time goes through the protocol (docs/BENCHMARKS.md "The
protocol's cost, item by item"): every open is a new server process (the first open of a
run, and one after every crash and close: ``1 + reopens`` per run), whose interpreter start
and imports are most of the difference on smoke; the rest is the requests' round trips
(an operation, then the touched topic's snapshot after a state-changing one).

A Milvus run stops at its first divergence (Milvus differs from SPEC: docs/FINDINGS.md);
its rate counts the operations it ran.
"""

from __future__ import annotations

import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError, load_factory
from rmqsim.conformance.running import procfs
from rmqsim.conformance.running.process_sut import process_factory
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
    "measure_way",
    "overhead_us_per_op",
]

#: Issue 34's target: lockstep through the protocol at most 2x the in-process run's CPU.
TARGET_PROTOCOL_SLOWDOWN = 2.0
#: Calls timed for the round trip.
ROUND_TRIP_CALLS = 2_000
#: Opens timed for an open's CPU.
OPEN_REPEATS = 5


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
    #: Opens of the implementation (a server process each, through the protocol).
    opens: int = 0
    #: False when the servers' CPU could not be read (forked ones, without /proc).
    cpu_counted: bool = True

    @property
    def ops_per_s(self) -> float:
        return self.operations / max(self.wall_s, 1e-9)

    @property
    def ops_per_cpu_s(self) -> float:
        return self.operations / max(self.cpu_s, 1e-9)

def _fork_servers() -> list[int]:
    """The pids of this process's children that are multiprocessing's fork server."""
    pids: list[int] = []
    try:
        for task in Path("/proc/self/task").iterdir():
            pids += map(int, (task / "children").read_text().split())
    except OSError:
        return []
    found = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing.forkserver" in command:
            found.append(pid)
    return found


def _forked_cpu_s(fork_servers: list[int]) -> float | None:
    """CPU seconds of the fork servers and of the children they reaped (the forked
    servers, each reaped before ``ForkedChild`` sees its exit); None when unreadable."""
    total = 0.0
    for pid in fork_servers:
        cpu_s = procfs.cpu_s(pid, reaped=True)
        if cpu_s is None:
            return None
        total += cpu_s
    return total


def measure_way(
    way: str, impl: str, profile: str, seeds: range, crash_mode: str = "inprocess"
) -> ProtocolMeasurement:
    """``seeds`` of ``profile`` in lockstep on ``impl``; CPU: rmqsim's, its reaped
    children's (``exec:`` servers) and, in ``process`` crash mode, the fork server's
    children's (from ``/proc``: the fork server started, by a first check, before)."""
    forked = crash_mode == "process"
    if forked:
        process_factory(impl)  # starts the fork server (a server's hello): not timed
    fork_servers = _fork_servers() if forked else []
    forked_before = _forked_cpu_s(fork_servers)
    operations = diverged = opens = 0
    wall_s = 0.0
    started_cpu_s = _cpu_s()
    for seed in seeds:
        result = run_seed(profile, seed, impl=impl, crash_mode=crash_mode)
        operations += result.steps
        wall_s += result.wall_s
        diverged += not result.ok
        opens += 1 + result.stats.reopens
    cpu_s = _cpu_s() - started_cpu_s
    forked_after = _forked_cpu_s(fork_servers)
    counted = True
    if forked:
        counted = bool(fork_servers) and forked_before is not None and forked_after is not None
        if forked_before is not None and forked_after is not None:
            cpu_s += forked_after - forked_before
    return ProtocolMeasurement(way, operations, wall_s, cpu_s, diverged, opens, counted)


def overhead_us_per_op(base: ProtocolMeasurement, wire: ProtocolMeasurement) -> float:
    """CPU µs per lockstep operation that ``wire`` costs beyond ``base`` (in process)."""
    return (wire.cpu_s / max(wire.operations, 1) - base.cpu_s / max(base.operations, 1)) * 1e6


def measure_runs(profile: str, seeds: range) -> list[ProtocolMeasurement]:
    """In process, through the reference server, and the real Milvus when built."""
    measured = [
        measure_way("in process (impl.RocksMQ)", DEFAULT_IMPL, profile, seeds),
        measure_way("protocol: reference server over impl.RocksMQ", server_command("rocksmq"),
                    profile, seeds),
        measure_way("protocol: the same server forked (--crash-mode process)", DEFAULT_IMPL,
                    profile, seeds, crash_mode="process"),
    ]  # fmt: skip
    try:
        load_factory("milvus")
    except BadImplError:
        return measured
    measured.append(measure_way("protocol: real Milvus RocksMQ (Go)", "milvus", profile, seeds))
    return measured


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """The protocol's own cost: per call (µs) and per open (ms), wall and CPU (CPU: both
    processes; an open's: the server's start, ``hello`` and ``open``, and its kill)."""

    in_process_us: float
    wire_us: float
    open_ms: float
    in_process_cpu_us: float = 0.0
    wire_cpu_us: float = 0.0
    open_cpu_ms: float = 0.0

    @property
    def overhead_us(self) -> float:
        return self.wire_us - self.in_process_us


def _child_cpu_s(queue: object) -> float:
    """CPU seconds of ``queue``'s server process so far (0 in process, or without /proc)."""
    process = getattr(queue, "process", None)
    pid = getattr(process, "pid", None)
    cpu_s = procfs.cpu_s(pid) if isinstance(pid, int) else None
    return 0.0 if cpu_s is None else cpu_s


def _own_cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _time_calls(queue: object) -> tuple[float, float]:
    """µs per ``get_latest_msg`` call on ``queue`` (a topic ``t`` exists), wall and CPU."""
    started, started_cpu = time.perf_counter(), _own_cpu_s() + _child_cpu_s(queue)
    for _ in range(ROUND_TRIP_CALLS):
        queue.get_latest_msg("t")  # type: ignore[attr-defined]  # a MessageQueue
    cpu_s = _own_cpu_s() + _child_cpu_s(queue) - started_cpu
    return ((time.perf_counter() - started) / ROUND_TRIP_CALLS * 1e6,
            cpu_s / ROUND_TRIP_CALLS * 1e6)  # fmt: skip


def _open_cpu_ms(factory: Any, where: Path) -> float:
    """CPU ms of one open and crash (through the protocol: a server's start, ``hello``,
    ``open`` and kill, the server reaped so counted), the mean of ``OPEN_REPEATS``."""
    started_cpu = _cpu_s()
    for repeat in range(OPEN_REPEATS):
        queue = factory(path=where / f"open-{repeat}", config=MQConfig(), clock=lambda: 0,
                        faults=None)  # fmt: skip
        queue.crash()
    return (_cpu_s() - started_cpu) / OPEN_REPEATS * 1e3


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
            calls = _time_calls(queue)
            queue.crash()  # type: ignore[union-attr]  # every SUT has crash()
            timings.append((calls, open_ms, _open_cpu_ms(factory, Path(tmp) / f"{name}-opens")))
    ((direct_us, direct_cpu_us), _, _), ((wire_us, wire_cpu_us), open_ms, open_cpu_ms) = timings
    return RoundTrip(direct_us, wire_us, open_ms, direct_cpu_us, wire_cpu_us, open_cpu_ms)
