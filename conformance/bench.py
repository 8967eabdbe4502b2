"""``rmqsim bench``: throughput of ``impl.RocksMQ`` against raw rocksdict, in one run.

Each measurement is a function returning a ``Measurement``: the same work done by the
queue and by raw rocksdict doing the least that work needs, measured alternately in the
same process on the same kind of temporary database, best of ``repeats`` each (the least
disturbed run), so the ratio is comparable across machines even when absolute figures
are not. Add a measurement by writing one more ``measure_*`` function and listing it in
``MEASUREMENTS`` (a lockstep measurement can join the same table).

- produce: batches of 100 messages of 1 KiB. Raw: one ``WriteBatch`` of 100 puts of the
  same keys (tag + incarnation + big-endian id) and payloads, per batch.
- consume: ``consume(n=100)`` until the topic is read. Raw: a bounded iterator scan over
  the next 100 keys of the same data, values only (the least a consumer must read).

Heavy imports happen inside the functions so that ``rmqsim --help`` stays fast.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from rmqsim.conformance.cli_common import friendly_errors
from rmqsim.conformance.scratch import scratch_root

__all__ = [
    "MEASUREMENTS",
    "TARGET_RATIO",
    "Measurement",
    "bench",
    "measure_consume",
    "measure_produce",
    "run_bench",
]

#: Throughput of the queue relative to raw rocksdict that the implementation aims for.
TARGET_RATIO = 0.5
BATCH_MESSAGES = 100
PAYLOAD_BYTES = 1024
CONSUME_N = 100
_RAW_INCARNATION = 1


@dataclass(frozen=True, slots=True)
class Measurement:
    """One line of the table: messages per second of the queue and of raw rocksdict."""

    name: str
    messages: int
    impl_msgs_per_s: float
    raw_msgs_per_s: float

    @property
    def ratio(self) -> float:
        return self.impl_msgs_per_s / self.raw_msgs_per_s if self.raw_msgs_per_s else 0.0


def _best_rate(messages: int, runs: list[float]) -> float:
    assert runs and all(seconds > 0 for seconds in runs)
    return messages / min(runs)


class _RawDb:
    """A raw-mode rocksdict database with the queue's options (one column family)."""

    def __init__(self, path: Path) -> None:
        from rocksdict import Options, Rdict, WriteOptions

        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self.db = Rdict(str(path), options)
        self.write_options = WriteOptions()

    def close(self) -> None:
        self.db.close()
        del self.db


def _payloads(count: int) -> list[bytes]:
    """Distinct 1 KiB payloads (incompressible), built outside every timed section."""
    seed = os.urandom(PAYLOAD_BYTES)
    return [seed[i % PAYLOAD_BYTES :] + seed[: i % PAYLOAD_BYTES] for i in range(count)]


def _raw_produce(path: Path, payloads: list[bytes]) -> float:
    import functools
    import struct

    from rocksdict import WriteBatch

    raw = _RawDb(path)
    key = functools.partial(struct.Struct(">cQQ").pack, b"m")  # the queue's message keys
    try:
        start = time.perf_counter()
        msg_id = 0
        for offset in range(0, len(payloads), BATCH_MESSAGES):
            batch = WriteBatch(raw_mode=True)
            for payload in payloads[offset : offset + BATCH_MESSAGES]:
                msg_id += 1
                batch.put(key(_RAW_INCARNATION, msg_id), payload)
            raw.db.write(batch, raw.write_options)
        return time.perf_counter() - start
    finally:
        raw.close()


def _impl_produce(path: Path, payloads: list[bytes]) -> float:
    from rmqsim.impl import RocksMQ
    from rmqsim.model.api import MQConfig, ProducerMessage

    batches = [
        [ProducerMessage(p) for p in payloads[offset : offset + BATCH_MESSAGES]]
        for offset in range(0, len(payloads), BATCH_MESSAGES)
    ]
    mq = RocksMQ.open(str(path), MQConfig())
    try:
        mq.create_topic("bench")
        start = time.perf_counter()
        for batch in batches:
            mq.produce("bench", batch)
        return time.perf_counter() - start
    finally:
        mq.close()


def measure_produce(workdir: Path, messages: int, repeats: int) -> Measurement:
    """Produce ``messages`` 1 KiB messages in batches of 100, queue vs raw puts."""
    payloads = _payloads(messages)
    raw_runs: list[float] = []
    impl_runs: list[float] = []
    for run in range(repeats):
        raw_runs.append(_raw_produce(workdir / f"produce-raw-{run}", payloads))
        impl_runs.append(_impl_produce(workdir / f"produce-impl-{run}", payloads))
    return Measurement(
        f"produce ({BATCH_MESSAGES} x {PAYLOAD_BYTES} B per call)",
        messages,
        _best_rate(messages, impl_runs),
        _best_rate(messages, raw_runs),
    )


def _raw_consume(path: Path, messages: int) -> float:
    import functools
    import struct

    from rocksdict import ReadOptions

    raw = _RawDb(path)
    key = functools.partial(struct.Struct(">cQQ").pack, b"m")  # the queue's message keys
    try:
        start = time.perf_counter()
        seen = 0
        for first in range(1, messages + 1, CONSUME_N):
            bound = ReadOptions()
            bound.set_iterate_upper_bound(key(_RAW_INCARNATION, first + CONSUME_N))
            values = list(raw.db.values(from_key=key(_RAW_INCARNATION, first), read_opt=bound))
            seen += len(values)
        elapsed = time.perf_counter() - start
        assert seen == messages, (seen, messages)
        return elapsed
    finally:
        raw.close()


def measure_consume(workdir: Path, messages: int, repeats: int) -> Measurement:
    """Read ``messages`` 1 KiB messages 100 at a time, queue vs raw bounded scans.

    The data is written once per side (untimed) and read ``repeats`` times: the queue's
    reads each use a fresh group, the raw reads scan the same keys again.
    """
    payloads = _payloads(messages)
    raw_path = workdir / "consume-raw"
    impl_path = workdir / "consume-impl"
    _raw_produce(raw_path, payloads)
    _impl_produce(impl_path, payloads)
    raw_runs: list[float] = []
    impl_runs: list[float] = []
    for run in range(repeats):
        raw_runs.append(_raw_consume(raw_path, messages))
        impl_runs.append(_impl_consume_fresh_group(impl_path, messages, run))
    return Measurement(
        f"consume (n={CONSUME_N}, {PAYLOAD_BYTES} B messages)",
        messages,
        _best_rate(messages, impl_runs),
        _best_rate(messages, raw_runs),
    )


def _impl_consume_fresh_group(path: Path, messages: int, run: int) -> float:
    from rmqsim.impl import RocksMQ

    mq = RocksMQ.open(str(path))
    try:
        group = f"g{run}"
        mq.create_consumer_group("bench", group)
        start = time.perf_counter()
        seen = 0
        while True:
            got = mq.consume("bench", group, CONSUME_N)
            if not got:
                break
            seen += len(got)
        elapsed = time.perf_counter() - start
        assert seen == messages, (seen, messages)
        return elapsed
    finally:
        mq.close()


#: Every measurement ``rmqsim bench`` makes, in table order.
MEASUREMENTS: tuple[Callable[[Path, int, int], Measurement], ...] = (
    measure_produce,
    measure_consume,
)


def run_bench(messages: int, repeats: int, workdir: Path | None = None) -> list[Measurement]:
    """Every measurement, in a temporary directory under ``workdir`` (default: the
    scratch root, ``RMQSIM_WORKDIR`` when set)."""
    if messages < BATCH_MESSAGES or messages % BATCH_MESSAGES:
        raise ValueError(f"messages must be a positive multiple of {BATCH_MESSAGES}")
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    with tempfile.TemporaryDirectory(prefix="rmqsim-bench-", dir=scratch_root(workdir)) as tmp:
        return [measure(Path(tmp), messages, repeats) for measure in MEASUREMENTS]


@click.command("bench")
@click.option(
    "--messages",
    type=click.IntRange(min=BATCH_MESSAGES),
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
@friendly_errors
def bench(messages: int, repeats: int, lockstep_seeds: int, check_every: int) -> None:
    """Throughput of impl.RocksMQ vs raw rocksdict (produce and consume), with ratios."""
    from rich.console import Console
    from rich.table import Table

    if messages % BATCH_MESSAGES:
        raise click.BadParameter(f"must be a multiple of {BATCH_MESSAGES}", param_hint="--messages")
    results = run_bench(messages, repeats)
    table = Table(title=f"rmqsim bench: {messages} messages, best of {repeats}")
    table.add_column("operation")
    table.add_column("rmqsim msgs/s", justify="right")
    table.add_column("raw rocksdict msgs/s", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column(f"target >= {TARGET_RATIO}x", justify="center")
    for result in results:
        table.add_row(
            result.name,
            f"{result.impl_msgs_per_s:,.0f}",
            f"{result.raw_msgs_per_s:,.0f}",
            f"{result.ratio:.2f}x",
            "yes" if result.ratio >= TARGET_RATIO else "NO",
        )
    Console().print(table)
    if lockstep_seeds:
        _print_lockstep(lockstep_seeds, check_every)


def _print_lockstep(seeds: int, check_every: int) -> None:
    """Lockstep ops/s on smoke and swarm, with ratios to the SUT and the model alone."""
    from rich.console import Console
    from rich.table import Table

    from rmqsim.conformance.bench_lockstep import (
        TARGET_LOCKSTEP_OPS_PER_S,
        TARGET_SLOWDOWN_VS_SUT,
        measure_lockstep,
    )

    cadence = "" if check_every == 1 else f", one-topic checks every {check_every} changes"
    table = Table(title=f"lockstep: same operations three ways, seeds 0:{seeds}{cadence}")
    for column in (
        "profile",
        "operations",
        "lockstep ops/s",
        "SUT alone ops/s",
        "model alone ops/s",
        "lockstep slowdown vs SUT",
        "vs model",
    ):
        table.add_column(column, justify="left" if column == "profile" else "right")
    for profile in ("smoke", "swarm"):
        m = measure_lockstep(profile, range(seeds), check_every=check_every)
        table.add_row(
            profile,
            str(m.operations),
            f"{m.lockstep_ops_per_s:,.0f}",
            f"{m.sut_ops_per_s:,.0f}",
            f"{m.model_ops_per_s:,.0f}",
            f"{m.slowdown_vs_sut:.2f}x",
            f"{m.slowdown_vs_model:.2f}x",
        )
    Console().print(table)
    Console().print(
        f"targets (default checks, --check-every 1): lockstep >= "
        f"{TARGET_LOCKSTEP_OPS_PER_S:,} ops/s on smoke; slowdown vs SUT <= "
        f"{TARGET_SLOWDOWN_VS_SUT}x"
    )
