"""The sweep's pieces that need no Spark: planning, master URLs, the row schema, one
task's rows and saved reproducers, and the HTML page's escaping."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory, model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.common import UsageError
from rmqsim.conformance.consumer.run import consumer_trace_header
from rmqsim.conformance.running.gate import (
    GATE_CONSUMER_PROFILES,
    GATE_PROFILES,
    GATE_STREAM_PROFILES,
)
from rmqsim.conformance.running.run import replay_file
from rmqsim.conformance.running.trace import read_trace
from rmqsim.reports.aggregate import SweepDirError, check_sweep_dir
from rmqsim.reports.page import render_html
from rmqsim.reports.schema import (
    ALL_OP_KINDS,
    ARROW_SCHEMA,
    COLUMNS,
    CONFIG_COLUMNS,
    LAYER_OP_KINDS,
    MANIFEST,
    RUNS_DIR,
    SCHEMA_VERSION,
    SchemaMismatchError,
    arrow_schema,
    check_columns,
    spark_schema,
    trace_hash,
)
from rmqsim.reports.spark import check_master
from rmqsim.reports.sweep import SweepOutcome, SweepSpec, determinism_sample, plan_chunks
from rmqsim.reports.tasks import TaskSpec, WorkItem, error_row, run_chunk
from rmqsim.scenarios.consumer.profiles import CONSUMER_PROFILES
from rmqsim.scenarios.queue.ops import OP_KINDS
from tests.wrong_models import LostWrite

XSS = "<script>alert(1)</script>"


def test_plan_covers_every_pair_once_and_puts_twins_in_another_task() -> None:
    chunks = plan_chunks(("smoke", "swarm"), range(0, 50), parallelism=2, sample=0.1)
    assert len(chunks) == 8  # a few chunks per core
    firsts = Counter((i.profile, i.seed) for c in chunks for i in c if i.repeat == 0)
    assert firsts == Counter({(p, s): 1 for p in ("smoke", "swarm") for s in range(50)})
    twins = [(n, i) for n, c in enumerate(chunks) for i in c if i.repeat == 1]
    assert len(twins) == 10
    home = {(i.profile, i.seed): n for n, c in enumerate(chunks) for i in c if i.repeat == 0}
    for chunk_index, item in twins:
        assert home[(item.profile, item.seed)] != chunk_index
    # The plan is a function of its inputs.
    assert chunks == plan_chunks(("smoke", "swarm"), range(0, 50), parallelism=2, sample=0.1)


def test_the_synthetic_rows_hash_their_digests_as_sweeps_do(tmp_path: Path) -> None:
    """``synthetic.trace_hashes`` (numpy, for millions of rows) is ``schema.trace_hash``."""
    import pyarrow.parquet as pq

    from rmqsim.reports.synthetic import write_synthetic

    write_synthetic(tmp_path, 2000)
    table = pq.read_table(tmp_path / RUNS_DIR, columns=["trace_digest", "trace_hash"])
    digests, hashes = table["trace_digest"].to_pylist(), table["trace_hash"].to_pylist()
    assert hashes == [trace_hash(d) for d in digests] and len(set(hashes)) > 1900


def test_determinism_sample_as_fraction_or_count() -> None:
    pairs = [("smoke", s) for s in range(100)]
    assert len(determinism_sample(pairs, 0.05)) == 5
    assert len(determinism_sample(pairs, 7)) == 7
    assert len(determinism_sample(pairs, 0.0001)) == 1  # a sweep always checks something
    assert determinism_sample(pairs, 0) == []
    assert len(determinism_sample(pairs[:3], 50)) == 3


@pytest.mark.parametrize(
    "url",
    [
        "local",
        "local[*]",
        "local[2]",
        "local[4,2]",
        "yarn",
        "spark://host:7077",
        "spark://a:7077,b:7077",
        "k8s://https://x:6443",
    ],
)
def test_master_urls_spark_accepts(url: str) -> None:
    assert check_master(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "",
        "local[0]",
        "local[x]",
        "spark://host",
        "http://x:7077",
        "locale",
        "spark://host:7077/extra",
    ],
)
def test_bad_master_urls_are_usage_errors(url: str) -> None:
    with pytest.raises(UsageError, match="not a Spark master URL"):
        check_master(url)


def test_spark_schema_is_the_arrow_schema() -> None:
    assert tuple(f.name for f in spark_schema().fields) == COLUMNS == tuple(ARROW_SCHEMA.names)
    assert ARROW_SCHEMA.metadata[b"rmqsim.schema_version"] == str(SCHEMA_VERSION).encode()
    with pytest.raises(SchemaMismatchError, match="'seed' is missing"):
        check_columns({"profile": "string"}, {"profile": "string", "seed": "bigint"})
    with pytest.raises(SchemaMismatchError, match="'seed' is string, expected bigint"):
        check_columns({"seed": "string"}, {"seed": "bigint"})


def test_schema_5_holds_every_layer_the_coverage_map_and_the_trace_hash() -> None:
    assert SCHEMA_VERSION == 5
    maps = pa.map_(pa.string(), pa.int64())
    for name in ("coverage_reached", "coverage_crashed"):
        assert ARROW_SCHEMA.field(name).type == maps and name not in arrow_schema(3).names
    assert ARROW_SCHEMA.field("trace_hash").type == pa.int64()
    assert "trace_hash" not in arrow_schema(4).names and "coverage_reached" in arrow_schema(4).names
    assert arrow_schema(5) == ARROW_SCHEMA.remove_metadata()
    digest = "sha256:" + "ff" * 8 + "00" * 24
    assert (trace_hash(digest), trace_hash("sha256:" + "0" * 64), trace_hash("")) == (-1, 0, 0)
    assert trace_hash("sha256:7fffffffffffffff" + "0" * 48) == (1 << 63) - 1
    fields = ARROW_SCHEMA.field("op_counts").type
    assert [fields.field(i).name for i in range(fields.num_fields)] == list(ALL_OP_KINDS)
    # Every kind of every vocabulary has its field, each once (run_retention is shared).
    every = set(OP_KINDS) | set(LAYER_OP_KINDS["consumer"]) | set(LAYER_OP_KINDS["stream"])
    assert set(ALL_OP_KINDS) == every
    assert len(ALL_OP_KINDS) == len(set(ALL_OP_KINDS))
    assert not ARROW_SCHEMA.field("layer").nullable
    assert all(ARROW_SCHEMA.field(name).nullable for name in CONFIG_COLUMNS)
    assert ARROW_SCHEMA.field("consumer_config").nullable


def test_a_task_yields_rows_and_saves_the_shrunk_reproducer(tmp_path: Path) -> None:
    spec = TaskSpec(
        impl=make_model_factory(LostWrite),
        out_dir=str(tmp_path),
        sweep_id="t",
        steps=80,
    )
    items = [WorkItem("smoke", 0), WorkItem("smoke", 1), WorkItem("smoke", 0, repeat=1)]
    out = list(run_chunk(items, spec))
    rows = [dict(zip(COLUMNS, row, strict=True)) for _item, _result, row in out]
    assert [r["status"] for r in rows] == ["divergence"] * 3
    first, second, twin = rows
    assert first["signature"] == second["signature"] == "lost-write @ produce"
    # The task's first failure of a signature is shrunk; the trace it points to replays.
    assert first["trace_shrunk"] and first["trace_path"].endswith(".shrunk.jsonl")
    shrunk = read_trace(tmp_path / first["trace_path"])
    assert len(shrunk.steps) == first["repro_steps"] < first["steps"]
    assert shrunk.end is not None and shrunk.end["anomaly"] == "lost-write"
    # Later failures of the same signature keep their whole trace; the twin saves none.
    assert not second["trace_shrunk"] and second["repro_steps"] == second["steps"]
    assert (tmp_path / second["trace_path"]).is_file()
    assert twin["trace_path"] is None and twin["trace_digest"] == first["trace_digest"]
    assert first["trace_hash"] == trace_hash(first["trace_digest"]) != 0
    assert sum(first["op_counts"].values()) == first["steps"]


def test_the_traces_of_a_task_name_the_drivers_git_commit(tmp_path: Path) -> None:
    """A cluster's executor runs code shipped as a zip (no git checkout): the commit its
    trace headers name is the one the driver sent with the task, the shrunk trace's too."""
    driver_commit = "d" * 40
    spec = TaskSpec(
        impl=make_model_factory(LostWrite),
        out_dir=str(tmp_path),
        sweep_id="t",
        steps=60,
        git_commit=driver_commit,
    )
    items = [WorkItem("smoke", 0), WorkItem("smoke", 1)]
    rows = [dict(zip(COLUMNS, row, strict=True)) for _item, _result, row in run_chunk(items, spec)]
    saved = [r["trace_path"] for r in rows]
    assert saved[0].endswith(".shrunk.jsonl") and saved[1].endswith(".jsonl")
    for path in saved:
        assert read_trace(tmp_path / path).header["git_commit"] == driver_commit
    passing = TaskSpec(model_factory, str(tmp_path), "t", steps=20, git_commit=driver_commit)
    results = [result for _item, result, _row in run_chunk([WorkItem("consumer", 0)], passing)]
    assert [(r.status, r.spec.git_commit) for r in results] == [("ok", driver_commit)]


def test_a_queue_row_carries_its_runs_coverage_cells(tmp_path: Path) -> None:
    """The row's coverage columns are the run's own map by cell label (a consumer row's
    are empty: the map is the queue's vocabulary)."""
    from rmqsim.conformance.queue.coverage import coverage_of_result
    from rmqsim.conformance.running.run import run_seed

    spec = TaskSpec(impl=DEFAULT_IMPL, out_dir=str(tmp_path), sweep_id="t", steps=60)
    queue = _row(WorkItem("swarm", 2), spec)
    consumer = _row(WorkItem("consumer", 0), dataclasses.replace(spec, steps=20))
    expected = coverage_of_result(run_seed("swarm", 2, steps=60, log_faults=True))
    assert expected is not None
    reached = {cell.label(): n for cell, n in expected.reached.items()}
    crashed = {cell.label(): n for cell, n in expected.crashed.items()}
    assert queue["status"] == "ok" and "produce/any/-" in reached
    assert dict(queue["coverage_reached"]) == reached
    assert dict(queue["coverage_crashed"]) == crashed
    assert consumer["coverage_reached"] == consumer["coverage_crashed"] == {}


def test_a_sweeps_tallies_pair_each_twin_with_its_first_run_in_another_task(
    tmp_path: Path,
) -> None:
    """What a sweep's driver collects from its tasks (``_tally`` in each, ``_merged``):
    the rows counted by (determinism_repeat, status) and the kept results; a pair whose
    two runs, in two tasks, left two trace digests is a determinism mismatch, one whose
    runs agree is not, and a run without a digest (an error row) is no second digest."""
    from rmqsim.reports.sweep import _merged, _tally

    spec = TaskSpec(impl=model_factory, out_dir=str(tmp_path), sweep_id="t", steps=10)
    [(_item, result, real)] = list(run_chunk([WorkItem("smoke", 1)], spec))
    base = dict(zip(COLUMNS, real, strict=True))

    def row(seed: int, digest: str | None, repeat: int = 0, status: str = "ok") -> tuple:
        changed = dict(base, seed=seed, trace_digest=digest, determinism_repeat=repeat,
                       status=status)  # fmt: skip
        return tuple(changed[column] for column in COLUMNS)

    one, other = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    first_task = [(result, row(1, one)), (None, row(2, one)), (None, row(3, one)),
                  (None, row(4, other, status="divergence"))]  # fmt: skip
    second_task = [(None, row(1, other, repeat=1)), (None, row(2, one, repeat=1)),
                   (None, row(3, None, repeat=1, status="error"))]  # fmt: skip
    twice = {("smoke", 1), ("smoke", 2), ("smoke", 3)}
    collected = _merged([_tally(iter(first_task), twice), _tally(iter(second_task), twice)])
    assert collected.mismatched == [("smoke", 1)]
    assert collected.tallies == Counter(
        {(0, "ok"): 3, (0, "divergence"): 1, (1, "ok"): 2, (1, "error"): 1}
    )
    assert collected.kept == [result]


def test_a_conforming_row_carries_counts_and_no_trace(tmp_path: Path) -> None:
    spec = TaskSpec(impl=model_factory, out_dir=str(tmp_path), sweep_id="t", steps=50)
    [(_item, result, row)] = list(run_chunk([WorkItem("swarm", 3)], spec))
    record = dict(zip(COLUMNS, row, strict=True))
    assert record["status"] == "ok" and result.trace_lines == []
    assert record["trace_path"] is None and not (tmp_path / "traces").exists()
    assert record["steps"] == 50 == sum(record["op_counts"].values())
    # Swarm draws a config per seed: the row carries the drawn one.
    from rmqsim.scenarios.catalog import get_profile
    from rmqsim.scenarios.queue.profiles import resolve

    drawn = resolve(get_profile("swarm"), 3)
    assert record["page_size_bytes"] == drawn.config["page_size_bytes"]
    assert record["kinds_off"] == [k for k, w in drawn.weights.items() if not w]


def _row(item: WorkItem, spec: TaskSpec) -> dict:
    [(_item, _result, row)] = list(run_chunk([item], spec))
    return dict(zip(COLUMNS, row, strict=True))


def test_a_consumer_row_counts_its_own_operations_and_carries_its_config(
    tmp_path: Path,
) -> None:
    spec = TaskSpec(impl="rmqsim.conformance.adapter:rocksmq_factory", out_dir=str(tmp_path),
                    sweep_id="t", steps=120)  # fmt: skip
    record = _row(WorkItem("consumer-crashy", 0), spec)
    assert record["status"] == "ok" and record["layer"] == "consumer"
    assert record["implementation"] == "rmqsim.conformance.consumer.run:impl_consumer_factory"
    counts = record["op_counts"]
    # The counts come from the trace: every step once, in the consumer's vocabulary.
    assert sum(counts.values()) == record["steps"] > 120  # the drain comes after the budget
    consumer_kinds = set(LAYER_OP_KINDS["consumer"])
    assert all(counts[k] == 0 for k in ALL_OP_KINDS if k not in consumer_kinds)
    assert counts["deliver"] and counts["complete"] and counts["produce_batch"]
    assert counts["crash_client"] == 2 == record["crashes_injected"]
    assert record["reopens"] == counts["crash_queue"] == 0
    assert record["fault_points"] == {} and record["kinds_off"] == []
    # The queue under the consumers has the profile's config; the consumer's own knobs
    # are in consumer_config (canonical JSON, no prose).
    profile = CONSUMER_PROFILES["consumer-crashy"]
    assert {k: record[k] for k in CONFIG_COLUMNS} == profile.config
    knobs = json.loads(record["consumer_config"])
    assert knobs == {k: v for k, v in profile.to_json().items() if k != "description"}
    assert record["consumer_config"] == json.dumps(knobs, sort_keys=True, separators=(",", ":"))
    assert record["state_digest"] and record["trace_path"] is None
    # A whole-process crash reopens the queue.
    crashed = _row(WorkItem("consumer-crashy", 5), spec)
    assert crashed["op_counts"]["crash_queue"] == 1 == crashed["reopens"]
    assert crashed["crashes_injected"] == 1


def test_a_failing_consumer_row_has_its_signature_and_a_shrunk_trace(tmp_path: Path) -> None:
    mutant = "rmqsim.conformance.mutants.consumer:commit_highest_acked"
    spec = TaskSpec(impl=mutant, out_dir=str(tmp_path), sweep_id="t", steps=40)
    items = [WorkItem("consumer", 0), WorkItem("smoke", 0), WorkItem("consumer", 0, repeat=1)]
    first, queue, twin = (
        dict(zip(COLUMNS, row, strict=True)) for *_, row in run_chunk(items, spec)
    )
    assert first["status"] == "divergence" and first["anomaly"] == "offset-passes-unacked"
    assert first["signature"] == "offset-passes-unacked @ complete"
    assert first["divergence_step"] == first["steps"] == sum(first["op_counts"].values())
    assert first["repro"] == f"rmqsim run --profile consumer --seed 0 --impl {mutant} --steps 40"
    # Its trace is saved, shrunk, and replays as a consumer trace with the same anomaly.
    assert first["trace_shrunk"] and first["trace_path"].endswith(".shrunk.jsonl")
    path = tmp_path / first["trace_path"]
    assert consumer_trace_header(path) is not None
    replayed = replay_file(path, impl=mutant)
    assert replayed.anomaly == "offset-passes-unacked"
    assert replayed.steps == first["repro_steps"] < first["steps"]
    # A queue profile under a consumer factory runs our queue, and conforms.
    assert queue["status"] == "ok" and queue["layer"] == "queue"
    assert queue["consumer_config"] is None and queue["page_size_bytes"] == 128
    assert twin["trace_digest"] == first["trace_digest"] and twin["trace_path"] is None


def test_error_rows_of_consumer_and_unknown_profiles(tmp_path: Path) -> None:
    spec = TaskSpec(impl="rmqsim.conformance.adapter:rocksmq_factory", out_dir=str(tmp_path),
                    sweep_id="t")  # fmt: skip
    boom = RuntimeError("boom")
    consumer = dict(zip(COLUMNS, error_row(WorkItem("consumer", 1), spec, boom, 0.5), strict=True))
    assert consumer["status"] == "error" and consumer["layer"] == "consumer"
    assert consumer["page_size_bytes"] == 256 and consumer["consumer_config"]
    assert consumer["op_counts"] == dict.fromkeys(ALL_OP_KINDS, 0)
    # A profile this code cannot resolve still gives its row, without a config.
    unknown = dict(zip(COLUMNS, error_row(WorkItem("gone", 1), spec, boom, 0.5), strict=True))
    assert unknown["layer"] == "queue" and unknown["detail"] == "RuntimeError: boom"
    assert all(unknown[k] is None for k in CONFIG_COLUMNS) and unknown["kinds_off"] == []
    # Both are rows the schema takes.
    import pyarrow as pa

    table = pa.Table.from_pylist([consumer, unknown], schema=ARROW_SCHEMA)
    assert table.num_rows == 2


def test_sweep_defaults_to_the_gates_profiles_consumers_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --profiles, `rmqsim sweep` runs what `rmqsim gate` runs (no Spark here:
    the session and the sweep are stand-ins that record what they were given)."""
    import contextlib

    from rmqsim.reports import spark as spark_module
    from rmqsim.reports import sweep as sweep_module

    seen: dict = {}

    def fake_sweep(_spark: object, sweep: SweepSpec, **kwargs: object) -> SweepOutcome:
        seen.update(kwargs, profiles=sweep.profiles)
        return SweepOutcome(sweep_id="x", out=tmp_path, wall_s=1.0)

    monkeypatch.setattr(sweep_module, "run_sweep", fake_sweep)
    monkeypatch.setattr(
        spark_module, "spark_session", lambda *_a, **_k: contextlib.nullcontext(None)
    )
    result = CliRunner().invoke(cli, ["sweep", "--seeds", "0:1", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert seen["profiles"] == GATE_PROFILES + GATE_CONSUMER_PROFILES + GATE_STREAM_PROFILES
    help_text = CliRunner().invoke(cli, ["sweep", "--help"]).output
    assert "consumer and stream profiles included" in " ".join(help_text.split())


def test_sweep_dir_checks_before_spark(tmp_path: Path) -> None:
    with pytest.raises(SweepDirError, match="no such directory"):
        check_sweep_dir(tmp_path / "absent")
    with pytest.raises(SweepDirError, match=r"no sweep\.json"):
        check_sweep_dir(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"schema_version": 999, "sweeps": []}))
    with pytest.raises(SweepDirError, match="schema version 999"):
        check_sweep_dir(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
    with pytest.raises(SweepDirError, match="holds no rows"):
        check_sweep_dir(tmp_path)


def test_report_refuses_a_schema_1_directory_with_exit_2(tmp_path: Path) -> None:
    """A directory written before consumer rows existed (schema version 1): a clear
    refusal before Spark starts, not a crash."""
    (tmp_path / MANIFEST).write_text(json.dumps({"schema_version": 1, "sweeps": []}))
    (tmp_path / RUNS_DIR / "profile=smoke").mkdir(parents=True)
    (tmp_path / RUNS_DIR / "profile=smoke" / "part-0.parquet").write_bytes(b"PAR1")
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "row schema version 1" in result.output and f"reads version {SCHEMA_VERSION}" in (
        result.output
    )
    assert "Traceback" not in result.output


def _summary_with(text: str) -> dict:
    tally = {
        "value": text,
        "runs": 2,
        "divergences": 1,
        "errors": 0,
        "failed": 1,
        "failure_rate": 0.5,
        "steps": 10,
        "wall_s": 0.1,
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "sweep_dir": text,
        "sweeps": 1,
        "implementations": [text],
        "code_versions": ["abc"],
        "seeds": [0, 1],
        "totals": {
            "runs": 2,
            "failed": 1,
            "divergences": 1,
            "errors": 0,
            "steps": 10,
            "failure_rate": 0.5,
            "repeats": 0,
        },
        "layers": ["queue", "consumer"],
        "by_profile": [dict(tally, layer="queue"), dict(tally, layer="consumer")],
        "consumer_profiles": [
            {
                "profile": text,
                "runs": 2,
                "failed": 1,
                "config": {"topic": text},
                "clients": [text],
                "crashes": text,
                "other": [text],
            }
        ],
        "by_config": {"page_size_bytes": [tally], "kinds_off": []},
        "failures": [
            {
                "signature": text,
                "anomaly": "lost-write",
                "count": 1,
                "profiles": [text],
                "first_seen": {"seed": 0, "profile": text},
                "smallest": {
                    "repro_steps": 3,
                    "divergence_step": 3,
                    "seed": 0,
                    "profile": text,
                    "trace_path": text,
                    "trace_shrunk": True,
                    "repro": text,
                    "detail": text,
                    "implementation": text,
                },
            }
        ],
        "coverage": {
            "op_kinds": [
                {"layer": "queue", "kind": "produce", "label": "produce", "count": 1},
                {"layer": "consumer", "kind": "pull", "label": "consumer:pull", "count": 0},
            ],
            "op_kinds_never": [text],
            "fault_points": [{"point": text, "hits": 1}],
            "fault_points_never": [text],
            "cells": {
                "runs": 1,
                "operation_cells": {"reachable": 2, "hit": 1},
                "crash_cells": {"reachable": 1, "hit": 0},
                "cells": [
                    {"kind": text, "condition": "any", "point": "-", "reached": 1, "crashes": 0}
                ],
                "operations_never_hit": [text],
                "crashes_never_armed": [text],
            },
        },
        "determinism": {
            "pairs_checked": 1,
            "mismatches": [
                {"profile": text, "seed": 0, "implementation": text, "digests": [text, "b"]}
            ],
        },
        "wall_time_s": {
            "all": {"p50": 0.1, "p90": 0.1, "p99": 0.1, "max": 0.1},
            "by_profile": {text: {"p50": 0.1, "p90": 0.1, "p99": 0.1, "max": 0.1}},
        },
    }


def test_page_escapes_every_string_from_the_rows() -> None:
    page = render_html(_summary_with(XSS))
    assert XSS not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 14
    assert "<script" not in page.lower()
    assert "Total runs: <strong>2</strong>" in page
    # The consumer profiles' table and each profile's layer.
    assert page.count('<tr class="consumer-profile">') == 1
    assert "<td>consumer</td>" in page and "<td>queue</td>" in page


def test_the_shipped_zip_holds_rmqsim_with_its_links_resolved(tmp_path: Path) -> None:
    """The executors import rmqsim from the zip: every package's files, under ``rmqsim/``
    (the tree's rmqsim/ holds links to model/, impl/, ...), no bytecode."""
    import zipfile

    from rmqsim.reports.shipping import package_zip

    names = set(zipfile.ZipFile(package_zip(tmp_path)).namelist())
    for module in ("__init__.py", "model/api.py", "impl/__init__.py", "reports/tasks.py",
                   "scenarios/catalog.py", "conformance/running/run.py"):  # fmt: skip
        assert f"rmqsim/{module}" in names
    assert not [name for name in names if name.endswith(".pyc") or "__pycache__" in name]


def test_what_is_shipped_of_an_impl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's module is shipped (a file as it is, a package zipped); rmqsim's own
    implementations, by any spelling, and installed packages are not."""
    import zipfile

    from rmqsim.reports.shipping import impl_code

    project = tmp_path / "project"
    (project / "userpkg").mkdir(parents=True)
    (project / "my_adapter.py").write_text("def factory(**kw): ...\n")
    (project / "userpkg" / "__init__.py").write_text("")
    (project / "userpkg" / "queue.py").write_text("def factory(**kw): ...\n")
    monkeypatch.syspath_prepend(str(project))
    ship = tmp_path / "ship"
    ship.mkdir()
    assert impl_code("my_adapter:factory", ship) == project / "my_adapter.py"
    package = impl_code("userpkg.queue:factory", ship)
    assert package is not None
    assert {"userpkg/__init__.py", "userpkg/queue.py"} <= set(zipfile.ZipFile(package).namelist())
    for own in ("rocksmq", "rmqsim.conformance.adapter:rocksmq_factory",
                "conformance.mutants.consumer:commit_highest_acked", model_factory):  # fmt: skip
        assert impl_code(own, ship) is None
    assert impl_code("click:command", ship) is None  # installed: the executors' Python has it


def test_an_environment_archive_must_exist_and_be_one(tmp_path: Path) -> None:
    from rmqsim.reports.shipping import archive_spec, executor_python

    packed = tmp_path / "env.tar.gz"
    packed.write_bytes(b"")
    assert archive_spec(str(packed)) == (f"{packed}#environment", "environment")
    assert archive_spec(f"{packed}#py") == (f"{packed}#py", "py")
    assert executor_python("py") == "./py/bin/python"
    with pytest.raises(UsageError, match="no such file"):
        archive_spec(str(tmp_path / "missing.tar.gz"))
    (tmp_path / "env.txt").write_text("")
    with pytest.raises(UsageError, match="not a packed environment"):
        archive_spec(str(tmp_path / "env.txt"))
