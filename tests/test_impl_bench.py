"""``rmqsim bench`` runs end to end at a tiny size and prints its ratios, for every backend
and per CPU second; its raw baselines keep the backends' durability; the commit-log
backend's fast paths write what the plain ones did. No timing is asserted: the figures
are for the report, not a test."""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.bench.backends import BACKENDS, run_bench, vs_rocksmq
from rmqsim.conformance.bench.raw import (
    FlushRule,
    raw_append_consume,
    raw_append_produce,
    stopwatch,
)
from rmqsim.conformance.cli import cli
from rmqsim.impl.commitlog import records

# The tests of what a whole small bench prints (every backend's ratios, the lockstep
# table, the stream layer's row, the commit log's rows and CPU columns, a piped bench's
# widths) are in tests/test_bench_json.py, on the one bench run there.


def test_bench_breakdown_prints_where_a_lockstep_operation_goes(tmp_path: Path) -> None:
    out = tmp_path / "bench.jsonl"
    args = ["bench", "--messages", "100", "--repeats", "1", "--backend", "rocksmq",
            "--lockstep-seeds", "0", "--protocol-seeds", "0", "--power-steps", "0",
            "--breakdown", "--json", str(out)]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "where a lockstep operation's CPU time goes: smoke, seeds 0:1" in result.output
    for part in ("implementation", "comparison: read back", "watchdog", "simulation"):
        assert part in result.output
    rows = {r["name"]: r for r in map(json.loads, out.read_text().splitlines())}
    parts = [r["value"] for name, r in rows.items()
             if name.startswith("breakdown.smoke.") and name != "breakdown.smoke.cpu_us_per_op"]
    assert len(parts) == 9 and all(value >= 0 for value in parts), rows
    # The parts add up to the CPU time per operation, and carry no target.
    whole = rows["breakdown.smoke.cpu_us_per_op"]["value"]
    assert abs(sum(parts) - whole) <= 0.01 * whole + 0.01, (parts, whole)
    assert all(rows[name]["target"] is None for name in rows if name.startswith("breakdown."))
    # A crash and reopen, with the integrity record's share of it on its own.
    assert "one crash and reopen of impl.RocksMQ" in result.output
    assert "integrity: read-only pre-open" in result.output
    assert 0 < rows["breakdown.reopen.integrity_ms"]["value"] < rows["breakdown.reopen.cpu_ms"][
        "value"]
    # The harness alone, and the floor it puts under the lockstep / SUT-alone ratio, on
    # smoke and on the stream layer (its lines as printed, whatever the console's width).
    printed = " ".join(result.output.split())
    for profile, sut_name in (("smoke", "impl.RocksMQ"), ("stream", "our streams")):
        harness, sut = (rows[f"floor.{profile}.{name}_us_per_op"]["value"]
                        for name in ("harness", "sut"))
        floor = rows[f"floor.{profile}.cpu_slowdown_vs_sut"]
        assert harness > 0 and sut > 0 and floor["target"] is None
        assert floor["value"] == pytest.approx((sut + harness) / sut, rel=1e-3)
        assert (f"the harness alone on {profile} " in printed and f"runs {sut_name} "
                f"under {floor['value']:.2f}x its time alone" in printed), result.output


def test_the_harness_floor_is_the_lockstep_less_its_sut_s_own_operations(monkeypatch) -> None:
    """The floor's arithmetic on runs of known cost (a fake CPU clock): the harness is the
    lockstep with the model as the SUT less that model's operations and the reads of its
    state, the SUT's figure is the implementation alone, each per operation; the floor is
    (SUT + harness) / SUT."""
    import rmqsim.conformance.bench.floor as floor
    from rmqsim.conformance.bench.raw import Timing

    cpu_s = [0.0]
    seen: list[object] = []

    class Run:
        ok = True
        trace_lines = ()

    def run_seed(profile: str, seed: int, *, impl: object) -> Run:
        seen.append(impl)
        cpu_s[0] += 0.5 if impl is floor.harness_sut else 9.0  # a lockstep run's CPU
        if impl is floor.harness_sut:
            floor.SUT_READS.cpu_s += 0.05  # of which reading its state
        return Run()

    monkeypatch.setattr(floor, "run_seed", run_seed)
    monkeypatch.setattr(floor.time, "process_time", lambda: cpu_s[0])
    monkeypatch.setattr(floor, "steps_of", lambda lines: (None, [object()] * 1000))
    monkeypatch.setattr(floor, "model_alone", lambda config, steps: Timing(cpu_s=0.1))
    monkeypatch.setattr(floor, "sut_alone", lambda impl, config, steps: Timing(cpu_s=0.2))
    measured = floor.measure_harness_floor("smoke", range(3))
    assert measured.operations == 3000
    assert measured.harness_us_per_op == pytest.approx((0.5 - 0.1 - 0.05) / 1000 * 1e6)
    assert measured.sut_us_per_op == pytest.approx(0.2 / 1000 * 1e6)
    assert measured.slowdown_floor == pytest.approx((200 + 350) / 200)
    # Warm-up, then each seed both ways; the harness's runs have the model as their SUT.
    assert seen[::2] == [floor.harness_sut] * 4 and floor.DEFAULT_IMPL in seen[1::2]
    with pytest.raises(ValueError, match="at least one seed"):
        floor.measure_harness_floor("smoke", range(0))


@pytest.mark.parametrize(("profile", "sut_name"), [("smoke", "harness_sut"),
                                                  ("stream", "harness_streams")])
def test_the_harness_s_sut_times_the_reads_of_its_state(profile: str, sut_name: str) -> None:
    """The model the harness runs as its SUT (for the streams, the model's streams over it)
    conforms, and counts the CPU time of its snapshots into ``SUT_READS``, which the floor
    takes out: some, and less than the run."""
    from rmqsim.conformance.bench import floor
    from rmqsim.conformance.running.run import run_seed

    sut = getattr(floor, sut_name)
    floor.SUT_READS.cpu_s = 0.0
    started = time.process_time()
    assert run_seed(profile, 0, impl=sut, steps=60).ok
    assert 0 < floor.SUT_READS.cpu_s < time.process_time() - started
    if profile == "stream":  # the streams' own snapshots count, not only their queue's
        from rmqsim.model import ReferenceMQ

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(floor.SnapshotTimedModel, "snapshot", ReferenceMQ.snapshot)
            floor.SUT_READS.cpu_s = 0.0
            assert run_seed(profile, 0, impl=sut, steps=60).ok
            assert floor.SUT_READS.cpu_s > 0


def test_breakdown_attributes_time_to_the_group_of_code_that_spent_it() -> None:
    import cProfile
    import pstats

    from rmqsim.conformance.bench.breakdown import PARTS, attribute
    from rmqsim.conformance.running.run import run_seed

    profiler = cProfile.Profile()
    profiler.enable()
    run_seed("smoke", 0, steps=60)
    profiler.disable()
    parts = attribute(pstats.Stats(profiler).stats)  # type: ignore[attr-defined]
    assert list(parts) == list(PARTS)
    assert all(seconds >= 0 for seconds in parts.values()), parts
    # A run opens and drives the implementation, reads it back, and steps the model.
    for part in ("implementation", "model", "comparison: read back", "simulation"):
        assert parts[part] > 0, parts


def test_reopen_breakdown_names_every_part_of_a_crash_and_reopen() -> None:
    from rmqsim.conformance.bench.breakdown import REOPEN_PARTS, measure_reopen

    cpu_ms, parts = measure_reopen(reopens=3)
    assert list(parts) == list(REOPEN_PARTS) and cpu_ms > 0
    assert abs(sum(parts.values()) - cpu_ms) <= 0.01 * cpu_ms
    for part in ("crash (freeze, stop RocksDB, thaw)", "integrity: read-only pre-open",
                 "read-write open", "integrity: write the record"):
        assert parts[part] > 0, parts


def test_bench_lockstep_cadence_reaches_the_runs(monkeypatch) -> None:
    import rmqsim.conformance.bench.lockstep as bench_lockstep

    cadences: list[int] = []
    real_run_seed = bench_lockstep.run_seed

    def recording_run_seed(*args, **kwargs):
        cadences.append(kwargs["check_every"])
        # Each run bounded to 40 steps: the cadence is what reaches run_seed, not what a
        # whole run of smoke or swarm does with it.
        return real_run_seed(*args, **{**kwargs, "steps": 40})

    monkeypatch.setattr(bench_lockstep, "run_seed", recording_run_seed)
    args = ["bench", "--messages", "100", "--repeats", "1", "--lockstep-seeds", "1",
            "--protocol-seeds", "0", "--power-steps", "0"]
    result = CliRunner().invoke(cli, [*args, "--check-every", "1000"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "one-topic checks every 1000 changes" in result.output
    # Warm-up and one measured seed, for smoke and for swarm: all at the asked cadence.
    assert cadences == [1000] * 4
    assert CliRunner().invoke(cli, [*args, "--check-every", "0"]).exit_code == 2


def test_measure_stream_lockstep_runs_the_lockstep_s_own_operations() -> None:
    from rmqsim.conformance.bench.stream import measure_stream_lockstep
    from rmqsim.conformance.running.run import run_seed

    measured = measure_stream_lockstep(range(2, 3))
    assert measured.profile == "stream"
    assert measured.operations == run_seed("stream", 2, impl="stream").steps
    rates = (measured.lockstep_ops_per_s, measured.sut_ops_per_s, measured.model_ops_per_s)
    assert all(rate > 0 for rate in rates) and measured.cpu_slowdown_vs_sut > 0


def test_bench_refuses_a_size_that_is_not_whole_batches() -> None:
    result = CliRunner().invoke(cli, ["bench", "--messages", "150"])
    assert result.exit_code == 2


def test_run_bench_measures_both_sides() -> None:
    results = run_bench(100, 1, backends=("rocksmq",))
    assert [r.name.split()[0] for r in results] == ["produce", "consume"]
    assert all(r.impl_msgs_per_s > 0 and r.raw_msgs_per_s > 0 and r.ratio > 0 for r in results)


# ----------------------------------------------------------------------- commit log, per CPU


def test_bench_measures_the_commit_log_beside_rocksmq_per_wall_and_cpu_second() -> None:
    results = run_bench(200, 1)
    assert [(r.operation, r.backend) for r in results] == [
        (operation, backend) for operation in ("produce", "consume") for backend in BACKENDS
    ]
    assert BACKENDS == ("rocksmq", "commitlog", "commitlog-async")
    baselines = {r.backend: r.baseline for r in results}
    assert baselines["rocksmq"] == "raw rocksdict"
    assert baselines["commitlog"] == "raw append, fsync per batch"
    assert baselines["commitlog-async"].startswith("raw append, fsync per 4 dirty pages")
    for r in results:
        assert r.impl_msgs_per_cpu_s > 0 and r.raw_msgs_per_cpu_s > 0, r
        assert r.cpu_ratio == r.impl_msgs_per_cpu_s / r.raw_msgs_per_cpu_s
    versus = vs_rocksmq(results)
    assert versus is not None and all(ratio > 0 for ratio in versus)
    assert vs_rocksmq([r for r in results if r.backend != "rocksmq"]) is None


def test_cpu_time_counts_every_thread_of_the_process() -> None:
    """A background thread's work (RocksDB's, a flusher's) is in the CPU figure even while
    the measuring thread waits."""

    def spin() -> None:
        until = time.process_time() + 0.2
        while time.process_time() < until:
            pass

    with stopwatch() as timing:
        worker = threading.Thread(target=spin)
        worker.start()
        worker.join()
    assert timing.cpu_s >= 0.15, timing
    assert timing.wall_s >= 0.1


@pytest.mark.parametrize(
    ("rule", "fsyncs"),
    [
        (FlushRule(every_batch=True), 6),  # sync: every produce is durable when it returns
        (FlushRule(False, dirty_bytes=3 * 100 * (1024 + 8), interval_s=1e9), 2),
        (FlushRule(False, dirty_bytes=1 << 40, interval_s=0.0), 6),  # the interval passed
        (FlushRule(False, dirty_bytes=1 << 40, interval_s=1e9), 0),
    ],
)
def test_raw_append_syncs_as_the_backend_promises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: FlushRule, fsyncs: int
) -> None:
    import rmqsim.conformance.bench.raw as bench_raw

    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(bench_raw.os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    payloads = [bytes([i % 256]) * 1024 for i in range(600)]
    raw_append_produce(tmp_path / "log", payloads, rule, zlib.crc32)
    assert len(calls) == fsyncs
    assert (tmp_path / "log").stat().st_size == 600 * (1024 + 8)
    raw_append_consume(tmp_path / "log", 600, zlib.crc32)  # reads back, every CRC checked


def test_async_baseline_follows_the_backends_flush_policy() -> None:
    from rmqsim.impl.commitlog import FlushPolicy
    from rmqsim.impl.commitlog.queue import PAGE_SIZE_BYTES

    policy = FlushPolicy(mode="async")
    result = run_bench(100, 1, backends=("commitlog-async",))[0]
    assert result.baseline == (f"raw append, fsync per {policy.flush_least_pages} dirty pages "
                               f"or {policy.flush_thorough_interval_s} s")
    assert policy.flush_least_pages * PAGE_SIZE_BYTES == 16384


# ----------------------------------------------------------------------- the faster commit log


def test_a_batch_encodes_to_the_bytes_of_one_record_at_a_time() -> None:
    rng = random.Random(7)
    batch = [
        (rng.choice([0, 1, 2, 4]), rng.randrange(2**40), rng.randrange(-(2**62), 2**62),
         rng.randrange(2**30), rng.choice([b"", b"T", "bench-ü".encode()]),
         rng.randbytes(rng.randrange(30)),
         rng.randbytes(rng.randrange(3000)))
        for _ in range(50)
    ]
    parts, placed = records.encode_batch(4096, batch)
    one_by_one = []
    offset = 4096
    for flags, queue_offset, store_time, inc, topic, properties, body in batch:
        one_by_one.append(records.encode_record(
            offset=offset, flags=flags, queue_offset=queue_offset, store_time=store_time,
            incarnation=inc, topic=topic, properties=properties, body=body,
        ))  # fmt: skip
        offset += len(one_by_one[-1])
    data = b"".join(parts)
    assert data == b"".join(one_by_one)
    assert [size for _, size in placed] == [len(record) for record in one_by_one]
    position = 0
    for (record_offset, size), fields in zip(placed, batch, strict=True):
        parsed = records.parse_record(data, position, record_offset)
        assert not isinstance(parsed, int)
        assert (parsed.flags, parsed.queue_offset, parsed.store_time, parsed.incarnation,
                parsed.topic.encode(), parsed.properties, parsed.body) == fields
        position += size


def test_the_crc_is_zlibs_whichever_implementation_computes_it() -> None:
    rng = random.Random(3)
    for size in (0, 1, 63, 1024, 5000):
        data = rng.randbytes(size)
        assert records.crc32(data) == zlib.crc32(data)
        assert records.crc32(data, 12345) == zlib.crc32(data, 12345)
    assert records.CRC32_SOURCE in ("isal", "zlib")


def test_a_run_of_entries_writes_what_one_put_per_entry_writes(tmp_path: Path) -> None:
    from rmqsim.impl.commitlog import OsFileSystem
    from rmqsim.impl.commitlog.cq import ConsumeQueue, Entry

    entries = [Entry(1000 * i, 1100, 50 + i) for i in range(23)]
    one, run = (ConsumeQueue(OsFileSystem(), str(tmp_path / name), 8) for name in ("a", "b"))
    for index, entry in enumerate(entries, start=5):
        one.put(index, entry)
    run.put_run(5, entries)  # spans four files of 8 entries
    assert run.get(0, 40) == one.get(0, 40) == [None] * 5 + entries + [None] * 12
    assert sorted(run.dirty) == sorted(one.dirty) == [0, 8, 16, 24]
    for name in sorted(os.listdir(tmp_path / "a")):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    one.close()
    run.close()


def test_all_zero_tells_the_clean_end_of_a_segment() -> None:
    from rmqsim.impl.commitlog.log import all_zero

    data = bytes(1 << 20) + b"\x01" + bytes(100)
    assert all_zero(data, (1 << 20) + 1) and all_zero(b"") and all_zero(data, len(data))
    assert not all_zero(data) and not all_zero(data, 1 << 20) and not all_zero(b"\0\x80\0", 1)


def test_decoded_properties_are_fresh_each_time_and_a_damaged_block_is_always_refused() -> None:
    data = records.encode_properties({"k": "v", "ü": "x"})
    first = records.decode_properties(data)
    first["k"] = "changed"
    assert records.decode_properties(data) == {"k": "v", "ü": "x"}
    for _ in range(2):
        with pytest.raises(records.RecordError):
            records.decode_properties(data[:-1])


#: Steps of each of the protocol section's runs in the test below (smoke's whole run: 300
#: operations, 6 opens, 3 s through an exec'd server): the test looks at what the section
#: prints, not at the figures.
PROTOCOL_TEST_STEPS = 40


def test_bench_prints_what_the_protocol_costs_with_its_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wire protocol's table: in process, through the reference server (exec and
    forked), per wall and CPU second, the round trip, and the 2x target met or missed."""
    import rmqsim.conformance.bench.wire as bench_wire

    real_run_seed = bench_wire.run_seed
    steps: list[int] = []

    def bounded_run_seed(*args, **kwargs):
        result = real_run_seed(*args, **{**kwargs, "steps": PROTOCOL_TEST_STEPS})
        steps.append(result.steps)
        return result

    monkeypatch.setattr(bench_wire, "run_seed", bounded_run_seed)
    args = ["bench", "--messages", "100", "--repeats", "1", "--backend", "rocksmq",
            "--lockstep-seeds", "0", "--protocol-seeds", "1", "--power-steps", "0"]  # fmt: skip
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert steps[:3] == [PROTOCOL_TEST_STEPS] * 3  # in process, the server exec'd, forked
    assert "the wire protocol: lockstep on smoke" in result.output
    assert "reference server over impl.RocksMQ" in result.output and "forked" in result.output
    assert re.search(r"protocol round trip: [\d,]+ µs per call", result.output)
    assert re.search(r"^target protocol\.reference-server\.cpu_slowdown <= 2x: [\d.]+x, "
                     r"(met|MISSED)$", result.output, re.M)
    # The protocol's own overhead per operation, in µs of CPU, and where it goes.
    assert re.search(r"protocol overhead per lockstep operation: -?[\d,]+ µs of CPU beyond in "
                     r"process; of it, server starts -?[\d,]+ µs \(\d+ opens x [\d,]+ ms over "
                     r"\d+ operations\), the requests -?[\d,]+ µs", result.output), result.output
