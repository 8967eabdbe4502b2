"""``rmqsim mutants``: the kill matrix of the seeded bugs (``conformance.mutants``).

Exit 0 only when every mutant the gate can run is killed and the unmodified
implementation passes the same seeds; 1 otherwise; 2 for bad usage (an unknown mutant).
With ``--fuzz``, a fuzz column: ``rmqsim fuzz`` at its default profile against each mutant
(reported beside the gate's; the exit status stays the gate's).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rmqsim.conformance.cli.common import (
    EXIT_DIVERGENCE,
    EXIT_OK,
    SEEDS,
    UsageError,
    crash_mode_choice,
    friendly_errors,
    op_timeout_option,
    out_option,
    parse_profiles,
    progress,
    shrink_options,
    steps_option,
    writable_dir,
)
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget

__all__ = ["LEFT_COLUMNS", "kill_table", "mutants_command"]

if TYPE_CHECKING:
    from rich.table import Table

    from rmqsim.conformance.mutants.kill import FuzzKill, KillMatrix

#: Width of the matrix when the output is not a terminal.
_LOG_WIDTH = 200
#: Columns of the matrix aligned left (the others are numbers).
LEFT_COLUMNS = ("mutant", "class", "status", "check", "anomaly", "profile/seed", "fuzz")


@click.command("mutants")
@click.option(
    "--seeds", type=SEEDS, default=None, help="Seed range A:B per profile (default: the gate's)."
)
@click.option("--only", default=None, metavar="NAME[,NAME]", help="Run only these mutants.")
@click.option(
    "--profiles",
    default=None,
    metavar="NAME[,NAME]",
    help="Run each mutant on those of these profiles that reach its layer (default: the gate "
    "profiles of its layer); the unmodified implementation runs them all.",
)
@click.option(
    "--fuzz",
    "with_fuzz",
    is_flag=True,
    help="Also run `rmqsim fuzz` (default profile, ./regressions) against each mutant.",
)
@out_option(
    "kill-matrix.json, kill-matrix.junit.xml and the killing traces", Path("rmqsim-out/mutants")
)
@steps_option
@shrink_options
@crash_mode_choice(
    "--crash-mode",
    "process: every queue and stream mutant runs in a child process through the wire protocol "
    "(docs/PROTOCOL.md), crashed by SIGKILL: the seeded bugs caught through it.",
)
@op_timeout_option
@friendly_errors
def mutants_command(
    seeds: range | None,
    only: str | None,
    profiles: str | None,
    out: Path,
    steps: int | None,
    shrink: ShrinkBudget | None,
    with_fuzz: bool,
    crash_mode: str,
) -> None:
    """Run the gate against every seeded bug and print the kill matrix."""
    import dataclasses

    from rich.console import Console

    from rmqsim.conformance.mutants.catalogue import UnknownMutantError, select
    from rmqsim.conformance.mutants.kill import add_fuzz_column, run_matrix, write_outputs
    from rmqsim.conformance.running.corpus import DEFAULT_CORPUS
    from rmqsim.conformance.running.gate import DEFAULT_GATE_SEEDS

    try:
        mutants = select(only.split(",") if only is not None else None)
    except UnknownMutantError as exc:
        raise UsageError(str(exc)) from None
    seed_range = seeds or DEFAULT_GATE_SEEDS
    names = parse_profiles(profiles, ()) or None
    mutants = tuple(dataclasses.replace(m, crash_mode=crash_mode)
                    if m.layer in ("queue", "stream") else m for m in mutants)  # fmt: skip
    writable_dir(out)
    with progress(len(mutants), "mutants") as bar:
        matrix = run_matrix(
            mutants,
            seed_range,
            out=out,
            profiles=names,
            steps=steps,
            shrink=shrink,
            on_kill=lambda _kill: bar.advance(bar.task_ids[0]),
        )
    if with_fuzz:
        with progress(len(mutants), "mutants fuzzed") as bar:
            add_fuzz_column(
                matrix, out, DEFAULT_CORPUS, on_kill=lambda _kill: bar.advance(bar.task_ids[0])
            )
    data, junit = write_outputs(matrix, out)
    table = kill_table(matrix, seed_range)
    console = Console()
    if not console.is_terminal:  # a log or a pipe: do not squeeze the matrix to 80 columns
        console = Console(width=_LOG_WIDTH)
    console.print(table)
    summary = matrix.summary()
    click.echo(
        f"rmqsim mutants: {'PASS' if matrix.ok else 'FAIL'}: {summary['killed']} of "
        f"{summary['run']} killed ({summary['mutants'] - summary['run']} not run); "
        f"time to kill median {summary['median_seconds_to_kill']} s, "
        f"max {summary['max_seconds_to_kill']} s; longest shrunk reproducer "
        f"{summary['max_shrunk_steps'] if summary['max_shrunk_steps'] is not None else '-'} "
        f"operations; baseline {summary['baseline']}; "
        f"{data}, {junit}"
    )
    fuzz_summary = matrix.fuzz_summary()
    if fuzz_summary is not None:
        click.echo(
            f"rmqsim mutants: fuzz (default profile) killed {fuzz_summary['killed']} of "
            f"{fuzz_summary['run']} it ran, the gate {fuzz_summary['gate_killed_of_those']} "
            f"of those; time to kill median {fuzz_summary['median_seconds_to_kill']} s; "
            f"{fuzz_summary['cpu_seconds']} CPU s in all"
        )
    sys.exit(EXIT_OK if matrix.ok else EXIT_DIVERGENCE)


def kill_table(matrix: KillMatrix, seed_range: range) -> Table:
    """The kill matrix as a table: a row per mutant, its killing check and reproducer."""
    from rich.table import Table

    from rmqsim.conformance.mutants.kill import KILLED

    table = Table(title=f"rmqsim mutants: seeds {seed_range.start}:{seed_range.stop}")
    columns: tuple[str, ...] = (
        "mutant",
        "class",
        "status",
        "check",
        "anomaly",
        "profile/seed",
        "ops",
        "s",
        "shrunk",
    )
    with_fuzz = any(kill.fuzz is not None for kill in matrix.kills)
    if with_fuzz:
        columns += ("fuzz", "fuzz ex", "fuzz s", "fuzz shrunk")
    for column in columns:
        table.add_column(column, justify="left" if column in LEFT_COLUMNS else "right")
    for kill in matrix.kills:
        where = f"{kill.profile}/{kill.seed}" if kill.status == KILLED else "-"
        fuzz_cells = _fuzz_cells(kill.fuzz) if with_fuzz else ()
        table.add_row(
            kill.mutant.name,
            kill.mutant.bug_class,
            kill.status if kill.status == KILLED else f"[bold red]{kill.status}[/]",
            kill.check or kill.note or "-",
            kill.anomaly or "-",
            where,
            str(kill.operations),
            f"{kill.seconds:.2f}",
            "-" if kill.shrunk_steps is None else str(kill.shrunk_steps),
            *fuzz_cells,
        )
    return table


def _fuzz_cells(fuzz: FuzzKill | None) -> tuple[str, ...]:
    """A mutant's fuzz column: status, examples and seconds to kill, shrunk length."""
    from rmqsim.conformance.mutants.kill import KILLED, NOT_RUN

    if fuzz is None or fuzz.status == NOT_RUN:
        return ("-", "-", "-", "-")
    status = fuzz.status if fuzz.status == KILLED else f"[bold red]{fuzz.status}[/]"
    shrunk = "-" if fuzz.shrunk_steps is None else str(fuzz.shrunk_steps)
    return (status, str(fuzz.examples), f"{fuzz.seconds:.2f}", shrunk)
