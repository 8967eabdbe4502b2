"""``rmqsim shrink`` and ``rmqsim crash-sweep``: the crash-consistency commands."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_INTERNAL,
    EXIT_OK,
    FLUSH_CHOICES,
    SEED_LIMIT,
    STEPS,
    UsageError,
    crash_mode_option,
    fail,
    flush_option,
    friendly_errors,
    impl_option,
    op_timeout_option,
    ops_budget_option,
    out_option,
    progress,
    time_budget_option,
    writable_dir,
)
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget

if TYPE_CHECKING:
    from rmqsim.conformance.crashing.power_loss import PowerSweepResult

__all__ = [
    "DECLARED",
    "MAX_REPORTED_CASES",
    "THROUGH_CHOICES",
    "crash_sweep_command",
    "shrink_command",
]


@click.command("shrink")
@click.argument("trace_file", type=click.Path(dir_okay=False, path_type=Path))
@impl_option
@ops_budget_option("--ops-budget", "--shrink-ops-budget")
@time_budget_option("--time-budget-s", "--shrink-budget-s")
@op_timeout_option
@friendly_errors
def shrink_command(
    trace_file: Path, impl: str | None, ops_budget: int, time_budget_s: float | None
) -> None:
    """Minimize a failing trace; write <stem>.shrunk.jsonl beside it.

    The shrunk trace fails with the same anomaly on the same implementation (the one in
    the trace's header unless --impl is given); replay it with ``rmqsim replay``.
    """
    from rmqsim.conformance.searching.shrink import NotFailingError, shrink_file

    budget = ShrinkBudget(ops_budget, time_budget_s)
    try:
        with progress(budget.max_operations, "shrink (operations)") as bar:
            task = bar.task_ids[0]
            report = shrink_file(
                trace_file,
                impl=impl,
                budget=budget,
                on_run=lambda stats: bar.update(task, completed=stats.operations),
            )
    except NotFailingError as exc:
        raise UsageError(str(exc)) from None
    click.echo(
        f"rmqsim shrink: {trace_file}: {report.original_steps} -> {report.shrunk_steps} "
        f"operations ({report.anomaly}) in {report.seconds:.1f}s; wrote {report.path}\n"
        f"  {report.stats.describe()}"
    )
    sys.exit(EXIT_OK)


#: Failing cases of a sweep printed in full (the rest are listed one line each).
MAX_REPORTED_CASES = 3
#: ``--storage``'s value (and what a bare ``--storage`` means): the promise the
#: implementation declares.
DECLARED = "declared"
#: ``--through``'s choices (``power_loss.THROUGH``: not imported, the CLI loads lazily).
THROUGH_CHOICES = ("fs", "fuse")


@click.command("crash-sweep")
@click.option("--profile", "profile_name", required=True, help="Scenario profile name.")
@click.option("--seed", type=click.IntRange(0, SEED_LIMIT - 1), default=0, show_default=True)
@impl_option
@click.option(
    "--steps",
    type=STEPS,
    default=None,
    help="Steps of the scenario to crash in (default: crash_sweep.DEFAULT_SWEEP_STEPS; "
    "with --storage, power_loss.DEFAULT_POWER_STEPS).",
)
@out_option("the traces of failing cases")
@crash_mode_option
@click.option(
    "--storage",
    type=click.Choice([*FLUSH_CHOICES, DECLARED]),
    is_flag=False,
    flag_value=DECLARED,
    default=None,
    help="Cut the power instead (a simulated disk) at every write and sync point, under "
    "each fault mode, and check recovery against this durability promise (bare: the one "
    "--flush gives, else the one --impl declares, rmqsim_flush, else sync); --impl must "
    "accept fs= (default: impl.commitlog's factory of that flush mode).",
)
@flush_option("With --storage: the durability promise to hold --impl to.")
@click.option("--case", "case_spec", default=None, metavar="POINT:MODE",
              help="With --storage: run only this case (as a failure's repro line gives).")
@click.option(
    "--through",
    type=click.Choice(THROUGH_CHOICES),
    default="fs",
    show_default=True,
    help="With --storage: how the store reaches the simulated disk: fs= in rmqsim's "
    "process, or fuse: the store as a child process (the wire protocol's server; "
    "--impl may be exec:COMMAND) on a FUSE mount of the disk. Where FUSE cannot be "
    "mounted the sweep is skipped, saying why (exit 2 with RMQSIM_REQUIRE_FUSE=1).",
)
@op_timeout_option
@friendly_errors
def crash_sweep_command(
    profile_name: str, seed: int, impl: str | None, steps: int | None, out: Path,
    crash_mode: str, storage: str | None, flush: str | None, case_spec: str | None,
    through: str,
) -> None:  # fmt: skip
    """Crash once at every crash point a scenario passes; check each recovery.

    Runs the scenario once, logging every (step, point, hit) the implementation passes,
    then replays it once per logged call with a crash armed there: the state after
    recovery must equal the model's before or after the operation, a second reopen must
    change nothing, and the rest of the scenario must still conform. With --storage, the
    power is cut on a simulated disk instead (conformance/crashing/power_loss.py).
    """
    from rmqsim.scenarios.store.profiles import STORE_PROFILES

    if profile_name in STORE_PROFILES:  # a storage profile's crash sweep cuts the power
        _store_sweep(profile_name, seed, impl, steps, case_spec, through)
    if storage is None and (case_spec, flush, through) != (None, None, "fs"):
        needing = "--case" if case_spec is not None else "--flush" if flush else "--through"
        raise UsageError(f"{needing} needs --storage")
    if storage is not None:
        if crash_mode != "inprocess":
            raise UsageError("--storage cuts the power of a simulated disk; "
                             "it does not take --crash-mode process (see --through fuse)")
        promise = _storage_promise(impl, storage, flush, through)
        _storage_sweep(profile_name, seed, impl, steps, out, (promise, through), case_spec)
    from rmqsim.conformance.adapter import DEFAULT_IMPL, load_factory
    from rmqsim.conformance.crashing.crash_sweep import DEFAULT_SWEEP_STEPS, crash_sweep
    from rmqsim.conformance.reporting.report import render_failure, replay_command
    from rmqsim.conformance.running.gate import save_failure
    from rmqsim.scenarios.catalog import get_profile

    get_profile(profile_name)
    impl = impl or DEFAULT_IMPL
    load_factory(impl)
    writable_dir(out)
    with progress(1, f"crash-sweep {profile_name} seed {seed}") as bar:
        task = bar.task_ids[0]

        def on_case(done: int, total: int) -> None:
            bar.update(task, total=total, completed=done)

        result = crash_sweep(
            profile_name,
            seed,
            impl=impl,
            steps=steps or DEFAULT_SWEEP_STEPS,
            out=out,
            on_case=on_case,
            crash_mode=crash_mode,
        )
    if not result.base.ok:
        save_failure(result.base, out)
        click.echo(render_failure(result.base), err=True)
    for case, failed in result.failures[:MAX_REPORTED_CASES]:
        click.echo(f"CRASH CASE {case.label()}", err=True)
        click.echo(render_failure(failed), err=True)
    for case, failed in result.failures:
        command = replay_command(failed.trace_path) if failed.trace_path else "(no trace saved)"
        click.echo(f"  FAIL {case.label()}: {failed.anomaly}  {command}")
    resolved = ", ".join(f"{k} {v}" for k, v in sorted(result.resolutions.items())) or "-"
    click.echo(
        f"rmqsim crash-sweep: profile {profile_name} seed {seed} impl {result.impl}: "
        f"{result.steps} steps, {len(result.cases)} cases over {len(result.points)} points "
        f"(resolved {resolved}), {len(result.failures)} failing case(s)"
        + ("" if result.base.ok else f", the run without crashes failed ({result.base.anomaly})")
        + f", {result.wall_s:.1f}s"
    )
    sys.exit(EXIT_OK if result.ok else EXIT_DIVERGENCE)


def _store_sweep(
    profile_name: str, seed: int, impl: str | None, steps: int | None, case_spec: str | None,
    through: str,
) -> None:  # fmt: skip
    """``crash-sweep --profile STORAGE-PROFILE``: the storage layer's power-loss sweep
    (``conformance.store.power``), each failure with its repro line; exit 0 or 1."""
    from rmqsim.conformance.crashing.power_fuse import FuseUnavailableError
    from rmqsim.conformance.crashing.power_loss import parse_case
    from rmqsim.conformance.store.power import (
        DEFAULT_STORE_POWER_STEPS,
        case_command,
        store_disk_way,
        store_power_sweep,
    )
    from rmqsim.conformance.store.run import DEFAULT_STORE_IMPL

    name = impl or "commitlog-store"
    try:
        only = None if case_spec is None else parse_case(case_spec)
        way = store_disk_way(impl or DEFAULT_STORE_IMPL, through)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except FuseUnavailableError as exc:
        _fuse_skipped(str(exc))
    steps = steps or DEFAULT_STORE_POWER_STEPS
    with progress(1, f"crash-sweep {profile_name} seed {seed} (power loss, {through})"):
        result = store_power_sweep(profile_name, seed, way, impl=name, steps=steps, only=only)
    if result.base_problem is not None:
        click.echo(f"the run without power cuts failed: {result.base_problem}", err=True)
    for failure in result.failures:
        click.echo(f"  FAIL {failure.case.label()}: {failure.problem}\n"
                   f"    {case_command(result, failure.case)}")
    click.echo(
        f"rmqsim crash-sweep: storage profile {profile_name} ({result.promise} flush) seed "
        f"{seed} impl {name}: {result.steps} steps, {len(result.cases)} power-cut cases, "
        f"{len(result.failures)} failing case(s)"
        + ("" if result.base_problem is None else ", the run without power cuts failed")
        + f", {result.wall_s:.1f}s"
    )
    sys.exit(EXIT_OK if result.ok else EXIT_DIVERGENCE)


def _storage_promise(impl: str | None, storage: str, flush: str | None, through: str) -> str:
    """The promise ``crash-sweep --storage`` holds ``impl`` to: ``--storage``'s, else
    ``--flush``'s, else the one ``impl`` declares (``adapter.load_impl``; sync without
    ``--impl``, or for a store that declares none: through FUSE, any queue)."""
    from rmqsim.conformance.crashing.power_loss import storage_factory

    if impl is not None and through == "fs":
        storage_factory(impl)  # BadImplError unless a storage backend
    if storage != DECLARED:
        if flush not in (None, storage):
            raise UsageError(f"--storage {storage} and --flush {flush} disagree")
        return storage
    if flush is not None or impl is None:
        return flush or "sync"
    from rmqsim.conformance.adapter import load_impl

    promise = load_impl(impl).flush
    assert promise is not None or through == "fuse", "a storage backend has a promise"
    return promise or "sync"


def _storage_sweep(
    profile_name: str, seed: int, impl: str | None, steps: int | None, out: Path,
    way: tuple[str, str], case_spec: str | None,
) -> None:  # fmt: skip
    """``crash-sweep --storage``: print the cases by call and mode, each failure with its
    repro line (and its cut's decisions saved as JSON under ``out``); exit 0 or 1.
    ``way``: the promise and ``--through``."""
    from rmqsim.conformance.crashing.power_loss import DEFAULT_POWER_STEPS, parse_case
    from rmqsim.conformance.crashing.power_trace import save_failures
    from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET
    from rmqsim.scenarios.catalog import get_profile

    get_profile(profile_name)
    try:
        only = None if case_spec is None else parse_case(case_spec)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    writable_dir(out)
    steps = steps or DEFAULT_POWER_STEPS
    promise, through = way
    result = _run_storage_sweep(profile_name, seed, impl, steps, way, only)
    if result.base_problem is not None:
        click.echo(f"the run without power cuts failed: {result.base_problem}", err=True)
    options = (f" --impl {shlex.quote(impl)}" if impl else "") + (
        f" --through {through}" if through != "fs" else "")
    # A trace replays (and shrinks) in process: through FUSE it is kept, not shrunk.
    shrink = DEFAULT_SHRINK_BUDGET if through == "fs" else None
    traces = save_failures(result, out, shrink=shrink) if result.failures else []
    for failure, trace in zip(result.failures, traces, strict=True):
        name = f"{profile_name}-seed{seed}-power-{failure.case.point.index}-{failure.case.mode}"
        (out / f"{name}.json").write_text(json.dumps(failure.as_json(), sort_keys=True) + "\n")
        click.echo(
            f"  FAIL {failure.case.label()}: {failure.problem}\n"
            f"    rmqsim crash-sweep --storage {promise} --profile {profile_name} --seed {seed}"
            f" --steps {steps}{options} --case {failure.case.spec}\n"
            + (f"    rmqsim replay {trace}" if through == "fs" else f"    trace: {trace}")
        )
    if result.shrunk is not None:
        click.echo(f"  shrunk to {result.shrunk[1]} operation(s): rmqsim replay {result.shrunk[0]}")
    by_mode: dict[str, int] = {}
    for (call, mode), count in sorted(result.counts.items()):
        by_mode[mode] = by_mode.get(mode, 0) + count
        click.echo(f"  {call:<10} {mode:<15} {count}")
    modes = ", ".join(f"{mode} {count}" for mode, count in by_mode.items()) or "-"
    way_text = " through FUSE (a child process)" if through == "fuse" else ""
    click.echo(
        f"rmqsim crash-sweep --storage {promise}: profile {profile_name} seed {seed} impl "
        f"{result.impl}{way_text}: {result.steps} steps, {len(result.cases)} cases ({modes}), "
        f"{len(result.failures)} failing case(s), {result.wall_s:.1f}s"
    )
    sys.exit(EXIT_OK if result.ok else EXIT_DIVERGENCE)


def _run_storage_sweep(
    profile_name: str, seed: int, impl: str | None, steps: int, way: tuple[str, str],
    only: tuple[int, str] | None,
) -> PowerSweepResult:  # fmt: skip
    """The sweep, with a progress bar; through FUSE, skipped where FUSE cannot be used
    (one line saying why, exit 0; exit 2 when ``RMQSIM_REQUIRE_FUSE=1``), and a mount
    that fails on the way is one line (exit 3)."""
    from rmqsim.conformance.crashing.fuse_disk import FuseMountError
    from rmqsim.conformance.crashing.power_fuse import FuseUnavailableError
    from rmqsim.conformance.crashing.power_loss import SweepShape, power_loss_sweep

    promise, through = way
    try:
        with progress(1, f"crash-sweep --storage {promise} {profile_name} seed {seed}") as bar:
            task = bar.task_ids[0]
            return power_loss_sweep(
                profile_name, seed, promise=promise, impl=impl, steps=steps,
                through=through, shape=SweepShape(only=only),
                on_case=lambda done, total: bar.update(task, total=total, completed=done),
            )
    except FuseUnavailableError as exc:
        _fuse_skipped(str(exc), f"--storage {promise} ")
    except FuseMountError as exc:
        fail(str(exc), EXIT_INTERNAL)


def _fuse_skipped(reason: str, what: str = "") -> NoReturn:
    """FUSE cannot be used here: one line, exit 0 (exit 2 with RMQSIM_REQUIRE_FUSE=1)."""
    from rmqsim.conformance.crashing.fuse_disk import fuse_required

    if fuse_required():
        raise UsageError(f"--through fuse: FUSE cannot be used here ({reason}), and "
                         "RMQSIM_REQUIRE_FUSE=1")
    click.echo(f"rmqsim crash-sweep {what}--through fuse: SKIPPED: FUSE cannot be used here: "
               f"{reason}", err=True)
    sys.exit(EXIT_OK)
