"""``rmqsim sweep-bench``: how fast sweeps and reports go, measured in one run.

1. Sweep throughput (runs/s) of the same seeds on ``local[1]`` and on ``local[2]``, each in
   a fresh Spark session after a warm-up job (Python workers started), so the ratio shows
   how the pipeline scales with cores.
2. ``rmqsim report`` over N synthetic rows of the real schema (``reports.synthetic``), as a
   subprocess so that Spark's start is included, and the same aggregations in pyarrow on
   one machine, with both times and a check that their totals agree.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli_common import friendly_errors
from rmqsim.conformance.scratch import scratch_root

#: Masters the sweep benchmark compares.
SWEEP_MASTERS = ("local[1]", "local[2]")


def sweep_throughput(master: str, profile: str, seeds: range, steps: int) -> float:
    """Runs per second of a sweep of ``seeds`` on ``master`` (session start excluded)."""
    from rmqsim.reports.spark import spark_session
    from rmqsim.reports.sweep import SweepSpec, run_sweep

    warm = SweepSpec((profile,), range(0, 4), DEFAULT_IMPL, steps, sample=0)
    timed = SweepSpec((profile,), seeds, DEFAULT_IMPL, steps, sample=0)
    with (
        tempfile.TemporaryDirectory(prefix="rmqsim-bench-", dir=scratch_root()) as tmp,
        spark_session(master, "rmqsim sweep-bench") as spark,
    ):
        run_sweep(spark, warm, out=Path(tmp) / "warm")
        outcome = run_sweep(spark, timed, out=Path(tmp) / "timed")
    assert outcome.runs == len(seeds) and outcome.ok, "the benchmark sweep must conform"
    return outcome.runs / outcome.wall_s


def arrow_summary(sweep_dir: Path) -> dict[str, Any]:
    """The report's aggregations done by pyarrow alone (the comparison for Spark's)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from rmqsim.reports.schema import ALL_OP_KINDS, CONFIG_COLUMNS, RUNS_DIR

    dataset = ds.dataset(sweep_dir / RUNS_DIR, format="parquet", partitioning="hive")
    needed = [
        "profile", "layer", "seed", "status", "steps", "wall_s", *CONFIG_COLUMNS, "op_counts",
        "signature", "repro_steps", "fault_points", "kinds_off", "determinism_repeat",
        "sweep_id", "implementation", "trace_digest", "consumer_config",
    ]  # fmt: skip
    table = dataset.to_table(columns=needed)  # what the Spark report reads, no more
    first = table.filter(pc.equal(table["determinism_repeat"], 0))
    flat = first.select(
        ["profile", "layer", "status", "steps", "wall_s", *CONFIG_COLUMNS, "op_counts"]
    ).flatten()
    ops = [(f"op_counts.{kind}", "sum") for kind in ALL_OP_KINDS]
    base = flat.group_by(["profile", "layer", "status", *CONFIG_COLUMNS]).aggregate(
        [("steps", "count"), ("steps", "sum"), ("wall_s", "sum"), *ops]
    )
    failing = first.filter(pc.not_equal(first["status"], "ok"))
    failures = failing.group_by("signature").aggregate(
        [("seed", "count"), ("seed", "min"), ("repro_steps", "min")]
    )
    chunks = first["fault_points"].chunks  # fresh arrays (built by the filter): unsliced
    points = (
        pa.table(
            {
                "point": pc.replace_substring_regex(
                    pa.concat_arrays([c.keys for c in chunks]), pattern="^[^:]*:", replacement=""
                ),
                "hits": pa.concat_arrays([c.items for c in chunks]),
            }
        )
        .group_by("point")
        .aggregate([("hits", "sum")])
    )
    swarm = first.filter(pc.greater(pc.list_value_length(first["kinds_off"]), 0))
    kinds_off = pc.value_counts(pc.list_flatten(swarm["kinds_off"]))
    twins = table.filter(pc.equal(table["determinism_repeat"], 1)).select(
        ["sweep_id", "profile", "seed", "implementation", "trace_digest"]
    )
    pairs = first.select(["sweep_id", "profile", "seed", "implementation", "trace_digest"]).join(
        twins,
        ["sweep_id", "profile", "seed", "implementation"],
        join_type="inner",
        right_suffix="_twin",
    )
    mismatches = pc.sum(pc.not_equal(pairs["trace_digest"], pairs["trace_digest_twin"])).as_py()
    wall = first.group_by("profile").aggregate([("wall_s", "tdigest", _quantiles())])
    consumers = (
        first.filter(pc.equal(first["layer"], "consumer"))
        .group_by(["profile", "consumer_config"])
        .aggregate([("seed", "count")])
    )
    return {
        "runs": first.num_rows,
        "failed": failing.num_rows,
        "groups": base.num_rows,
        "signatures": failures.num_rows,
        "fault_points": points.num_rows,
        "kinds_off": len(kinds_off),
        "pairs_checked": pairs.num_rows,
        "mismatches": mismatches or 0,
        "wall_profiles": wall.num_rows,
        "consumer_profiles": consumers.num_rows,
    }


def _quantiles() -> Any:
    import pyarrow.compute as pc

    return pc.TDigestOptions(q=[0.5, 0.9, 0.99])


def report_times(rows: int) -> dict[str, Any]:
    """Seconds for ``rmqsim report`` (subprocess, Spark start included) and for pyarrow
    over ``rows`` synthetic rows, and both totals."""
    from rmqsim.reports.synthetic import write_synthetic

    with tempfile.TemporaryDirectory(prefix="rmqsim-bench-rows-", dir=scratch_root()) as tmp:
        sweep_dir = Path(tmp)
        started = time.perf_counter()
        write_synthetic(sweep_dir, rows)
        generated_s = time.perf_counter() - started
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", "from rmqsim.conformance.cli import main; main()", "report",
             str(sweep_dir)],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        spark_s = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise RuntimeError(f"rmqsim report failed: {done.stderr.strip()[-500:]}")
        spark_summary = json.loads((sweep_dir / "report.json").read_text())
        started = time.perf_counter()
        arrow = arrow_summary(sweep_dir)
        arrow_s = time.perf_counter() - started
    agree = (
        spark_summary["totals"]["runs"] == arrow["runs"]
        and spark_summary["totals"]["failed"] == arrow["failed"]
        and len(spark_summary["failures"]) == arrow["signatures"]
        and spark_summary["determinism"]["pairs_checked"] == arrow["pairs_checked"]
    )
    return {
        "rows": rows,
        "generate_s": generated_s,
        "spark_report_s": spark_s,
        "pyarrow_s": arrow_s,
        "runs": arrow["runs"],
        "agree": agree,
    }


@click.command("sweep-bench")
@click.option("--seeds", "seed_count", type=click.IntRange(min=8), default=600, show_default=True,
              help="Seeds per sweep throughput measurement.")  # fmt: skip
@click.option("--profile", default="smoke", show_default=True, help="Profile of the sweeps.")
@click.option("--steps", type=click.IntRange(min=1), default=150, show_default=True,
              help="Operations per run in the sweeps.")  # fmt: skip
@click.option("--rows", type=click.IntRange(min=1000), default=10_000_000, show_default=True,
              help="Synthetic rows for the report benchmark.")  # fmt: skip
@click.option("--skip-sweep", is_flag=True, help="Only the report benchmark.")
@click.option("--skip-report", is_flag=True, help="Only the sweep benchmark.")
@friendly_errors
def bench_command(
    seed_count: int, profile: str, steps: int, rows: int, skip_sweep: bool, skip_report: bool
) -> None:
    """Sweep throughput on local[1] vs local[2]; report time on N rows, Spark vs pyarrow."""
    from rmqsim.scenarios.catalog import get_profile

    get_profile(profile)
    if not skip_report:
        # First, in a process without Spark yet: the report's own Spark start is counted.
        times = report_times(rows)
        click.echo(
            f"report over {times['rows']:,} synthetic rows ({times['runs']:,} runs; generated "
            f"in {times['generate_s']:.1f}s): rmqsim report (Spark, start included) "
            f"{times['spark_report_s']:.1f}s; pyarrow {times['pyarrow_s']:.1f}s; totals "
            f"{'agree' if times['agree'] else 'DISAGREE'}"
        )
    if not skip_sweep:
        seeds = range(0, seed_count)
        rates = {m: sweep_throughput(m, profile, seeds, steps) for m in SWEEP_MASTERS}
        one, two = (rates[m] for m in SWEEP_MASTERS)
        click.echo(
            f"sweep of {seed_count} {profile} seeds x {steps} steps: local[1] {one:.1f} runs/s, "
            f"local[2] {two:.1f} runs/s, ratio {two / one:.2f}x"
        )
