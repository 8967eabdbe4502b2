"""Sweeps and reports on a real local Spark, and the report page in a real headless
Chromium. One SparkSession serves the whole module, and the other report modules
(tests/spark_fixtures.py; the commands reuse the active one).

Budget: about two minutes here, most of it Spark's own job overhead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.reports.schema import ARROW_SCHEMA, MANIFEST, RUNS_DIR, trace_hash
from rmqsim.scenarios.queue.ops import OP_KINDS

ROOT = Path(__file__).resolve().parent.parent
XSS = "<script>alert(1)</script>"
WRONG_IMPL = "tests.spark_impls:lost_write"
#: A push consumer that commits past messages other workers still hold.
CONSUMER_MUTANT = "rmqsim.conformance.mutants.consumer:commit_highest_acked"


@pytest.fixture(scope="module")
def spark(shared_spark: Any) -> Iterator[Any]:
    """The test process's one local Spark session (two cores: tasks really run in
    parallel), shared with the other report modules (tests/spark_fixtures.py), started
    with the JVM options ``rmqsim sweep`` and ``rmqsim report`` start their own sessions
    with (the commands run here reuse this one): the product's configuration.

    Its Python workers have the repository root first on PYTHONPATH (from the session's
    start), so they import the deliberately wrong implementations of ``tests.spark_impls``
    by name; so does this process, for the module's tests.
    """
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    yield shared_spark
    if path is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = path


def rmqsim(*args: str) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def rows(sweep_dir: Path) -> pa.Table:
    """Every row of a sweep directory, read by pyarrow alone (the independent recount)."""
    dataset = ds.dataset(sweep_dir / RUNS_DIR, format="parquet", partitioning="hive")
    return dataset.to_table()


def first_runs(table: pa.Table) -> pa.Table:
    return table.filter(pc.equal(table["determinism_repeat"], 0))


@pytest.fixture(scope="module")
def good_sweep(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("good")
    result = rmqsim(
        "sweep", "--seeds", "0:60", "--profiles", "smoke,swarm", "--steps", "20",
        "--determinism-sample", "4", "--out", out,
    )  # fmt: skip
    return out, result


@pytest.fixture(scope="module")
def good_report(good_sweep: tuple[Path, Any]) -> tuple[dict[str, Any], str]:
    """``rmqsim report`` of the good sweep, run once (exit 0): its JSON summary and its
    page, which several tests read (none of them writes into the sweep directory)."""
    out, _ = good_sweep
    result = rmqsim("report", out)
    assert result.exit_code == 0, result.output
    return json.loads((out / "report.json").read_text()), (out / "report.html").read_text()


@pytest.fixture(scope="module")
def wrong_sweep(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A sweep of a queue that loses writes, plus two injected rows: a failure whose
    topic is named like a script, and a determinism twin with another digest."""
    out = tmp_path_factory.mktemp("wrong")
    result = rmqsim(
        "sweep", "--seeds", "0:30", "--profiles", "smoke", "--steps", "60", "--impl",
        WRONG_IMPL, "--shrink-ops-budget", "20000", "--determinism-sample", "0", "--out", out,
    )  # fmt: skip
    table = rows(out)
    real = table.slice(0, 1).to_pylist()[0]
    hostile = dict(
        real,
        seed=10_000,
        signature=f"payload-mismatch @ {XSS}",
        anomaly="payload-mismatch",
        detail=f"messages   {XSS}: model='4' sut='-'",
    )
    other = "sha256:" + "0" * 64  # another run: its digest and the hash taken from it
    twin = dict(real, determinism_repeat=1, trace_digest=other, trace_hash=trace_hash(other))
    for row in (hostile, twin):
        row["fault_points"] = list(row["fault_points"])
        del row["profile"]
    schema = pa.schema([f for f in ARROW_SCHEMA if f.name != "profile"])
    injected = pa.Table.from_pylist([hostile, twin], schema=schema)
    pq.write_table(injected, out / RUNS_DIR / "profile=smoke" / "injected.parquet")
    return out, result


@pytest.fixture(scope="module")
def wrong_report(wrong_sweep: tuple[Path, Any]) -> tuple[Any, Path]:
    """``rmqsim report`` of the wrong sweep, run once, its page written where ``--html``
    says (the JSON summary in the sweep directory): the command's result and the page."""
    out, _ = wrong_sweep
    page = out.parent / f"{out.name}-page" / "page.html"
    page.parent.mkdir()
    return rmqsim("report", out, "--html", page), page


@pytest.fixture(scope="module")
def consumer_sweep(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A consumer mutant over a consumer profile and a queue profile (which it leaves to
    our consumer-less queue): the consumer runs diverge, the queue runs conform; every
    pair is run twice."""
    out = tmp_path_factory.mktemp("consumer")
    result = rmqsim(
        "sweep", "--seeds", "0:2", "--profiles", "consumer,smoke", "--steps", "40",
        "--impl", CONSUMER_MUTANT, "--determinism-sample", "4", "--out", out,
    )  # fmt: skip
    return out, result


def test_sweep_writes_one_row_per_run_and_exits_0(good_sweep: tuple[Path, Any]) -> None:
    out, result = good_sweep
    assert result.exit_code == 0, result.output
    assert "120 runs (2 profiles x 60 seeds) + 4 determinism re-runs" in result.output
    table = rows(out)
    assert table.num_rows == 124
    assert sorted(p.name for p in (out / RUNS_DIR).glob("profile=*")) == [
        "profile=smoke",
        "profile=swarm",
    ]
    firsts = first_runs(table)
    pairs = Counter(zip(firsts["profile"].to_pylist(), firsts["seed"].to_pylist(), strict=True))
    assert pairs == Counter({(p, s): 1 for p in ("smoke", "swarm") for s in range(60)})
    assert set(table["status"].to_pylist()) == {"ok"}
    assert set(table["code_version"].to_pylist()) != {""}
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["sweeps"][0]["seeds"] == [0, 60]


def test_the_manifest_lists_the_files_and_rows_each_sweep_wrote(
    good_sweep: tuple[Path, Any], tmp_path: Path
) -> None:
    """What ``rmqsim report`` checks a sweep directory against: an appended sweep lists
    only its own files; a file of the first gone, the report names what is missing."""
    out, _ = good_sweep
    copy = tmp_path / "appended"
    shutil.copytree(out, copy)
    appended = rmqsim(
        "sweep", "--seeds", "60:62", "--profiles", "smoke", "--steps", "20",
        "--determinism-sample", "0", "--append", "--out", copy,
    )  # fmt: skip
    assert appended.exit_code == 0, appended.output
    first, second = json.loads((copy / MANIFEST).read_text())["sweeps"]
    on_disk = {
        path.relative_to(copy).as_posix(): pq.read_metadata(path).num_rows
        for path in (copy / RUNS_DIR).rglob("*.parquet")
    }
    assert (first["rows"], second["rows"]) == (124, 2)
    assert first["files"].keys().isdisjoint(second["files"])
    assert {**first["files"], **second["files"]} == on_disk
    victim, lost = sorted(first["files"].items())[0]
    (copy / victim).unlink()
    result = rmqsim("report", copy)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"rmqsim: error: {copy}: 1 of the {len(on_disk)} data files sweep.json lists are "
        f"missing ({lost} of its 126 rows): {victim}"
    ]


def test_report_totals_match_an_independent_pyarrow_recount(
    good_sweep: tuple[Path, Any], good_report: tuple[dict[str, Any], str]
) -> None:
    out, _ = good_sweep
    summary, page = good_report
    table = rows(out)
    firsts = first_runs(table)
    assert summary["totals"]["runs"] == firsts.num_rows == 120
    assert summary["totals"]["repeats"] == table.num_rows - firsts.num_rows == 4
    assert summary["totals"]["steps"] == pc.sum(firsts["steps"]).as_py()
    by_profile = {r["value"]: r for r in summary["by_profile"]}
    for profile in ("smoke", "swarm"):
        mine = firsts.filter(pc.equal(firsts["profile"], profile))
        assert by_profile[profile]["runs"] == mine.num_rows
        assert by_profile[profile]["failed"] == 0
    # Config dimensions: swarm draws a page size per seed.
    pages = Counter(firsts["page_size_bytes"].to_pylist())
    assert {r["value"]: r["runs"] for r in summary["by_config"]["page_size_bytes"]} == pages
    # Coverage: operation totals per kind and the crash points passed.
    ops = pc.struct_field
    for entry in summary["coverage"]["op_kinds"]:
        column = ops(firsts["op_counts"], entry["kind"])
        assert entry["count"] == pc.sum(column).as_py()
    assert [e["kind"] for e in summary["coverage"]["op_kinds"]] == list(OP_KINDS)
    keys = [key for entries in firsts["fault_points"].to_pylist() for key, _hits in entries]
    points = Counter(k.split(":", 1)[1] for k in keys)
    assert {p["point"] for p in summary["coverage"]["fault_points"]} == set(points)
    from rmqsim.impl import FAULT_POINTS

    assert summary["coverage"]["fault_points_never"] == [p for p in FAULT_POINTS if p not in points]
    # Determinism: the four twins match theirs.
    assert summary["determinism"] == {"pairs_checked": 4, "mismatches": []}
    assert set(summary["wall_time_s"]["by_profile"]) == {"smoke", "swarm"}
    assert "Total runs: <strong>120</strong>" in page


def test_the_report_shows_the_coverage_map_of_the_sweeps_queue_runs(
    good_report: tuple[dict[str, Any], str],
) -> None:
    """Each row carries its run's coverage cells; the report sums them into the gate's
    map (the same map as the runs' own, recomputed here one by one) and names the
    reachable cells never hit."""
    from rmqsim.conformance.queue.coverage import CoverageMap, coverage_of_result
    from rmqsim.conformance.running.run import run_seed

    summary, page = good_report
    cells = summary["coverage"]["cells"]
    expected = CoverageMap()
    for profile in ("smoke", "swarm"):
        for seed in range(60):
            run = run_seed(profile, seed, steps=20, log_faults=True)
            mapped = coverage_of_result(run)
            assert mapped is not None
            expected.merge(mapped)
    truth = expected.to_json()
    assert cells["runs"] == 120
    assert cells["cells"] == truth["cells"]
    assert (cells["operation_cells"], cells["crash_cells"]) == (
        truth["operation_cells"],
        truth["crash_cells"],
    )
    never = cells["operations_never_hit"] + cells["crashes_never_armed"]
    assert sorted(never) == sorted(truth["never_hit"])
    # 20 steps never grow a backlog of a thousand messages: that cell is named.
    assert "consume/large-backlog/-" in cells["operations_never_hit"]
    assert cells["crash_cells"]["hit"] >= 1  # swarm arms crashes
    assert "<h3>Coverage map</h3>" in page
    hit, reachable = cells["operation_cells"]["hit"], cells["operation_cells"]["reachable"]
    assert f"{hit} of {reachable} operation cells hit" in page
    never_line = page.split("Operation cells never hit:", 1)[1].split("</p>", 1)[0]
    assert "consume/large-backlog/-" in never_line
    assert '<td class="mono">produce/any/-</td>' in page


def test_a_schema_3_directory_is_reported_without_a_coverage_map(
    good_sweep: tuple[Path, Any], tmp_path: Path
) -> None:
    """Rows written before the coverage columns (schema version 3) still make a report:
    the same totals, and a page that says no map was recorded."""
    out, _ = good_sweep
    old = tmp_path / "v3"
    shutil.copytree(out, old)
    manifest = json.loads((old / MANIFEST).read_text())
    for sweep in manifest["sweeps"]:
        for name in sweep["files"]:
            path = old / name
            table = pq.read_table(path).drop_columns(
                ["coverage_reached", "coverage_crashed", "trace_hash"]
            )
            pq.write_table(table, path)
            path.with_name(f".{path.name}.crc").unlink(missing_ok=True)  # Spark's checksum
    (old / MANIFEST).write_text(json.dumps(dict(manifest, schema_version=3)))
    result = rmqsim("report", old)
    assert result.exit_code == 0, result.output
    summary = json.loads((old / "report.json").read_text())
    assert summary["schema_version"] == 3 and summary["coverage"]["cells"] is None
    assert summary["totals"]["runs"] == 120
    page = (old / "report.html").read_text()
    assert "rows of schema version 3 recorded none" in page


def test_the_report_runs_its_aggregations_as_one_spark_job(
    spark: Any, good_sweep: tuple[Path, Any]
) -> None:
    """Every aggregation comes back from one job whose tasks aggregate their data files
    (``reports.partials``), plus one small job for the twins whose first runs lie in
    other files (a sweep puts a re-run in another task's chunk than its first run)."""
    from rmqsim.reports.aggregate import summarize

    out, _ = good_sweep
    sc = spark.sparkContext
    group = "rmqsim-test-report-jobs"
    sc.setJobGroup(group, "the report's jobs")
    try:
        summary = summarize(sc, out.resolve())
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert summary["totals"]["runs"] == 120
    assert len(sc.statusTracker().getJobIdsForGroup(group)) <= 2


def test_wrong_implementation_is_grouped_with_a_shrunk_reproducer(
    wrong_sweep: tuple[Path, Any], wrong_report: tuple[Any, Path]
) -> None:
    out, result = wrong_sweep
    assert result.exit_code == 1, result.output
    assert "30 divergence(s)" in result.output
    report, _ = wrong_report
    assert report.exit_code == 1, report.output
    summary = json.loads((out / "report.json").read_text())
    assert summary["totals"]["runs"] == 31  # 30 runs + the injected hostile row
    groups = {f["signature"]: f for f in summary["failures"]}
    lost = groups["lost-write @ produce"]
    assert lost["count"] == 30 and lost["profiles"] == ["smoke"]
    assert lost["first_seen"] == {"seed": 0, "profile": "smoke"}
    smallest = lost["smallest"]
    assert smallest["trace_shrunk"] and smallest["repro_steps"] <= 5
    replay = rmqsim("replay", smallest["trace_path"], "--impl", WRONG_IMPL)
    assert replay.exit_code == 1 and "DIVERGENCE lost-write" in replay.output
    assert groups[f"payload-mismatch @ {XSS}"]["count"] == 1
    # The injected twin with another digest is listed as a determinism mismatch.
    [mismatch] = summary["determinism"]["mismatches"]
    assert mismatch["profile"] == "smoke" and len(set(mismatch["digests"])) == 2


def test_a_schema_4_directory_is_reported_as_its_rows_of_schema_5_are(
    wrong_sweep: tuple[Path, Any], wrong_report: tuple[Any, Path], tmp_path: Path
) -> None:
    """Rows written before ``trace_hash`` (schema version 4): their twins are paired by
    the hash taken from their digests, so the report is the same, the injected twin with
    another digest still a mismatch with both digests."""
    out, _ = wrong_sweep
    assert wrong_report[0].exit_code == 1
    current = json.loads((out / "report.json").read_text())
    old = tmp_path / "v4"
    shutil.copytree(out, old)
    manifest = json.loads((old / MANIFEST).read_text())
    for path in sorted((old / RUNS_DIR).rglob("*.parquet")):  # the sweep's and the injected
        pq.write_table(pq.read_table(path).drop_columns(["trace_hash"]), path)
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)  # Spark's checksum
    (old / MANIFEST).write_text(json.dumps(dict(manifest, schema_version=4)))
    assert rmqsim("report", old).exit_code == 1
    summary = json.loads((old / "report.json").read_text())
    assert summary["schema_version"] == 4
    assert summary["determinism"] == current["determinism"]
    [mismatch] = summary["determinism"]["mismatches"]
    assert mismatch["digests"][1] == "sha256:" + "0" * 64
    for key in ("totals", "coverage", "by_profile", "wall_time_s"):  # (failures: trace paths)
        assert summary[key] == current[key], key


def test_a_consumer_mutant_sweep_reports_its_divergences(
    consumer_sweep: tuple[Path, Any],
) -> None:
    out, result = consumer_sweep
    assert result.exit_code == 1, result.output
    assert "4 runs (2 profiles x 2 seeds) + 4 determinism re-runs" in result.output
    assert "2 divergence(s), 0 error(s), 0 determinism mismatch(es)" in result.output
    firsts = first_runs(rows(out)).to_pylist()
    by_profile = {p: [r for r in firsts if r["profile"] == p] for p in ("consumer", "smoke")}
    for row in by_profile["consumer"]:
        assert row["layer"] == "consumer" and row["status"] == "divergence"
        assert row["signature"] == "offset-passes-unacked @ complete"
        assert (out / row["trace_path"]).is_file()
        assert sum(row["op_counts"].values()) == row["steps"] and row["op_counts"]["deliver"]
        assert json.loads(row["consumer_config"])["name"] == "consumer"
    for row in by_profile["smoke"]:
        assert row["layer"] == "queue" and row["status"] == "ok"
        assert row["consumer_config"] is None
    report = rmqsim("report", out)
    assert report.exit_code == 1, report.output
    summary = json.loads((out / "report.json").read_text())
    assert summary["layers"] == ["queue", "consumer"]
    assert [(r["value"], r["layer"], r["runs"], r["failed"]) for r in summary["by_profile"]] == [
        ("consumer", "consumer", 2, 2),
        ("smoke", "queue", 2, 0),
    ]
    [failure] = summary["failures"]
    assert failure["signature"] == "offset-passes-unacked @ complete"
    assert failure["count"] == 2 and failure["profiles"] == ["consumer"]
    smallest = failure["smallest"]
    assert smallest["trace_shrunk"] and smallest["repro_steps"] <= 10
    replay = rmqsim("replay", smallest["trace_path"], "--impl", CONSUMER_MUTANT)
    assert replay.exit_code == 1 and "offset-passes-unacked" in replay.output
    [described] = summary["consumer_profiles"]
    assert (described["profile"], described["runs"], described["failed"]) == ("consumer", 2, 2)
    assert [line.split(":")[0] for line in described["clients"]] == ["busy", "slow"]
    # Coverage per layer: the consumer's kinds over the consumer rows alone.
    coverage = {e["label"]: e["count"] for e in summary["coverage"]["op_kinds"]}
    for kind in ("deliver", "run_retention"):
        counted = sum(r["op_counts"][kind] for r in by_profile["consumer"])
        assert coverage[f"consumer:{kind}"] == counted
    queue_retention = sum(r["op_counts"]["run_retention"] for r in by_profile["smoke"])
    assert coverage["run_retention"] == queue_retention
    assert "consumer:deliver" not in summary["coverage"]["op_kinds_never"]
    # The consumer runs' queue has its own config, a config dimension like any other.
    pages = {r["value"]: r["runs"] for r in summary["by_config"]["page_size_bytes"]}
    assert pages == {128: 2, 256: 2}
    assert summary["determinism"] == {"pairs_checked": 4, "mismatches": []}
    page = (out / "report.html").read_text()
    assert "<h2>Consumer profiles</h2>" in page
    assert page.count('<tr class="profile">') == 2


def test_report_refuses_rows_of_schema_1_under_a_schema_2_manifest(tmp_path: Path) -> None:
    """Rows of the old layout (no layer, the queue's operation counts alone) behind a
    current manifest: the column check refuses them with exit 2, no Spark error.

    The check reads the files' footers before any Spark starts, so the rows need no sweep:
    they are rows of the current schema (``reports.synthetic``, with a current manifest)
    rewritten in the old layout."""
    from rmqsim.reports.synthetic import write_synthetic

    out = write_synthetic(tmp_path / "current", rows=40)
    tmp_path = tmp_path / "old"
    # Without the footer's copy of Spark's schema (rows(out) keeps it), which Spark reads.
    old = rows(out).drop_columns(["layer", "consumer_config"]).replace_schema_metadata(None)
    queue_counts = pa.struct([pa.field(kind, pa.int64(), nullable=False) for kind in OP_KINDS])
    counts = [{k: c[k] for k in OP_KINDS} for c in old["op_counts"].to_pylist()]
    index = old.schema.get_field_index("op_counts")
    old = old.set_column(index, "op_counts", pa.array(counts, type=queue_counts))
    pq.write_to_dataset(old, tmp_path / RUNS_DIR, partition_cols=["profile"])
    # The manifest, but for the files it lists: these rows are in files of other names.
    manifest = json.loads((out / MANIFEST).read_text())
    for sweep in manifest["sweeps"]:
        del sweep["files"]
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    result = rmqsim("report", tmp_path)
    assert result.exit_code == 2, result.output
    assert "column 'layer' is missing" in result.output and "Traceback" not in result.output


def gate_summary(out: Path) -> dict:
    """A gate's summary.json, without what differs between two runs of the same gate."""
    data = json.loads((out / "summary.json").read_text())
    for failure in data["failures"]:
        failure["trace"] = Path(failure["trace"]).name
    for profile in data["profiles"].values():
        profile.pop("wall_s")
    return data


def test_gate_spark_runs_consumer_profiles_like_the_plain_gate(spark: Any, tmp_path: Path):
    """The correct queue passes the gate on Spark as on the plain runner, with the same
    summary, over queue profiles (churn: the profiles of the wrong-queue comparison below)
    and a consumer profile."""
    args = ["gate", "--seeds", "0:2", "--profiles", "smoke,churn,consumer", "--steps", "20"]
    args += ["--no-shrink", "--no-crash-sweep"]
    plain = rmqsim(*args, "--out", tmp_path / "plain")
    on_spark = rmqsim(*args, "--spark", "--out", tmp_path / "spark")
    assert plain.exit_code == on_spark.exit_code == 0, on_spark.output
    assert "rmqsim gate: PASS" in on_spark.output
    summary = gate_summary(tmp_path / "spark")
    assert summary == gate_summary(tmp_path / "plain")
    assert {p: s["runs"] for p, s in summary["profiles"].items() if p != "regressions"} == {
        "smoke": 2,
        "churn": 2,
        "consumer": 2,
    }
    layers = Counter(rows(tmp_path / "spark")["layer"].to_pylist())
    assert layers == Counter({"queue": 4, "consumer": 2})


def test_gate_spark_reports_like_the_plain_gate(spark: Any, tmp_path: Path) -> None:
    # Shrinking and the crash sweep are the driver's, the same after either runner; off here
    # so that the two summaries are of the profile runs alone.
    args = ["gate", "--seeds", "0:4", "--profiles", "smoke,churn", "--steps", "40"]
    args += ["--no-shrink", "--no-crash-sweep"]
    plain = rmqsim(*args, "--impl", WRONG_IMPL, "--out", tmp_path / "plain")
    on_spark = rmqsim(*args, "--impl", WRONG_IMPL, "--spark", "--out", tmp_path / "spark")
    assert plain.exit_code == on_spark.exit_code == 1, on_spark.output
    assert gate_summary(tmp_path / "spark") == gate_summary(tmp_path / "plain")
    failures = gate_summary(tmp_path / "spark")["failures"]
    assert failures
    junit = (tmp_path / "spark" / "junit.xml").read_text()
    assert junit.count("<failure ") == len(failures)
    # The correct queue passing these profiles (exit 0) on Spark, as on the plain runner:
    # test_gate_spark_runs_consumer_profiles_like_the_plain_gate (smoke and churn there).


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sweep", "--seeds", "0:2", "--profiles", "nope", "--out", "{tmp}"], "unknown profile"),
        (["sweep", "--seeds", "0:2", "--master", "local[x]", "--out", "{tmp}"], "master"),
        (["sweep", "--seeds", "0:2", "--out", "/proc/rmqsim"], "not a writable directory"),
        (["sweep", "--seeds", "2:1", "--out", "{tmp}"], "need 0 <= A < B"),
        (["sweep", "--seeds", "0:2", "--impl", "nope:f", "--out", "{tmp}"], "cannot import"),
        (["report", "{tmp}/absent"], "no such directory"),
        (["report", "{tmp}"], "no sweep.json"),
        (["gate", "--master", "local[2]"], "--master needs --spark"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = rmqsim(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_report_refuses_another_schema_version(good_sweep: tuple[Path, Any], tmp_path: Path):
    out, _ = good_sweep
    copy = tmp_path / "old"
    shutil.copytree(out, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    (copy / MANIFEST).write_text(json.dumps(dict(manifest, schema_version=0)))
    result = rmqsim("report", copy)
    assert result.exit_code == 2
    assert "schema version 0" in result.output and "Traceback" not in result.output
    appended = rmqsim("sweep", "--seeds", "0:1", "--profiles", "smoke", "--append", "--out", copy)
    assert appended.exit_code == 2 and "schema version 0" in appended.output


def test_report_names_a_file_damaged_past_its_footer(
    good_sweep: tuple[Path, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Pages overwritten, the footer intact: the footer check before Spark passes the file,
    the Spark task's pyarrow read fails, and the report still names the file in one line
    with exit 2, not a stack trace with exit 3."""
    out, _ = good_sweep
    copy = tmp_path / "damaged"
    shutil.copytree(out, copy)
    parts = (copy / RUNS_DIR).glob("profile=*/*.parquet")
    victim = max(parts, key=lambda path: path.stat().st_size)
    data = bytearray(victim.read_bytes())
    pages_end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[4:pages_end] = b"\xab" * (pages_end - 4)
    victim.write_bytes(bytes(data))
    pq.read_metadata(victim)  # the footer still reads
    capfd.readouterr()
    result = rmqsim("report", copy)
    assert result.exit_code == 2, result.output
    [line] = result.output.splitlines()
    assert line.startswith(f"rmqsim: error: {victim}: not a readable Parquet file (pyarrow: ")
    jvm = capfd.readouterr().err  # what the JVM printed itself
    assert "at org.apache" not in jvm and "Exception" not in jvm, jvm


# ------------------------------------------------------------------ the page in a browser

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _browser_or_skip() -> Any:
    """Headless Chromium through Selenium. The test command (``scripts/test.sh``) installs
    it in its set-up; no test installs anything. Missing: the test is skipped, or fails
    where the browser must be there (``RMQSIM_REQUIRE_BROWSER=1``: CI)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        reason = (
            f"Chromium is not installed ({', '.join(missing)} missing); ./scripts/test.sh "
            "installs it before the tests"
        )
        if os.environ.get("RMQSIM_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver, options, Service(executable_path=CHROMEDRIVER)


@pytest.mark.parametrize("required", [False, True], ids=["skips", "fails-in-ci"])
def test_no_browser_means_skip_or_fail_never_an_install(
    required: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chromium missing: the browser test skips (fails where RMQSIM_REQUIRE_BROWSER=1) and
    runs nothing: installing is the test command's set-up, which says so."""

    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a test started a process: {args}")

    monkeypatch.setattr(subprocess, "run", no_process)
    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setitem(globals(), "CHROMIUM", "/nonexistent/chromium")
    if required:
        monkeypatch.setenv("RMQSIM_REQUIRE_BROWSER", "1")
    else:
        monkeypatch.delenv("RMQSIM_REQUIRE_BROWSER", raising=False)
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(outcome, match="Chromium is not installed"):
        _browser_or_skip()


def test_report_page_renders_in_headless_chromium(
    wrong_report: tuple[Any, Path], tmp_path: Path
) -> None:
    result, page = wrong_report
    assert result.exit_code == 1 and page.is_file()
    webdriver, options, service = _browser_or_skip()
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(page.as_uri())
        assert "31 runs" in driver.title
        assert "Total runs: 31" in driver.find_element("id", "total-runs").text
        images = driver.execute_script(
            "return [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight,"
            " i.getBoundingClientRect().width])"
        )
        assert len(images) >= 4
        for complete, width, height, shown in images:
            assert complete and width > 0 and height > 0 and shown > 0
        # The hostile topic name is text on the page, and nothing ran.
        rows = driver.find_elements("css selector", "tr.failure")
        assert any(XSS in row.text for row in rows)
        assert driver.execute_script("return document.scripts.length") == 0
        assert XSS in driver.find_element("tag name", "body").text
        from selenium.common.exceptions import NoAlertPresentException

        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018  (raises when no alert was opened)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        # Coverage a sweep is not meant to fill reads as information: one line says so, and
        # what it did not reach is not in the failures' red.
        assert "not as a failure" in driver.find_element("id", "coverage-note").text
        colour = "return getComputedStyle(arguments[0]).color"
        red = driver.execute_script(colour, driver.find_element("css selector", "strong.bad"))
        unreached = driver.find_elements("css selector", "span.never, td.info, span.info")
        assert unreached, "a 60-step sweep of smoke leaves cells unreached"
        assert all(driver.execute_script(colour, e) != red for e in unreached)
    finally:
        driver.quit()
