"""Stream profiles in Spark sweeps: a sweep of ``stream`` and ``stream-crashy`` on a real
``local[2]`` Spark writes real rows (layer, operation counts, the profile's knobs), with
the digests ``rmqsim run`` gives those seeds, and the report renders them.

Budget: under a minute, most of it Spark's own start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.reports.schema import ALL_OP_KINDS, COLUMNS, LAYER_OP_KINDS, RUNS_DIR
from rmqsim.reports.tasks import TaskSpec, WorkItem, error_row, run_chunk

PROFILES = ("stream", "stream-crashy")
SEEDS = range(4)


def rmqsim(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def stream_sweep(shared_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """``rmqsim sweep --profiles stream,stream-crashy --seeds 0:4`` on ``local[2]``: the
    test process's shared session (tests/spark_fixtures.py), which the command reuses,
    started with the JVM options ``rmqsim sweep`` would start its own session with."""
    out = tmp_path_factory.mktemp("stream")
    result = rmqsim(
        "sweep", "--profiles", ",".join(PROFILES), "--seeds", "0:4",
        "--determinism-sample", "2", "--out", out,
    )  # fmt: skip
    return out, result


def _first_rows(out: Path) -> list[dict[str, Any]]:
    table = ds.dataset(out / RUNS_DIR, format="parquet", partitioning="hive").to_table()
    rows = [r for r in table.to_pylist() if r["determinism_repeat"] == 0]
    return sorted(rows, key=lambda r: (PROFILES.index(r["profile"]), r["seed"]))


def _run_digests(profile: str, seed: int, tmp_path: Path) -> tuple[str, str]:
    """The trace digest and final state digest of ``rmqsim run`` of one seed."""
    trace = tmp_path / f"{profile}-{seed}.jsonl"
    result = rmqsim("run", "--profile", profile, "--seed", seed, "--trace", trace)
    assert result.exit_code == 0, result.output
    data = trace.read_bytes()
    end = json.loads(data.decode().splitlines()[-1])
    return "sha256:" + hashlib.sha256(data).hexdigest(), end["state_digest"]


def test_a_stream_sweep_gives_ok_rows_with_the_digests_of_rmqsim_run(
    stream_sweep: tuple[Path, Any], tmp_path: Path
) -> None:
    out, result = stream_sweep
    assert result.exit_code == 0, result.output
    assert "0 divergence(s), 0 error(s), 0 determinism mismatch(es)" in result.output
    rows = _first_rows(out)
    assert [(r["profile"], r["seed"]) for r in rows] == [(p, s) for p in PROFILES for s in SEEDS]
    stream_kinds = set(LAYER_OP_KINDS["stream"])
    for row in rows:
        assert row["status"] == "ok" and row["layer"] == "stream", row["detail"]
        assert (row["trace_digest"], row["state_digest"]) == _run_digests(
            row["profile"], row["seed"], tmp_path
        )
        # Every step is counted once, in the stream vocabulary.
        counts = row["op_counts"]
        assert sum(counts.values()) == row["steps"] > 0
        assert all(counts[k] == 0 for k in ALL_OP_KINDS if k not in stream_kinds)
        assert counts["stream_produce"] and counts["stream_consume"]
        assert json.loads(row["consumer_config"])["name"] == row["profile"]
        assert row["page_size_bytes"] is not None and row["kinds_off"] == []
    crashy = [r for r in rows if r["profile"] == "stream-crashy"]
    assert sum(r["op_counts"]["stream_crash_queue"] for r in crashy) == sum(
        r["reopens"] for r in crashy
    ) > 0  # fmt: skip


def test_the_report_renders_a_stream_sweep(stream_sweep: tuple[Path, Any]) -> None:
    out, _ = stream_sweep
    report = rmqsim("report", out)
    assert report.exit_code == 0, report.output
    summary = json.loads((out / "report.json").read_text())
    assert summary["layers"] == ["stream"]
    assert [(r["value"], r["layer"], r["runs"], r["failed"]) for r in summary["by_profile"]] == [
        (profile, "stream", len(SEEDS), 0) for profile in PROFILES
    ]
    coverage = {e["label"]: e["count"] for e in summary["coverage"]["op_kinds"]}
    produced = sum(r["op_counts"]["stream_produce"] for r in _first_rows(out))
    assert coverage["stream:stream_produce"] == produced > 0
    assert "stream-crashy" in (out / "report.html").read_text()


def test_an_error_row_of_a_stream_profile_names_its_layer_and_config(tmp_path: Path) -> None:
    spec = TaskSpec(impl="stream", out_dir=str(tmp_path), sweep_id="t")
    values = error_row(WorkItem("stream-crashy", 1), spec, OSError("x"), 0.1)
    row = dict(zip(COLUMNS, values, strict=True))
    assert row["layer"] == "stream" and row["status"] == "error"
    assert row["page_size_bytes"] == 256
    assert json.loads(row["consumer_config"])["name"] == "stream-crashy"
    # A task on a stream profile runs the stream layer (no "queue profile is needed").
    [(_, result, _row)] = run_chunk([WorkItem("stream", 2)], spec)
    assert result.ok and result.spec.layer == "stream"


def test_the_shared_session_gives_its_workers_a_scratch_directory_and_this_process_none(
    shared_spark: Any,
) -> None:
    """The test process's shared Spark session (tests/spark_fixtures.py) stays up for the
    tests after this module: the scratch directory its start gives its local workers
    (``RMQSIM_WORKDIR``) is not this process's (it would be every later test's on this
    worker), and the repository is on its workers' PYTHONPATH (``tests.spark_impls``)."""
    from rmqsim.conformance.running.scratch import WORKDIR_ENV

    def environment(_: Any) -> list[tuple[str | None, str]]:
        return [(os.environ.get(WORKDIR_ENV), os.environ.get("PYTHONPATH", ""))]

    [(scratch, path)] = (
        shared_spark.sparkContext.parallelize([0], 1).mapPartitions(environment).collect()
    )
    assert scratch is not None and Path(scratch).name.startswith("rmqsim-spark-")
    assert os.environ.get(WORKDIR_ENV) != scratch
    assert str(Path(__file__).resolve().parent.parent) in path.split(os.pathsep)
