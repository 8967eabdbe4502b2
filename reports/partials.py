"""The report's aggregations over ONE data file of a sweep, with pyarrow, and how the
driver merges them (``merge``): what each Spark task of ``rmqsim report`` computes.

Spark schedules (a task per data file, or per group of small files), pyarrow computes:
each task reads its files' needed columns only and returns partial aggregates, small
(grouped keys, not rows); the driver merges them into the rows the report is shaped
from (``reports.aggregate``). Nothing here imports Spark, so a Spark Python worker, a
cluster's executor (rmqsim shipped as a zip) and a plain process run it the same.

Every file's rows share one profile (the ``profile=...`` directory it lies in), so a
file's groups need not carry it per row. The determinism pairs are exact across files:
a task returns its twins and the first runs of the same file that share their seeds (two
small Arrow tables, ``reports.twins``) and names for each (sweep, implementation) its
first runs' seed range; the driver then asks the files whose range holds a twin's seed
(``TwinLookup``, a second, small pass) for the rest, and joins them all once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from rmqsim.reports.schema import (
    ADDED_COLUMNS,
    ALL_OP_KINDS,
    CONFIG_COLUMNS,
    LAYER_CONSUMER,
    STATUS_OK,
)
from rmqsim.reports.twins import (
    empty_twins,
    file_twins,
    lookup_firsts,
    lookups,
    mismatches,
    pairs,
    twin_columns,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = [
    "GROUP_KEYS",
    "WALL_BUCKETS_PER_OCTAVE",
    "FileTask",
    "Partials",
    "TwinLookup",
    "as_rows",
    "file_profile",
    "lookup_pairs",
    "merge",
    "task_partials",
    "twin_lookups",
]

#: Resolution of the wall-time histogram: buckets per doubling (16: within ~4.4 %).
WALL_BUCKETS_PER_OCTAVE = 16
#: The base grouping's keys (``profile`` comes from the file's directory).
GROUP_KEYS: tuple[str, ...] = (
    "determinism_repeat",
    "profile",
    "layer",
    "status",
    "implementation",
    "code_version",
    *CONFIG_COLUMNS,
)
#: Fields of a failure group's smallest reproducer, compared in this order.
SMALLEST_FIELDS = (
    "repro_steps",
    "divergence_step",
    "seed",
    "profile",
    "trace_path",
    "trace_shrunk",
    "repro",
    "detail",
    "implementation",
)
#: Columns a task reads batch by batch (and the coverage maps, from rows of schema 4 on).
READ_COLUMNS = (
    "layer",
    "seed",
    "implementation",
    "code_version",
    "determinism_repeat",
    "status",
    "anomaly",
    "signature",
    "divergence_step",
    "detail",
    "steps",
    "op_counts",
    "fault_points",
    *CONFIG_COLUMNS,
    "kinds_off",
    "consumer_config",
    "wall_s",
    "trace_path",
    "trace_shrunk",
    "repro_steps",
    "repro",
)
#: The coverage map columns (row schema 4 on).
COVERAGE_COLUMNS = ("coverage_reached", "coverage_crashed")
#: Columns (and map keys, list items) read as dictionaries: few distinct values, so a
#: task decodes each once per page instead of once per row (a third of a task's CPU).
DICTIONARY_COLUMNS = (
    "sweep_id",
    "layer",
    "implementation",
    "code_version",
    "status",
    "anomaly",
    "signature",
    "detail",
    "consumer_config",
    "trace_path",
    "repro",
    "kinds_off.list.element",
    "fault_points.key_value.key",
    "coverage_reached.key_value.key",
    "coverage_crashed.key_value.key",
)
#: Rows aggregated at once (a file is read in batches of these).
BATCH_ROWS = 128 * 1024
#: Summary files another writer may leave: their row groups are other files' rows.
SUMMARY_FILES = ("_metadata", "_common_metadata")


@dataclass(frozen=True, slots=True)
class FileTask:
    """One data file to aggregate: its path, its rows' profile, the row schema version."""

    path: str
    profile: str | None
    version: int


def file_profile(path: Path, runs_dir: Path) -> str | None:
    """The profile of a data file's rows: its ``profile=...`` directory's value, unquoted
    as Spark's partition discovery does (None outside such a directory)."""
    for part in path.relative_to(runs_dir).parts[:-1]:
        name, sep, value = part.partition("=")
        if sep and name == "profile":
            return unquote(value)
    return None


@dataclass(slots=True)
class Partials:
    """The partial aggregates of some files (merged in place by ``add``); ``error`` names
    the first file that could not be read."""

    groups: dict[tuple[Any, ...], list[Any]] = field(default_factory=dict)
    #: Per layer: the first runs' operations per kind (``ALL_OP_KINDS`` order).
    op_sums: dict[Any, list[int]] = field(default_factory=dict)
    kinds_off: dict[Any, list[int]] = field(default_factory=dict)
    failures: dict[Any, dict[str, Any]] = field(default_factory=dict)
    consumers: dict[tuple[Any, Any], list[int]] = field(default_factory=dict)
    fault_points: dict[Any, int] = field(default_factory=dict)
    wall: dict[tuple[Any, int], list[Any]] = field(default_factory=dict)
    cells_reached: dict[Any, int] = field(default_factory=dict)
    cells_crashed: dict[Any, int] = field(default_factory=dict)
    #: The twins found, and the first runs found for them (``reports.twins`` tables).
    twins: list[pa.Table] = field(default_factory=list)
    firsts: list[pa.Table] = field(default_factory=list)
    #: Per file: (sweep_id, profile, implementation) -> (lowest, highest) first-run seed.
    seed_ranges: dict[str, dict[tuple[Any, ...], tuple[int, int]]] = field(default_factory=dict)
    error: str | None = None

    def add(self, other: Partials) -> None:
        """Merge ``other``'s aggregates into these."""
        for key, agg in other.groups.items():
            mine = self.groups.get(key)
            self.groups[key] = list(agg) if mine is None else _merge_group(mine, agg)
        _sum_lists(self.op_sums, other.op_sums)
        _sum_lists(self.kinds_off, other.kinds_off)
        _sum_lists(self.consumers, other.consumers)
        for key, wall in other.wall.items():
            runs, largest = self.wall.get(key, (0, -math.inf))
            self.wall[key] = [runs + wall[0], max(largest, wall[1])]
        for name in ("fault_points", "cells_reached", "cells_crashed"):
            _sum_counts(getattr(self, name), getattr(other, name))
        for signature, failure in other.failures.items():
            mine_failure = self.failures.get(signature)
            self.failures[signature] = (
                dict(failure) if mine_failure is None else _merge_failure(mine_failure, failure)
            )
        self.twins += other.twins
        self.firsts += other.firsts
        self.seed_ranges.update(other.seed_ranges)
        self.error = self.error or other.error


def _merge_group(mine: list[Any], other: list[Any]) -> list[Any]:
    """[runs, steps, wall_s, min_seed, max_seed]: sums, except the seeds."""
    runs, steps, wall_s, low, high = mine
    return [
        runs + other[0],
        _add(steps, other[1]),
        _add(wall_s, other[2]),
        min(low, other[3]),
        max(high, other[4]),
    ]


def _add(a: Any, b: Any) -> Any:
    """A SQL sum's merge: null only when both are."""
    if a is None:
        return b
    return a if b is None else a + b


def _sum_lists(into: dict[Any, list[int]], more: dict[Any, list[int]]) -> None:
    for key, values in more.items():
        mine = into.get(key)
        into[key] = (
            list(values) if mine is None else [a + b for a, b in zip(mine, values, strict=True)]
        )


def _sum_counts(into: dict[Any, int], more: dict[Any, int]) -> None:
    for key, count in more.items():
        into[key] = _add(into.get(key), count)


def _nulls_first(value: Any) -> tuple[bool, Any]:
    """A sort key ordering None before every value (Spark's order for ``min``)."""
    return (value is not None, value)


def _smallest_key(smallest: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(_nulls_first(smallest[name]) for name in SMALLEST_FIELDS)


def _merge_failure(mine: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    anomalies = [a for a in (mine["anomaly"], other["anomaly"]) if a is not None]
    return {
        "count": mine["count"] + other["count"],
        "anomaly": min(anomalies, default=None),
        "first": min(mine["first"], other["first"], key=lambda f: tuple(map(_nulls_first, f))),
        "smallest": min(mine["smallest"], other["smallest"], key=_smallest_key),
        "profiles": mine["profiles"] | other["profiles"],
    }


def task_partials(tasks: Iterable[FileTask]) -> Iterator[Partials]:
    """What one Spark task returns: the partial aggregates of its files, merged (one
    ``Partials``; an unreadable file makes it carry ``error`` instead of raising, so the
    report names the file in one line rather than a worker's traceback)."""
    import pyarrow as pa

    partials = Partials()
    for task in tasks:
        if Path(task.path).name in SUMMARY_FILES:
            continue
        try:
            partials.add(_file_partials(task))
        except (pa.ArrowException, OSError) as exc:  # the file's bytes do not decode
            partials.error = partials.error or _unreadable(task.path, exc)
    yield partials


def _unreadable(path: str, exc: BaseException) -> str:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"{path}: not a readable Parquet file (pyarrow: {type(exc).__name__}: {reason})"


def _file_partials(task: FileTask) -> Partials:
    """One file's partials, batch by batch (``BATCH_ROWS``: memory stays bounded and is
    reused, whatever the file's size; a whole 1M-row file at once cost more in page
    faults than in decoding). Only the rows whose seed some twin of the file has are
    kept past their batch, to pair the twins with their first runs at the end."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parquet = _open(task)
    keys = parquet.read(columns=["determinism_repeat", "seed"], use_threads=False)
    twin_seeds = keys.filter(pc.equal(keys["determinism_repeat"], 1))["seed"].combine_chunks()
    later = {name for v, names in ADDED_COLUMNS.items() if v > task.version for name in names}
    twin_read = twin_columns(task.version)
    columns = [*READ_COLUMNS, *(c for c in COVERAGE_COLUMNS if c not in later), *twin_read]
    partials = Partials(seed_ranges={task.path: {}})
    kept = []
    read = 0
    for batch in parquet.iter_batches(
        BATCH_ROWS, columns=list(dict.fromkeys(columns)), use_threads=False
    ):
        table = pa.Table.from_batches([batch])
        partials.add(_batch_partials(table, task.profile))
        _add_seed_ranges(partials.seed_ranges[task.path], table, task.profile)
        twin_rows = _numbered(table.select(list(twin_read)), read)
        kept.append(twin_rows.filter(pc.is_in(table["seed"], value_set=twin_seeds)))
        read += table.num_rows
    if kept:
        twins, firsts = file_twins(pa.concat_tables(kept), task.profile, task.path)
        partials.twins.append(twins)
        partials.firsts.append(firsts)
    return partials


def _numbered(rows: pa.Table, first_row: int) -> pa.Table:
    """``rows`` with their row numbers in the file (from ``first_row`` on) as ``row``."""
    import numpy as np
    import pyarrow as pa

    numbers = np.arange(first_row, first_row + rows.num_rows, dtype=np.int64)
    return rows.append_column("row", pa.array(numbers))


def _add_seed_ranges(
    ranges: dict[tuple[Any, ...], tuple[int, int]], table: pa.Table, profile: str | None
) -> None:
    """The first runs' lowest and highest seed per (sweep, profile, implementation)."""
    import pyarrow.compute as pc

    first = table.select(["sweep_id", "implementation", "seed"]).filter(
        pc.equal(table["determinism_repeat"], 0)
    )
    found = first.group_by(["sweep_id", "implementation"], use_threads=False).aggregate(
        [("seed", "min"), ("seed", "max")]
    )
    for r in found.to_pylist():
        key = (r["sweep_id"], profile, r["implementation"])
        low, high = ranges.get(key, (r["seed_min"], r["seed_max"]))
        ranges[key] = (min(low, r["seed_min"]), max(high, r["seed_max"]))


def _open(task: FileTask) -> pq.ParquetFile:
    """The file, its repeated strings read as dictionaries (those of its columns)."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(task.path)
    paths = set(parquet.schema.names) | {
        parquet.schema.column(i).path for i in range(len(parquet.schema))
    }
    present = [name for name in DICTIONARY_COLUMNS if name in paths]
    return pq.ParquetFile(task.path, read_dictionary=present)


def _batch_partials(table: pa.Table, profile: str | None) -> Partials:
    import pyarrow.compute as pc

    first = pc.equal(table["determinism_repeat"], 0)
    first_rows = first.to_numpy(zero_copy_only=False)
    partials = Partials(
        groups=_groups(table, profile),
        op_sums=_op_sums(table, first_rows),
        kinds_off=_kinds_off(table.select(["kinds_off", "status"]).filter(first)),
        failures=_failures(
            table.filter(pc.and_(first, pc.not_equal(table["status"], STATUS_OK))), profile
        ),
        consumers=_consumers(
            table.filter(pc.and_(first, pc.equal(table["layer"], LAYER_CONSUMER))), profile
        ),
        fault_points=_map_sums(table["fault_points"], first_rows),
        wall=_wall(table["wall_s"].filter(first), profile),
    )
    if "coverage_reached" in table.column_names:
        partials.cells_reached = _map_sums(table["coverage_reached"], first_rows)
        partials.cells_crashed = _map_sums(table["coverage_crashed"], first_rows)
    return partials


def _groups(table: pa.Table, profile: str | None) -> dict[tuple[Any, ...], list[Any]]:
    """The base grouping: runs, steps, wall time and seed range per group."""
    keys = [k for k in GROUP_KEYS if k != "profile"]
    rows = table.group_by(keys, use_threads=False).aggregate(
        [([], "count_all"), ("steps", "sum"), ("wall_s", "sum"), ("seed", "min"), ("seed", "max")]
    )
    out = {}
    for row in rows.to_pylist():
        key = tuple(profile if k == "profile" else row[k] for k in GROUP_KEYS)
        out[key] = [
            row["count_all"],
            row["steps_sum"],
            row["wall_s_sum"],
            row["seed_min"],
            row["seed_max"],
        ]
    return out


def _op_sums(table: pa.Table, first: np.ndarray) -> dict[Any, list[int]]:
    """Per layer, the operations of its ``first`` runs per kind: the report sums them per
    layer only, so they are summed here by numpy (each kind's column of counts, less the
    rows left out: a few re-runs, other layers), not carried through the base grouping."""
    import numpy as np
    import pyarrow.compute as pc

    columns = [
        pc.struct_field(table["op_counts"], kind).to_numpy(zero_copy_only=False)
        for kind in ALL_OP_KINDS
    ]
    layers = table["layer"]
    out: dict[Any, list[int]] = {}
    for layer in pc.unique(layers).to_pylist():
        mine = first & pc.equal(layers, layer).to_numpy(zero_copy_only=False)
        if not mine.any():
            continue
        left_out = np.flatnonzero(~mine)
        out[layer] = [int(c.sum()) - int(c[left_out].sum()) for c in columns]
    return out


def _kinds_off(first: pa.Table) -> dict[Any, list[int]]:
    """Per switched-off kind: [runs, failed] (a run counts once per kind it switched off)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = first["kinds_off"]
    lengths = pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False)
    if not lengths.sum():
        return {}
    failed = pc.not_equal(first["status"], STATUS_OK).to_numpy(zero_copy_only=False)
    entries = pa.table(
        {
            "kind": pc.list_flatten(column),
            "failed": np.repeat(failed.astype(np.int64), lengths),
        }
    )
    rows = entries.group_by("kind", use_threads=False).aggregate(
        [([], "count_all"), ("failed", "sum")]
    )
    return {r["kind"]: [r["count_all"], r["failed_sum"]] for r in rows.to_pylist()}


def _failures(failing: pa.Table, profile: str | None) -> dict[Any, dict[str, Any]]:
    """Per signature of the ``failing`` first runs: count, anomaly, first (seed, profile),
    smallest reproducer, profiles. The smallest is the first row of its signature once
    the rows are sorted by ``SMALLEST_FIELDS``, nulls first (Spark's ``min`` of a struct;
    the profile is the file's, the same for every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not failing.num_rows:
        return {}
    strings = {"signature", "anomaly", "trace_path", "repro", "detail", "implementation"}
    columns = {
        name: pc.cast(failing[name], pa.string()) if name in strings else failing[name]
        for name in ("signature", "anomaly", "seed", *SMALLEST_FIELDS[4:])
    }
    columns["repro_steps"] = pc.coalesce(failing["repro_steps"], failing["steps"])
    columns["divergence_step"] = pc.coalesce(failing["divergence_step"], 0)
    order = [name for name in SMALLEST_FIELDS if name != "profile"]
    table = pa.table(columns)
    table = table.take(pc.sort_indices(table, [(k, "ascending", "at_start") for k in order]))
    table = table.append_column("row", pa.array(range(table.num_rows), pa.int64()))
    groups = table.group_by("signature", use_threads=False).aggregate(
        [([], "count_all"), ("anomaly", "min"), ("seed", "min"), ("row", "min")]
    )
    smallest = table.take(groups["row_min"]).select(order).to_pylist()
    return {
        g["signature"]: {
            "count": g["count_all"],
            "anomaly": g["anomaly_min"],
            "first": (g["seed_min"], profile),
            "smallest": {name: best.get(name, profile) for name in SMALLEST_FIELDS},
            "profiles": frozenset([profile]),
        }
        for g, best in zip(groups.to_pylist(), smallest, strict=True)
    }


def _consumers(mine: pa.Table, profile: str | None) -> dict[tuple[Any, Any], list[int]]:
    """Per (profile, consumer configuration) of ``mine``, first runs of the consumer
    layer: [runs, failed]."""
    import pyarrow.compute as pc

    if not mine.num_rows:
        return {}
    failed = pc.cast(pc.not_equal(mine["status"], STATUS_OK), "int64")
    source = mine.select(["consumer_config"]).append_column("failed", failed)
    rows = source.group_by("consumer_config", use_threads=False).aggregate(
        [([], "count_all"), ("failed", "sum")]
    )
    return {
        (profile, r["consumer_config"]): [r["count_all"], r["failed_sum"]] for r in rows.to_pylist()
    }


def _map_sums(maps: pa.ChunkedArray, first: np.ndarray) -> dict[Any, int]:
    """A map column (label -> count) summed by label over the rows ``first`` selects:
    each chunk's entries (its keys as dictionary indices) added up by numpy, all of them
    at once, less those of the rows left out (a few: re-runs)."""
    import numpy as np
    import pyarrow as pa

    sums: dict[Any, int] = {}
    start = 0
    for chunk in maps.chunks:
        left_out = np.flatnonzero(~first[start : start + len(chunk)])
        start += len(chunk)
        offsets = chunk.offsets.to_numpy(zero_copy_only=False)
        low, high = int(offsets[0]), int(offsets[-1])
        if high == low:
            continue
        keys = chunk.keys.slice(low, high - low)  # a map's children: its whole arrays
        if not pa.types.is_dictionary(keys.type):
            keys = keys.dictionary_encode()
        indices = keys.indices.to_numpy(zero_copy_only=False)
        values = chunk.items.slice(low, high - low).fill_null(0).to_numpy(zero_copy_only=False)
        labels = len(keys.dictionary)
        totals = np.zeros(labels, dtype=np.int64)
        np.add.at(totals, indices, values)
        entries = np.bincount(indices, minlength=labels)
        dropped = _entries_of(offsets - low, left_out)
        np.subtract.at(totals, indices[dropped], values[dropped])
        entries -= np.bincount(indices[dropped], minlength=labels)
        for label, total, count in zip(
            keys.dictionary.to_pylist(), totals.tolist(), entries.tolist(), strict=True
        ):
            if count:
                sums[label] = sums.get(label, 0) + total
    return sums


def _entries_of(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions of the entries of list ``rows`` (ascending) given the lists'
    ``offsets`` (from 0): each row's range ``offsets[row] .. offsets[row + 1]``."""
    import numpy as np

    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    if not lengths.sum():
        return np.zeros(0, dtype=np.int64)
    # Each entry's position: its row's start plus its rank within the row.
    ranks = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + ranks


def _wall(wall: pa.ChunkedArray, profile: str | None) -> dict[tuple[Any, int], list[Any]]:
    """A histogram of logarithmic buckets of the first runs' ``wall`` times: [runs,
    largest] per bucket; the bucket as Spark's SQL computed it (``floor(log2(max(wall_s,
    1e-6)) * 16)``, its ``log2`` being ``ln(x) / ln(2)``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(wall):
        return {}
    log2 = pc.divide(pc.ln(pc.max_element_wise(wall, 1e-6)), math.log(2))
    bucket = pc.cast(pc.floor(pc.multiply(log2, float(WALL_BUCKETS_PER_OCTAVE))), pa.int64())
    source = pa.table({"bucket": bucket, "wall_s": wall})
    rows = source.group_by("bucket", use_threads=False).aggregate(
        [([], "count_all"), ("wall_s", "max")]
    )
    return {(profile, r["bucket"]): [r["count_all"], r["wall_s_max"]] for r in rows.to_pylist()}


@dataclass(frozen=True, slots=True)
class TwinLookup:
    """The second pass's work for one file: the keys of the twins (found in other files)
    whose first run this file may hold (its seed range for their key holds their seed)."""

    task: FileTask
    wanted: pa.Table


def twin_lookups(tasks: list[FileTask], merged: Partials) -> list[TwinLookup]:
    """The files to look in again, for twins whose first runs may lie in another file
    than theirs (none when every file's seed ranges rule them out)."""
    import pyarrow as pa

    asked = lookups(pa.concat_tables([empty_twins(), *merged.twins]), merged.seed_ranges)
    return [TwinLookup(task, asked[task.path]) for task in tasks if task.path in asked]


def lookup_pairs(asked: Iterable[TwinLookup]) -> Iterator[Partials]:
    """What one task of the second pass returns: the first runs its files hold for the
    twins asked (only the columns that pair them are read)."""
    import pyarrow as pa

    partials = Partials()
    for lookup in asked:
        try:
            columns = list(twin_columns(lookup.task.version))
            table = _open(lookup.task).read(columns=columns, use_threads=False)
        except (pa.ArrowException, OSError) as exc:  # the file's bytes do not decode
            partials.error = partials.error or _unreadable(lookup.task.path, exc)
            continue
        task = lookup.task
        found = lookup_firsts(_numbered(table, 0), task.profile, task.path, lookup.wanted)
        partials.firsts.append(found)
    yield partials


def merge(parts: Iterable[Partials]) -> Partials:
    """The partials of every task as one."""
    merged = Partials()
    for part in parts:
        merged.add(part)
    return merged


def as_rows(merged: Partials) -> dict[str, list[dict[str, Any]]]:
    """The merged aggregates as rows by aggregation name, the shape the summary is built
    from (``reports.aggregate``): what the report's SQL queries returned before."""
    op_names = [f"op_{kind}" for kind in ALL_OP_KINDS]
    stats = ["runs", "steps", "wall_s", "min_seed", "max_seed"]
    return {
        "groups": [
            dict(zip(GROUP_KEYS, key, strict=True)) | dict(zip(stats, agg, strict=True))
            for key, agg in merged.groups.items()
        ],
        "op_sums": [
            {"layer": layer} | dict(zip(op_names, sums, strict=True))
            for layer, sums in merged.op_sums.items()
        ],
        "kinds_off": [
            {"kind": kind, "runs": runs, "failed": failed}
            for kind, (runs, failed) in merged.kinds_off.items()
        ],
        "failures": [_failure_row(signature, f) for signature, f in merged.failures.items()],
        "consumers": [
            {"profile": profile, "consumer_config": config, "runs": runs, "failed": failed}
            for (profile, config), (runs, failed) in merged.consumers.items()
        ],
        "fault_points": [{"key": k, "hits": hits} for k, hits in merged.fault_points.items()],
        **_determinism(merged),
        "wall": [
            {"profile": profile, "bucket": bucket, "runs": runs, "max": largest}
            for (profile, bucket), (runs, largest) in merged.wall.items()
        ],
        "cells_reached": [{"label": k, "count": n} for k, n in merged.cells_reached.items()],
        "cells_crashed": [{"label": k, "count": n} for k, n in merged.cells_crashed.items()],
    }


def _failure_row(signature: Any, failure: dict[str, Any]) -> dict[str, Any]:
    seed, profile = failure["first"]
    return {
        "signature": signature,
        "count": failure["count"],
        "anomaly": failure["anomaly"],
        "first": {"seed": seed, "profile": profile},
        "smallest": dict(failure["smallest"]),
        "profiles": sorted(failure["profiles"], key=_nulls_first),
    }


def _determinism(merged: Partials) -> dict[str, list[dict[str, Any]]]:
    """The twins paired with their first runs: how many pairs, and those whose digests
    differ (rows of profile, seed, implementation and both digests)."""
    found = pairs(merged.twins, merged.firsts)
    return {"determinism": mismatches(found), "pairs_checked": [{"pairs": found.num_rows}]}
