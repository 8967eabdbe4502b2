"""``rmqsim sweep-bench``: how fast sweeps and reports go, measured in one run.

1. Sweep throughput (runs/s) of the same seeds on ``local[1]`` and on ``local[2]``, each in
   a fresh Spark session after a warm-up job (Python workers started), so the ratio shows
   how the pipeline scales with cores.
2. ``rmqsim report`` over N synthetic rows of the real schema (``reports.synthetic``), as a
   subprocess so that Spark's start is included, against an honest single-machine baseline
   measured in the same run: a projected, filtered ``pyarrow.dataset`` group-by of the
   same totals (``arrow_totals``), a subprocess too. Both wall times, both CPU times and
   both peaks of resident memory (a process with its descendants: the report's JVM and
   Python workers count), and a check that their totals agree.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli.common import STEPS, friendly_errors
from rmqsim.conformance.running.scratch import scratch_root

__all__ = [
    "ARROW_BASELINE",
    "SWEEP_MASTERS",
    "TreeMeter",
    "arrow_totals",
    "bench_command",
    "measured",
    "report_times",
    "sweep_throughput",
]

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


def arrow_totals(sweep_dir: Path) -> dict[str, Any]:
    """The report's headline totals by pyarrow alone, as a careful single-machine program
    computes them (the honest comparison for Spark's): a dataset scan of the columns they
    need, filtered to first runs, then a group-by (runs and steps by profile and status;
    failures by signature)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from rmqsim.reports.schema import RUNS_DIR, STATUS_OK

    dataset = ds.dataset(sweep_dir / RUNS_DIR, format="parquet", partitioning="hive")
    first = dataset.to_table(
        columns=["profile", "status", "steps", "signature"],
        filter=ds.field("determinism_repeat") == 0,
    )
    by_status = first.group_by(["profile", "status"]).aggregate(
        [("steps", "count"), ("steps", "sum")]
    )
    failing = first.filter(pc.not_equal(first["status"], STATUS_OK))
    signatures = failing.group_by("signature").aggregate([("steps", "count")])
    return {
        "runs": pc.sum(by_status["steps_count"]).as_py() or 0,
        "failed": failing.num_rows,
        "signatures": signatures.num_rows,
    }


class TreeMeter:
    """The peak resident memory and the CPU time of a process and its descendants (a
    Spark driver's JVM and Python workers), sampled from ``/proc`` in a thread while it
    runs. CPU seconds are what the processes used, whatever else the machine runs: on a
    shared machine they say what wall seconds cannot (a process's last interval before
    it ends is missed)."""

    def __init__(self, pid: int, interval_s: float = 0.1) -> None:
        self._pid = pid
        self._interval_s = interval_s
        self.peak_bytes = 0
        self._cpu_ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="rmqsim-meter")

    @property
    def cpu_s(self) -> float:
        return sum(self._cpu_ticks.values()) / os.sysconf("SC_CLK_TCK")

    def _tree(self) -> dict[int, list[str]]:
        """The ``/proc/PID/stat`` fields (after the command name) of the tree's processes."""
        stats: dict[int, list[str]] = {}
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # the process ended as we looked
            pid = int(stat.parent.name)
            stats[pid] = fields
            children.setdefault(int(fields[1]), []).append(pid)
        tree, todo = {}, [self._pid]
        while todo:
            pid = todo.pop()
            if pid in stats:
                tree[pid] = stats[pid]
            todo.extend(children.get(pid, ()))
        return tree

    def _sample(self) -> None:
        page_bytes = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(self._interval_s):
            total = 0
            for pid, fields in self._tree().items():
                # utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
                self._cpu_ticks[pid] = int(fields[11]) + int(fields[12])
                try:
                    total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page_bytes
                except (OSError, IndexError, ValueError):
                    continue
            self.peak_bytes = max(self.peak_bytes, total)

    def __enter__(self) -> TreeMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measured(args: list[str]) -> tuple[float, TreeMeter, str]:
    """Run ``args``; its wall seconds, its meter (peak memory, CPU time, with its
    descendants) and stdout. ``RuntimeError`` unless it exits 0 or 1 (a report's
    "failures found")."""
    started = time.perf_counter()
    pipe = subprocess.PIPE
    with (
        subprocess.Popen(args, stdout=pipe, stderr=pipe, text=True) as proc,
        TreeMeter(proc.pid) as meter,
    ):
        stdout, stderr = proc.communicate()
    wall_s = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{shlex.join(args)} failed: {stderr.strip()[-500:]}")
    return wall_s, meter, stdout


def report_times(rows: int) -> dict[str, Any]:
    """Wall seconds and peak memory of ``rmqsim report`` (a subprocess: Spark's start
    included) and of the pyarrow baseline (``arrow_totals``, a subprocess too) over
    ``rows`` synthetic rows, and whether their totals agree."""
    from rmqsim.reports.spark import class_archive
    from rmqsim.reports.synthetic import write_synthetic

    # Built once per machine (≈ 12 s), the driver JVM's class archive is built before the
    # timing when there is none yet: the bench measures the report as it runs every time
    # after its first.
    archive = "none" if class_archive() is None else "mapped"
    with tempfile.TemporaryDirectory(prefix="rmqsim-bench-rows-", dir=scratch_root()) as tmp:
        sweep_dir = Path(tmp)
        started = time.perf_counter()
        write_synthetic(sweep_dir, rows)
        generated_s = time.perf_counter() - started
        report = [sys.executable, "-c", "from rmqsim.conformance.cli import main; main()",
                  "report", str(sweep_dir)]  # fmt: skip
        spark_s, spark, _ = measured(report)
        spark_summary = json.loads((sweep_dir / "report.json").read_text())
        baseline = [sys.executable, "-c", ARROW_BASELINE, str(sweep_dir)]
        arrow_s, arrow_meter, printed = measured(baseline)
        arrow = json.loads(printed)
    agree = (
        spark_summary["totals"]["runs"] == arrow["runs"]
        and spark_summary["totals"]["failed"] == arrow["failed"]
        and len(spark_summary["failures"]) == arrow["signatures"]
    )
    return {
        "rows": rows,
        "generate_s": generated_s,
        "spark_report_s": spark_s,
        "spark_cpu_s": spark.cpu_s,
        "spark_peak_bytes": spark.peak_bytes,
        "pyarrow_s": arrow_s,
        "pyarrow_cpu_s": arrow_meter.cpu_s,
        "pyarrow_peak_bytes": arrow_meter.peak_bytes,
        "runs": arrow["runs"],
        "agree": agree,
        "class_archive": archive,
    }


#: The pyarrow baseline as a program of its own (``python -c``, the sweep directory as its
#: argument): its time includes its start, as the report's does.
ARROW_BASELINE = (
    "import json, sys; from pathlib import Path; "
    "from rmqsim.reports.bench import arrow_totals; "
    "print(json.dumps(arrow_totals(Path(sys.argv[1]))))"
)


@click.command("sweep-bench")
@click.option("--seeds", "seed_count", type=click.IntRange(min=8), default=600, show_default=True,
              help="Seeds per sweep throughput measurement.")  # fmt: skip
@click.option("--profile", default="smoke", show_default=True, help="Profile of the sweeps.")
@click.option("--steps", type=STEPS, default=150, show_default=True,
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
        gib = 1024**3
        click.echo(
            f"report over {times['rows']:,} synthetic rows ({times['runs']:,} runs; generated "
            f"in {times['generate_s']:.1f}s): rmqsim report (Spark, start included) "
            f"{times['spark_report_s']:.1f}s ({times['spark_cpu_s']:.1f} CPU s), peak "
            f"{times['spark_peak_bytes'] / gib:.2f} GiB; pyarrow baseline "
            f"{times['pyarrow_s']:.1f}s ({times['pyarrow_cpu_s']:.1f} CPU s), peak "
            f"{times['pyarrow_peak_bytes'] / gib:.2f} GiB; ratio "
            f"{times['spark_report_s'] / times['pyarrow_s']:.1f}x wall, "
            f"{times['spark_cpu_s'] / max(times['pyarrow_cpu_s'], 1e-9):.1f}x CPU; totals "
            f"{'agree' if times['agree'] else 'DISAGREE'}; JVM class archive "
            f"{times['class_archive']}"
        )
    if not skip_sweep:
        seeds = range(0, seed_count)
        rates = {m: sweep_throughput(m, profile, seeds, steps) for m in SWEEP_MASTERS}
        one, two = (rates[m] for m in SWEEP_MASTERS)
        click.echo(
            f"sweep of {seed_count} {profile} seeds x {steps} steps: local[1] {one:.1f} runs/s, "
            f"local[2] {two:.1f} runs/s, ratio {two / one:.2f}x"
        )
