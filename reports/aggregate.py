"""The report's numbers over a sweep directory's rows: Spark schedules, pyarrow computes.

One Spark task per data file (or per group of small files) reads ITS files' needed
columns with pyarrow and returns partial aggregates of everything the report shows
(``reports.partials``); the driver merges them (grouped keys, not rows: small) and shapes
the JSON summary here. The aggregations:

1. the base grouping by (repeat, profile, layer, status, implementation, code version,
   config knobs): totals, failure rates by profile and by config dimension (over the
   rows that have that config), and the operation counts (coverage of operation kinds,
   per layer: a queue row counts the queue's vocabulary, a consumer row the consumer's);
2. the swarm's switched-off kinds (another config dimension);
3. failures grouped by anomaly signature: count, first seen, smallest reproducer;
4. fault points passed (coverage of crash points), summed from the map column;
5. the determinism pairs: each re-run with its first run's digest, exact across files
   (a second, small pass asks the files that may hold a twin's first run);
6. wall-time percentiles per profile and overall (a mergeable log-bucket histogram);
7. the consumer profiles' own configurations (``consumer_config``, one per profile);
8. the coverage map's cells (``conformance.queue.coverage``): the two map columns of the queue
   runs summed by cell label (rows of schema version 3 have none).

Only first runs (``determinism_repeat`` 0) count as runs; the re-runs only feed (5).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqsim.reports.partials import (
    WALL_BUCKETS_PER_OCTAVE,
    FileTask,
    Partials,
    as_rows,
    file_profile,
    lookup_pairs,
    merge,
    task_partials,
    twin_lookups,
)
from rmqsim.reports.schema import (
    CONFIG_COLUMNS,
    LAYER_OP_KINDS,
    LAYER_QUEUE,
    MANIFEST,
    READABLE_SCHEMA_VERSIONS,
    RUNS_DIR,
    SCHEMA_VERSION,
    STATUS_DIVERGENCE,
    STATUS_ERROR,
    SchemaMismatchError,
    arrow_schema,
    check_columns,
)
from rmqsim.reports.sweep import check_manifest, data_files, read_manifest
from rmqsim.scenarios.queue.ops import OP_KINDS

__all__ = [
    "MAX_SIGNATURES",
    "PERCENTILES",
    "TASKS_PER_CORE",
    "SweepDirError",
    "check_footers",
    "check_listed_files",
    "check_sweep_dir",
    "collect_partials",
    "file_tasks",
    "merged_partials",
    "op_kind_label",
    "shape_summary",
    "summarize",
    "write_json",
]

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import SparkContext

#: Wall-time percentiles the report shows.
PERCENTILES = (0.5, 0.9, 0.99)
#: Failure groups listed in full (the JSON keeps them all).
MAX_SIGNATURES = 200
#: Spark tasks per core of the session at most (a task per data file up to that: small
#: files are grouped, so a directory of many appended sweeps is not a task per file).
TASKS_PER_CORE = 8


class SweepDirError(Exception):
    """The report's input is missing, not a sweep directory of this schema version, or
    holds a data file that cannot be read."""


def check_sweep_dir(sweep_dir: Path) -> int:
    """The rows of ``sweep_dir`` (from its files' footers), or ``SweepDirError`` unless it
    holds rows of this schema version (checked from the manifest, before Spark starts: bad
    input fails in a fraction of a second).

    Every data file's Parquet footer is read too (a few KiB per file, no row data): a
    truncated or overwritten file is then named here, in one line, instead of failing a
    Spark job with a Java stack trace. The files the manifest lists must all be there,
    each with the rows it was written with (``check_listed_files``).
    """
    if sweep_dir.is_file():
        raise SweepDirError(f"{sweep_dir}: is a file, not a sweep directory")
    if sweep_dir.exists() and not sweep_dir.is_dir():
        raise SweepDirError(f"{sweep_dir}: not a directory")
    if not sweep_dir.is_dir():
        raise SweepDirError(f"{sweep_dir}: no such directory")
    try:
        manifest = read_manifest(sweep_dir)
    except SchemaMismatchError as exc:
        raise SweepDirError(str(exc)) from None
    if manifest is None:
        raise SweepDirError(f"{sweep_dir}: not a sweep directory (no sweep.json)")
    try:
        version = check_manifest(sweep_dir, manifest, READABLE_SCHEMA_VERSIONS)
    except SchemaMismatchError as exc:
        raise SweepDirError(str(exc)) from None
    runs = sweep_dir / RUNS_DIR
    files = data_files(runs) if runs.is_dir() else []
    found = check_footers(files, version)
    check_listed_files(sweep_dir, manifest, found)
    if not files or not any(runs.glob("profile=*")):
        raise SweepDirError(f"{sweep_dir}: holds no rows ({runs} is missing or empty)")
    return sum(found.values())


def _listed_files(sweep_dir: Path, manifest: dict[str, Any]) -> dict[str, int]:
    """The data files the manifest's sweeps wrote, with their rows (sweeps recorded by an
    rmqsim that did not list them add none)."""
    listed: dict[str, int] = {}
    sweeps = manifest.get("sweeps")
    sweeps = [] if sweeps is None else sweeps
    if not isinstance(sweeps, list) or not all(isinstance(sweep, dict) for sweep in sweeps):
        raise SweepDirError(f"{sweep_dir / MANIFEST}: 'sweeps' is not a list of sweeps")
    for sweep in sweeps:
        files = sweep.get("files")
        if files is None:
            continue
        if not isinstance(files, dict) or not all(
            isinstance(rows, int) and not isinstance(rows, bool) for rows in files.values()
        ):
            raise SweepDirError(
                f"{sweep_dir / MANIFEST}: 'files' is not a map of file names to rows"
            )
        listed.update(files)
    return listed


def check_listed_files(sweep_dir: Path, manifest: dict[str, Any], found: dict[Path, int]) -> None:
    """``SweepDirError`` when a data file the manifest lists is missing, or holds other
    rows than were written there, among the ``found`` files (with their rows): a report
    over a directory with files lost would total fewer runs than were run and call it
    well. Files the manifest does not list (added by hand) are read as they are."""
    listed = _listed_files(sweep_dir, manifest)
    rows = {path.relative_to(sweep_dir).as_posix(): count for path, count in found.items()}
    missing = sorted(name for name in listed if name not in rows)
    if missing:
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise SweepDirError(
            f"{sweep_dir}: {len(missing)} of the {len(listed)} data files {MANIFEST} lists "
            f"are missing ({sum(listed[name] for name in missing)} of its "
            f"{sum(listed.values())} rows): {shown}"
        )
    for name, written in sorted(listed.items()):
        if rows[name] != written:
            raise SweepDirError(
                f"{sweep_dir / name}: holds {rows[name]} rows where {MANIFEST} records "
                f"{written} (the file was replaced)"
            )


def check_footers(files: list[Path], version: int = SCHEMA_VERSION) -> dict[Path, int]:
    """The rows of each of ``files`` from its Parquet footer, or ``SweepDirError`` naming
    the first whose footer cannot be read or whose columns are not those of row schema
    ``version`` (Spark then reads the rows with that schema: no job infers it).

    Only the footer is read (its length, then the metadata): the cost is per file, not
    per row, so a report over millions of rows still reads its data once, in Spark.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = _spark_types(arrow_schema(version))
    del expected["profile"]  # a partition column: in the directory names, not the files
    rows = {}
    for path in files:
        try:
            metadata = pq.read_metadata(path)
            schema = metadata.schema.to_arrow_schema()
        except (pa.ArrowException, OSError) as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise SweepDirError(f"{path}: not a readable Parquet file ({reason})") from None
        try:
            check_columns(_spark_types(schema), expected)
        except (SchemaMismatchError, TypeError) as exc:
            raise SweepDirError(f"{path}: {exc} (rows of another schema version?)") from None
        rows[path] = metadata.num_rows
    return rows


def _spark_types(schema: pa.Schema) -> dict[str, str]:
    """Each column's Spark type (``simpleString``) as Spark reads ``schema``'s columns
    (``TypeError`` for a type Spark does not read)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return {f.name: f.dataType.simpleString() for f in from_arrow_schema(schema).fields}


def _rate(failed: int, runs: int) -> float:
    return round(failed / runs, 6) if runs else 0.0


def _tally(groups: list[Any], key: str | None) -> list[dict[str, Any]]:
    """Runs, divergences, errors and failure rate per value of ``key`` (None: all); rows
    where ``key`` is null (a config a row does not have) are left out."""
    table: dict[Any, dict[str, Any]] = defaultdict(
        lambda: {"runs": 0, "divergences": 0, "errors": 0, "steps": 0, "wall_s": 0.0}
    )
    for g in groups:
        if key and g[key] is None:
            continue
        entry = table[g[key] if key else "all"]
        entry["runs"] += g["runs"]
        entry["steps"] += g["steps"]
        entry["wall_s"] += g["wall_s"]
        if g["status"] == STATUS_DIVERGENCE:
            entry["divergences"] += g["runs"]
        elif g["status"] == STATUS_ERROR:
            entry["errors"] += g["runs"]
    rows = []
    for value in sorted(table, key=lambda v: (str(type(v)), v)):
        entry = table[value]
        failed = entry["divergences"] + entry["errors"]
        rows.append(
            {
                "value": value,
                **entry,
                "wall_s": round(entry["wall_s"], 3),
                "failed": failed,
                "failure_rate": _rate(failed, entry["runs"]),
            }
        )
    return rows


def _kinds_off(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {kind: i for i, kind in enumerate(OP_KINDS)}
    return [
        {
            "value": r["kind"],
            "runs": r["runs"],
            "failed": r["failed"],
            "failure_rate": _rate(r["failed"], r["runs"]),
        }
        for r in sorted(rows, key=lambda r: order.get(r["kind"], len(order)))
    ]


def _by_profile(groups: list[Any]) -> list[dict[str, Any]]:
    """``_tally`` by profile, each entry with its layer."""
    layers = {g["profile"]: g["layer"] for g in groups}
    return [{**entry, "layer": layers[entry["value"]]} for entry in _tally(groups, "profile")]


def _layers(groups: list[Any]) -> list[str]:
    """The layers present, queue first (the order of ``LAYER_OP_KINDS``)."""
    present = {g["layer"] for g in groups}
    return [layer for layer in LAYER_OP_KINDS if layer in present]


def op_kind_label(layer: str, kind: str) -> str:
    """How the report names an operation kind: a queue kind by itself, another layer's
    as ``layer:kind`` (``run_retention`` is in both vocabularies)."""
    return kind if layer == LAYER_QUEUE else f"{layer}:{kind}"


def _op_coverage(groups: list[Any], op_sums: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operations executed per kind of each layer present (``op_sums``: the first runs'
    operations per layer), summed over that layer's rows alone, in vocabulary order."""
    coverage = []
    for layer in _layers(groups):
        mine = [s for s in op_sums if s["layer"] == layer]
        for kind in LAYER_OP_KINDS[layer]:
            coverage.append(
                {
                    "layer": layer,
                    "kind": kind,
                    "label": op_kind_label(layer, kind),
                    "count": sum(g[f"op_{kind}"] or 0 for g in mine),
                }
            )
    return coverage


def _span(value: Any, unit: str = "") -> str:
    """A profile's [low, high] range (or a scalar) as text."""
    if isinstance(value, list) and len(value) == 2:
        low, high = value
        return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"
    return f"{value}{unit}"


def _describe_consumer(config: dict[str, Any]) -> dict[str, Any]:
    """Readable lines of a consumer profile's configuration (the page shows them)."""
    clients = []
    for client in config.get("clients") or []:
        knobs = ", ".join(f"{k}={v}" for k, v in sorted((client.get("consumer") or {}).items()))
        line = (
            f"{client.get('group')}: {client.get('mode')}, {client.get('workers')} worker(s), "
            f"handler {_span(client.get('process_time_s'), ' s')}, fails "
            f"{100 * (client.get('fail_fraction') or 0):g} %, send-backs refused "
            f"{100 * (client.get('send_fail_fraction') or 0):g} %"
        )
        clients.append(f"{line}; {knobs}" if knobs else line)
    crash_every = config.get("crash_every_s")
    crashes = (
        f"every {_span(crash_every, ' s')}, {100 * (config.get('queue_crash_fraction') or 0):g} "
        "% of them the whole process"
        if crash_every
        else "none"
    )
    shown = {"clients", "crash_every_s", "queue_crash_fraction", "config", "name", "swarm"}
    other = [
        f"{key}={_span(value)}"
        for key, value in sorted(config.items())
        if key not in shown and not isinstance(value, dict)
    ]
    return {"clients": clients, "crashes": crashes, "other": other}


def _consumer_profiles(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each consumer profile's configuration as its rows carry it, with its runs (one
    entry per distinct configuration: appended sweeps of other code may differ)."""
    out = []
    for r in sorted(rows, key=lambda r: (r["profile"], r["consumer_config"] or "")):
        try:
            config = json.loads(r["consumer_config"]) if r["consumer_config"] else {}
        except ValueError:
            config = {}
        if not isinstance(config, dict):
            config = {}
        out.append(
            {
                "profile": r["profile"],
                "runs": r["runs"],
                "failed": r["failed"],
                "config": config,
                **_describe_consumer(config),
            }
        )
    return out


def _failures(rows: list[dict[str, Any]], sweep_dir: Path) -> list[dict[str, Any]]:
    """Failures grouped by signature; a row's trace path (relative, so that a sweep
    directory can move) is shown under ``sweep_dir``."""
    out = [
        {
            "signature": r["signature"],
            "anomaly": r["anomaly"],
            "count": r["count"],
            "profiles": list(r["profiles"]),
            "first_seen": {"seed": r["first"]["seed"], "profile": r["first"]["profile"]},
            "smallest": dict(r["smallest"]),
        }
        for r in rows
    ]
    for failure in out:
        smallest = failure["smallest"]
        if smallest["trace_path"]:
            smallest["trace_path"] = str(sweep_dir / smallest["trace_path"])
    out.sort(key=lambda f: (-f["count"], f["signature"] or ""))
    return out


def _fault_points(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``op:point`` keys' hits summed by point (here: the keys are a few hundred, and
    cutting each of millions of map entries in Spark cost more than the grouping)."""
    hits: dict[str, int] = defaultdict(int)
    for r in rows:
        hits[r["key"].rpartition(":")[2]] += r["hits"]
    return [{"point": point, "hits": hits[point]} for point in sorted(hits)]


def _determinism(mismatches: list[dict[str, Any]], pairs_checked: int) -> dict[str, Any]:
    """The determinism entry: ``mismatches``, the pairs (a twin and a first run of its
    key) whose digests differ, among ``pairs_checked``."""
    return {
        "pairs_checked": pairs_checked,
        "mismatches": sorted(
            (
                {
                    "profile": r["profile"],
                    "seed": r["seed"],
                    "implementation": r["implementation"],
                    "digests": [r["trace_digest"], r["repeat_digest"]],
                }
                for r in mismatches
            ),
            key=lambda m: (m["profile"], m["seed"]),
        ),
    }


def _percentiles(buckets: list[tuple[int, int]], largest: float) -> dict[str, float]:
    """Percentiles from a log-bucket histogram ``[(bucket, count)]``: each is the upper
    edge of the bucket holding it (at most ``largest``), within 1/WALL_BUCKETS_PER_OCTAVE
    of an octave of the exact value."""
    total = sum(count for _bucket, count in buckets)
    values: dict[str, float] = {}
    for q in PERCENTILES:
        seen = 0
        for bucket, count in sorted(buckets):
            seen += count
            if seen >= q * total:
                edge = 2 ** ((bucket + 1) / WALL_BUCKETS_PER_OCTAVE)
                values[f"p{round(q * 100)}"] = round(min(edge, largest), 4)
                break
    return {**values, "max": round(largest, 4)}


def _wall_percentiles(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Wall-time percentiles per profile and overall, from ``_wall_query``'s histogram."""
    per_profile: dict[str, list[tuple[int, int]]] = defaultdict(list)
    largest: dict[str, float] = defaultdict(float)
    for r in rows:
        per_profile[r["profile"]].append((r["bucket"], r["runs"]))
        largest[r["profile"]] = max(largest[r["profile"]], r["max"])
    every = [pair for pairs in per_profile.values() for pair in pairs]
    return {
        "all": _percentiles(every, max(largest.values())) if every else {},
        "by_profile": {
            name: _percentiles(per_profile[name], largest[name]) for name in sorted(per_profile)
        },
    }


def _coverage_cells(
    found: dict[str, list[dict[str, Any]]], groups: list[Any], version: int
) -> dict[str, Any] | None:
    """The coverage map of the queue runs (``CoverageMap.to_json``'s cells, counts and
    never-hit cells); None when the rows carry none (an older schema, no queue run)."""
    from rmqsim.conformance.queue.coverage import Cell, CoverageMap

    runs = sum(g["runs"] for g in groups if g["layer"] == LAYER_QUEUE)
    if version < 4 or not runs:
        return None

    def counts(rows: list[dict[str, Any]]) -> Counter[Cell]:
        return Counter({Cell(*r["label"].split("/", 2)): r["count"] for r in rows})

    # Rows do not keep the points one operation passed: the map names no multi-write kind.
    coverage = CoverageMap(
        reached=counts(found["cells_reached"]), crashed=counts(found["cells_crashed"])
    ).to_json()
    never = coverage["never_hit"]
    return {
        "runs": runs,
        "operation_cells": coverage["operation_cells"],
        "crash_cells": coverage["crash_cells"],
        "cells": coverage["cells"],
        "operations_never_hit": [label for label in never if label.endswith("/-")],
        "crashes_never_armed": [label for label in never if not label.endswith("/-")],
    }


def _known_fault_points(implementations: list[str]) -> list[str]:
    """Crash points the implementations are known to have: ours lists them in
    ``impl.FAULT_POINTS``; another implementation's are only known by being passed."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL

    if DEFAULT_IMPL not in implementations:
        return []
    from rmqsim.impl import FAULT_POINTS

    return list(FAULT_POINTS)


def summarize(sc: SparkContext, sweep_dir: Path) -> dict[str, Any]:
    """The JSON summary of the sweep directory (what the HTML page shows), by the Spark
    tasks of ``sc`` (``spark.sparkContext`` of a session; no SQL runs); a data file
    that cannot be read is a ``SweepDirError`` naming it. The caller checks ``sweep_dir``
    first with ``check_sweep_dir`` (``rmqsim report`` does, before Spark starts), so its
    manifest, listing and footers are read once."""
    manifest = read_manifest(sweep_dir) or {}
    version = manifest.get("schema_version", SCHEMA_VERSION)
    found = collect_partials(sc, sweep_dir, version)
    return shape_summary(found, manifest, sweep_dir)


def file_tasks(sweep_dir: Path, version: int) -> list[FileTask]:
    """A task's worth of work per data file of ``sweep_dir`` (the files Spark would read,
    in a stable order), each read by path where the task runs."""
    runs = sweep_dir / RUNS_DIR
    return [FileTask(str(path), file_profile(path, runs), version) for path in data_files(runs)]


def collect_partials(
    sc: SparkContext, sweep_dir: Path, version: int
) -> dict[str, list[dict[str, Any]]]:
    """Every aggregation's rows, by name (``merged_partials``, as rows)."""
    return as_rows(merged_partials(sc, sweep_dir, version))


def merged_partials(sc: SparkContext, sweep_dir: Path, version: int) -> Partials:
    """Every aggregation, merged: one Spark job whose tasks aggregate their data files
    with pyarrow (``reports.partials``), merged here; then, only when some twin's first
    run may lie in another file than the twin, a second job asking those files."""
    tasks = file_tasks(sweep_dir, version)
    merged = _run_tasks(sc, tasks, task_partials)
    lookups = twin_lookups(tasks, merged)
    if lookups:
        merged.add(_run_tasks(sc, lookups, lookup_pairs))
    return merged


def _run_tasks(sc: SparkContext, items: list[Any], function: Any) -> Partials:
    """``function`` over ``items`` in Spark tasks (a task per item, up to
    ``TASKS_PER_CORE`` per core), their partials merged; ``SweepDirError`` naming the
    first file a task could not read."""
    slices = max(1, min(len(items), TASKS_PER_CORE * sc.defaultParallelism))
    merged = merge(sc.parallelize(items, slices).mapPartitions(function).collect())
    if merged.error is not None:
        raise SweepDirError(merged.error)
    return merged


def shape_summary(
    found: dict[str, list[dict[str, Any]]], manifest: dict[str, Any], sweep_dir: Path
) -> dict[str, Any]:
    """The JSON summary from the aggregations' rows (``collect_partials``) and the
    directory's manifest."""
    version = manifest.get("schema_version", SCHEMA_VERSION)
    every_group = found["groups"]
    groups = [g for g in every_group if g["determinism_repeat"] == 0]
    implementations = sorted({g["implementation"] for g in groups})
    totals = _tally(groups, None)
    total = totals[0] if totals else {"runs": 0, "divergences": 0, "errors": 0, "failed": 0}
    op_kinds = _op_coverage(groups, found["op_sums"])
    points = _fault_points(found["fault_points"])
    hit = {p["point"] for p in points}
    return {
        "schema_version": manifest.get("schema_version"),
        "sweep_dir": str(sweep_dir),
        "sweeps": len(manifest.get("sweeps", [])),
        "implementations": implementations,
        "code_versions": sorted({g["code_version"] for g in groups}),
        "seeds": [
            min((g["min_seed"] for g in groups), default=None),
            max((g["max_seed"] for g in groups), default=None),
        ],
        "totals": {
            key: total.get(key, 0)
            for key in ("runs", "divergences", "errors", "failed", "steps", "failure_rate")
        }
        | {"repeats": sum(g["runs"] for g in every_group if g["determinism_repeat"] == 1)},
        "layers": _layers(groups),
        "by_profile": _by_profile(groups),
        "by_config": {
            **{knob: _tally(groups, knob) for knob in CONFIG_COLUMNS},
            "kinds_off": _kinds_off(found["kinds_off"]),
        },
        "failures": _failures(found["failures"], sweep_dir),
        "consumer_profiles": _consumer_profiles(found["consumers"]),
        "coverage": {
            "op_kinds": op_kinds,
            "op_kinds_never": [k["label"] for k in op_kinds if not k["count"]],
            "fault_points": points,
            "fault_points_never": [p for p in _known_fault_points(implementations) if p not in hit],
            "cells": _coverage_cells(found, groups, version),
        },
        "determinism": _determinism(
            found["determinism"], sum(r["pairs"] for r in found["pairs_checked"])
        ),
        "wall_time_s": _wall_percentiles(found["wall"]),
    }


def write_json(summary: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
