"""The ``rmqsim`` command line.

Exit codes are part of the interface: 0 all conform, 1 a divergence was found, 2 bad usage
or bad input (one line naming what was wrong, never a traceback), 3 an internal error of
rmqsim itself. Heavy modules are imported inside the commands so that ``--help`` is fast.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any, NoReturn

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_OK,
    EXIT_USAGE,
    JOBS,
    SEED_LIMIT,
    SEEDS,
    SPARK_EXTRA_INSTALL,
    STEPS,
    ShrinkBar,
    UsageError,
    crash_mode_choice,
    crash_mode_option,
    crash_rate_option,
    expect_option,
    fail,
    flush_option,
    friendly_errors,
    impl_option,
    interrupt_signal,
    missing_extra,
    op_timeout_option,
    out_option,
    parse_profiles,
    progress,
    save_regression_option,
    save_regressions,
    shrink_options,
    steps_option,
    writable_dir,
)
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget

__all__ = [
    "ENTRY_POINT_GROUP",
    "GATE_RUNNER_GROUP",
    "LAZY_COMMANDS",
    "LazyGroup",
    "cli",
    "gate_command",
    "gate_runner",
    "main",
    "replay_command",
    "run_command",
]

#: Commands of conformance/ loaded only when invoked (``name -> "module:attribute"``); a
#: command whose module is not installed is not listed. Other packages (``reports``) and
#: users add commands through the ``rmqsim.commands`` entry point group instead, so that
#: conformance never imports the layers built on it.
LAZY_COMMANDS: dict[str, str] = {
    "bench": "rmqsim.conformance.bench.backends:bench",
    "crash-sweep": "rmqsim.conformance.cli.crash:crash_sweep_command",
    "shrink": "rmqsim.conformance.cli.crash:shrink_command",
    "fuzz": "rmqsim.conformance.cli.fuzz:fuzz_command",
    "mutants": "rmqsim.conformance.cli.mutants:mutants_command",
    "protocol-check": "rmqsim.conformance.cli.protocol:protocol_check_command",
    "store": "rmqsim.conformance.cli.store:store_group",
}
ENTRY_POINT_GROUP = "rmqsim.commands"
#: Other ways to run the gate's seeds (``rmqsim gate --spark``), each a function like
#: ``conformance.running.gate.run_profiles`` (reports/ registers ``spark``).
GATE_RUNNER_GROUP = "rmqsim.gate_runners"


def gate_runner(name: str) -> Any:
    """The gate runner registered as ``name`` in ``GATE_RUNNER_GROUP``, or UsageError."""
    from importlib import metadata  # ~50 ms: only where an entry point is looked up

    for entry in metadata.entry_points(group=GATE_RUNNER_GROUP):
        if entry.name == name:
            try:
                return entry.load()
            except ImportError as exc:
                problem = missing_extra(exc, f"rmqsim gate --{name}")
                if problem is None:
                    raise
                raise problem from None
    raise UsageError(
        f"--{name}: no {name!r} gate runner is installed (entry point group "
        f"{GATE_RUNNER_GROUP}; it comes with rmqsim's reports package)"
    )


def _command_targets() -> dict[str, str]:
    """Every lazily loaded command (``name -> "module:attribute"``): ``LAZY_COMMANDS``
    whose module is installed, then the ``ENTRY_POINT_GROUP`` entry points."""
    from importlib import metadata  # ~50 ms, and a scan of every installed package

    targets = {
        name: target
        for name, target in LAZY_COMMANDS.items()
        if find_spec(target.split(":", 1)[0]) is not None
    }
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        targets.setdefault(entry.name, entry.value)
    return targets


def _command_target(name: str) -> str | None:
    """``_command_targets().get(name)``, without the entry points' scan when ``name`` is
    one of ``LAZY_COMMANDS`` (theirs come first): every ``rmqsim bench``, ``fuzz``, ...
    would otherwise pay for it."""
    target = LAZY_COMMANDS.get(name)
    if target is not None and find_spec(target.split(":", 1)[0]) is not None:
        return target
    return _command_targets().get(name)


class LazyGroup(click.Group):
    """A click group whose extra commands are imported on first use (``--help`` stays fast
    and ``rmqsim run`` never imports Spark)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_command_targets()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        target = _command_target(cmd_name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        try:
            loaded = getattr(importlib.import_module(module_name), attribute)
        except ImportError as exc:
            problem = missing_extra(exc, f"rmqsim {cmd_name}")
            if problem is None:
                raise
            return _not_installed(cmd_name, problem)
        assert isinstance(loaded, click.Command), f"{target} is not a click command"
        return loaded


def _not_installed(name: str, problem: UsageError) -> click.Command:
    """Stands for a command whose extra is missing: listed by ``--help``, and when run,
    it names the ``pip install`` that fixes it (exit 2)."""

    def refuse(args: tuple[str, ...]) -> None:
        fail(str(problem))

    return click.Command(
        name,
        callback=refuse,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=f"(not installed: {SPARK_EXTRA_INSTALL})",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True},
    )


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rmqsim", prog_name="rmqsim")
def cli() -> None:
    """rmqsim: deterministic simulation and conformance harness for RocksDB-backed queues.

    Exit codes: 0 all conform, 1 a divergence was found, 2 bad usage or input,
    3 internal error.
    """


def _named_file(value: Path | None) -> Path | None:
    """``--trace`` names a file: an empty value (an unset shell variable) is a usage error."""
    if value is not None and value.name == "":
        raise click.BadParameter("is empty: name the file to write the trace to")
    return value


@cli.command("run")
@click.option("--profile", "profile_name", required=True, help="Scenario profile name.")
@click.option("--seeds", type=SEEDS, default=None, help="Seed range A:B (B excluded).")
@click.option(
    "--seed", type=click.IntRange(0, SEED_LIMIT - 1), default=None, help="A single seed."
)
@impl_option
@click.option(
    "--trace",
    "trace_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    callback=lambda ctx, param, value: _named_file(value),
    help="With --seed: write this run's trace here.",
)
@out_option("failing traces")
@steps_option
@click.option(
    "--check-every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Compare snapshots every N state-changing operations.",
)
@shrink_options
@crash_rate_option
@crash_mode_option
@save_regression_option
@expect_option
@op_timeout_option
@friendly_errors
def run_command(
    profile_name: str,
    seeds: range | None,
    seed: int | None,
    impl: str | None,
    trace_file: Path | None,
    out: Path,
    steps: int | None,
    check_every: int,
    shrink: ShrinkBudget | None,
    crash_rate: float,
    crash_mode: str,
    save_regression: Path | None,
    expect: str | None,
) -> None:
    """Run a profile over seeds in lockstep against the model; report divergences.

    A failing run is shrunk (within --shrink-ops-budget) to ``<trace>.shrunk.jsonl``."""
    from rmqsim.conformance.reporting.report import render_failure
    from rmqsim.conformance.running.gate import save_failure_or_note
    from rmqsim.conformance.running.run import run_seed
    from rmqsim.conformance.searching.shrink import shrink_and_save

    seed_range, impl = _checked_run_options(profile_name, seeds, seed, impl, trace_file, out)
    expected = _deviation_profile(expect)
    failures = 0
    seen: Counter[str] = Counter()
    total_steps = 0
    unwritten: list[str] = []
    with progress(len(seed_range), f"run {profile_name}") as bar:
        shrink_bar = ShrinkBar(bar, shrink) if shrink is not None else None
        for s in seed_range:
            result = run_seed(
                profile_name,
                s,
                impl=impl,
                steps=steps,
                check_every=check_every,
                crash_rate=crash_rate,
                crash_mode=crash_mode,
            )
            total_steps += result.steps
            if trace_file is not None:
                _write_trace(trace_file, result.trace_lines, unwritten)
            deviation = None if result.ok or expected is None else expected.match(result)
            if deviation is not None:
                seen[deviation.name] += 1
                click.echo(_deviation_line(result, deviation), err=True)
            elif not result.ok:
                failures += 1
                saved = save_failure_or_note(result, out) is not None
                if shrink_bar is not None and saved:
                    budget = shrink_bar.budget
                    shrink_and_save(result, impl=impl, budget=budget, on_run=shrink_bar.on_run)
                    shrink_bar.done()
                unwritten += [f"seed {s}: {note}" for note in result.notes
                              if note.startswith("could not write")]
                click.echo(render_failure(result), err=True)
                save_regressions([result], save_regression)
            bar.advance(bar.task_ids[0])  # raises one a finalizer swallowed (InterruptibleProgress)
    click.echo(
        f"rmqsim run: profile {profile_name}, {len(seed_range)} seed(s), "
        f"{total_steps} operations, {failures} divergence(s)" + _seen_note(seen, expected)
    )
    for line in unwritten:
        click.echo(f"rmqsim run: {line}", err=True)
    # The verdict stands; when everything conformed, a missing output is the failure.
    sys.exit(EXIT_DIVERGENCE if failures else EXIT_USAGE if unwritten else EXIT_OK)


def _seen_note(seen: Counter[str], expected: Any, what: str = "listed deviation(s)") -> str:
    """``, N <what> (name: count, ...)`` under ``--expect``, else nothing."""
    if expected is None:
        return ""
    named = ", ".join(f"{name}: {count}" for name, count in sorted(seen.items()))
    return f", {sum(seen.values())} {what} ({named or 'none'})"


def _write_trace(path: Path, lines: list[str], unwritten: list[str]) -> None:
    """``--trace``: write ``lines`` to ``path``, or note in ``unwritten`` that the machine
    refused it (a full disk); any other error propagates."""
    from rmqsim.conformance.running.trace import output_problem, write_lines

    try:
        write_lines(path, lines)
    except OSError as exc:
        problem = output_problem(exc)
        if problem is None:
            raise
        unwritten.append(f"could not write the trace {path} ({problem})")


def _deviation_profile(expect: str | None) -> Any:
    if expect is None:
        return None
    from rmqsim.conformance.reporting.deviations import load_profile

    return load_profile(expect)


def _deviation_line(result: Any, deviation: Any) -> str:
    """One line for a run that ended at a listed deviation (``--expect``)."""
    divergence = result.divergence
    issue = f"; {deviation.issue}" if deviation.issue else ""
    return (
        f"EXPECTED {deviation.name} (SPEC \"{deviation.spec}\"{issue}): {divergence.anomaly} "
        f"at step {divergence.step_index} ({divergence.step.op.kind}), {result.profile} seed "
        f"{result.seed}: the run's checking ends there"
    )


def _checked_run_options(
    profile_name: str,
    seeds: range | None,
    seed: int | None,
    impl: str | None,
    trace_file: Path | None,
    out: Path,
) -> tuple[range, str]:
    """``run``'s options checked (a ``UsageError`` or bad input otherwise): the seeds to
    run and the implementation (noting on stderr when a push consumer factory is given
    for a queue profile)."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL, load_impl
    from rmqsim.conformance.layer import layer_for_profile
    from rmqsim.conformance.running.run import spec_for_seed  # noqa: F401 (registers the layers)
    from rmqsim.scenarios.catalog import get_profile
    from rmqsim.scenarios.queue.profiles import PROFILES

    if (seeds is None) == (seed is None):
        raise UsageError("give exactly one of --seeds A:B or --seed S")
    if trace_file is not None and seed is None:
        raise UsageError("--trace needs --seed (one run, one trace)")
    get_profile(profile_name)
    impl = impl or DEFAULT_IMPL
    layer_for_profile(profile_name).resolve_impl(impl, for_replay=False)  # BadImplError
    if profile_name in PROFILES and load_impl(impl).layer == "consumer":
        click.echo(
            f"rmqsim: note: --impl {impl} is a push consumer factory: queue profile "
            f"{profile_name} checks rmqsim's own queue (consumer profiles check yours)",
            err=True,
        )
    if seeds is not None:
        seed_range = seeds
    else:
        assert seed is not None  # exactly one of the two was given (checked above)
        seed_range = range(seed, seed + 1)
    writable_dir(out)
    if trace_file is not None:
        writable_dir(trace_file.parent, f"--trace {trace_file}: directory")
    return seed_range, impl


@cli.command("replay")
@click.argument("trace_file", type=click.Path(dir_okay=False, path_type=Path))
@impl_option
@op_timeout_option
@friendly_errors
def replay_command(trace_file: Path, impl: str | None) -> None:
    """Re-execute a trace on the model and the SUT; check every recorded outcome (up to a
    crash that resolved the other legal way than recorded: then the run says so). A
    power-cut trace (crash-sweep --storage, the gate's power-loss sweep) cuts the power
    where it says and checks the recovery."""
    from rmqsim.conformance.crashing.power_trace import is_power_header
    from rmqsim.conformance.reporting.report import render_failure
    from rmqsim.conformance.running.run import parse_run_lines, replay_run_trace
    from rmqsim.conformance.running.trace import read_lines

    lines = read_lines(trace_file)  # once: the file may be a pipe
    if lines and is_power_header(lines[0]):
        _replay_power(trace_file, lines, impl)
    result = replay_run_trace(parse_run_lines(lines, trace_file), impl=impl)
    if result.ok:
        click.echo(f"rmqsim replay: {trace_file}: {result.steps} operations conform")
        for note in result.notes:
            click.echo(f"  note: {note}")
        sys.exit(EXIT_OK)
    result.trace_path = trace_file
    click.echo(render_failure(result), err=True)
    step = result.divergence.step_index if result.divergence else result.steps
    click.echo(f"rmqsim replay: {trace_file}: {result.anomaly} at operation {step}")
    sys.exit(EXIT_DIVERGENCE)


def _replay_power(trace_file: Path, lines: list[str], impl: str | None) -> None:
    """``replay`` of a power-cut trace (its ``lines``): exit 0 when the recovery keeps the
    promise, 1 with the problem when not."""
    from rmqsim.conformance.crashing.power_trace import parse_power_lines, run_power_trace

    trace = parse_power_lines(trace_file, lines)
    result = run_power_trace(trace, impl=impl)
    where = (f"{len(trace.steps)} operations, power cut at call {trace.point_in_step} of "
             f"the last, {trace.mode}, on {result.impl}")
    if result.ok:
        click.echo(f"rmqsim replay: {trace_file}: {where}: recovery keeps the "
                   f"{trace.promise} promise")
        sys.exit(EXIT_OK)
    click.echo(f"rmqsim replay: {trace_file}: {where}: {result.anomaly}: {result.problem}")
    sys.exit(EXIT_DIVERGENCE)


@cli.command("gate")
@impl_option
@click.option(
    "--seeds", type=SEEDS, default=None, help="Seed range A:B per profile (default 0:20)."
)
@click.option("--profiles", default=None, help="Comma-separated profiles (default: all standard).")
@out_option("junit.xml, summary.json and failing traces")
@steps_option
@shrink_options
@click.option(
    "--crash-sweep/--no-crash-sweep",
    "sweep",
    default=True,
    show_default=True,
    help="After the profiles, crash-sweep the first seed of each (rmqsim crash-sweep).",
)
@click.option(
    "--sweep-steps",
    type=STEPS,
    default=None,
    help="Steps per crash sweep (default: crash_sweep.DEFAULT_SWEEP_STEPS).",
)
@crash_mode_choice(
    "--sweep-crash-mode",
    "process: the crash sweep SIGKILLs the implementation in a child process "
    "(rmqsim crash-sweep --crash-mode); the profile runs stay in process.",
)
@click.option(
    "--power-loss/--no-power-loss",
    "power_loss",
    default=True,
    show_default=True,
    help="When --impl is a file-system backend (its factory takes fs=), also cut the power "
    "at every file-system call of the first seed of each profile (crash-sweep --storage).",
)
@flush_option(
    "The durability promise (sync or async) the power-loss sweep holds --impl to; "
    "default: the one its factory declares (rmqsim_flush), else sync."
)
@click.option(
    "--power-steps",
    type=STEPS,
    default=None,
    help="Steps per power-loss sweep (default: gate_power.GATE_POWER_STEPS).",
)
@crash_rate_option
@click.option(
    "--corpus",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Regression corpus to replay too (default: ./regressions when it exists).",
)
@save_regression_option
@click.option("--spark", is_flag=True, help="Run the seeds as Spark tasks (the sweep pipeline).")
@click.option("--master", default=None, help="With --spark: Spark master URL (default local[*]).")
@click.option(
    "--jobs",
    type=JOBS,
    default=None,
    help="Worker processes for the runs, shrinks and crash sweeps (default: the CPUs "
    "this process may use). The results, traces and files are those of --jobs 1.",
)
@click.option(
    "--max-failures",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Stop once N failures are known, as pytest's --maxfail (default: run everything): "
    "no new runs, sweeps or steered cases after that point of the gate's order; the "
    "failures found are shrunk and reported, with what was not run. The same seeds stop "
    "at the same point whatever --jobs is.",
)
@expect_option
@crash_mode_option
@op_timeout_option
@friendly_errors
def gate_command(
    impl: str | None,
    seeds: range | None,
    profiles: str | None,
    out: Path,
    steps: int | None,
    shrink: ShrinkBudget | None,
    sweep: bool,
    sweep_steps: int | None,
    sweep_crash_mode: str,
    power_loss: bool,
    flush: str | None,
    power_steps: int | None,
    crash_rate: float,
    corpus: Path | None,
    save_regression: Path | None,
    spark: bool,
    master: str | None,
    jobs: int | None,
    max_failures: int | None,
    expect: str | None,
    crash_mode: str,
) -> None:
    """The CI gate: the gate profiles of --impl's layer over the seeds, then a crash sweep
    of the first seed of each (and a power-loss sweep of a storage backend); JUnit XML and
    a JSON summary."""
    from rmqsim.conformance.layer import layer_for_profile
    from rmqsim.conformance.running.gate import (
        DEFAULT_GATE_SEEDS,
        GatePlan,
        GateResult,
        gate_profiles_for,
        write_outputs,
    )
    from rmqsim.conformance.running.pool import default_jobs, worker_pool

    impl, layer, promise = _gate_impl(impl, flush)
    names = parse_profiles(profiles, gate_profiles_for(layer))
    _check_gate_options(corpus, master, spark)
    runner = functools.partial(gate_runner("spark"), master=master) if spark else None
    plan = GatePlan(names, seeds or DEFAULT_GATE_SEEDS, impl, writable_dir(out), steps, shrink,
                    crash_rate, expected=_deviation_profile(expect),
                    crash_mode=crash_mode, max_failures=max_failures)  # fmt: skip
    if crash_mode == "process":  # everything through the wire protocol, sweeps included
        sweep_crash_mode = crash_mode
    gate = GateResult(impl=impl, seeds=plan.seeds, expected=plan.expected)  # as runs finish
    with (
        _outputs_when_interrupted(gate, out),
        _worker_ended(),
        worker_pool(jobs or default_jobs()) as pool,
    ):
        # The crash sweep replays a layer's scenarios where the layer allows it (the queue's);
        # others crash their own way (client and process crashes drawn by the scenario).
        swept = [name for name in names if layer_for_profile(name).crash_sweep_refusal is None]
        _gate_profiles(gate, plan, runner, pool)
        if sweep and swept:
            _gate_sweeps(gate, plan, swept, sweep_steps, sweep_crash_mode, pool)
            _gate_steer(gate, plan, pool)
            _gate_shrink_cases(gate, plan, pool)
        if power_loss:
            _gate_power_loss(gate, plan, layer, (swept, promise), power_steps, pool)
        _gate_corpus(gate, plan, corpus)
    save_regressions(gate.results, save_regression)
    try:
        junit, summary = write_outputs(gate, out)
    except OSError as exc:
        _gate_verdict_unwritten(gate, out, exc)
    _print_gate_tables(gate, summary)
    _gate_verdict(gate, junit, summary)


def _gate_corpus(gate: Any, plan: Any, corpus: Path | None) -> None:
    """The replays of the regression corpus (``--corpus``, default ./regressions when it
    exists), unless the gate stopped early."""
    from rmqsim.conformance.running.corpus import DEFAULT_CORPUS
    from rmqsim.conformance.running.gate import run_corpus

    if not _skipped(gate, plan, "the regression corpus replays"):
        run_corpus(gate, corpus or DEFAULT_CORPUS, impl=plan.impl)


def _skipped(gate: Any, plan: Any, stage: str) -> bool:
    """Whether the gate stops before ``stage`` (``--max-failures``: it knows enough
    failures; ``conformance.running.failfast``), saying so in ``gate.stopped``."""
    from rmqsim.conformance.running.failfast import stop_check
    from rmqsim.conformance.running.gate import not_run

    if not stop_check(gate, plan.max_failures, lambda: f"the stage before {stage}")():
        return False
    not_run(gate, stage)
    return True


def _check_gate_options(corpus: Path | None, master: str | None, spark: bool) -> None:
    if corpus is not None and not corpus.is_dir():
        raise UsageError(f"--corpus {corpus}: not a directory")
    if master is not None and not spark:
        raise UsageError("--master needs --spark")


def _gate_verdict_unwritten(gate: Any, out: Path, exc: OSError) -> NoReturn:
    """The gate's verdict when its JUnit XML and summary could not be written (a full
    disk): said, and kept (exit 1 for failures, else 2: the outputs are missing); an
    error that is not the machine's state propagates."""
    from rmqsim.conformance.reporting.report import render_failure
    from rmqsim.conformance.running.trace import output_problem

    problem = output_problem(exc)
    if problem is None:
        raise exc
    for failure in (gate.failures + gate.sweep_failures)[:5]:
        click.echo(render_failure(failure), err=True)
    click.echo(f"rmqsim gate: {'PASS' if gate.ok else 'FAIL'} ({len(gate.failures)} failing "
               f"runs, {len(gate.sweep_failures)} failing crash cases); could not write "
               f"junit.xml and summary.json under {out} ({problem})")
    sys.exit(EXIT_DIVERGENCE if not gate.ok else EXIT_USAGE)


@contextmanager
def _worker_ended() -> Iterator[None]:
    """A worker that ended in the middle of a task is the liveness bound's last resort
    (a call that did not give way: its message is above), which ends the gate's own
    process with ``--jobs 1``: a finding, exit 1, not an internal error."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield
    except BrokenProcessPool:
        fail(
            "a worker process ended in the middle of a run (the liveness bound's last "
            "resort: see its message above); --jobs 1 ends the gate there",
            EXIT_DIVERGENCE,
        )


def _gate_profiles(gate: Any, plan: Any, runner: Any, pool: Any) -> None:
    """The gate's profile runs (``runner``: a gate runner; None: ours, in ``pool`` when
    there is one), each added to ``gate`` as it is reported, under one progress bar."""
    from rmqsim.conformance.running.gate import run_layer_steering, run_profiles
    from rmqsim.conformance.running.run import RunResult

    with progress(len(plan.profiles) * len(plan.seeds), "gate") as bar:
        shrink_bar = ShrinkBar(bar, plan.shrink) if plan.shrink is not None else None

        def on_result(result: RunResult) -> None:
            gate.add(result)
            bar.advance(bar.task_ids[0])
            if shrink_bar is not None:
                shrink_bar.done()

        on_shrink_run = None if shrink_bar is None else shrink_bar.on_run
        if runner is None:
            ran = run_profiles(plan, on_result=on_result, on_shrink_run=on_shrink_run, pool=pool)
        else:
            ran = runner(plan, on_result=on_result, on_shrink_run=on_shrink_run)
        assert len(ran.results) == len(gate.results), "a gate runner reports every run"
    gate.stopped = ran.stopped  # None from a runner that runs every seed (--spark)
    # Then the runs layers add (stream-steer: aimed at the stream cells left empty).
    run_layer_steering(gate, plan)


def _gate_sweeps(
    gate: Any, plan: Any, swept: list[str], steps: int | None, crash_mode: str, pool: Any
) -> None:
    """The crash sweep of the first seed of each of ``swept``, added to ``gate`` in that
    order (``gate.run_sweeps``: heaviest first in a pool)."""
    from rmqsim.conformance.crashing.crash_sweep import DEFAULT_SWEEP_STEPS, SweepResult
    from rmqsim.conformance.running.failfast import stop_check
    from rmqsim.conformance.running.gate import SweepPlan, not_run, run_sweeps

    if _skipped(gate, plan, "the crash sweeps"):
        return
    sweeps = SweepPlan(plan.seeds.start, plan.impl, plan.out, steps or DEFAULT_SWEEP_STEPS,
                       crash_mode)  # fmt: skip
    stop = stop_check(gate, plan.max_failures,
                      lambda: f"the crash sweep of {gate.sweeps[-1].profile}")
    with progress(len(swept), "crash sweep") as bar:

        def on_sweep(done: SweepResult) -> None:
            gate.sweeps.append(done)
            bar.advance(bar.task_ids[0])

        run_sweeps(swept, sweeps, on_sweep=on_sweep, pool=pool, weighed_by=gate, stop=stop)
    not_run(gate, "crash sweep(s)", len(swept) - len(gate.sweeps))


def _gate_steer(gate: Any, plan: Any, pool: Any) -> None:
    """A crash case at the first place the runs reached each crash cell the sweeps did
    not arm (``conformance.queue.steer``), added to ``gate``."""
    from rmqsim.conformance.running.gate import run_steering

    with progress(0, "steered crash cases"):
        run_steering(gate, plan, pool=pool)


def _gate_shrink_cases(gate: Any, plan: Any, pool: Any) -> None:
    """Shrink the first failing crash cases (``gate.shrink_crash_cases``), under a bar."""
    from rmqsim.conformance.running.gate import (
        MAX_SHRUNK_FAILURES,
        crash_case_failures,
        shrink_crash_cases,
    )

    count = min(len(crash_case_failures(gate)), MAX_SHRUNK_FAILURES)
    if plan.shrink is None or not count:
        return
    with progress(count, "shrink crash cases") as bar:
        shrink_bar = ShrinkBar(bar, plan.shrink)

        def on_shrunk(_case: Any) -> None:
            bar.advance(bar.task_ids[0])
            shrink_bar.done()

        shrink_crash_cases(gate, plan, pool=pool, on_shrink_run=shrink_bar.on_run,
                           on_shrunk=on_shrunk)  # fmt: skip


def _gate_impl(impl: str | None, flush: str | None) -> tuple[str, str, str | None]:
    """The gate's ``--impl`` (default ours), loaded and checked: its name, its layer and
    the promise its power-loss sweep holds it to (None: it is no storage backend)."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL, LAYER_FORMS, load_impl

    loaded = load_impl(impl or DEFAULT_IMPL)
    if loaded.layer != "storage":
        if flush is not None:
            raise UsageError(f"--flush: --impl {loaded.name} is a {LAYER_FORMS[loaded.layer]} "
                             "factory, not a storage backend (a factory taking fs=)")
        return loaded.name, loaded.layer, None
    return loaded.name, loaded.layer, flush or loaded.flush


def _gate_power(
    gate: Any, plan: Any, swept: list[str], promise: str, steps: int | None, pool: Any
) -> None:
    """The power-loss sweep of the first seed of each of ``swept``, added to ``gate``,
    holding the storage backend ``plan.impl`` to ``promise``
    (``conformance.crashing.gate_power``)."""
    from rmqsim.conformance.crashing.gate_power import (
        GATE_POWER_STEPS,
        PowerPlan,
        run_power_sweeps,
        steer_power_cells,
    )
    from rmqsim.conformance.crashing.power_loss import PowerSweepResult
    from rmqsim.conformance.running.gate import GATE_PROFILES

    power = PowerPlan(plan.impl, promise, plan.out, steps or GATE_POWER_STEPS, plan.shrink)
    with progress(len(swept), f"power-loss sweep ({promise})") as bar:

        def on_sweep(done: PowerSweepResult) -> None:
            gate.power_sweeps.append(done)
            bar.advance(bar.task_ids[0])

        run_power_sweeps(swept, plan.seeds.start, power, pool=pool, on_sweep=on_sweep)
    # Then a case per power-loss cell the sweeps left empty, on longer scenarios.
    with progress(0, "steered power cuts"):
        gate.power_sweeps.extend(steer_power_cells([*swept, *GATE_PROFILES], plan.seeds.start,
                                                   power, list(gate.power_sweeps)))


def _gate_power_loss(
    gate: Any, plan: Any, layer: str, swept: tuple[list[str], str | None], steps: int | None,
    pool: Any,
) -> None:
    """The gate's power-loss sweeps: a storage backend's of ``swept``'s queue profiles held
    to its promise, or a message store's of the storage profiles."""
    profiles, promise = swept
    applies = bool(profiles and promise is not None) or layer == "store"
    if not applies or _skipped(gate, plan, "the power-loss sweeps"):
        return
    if profiles and promise is not None:
        _gate_power(gate, plan, profiles, promise, steps, pool)
    if layer == "store":
        _gate_store_power(gate, plan, plan.profiles, steps)


def _gate_store_power(gate: Any, plan: Any, names: Sequence[str], steps: int | None) -> None:
    """The storage layer's power-loss sweep of the first seed of each profile: in process
    when the message store's factory takes ``fs=``; else through FUSE (a child process),
    of ``FUSE_GATE_PROFILES`` only, one case per (call, mode) cell; skipped, saying why,
    where FUSE cannot be used."""
    from rmqsim.conformance.adapter import load_impl
    from rmqsim.conformance.crashing.power_fuse import FuseUnavailableError
    from rmqsim.conformance.store.power import (
        DEFAULT_STORE_POWER_STEPS,
        FUSE_GATE_PROFILES,
        FUSE_GATE_STEPS,
        store_disk_way,
        store_power_sweep,
        takes_fs,
    )

    factory = load_impl(plan.impl).factory
    through = "fs" if takes_fs(factory) else "fuse"
    try:  # a store in another process: through FUSE, one case per cell, few steps
        way = store_disk_way(plan.impl, through)
    except FuseUnavailableError as exc:
        click.echo(f"power-loss sweep: skipped: --impl {plan.impl} takes no fs= and FUSE "
                   f"cannot be used here: {exc}", err=True)
        return
    profiles = names if through == "fs" else [n for n in names if n in FUSE_GATE_PROFILES]
    with progress(len(profiles), f"power-loss sweep (storage, {through})") as bar:
        for name in profiles:
            gate.power_sweeps.append(store_power_sweep(
                name, plan.seeds.start, way, impl=plan.impl, one_per_cell=through == "fuse",
                steps=steps or (DEFAULT_STORE_POWER_STEPS if through == "fs"
                                else FUSE_GATE_STEPS)))
            bar.advance(bar.task_ids[0])


def _gate_verdict(gate: Any, junit: Path, summary: Path) -> None:
    """The first failures' reports, the one-line verdict and the exit code."""
    from rmqsim.conformance.reporting.report import render_failure
    from rmqsim.conformance.running.failfast import stop_note
    from rmqsim.conformance.store.power import case_command

    for failure in (gate.failures + gate.sweep_failures)[:5]:
        click.echo(render_failure(failure), err=True)
    for power in [s for s in gate.power_sweeps if not s.ok][:5]:
        first = power.failures[0] if power.failures else None
        click.echo(f"POWER LOSS {power.profile} seed {power.seed} ({power.promise}): "
                   f"{len(power.failures)} failing case(s)"
                   + (f"; first: {first.case.label()}: {first.problem}" if first else
                      f"; the run without power cuts failed: {power.base_problem}")
                   + (f"\n  rmqsim replay {power.trace_paths[0]}" if power.trace_paths else
                      f"\n  {case_command(power, first.case)}" if first else ""),
                   err=True)  # fmt: skip
    if gate.stopped is not None:
        click.echo(f"rmqsim gate: {stop_note(gate.stopped)}")
    click.echo(
        f"rmqsim gate: {'PASS' if gate.ok else 'FAIL'} ({len(gate.failures)} failing runs, "
        f"{len(gate.sweep_failures)} failing crash cases"
        + (f", {_unlisted_power_cases(gate)} failing power-cut cases"
           if gate.power_sweeps else "")
        + _expected_note(gate)
        + f"); {junit}, {summary}"
    )
    sys.exit(EXIT_OK if gate.ok else EXIT_DIVERGENCE)


def _unlisted_power_cases(gate: Any) -> int:
    """Failing power-cut cases that show no listed deviation."""
    return sum(len(s.failures) for s in gate.power_sweeps) - len(gate.power_deviations())


def _expected_note(gate: Any) -> str:
    """``, N ended at listed deviations (name: count, ...)`` under ``--expect``."""
    seen = Counter(d.name for _, d in [*gate.deviations(), *gate.power_deviations()])
    return _seen_note(seen, gate.expected, "ended at listed deviations")


def _print_gate_tables(gate: Any, summary: Path) -> None:
    """The gate's table of profiles, when it swept its table of crash sweeps, and what
    its coverage map says (``summary``: the summary.json just written)."""
    from rich.console import Console
    from rich.table import Table

    seed_range = gate.seeds
    console = Console()
    table = Table(title=f"rmqsim gate: {gate.impl}, seeds {seed_range.start}:{seed_range.stop}")
    for column in ("profile", "runs", "failed", "operations", "ops/s", "anomalies"):
        table.add_column(column, justify="left" if column in ("profile", "anomalies") else "right")
    for s in gate.summaries.values():
        rate = s.steps / s.wall_s if s.wall_s else 0.0
        anomalies = ", ".join(f"{k}×{v}" for k, v in sorted(s.anomalies.items())) or "-"
        table.add_row(
            s.profile, str(s.runs), str(s.failed), str(s.steps), f"{rate:,.0f}", anomalies
        )
    console.print(table)
    if gate.sweeps:
        sweeps = Table(title=f"crash sweep: seed {seed_range.start}")
        for column in ("profile", "steps", "cases", "points", "resolved", "failed", "seconds"):
            sweeps.add_column(column, justify="left" if column == "profile" else "right")
        for s in gate.sweeps:
            resolved = " ".join(f"{k} {v}" for k, v in sorted(s.resolutions.items()))
            failed = s.failed
            sweeps.add_row(
                s.profile,
                str(s.steps),
                str(len(s.cases)),
                str(len(s.points)),
                resolved,
                str(failed),
                f"{s.wall_s:.1f}",
            )
        console.print(sweeps)
    from rmqsim.conformance.layer import gate_hooks, registered_layers

    # The lines say what summary.json says: each layer's entries, as written.
    written = json.loads(summary.read_text())
    for layer in registered_layers():
        for line in gate_hooks(layer).summary_lines(written):
            click.echo(line)
    if gate.power_sweeps:
        console.print(_power_table(gate))
    if "power_coverage" in written:
        from rmqsim.conformance.crashing.power_cells import power_cells_lines

        for line in power_cells_lines(written["power_coverage"]):
            click.echo(line)


def _power_table(gate: Any) -> Any:
    """The gate's table of power-loss sweeps."""
    from rich.table import Table

    table = Table(title=f"power-loss sweep: seed {gate.seeds.start}")
    for column in ("profile", "promise", "steps", "cases", "failed", "seconds"):
        table.add_column(column, justify="left" if column in ("profile", "promise") else "right")
    for s in gate.power_sweeps:
        failed = len(s.failures) + (0 if s.base_problem is None else 1)
        table.add_row(s.label, s.promise, str(s.steps), str(len(s.cases)), str(failed),
                      f"{s.wall_s:.1f}")
    return table


@contextmanager
def _outputs_when_interrupted(gate: Any, out: Path) -> Iterator[None]:
    """Within the block, SIGINT or SIGTERM (``KeyboardInterrupt``, ``Terminated``) first
    writes ``gate``'s JUnit XML and JSON summary of what has finished, marked interrupted,
    then goes on (the command exits 130 or 143)."""
    from rmqsim.conformance.running.gate import write_outputs

    try:
        yield
    except KeyboardInterrupt as exc:
        gate.interrupted_by = interrupt_signal(exc).name
        junit, summary = write_outputs(gate, out)
        click.echo(
            f"rmqsim gate: INTERRUPTED by {gate.interrupted_by} after {len(gate.results)} "
            f"run(s) ({len(gate.failures)} failing); {junit}, {summary}"
        )
        raise


def main() -> None:
    """Console entry point (``rmqsim``)."""
    cli(prog_name="rmqsim")
