"""``rmqsim bench``: throughput of each backend against a raw baseline, in one run.

Each measurement is a function returning a ``Measurement``: the same work done by a
backend's queue and by its raw baseline doing the least that work needs
(``conformance/bench/raw.py``), measured alternately in the same process on the same kind
of temporary directory, best of ``repeats`` each (the least disturbed run), so the ratio is
comparable across machines even when absolute figures are not. Every figure is given per
wall second and per CPU second of the process (all its threads), so a figure taken on a
busy machine still means something. Add a measurement by writing one more ``measure_*``
function and listing it in ``MEASUREMENTS``; add a backend to ``BACKENDS``.

Backends: ``rocksmq`` (``impl.RocksMQ`` against raw rocksdict), ``commitlog`` and
``commitlog-async`` (the commit-log backend, sync and async flush, as ``--impl`` names
them, against a raw append to a file with the same durability).

- produce: batches of 100 messages of 1 KiB.
- consume: ``consume(n=100)`` until the topic is read (each repeat with a fresh group).

Heavy imports happen inside the functions so that ``rmqsim --help`` stays fast.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rmqsim.conformance.bench.raw import (
    BATCH_MESSAGES,
    CONSUME_N,
    PAYLOAD_BYTES,
    FlushRule,
    Timing,
    raw_append_consume,
    raw_append_produce,
    raw_rocksdict_consume,
    raw_rocksdict_produce,
    stopwatch,
)
from rmqsim.conformance.cli.common import MAX_STEPS, friendly_errors
from rmqsim.conformance.running.scratch import scratch_root

if TYPE_CHECKING:
    from rich.console import Console

    from rmqsim.conformance.bench.data import Figure

__all__ = [
    "BACKENDS",
    "MAX_BENCH_MESSAGES",
    "MEASUREMENTS",
    "TARGETS_ISSUE_40",
    "TARGET_RATIO",
    "TARGET_VS_ROCKSMQ",
    "Measurement",
    "backend_figures",
    "bench",
    "breakdown_figures",
    "floor_figures",
    "lockstep_figures",
    "measure_consume",
    "measure_produce",
    "protocol_breakdown",
    "protocol_figures",
    "run_bench",
    "vs_rocksmq",
]

#: Throughput of a queue relative to its raw baseline that each backend aims for.
TARGET_RATIO = 0.5
#: Issue 40: ``impl.RocksMQ``'s produce and consume against raw rocksdict, and the commit
#: log's consume against the raw read, per (operation, backend); ``TARGET_RATIO`` else.
TARGETS_ISSUE_40 = {("produce", "rocksmq"): 0.8, ("consume", "rocksmq"): 0.8,
                    ("consume", "commitlog"): 0.5, ("consume", "commitlog-async"): 0.5}
#: Issue 24: the commit-log backend's async produce against ``impl.RocksMQ``'s produce.
TARGET_VS_ROCKSMQ = 1.0
#: The console width when stdout is not a terminal: wider than any table of the bench.
_PIPED_WIDTH_CHARS = 1000
#: Every backend ``rmqsim bench`` measures, in table order.
BACKENDS = ("rocksmq", "commitlog", "commitlog-async")


@dataclass(frozen=True, slots=True)
class Measurement:
    """One line of the table: messages per second (wall and CPU) of a backend's queue and
    of its raw baseline."""

    name: str
    messages: int
    impl_msgs_per_s: float
    raw_msgs_per_s: float
    backend: str = "rocksmq"
    baseline: str = "raw rocksdict"
    impl_msgs_per_cpu_s: float = 0.0
    raw_msgs_per_cpu_s: float = 0.0

    @property
    def operation(self) -> str:
        return self.name.split()[0]

    @property
    def ratio(self) -> float:
        return self.impl_msgs_per_s / self.raw_msgs_per_s if self.raw_msgs_per_s else 0.0

    @property
    def cpu_ratio(self) -> float:
        return (self.impl_msgs_per_cpu_s / self.raw_msgs_per_cpu_s
                if self.raw_msgs_per_cpu_s else 0.0)


def _best(messages: int, runs: list[Timing]) -> tuple[float, float]:
    """Messages per wall second and per CPU second of the least disturbed run of each."""
    assert runs and all(run.wall_s > 0 for run in runs)
    return messages / min(run.wall_s for run in runs), messages / max(
        min(run.cpu_s for run in runs), 1e-9
    )


def _payloads(count: int) -> list[bytes]:
    """Distinct 1 KiB payloads (incompressible), built outside every timed section."""
    seed = os.urandom(PAYLOAD_BYTES)
    return [seed[i % PAYLOAD_BYTES :] + seed[: i % PAYLOAD_BYTES] for i in range(count)]


# --------------------------------------------------------------------------- backends


@dataclass(frozen=True, slots=True)
class _Backend:
    """How to open a backend's queue and run its raw baseline."""

    name: str
    baseline: str
    open: Callable[[Path], Any]
    raw_produce: Callable[[Path, list[bytes]], Timing]
    raw_consume: Callable[[Path, int], Timing]


def _rocksmq() -> _Backend:
    from rmqsim.impl import RocksMQ
    from rmqsim.model.api import MQConfig

    return _Backend("rocksmq", "raw rocksdict", lambda path: RocksMQ.open(str(path), MQConfig()),
                    raw_rocksdict_produce, raw_rocksdict_consume)


def _commitlog(mode: str) -> _Backend:
    from rmqsim.impl.commitlog import CommitLogMQ, FlushPolicy, records
    from rmqsim.impl.commitlog.queue import PAGE_SIZE_BYTES
    from rmqsim.model.api import MQConfig

    policy = FlushPolicy(mode=mode)
    if mode == "sync":
        rule, baseline = FlushRule(every_batch=True), "raw append, fsync per batch"
    else:
        rule = FlushRule(False, policy.flush_least_pages * PAGE_SIZE_BYTES,
                         policy.flush_thorough_interval_s)
        baseline = (f"raw append, fsync per {policy.flush_least_pages} dirty pages or "
                    f"{policy.flush_thorough_interval_s} s")
    crc32 = records.crc32
    return _Backend(
        "commitlog" if mode == "sync" else f"commitlog-{mode}", baseline,
        lambda path: CommitLogMQ.open(path, MQConfig(), policy=policy),
        lambda path, payloads: raw_append_produce(path, payloads, rule, crc32),
        lambda path, messages: raw_append_consume(path, messages, crc32),
    )  # fmt: skip


def _backend(name: str) -> _Backend:
    if name == "rocksmq":
        return _rocksmq()
    if name in ("commitlog", "commitlog-async"):
        return _commitlog("sync" if name == "commitlog" else "async")
    raise ValueError(f"unknown backend {name!r}: one of {', '.join(BACKENDS)}")


def _impl_produce(backend: _Backend, path: Path, payloads: list[bytes]) -> Timing:
    from rmqsim.model.api import ProducerMessage

    batches = [
        [ProducerMessage(p) for p in payloads[offset : offset + BATCH_MESSAGES]]
        for offset in range(0, len(payloads), BATCH_MESSAGES)
    ]
    mq = backend.open(path)
    try:
        mq.create_topic("bench")
        with stopwatch() as timing:
            for batch in batches:
                mq.produce("bench", batch)
        return timing
    finally:
        mq.close()


def _impl_consume_fresh_group(backend: _Backend, path: Path, messages: int, run: int) -> Timing:
    mq = backend.open(path)
    try:
        group = f"g{run}"
        mq.create_consumer_group("bench", group)
        with stopwatch() as timing:
            seen = 0
            while True:
                got = mq.consume("bench", group, CONSUME_N)
                if not got:
                    break
                seen += len(got)
        assert seen == messages, (seen, messages)
        return timing
    finally:
        mq.close()


# --------------------------------------------------------------------------- measurements


def measure_produce(workdir: Path, messages: int, repeats: int,
                    backend: str = "rocksmq") -> Measurement:
    """Produce ``messages`` 1 KiB messages in batches of 100, queue vs raw baseline."""
    spec = _backend(backend)
    payloads = _payloads(messages)
    raw_runs: list[Timing] = []
    impl_runs: list[Timing] = []
    for run in range(repeats):
        raw_runs.append(spec.raw_produce(workdir / f"produce-raw-{backend}-{run}", payloads))
        impl_runs.append(_impl_produce(spec, workdir / f"produce-impl-{backend}-{run}",
                                       payloads))
    impl_wall, impl_cpu = _best(messages, impl_runs)
    raw_wall, raw_cpu = _best(messages, raw_runs)
    return Measurement(f"produce ({BATCH_MESSAGES} x {PAYLOAD_BYTES} B per call)", messages,
                       impl_wall, raw_wall, backend, spec.baseline, impl_cpu, raw_cpu)


def measure_consume(workdir: Path, messages: int, repeats: int,
                    backend: str = "rocksmq") -> Measurement:
    """Read ``messages`` 1 KiB messages 100 at a time, queue vs raw baseline.

    The data is written once per side (untimed) and read ``repeats`` times: the queue's
    reads each use a fresh group, the raw reads read the same data again.
    """
    spec = _backend(backend)
    payloads = _payloads(messages)
    raw_path = workdir / f"consume-raw-{backend}"
    impl_path = workdir / f"consume-impl-{backend}"
    spec.raw_produce(raw_path, payloads)
    _impl_produce(spec, impl_path, payloads)
    raw_runs: list[Timing] = []
    impl_runs: list[Timing] = []
    for run in range(repeats):
        raw_runs.append(spec.raw_consume(raw_path, messages))
        impl_runs.append(_impl_consume_fresh_group(spec, impl_path, messages, run))
    impl_wall, impl_cpu = _best(messages, impl_runs)
    raw_wall, raw_cpu = _best(messages, raw_runs)
    return Measurement(f"consume (n={CONSUME_N}, {PAYLOAD_BYTES} B messages)", messages,
                       impl_wall, raw_wall, backend, spec.baseline, impl_cpu, raw_cpu)


#: Every measurement ``rmqsim bench`` makes, in table order (each for every backend).
MEASUREMENTS: tuple[Callable[[Path, int, int, str], Measurement], ...] = (
    measure_produce,
    measure_consume,
)


def run_bench(messages: int, repeats: int, workdir: Path | None = None,
              backends: Sequence[str] = BACKENDS) -> list[Measurement]:
    """Every measurement for every backend (operation by operation), in a temporary
    directory under ``workdir`` (default: the scratch root, ``RMQSIM_WORKDIR`` when set)."""
    if messages < BATCH_MESSAGES or messages % BATCH_MESSAGES:
        raise ValueError(f"messages must be a positive multiple of {BATCH_MESSAGES}")
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    for backend in backends:
        _backend(backend)  # refuse an unknown name before measuring anything
    with tempfile.TemporaryDirectory(prefix="rmqsim-bench-", dir=scratch_root(workdir)) as tmp:
        return [measure(Path(tmp), messages, repeats, backend)
                for measure in MEASUREMENTS for backend in backends]


def vs_rocksmq(results: Sequence[Measurement]) -> tuple[float, float] | None:
    """The commit-log backend's async produce over ``impl.RocksMQ``'s (wall, CPU), when
    both were measured."""
    produce = {r.backend: r for r in results if r.operation == "produce"}
    fast, rocks = produce.get("commitlog-async"), produce.get("rocksmq")
    if fast is None or rocks is None:
        return None
    return (fast.impl_msgs_per_s / rocks.impl_msgs_per_s,
            fast.impl_msgs_per_cpu_s / rocks.impl_msgs_per_cpu_s)


#: The most messages a measurement takes (100 times the default): every message of a
#: measurement is built in memory before it is timed.
MAX_BENCH_MESSAGES = 10_000_000


@click.command("bench")
@click.option(
    "--messages",
    type=click.IntRange(BATCH_MESSAGES, MAX_BENCH_MESSAGES),
    default=100_000,
    show_default=True,
    help=f"Messages per measurement (a multiple of {BATCH_MESSAGES}).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Runs per side; the best counts.",
)
@click.option(
    "--backend",
    "backends",
    type=click.Choice(BACKENDS),
    multiple=True,
    help="A backend to measure (repeatable; default: all of them).",
)
@click.option(
    "--lockstep-seeds",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Seeds per profile for the lockstep measurement (0 skips it).",
)
@click.option(
    "--check-every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Lockstep measurement only: compare the touched topic after every N-th "
    "state-changing operation (the targets are for 1, the default checks; a larger N shows "
    "what those checks cost).",
)
@click.option(
    "--protocol-seeds",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Seeds of smoke for the wire protocol's measurement (0 skips it): in process, "
    "through the reference server, and the real Milvus driver when built.",
)
@click.option(
    "--power-steps",
    type=click.IntRange(0, MAX_STEPS),
    default=2,
    show_default=True,
    help="Steps of smoke for the power-loss sweep's measurement (0 skips it): cases per "
    "second with the store in process (fs=) and as a child through FUSE.",
)
@click.option(
    "--breakdown",
    is_flag=True,
    default=False,
    help="Also print where a lockstep operation's CPU time goes, per part (implementation, "
    "model, comparison, watchdog, trace, simulation, lockstep), in µs per operation, for "
    "smoke over the lockstep seeds (at least 1); and the harness's own cost (the model as "
    "the SUT) with the least lockstep / SUT-alone ratio it allows, on smoke and on the "
    "stream layer.",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    metavar="PATH",
    help="Also write every figure as a JSON record, one per line, to PATH (replaced), or "
    "to standard output with `-` (the tables then go to standard error). Each record: "
    "name, value, unit, target, better, met, load_average, cpus, commit, date, params.",
)
@friendly_errors
def bench(messages: int, repeats: int, backends: tuple[str, ...], lockstep_seeds: int,
          check_every: int, protocol_seeds: int, power_steps: int, breakdown: bool,
          json_out: str | None) -> None:
    """Throughput of each backend (impl.RocksMQ, the commit log in sync and async flush)
    vs its raw baseline, produce and consume, per wall and per CPU second, with ratios;
    lockstep against the SUT and the model alone; what the wire protocol costs; and what
    a power-loss case costs through FUSE. Every target is printed with its verdict, met or
    MISSED; `--json` writes the figures as data."""
    from rmqsim.conformance.bench.data import machine, records, write_records

    if messages % BATCH_MESSAGES:
        raise click.BadParameter(f"must be a multiple of {BATCH_MESSAGES}", param_hint="--messages")
    if json_out not in (None, "-"):
        _writable_file(Path(json_out))
    console = _console(stderr=json_out == "-")
    results = run_bench(messages, repeats, backends=backends or BACKENDS)
    figures = _print_results(console, results, messages, repeats)
    if lockstep_seeds:
        figures += _print_lockstep(console, lockstep_seeds, check_every)
    if breakdown:
        figures += _print_breakdown(console, max(lockstep_seeds, 1))
        figures += _print_floor(console, max(lockstep_seeds, 1))
    if protocol_seeds:
        figures += _print_protocol(console, protocol_seeds)
    if power_steps:
        figures += _print_power(console, power_steps)
    if json_out is not None:
        params = {"messages": messages, "repeats": repeats, "lockstep_seeds": lockstep_seeds,
                  "check_every": check_every, "protocol_seeds": protocol_seeds,
                  "power_steps": power_steps, "breakdown": breakdown}
        write_records(records(figures, machine(), params), json_out)


def _print_power(console: Console, steps: int) -> list[Figure]:
    """The same power-loss sweep in process and through FUSE, per wall and CPU second,
    with the ratio (bench_power)."""
    from rich.table import Table

    from rmqsim.conformance.bench.power import BENCH_POWER_PROFILE, measure_power
    from rmqsim.conformance.crashing.power_loss import quiet_recovery

    with quiet_recovery():
        measured, skipped = measure_power(steps)
    table = Table(title=f"power loss: the storage sweep of {BENCH_POWER_PROFILE} seed 0, "
                        f"{steps} steps, sync, same run",
                  caption="CPU: rmqsim's process (the FUSE server thread included) and the "
                          "store's child processes")
    for column in ("store reaches the disk", "cases", "cases/s", "cases/CPU-s", "ms/case",
                   "vs fs= (wall / CPU)", "failing"):
        table.add_column(column, justify="left" if column.startswith("store") else "right")
    base = measured[0]
    for m in measured:
        table.add_row(m.way, str(m.cases), f"{m.cases_per_s:,.1f}", f"{m.cases_per_cpu_s:,.1f}",
                      f"{m.ms_per_case:,.1f}",
                      f"{m.cases_per_s / base.cases_per_s:.3f}x / "
                      f"{m.cases_per_cpu_s / base.cases_per_cpu_s:.3f}x", str(m.failures))
    console.print(table)
    if skipped is not None:
        console.print(f"power loss through FUSE: skipped: FUSE cannot be used here: {skipped}")
    return power_figures(measured)


def power_figures(measured: Sequence[Any]) -> list[Figure]:
    """The power-loss sweep's figures: cases per second each way (no target)."""
    from rmqsim.conformance.bench.data import Figure

    figures = []
    for m in measured:
        way = "in-process" if m is measured[0] else "fuse"
        figures.append(Figure(f"power.{way}.cases_per_s", m.cases_per_s, "cases/s"))
        figures.append(Figure(f"power.{way}.cases_per_cpu_s", m.cases_per_cpu_s,
                              "cases/CPU-s"))
    return figures


def _writable_file(path: Path) -> None:
    """Refuse, before measuring anything, a ``--json`` file that cannot be written."""
    from rmqsim.conformance.errors import UsageError

    if path.is_dir() or not path.parent.is_dir():
        raise UsageError(f"--json {path}: not a file in an existing directory")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--json {path}: not writable")


def _print_verdicts(console: Console, figures: list[Figure]) -> None:
    """The figures' targets, each with its verdict (none for a figure without one)."""
    from rmqsim.conformance.bench.data import verdict_lines

    for line in verdict_lines(figures):
        console.print(line, highlight=False, markup=False)


def protocol_figures(measured: Sequence[Any], trip: Any) -> list[Figure]:
    """The wire protocol's figures: each way's rates, the round trip and open, and the
    CPU slowdown through the reference server (target ``TARGET_PROTOCOL_SLOWDOWN``)."""
    from rmqsim.conformance.bench.data import Figure
    from rmqsim.conformance.bench.wire import TARGET_PROTOCOL_SLOWDOWN, overhead_us_per_op

    names = ("in-process", "reference-server", "forked-server", "milvus")
    figures = []
    for name, m in zip(names, measured, strict=False):
        figures.append(Figure(f"protocol.{name}.ops_per_s", m.ops_per_s, "ops/s"))
        if m.cpu_counted:
            figures.append(Figure(f"protocol.{name}.ops_per_cpu_s", m.ops_per_cpu_s, "ops/CPU-s"))
    figures += [
        Figure("protocol.round_trip_us", trip.wire_us, "µs"),
        Figure("protocol.in_process_call_us", trip.in_process_us, "µs"),
        Figure("protocol.round_trip_cpu_us", trip.wire_cpu_us, "µs"),
        Figure("protocol.in_process_call_cpu_us", trip.in_process_cpu_us, "µs"),
        Figure("protocol.open_ms", trip.open_ms, "ms"),
        Figure("protocol.open_cpu_ms", trip.open_cpu_ms, "ms"),
        Figure("protocol.reference-server.overhead_us_per_op",
               overhead_us_per_op(measured[0], measured[1]), "µs"),
        Figure("protocol.reference-server.cpu_slowdown", measured[0].ops_per_cpu_s
               / measured[1].ops_per_cpu_s, "x", TARGET_PROTOCOL_SLOWDOWN, "lower"),
    ]
    return figures


def protocol_breakdown(measured: Sequence[Any], trip: Any) -> str:
    """Where the reference server's CPU beyond the in-process run goes, per operation:
    its starts (opens x one open's CPU) and the rest (the requests)."""
    from rmqsim.conformance.bench.wire import overhead_us_per_op

    base, wire = measured[0], measured[1]
    overhead = overhead_us_per_op(base, wire)
    starts = wire.opens * trip.open_cpu_ms * 1e3 / max(wire.operations, 1)
    return (f"protocol overhead per lockstep operation: {overhead:,.0f} µs of CPU beyond in "
            f"process; of it, server starts {starts:,.0f} µs ({wire.opens} opens x "
            f"{trip.open_cpu_ms:,.0f} ms over {wire.operations} operations), the requests "
            f"{overhead - starts:,.0f} µs (one round trip: {trip.wire_cpu_us:,.0f} µs of CPU, "
            f"{trip.in_process_cpu_us:,.1f} in process)")


def _print_protocol(console: Console, seeds: int) -> list[Figure]:
    """Lockstep on smoke in process, through the protocol, and on the real Milvus, per
    wall and CPU second (servers included); the protocol's round trip and open."""
    from rich.table import Table

    from rmqsim.conformance.bench.wire import measure_round_trip, measure_runs

    measured = measure_runs("smoke", range(seeds))
    table = Table(title=f"the wire protocol: lockstep on smoke, seeds 0:{seeds}, same run")
    for column in ("way in", "operations", "opens", "ops/s", "ops/CPU-s", "CPU vs in process",
                   "runs diverged"):
        table.add_column(column, justify="left" if column == "way in" else "right")
    base = measured[0]
    for m in measured:
        counted = m.cpu_counted
        table.add_row(m.way, str(m.operations), str(m.opens), f"{m.ops_per_s:,.0f}",
                      f"{m.ops_per_cpu_s:,.0f}" if counted else "-",
                      f"{base.ops_per_cpu_s / m.ops_per_cpu_s:.2f}x" if counted else
                      f"{base.ops_per_s / m.ops_per_s:.2f}x wall", str(m.diverged))
    console.print(table)
    trip = measure_round_trip()
    console.print(
        f"protocol round trip: {trip.wire_us:,.0f} µs per call against {trip.in_process_us:,.1f}"
        f" in process ({trip.overhead_us:,.0f} µs of protocol per operation); one open "
        f"(start, hello, open) {trip.open_ms:,.0f} ms, {trip.open_cpu_ms:,.0f} ms of CPU"
    )
    console.print(protocol_breakdown(measured, trip), highlight=False)
    figures = protocol_figures(measured, trip)
    _print_verdicts(console, figures)
    return figures


def backend_figures(results: Sequence[Measurement]) -> list[Figure]:
    """Each measurement's rates and ratios (a target: ``TARGETS_ISSUE_40``'s, else
    ``TARGET_RATIO`` for produce), and the commit log's async produce over
    ``impl.RocksMQ``'s."""
    from rmqsim.conformance.bench.data import Figure

    figures = []
    for r in results:
        key = f"{r.operation}.{r.backend}"
        target = TARGETS_ISSUE_40.get((r.operation, r.backend),
                                      TARGET_RATIO if r.operation == "produce" else None)
        figures += [
            Figure(f"{key}.msgs_per_s", r.impl_msgs_per_s, "msgs/s"),
            Figure(f"{key}.msgs_per_cpu_s", r.impl_msgs_per_cpu_s, "msgs/CPU-s"),
            Figure(f"{key}.raw_msgs_per_s", r.raw_msgs_per_s, "msgs/s"),
            Figure(f"{key}.raw_msgs_per_cpu_s", r.raw_msgs_per_cpu_s, "msgs/CPU-s"),
            Figure(f"{key}.ratio", r.ratio, "x", target),
            Figure(f"{key}.cpu_ratio", r.cpu_ratio, "x", target),
        ]
    versus = vs_rocksmq(results)
    if versus is not None:
        figures += [
            Figure("produce.commitlog-async_vs_rocksmq", versus[0], "x", TARGET_VS_ROCKSMQ),
            Figure("produce.commitlog-async_vs_rocksmq.cpu", versus[1], "x", TARGET_VS_ROCKSMQ),
        ]
    return figures


def _print_results(console: Console, results: list[Measurement], messages: int,
                   repeats: int) -> list[Figure]:
    from rich.table import Table

    from rmqsim.impl.commitlog.records import CRC32_SOURCE

    table = Table(title=f"rmqsim bench: {messages} messages, best of {repeats}",
                  caption=f"CPU: process CPU time, every thread; commit-log CRC-32: "
                          f"{CRC32_SOURCE}")
    for column in ("operation", "backend", "msgs/s", "msgs/CPU-s", "raw baseline",
                   "raw msgs/s", "raw msgs/CPU-s", "ratio", "CPU ratio", "target (wall / CPU)"):
        table.add_column(column, justify="left" if column in ("operation", "backend",
                                                              "raw baseline") else "right")
    figures = backend_figures(results)
    verdicts = {f.name: f for f in figures}
    for result in results:
        key = f"{result.operation}.{result.backend}"
        wall, cpu = verdicts[f"{key}.ratio"], verdicts[f"{key}.cpu_ratio"]
        table.add_row(
            result.operation, result.backend,
            f"{result.impl_msgs_per_s:,.0f}", f"{result.impl_msgs_per_cpu_s:,.0f}",
            result.baseline,
            f"{result.raw_msgs_per_s:,.0f}", f"{result.raw_msgs_per_cpu_s:,.0f}",
            f"{result.ratio:.2f}x", f"{result.cpu_ratio:.2f}x",
            f"{wall.target_text()}: {wall.verdict()} / {cpu.verdict()}"
            if wall.target is not None else "none",
        )  # fmt: skip
    console.print(table)
    versus = vs_rocksmq(results)
    if versus is not None:
        console.print(
            f"commitlog-async produce / rocksmq produce: {versus[0]:.2f}x per wall second, "
            f"{versus[1]:.2f}x per CPU second"
        )
    _print_verdicts(console, figures)
    return figures


def _console(stderr: bool = False) -> Console:
    """A console as wide as the terminal; when its stream is not one (piped, CI) as wide
    as ``_PIPED_WIDTH_CHARS``, so that a table keeps its natural width instead of being
    squeezed to 80 columns, which cuts its numbers ("587,…")."""
    from rich.console import Console

    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=_PIPED_WIDTH_CHARS)


def lockstep_figures(measured: Sequence[Any], check_every: int) -> list[Figure]:
    """Each profile's three rates and its slowdowns; the targets (for the default checks,
    ``--check-every 1``; the stream lockstep checks every step whatever it says): lockstep
    >= ``TARGET_LOCKSTEP_OPS_PER_S`` per wall second on smoke, and at most
    ``TARGET_SLOWDOWN_VS_SUT`` times the SUT alone's time (smoke and the stream layer:
    ``TARGET_SLOWDOWN_VS_SUT_40``), per wall and per CPU second. And, from smoke's model
    alone, how many times slower this machine is than the one the targets were set on
    (``machine.slower_than_reference``, no target: ``conformance.bench.speed``)."""
    from rmqsim.conformance.bench.data import Figure
    from rmqsim.conformance.bench.lockstep import (
        TARGET_LOCKSTEP_OPS_PER_S,
        TARGET_SLOWDOWN_VS_SUT,
        TARGET_SLOWDOWN_VS_SUT_40,
    )
    from rmqsim.conformance.bench.speed import PROBE_PROFILE, REFERENCE_MODEL_OPS_PER_CPU_S
    from rmqsim.conformance.bench.stream import STREAM_BENCH_PROFILE

    figures = []
    for m in measured:
        targeted = check_every == 1 or m.profile == STREAM_BENCH_PROFILE
        slowdown = None
        if targeted:
            slowdown = (TARGET_SLOWDOWN_VS_SUT_40 if m.profile in ("smoke", STREAM_BENCH_PROFILE)
                        else TARGET_SLOWDOWN_VS_SUT)
        ops = TARGET_LOCKSTEP_OPS_PER_S if targeted and m.profile == "smoke" else None
        key = f"lockstep.{m.profile}"
        figures += [
            Figure(f"{key}.ops_per_s", m.lockstep_ops_per_s, "ops/s", ops),
            Figure(f"{key}.ops_per_cpu_s", m.lockstep_ops_per_cpu_s, "ops/CPU-s", ops),
            Figure(f"{key}.sut_ops_per_s", m.sut_ops_per_s, "ops/s"),
            Figure(f"{key}.sut_ops_per_cpu_s", m.sut_ops_per_cpu_s, "ops/CPU-s"),
            Figure(f"{key}.model_ops_per_s", m.model_ops_per_s, "ops/s"),
            Figure(f"{key}.model_ops_per_cpu_s", m.model_ops_per_cpu_s, "ops/CPU-s"),
            Figure(f"{key}.slowdown_vs_sut", m.slowdown_vs_sut, "x", slowdown, "lower"),
            Figure(f"{key}.cpu_slowdown_vs_sut", m.cpu_slowdown_vs_sut, "x", slowdown, "lower"),
            Figure(f"{key}.slowdown_vs_model", m.slowdown_vs_model, "x"),
            Figure(f"{key}.model_floor_vs_sut", m.model_floor_vs_sut, "x"),
        ]
        if m.profile == PROBE_PROFILE and m.model_ops_per_cpu_s > 0:
            figures.append(Figure("machine.slower_than_reference",
                                  REFERENCE_MODEL_OPS_PER_CPU_S / m.model_ops_per_cpu_s, "x"))
    return figures


def _print_lockstep(console: Console, seeds: int, check_every: int) -> list[Figure]:
    """Lockstep ops/s on smoke and swarm, and the stream layer's on its ``stream`` profile
    (our streams on our queue), per wall and CPU second, with ratios to the SUT (for the
    stream, the stream implementation) and the model alone."""
    from rich.table import Table

    from rmqsim.conformance.bench.lockstep import measure_lockstep
    from rmqsim.conformance.bench.stream import (
        STREAM_BENCH_PROFILE,
        measure_stream_lockstep,
    )

    cadence = "" if check_every == 1 else f", one-topic checks every {check_every} changes"
    table = Table(title=f"lockstep: same operations three ways, seeds 0:{seeds}{cadence}")
    for column in ("profile", "operations", "lockstep ops/s", "ops/CPU-s", "SUT alone ops/s",
                   "ops/CPU-s", "model alone ops/s", "ops/CPU-s", "lockstep slowdown vs SUT",
                   "per CPU", "vs model"):
        table.add_column(column, justify="left" if column == "profile" else "right")
    measured = [measure_lockstep(profile, range(seeds), check_every=check_every)
                for profile in ("smoke", "swarm")]
    measured.append(measure_stream_lockstep(range(seeds)))
    for m in measured:
        table.add_row(
            m.profile if m.profile != STREAM_BENCH_PROFILE else f"{m.profile} (stream layer)",
            str(m.operations), f"{m.lockstep_ops_per_s:,.0f}", f"{m.lockstep_ops_per_cpu_s:,.0f}",
            f"{m.sut_ops_per_s:,.0f}", f"{m.sut_ops_per_cpu_s:,.0f}", f"{m.model_ops_per_s:,.0f}",
            f"{m.model_ops_per_cpu_s:,.0f}", f"{m.slowdown_vs_sut:.2f}x",
            f"{m.cpu_slowdown_vs_sut:.2f}x", f"{m.slowdown_vs_model:.2f}x",
        )  # fmt: skip
    console.print(table)
    console.print("slowdown vs SUT: the lockstep's time over the SUT alone's (stream: vs the "
                  "stream implementation alone; its lockstep checks every step whatever "
                  "--check-every says)", highlight=False)
    if check_every != 1:
        console.print("the queue profiles' targets are for the default checks "
                      "(--check-every 1): no verdict at this cadence")
    console.print("the model's floor: running the model too, no lockstep can be under "
                  "(SUT alone + model alone) / SUT alone per CPU second: " + ", ".join(
                      f"{m.profile} {m.model_floor_vs_sut:.2f}x" for m in measured),
                  highlight=False)
    figures = lockstep_figures(measured, check_every)
    for figure in figures:
        if figure.name == "machine.slower_than_reference":
            console.print(f"this machine: the model alone on smoke is {figure.value:.2f}x slower "
                          "per CPU second than on the machine the targets were set on (bench."
                          "speed): the ops/s targets scale with it, the ratios do not",
                          highlight=False)
    _print_verdicts(console, figures)
    return figures


def breakdown_figures(measured: Any) -> list[Figure]:
    """A ``bench_breakdown.Breakdown``'s figures: CPU µs per operation, in all and by part
    (no target: the targets are the rates and ratios above)."""
    from rmqsim.conformance.bench.data import Figure

    key = f"breakdown.{measured.profile}"
    figures = [Figure(f"{key}.cpu_us_per_op", measured.cpu_us_per_op, "µs")]
    for part, us in measured.parts.items():
        name = part.replace("comparison: ", "comparison_").replace(" ", "_")
        figures.append(Figure(f"{key}.{name}_us", us, "µs"))
    return figures


def _print_breakdown(console: Console, seeds: int) -> list[Figure]:
    """Where a lockstep operation's CPU time goes on smoke, part by part (bench_breakdown)."""
    from rich.table import Table

    from rmqsim.conformance.bench.breakdown import measure_breakdown, measure_reopen
    from rmqsim.conformance.bench.data import Figure

    measured = measure_breakdown("smoke", range(seeds))
    console.print(f"where a lockstep operation's CPU time goes: smoke, seeds 0:{seeds}, "
                  f"{measured.operations} operations (shares from cProfile, scaled to the "
                  "unprofiled CPU time)", highlight=False)
    table = Table()
    for column in ("part", "µs/op", "share"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for part, us in measured.parts.items():
        table.add_row(part, f"{us:,.1f}", f"{us / measured.cpu_us_per_op:.0%}")
    table.add_row("all (CPU per operation)", f"{measured.cpu_us_per_op:,.1f}", "100%")
    console.print(table)
    figures = breakdown_figures(measured)
    reopen_ms, parts = measure_reopen()
    console.print(f"one crash and reopen of impl.RocksMQ (smoke crashes and reopens about 4 "
                  f"times a run): {reopen_ms:,.2f} ms of CPU", highlight=False)
    table = Table()
    for column in ("part", "ms", "share"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for part, ms in parts.items():
        table.add_row(part, f"{ms:,.2f}", f"{ms / reopen_ms:.0%}")
    console.print(table)
    figures.append(Figure("breakdown.reopen.cpu_ms", reopen_ms, "ms"))
    integrity = sum(ms for part, ms in parts.items() if part.startswith("integrity"))
    figures.append(Figure("breakdown.reopen.integrity_ms", integrity, "ms"))
    return figures


def floor_figures(measured: Any) -> list[Figure]:
    """A ``bench.floor.HarnessFloor``'s figures (no target: it bounds the lockstep's)."""
    from rmqsim.conformance.bench.data import Figure

    key = f"floor.{measured.profile}"
    return [Figure(f"{key}.harness_us_per_op", measured.harness_us_per_op, "µs"),
            Figure(f"{key}.sut_us_per_op", measured.sut_us_per_op, "µs"),
            Figure(f"{key}.cpu_slowdown_vs_sut", measured.slowdown_floor, "x")]


def _print_floor(console: Console, seeds: int) -> list[Figure]:
    """The harness's own CPU per operation (the model as the SUT, every check) on smoke
    and on the stream layer, and the least lockstep / SUT-alone ratio it leaves our
    implementations (bench.floor)."""
    from rmqsim.conformance.bench.floor import (
        measure_harness_floor,
        measure_stream_harness_floor,
    )
    from rmqsim.conformance.bench.lockstep import TARGET_SLOWDOWN_VS_SUT_40

    figures = []
    for measured, sut, model in (
        (measure_harness_floor("smoke", range(seeds)), "impl.RocksMQ", "reference model"),
        (measure_stream_harness_floor(range(seeds)), "our streams", "model's streams"),
    ):
        console.print(
            f"the harness alone on {measured.profile} (the {model} as the SUT, every check, "
            f"less that SUT's own operations and reads of its state): "
            f"{measured.harness_us_per_op:,.1f} µs of CPU per operation; {sut} alone: "
            f"{measured.sut_us_per_op:,.1f} µs; so no lockstep of this harness runs {sut} "
            f"under {measured.slowdown_floor:.2f}x its time alone per CPU second, even with "
            "its state read back for free", highlight=False)
        if measured.slowdown_floor > TARGET_SLOWDOWN_VS_SUT_40:
            console.print(f"the target lockstep <= {TARGET_SLOWDOWN_VS_SUT_40:g}x the SUT "
                          f"alone on {measured.profile} is below that floor: only a cheaper "
                          "harness (model, simulation, comparison) can meet it",
                          highlight=False)
        figures += floor_figures(measured)
    return figures
