"""Synthetic sweep rows of the real schema, made with numpy and pyarrow in seconds: what
the report benchmark aggregates (10 million rows would take days to sweep for real).

The values follow the shape of real rows: about 1 % failures in a handful of signatures,
1 % determinism twins, unique trace digests, a few crash points passed per run, swarm rows
with drawn configs and switched-off kinds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rmqsim.conformance.queue.coverage import APPLICABLE
from rmqsim.conformance.running.gate import GATE_PROFILES
from rmqsim.impl import FAULT_POINTS
from rmqsim.reports.schema import (
    ALL_OP_KINDS,
    ARROW_SCHEMA,
    LAYER_QUEUE,
    MANIFEST,
    RUNS_DIR,
    SCHEMA_VERSION,
)
from rmqsim.scenarios.queue.ops import OP_KINDS

__all__ = [
    "FAILURE_RATE",
    "REPEAT_RATE",
    "ROWS_PER_FILE",
    "SIGNATURES",
    "trace_hashes",
    "write_synthetic",
]

#: Rows written per Parquet file (and generated at once: bounds the memory used).
ROWS_PER_FILE = 1_000_000
FAILURE_RATE = 0.01
REPEAT_RATE = 0.01
SIGNATURES = (
    "lost-write @ produce",
    "duplicate @ consume",
    "premature-retention @ run_retention",
    "torn-operation @ crash_reopen",
    "position-mismatch @ seek",
)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
#: A hex digit's value by its ASCII code.
_HEX_VALUE = np.zeros(256, dtype=np.uint8)
_HEX_VALUE[_HEX] = np.arange(16, dtype=np.uint8)


def _digests(rng: np.random.Generator, n: int) -> pa.Array:
    """``n`` distinct-looking ``sha256:<64 hex>`` strings, built straight into buffers."""
    width = 7 + 64
    data = np.empty((n, width), dtype=np.uint8)
    data[:, :7] = np.frombuffer(b"sha256:", dtype=np.uint8)
    data[:, 7:] = _HEX[rng.integers(0, 16, size=(n, 64), dtype=np.uint8)]
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _pick(
    rng: np.random.Generator, values: list[str], n: int, mask: np.ndarray | None = None
) -> pa.Array:
    indices = pa.array(rng.integers(0, len(values), size=n), mask=mask)
    return pa.array(values).take(indices)


def _seeds(rng: np.random.Generator, first_seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows' seeds and determinism_repeat flags: about 1 % twins."""
    repeat = (rng.random(n) < REPEAT_RATE).astype(np.int32)
    seeds = np.arange(first_seed, first_seed + n, dtype=np.int64)
    # A twin repeats the seed of the row before it (its first run lives in the same file).
    seeds[1:][repeat[1:] == 1] = seeds[:-1][repeat[1:] == 1]
    repeat[0] = 0
    return seeds, repeat


def trace_hashes(digests: pa.Array) -> pa.Array:
    """``schema.trace_hash`` of each of ``digests`` (``sha256:<64 hex>`` strings, as
    ``_digests`` makes them), by numpy: the first 16 hex digits as a signed 64-bit int."""
    hex_digits = pc.binary_slice(digests.cast(pa.binary()), 7, 23).cast(pa.binary(16))
    start = 16 * hex_digits.offset
    text = np.frombuffer(hex_digits.buffers()[1], dtype=np.uint8)[start : start + 16 * len(digests)]
    digits = _HEX_VALUE[text.reshape(-1, 16)].astype(np.uint64)
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    return pa.array((digits << shifts).sum(axis=1, dtype=np.uint64).view(np.int64))


def _trace_digests(rng: np.random.Generator, repeat: np.ndarray) -> pa.Array:
    """A distinct digest per row, but a deterministic twin shares its first run's."""
    n = len(repeat)
    digests = _digests(rng, n)
    twins = np.flatnonzero(repeat == 1)
    digest_index = np.arange(n)
    digest_index[twins] = twins - 1
    return digests.take(pa.array(digest_index))


def _counts_map(rng: np.random.Generator, n: int, keys: list[str], most: int) -> pa.MapArray:
    """0..``most`` entries per row, drawn from ``keys``, each with a count."""
    per_row = rng.integers(0, most + 1, size=n)
    offsets = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)
    entries = int(offsets[-1])
    return pa.MapArray.from_arrays(
        pa.array(offsets),
        pa.array(keys).take(pa.array(rng.integers(0, len(keys), size=entries))),
        pa.array(rng.integers(1, 50, size=entries)),
    )


def _fault_points(rng: np.random.Generator, n: int) -> pa.MapArray:
    """0..8 crash points passed per row, each with a hit count."""
    return _counts_map(rng, n, [f"{p.split('.')[0]}:{p}" for p in FAULT_POINTS], 8)


def _coverage(rng: np.random.Generator, n: int) -> tuple[pa.MapArray, pa.MapArray]:
    """The coverage columns: 0..8 operation or point cells reached per row, 0..1 crash
    cell armed (a real queue run reaches a hundred cells or more: the shape, not the
    size, of the real column)."""
    operations = [f"{kind}/{c}/-" for kind, conditions in APPLICABLE.items() for c in conditions]
    points = [f"{p.split('.')[0]}/any/{p}" for p in FAULT_POINTS]
    return _counts_map(rng, n, operations + points, 8), _counts_map(rng, n, points, 1)


def _kinds_off(rng: np.random.Generator, n: int, swarm: bool) -> pa.ListArray:
    """The kinds a swarm row switched off (0..4 of them); none for other profiles."""
    off_counts = rng.integers(0, 5, size=n) if swarm else np.zeros(n, dtype=np.int64)
    off_offsets = np.concatenate([[0], np.cumsum(off_counts)]).astype(np.int32)
    kinds = list(OP_KINDS[4:])
    return pa.ListArray.from_arrays(
        pa.array(off_offsets),
        pa.array(kinds).take(pa.array(rng.integers(0, len(kinds), size=int(off_offsets[-1])))),
    )


def _op_counts(rng: np.random.Generator, n: int) -> pa.StructArray:
    """Operations per kind; queue rows: the consumer vocabulary's own kinds count 0."""
    return pa.StructArray.from_arrays(
        [
            pa.array(rng.integers(0, 120, size=n) if kind in OP_KINDS else np.zeros(n, np.int64))
            for kind in ALL_OP_KINDS
        ],
        names=list(ALL_OP_KINDS),
    )


def _batch(rng: np.random.Generator, profile: str, first_seed: int, n: int) -> pa.Table:
    """``n`` rows of ``profile``, seeds from ``first_seed`` (the draws' order fixes them)."""
    failing = rng.random(n) < FAILURE_RATE
    ok_mask = ~failing
    seeds, repeat = _seeds(rng, first_seed, n)
    steps = rng.integers(50, 1001, size=n)
    trace_digest = _trace_digests(rng, repeat)
    fault_points = _fault_points(rng, n)
    swarm = profile == "swarm"
    kinds_off = _kinds_off(rng, n, swarm)
    op_counts = _op_counts(rng, n)
    signature = _pick(rng, list(SIGNATURES), n, mask=ok_mask)

    def config(choices: tuple[int, ...]) -> pa.Array:
        return pa.array(rng.choice(choices if swarm else choices[:1], size=n))

    columns = {
        "schema_version": pa.repeat(pa.scalar(SCHEMA_VERSION, pa.int32()), n),
        "sweep_id": pa.repeat(pa.scalar("synthetic"), n),
        "layer": pa.repeat(pa.scalar(LAYER_QUEUE), n),
        "seed": pa.array(seeds),
        "implementation": pa.repeat(pa.scalar("rmqsim.conformance.adapter:rocksmq_factory"), n),
        "code_version": pa.repeat(pa.scalar("0" * 40), n),
        "determinism_repeat": pa.array(repeat),
        "status": pa.array(np.where(failing, "divergence", "ok")),
        "anomaly": signature,
        "signature": signature,
        "divergence_step": pa.array(rng.integers(1, 1000, size=n), mask=ok_mask),
        "detail": _pick(rng, ["states differ", "messages t1 missing in sut"], n, mask=ok_mask),
        "steps": pa.array(steps),
        "op_counts": op_counts,
        "crashes_injected": pa.array(rng.integers(0, 5, size=n)),
        "reopens": pa.array(rng.integers(0, 20, size=n)),
        "fault_points": fault_points,
        "page_size_bytes": config((128, 1, 8, 64, 256, 1024, 1 << 16)),
        "retention_time_s": config((30, -1, 0, 1, 5, 300, 3600)),
        "retention_size_bytes": config((512, -1, 0, 1, 64, 4096, 1 << 20)),
        "kinds_off": kinds_off,
        "consumer_config": pa.nulls(n, pa.string()),
        "sim_time_s": pa.array(rng.integers(0, 5000, size=n)),
        "wall_s": pa.array(rng.gamma(2.0, 0.1, size=n)),
        "trace_digest": trace_digest,
        "trace_hash": trace_hashes(trace_digest),
        "state_digest": trace_digest,
        "trace_path": _pick(rng, ["traces/x.jsonl"], n, mask=ok_mask),
        "trace_shrunk": pa.array(failing),
        "repro_steps": pa.array(rng.integers(2, 40, size=n), mask=ok_mask),
        "repro": _pick(rng, ["rmqsim run --profile smoke --seed 1"], n, mask=ok_mask),
    }
    # Drawn last: the other columns are those of the same seed before this one existed.
    columns["coverage_reached"], columns["coverage_crashed"] = _coverage(rng, n)
    schema = pa.schema([f for f in ARROW_SCHEMA if f.name != "profile"])
    return pa.table([columns[f.name] for f in schema], schema=schema)


def write_synthetic(out: Path, rows: int, seed: int = 0) -> Path:
    """Write ``rows`` synthetic rows (Parquet, partitioned by profile) and a manifest that
    lists the files, as a sweep's does."""
    rng = np.random.default_rng(seed)
    written = 0
    index = 0
    files = {}
    while written < rows:
        n = min(ROWS_PER_FILE, rows - written)
        profile = GATE_PROFILES[index % len(GATE_PROFILES)]
        name = f"{RUNS_DIR}/profile={profile}/part-{index:05d}.parquet"
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_batch(rng, profile, written, n), out / name)
        files[name] = n
        written += n
        index += 1
    record = {"sweep_id": "synthetic", "files": files, "rows": written}
    manifest = {"schema_version": SCHEMA_VERSION, "sweeps": [record]}
    (out / MANIFEST).write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    return out
