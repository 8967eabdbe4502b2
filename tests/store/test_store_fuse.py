"""The storage layer's power-loss sweep through FUSE: our commit log under the storage
contract as a child process on a FUSE mount of the simulated disk gives the same points and
the same verdicts as in process (the differential of the storage layer), a store mutant is
killed through FUSE, and the command line runs it. Skipped, naming why, where FUSE cannot
be used (failed instead with RMQSIM_REQUIRE_FUSE=1)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli.app import cli
from rmqsim.conformance.crashing.simdisk import FAULT_MODES
from rmqsim.conformance.store.power import FuseWay, InProcessWay, power_factory, store_power_sweep
from tests.fuse_programs import fuse_or_skip

MODES = ("lose-unsynced", "torn-write")


@pytest.fixture(autouse=True)
def fuse() -> None:
    fuse_or_skip()


def test_a_child_through_fuse_sweeps_like_the_store_in_process() -> None:
    in_process = store_power_sweep("store", 0, InProcessWay(power_factory("commitlog-store")),
                                   impl="commitlog-store", steps=2, modes=MODES)
    child = store_power_sweep("store", 0, FuseWay("commitlog-store"), impl="commitlog-store",
                              steps=2, modes=MODES)
    assert in_process.ok and child.ok, (in_process.failures[:2], child.failures[:2])
    assert [c.spec for c in child.cases] == [c.spec for c in in_process.cases]  # same points
    assert len(child.cases) > 40


def test_a_store_mutant_is_killed_through_fuse() -> None:
    impl = "rmqsim.conformance.mutants.store:store_open_no_fsync"
    sweep = store_power_sweep("store", 0, FuseWay(impl), impl=impl, steps=3,
                              modes=("lose-unsynced",), one_per_cell=True)
    assert any(f.problem.startswith("lost-write") for f in sweep.failures), sweep.failures


def test_every_cell_through_fuse_passes_on_our_store() -> None:
    """Every (call kind, fault mode) cell of the store profile's first step, all six modes,
    cut once through FUSE (``one_per_cell``: 37 cases), our store recovering from each.
    (Was the command line's test's, which swept all 123 cases of that step through FUSE:
    the same points under every mode are swept in process by
    tests/store/test_store_layer.py, all points through FUSE under two modes above.)"""
    sweep = store_power_sweep("store", 0, FuseWay("commitlog-store"), impl="commitlog-store",
                              steps=1, one_per_cell=True)
    assert sweep.ok, sweep.failures[:2]
    assert {mode for _, mode in sweep.counts} == set(FAULT_MODES)
    assert len(sweep.cases) == len(sweep.counts) >= 30


def test_the_command_line_sweeps_a_storage_profile_through_fuse() -> None:
    """The command line takes ``--through fuse`` for a storage profile: one case of it (the
    sweep through FUSE is the tests' above), through FUSE, passing."""
    result = CliRunner().invoke(cli, ["crash-sweep", "--profile", "store", "--steps", "1",
                                      "--through", "fuse", "--case", "23:sync-error"])
    assert result.exit_code == 0, result.output
    assert "(power loss, fuse)" in result.output
    assert "1 power-cut cases, 0 failing" in result.output
