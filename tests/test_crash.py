"""Crash sweeps, crash rates and shrinking, shown to pass on impl and to fail on the crash
mutants of ``conformance.mutants.crash``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.crash_sweep import (
    case_trace,
    crash_cases,
    crash_resolutions,
    crash_sweep,
    sweep_base,
)
from rmqsim.conformance.mutants.crash import MUTANTS
from rmqsim.conformance.running.run import replay_trace, run_seed
from rmqsim.conformance.running.trace import parse_lines, read_trace
from rmqsim.conformance.searching.shrink import shrink_result
from rmqsim.impl import RocksMQ

MUTANT_IMPL = {m.name: m.impl for m in MUTANTS}

#: (profile, seed, steps) whose sweep reaches each mutant's bug (found by sweeping seeds).
SWEEP_CATCHES = {
    "two-step-produce": ("crashy", 0, 15),
    "positions-in-memory": ("crashy", 0, 15),
    "acks-before-messages": ("retention", 6, 25),
    "hwm-not-persisted": ("smoke", 9, 60),
}

#: Runs failing after hundreds of operations: (profile, seed, crash rate), steps 500.
LONG_FAILURES = {
    "two-step-produce": ("smoke", 3, 0.01),
    "positions-in-memory": ("retention", 7, 0.005),
    "acks-before-messages": ("retention", 1, 0.01),
    "hwm-not-persisted": ("smoke", 4, 0.0),
}
#: Measured: every one shrinks to 3-6 operations; the bound leaves room.
SHRUNK_MAX_STEPS = 12


def test_the_crash_sweep_is_clean_on_impl_and_covers_every_kind_of_case() -> None:
    sweep = crash_sweep("crashy", 0, impl=DEFAULT_IMPL, steps=15)
    assert sweep.ok, [(c.label(), r.anomaly) for c, r in sweep.failures]
    assert {"produce.before_write", "produce.after_write", "open.before_write"} <= set(sweep.points)
    assert any(c.step == 0 for c in sweep.cases), "the first open is crashed too"
    assert sweep.resolutions["before"] > 0 and sweep.resolutions["after"] > 0
    # every case that passed is counted once, those in the first open too
    assert sum(sweep.resolutions.values()) == len(sweep.cases)


def test_a_sweep_reads_crash_resolutions_from_the_records_as_the_trace_has_them() -> None:
    """``run_case`` counts a case's crash resolutions from its step records, not by parsing
    its trace back: they must be exactly the trace's ``crash`` fields (read from the
    records before rendering, parsed after), for cases resolved each way."""
    base = sweep_base("crashy", 0, impl=DEFAULT_IMPL, steps=15, crash_mode="inprocess")
    seen: set[str] = set()
    for case in base.result.cases:
        outcome = replay_trace(case_trace(base.header, base.recorded, case), impl=DEFAULT_IMPL)
        assert outcome.ok, outcome.anomaly
        from_records = crash_resolutions(outcome)  # before the trace is rendered
        parsed = [s.crash.resolved for s in parse_lines(outcome.trace_lines).steps if s.crash]
        assert from_records == parsed == crash_resolutions(outcome)  # the last: from lines
        seen.update(from_records)
        if seen == {"before", "after"}:
            break
    assert seen == {"before", "after"}


def test_the_case_list_is_deterministic() -> None:
    def cases() -> list:
        base = run_seed("smoke", 3, steps=25, log_faults=True)
        steps = [s.op for s in parse_lines(base.trace_lines).steps]
        assert steps
        from rmqsim.scenarios.queue.ops import Step

        recorded = [Step(s.time_s, s.actor, s.op) for s in parse_lines(base.trace_lines).steps]
        return crash_cases(base.fault_log, recorded)

    first = cases()
    assert first and first == cases()


@pytest.mark.parametrize("name", sorted(SWEEP_CATCHES))
def test_the_sweep_catches_each_crash_mutant(name: str, tmp_path: Path) -> None:
    profile, seed, steps = SWEEP_CATCHES[name]
    sweep = crash_sweep(
        profile, seed, impl=MUTANT_IMPL[name], steps=steps, out=tmp_path, max_failures=1
    )
    assert sweep.base.ok, "the bug must be one only a crash shows"
    assert sweep.failures, f"{name} survived the sweep"
    _case, failed = sweep.failures[0]
    # The saved case replays and fails the same way (its ArmCrash crashes at the point).
    assert failed.trace_path is not None
    again = replay_trace(read_trace(failed.trace_path))
    assert again.anomaly == failed.anomaly
    assert failed.repro_command() == f"rmqsim replay {failed.trace_path}"


@pytest.mark.parametrize(
    "name", ["two-step-produce", "positions-in-memory", "acks-before-messages"]
)
def test_a_crash_rate_catches_the_mutants_impl_passes(name: str) -> None:
    assert run_seed("retention", 1, steps=300, crash_rate=0.2).ok
    failed = run_seed("retention", 1, impl=MUTANT_IMPL[name], steps=300, crash_rate=0.2)
    assert not failed.ok
    assert any('"actor":"crash-rate"' in line for line in failed.trace_lines)
    assert failed.repro_command().endswith("--crash-rate 0.2")
    assert replay_trace(parse_lines(failed.trace_lines)).anomaly == failed.anomaly


@pytest.mark.parametrize("name", sorted(LONG_FAILURES))
def test_shrinking_a_long_failure_leaves_a_dozen_operations(name: str) -> None:
    profile, seed, rate = LONG_FAILURES[name]
    failed = run_seed(profile, seed, impl=MUTANT_IMPL[name], steps=500, crash_rate=rate)
    assert not failed.ok and failed.steps >= 190
    shrunk = shrink_result(failed)
    assert shrunk is not None and shrunk.anomaly == failed.anomaly
    assert shrunk.steps <= SHRUNK_MAX_STEPS
    # The shrunk trace is a valid trace that replays (outcomes checked) to the same failure.
    again = replay_trace(parse_lines(shrunk.trace_lines))
    assert again.anomaly == failed.anomaly and again.steps == shrunk.steps


def test_shrink_does_not_invent_a_failure() -> None:
    failed = run_seed("crashy", 0, impl=MUTANT_IMPL["positions-in-memory"], steps=80)
    assert not failed.ok
    # On impl the same operations pass: nothing to shrink.
    assert shrink_result(failed, impl=DEFAULT_IMPL) is None


# ----------------------------------------------------------------------------- open / reopen


def releasing_factory(*, path, config, clock, faults):
    """An implementation that writes (here: passes a point) on every open, after taking
    its handle, and releases it when crashed there: the documented factory contract."""
    mq = RocksMQ.open(path, config=config, clock=clock, faults=faults)
    try:
        if faults is not None:
            faults("open.recovered")
    except BaseException:
        mq.crash()
        raise
    return mq


def leaking_factory(*, path, config, clock, faults):
    """Like ``releasing_factory`` but keeps its handle (and lock) when crashed in open."""
    mq = RocksMQ.open(path, config=config, clock=clock, faults=faults)
    leaking_factory.kept.append(mq)  # type: ignore[attr-defined]
    if faults is not None:
        faults("open.recovered")
    return mq


leaking_factory.kept = []  # type: ignore[attr-defined]


def test_crashes_in_open_and_close_are_swept_and_a_second_reopen_checked() -> None:
    sweep = crash_sweep("crashy", 2, impl=releasing_factory, steps=40)
    assert sweep.ok, [(c.label(), r.anomaly, r.divergence) for c, r in sweep.failures]
    during = {(c.during, c.point) for c in sweep.cases}
    assert ("open", "open.recovered") in during
    assert any(c.step > 0 and c.during == "open" for c in sweep.cases), "reopen steps"
    assert any(c.during == "close" for c in sweep.cases), "close_reopen's close"
    # Every case reopens once more after the crashed step.
    assert sweep.resolutions["after"] > 0


def test_a_factory_that_keeps_its_lock_when_crashed_in_open_is_unrecoverable() -> None:
    try:
        sweep = crash_sweep("smoke", 1, impl=leaking_factory, steps=20, max_failures=1)
    finally:
        for mq in leaking_factory.kept:  # type: ignore[attr-defined]
            mq.crash()
        leaking_factory.kept.clear()  # type: ignore[attr-defined]
    assert sweep.failures
    case, failed = sweep.failures[0]
    assert case.point == "open.recovered" and failed.anomaly == "unrecoverable"


# ----------------------------------------------------------------------------- command line


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("shrink", "/nonexistent/trace.jsonl"), "cannot read"),
        (("crash-sweep", "--profile", "no-such-profile"), "no-such-profile"),
        (("crash-sweep", "--profile", "smoke", "--impl", "nope"), "module:factory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    result = _invoke(*args)
    assert result.exit_code == 2
    assert needle in result.output and len(result.output.strip().splitlines()) == 1


def test_shrink_of_a_malformed_or_passing_trace_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"header"\n')
    result = _invoke("shrink", str(bad))
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output
    passing = tmp_path / "ok.jsonl"
    assert (
        _invoke(
            "run",
            "--profile",
            "smoke",
            "--seed",
            "0",
            "--steps",
            "10",
            "--trace",
            str(passing),
            "--out",
            str(tmp_path),
        ).exit_code
        == 0
    )
    result = _invoke("shrink", str(passing))
    assert result.exit_code == 2 and "does not fail" in result.output


def test_crash_sweep_and_shrink_commands_on_a_mutant(tmp_path: Path) -> None:
    impl = MUTANT_IMPL["positions-in-memory"]
    result = _invoke(
        "crash-sweep",
        "--profile",
        "crashy",
        "--seed",
        "0",
        "--steps",
        "15",
        "--impl",
        impl,
        "--out",
        str(tmp_path),
    )
    assert result.exit_code == 1, result.output
    assert "failing case(s)" in result.output
    saved = sorted(tmp_path.glob("crashy-seed0-crash-step*.jsonl"))
    assert saved
    result = _invoke("shrink", str(saved[0]), "--time-budget-s", "60")
    assert result.exit_code == 0, result.output
    shrunk = saved[0].with_name(saved[0].name.replace(".jsonl", ".shrunk.jsonl"))
    assert shrunk.exists() and f"wrote {shrunk}" in result.output
    assert _invoke("replay", str(shrunk)).exit_code == 1
