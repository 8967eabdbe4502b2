"""The storage layer (docs/STORAGE.md "The storage contract"): our commit log meets it in
process, in a child process and through ``exec:``; every check fails on a store that breaks
it (``wrong_stores``) with its anomaly; failures replay and shrink; the power-loss sweep
passes on ours and kills the store mutants; the command line takes a storage profile."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli.app import cli
from rmqsim.conformance.crashing.simdisk import SimDisk
from rmqsim.conformance.layer import layer_for_profile
from rmqsim.conformance.running.run import read_run_trace, replay, run_seed
from rmqsim.conformance.running.trace import write_lines
from rmqsim.conformance.searching.shrink import shrink_result
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget
from rmqsim.conformance.store.power import (
    power_factory,
    record_store_scenario,
    run_store_case,
    store_power_sweep,
)
from rmqsim.impl.store import open_store
from rmqsim.model.store import ReferenceStore, StoreConfig
from rmqsim.model.store.api import InvalidArgumentError
from rmqsim.scenarios.store.profiles import STORE_PROFILES

WRONG = "tests.store.wrong_stores:"
MUTANTS = "rmqsim.conformance.mutants.store:"


@pytest.mark.parametrize("profile", sorted(STORE_PROFILES))
def test_our_commit_log_meets_every_storage_profile(profile: str) -> None:
    assert layer_for_profile(profile).name == "store"
    for seed in range(3):
        result = run_seed(profile, seed)  # the default: our commit log under the contract
        assert result.ok, (seed, result.anomaly, result.divergence)
        assert result.impl == "rmqsim.impl.store:open_store"
    again = run_seed(profile, 1)
    assert again.trace_lines == run_seed(profile, 1).trace_lines  # same seed, same trace


def test_the_simulation_reaches_every_operation_and_offset_class() -> None:
    kinds: set[str] = set()
    errors: set[str] = set()
    for profile in STORE_PROFILES:
        for line in run_seed(profile, 0).trace_lines[1:-1]:
            step = json.loads(line)
            kinds.add(step["op"]["kind"])
            errors.add(step["outcome"]["error"] or "-")
    assert kinds == {"put", "get", "offsets", "flush", "retain", "crash", "reopen"}
    assert "InvalidArgument" in errors


def test_through_a_child_process_and_exec(tmp_path: Path) -> None:
    from rmqsim.conformance.running.run import run, spec_for_seed

    spec = spec_for_seed("store-crashy", 0).replace(crash_mode="process")
    assert run(spec, impl="commitlog-store").ok  # the reference server, SIGKILLed at crashes
    command = f"exec:{sys.executable} -m rmqsim.conformance.wire.server commitlog-store"
    over_exec = run_seed("store-retention", 1, impl=command)
    assert over_exec.ok and over_exec.trace_lines[1:] == run_seed("store-retention", 1
                                                                  ).trace_lines[1:]


@pytest.mark.parametrize(
    ("factory", "profile", "anomaly"),
    [
        ("put_off_by_one", "store", "offset-mismatch"),
        ("hole_after_reopen", "store-crashy", "hole"),
        ("body_flipped_after_reopen", "store-crashy", "corrupt-body"),
        ("crash_loses_last", "store-crashy", "lost-write"),
        ("crash_adds_phantom", "store-crashy", "phantom-write"),
        ("recovery_drifts", "store-crashy", "recovery-unstable"),
        ("close_loses_last", "store-crashy", "lost-on-close"),
        ("retain_raises", "store-retention", "outcome-mismatch"),
    ],
)
def test_each_check_catches_the_store_that_breaks_it(factory: str, profile: str,
                                                    anomaly: str) -> None:
    found = [run_seed(profile, seed, impl=WRONG + factory).anomaly for seed in range(4)]
    assert anomaly in found, found


@pytest.mark.parametrize(
    ("mutant", "profile", "anomaly"),
    [
        ("open_get_from_next", "store", "get-mismatch"),
        ("open_retain_past_cutoff", "store-retention", "over-retention"),
    ],
)
def test_the_contract_mutants_are_caught_in_lockstep(mutant: str, profile: str,
                                                     anomaly: str) -> None:
    assert {run_seed(profile, seed, impl=MUTANTS + mutant).anomaly for seed in range(3)} == {
        anomaly}


def test_a_failure_replays_and_shrinks(tmp_path: Path) -> None:
    failing = run_seed("store-crashy", 0, impl=WRONG + "crash_loses_last")
    assert failing.anomaly == "lost-write"
    path = tmp_path / "failing.jsonl"
    write_lines(path, failing.trace_lines)
    trace = read_run_trace(path)
    assert json.loads(failing.trace_lines[0])["layer"] == "store"
    assert replay(trace).anomaly == "lost-write"
    assert replay(trace, impl="commitlog-store").ok  # the recorded outcomes are the model's
    shrunk = shrink_result(failing, budget=ShrinkBudget(max_operations=20_000))
    assert shrunk is not None and shrunk.anomaly == "lost-write"
    kinds = [json.loads(line)["op"]["kind"] for line in shrunk.trace_lines[1:-1]]
    assert kinds == ["put", "crash"], kinds  # a put, and the crash that loses it


def test_the_power_loss_sweep_passes_on_our_commit_log() -> None:
    factory = power_factory("commitlog-store")
    for profile in ("store", "store-async", "store-retention"):
        sweep = store_power_sweep(profile, 0, factory, impl="commitlog-store", steps=8)
        assert sweep.ok, (profile, sweep.base_problem, sweep.failures[:2])
        assert len(sweep.cases) > 100
        assert {mode for _, mode in sweep.counts} >= {"lose-unsynced", "torn-write",
                                                       "lose-dir-entry", "sync-error"}


#: The sweep each mutant below is killed by: one case per (call kind, fault mode) cell of
#: the default steps (37 cases, where the whole sweep has 300 to 716), or, for the CRC
#: check, whose torn record needs a cut inside a body write past the first, every case of
#: the first 4 steps (207 of 411). Each still kills its mutant with the anomaly named
#: (checked against the whole sweep when chosen: 12.8 -> 2 CPU s for the five).
KILLING_SWEEP: dict[str, dict[str, Any]] = {
    "store_open_no_fsync": {"one_per_cell": True},
    "store_open_no_crc_check": {"steps": 4},
    "store_open_truncate_one_record_off": {"one_per_cell": True},
    "open_flush_noop": {"one_per_cell": True},
    "open_batch_split": {"one_per_cell": True},
}


@pytest.mark.parametrize(
    ("mutant", "profile", "anomaly"),
    [
        ("store_open_no_fsync", "store", "lost-write"),
        ("store_open_no_crc_check", "store", "corrupt-body"),
        ("store_open_truncate_one_record_off", "store", "hole"),
        ("open_flush_noop", "store-async", "lost-write"),
        ("open_batch_split", "store", "torn-batch"),  # ours promises batches all or nothing
    ],
)
def test_the_power_sweep_kills_durability_mutants(mutant: str, profile: str,
                                                  anomaly: str) -> None:
    sweep = store_power_sweep(profile, 0, power_factory(MUTANTS + mutant), impl=mutant,
                              **KILLING_SWEEP[mutant])
    assert not sweep.ok
    assert any(f.problem.startswith(anomaly) for f in sweep.failures), sweep.failures[:3]


def test_the_cases_of_a_point_share_its_run_and_end_as_lone_cases() -> None:
    """The sweep runs the steps once per point for all its power-cut modes
    (``run_store_cases``): every case of a point where some case fails ends as when it
    runs alone (``run_store_case``, what ``crash-sweep --case`` runs), with the same
    problem and the same cut decisions, and those points also hold cases that pass."""
    factory = power_factory(MUTANTS + "store_open_no_fsync")
    sweep = store_power_sweep("store", 0, factory, impl="no_fsync", steps=3)
    failed = {f.case.spec: (f.problem, f.cut) for f in sweep.failures}
    points = {f.case.point.index for f in sweep.failures}
    shared = [case for case in sweep.cases if case.point.index in points]
    assert len(failed) > 10 and len(shared) > len(failed)  # passing cases beside failing
    recorded = record_store_scenario(STORE_PROFILES["store"], 0, 3)
    for case in shared:
        alone = run_store_case(factory, STORE_PROFILES["store"], recorded,
                               (case.point.index, case.mode), 0)
        assert alone == failed.get(case.spec, (None, alone[1])), case.spec



def test_a_new_store_survives_a_power_cut_after_its_first_synced_put() -> None:
    """The commit log syncs its parent directory when it makes a new store (without it,
    the store's own directory entry, synced puts and all, is lost)."""
    disk = SimDisk(dirs=("/sim",))
    config = StoreConfig(flush="sync", segment_bytes=4096)
    store = open_store(path=Path("/sim/store"), store_config=config, clock=lambda: 0,
                       faults=None, fs=disk)
    assert store.put("t", 0, [b"kept"]) == 0
    survivor = disk.cut("lose-unsynced", random.Random(0))
    reopened = open_store(path=Path("/sim/store"), store_config=config, clock=lambda: 0,
                          faults=None, fs=survivor)
    assert reopened.get("t", 0, 0, 5) == [b"kept"]


def test_the_model_answers_the_contract() -> None:
    now = [0]
    model = ReferenceStore(StoreConfig(flush="async"), lambda: now[0])
    assert model.offsets("t", 0) == (0, 0) and model.get("t", 0, 0, 3) == []
    assert model.put("t", 0, [b"a", b"b"]) == 0
    now[0] = 10
    assert model.put("t", 0, [b""]) == 2
    assert model.get("t", 0, 1, 5) == [b"b", b""] and model.get("t", 0, 3, 1) == []
    assert model.log(("t", 0)).durable == 0  # async: nothing durable before a flush
    model.flush()
    model.retain(10)  # the messages put before 10
    assert model.offsets("t", 0) == (2, 3) and model.get("t", 0, 0, 5) == []
    for bad in [("", 0, [b"x"]), ("t/1", 0, [b"x"]), ("t", -1, [b"x"]), ("t", 0, []),
                ("t", 0, [b"x" * 5000])]:
        with pytest.raises(InvalidArgumentError):
            model.put(*bad)  # type: ignore[arg-type]


def test_the_command_line_takes_storage_profiles(tmp_path: Path) -> None:
    runner = CliRunner()
    ran = runner.invoke(cli, ["run", "--profile", "store", "--seeds", "0:2"])
    assert ran.exit_code == 0, ran.output
    swept = runner.invoke(cli, ["crash-sweep", "--profile", "store", "--steps", "6"])
    assert swept.exit_code == 0 and "power-cut cases, 0 failing" in swept.output, swept.output
    killed = runner.invoke(cli, ["crash-sweep", "--profile", "store", "--steps", "6",
                                 "--impl", MUTANTS + "store_open_no_fsync"])
    assert killed.exit_code == 1 and "--case" in killed.output
    repro = killed.output.split("rmqsim crash-sweep ", 1)[1].splitlines()[0].split()
    again = runner.invoke(cli, ["crash-sweep", *repro])  # the printed repro line, as given
    assert again.exit_code == 1 and "1 power-cut cases, 1 failing" in again.output, again.output
    refused = runner.invoke(cli, ["crash-sweep", "--profile", "store", "--impl", "commitlog"])
    assert refused.exit_code == 2 and "message store factory" in refused.output
    gate = runner.invoke(cli, ["gate", "--impl", "commitlog-store", "--seeds", "0:1",
                               "--out", str(tmp_path / "gate")])
    assert gate.exit_code == 0 and "0 failing power-cut cases" in gate.output, gate.output
    summary = json.loads((tmp_path / "gate" / "summary.json").read_text())
    assert set(summary["power_loss"]) == set(STORE_PROFILES)


def test_a_power_cut_case_matches_a_listed_deviation_by_mode_and_anomaly() -> None:
    from rmqsim.conformance.crashing.power_loss import PowerCase, PowerFailure
    from rmqsim.conformance.crashing.simdisk import PointRecord
    from rmqsim.conformance.reporting.deviations import load_profile

    profile = load_profile("rocketmq-store")
    point = PointRecord(76, "write", "/sim/store/consumequeue/orders/0/00000000000000000000")

    def failure(mode: str, problem: str) -> PowerFailure:
        return PowerFailure(PowerCase(point, 3, mode), problem, None)

    refused = failure("keep-prefix", "unrecoverable: the store did not open: LoadFailed: x")
    assert profile.match_power(refused).name == "unsynced-size-refuses-open"  # type: ignore[union-attr]
    vanished = failure("lose-unsynced", "lost-write: orders/1 recovered up to 0")
    assert profile.match_power(vanished).name == "dir-entries-never-synced"  # type: ignore[union-attr]
    # A loss in a mode that keeps the namespace is no listed deviation: it fails the gate.
    assert profile.match_power(failure("keep-prefix", "lost-write: orders/1 ...")) is None
    assert profile.match_power(failure("torn-write", "corrupt-body: offset 1")) is None
