"""The versioned schema of a sweep's rows (one row per run), as pyarrow and as Spark.

A sweep directory is read back by ``rmqsim report`` possibly long after it was written,
by another version of rmqsim; ``SCHEMA_VERSION`` (in every row and in the directory's
``sweep.json``) lets the report refuse a layout it does not know instead of misreading it.
Bump it whenever a column is added, removed, renamed or changes type.

The Spark schema is derived from the pyarrow one, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from scenarios.ops import OP_KINDS

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SCHEMA_VERSION = 1

#: Where the rows go under a sweep directory (a Parquet dataset partitioned by profile).
RUNS_DIR = "runs"
#: Where failing (shrunk, when a shrinker is installed) traces go under a sweep directory.
TRACES_DIR = "traces"
#: The sweep directory's manifest: schema version and one record per sweep written there.
MANIFEST = "sweep.json"

#: The queue configuration knobs every row carries (swarm draws them per seed): the
#: report's "config dimensions".
CONFIG_COLUMNS: tuple[str, ...] = ("page_size_bytes", "retention_time_s", "retention_size_bytes")

#: Run statuses: conforming, a divergence found, or rmqsim itself failed on that run.
STATUS_OK = "ok"
STATUS_DIVERGENCE = "divergence"
STATUS_ERROR = "error"

#: Longest divergence detail kept in a row (characters); the full story is in the trace.
MAX_DETAIL_CHARS = 500

#: Operation counts: one field per kind of the scenario vocabulary (a fixed set, so a
#: struct: columnar sums stay cheap over millions of rows).
OP_COUNTS_TYPE = pa.struct([pa.field(kind, pa.int64(), nullable=False) for kind in OP_KINDS])

ARROW_SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("sweep_id", pa.string(), nullable=False),
        pa.field("profile", pa.string(), nullable=False),
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
        pa.field("crashes_injected", pa.int64(), nullable=False),
        pa.field("reopens", pa.int64(), nullable=False),
        # "operation:point" -> times the SUT passed that crash point.
        pa.field("fault_points", pa.map_(pa.string(), pa.int64()), nullable=False),
        *(pa.field(name, pa.int64(), nullable=False) for name in CONFIG_COLUMNS),
        # operation kinds a swarm seed switched off (empty for fixed profiles).
        pa.field("kinds_off", pa.list_(pa.string()), nullable=False),
        pa.field("sim_time_s", pa.int64(), nullable=False),
        pa.field("wall_s", pa.float64(), nullable=False),
        pa.field("trace_digest", pa.string(), nullable=False),
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


def spark_schema() -> StructType:
    """The Spark ``StructType`` of a row (imported lazily: Spark is heavy)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ARROW_SCHEMA)


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
