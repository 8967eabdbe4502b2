"""The ``rmqsim`` command line.

Exit codes are part of the interface: 0 all conform, 1 a divergence was found, 2 bad usage
or bad input (one line naming what was wrong, never a traceback), 3 an internal error of
rmqsim itself. Heavy modules are imported inside the commands so that ``--help`` is fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from conformance.bench import bench

EXIT_OK = 0
EXIT_DIVERGENCE = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

F = TypeVar("F", bound=Callable[..., Any])


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"rmqsim: error: {message}", err=True)
    sys.exit(code)


def friendly_errors(func: F) -> F:
    """Turn known bad-input errors into one line and exit 2; anything else into exit 3."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from conformance.adapter import BadImplError
        from conformance.lockstep import InjectedCrash
        from conformance.trace import TraceFormatError
        from scenarios.profiles import ProfileError

        try:
            return func(*args, **kwargs)
        except (UsageError, BadImplError, TraceFormatError, ProfileError) as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except click.exceptions.Exit:
            raise
        except (Exception, InjectedCrash) as exc:
            fail(f"internal error ({type(exc).__name__}: {exc}); please report it", EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


class SeedRange(click.ParamType):
    """``A:B`` (seeds A up to but excluding B), or a single seed ``S``."""

    name = "A:B"

    def convert(self, value: Any, param: Any, ctx: Any) -> range:
        if isinstance(value, range):
            return value
        text = str(value)
        try:
            if ":" in text:
                start_text, stop_text = text.split(":", 1)
                start, stop = int(start_text), int(stop_text)
            else:
                start = int(text)
                stop = start + 1
        except ValueError:
            self.fail(f"{text!r} is not a seed range like 0:200", param, ctx)
        if start < 0 or stop <= start:
            self.fail(f"{text!r}: need 0 <= A < B", param, ctx)
        return range(start, stop)


SEEDS = SeedRange()


def writable_dir(path: Path) -> Path:
    """Create ``path`` if needed and check it is writable, or raise UsageError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".rmqsim-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"--out {path}: not a writable directory ({exc.strerror or exc})"
        ) from None
    return path


def progress(total: int, description: str) -> Any:
    """A progress bar on stderr (quiet when stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )
    bar.add_task(description, total=total)
    return bar


impl_option = click.option(
    "--impl",
    default=None,
    metavar="MOD:FACTORY",
    help="The implementation under test: a factory(path=, config=, clock=, faults=). "
    "Default: ours (impl.RocksMQ).",
)


steps_option = click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=None,
    help="Operations per run (default: the profile's own budget).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rmqsim", prog_name="rmqsim")
def cli() -> None:
    """rmqsim: deterministic simulation and conformance harness for RocksDB-backed queues.

    Exit codes: 0 all conform, 1 a divergence was found, 2 bad usage or input,
    3 internal error.
    """


@cli.command("run")
@click.option("--profile", "profile_name", required=True, help="Scenario profile name.")
@click.option("--seeds", type=SEEDS, default=None, help="Seed range A:B (B excluded).")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="A single seed.")
@impl_option
@click.option(
    "--trace",
    "trace_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --seed: write this run's trace here.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("rmqsim-out"),
    show_default=True,
    help="Where failing traces go.",
)
@steps_option
@click.option(
    "--check-every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Compare snapshots every N state-changing operations.",
)
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
) -> None:
    """Run a profile over seeds in lockstep against the model; report divergences."""
    from conformance.adapter import DEFAULT_IMPL, load_factory
    from conformance.gate import save_failure
    from conformance.report import render_failure
    from conformance.run import run_seed
    from conformance.trace import write_lines
    from scenarios.profiles import get_profile

    if (seeds is None) == (seed is None):
        raise UsageError("give exactly one of --seeds A:B or --seed S")
    if trace_file is not None and seed is None:
        raise UsageError("--trace needs --seed (one run, one trace)")
    get_profile(profile_name)
    impl = impl or DEFAULT_IMPL
    load_factory(impl)
    seed_range = seeds if seeds is not None else range(seed, seed + 1)  # type: ignore[operator]
    writable_dir(out)
    failures = 0
    total_steps = 0
    with progress(len(seed_range), f"run {profile_name}") as bar:
        for s in seed_range:
            result = run_seed(profile_name, s, impl=impl, steps=steps, check_every=check_every)
            total_steps += result.steps
            if trace_file is not None:
                write_lines(trace_file, result.trace_lines)
            if not result.ok:
                failures += 1
                save_failure(result, out)
                click.echo(render_failure(result), err=True)
            bar.advance(bar.task_ids[0])
    click.echo(
        f"rmqsim run: profile {profile_name}, {len(seed_range)} seed(s), "
        f"{total_steps} operations, {failures} divergence(s)"
    )
    sys.exit(EXIT_DIVERGENCE if failures else EXIT_OK)


@cli.command("replay")
@click.argument("trace_file", type=click.Path(dir_okay=False, path_type=Path))
@impl_option
@friendly_errors
def replay_command(trace_file: Path, impl: str | None) -> None:
    """Re-execute a trace on the model and the SUT; check every recorded outcome."""
    from conformance.report import render_failure
    from conformance.run import replay_trace
    from conformance.trace import read_trace

    trace = read_trace(trace_file)
    result = replay_trace(trace, impl=impl)
    if result.ok:
        click.echo(f"rmqsim replay: {trace_file}: {result.steps} operations conform")
        sys.exit(EXIT_OK)
    result.trace_path = trace_file
    click.echo(render_failure(result), err=True)
    sys.exit(EXIT_DIVERGENCE)


@cli.command("gate")
@impl_option
@click.option(
    "--seeds", type=SEEDS, default=None, help="Seed range A:B per profile (default 0:20)."
)
@click.option("--profiles", default=None, help="Comma-separated profiles (default: all standard).")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("rmqsim-out"),
    show_default=True,
    help="Where junit.xml, summary.json and failing traces go.",
)
@steps_option
@friendly_errors
def gate_command(
    impl: str | None, seeds: range | None, profiles: str | None, out: Path, steps: int | None
) -> None:
    """The CI gate: every standard profile over the seeds; JUnit XML and a JSON summary."""
    from rich.console import Console
    from rich.table import Table

    from conformance.adapter import DEFAULT_IMPL, load_factory
    from conformance.gate import DEFAULT_GATE_SEEDS, GATE_PROFILES, run_profiles, write_outputs
    from conformance.report import render_failure
    from scenarios.profiles import get_profile

    impl = impl or DEFAULT_IMPL
    load_factory(impl)
    names = tuple(p.strip() for p in profiles.split(",")) if profiles else GATE_PROFILES
    for name in names:
        get_profile(name)
    seed_range = seeds or DEFAULT_GATE_SEEDS
    writable_dir(out)
    with progress(len(names) * len(seed_range), "gate") as bar:
        gate = run_profiles(
            names,
            seed_range,
            impl=impl,
            out=out,
            steps=steps,
            on_result=lambda _r: bar.advance(bar.task_ids[0]),
        )
    junit, summary = write_outputs(gate, out)
    console = Console()
    table = Table(title=f"rmqsim gate: {impl}, seeds {seed_range.start}:{seed_range.stop}")
    for column in ("profile", "runs", "failed", "operations", "ops/s", "anomalies"):
        table.add_column(column, justify="left" if column in ("profile", "anomalies") else "right")
    for s in gate.summaries.values():
        rate = s.steps / s.wall_s if s.wall_s else 0.0
        anomalies = ", ".join(f"{k}×{v}" for k, v in sorted(s.anomalies.items())) or "-"
        table.add_row(
            s.profile, str(s.runs), str(s.failed), str(s.steps), f"{rate:,.0f}", anomalies
        )
    console.print(table)
    for failure in gate.failures[:5]:
        click.echo(render_failure(failure), err=True)
    click.echo(
        f"rmqsim gate: {'PASS' if gate.ok else 'FAIL'} ({len(gate.failures)} failing runs); "
        f"{junit}, {summary}"
    )
    sys.exit(EXIT_OK if gate.ok else EXIT_DIVERGENCE)


cli.add_command(bench)


def main() -> None:
    """Console entry point (``rmqsim``)."""
    cli(prog_name="rmqsim")
