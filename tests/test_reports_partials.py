"""The report's aggregations as Spark tasks running pyarrow over one data file each
(``reports.partials``), against the same aggregations as the Spark SQL queries the report
ran before (kept here, written against the rows as Spark reads them, as the reference):
the same JSON summary on a directory with twins whose first runs lie in other files, a
determinism mismatch across files, a duplicated first run, failures, crash points,
coverage cells, switched-off kinds and consumer rows."""

from __future__ import annotations

import json
import math
import os
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqsim.reports import synthetic
from rmqsim.reports.aggregate import (
    check_sweep_dir,
    merged_partials,
    shape_summary,
    summarize,
)
from rmqsim.reports.schema import (
    ARROW_SCHEMA,
    CONFIG_COLUMNS,
    LAYER_CONSUMER,
    RUNS_DIR,
    SCHEMA_VERSION,
    STATUS_OK,
    spark_schema,
    trace_hash,
)
from rmqsim.reports.sweep import read_manifest
from rmqsim.reports.synthetic import write_synthetic
from rmqsim.reports.twins import pairs

FILE_SCHEMA = pa.schema([f for f in ARROW_SCHEMA if f.name != "profile"])
CONSUMER_CONFIG = {"clients": [{"group": "g1", "mode": "push", "workers": 2}], "seed_span": 3}


@pytest.fixture(scope="module")
def spark(shared_spark: Any) -> Any:
    """The test process's local Spark session, shared with the other report modules
    (tests/spark_fixtures.py): started with the JVM options ``rmqsim report`` starts its
    sessions with; the reference queries' results do not depend on them."""
    return shared_spark


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=FILE_SCHEMA), path)


#: Seeds of the first runs of the smoke profile's first file given a re-run in another file
#: (the third of them with another digest, the fourth also run first, and re-run, in a
#: third file).
ADDED_TWINS = slice(10, 16)


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Synthetic rows in files of 300 (twins next to their first runs), plus files added
    by hand: re-runs whose first runs lie in another file (one with another digest), a
    first run and a re-run duplicated in a third file, and consumer rows (one an error without a
    signature)."""
    out = tmp_path_factory.mktemp("mixed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(synthetic, "ROWS_PER_FILE", 300)
        write_synthetic(out, rows=1500)
    source = out / RUNS_DIR / "profile=smoke" / "part-00000.parquet"
    firsts = [r for r in pq.read_table(source).to_pylist() if r["determinism_repeat"] == 0]
    twins = [dict(r, determinism_repeat=1, wall_s=0.25) for r in firsts[ADDED_TWINS]]
    other = "sha256:" + "f" * 64  # not deterministic, across files
    twins[2].update(trace_digest=other, trace_hash=trace_hash(other))
    _write(source.with_name("repeats.parquet"), twins)
    duplicate = dict(twins[3], determinism_repeat=0, kinds_off=["seek", "get_latest"])
    # With a re-run of its own: the second pass asks this file for the other file's re-run
    # of the same key, and its first run must still count once.
    _write(source.with_name("duplicate.parquet"), [duplicate, dict(twins[3], wall_s=0.5)])
    consumer = [
        dict(
            r,
            layer=LAYER_CONSUMER,
            consumer_config=json.dumps(CONSUMER_CONFIG, sort_keys=True),
            kinds_off=[],
            coverage_reached=[],
            coverage_crashed=[],
            page_size_bytes=None if i % 3 == 0 else r["page_size_bytes"],
        )
        for i, r in enumerate(firsts[20:29])
    ]
    consumer[4].update(status="error", signature=None, anomaly=None, detail="boom")
    _write(out / RUNS_DIR / "profile=consumer" / "part-c.parquet", consumer)
    return out


# The report's aggregations as Spark SQL queries over the rows: the reference.


def _reference_queries(frame: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    first = frame.where(F.col("determinism_repeat") == 0)
    sums = [F.sum(F.col(f"op_counts.{kind}")).alias(f"op_{kind}") for kind in _op_kinds()]
    keys = ["determinism_repeat", "profile", "layer", "status", "implementation", "code_version"]
    twin_keys = ["sweep_id", "profile", "seed", "implementation"]
    twins = frame.where(F.col("determinism_repeat") == 1).select(
        *twin_keys, F.col("trace_digest").alias("repeat_digest")
    )
    failed = F.sum((F.col("status") != STATUS_OK).cast("long")).alias("failed")
    smallest = F.struct(
        F.coalesce("repro_steps", "steps").alias("repro_steps"),
        F.coalesce("divergence_step", F.lit(0)).alias("divergence_step"),
        *("seed", "profile", "trace_path", "trace_shrunk", "repro", "detail", "implementation"),
    )
    bucket = F.floor(F.log2(F.greatest("wall_s", F.lit(1e-6))) * 16)
    return {
        "groups": frame.groupBy(*keys, *CONFIG_COLUMNS).agg(
            F.count(F.lit(1)).alias("runs"),
            F.sum("steps").alias("steps"),
            F.sum("wall_s").alias("wall_s"),
            F.min("seed").alias("min_seed"),
            F.max("seed").alias("max_seed"),
        ),
        "op_sums": first.groupBy("layer").agg(*sums),
        "kinds_off": first.select(F.explode("kinds_off").alias("kind"), "status")
        .groupBy("kind")
        .agg(F.count(F.lit(1)).alias("runs"), failed),
        "failures": first.where(F.col("status") != STATUS_OK)
        .groupBy("signature")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("anomaly").alias("anomaly"),
            F.min(F.struct("seed", "profile")).alias("first"),
            F.min(smallest).alias("smallest"),
            F.sort_array(F.collect_set("profile")).alias("profiles"),
        ),
        "consumers": first.where(F.col("layer") == LAYER_CONSUMER)
        .groupBy("profile", "consumer_config")
        .agg(F.count(F.lit(1)).alias("runs"), failed),
        "fault_points": _exploded(first, "fault_points", "key", "hits"),
        "determinism": first.join(F.broadcast(twins), twin_keys).select(
            "profile", "seed", "implementation", "trace_digest", "repeat_digest"
        ),
        "wall": first.groupBy("profile", bucket.alias("bucket")).agg(
            F.count(F.lit(1)).alias("runs"), F.max("wall_s").alias("max")
        ),
        "cells_reached": _exploded(first, "coverage_reached", "label", "count"),
        "cells_crashed": _exploded(first, "coverage_crashed", "label", "count"),
    }


def _op_kinds() -> list[str]:
    return [f.name for f in ARROW_SCHEMA.field("op_counts").type]


def _exploded(first: Any, column: str, key: str, value: str) -> Any:
    from pyspark.sql import functions as F

    entries = first.select(F.explode(column).alias(key, value))
    return entries.groupBy(key).agg(F.sum(value).alias(value))


def reference_found(spark: Any, sweep_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every aggregation's rows by Spark SQL, as JSON rows (nulls kept)."""
    from pyspark.sql import functions as F

    frame = spark.read.schema(spark_schema(SCHEMA_VERSION)).parquet(str(sweep_dir / RUNS_DIR))
    queries = _reference_queries(frame)
    tagged = [
        query.select(
            F.lit(name).alias("query"),
            F.to_json(F.struct(*query.columns), {"ignoreNullFields": "false"}).alias("row"),
        )
        for name, query in queries.items()
    ]
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in queries}
    for row in reduce(lambda a, b: a.unionAll(b), tagged).collect():
        found[row["query"]].append(json.loads(row["row"]))
    # The report keeps the pairs' count and the pairs whose digests differ.
    pairs = found["determinism"]
    found["pairs_checked"] = [{"pairs": len(pairs)}]
    found["determinism"] = [p for p in pairs if p["trace_digest"] != p["repeat_digest"]]
    return found


def assert_same(new: Any, old: Any, where: str = "summary") -> None:
    """Equal, floats within the report's rounding (sums of floats in another order)."""
    if isinstance(new, float) or isinstance(old, float):
        assert math.isclose(new, old, rel_tol=1e-9, abs_tol=1.5e-3), (where, new, old)
    elif isinstance(new, dict) and isinstance(old, dict):
        assert sorted(new) == sorted(old), (where, sorted(new), sorted(old))
        for key in new:
            assert_same(new[key], old[key], f"{where}.{key}")
    elif isinstance(new, list) and isinstance(old, list):
        assert len(new) == len(old), (where, new, old)
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert new == old, (where, new, old)


def test_the_summary_is_the_spark_sql_reports_on_a_directory_of_many_files(
    spark: Any, mixed_dir: Path
) -> None:
    check_sweep_dir(mixed_dir)
    manifest = read_manifest(mixed_dir) or {}
    summary = summarize(spark.sparkContext, mixed_dir)
    reference = shape_summary(reference_found(spark, mixed_dir), manifest, mixed_dir)
    assert_same(summary, reference)
    # The directory holds what the comparison is about.
    determinism = summary["determinism"]
    assert determinism["pairs_checked"] > 7  # the synthetic twins, the 6 + 1 added
    assert [m["seed"] for m in determinism["mismatches"]] == [_added_seeds(mixed_dir)[2]]
    assert summary["failures"] and summary["coverage"]["fault_points"]
    assert summary["coverage"]["cells"]["cells"]
    assert summary["by_config"]["kinds_off"]
    [profile] = summary["consumer_profiles"]
    assert (profile["runs"], profile["failed"], profile["config"]) == (9, 1, CONSUMER_CONFIG)
    assert None in [f["signature"] for f in summary["failures"]]


def test_a_twin_whose_first_run_is_in_another_file_is_paired_by_a_second_pass(
    spark: Any, mixed_dir: Path
) -> None:
    """Each added re-run is paired with its first run in another file (the fourth's key
    has two first runs and two re-runs, in three files: four pairs, its third file's first
    run counted once though both passes find it): pairs a file-by-file pass alone cannot
    see."""
    seeds = _added_seeds(mixed_dir)
    merged = merged_partials(spark.sparkContext, mixed_dir, SCHEMA_VERSION)
    found = pairs(merged.twins, merged.firsts).to_pylist()
    pairs_found = [p for p in found if p["seed"] in seeds and p["profile"] == "smoke"]
    by_seed = {seed: [p for p in pairs_found if p["seed"] == seed] for seed in seeds}
    assert [len(by_seed[seed]) for seed in seeds] == [1, 1, 1, 4, 1, 1]
    assert [p["trace_hash"] == p["repeat_hash"] for p in by_seed[seeds[2]]] == [False]
    assert all(p["trace_hash"] == p["repeat_hash"] for p in by_seed[seeds[3]])


def _added_seeds(sweep_dir: Path) -> list[int]:
    repeats = sweep_dir / RUNS_DIR / "profile=smoke" / "repeats.parquet"
    return pq.read_table(repeats, columns=["seed"])["seed"].to_pylist()


def test_an_unreadable_file_is_named_by_the_task_that_reads_it(
    spark: Any, mixed_dir: Path, tmp_path: Path
) -> None:
    """A file whose pages are damaged (its footer intact) fails its task's pyarrow read:
    the report names it in one line (``SweepDirError``), no worker traceback."""
    import shutil

    from rmqsim.reports.aggregate import SweepDirError

    copy = tmp_path / "damaged"
    shutil.copytree(mixed_dir, copy)
    victim = copy / RUNS_DIR / "profile=consumer" / "part-c.parquet"
    data = bytearray(victim.read_bytes())
    pages_end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[4:pages_end] = b"\xab" * (pages_end - 4)
    victim.write_bytes(bytes(data))
    check_sweep_dir(copy)  # the footers still read
    with pytest.raises(SweepDirError) as caught:
        summarize(spark.sparkContext, copy)
    [line] = str(caught.value).splitlines()
    assert line.startswith(f"{victim}: not a readable Parquet file (pyarrow: "), line
    assert os.fspath(victim) in line
