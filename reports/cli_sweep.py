"""``rmqsim sweep``: many seeds of many profiles on Spark, one Parquet row per run."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_INTERNAL,
    EXIT_OK,
    SEEDS,
    FiniteFloatRange,
    friendly_errors,
    impl_option,
    parse_profiles,
    progress,
    shrink_options,
    steps_option,
    writable_dir,
)
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget
from rmqsim.reports.spark import DEFAULT_MASTER
from rmqsim.reports.sweep import DEFAULT_DETERMINISM_SAMPLE

__all__ = ["archives_option", "master_option", "sweep_command"]

master_option = click.option(
    "--master",
    default=DEFAULT_MASTER,
    show_default=True,
    help="Spark master URL: local[*], local[N], spark://host:7077, yarn, k8s://...",
)


archives_option = click.option(
    "--archives",
    default=None,
    metavar="FILE[#DIR]",
    help="A packed Python environment (venv-pack, conda-pack: .tar.gz, .zip) with "
    "rmqsim's dependencies, unpacked next to each executor as DIR (default environment), "
    "whose bin/python runs the tasks. Default: the executors run this Python "
    "(or PYSPARK_PYTHON).",
)


@click.command("sweep")
@click.option("--seeds", type=SEEDS, required=True, help="Seed range A:B (B excluded).")
@click.option(
    "--profiles",
    default=None,
    help="Comma-separated profiles of any layer (default: the gate's, the consumer and "
    "stream profiles included).",
)
@impl_option
@master_option
@archives_option
@steps_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Sweep directory: runs/ (Parquet), traces/, sweep.json.",
)
@click.option(
    "--determinism-sample",
    type=FiniteFloatRange(min=0),
    default=DEFAULT_DETERMINISM_SAMPLE,
    show_default=True,
    help="(profile, seed) pairs run twice in different tasks: a fraction (<1) or a count.",
)
@shrink_options
@click.option("--append", is_flag=True, help="Add rows to DIR's dataset instead of replacing it.")
@friendly_errors
def sweep_command(
    seeds: range,
    profiles: str | None,
    impl: str | None,
    master: str,
    archives: str | None,
    steps: int | None,
    out: Path,
    determinism_sample: float,
    shrink: ShrinkBudget | None,
    append: bool,
) -> None:
    """Run every seed of every profile on Spark; write one row per run to Parquet.

    Exit 0 when every run conforms, 1 on divergences or a determinism mismatch, 2 on bad
    usage, 3 when rmqsim itself failed on some run.
    """
    from rmqsim.conformance.adapter import DEFAULT_IMPL, load_impl
    from rmqsim.conformance.running.gate import gate_profiles_for
    from rmqsim.reports.spark import Shipping, check_master, spark_session
    from rmqsim.reports.sweep import SweepSpec, check_appendable, run_sweep

    # The gate's profiles, as `rmqsim gate` runs them: those of the implementation's layer
    # (every layer's, in layer order, for a queue).
    impl = impl or DEFAULT_IMPL
    names = parse_profiles(profiles, gate_profiles_for(load_impl(impl).layer))
    check_master(master)
    writable_dir(out)
    if append:
        check_appendable(out)
    shipping = Shipping(impl=impl, archives=archives)
    with (
        spark_session(master, "rmqsim sweep", shipping=shipping, quick_start=True) as spark,
        progress(0, "sweep tasks") as bar,
    ):
        task_id = bar.task_ids[0]
        outcome = run_sweep(
            spark,
            SweepSpec(names, seeds, impl, steps, sample=determinism_sample, shrink=shrink),
            out=out,
            append=append,
            on_plan=lambda tasks: bar.update(task_id, total=tasks),
            on_tasks=lambda n: bar.advance(task_id, n),
        )
    rate = outcome.runs / outcome.wall_s if outcome.wall_s else 0.0
    click.echo(
        f"rmqsim sweep: {outcome.runs} runs ({len(names)} profiles x {len(seeds)} seeds) "
        f"+ {outcome.repeats} determinism re-runs in {outcome.wall_s:.1f}s ({rate:.1f} runs/s); "
        f"{outcome.divergences} divergence(s), {outcome.errors} error(s), "
        f"{len(outcome.determinism_mismatches)} determinism mismatch(es); rows in {out}"
    )
    for profile, seed in outcome.determinism_mismatches[:10]:
        click.echo(f"  NONDETERMINISTIC {profile} seed {seed}: two runs, two trace digests")
    if outcome.errors:
        command = shlex.join(["rmqsim", "report", str(out)])
        click.echo(f"  see `{command}`: rmqsim failed on some runs", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(EXIT_OK if outcome.ok else EXIT_DIVERGENCE)
