"""Pieces every ``rmqsim`` command shares: exit codes, the one-line error handling, the seed
range type, progress bars and the common options.

Command modules (``conformance.cli`` and the lazily loaded ones listed there, and plug-ins
from the ``rmqsim.commands`` entry point group) import from here, never from each other, so
that adding a command touches one module.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from rmqsim.conformance.errors import (  # the command line's exit codes and usage error
    EXIT_DIVERGENCE,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)
from rmqsim.conformance.running import interrupts
from rmqsim.conformance.running.interrupts import (  # re-exported for commands and plug-ins
    Terminated,
    interrupt_exit_code,
    interrupt_signal,
    signals_raise,
)
from rmqsim.conformance.searching.shrink_budget import (
    DEFAULT_SHRINK_OPERATIONS,
    ShrinkBudget,
    ShrinkStats,
)

__all__ = [
    "DEFAULT_OUT",
    "EXIT_DIVERGENCE",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "FLUSH_CHOICES",
    "JOBS",
    "MAX_JOBS",
    "MAX_OP_TIMEOUT_S",
    "MAX_STEPS",
    "SEEDS",
    "SEED_LIMIT",
    "SPARK_EXTRA_INSTALL",
    "SPARK_EXTRA_MODULES",
    "STEPS",
    "CommandFailed",
    "F",
    "FiniteFloatRange",
    "InterruptibleProgress",
    "SeedRange",
    "ShrinkBar",
    "Terminated",
    "UsageError",
    "crash_mode_choice",
    "crash_mode_option",
    "crash_rate_option",
    "expect_option",
    "fail",
    "flush_option",
    "friendly_errors",
    "impl_option",
    "interrupt_exit_code",
    "interrupt_signal",
    "missing_extra",
    "op_timeout_option",
    "ops_budget_option",
    "out_option",
    "parse_profiles",
    "progress",
    "save_regression_option",
    "save_regressions",
    "shrink_options",
    "signals_raise",
    "steps_option",
    "time_budget_option",
    "writable_dir",
]

F = TypeVar("F", bound=Callable[..., Any])


#: Modules only reports/ uses (sweeps, reports, ``gate --spark``): they come with the
#: ``spark`` extra, not with the core install.
SPARK_EXTRA_MODULES = frozenset(
    {"pyspark", "py4j", "pyarrow", "pandas", "matplotlib", "jinja2", "numpy"}
)
#: What installs them.
SPARK_EXTRA_INSTALL = "pip install 'rmqsim[spark]'"


def missing_extra(exc: ImportError, what: str) -> UsageError | None:
    """The usage error naming the ``pip install`` that fixes ``exc`` when ``exc`` is a
    module of an extra that is not installed (None when it is anything else: a bug)."""
    name = (exc.name or "").partition(".")[0]
    if name not in SPARK_EXTRA_MODULES:
        return None
    return UsageError(
        f"{what} needs {name}, which is not installed: it comes with the spark extra "
        f"({SPARK_EXTRA_INSTALL})"
    )


class CommandFailed(SystemExit):
    """A command's end through ``fail``: its error line is its last (no timing line)."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"rmqsim: error: {message}", err=True)
    raise CommandFailed(code)


@contextmanager
def _timed() -> Iterator[None]:
    """The command's progress board while it runs (``clock.watched``: a heartbeat when
    stderr is not a terminal) and, when it ends with a verdict (exit 0 or 1, not through
    ``fail``), its wall and CPU time as its last line on stderr."""
    from rmqsim.conformance.cli.clock import CommandClock, watched

    context = click.get_current_context(silent=True)
    path = context.command_path.split()[1:] if context is not None else []
    clock = CommandClock(" ".join(["rmqsim", *path]))  # as `rmqsim` names it, whatever argv[0]
    from rich.console import Console

    terminal = Console(stderr=True).is_terminal
    with watched(clock, terminal) as board:
        try:
            yield
        except CommandFailed:
            raise
        except SystemExit as exc:
            if exc.code in (None, EXIT_OK, EXIT_DIVERGENCE) and board.clock is clock:
                _print_timing(clock)
            raise
        else:
            if board.clock is clock:
                _print_timing(clock)


def _print_timing(clock: Any) -> None:
    sys.stdout.flush()
    click.echo(clock.summary(), err=True)


def friendly_errors(func: F) -> F:
    """Turn known bad-input errors into one line and exit 2, and so an output the machine
    could not store (a full or read-only disk: ``trace.output_problem``); anything else
    into exit 3.

    ``RMQSIM_WORKDIR`` is checked first (every command creates its temporary directories
    there). SIGINT and SIGTERM unwind the command (``signals_raise``) and exit with
    130 and 143."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rmqsim.conformance.adapter import BadImplError
        from rmqsim.conformance.running.lockstep import InjectedCrash
        from rmqsim.conformance.running.scratch import ScratchDirError, scratch_root
        from rmqsim.conformance.running.trace import TraceFormatError, output_problem
        from rmqsim.scenarios.queue.profiles import ProfileError

        bad_input = (UsageError, BadImplError, TraceFormatError, ProfileError, ScratchDirError)
        try:
            with signals_raise():
                scratch_root()
                with _timed():
                    return func(*args, **kwargs)
        except bad_input as exc:
            fail(str(exc))
        except ImportError as exc:
            context = click.get_current_context(silent=True)
            problem = missing_extra(exc, f"rmqsim {context.info_name if context else ''}")
            if problem is not None:
                fail(str(problem))
            fail(f"internal error ({type(exc).__name__}: {exc}); please report it", EXIT_INTERNAL)
        except KeyboardInterrupt as exc:
            fail(f"interrupted by {interrupt_signal(exc).name}", interrupt_exit_code(exc))
        except (click.exceptions.Exit, click.ClickException):
            raise  # click's own exits and usage errors (exit 2, with the usage line)
        except OSError as exc:
            unstored = output_problem(exc)  # the machine's state (a full disk): not rmqsim's bug
            if unstored is not None:
                fail(f"could not write {unstored}")
            fail(f"internal error ({type(exc).__name__}: {exc}); please report it", EXIT_INTERNAL)
        except (Exception, InjectedCrash) as exc:
            fail(f"internal error ({type(exc).__name__}: {exc}); please report it", EXIT_INTERNAL)

    wrapper.rmqsim_timed = True  # type: ignore[attr-defined]  # tests: every command is timed
    return wrapper  # type: ignore[return-value]  # functools.wraps keeps func's signature


#: Seeds are stored as signed 64-bit integers (sweep rows), and a range's length must fit
#: one too: every seed is below this.
SEED_LIMIT = 2**63 - 1
#: The most operations a run may have (``scenarios.queue.sim.MAX_STEPS``, restated so that
#: ``--help`` does not import the simulation; a test keeps the two equal): every option
#: that counts steps is bounded by it, so a larger count is a usage error (exit 2).
MAX_STEPS = 100_000_000
#: The most worker processes ``--jobs`` takes: far above any machine's CPUs, below what
#: the process pool's C ints can hold.
MAX_JOBS = 1024
#: The longest liveness bound ``--op-timeout-s`` takes, a day (0 turns it off): the
#: watchdog's timers cannot be armed much further out.
MAX_OP_TIMEOUT_S = 86_400.0
#: The type of every option that counts a run's steps.
STEPS = click.IntRange(1, MAX_STEPS)
#: The type of every ``--jobs``.
JOBS = click.IntRange(1, MAX_JOBS)


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
        if stop > SEED_LIMIT:
            self.fail(f"{text!r}: seeds must be below {SEED_LIMIT} (64-bit)", param, ctx)
        return range(start, stop)


SEEDS = SeedRange()


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan``, ``inf`` and ``-inf``: ``nan``
    passes every comparison of a range check, and an infinite budget or rate is no
    number a run can use (exit 2 naming the option, as for any bad value)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def writable_dir(path: Path, option: str = "--out") -> Path:
    """Create ``path`` if needed and check it is writable, or raise UsageError naming
    ``option``."""
    from rmqsim.conformance.running.scratch import unwritable_dir

    problem = unwritable_dir(path)
    if problem is not None:
        raise UsageError(f"{option} {problem}")
    return path


def parse_profiles(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """``--profiles``: comma-separated profile names, each checked (``UnknownProfileError``
    names the unknown one). Not given: ``default``. Given but naming none (``""``, ``","``)
    or naming one twice is a usage error, not "all profiles" or a doubled run."""
    from rmqsim.scenarios.catalog import get_profile

    if text is None:
        return default
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise UsageError(f"--profiles {text!r} names no profile")
    for name in names:
        get_profile(name)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"--profiles names {', '.join(twice)} more than once")
    return names


def progress(total: int, description: str) -> Any:
    """A progress bar on stderr: drawn on a terminal; elsewhere (a CI log, a pipe) plain
    lines with the elapsed time (``clock.PlainProgress``)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rmqsim.conformance.cli.clock import PlainProgress, current_board

    console = Console(stderr=True)
    if not console.is_terminal:
        plain = PlainProgress(current_board())
        plain.add_task(description, total=total)
        return InterruptibleProgress(plain)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    bar.add_task(description, total=total)
    return InterruptibleProgress(bar)


class InterruptibleProgress:
    """A progress display (rich's, or ``clock.PlainProgress``) whose every ``update`` and
    ``advance`` in the main thread first raises an interruption that a finalizer
    swallowed (``conformance.running.interrupts``): a long command reports progress after
    each piece of work, so each of them (a crash sweep's cases, a shrink's runs, a
    mutant's kill, a sweep's tasks) stops there as the gate's loops do."""

    def __init__(self, display: Any) -> None:
        self.display = display

    def __enter__(self) -> InterruptibleProgress:
        self.display.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        return self.display.__exit__(*exc)

    def update(self, *args: Any, **kwargs: Any) -> None:
        interrupts.raise_if_interrupted()
        self.display.update(*args, **kwargs)

    def advance(self, *args: Any, **kwargs: Any) -> None:
        interrupts.raise_if_interrupted()
        self.display.advance(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.display, name)


class ShrinkBar:
    """A line of its own on a command's progress bar while a failing run is shrunk:
    operations spent of the budget (the bound is work, so that is the share done)."""

    def __init__(self, bar: Any, budget: ShrinkBudget) -> None:
        self.budget = budget
        self._bar = bar
        self._task = bar.add_task("shrink", total=budget.max_operations, visible=False)

    def on_run(self, stats: ShrinkStats) -> None:
        self._bar.update(self._task, completed=stats.operations, visible=True)

    def done(self) -> None:
        """Hide the line until the next shrink starts."""
        self._bar.update(self._task, completed=0, visible=False)


def _named_impl(ctx: Any, param: Any, value: str | None) -> str | None:
    """``--impl`` names something when given: an empty value (an unset shell variable) is
    a usage error, not the default implementation."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: name an implementation, or leave the option out "
                                 "for the default")
    return value


impl_option = click.option(
    "--impl",
    default=None,
    callback=_named_impl,
    metavar="MOD:FACTORY",
    help="The implementation under test: a queue factory(path=, config=, clock=, faults=), "
    "a storage backend (the same and fs=), a push consumer or a stream factory "
    "(docs/ADAPTER.md). Default: ours (impl.RocksMQ).",
)

#: The durability promises (``adapter.FLUSH_PROMISES``), restated so that ``--help`` does
#: not import the adapter; a test keeps the two equal.
FLUSH_CHOICES = ("sync", "async")


def flush_option(help_text: str) -> Callable[[F], F]:
    """``--flush sync|async``: the durability promise a storage backend is held to."""
    return click.option("--flush", type=click.Choice(FLUSH_CHOICES), default=None,
                        help=help_text)


expect_option = click.option(
    "--expect",
    default=None,
    metavar="PROFILE",
    help="Known deviations of the implementation (a TOML file, or `milvus`): a divergence "
    "that shows a listed one is counted as expected, not failed (docs/FINDINGS.md).",
)


steps_option = click.option(
    "--steps",
    type=STEPS,
    default=None,
    help="Operations per run (default: the profile's own budget).",
)


def ops_budget_option(*flags: str) -> Callable[[F], F]:
    """A shrink's bound by work: operations its candidate runs may execute. Several
    ``flags`` are spellings of one option (``shrink`` takes ``--shrink-ops-budget`` too,
    as ``run`` and ``gate`` spell it); the value reaches the command as ``flags[0]``."""
    return click.option(
        *flags,
        flags[0].lstrip("-").replace("-", "_"),
        type=click.IntRange(min=1),
        default=DEFAULT_SHRINK_OPERATIONS,
        show_default=True,
        help="Operations a shrink's candidate runs may execute: a bound by work, so a "
        "failing run shrinks to the same trace on any machine.",
    )


def time_budget_option(*flags: str) -> Callable[[F], F]:
    """A shrink's optional wall-clock cap (off by default); ``flags`` as for
    ``ops_budget_option``."""
    return click.option(
        *flags,
        flags[0].lstrip("-").replace("-", "_"),
        type=FiniteFloatRange(min=0, min_open=True),
        default=None,
        help="Also stop a shrink after S seconds of wall time (off by default: the result "
        "then depends on the machine's speed, and the report says so).",
    )


def shrink_options(func: F) -> F:
    """``--shrink-ops-budget N``, ``--shrink-budget-s S`` and ``--no-shrink``, handed to the
    command as one ``shrink`` argument: a ``ShrinkBudget``, or None to not shrink."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        shrink_ops_budget: int,
        shrink_budget_s: float | None,
        no_shrink: bool,
        **kwargs: Any,
    ) -> Any:
        budget = None if no_shrink else ShrinkBudget(shrink_ops_budget, shrink_budget_s)
        return func(*args, shrink=budget, **kwargs)

    options = (
        click.option("--no-shrink", is_flag=True, help="Do not shrink failing runs."),
        ops_budget_option("--shrink-ops-budget"),
        time_budget_option("--shrink-budget-s"),
    )
    for option in options:
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]  # func, with the options it consumes


crash_rate_option = click.option(
    "--crash-rate",
    type=FiniteFloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="Probability, per state-changing operation, of crashing inside it (seeded: "
    "the crashes are ArmCrash steps of the trace).",
)


def crash_mode_choice(flag: str, help: str) -> Callable[[F], F]:
    """An ``inprocess``/``process`` crash-mode option (``run``, ``crash-sweep``, and the
    gate's crash sweep)."""
    return click.option(
        flag,
        type=click.Choice(["inprocess", "process"]),
        default="inprocess",
        show_default=True,
        help=help,
    )


crash_mode_option = crash_mode_choice(
    "--crash-mode",
    "process: the implementation runs in a child process and a crash is a real "
    "SIGKILL of it (needs --impl as MOD:FACTORY).",
)


def op_timeout_option(func: F) -> F:
    """``--op-timeout-s S``: the liveness bound (``conformance.running.watchdog``) in force while
    the command runs; a call into the implementation that does not return within it is
    the anomaly ``hang``. Handed to no command argument: it is applied around the command."""
    from rmqsim.conformance.running.watchdog import (
        DEFAULT_OP_TIMEOUT_S,
        SHRINK_OP_TIMEOUT_S,
        op_timeout,
    )

    @functools.wraps(func)
    def wrapper(*args: Any, op_timeout_s: float, **kwargs: Any) -> Any:
        with op_timeout(op_timeout_s):
            return func(*args, **kwargs)

    option = click.option(
        "--op-timeout-s",
        type=FiniteFloatRange(min=0.0, max=MAX_OP_TIMEOUT_S),
        default=DEFAULT_OP_TIMEOUT_S,
        show_default=True,
        help="Liveness bound: an operation of the implementation (or an open, close, "
        "crash or snapshot) that does not return within S seconds is the anomaly hang. "
        f"Shrinking uses at most {SHRINK_OP_TIMEOUT_S:g} s; 0 turns the bound off (to stop "
        "in a debugger inside the implementation).",
    )
    return option(wrapper)  # type: ignore[return-value]  # func, with the option it consumes


def _writable_regression_dir(ctx: Any, param: Any, value: Path | None) -> Path | None:
    """Check ``--save-regression``'s directory before the run, not after its failure."""
    from rmqsim.conformance.running.scratch import unwritable_dir

    problem = None if value is None else unwritable_dir(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return value


save_regression_option = click.option(
    "--save-regression",
    "save_regression",
    type=click.Path(file_okay=False, path_type=Path),
    is_flag=False,
    flag_value="regressions",
    default=None,
    callback=_writable_regression_dir,
    metavar="[DIR]",
    help="Also save each failure into the regression corpus (default DIR: ./regressions), "
    "named <anomaly>-<hash>.jsonl.",
)


def save_regressions(results: list[Any], directory: Path | None) -> None:
    """Save failing results into the corpus when ``--save-regression`` was given."""
    if directory is None:
        return
    from rmqsim.conformance.adapter import DEFAULT_IMPL
    from rmqsim.conformance.reporting.report import replay_command
    from rmqsim.conformance.running.corpus import save_regression

    for result in results:
        if not result.ok:
            path = save_regression(result, directory)
            click.echo(f"rmqsim: regression saved: {path}", err=True)
            if result.impl != DEFAULT_IMPL:
                # The file replays on our queue by default (a corpus serves every queue);
                # say how to check the one it failed on.
                command = replay_command(path, "--impl", result.impl)
                click.echo(f"rmqsim: replay it on {result.impl}: {command}", err=True)


#: Where ``run``, ``gate``, ``fuzz`` and ``crash-sweep`` put what they write by default.
DEFAULT_OUT = Path("rmqsim-out")


def out_option(what: str, default: Path = DEFAULT_OUT) -> Callable[[F], F]:
    """``--out DIR``: the directory ``what`` goes to (checked with ``writable_dir``)."""
    return click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=default,
        show_default=True,
        help=f"Directory for {what}.",
    )
