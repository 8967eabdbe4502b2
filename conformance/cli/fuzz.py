"""``rmqsim fuzz``: property-based fuzzing of an implementation
(``conformance.searching.stateful``).

Exit 0 when no example failed; 1 with the shrunk program, the failure report and a trace
file (which ``rmqsim replay`` reproduces) when one did; 2 for bad usage.

A campaign runs in rounds (``stateful.RoundSpec``) and prints a line per round: examples,
operations, coverage and what is new, failures. ``--budget 60s`` bounds it by time,
``--jobs 2`` runs rounds side by side, ``--db DIR`` keeps hypothesis's example database
there and resumes a campaign after its last round.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_OK,
    JOBS,
    SEED_LIMIT,
    STEPS,
    UsageError,
    friendly_errors,
    impl_option,
    op_timeout_option,
    out_option,
    save_regression_option,
    save_regressions,
    writable_dir,
)
from rmqsim.conformance.running import interrupts

__all__ = ["LAYER_NAMES", "PROFILE_NAMES", "Duration", "fuzz_command"]

if TYPE_CHECKING:
    from rmqsim.conformance.searching.stateful import FuzzResult, RoundResult

#: The fuzz profiles (``conformance.searching.stateful.FUZZ_PROFILES``), restated so that ``--help``
#: does not import hypothesis; a test keeps the two equal.
PROFILE_NAMES = ("dev", "ci", "nightly")
#: The layers a fuzzer drives (``conformance.searching.fuzz_layers.fuzzable_layers()``), restated
#: for the same reason.
LAYER_NAMES = ("queue", "consumer", "stream", "store")
#: Seconds per unit of ``--budget``.
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


class Duration(click.ParamType):
    """A positive duration: ``90``, ``90s``, ``10m`` or ``2h``; converted to seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        text = str(value).strip().lower()
        unit = _DURATION_UNITS.get(text[-1:])
        number = text[:-1] if unit is not None else text
        try:
            seconds = float(number) * (unit or 1.0)
        except ValueError:
            seconds = -1.0
        if not 0 < seconds < float("inf"):
            self.fail(f"{value!r} is not a duration such as 90s, 10m or 2h", param, ctx)
        return seconds


class _SettingsProfile(click.Choice):
    """``--profile`` of ``fuzz`` names hypothesis settings, where every other command's
    names a scenario profile: a scenario profile given here gets an error that says so,
    not only the list of choices."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            from rmqsim.scenarios.consumer.profiles import CONSUMER_PROFILES
            from rmqsim.scenarios.queue.profiles import PROFILES
            from rmqsim.scenarios.stream.profiles import STREAM_PROFILES

            if value in PROFILES or value in CONSUMER_PROFILES or value in STREAM_PROFILES:
                self.fail(
                    f"{value!r} is a scenario profile (rmqsim run --profile); fuzz's "
                    f"--profile picks hypothesis settings ({', '.join(PROFILE_NAMES)}): "
                    "fuzz draws its own operations",
                    param,
                    ctx,
                )
            raise


@click.command("fuzz")
@impl_option
@click.option(
    "--layer",
    type=click.Choice(LAYER_NAMES),
    default=None,
    help="The layer to fuzz: the queue (a state machine of its operations), or the push "
    "consumer, the streams or the message store (hypothesis draws every choice of the "
    "layer's simulation, over its gate profiles). Default: every layer the gate of --impl "
    "runs (a queue or a storage backend: the queue, consumer and stream layers over it; "
    "else its own); without --impl, every layer (ours), the store too.",
)
@click.option(
    "--profile",
    type=_SettingsProfile(PROFILE_NAMES),
    default="ci",
    show_default=True,
    help="Hypothesis settings: dev (quick), ci (bounded), nightly (many examples).",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=None,
    help="Examples to generate (default: the profile's).",
)
@click.option(
    "--steps",
    type=STEPS,
    default=None,
    help="Most operations per example (default: the profile's).",
)
@click.option(
    "--seed",
    type=click.IntRange(0, SEED_LIMIT - 1),
    default=None,
    help="Seed of the campaign (default: 0 for ci, a fresh one, printed, otherwise).",
)
@click.option(
    "--budget",
    type=Duration(),
    default=None,
    help="Start rounds until this much wall time is spent (90s, 10m, 2h); the summary "
    "prints the --examples that repeat the campaign.",
)
@click.option(
    "--jobs",
    type=JOBS,
    default=1,
    show_default=True,
    help="Worker processes running rounds side by side (same rounds, same results).",
)
@click.option(
    "--db",
    "database",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep hypothesis's example database in DIR; a campaign there resumes after its "
    "last round (not deterministic: what the database holds steers generation).",
)
@click.option(
    "--corpus",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Regression corpus whose programs examples may start from (default: "
    "./regressions if it exists).",
)
@out_option("the trace of a failure")
@save_regression_option
@op_timeout_option
@friendly_errors
def fuzz_command(
    impl: str | None,
    layer: str | None,
    profile: str,
    examples: int | None,
    steps: int | None,
    seed: int | None,
    budget: float | None,
    jobs: int,
    database: Path | None,
    corpus: Path | None,
    out: Path,
    save_regression: Path | None,
) -> None:
    """Fuzz the implementation, layer after layer (every layer by default), with hypothesis
    in lockstep with the model; a failure is shrunk to a short program and written as a
    replayable trace."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL
    from rmqsim.conformance.running.corpus import DEFAULT_CORPUS
    from rmqsim.conformance.searching.stateful import fuzz

    layers = _fuzzed_layers(impl, layer)
    impl = impl or DEFAULT_IMPL
    writable_dir(out)
    if database is not None:
        writable_dir(database, "--db")
    if corpus is not None and not corpus.is_dir():
        raise UsageError(f"--corpus {corpus}: no such directory")
    failures = []
    for name in layers:
        try:
            result = fuzz(
                impl, layer=name, profile=profile, examples=examples, steps=steps, seed=seed,
                budget_s=budget, jobs=jobs, corpus=corpus or DEFAULT_CORPUS,
                database=None if database is None or len(layers) == 1 else database / name,
                on_round=_progress,
            )  # fmt: skip
        except ValueError as exc:  # a --db holding another campaign
            raise UsageError(str(exc)) from None
        _summary(result.impl, result)
        if result.failure is not None:
            _report_failure(result, out)
            failures.append(result.failure)
    if not failures:
        click.echo(f"rmqsim fuzz: no failure found ({', '.join(layers)})")
        sys.exit(EXIT_OK)
    save_regressions(failures, save_regression)
    sys.exit(EXIT_DIVERGENCE)


def _fuzzed_layers(impl: str | None, layer: str | None) -> list[str]:
    """The layers a campaign fuzzes (``--layer``'s help): ``layer``; else those the gate of
    ``impl`` runs; else every layer a fuzzer drives."""
    from rmqsim.conformance.adapter import QUEUE_LAYERS, load_impl
    from rmqsim.conformance.layer import layer_named
    from rmqsim.conformance.searching.fuzz_layers import fuzzable_layers

    if layer is not None:
        return [layer]
    if impl is None:
        return list(fuzzable_layers())
    impl_layer = load_impl(impl).layer
    if impl_layer not in QUEUE_LAYERS:
        return [impl_layer]
    return [name for name in fuzzable_layers()
            if getattr(layer_named(name), "above_queue", True)]


def _report_failure(result: FuzzResult, out: Path) -> None:
    """A campaign's failure: saved under ``out``, its program and report on stderr."""
    from rmqsim.conformance.reporting.report import render_failure
    from rmqsim.conformance.running.gate import save_failure
    from rmqsim.conformance.searching.stateful import render_program

    failure = result.failure
    assert failure is not None
    save_failure(failure, out)
    click.echo(
        f"rmqsim fuzz: FAILURE {failure.anomaly} found in the {result.layer} layer after "
        f"{result.examples_to_find} example(s), shrunk to {failure.steps} step(s)",
        err=True,
    )
    click.echo(render_program(failure), err=True)
    click.echo(render_failure(failure), err=True)
    if result.reproduce_line:
        click.echo(f"  hypothesis {result.reproduce_line.strip()}", err=True)


def _progress(campaign: FuzzResult, done: RoundResult) -> None:
    """One line per round, on stderr: what the campaign has done so far; then an
    interruption a finalizer swallowed (``conformance.running.interrupts``) stops it."""
    interrupts.raise_if_interrupted()
    click.echo(
        f"rmqsim fuzz: round {done.index}: {campaign.examples} examples, {campaign.steps} "
        f"operations, {campaign.crashes_injected} crashes injected, coverage "
        f"{len(campaign.coverage)} (+{campaign.new_coverage} new), "
        f"{1 if done.failure else 0} failure(s), "
        f"{campaign.wall_s:.0f}s",
        err=True,
    )


def _summary(impl: str, result: FuzzResult) -> None:
    rate = result.examples / result.wall_s if result.wall_s else 0.0
    resumed = f" (resumed at round {result.first_round})" if result.first_round else ""
    click.echo(
        f"rmqsim fuzz: {impl}, {result.layer} layer, profile {result.profile}, "
        f"seed {result.seed}{resumed}: "
        f"{result.rounds} rounds, {result.examples} examples, {result.steps} operations, "
        f"{result.crashes_injected} crashes injected, coverage {len(result.coverage)}, in "
        f"{result.wall_s:.1f}s ({rate:.1f} examples/s, {result.cpu_s:.1f} CPU s); "
        f"stopped by {result.stopped_by}"
    )
    if result.stopped_by == "budget":
        click.echo(f"rmqsim fuzz: the same rounds again: {result.repro_command()}")
