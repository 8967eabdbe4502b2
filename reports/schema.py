"""The versioned schema of a sweep's rows (one row per run), as pyarrow and as Spark.

A sweep directory is read back by ``rmqsim report`` possibly long after it was written,
by another version of rmqsim; ``SCHEMA_VERSION`` (in every row and in the directory's
``sweep.json``) lets the report refuse a layout it does not know instead of misreading it.
Bump it whenever a column is added, removed, renamed or changes type.

Version 2: rows of consumer profiles (``scenarios.consumer.profiles``) too. A ``layer``
column says which kind of run a row is; ``op_counts`` holds both vocabularies; the queue
config columns may be null; ``consumer_config`` carries a consumer profile's own knobs.

Version 3: rows of stream profiles (``scenarios.stream.profiles``) too: ``layer``
"stream", ``op_counts`` holds the stream vocabulary as well, ``consumer_config`` carries a
stream profile's own knobs (each layer's ``Layer.sweep_fields``).

Version 4: ``coverage_reached`` and ``coverage_crashed``, a queue run's coverage map
(``conformance.queue.coverage``: operation cells run and crash points passed, crashes armed) by
cell label; empty for the other layers. ``rmqsim report`` still reads version 3 rows
(``READABLE_SCHEMA_VERSIONS``), whose report says that no coverage map was recorded.

Version 5: ``trace_hash``, the first 64 bits of ``trace_digest``'s SHA-256 as a signed
integer (``trace_hash``): what the report pairs a determinism re-run with its first run
by. A column of 8-byte integers decodes about 15 times faster than one of distinct
71-character digests, which was a sixth of a report task's reading; the digests
themselves are read only for the pairs that differ. Versions 3 and 4 stay readable (their
twins are paired by the same 64 bits, taken from the digests).

The Spark schema is derived from the pyarrow one, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from rmqsim.scenarios.consumer.ops import CONSUMER_OP_TYPES
from rmqsim.scenarios.queue.ops import OP_KINDS
from rmqsim.scenarios.stream.ops import STREAM_OP_TYPES

__all__ = [
    "ADDED_COLUMNS",
    "ALL_OP_KINDS",
    "ARROW_SCHEMA",
    "COLUMNS",
    "CONFIG_COLUMNS",
    "LAYER_CONSUMER",
    "LAYER_OP_KINDS",
    "LAYER_QUEUE",
    "LAYER_STREAM",
    "MANIFEST",
    "MAX_DETAIL_CHARS",
    "OP_COUNTS_TYPE",
    "READABLE_SCHEMA_VERSIONS",
    "RUNS_DIR",
    "SCHEMA_VERSION",
    "STATUS_DIVERGENCE",
    "STATUS_ERROR",
    "STATUS_OK",
    "TRACES_DIR",
    "SchemaMismatchError",
    "arrow_schema",
    "check_columns",
    "spark_schema",
    "trace_hash",
]

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SCHEMA_VERSION = 5
#: The row schema versions ``rmqsim report`` reads (a sweep appends to its own only).
READABLE_SCHEMA_VERSIONS = (3, 4, 5)
#: The columns each version after 3 added (a report over older rows goes without them).
ADDED_COLUMNS: dict[int, tuple[str, ...]] = {
    4: ("coverage_reached", "coverage_crashed"),
    5: ("trace_hash",),
}

#: Where the rows go under a sweep directory (a Parquet dataset partitioned by profile).
RUNS_DIR = "runs"
#: Where failing (shrunk, when a shrinker is installed) traces go under a sweep directory.
TRACES_DIR = "traces"
#: The sweep directory's manifest: schema version and one record per sweep written there.
MANIFEST = "sweep.json"

#: The queue configuration knobs a row carries (swarm draws them per seed): the report's
#: "config dimensions". A consumer profile's run carries the config of the queue under its
#: consumers (``MQConfig(**profile.config)``); null only where the profile is unknown (an
#: ``error`` row of a profile this code cannot resolve).
CONFIG_COLUMNS: tuple[str, ...] = ("page_size_bytes", "retention_time_s", "retention_size_bytes")

#: Run statuses: conforming, a divergence found, or rmqsim itself failed on that run.
STATUS_OK = "ok"
STATUS_DIVERGENCE = "divergence"
STATUS_ERROR = "error"

#: Longest divergence detail kept in a row (characters); the full story is in the trace.
MAX_DETAIL_CHARS = 500

#: Which layer a run checks (``Layer.name``): the queue (``scenarios.queue.profiles``,
#: ``conformance.running.lockstep``), the push consumer on top of it
#: (``scenarios.consumer.profiles``, ``conformance.consumer.run``) or the message streams
#: on top of it (``scenarios.stream.profiles``, ``conformance.stream``). The layer decides
#: the vocabulary of a row's operations.
LAYER_QUEUE = "queue"
LAYER_CONSUMER = "consumer"
LAYER_STREAM = "stream"
#: Each layer's operation kinds, in vocabulary order (``run_retention`` is in all three:
#: the consumer and stream simulations emit the queue's own retention pass).
LAYER_OP_KINDS: dict[str, tuple[str, ...]] = {
    LAYER_QUEUE: OP_KINDS,
    LAYER_CONSUMER: tuple(CONSUMER_OP_TYPES),
    LAYER_STREAM: tuple(STREAM_OP_TYPES),
}
#: The fields of ``op_counts``: the queue vocabulary, then each other layer's kinds that
#: no earlier layer has.
ALL_OP_KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(kind for kinds in LAYER_OP_KINDS.values() for kind in kinds)
)

#: Operation counts: one field per kind of any layer's vocabulary (a fixed set, so a struct
#: rather than a map: columnar sums stay cheap over millions of rows); a row counts 0 for
#: the kinds outside its layer's vocabulary.
OP_COUNTS_TYPE = pa.struct([pa.field(kind, pa.int64(), nullable=False) for kind in ALL_OP_KINDS])

ARROW_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("sweep_id", pa.string(), nullable=False),
        pa.field("profile", pa.string(), nullable=False),
        # LAYER_QUEUE, LAYER_CONSUMER or LAYER_STREAM.
        pa.field("layer", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("implementation", pa.string(), nullable=False),
        pa.field("code_version", pa.string(), nullable=False),
        # 0: the run itself; 1: the determinism re-run of the same (profile, seed).
        pa.field("determinism_repeat", pa.int32(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("anomaly", pa.string()),
        # anomaly and the operation kind it showed at: how failures are grouped.
        pa.field("signature", pa.string()),
        pa.field("divergence_step", pa.int64()),
        pa.field("detail", pa.string()),
        pa.field("steps", pa.int64(), nullable=False),
        pa.field("op_counts", OP_COUNTS_TYPE, nullable=False),
        # queue: crashes armed and hit, SUT reopens; consumer: client and process crashes
        # (crash_client + crash_queue operations), queue reopens (crash_queue).
        pa.field("crashes_injected", pa.int64(), nullable=False),
        pa.field("reopens", pa.int64(), nullable=False),
        # "operation:point" -> times the SUT passed that crash point.
        pa.field("fault_points", pa.map_(pa.string(), pa.int64()), nullable=False),
        # queue runs: coverage cell label ("kind/condition/point") -> operations run under
        # that condition (point "-") or times that point was passed; and -> crashes armed
        # there (``conformance.queue.coverage.CoverageMap.label_counts``). Empty for other
        # layers.
        pa.field("coverage_reached", pa.map_(pa.string(), pa.int64()), nullable=False),
        pa.field("coverage_crashed", pa.map_(pa.string(), pa.int64()), nullable=False),
        *(pa.field(name, pa.int64()) for name in CONFIG_COLUMNS),
        # operation kinds a swarm seed switched off (empty for fixed profiles).
        pa.field("kinds_off", pa.list_(pa.string()), nullable=False),
        # A consumer or stream profile as its traces record it (its to_json() without
        # the prose description), as canonical JSON; null for queue rows.
        pa.field("consumer_config", pa.string()),
        pa.field("sim_time_s", pa.int64(), nullable=False),
        pa.field("wall_s", pa.float64(), nullable=False),
        pa.field("trace_digest", pa.string(), nullable=False),
        # trace_hash(trace_digest): what twins are paired by (0 without a digest).
        pa.field("trace_hash", pa.int64(), nullable=False),
        pa.field("state_digest", pa.string()),
        # relative to the sweep directory (traces/...), null for a conforming run.
        pa.field("trace_path", pa.string()),
        pa.field("trace_shrunk", pa.bool_(), nullable=False),
        # operations in the saved trace (the reproducer's size).
        pa.field("repro_steps", pa.int64()),
        pa.field("repro", pa.string()),
    ],
    metadata={"rmqsim.schema_version": str(SCHEMA_VERSION)},
)

#: Column names in row order (a row is a tuple in this order).
COLUMNS: tuple[str, ...] = tuple(ARROW_SCHEMA.names)


def trace_hash(digest: str) -> int:
    """The first 64 bits of a ``sha256:<hex>`` digest as a signed integer (0 for "", an
    error row's digest): two different traces share it with a chance of 2**-64."""
    hex_digits = digest.partition(":")[2][:16]
    if not hex_digits:
        return 0
    value = int(hex_digits, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def arrow_schema(version: int = SCHEMA_VERSION) -> pa.Schema:
    """The pyarrow schema of rows of ``version`` (one of ``READABLE_SCHEMA_VERSIONS``)."""
    assert version in READABLE_SCHEMA_VERSIONS, version
    later = {name for v, names in ADDED_COLUMNS.items() if v > version for name in names}
    return pa.schema([f for f in ARROW_SCHEMA if f.name not in later], metadata=None)


def spark_schema(version: int = SCHEMA_VERSION) -> StructType:
    """The Spark ``StructType`` of a row of ``version`` (imported lazily: Spark is heavy)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ARROW_SCHEMA if version == SCHEMA_VERSION else arrow_schema(version))


class SchemaMismatchError(Exception):
    """A sweep directory written with another schema (or not a sweep directory at all)."""


def check_columns(found: dict[str, str], expected: dict[str, str]) -> None:
    """Raise ``SchemaMismatchError`` naming the first missing or retyped column.

    ``found`` and ``expected`` map column names to type strings (Spark's ``simpleString``).
    """
    for name, kind in expected.items():
        if name not in found:
            raise SchemaMismatchError(f"column {name!r} is missing")
        if found[name] != kind:
            raise SchemaMismatchError(f"column {name!r} is {found[name]}, expected {kind}")
