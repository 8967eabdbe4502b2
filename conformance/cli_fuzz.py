"""``rmqsim fuzz``: property-based fuzzing of an implementation (``conformance.stateful``).

Exit 0 when no example failed; 1 with the shrunk program, the failure report and a trace
file (which ``rmqsim replay`` reproduces) when one did; 2 for bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from rmqsim.conformance.cli_common import (
    EXIT_DIVERGENCE,
    EXIT_OK,
    friendly_errors,
    impl_option,
    op_timeout_option,
    out_option,
    save_regression_option,
    save_regressions,
    writable_dir,
)

#: The fuzz profiles (``conformance.stateful.FUZZ_PROFILES``), restated so that ``--help``
#: does not import hypothesis; a test keeps the two equal.
PROFILE_NAMES = ("dev", "ci", "nightly")


class _SettingsProfile(click.Choice):
    """``--profile`` of ``fuzz`` names hypothesis settings, where every other command's
    names a scenario profile: a scenario profile given here gets an error that says so,
    not only the list of choices."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            from rmqsim.scenarios.consumer_profiles import CONSUMER_PROFILES
            from rmqsim.scenarios.profiles import PROFILES

            if value in PROFILES or value in CONSUMER_PROFILES:
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
    type=click.IntRange(min=1),
    default=None,
    help="Most operations per example (default: the profile's).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=None,
    help="Seed of the campaign (default: 0 for ci, a fresh one, printed, otherwise).",
)
@out_option("the trace of a failure")
@save_regression_option
@op_timeout_option
@friendly_errors
def fuzz_command(
    impl: str | None,
    profile: str,
    examples: int | None,
    steps: int | None,
    seed: int | None,
    out: Path,
    save_regression: Path | None,
) -> None:
    """Fuzz the implementation with a hypothesis state machine in lockstep with the model;
    a failure is shrunk to a short program and written as a replayable trace."""
    from rmqsim.conformance.adapter import DEFAULT_IMPL, load_factory
    from rmqsim.conformance.gate import save_failure
    from rmqsim.conformance.report import render_failure
    from rmqsim.conformance.stateful import fuzz, render_program

    impl = impl or DEFAULT_IMPL
    load_factory(impl)
    writable_dir(out)
    result = fuzz(impl, profile=profile, examples=examples, steps=steps, seed=seed)
    rate = result.examples / result.wall_s if result.wall_s else 0.0
    click.echo(
        f"rmqsim fuzz: {impl}, profile {profile}, seed {result.seed}: {result.examples} "
        f"examples, {result.steps} operations, {result.crashes_injected} crashes injected "
        f"in {result.wall_s:.1f}s ({rate:.1f} examples/s)"
    )
    if result.failure is None:
        click.echo("rmqsim fuzz: no failure found")
        sys.exit(EXIT_OK)
    failure = result.failure
    save_failure(failure, out)
    click.echo(
        f"rmqsim fuzz: FAILURE {failure.anomaly} found after {result.examples_to_find} "
        f"example(s), shrunk to {failure.steps} step(s)",
        err=True,
    )
    click.echo(render_program(failure), err=True)
    click.echo(render_failure(failure), err=True)
    if result.reproduce_line:
        click.echo(f"  hypothesis {result.reproduce_line.strip()}", err=True)
    save_regressions([failure], save_regression)
    sys.exit(EXIT_DIVERGENCE)
