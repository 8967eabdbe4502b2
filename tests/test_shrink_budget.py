"""Shrinking is bounded by work, not time: the same failing run shrinks to the same trace on
any machine; a wall-clock cap, when asked for, is reported as what made the result depend
on the machine, with the operations budget that reproduces it anywhere."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pytest
from click.testing import CliRunner

import rmqsim.conformance.searching.shrink as shrink_module
from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.common import ShrinkBar, progress
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.reporting.report import render_failure
from rmqsim.conformance.running.run import RunResult, run_seed
from rmqsim.conformance.running.trace import write_lines
from rmqsim.conformance.searching.shrink import shrink_and_save, shrink_result
from rmqsim.conformance.searching.shrink_budget import (
    STOPPED_BY_OPERATIONS,
    STOPPED_BY_TIME,
    ShrinkBudget,
    ShrinkStats,
)

#: A failure found after hundreds of operations: smoke seed 49 with the persisted high-water
#: mark dropped fails at step 432; its search runs 55 candidates, 3,068 operations (measured,
#: with the produce-merging pass: 51 and 3,016 without it).
(MUTANT,) = select(["hwm-not-persisted"])
SEED = 49
FULL_SEARCH_RUNS = 55
FULL_SEARCH_OPERATIONS = 3_068


@functools.cache
def _failing() -> RunResult:
    result = run_seed("smoke", SEED, impl=MUTANT.impl, steps=500)
    assert not result.ok and result.steps > 400
    return result


@functools.cache
def _full_search() -> tuple[RunResult | None, tuple[ShrinkStats, ...]]:
    """The search of ``_failing()`` without a budget, and what it told after each candidate
    run (``on_run``): computed once for the tests below (each ran it: 2 to 3 CPU s each)."""
    heard: list[ShrinkStats] = []
    return shrink_result(_failing(), on_run=heard.append), tuple(heard)


def test_a_search_that_runs_to_its_end_says_so() -> None:
    shrunk, _ = _full_search()
    assert shrunk is not None and shrunk.shrink_stats is not None
    stats = shrunk.shrink_stats
    assert stats.stopped_by is None and stats.operations == FULL_SEARCH_OPERATIONS
    assert "searched to the end" in stats.describe()


def test_the_operations_budget_stops_the_search_at_the_same_place_every_time() -> None:
    budget = ShrinkBudget(max_operations=1_000)
    first, second = (shrink_result(_failing(), budget=budget) for _ in range(2))
    assert first is not None and second is not None
    assert first.trace_lines[1:] == second.trace_lines[1:]
    assert first.shrink_stats == second.shrink_stats
    stats = first.shrink_stats
    assert stats is not None and stats.stopped_by == STOPPED_BY_OPERATIONS
    # The check comes before each run: the last run may go past the bound, never a next one.
    assert 1_000 <= stats.operations < FULL_SEARCH_OPERATIONS
    # Stopped early, so not as small as the full search gets.
    full, _ = _full_search()
    assert full is not None and full.steps <= first.steps
    assert "a larger one may shrink further" in stats.describe()


def test_the_first_run_is_never_refused_by_the_budget() -> None:
    """Re-running the failure itself is how a shrink knows that it recurs: a budget spent
    by it still gives that run back, not 'did not recur'."""
    shrunk = shrink_result(_failing(), budget=ShrinkBudget(max_operations=1))
    assert shrunk is not None and shrunk.steps == _failing().steps
    assert shrunk.shrink_stats == ShrinkStats(1, _failing().steps, STOPPED_BY_OPERATIONS)


class _TickingClock:
    """Stands for ``time`` in ``conformance.searching.shrink``: every reading is one second
    later, so a time limit stops the search after a known number of runs, whatever the machine."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def perf_counter(self) -> float:
        return float(next(self._ticks))


def test_a_time_limit_is_reported_with_the_operations_budget_that_reproduces_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shrink_module, "time", _TickingClock())
    timed = shrink_result(_failing(), budget=ShrinkBudget(max_seconds=10))
    monkeypatch.undo()
    assert timed is not None and timed.shrink_stats is not None
    stats = timed.shrink_stats
    assert stats.stopped_by == STOPPED_BY_TIME and 1 < stats.runs < FULL_SEARCH_RUNS
    assert f"an operations budget of {stats.operations} and no time limit" in stats.describe()
    # What the report promises: that operations budget alone gives the same trace.
    again = shrink_result(_failing(), budget=ShrinkBudget(max_operations=stats.operations))
    assert again is not None and again.trace_lines == timed.trace_lines
    assert again.shrink_stats == ShrinkStats(stats.runs, stats.operations, STOPPED_BY_OPERATIONS)


def test_progress_is_told_after_every_candidate_run() -> None:
    shrunk, heard = _full_search()
    assert shrunk is not None and shrunk.shrink_stats is not None
    assert [stats.runs for stats in heard] == list(range(1, shrunk.shrink_stats.runs + 1))
    operations = [stats.operations for stats in heard]
    assert operations == sorted(set(operations)) and operations[-1] == FULL_SEARCH_OPERATIONS


def test_the_shrink_line_of_a_progress_bar_follows_the_search_and_hides_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.console import Console

    # A terminal draws the bar (elsewhere, a CI log, the bar is plain lines).
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    bar = progress(10, "run smoke")
    shrink_bar = ShrinkBar(bar, ShrinkBudget(max_operations=5_000))
    (task,) = (t for t in bar.tasks if t.description == "shrink")
    assert not task.visible and task.total == 5_000
    # What the search tells after each run (that it tells it is checked above), told to
    # the bar as the search told it.
    _, heard = _full_search()
    for stats in heard:
        shrink_bar.on_run(stats)
    assert task.visible and task.completed == FULL_SEARCH_OPERATIONS
    shrink_bar.done()
    assert not task.visible and task.completed == 0


def test_the_failure_report_says_how_the_search_went(tmp_path: Path) -> None:
    failing = run_seed("smoke", SEED, impl=MUTANT.impl, steps=500)
    failing.trace_path = tmp_path / "fail.jsonl"
    write_lines(failing.trace_path, failing.trace_lines)
    shrink_and_save(failing, impl=MUTANT.impl, budget=ShrinkBudget(max_operations=1_000))
    report = render_failure(failing)
    assert "stopped at the operations budget" in report and "rmqsim replay" in report


@pytest.mark.parametrize(
    ("max_operations", "max_seconds"), [(0, None), (-5, None), (10, 0.0), (10, -1.0)]
)
def test_a_budget_that_allows_nothing_is_refused(
    max_operations: int, max_seconds: float | None
) -> None:
    with pytest.raises(AssertionError):
        ShrinkBudget(max_operations, max_seconds)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "args",
    [
        ("shrink", "x.jsonl", "--ops-budget", "0"),
        ("shrink", "x.jsonl", "--time-budget-s", "0"),
        ("run", "--profile", "smoke", "--seed", "0", "--shrink-ops-budget", "0"),
        ("gate", "--seeds", "0:1", "--shrink-budget-s", "-1"),
    ],
)
def test_cli_refuses_an_empty_budget(args: tuple[str, ...]) -> None:
    code, output = _cli(*args)
    assert code == 2 and "budget" in output


def test_cli_run_shrinks_within_the_operations_budget_and_the_shrink_command_too(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    common = ("run", "--profile", "smoke", "--seed", "4", "--steps", "500", "--impl", MUTANT.impl)
    code, output = _cli(*common, "--out", str(out), "--shrink-ops-budget", "1000")
    assert code == 1 and "stopped at the operations budget" in output
    (trace,) = (p for p in out.glob("*.jsonl") if not p.name.endswith(".shrunk.jsonl"))
    code, output = _cli("shrink", str(trace), "--ops-budget", "100000")
    assert code == 0 and "searched to the end" in output
    # ``shrink`` takes run's and gate's spelling of the same budget too.
    code, output = _cli("shrink", str(trace), "--shrink-ops-budget", "1000")
    assert code == 0 and "stopped at the operations budget" in output
    code, output = _cli(*common, "--out", str(tmp_path / "none"), "--no-shrink")
    assert code == 1 and "shrunk" not in output
