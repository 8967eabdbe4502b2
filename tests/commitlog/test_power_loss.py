"""The storage crash sweep (conformance/crashing/power_loss.py, ``rmqsim crash-sweep --storage``):
the commit-log backend keeps each flush mode's promise at every write and sync point under
every fault mode, and the storage mutants (conformance/mutants/storage.py) break it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.power_loss import SweepShape, parse_case, power_loss_sweep
from rmqsim.conformance.crashing.simdisk import FAULT_MODES
from rmqsim.conformance.mutants.storage import MUTANTS


@pytest.mark.parametrize("promise", ["sync", "async"])
def test_the_backend_keeps_its_promise_at_every_point_and_mode(promise: str) -> None:
    result = power_loss_sweep("crashy", 0, promise=promise, steps=5)
    assert result.base_problem is None
    assert result.ok, [f"{f.case.label()}: {f.problem}" for f in result.failures[:3]]
    assert {mode for _, mode in result.counts} == set(FAULT_MODES)
    assert {"write", "sync", "sync_dir", "create", "rename"} <= {c for c, _ in result.counts}


def test_async_flush_breaks_the_sync_promise() -> None:
    """The checks tell the promises apart: async loses recent operations, sync may not."""
    result = power_loss_sweep("crashy", 0, promise="sync", impl="commitlog-async",
                              steps=5)
    assert not result.ok
    assert any("none of the 2 allowed" in f.problem for f in result.failures)


@pytest.mark.parametrize(
    ("mutant", "profile", "seed", "steps", "killing_modes"),
    [
        ("no-fsync", "crashy", 0, 3,
         {"lose-unsynced", "keep-prefix", "keep-subset", "torn-write"}),
        ("fsync-error-swallowed", "crashy", 0, 3, {"sync-error"}),
        ("no-dir-sync", "crashy", 0, 3, {"lose-unsynced", "lose-dir-entry"}),
        ("no-crc-check", "crashy", 0, 6, {"torn-write"}),
        ("tmp-not-synced", "crashy", 0, 2, {"lose-unsynced", "torn-write"}),
        ("rename-no-dir-sync", "crashy", 0, 2, {"lose-unsynced", "lose-dir-entry"}),
        ("roll-skips-previous-segment", "swarm", 3, 12, {"lose-unsynced"}),
        ("truncate-one-record-off", "crashy", 0, 5, {"torn-write"}),
        ("control-crc-unchecked", "crashy", 0, 5, {"torn-write"}),
        ("fsync-retried", "crashy", 0, 2, {"sync-error"}),
    ],
)  # fmt: skip
def test_each_storage_mutant_is_killed_by_the_sweep(
    mutant: str, profile: str, seed: int, steps: int, killing_modes: set[str]
) -> None:
    assert {m.name for m in MUTANTS} == {
        "no-fsync", "fsync-error-swallowed", "no-dir-sync", "no-crc-check", "tmp-not-synced",
        "rename-no-dir-sync", "roll-skips-previous-segment", "truncate-one-record-off",
        "control-crc-unchecked", "fsync-retried", "roll-no-dir-sync",
    }  # fmt: skip
    impl = next(m.impl for m in MUTANTS if m.name == mutant)
    result = power_loss_sweep(profile, seed, promise="sync", impl=impl, steps=steps)
    assert result.base_problem is None  # only a power cut shows the bug
    assert killing_modes <= set(Counter(f.case.mode for f in result.failures))
    # Each failure names what was lost: the store's file that no longer opens, or the
    # messages, groups or pages the recovered state lacks (statediff's model=/sut=).
    unnamed = [f.problem for f in result.failures
               if "/sim/store" not in f.problem and "model=" not in f.problem]
    assert not unnamed, unnamed[:2]


def test_the_roll_mutants_control_keeps_the_promise() -> None:
    """The correct backend on the roll mutant's 4 KiB segments passes the same sweep
    (so the mutant dies of its bug, not of its geometry). Before recovery treated a
    damaged segment chain past the checkpoint as the unfinished tail, a cut while one
    batch started two segments left a store that refused to open."""
    impl = "rmqsim.conformance.mutants.storage:open_small_segments"
    result = power_loss_sweep("swarm", 3, promise="sync", impl=impl, steps=12)
    assert result.base_problem is None
    assert result.ok, [f"{f.case.label()}: {f.problem}" for f in result.failures[:3]]
    assert {c for c, _ in result.counts} >= {"create", "truncate"}


def test_a_failing_case_repeats_alone_with_the_same_decisions() -> None:
    impl = "rmqsim.conformance.mutants.storage:open_no_fsync"
    sweep = power_loss_sweep("crashy", 0, promise="sync", impl=impl, steps=3)
    failure = next(f for f in sweep.failures if f.case.mode == "keep-subset")
    again = power_loss_sweep("crashy", 0, promise="sync", impl=impl, steps=3,
                             shape=SweepShape(only=parse_case(failure.case.spec)))
    assert [f.as_json() for f in again.failures] == [failure.as_json()]
    assert failure.cut is not None and failure.cut["mode"] == "keep-subset"
    json.dumps(failure.as_json())  # plain data


def test_cli_exit_codes_and_repro_line(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["crash-sweep", "--storage", "sync", "--profile", "crashy", "--steps", "2",
            "--out", str(tmp_path)]
    ok = runner.invoke(cli, base)
    assert ok.exit_code == 0, ok.output
    assert "0 failing case(s)" in ok.output
    no_dir_sync = "rmqsim.conformance.mutants.storage:open_no_dir_sync"
    bad = runner.invoke(cli, [*base, "--impl", no_dir_sync])
    assert bad.exit_code == 1, bad.output
    repro = next(line.strip() for line in bad.output.splitlines() if "--case" in line)
    assert repro.startswith("rmqsim crash-sweep --storage sync --profile crashy --seed 0")
    assert list(tmp_path.glob("crashy-seed0-power-*.json"))
    rerun = runner.invoke(cli, [*repro.split()[1:], "--out", str(tmp_path)])
    assert rerun.exit_code == 1 and "1 failing case(s)" in rerun.output, rerun.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--storage", "sync", "--case", "3:nope"], "--case must be POINT:MODE"),
        (["--case", "3:lose-unsynced"], "--case needs --storage"),
        (["--storage", "sync", "--impl", "commitlog", "--crash-mode", "process"],
         "does not take --crash-mode process"),
        (["--storage", "sync", "--impl", "rmqsim.conformance.adapter:rocksmq_factory"],
         "accepts fs="),
    ],
)
def test_cli_bad_usage_is_one_line_and_exit_2(extra: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["crash-sweep", "--profile", "crashy", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
