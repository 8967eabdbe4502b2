"""The power-loss sweep through FUSE (conformance/crashing/power_fuse.py, ``crash-sweep --storage
--through fuse``): the commit log as a child process, its store on a FUSE mount of the
simulated disk, cut at the same points as in process (``fs=``), leaves the same disk and
recovers the same state; the sweep finds a storage mutant through FUSE; the command says
when FUSE cannot be used."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import rmqsim.conformance.crashing.fuse_disk as fuse_disk
import rmqsim.conformance.crashing.power_fuse as power_fuse
from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.power_loss import (
    FAULT_MODES,
    DiskAccess,
    SweepShape,
    base_run,
    disk_access,
    power_loss_sweep,
    quiet_recovery,
    record_scenario,
    run_case_outcome,
)
from rmqsim.conformance.wire.client import server_command
from tests.fuse_programs import fuse_or_skip

#: Steps of smoke seed 0 the differential runs (its points: the first open's and theirs).
DIFFERENTIAL_STEPS = 6
_IMPLS = {"sync": "commitlog", "async": "commitlog-async"}


@pytest.fixture
def fuse() -> None:
    fuse_or_skip()


def _differences(
    ways: tuple[DiskAccess, DiskAccess], promise: str, steps: int, every: int = 1
) -> tuple[int, list[str]]:
    """Cut both ways at every point of smoke seed 0's first ``steps`` steps (each point
    under one mode in turn, sync-error at every sync point): (cases compared, what
    differed)."""
    config, recorded = record_scenario("smoke", 0, steps)
    with quiet_recovery():
        bases = [base_run(way, config, recorded, promise) for way in ways]
    if bases[0] != bases[1]:
        return 0, [f"the runs without cuts differ: {bases[0]} / {bases[1]}"]
    problem, points = bases[0]
    assert problem is None, problem
    data_modes = [m for m in FAULT_MODES if m != "sync-error"]
    cases = [(record.index, data_modes[i % len(data_modes)])
             for i, (_, record, _) in enumerate(points) if i % every == 0]
    cases += [(record.index, "sync-error") for _, record, _ in points if record.is_sync]
    differences = []
    with quiet_recovery():
        for case in cases:
            one, other = (run_case_outcome(way, config, recorded, promise, case, 0)
                          for way in ways)
            for what in ("problem", "cut", "fired", "survivor", "recovered"):
                if getattr(one, what) != getattr(other, what):
                    differences.append(f"{case}: {what} differs")
            if one.problem is not None or one.survivor is None or one.recovered is None:
                differences.append(f"{case}: {one.problem or 'no cut'}")
    return len(cases), differences


@pytest.mark.slow
@pytest.mark.parametrize("promise", ["sync", "async"])
def test_the_commit_log_cut_through_fuse_leaves_what_it_leaves_in_process(
    fuse: None, promise: str
) -> None:
    """Same scenario, same point, same mode: the child through FUSE and the store in
    process leave the same files and directories on the rebooted disk, recover the same
    state, and the cuts decide the same, at every point of the sweep."""
    impl = _IMPLS[promise]
    ways = (disk_access(impl, "fs"), disk_access(impl, "fuse"))
    try:
        compared, differences = _differences(ways, promise, DIFFERENTIAL_STEPS)
    finally:
        ways[1].close()
    assert compared > 40 and differences == []


def test_the_differential_sees_syncs_lost_on_the_way_through_fuse(fuse: None) -> None:
    """A way to the disk that loses a call (the child's fsyncs never reach the disk, as
    with a FUSE front that answered fsync without syncing) is what the differential is
    there to catch: the points differ at once."""
    impl = "tests.fuse_programs:open_queue_losing_os_syncs"
    ways = (disk_access(impl, "fs"), disk_access(impl, "fuse"))
    try:
        compared, differences = _differences(ways, "sync", 1)
    finally:
        ways[1].close()
    assert compared == 0 and differences[0].startswith("the runs without cuts differ")


def test_the_sweep_through_fuse_finds_a_storage_mutant_as_in_process(fuse: None) -> None:
    """``no-fsync`` (segments never synced) loses acknowledged messages at a cut: the
    in-process sweep's failing case fails the same way through FUSE."""
    impl = "rmqsim.conformance.mutants.storage:open_no_fsync"
    in_process = power_loss_sweep("crashy", 0, promise="sync", impl=impl, steps=3)
    failure = next(f for f in in_process.failures if f.case.mode == "lose-unsynced")
    only = (failure.case.point.index, failure.case.mode)
    through = power_loss_sweep("crashy", 0, promise="sync", impl=impl, steps=3,
                               through="fuse", shape=SweepShape(only=only))
    assert through.through == "fuse" and len(through.cases) == 1
    [found] = through.failures
    assert found.cut == failure.cut
    assert found.problem.split(":")[0] == failure.problem.split(":")[0]
    assert "none of the 2 allowed" in found.problem


def test_an_exec_server_runs_through_fuse(fuse: None) -> None:
    """Any child command works: the reference server as an ``exec:`` command (a new
    interpreter per open) through FUSE, one case."""
    result = power_loss_sweep("smoke", 0, promise="sync", impl=server_command("commitlog"),
                              steps=1, through="fuse",
                              shape=SweepShape(only=(2, "lose-unsynced")))
    assert result.ok and len(result.cases) == 1


def test_the_command_sweeps_through_fuse(fuse: None, tmp_path: Path) -> None:
    args = ["crash-sweep", "--storage", "sync", "--profile", "smoke", "--steps", "1",
            "--through", "fuse", "--out", str(tmp_path), "--case", "3:torn-write"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert re.search(r"impl rmqsim\.impl\.commitlog:open_queue through FUSE \(a child "
                     r"process\): 1 steps, 1 cases \(torn-write 1\), 0 failing", result.output)


def test_without_fuse_the_sweep_is_skipped_saying_why_unless_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(power_fuse, "fuse_available", lambda: "no /dev/fuse (test)")
    args = ["crash-sweep", "--storage", "sync", "--profile", "smoke", "--steps", "1",
            "--through", "fuse", "--out", str(tmp_path)]
    monkeypatch.delenv("RMQSIM_REQUIRE_FUSE", raising=False)
    skipped = CliRunner().invoke(cli, args)
    assert skipped.exit_code == 0, skipped.output
    # The skip line, then the command's wall and CPU time (every command ends with it).
    assert skipped.output.splitlines()[0] == (
        "rmqsim crash-sweep --storage sync --through fuse: "
        "SKIPPED: FUSE cannot be used here: no /dev/fuse (test)")
    required = CliRunner().invoke(cli, args, env={"RMQSIM_REQUIRE_FUSE": "1"})
    assert required.exit_code == 2
    assert required.output.strip() == (
        "rmqsim: error: --through fuse: FUSE cannot be used here (no /dev/fuse (test)), "
        "and RMQSIM_REQUIRE_FUSE=1")


def test_a_mount_that_fails_during_the_sweep_is_one_line(
    fuse: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fuse_disk, "new_mountpoint", lambda: tmp_path / "missing")
    args = ["crash-sweep", "--storage", "sync", "--profile", "smoke", "--steps", "1",
            "--through", "fuse", "--out", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3
    [line] = result.output.strip().splitlines()
    assert line == (f"rmqsim: error: cannot mount the simulated disk at {tmp_path}/missing: "
                    f"fuse: bad mount point `{tmp_path}/missing': No such file or directory")


def test_through_needs_storage(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["crash-sweep", "--profile", "smoke", "--through",
                                      "fuse", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--through needs --storage" in result.output


# The bench's power-loss table through FUSE beside in process is checked on the small bench
# that tests/test_bench_json.py runs once for several tests
# (test_bench_measures_power_loss_cases_through_fuse_beside_in_process there).


def test_bench_says_when_fuse_cannot_be_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(power_fuse, "fuse_available", lambda: "no /dev/fuse (test)")
    args = ["bench", "--messages", "100", "--repeats", "1", "--backend", "rocksmq",
            "--lockstep-seeds", "0", "--protocol-seeds", "0", "--power-steps", "1"]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert ("power loss through FUSE: skipped: FUSE cannot be used here: no /dev/fuse "
            "(test)") in result.output


def test_a_failing_case_through_fuse_prints_its_repro_and_keeps_its_trace(
    fuse: None, tmp_path: Path
) -> None:
    """The repro line repeats ``--through fuse``; the trace is kept (it replays in
    process, where a storage factory is given), not shrunk."""
    args = ["crash-sweep", "--storage", "sync", "--profile", "crashy", "--steps", "3",
            "--through", "fuse", "--impl", "rmqsim.conformance.mutants.storage:open_no_fsync",
            "--case", "23:lose-unsynced", "--out", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert ("--impl rmqsim.conformance.mutants.storage:open_no_fsync --through fuse --case "
            "23:lose-unsynced") in result.output
    trace = tmp_path / "crashy-seed0-power-23-lose-unsynced.jsonl"
    assert f"    trace: {trace}" in result.output and trace.exists()
    assert not list(tmp_path.glob("*.shrunk.jsonl")) and "shrunk" not in result.output
