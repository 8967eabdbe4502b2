"""Power-loss cells (conformance/crashing/power_cells.py): every disk point of the commit log named
by what the store does, the gate's sweep choosing small segments so that every (kind x
fault mode) cell is cut, steering into the cells its sweeps left empty, and the mutant
only those cells catch (docs/STORAGE.md, "Power-loss cells")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.gate_power import (
    PowerPlan,
    power_coverage,
    run_power_sweeps,
    steer_power_cells,
)
from rmqsim.conformance.crashing.power_cells import (
    FIRST_OPEN_KIND,
    POWER_CELLS,
    point_kind,
    point_kinds,
    power_cells_lines,
    power_cells_summary,
)
from rmqsim.conformance.crashing.power_loss import SWEEP_GEOMETRY, SweepShape, power_loss_sweep
from rmqsim.conformance.crashing.power_trace import read_power_trace, run_power_trace
from rmqsim.conformance.crashing.simdisk import PointRecord
from rmqsim.conformance.mutants.storage import MUTANTS
from rmqsim.conformance.running.gate import GATE_PROFILES

ROLL_NO_DIR_SYNC = next(m.impl for m in MUTANTS if m.name == "roll-no-dir-sync")
SEGMENT = "/sim/store/commitlog/00000000000000000512"
CQ = "/sim/store/consumequeue/00000000000000000001/00000000000000000000"


@pytest.mark.parametrize(
    ("call", "path", "previous", "kind"),
    [
        ("write", SEGMENT, None, "segment-append"),
        ("sync", SEGMENT, None, "segment-sync"),
        ("create", SEGMENT, None, "segment-roll"),
        ("truncate", SEGMENT, None, "segment-roll"),
        ("sync_dir", "/sim/store/commitlog", None, "segment-dir-entry"),
        ("remove", SEGMENT, None, "reclaim-delete"),
        ("remove", CQ, None, "reclaim-delete"),
        ("write", CQ, None, "cq-write"),
        ("sync", CQ, None, "cq-write"),
        ("create", CQ, None, "cq-file"),
        ("make_dir", "/sim/store/consumequeue/00000000000000000001", None, "cq-file"),
        ("write", "/sim/store/checkpoint.tmp", None, "checkpoint-write"),
        ("sync", "/sim/store/checkpoint.tmp", None, "checkpoint-write"),
        ("rename", "/sim/store/checkpoint", None, "checkpoint-rename"),
        ("sync_dir", "/sim/store", ("rename", "/sim/store/checkpoint"), "checkpoint-rename"),
        ("sync_dir", "/sim/store", ("remove", "/sim/store/abort"), "markers"),
        ("create", "/sim/store/abort", None, "markers"),
        ("write", "/sim/store/my-own-index", None, "other"),
    ],
)  # fmt: skip
def test_each_point_is_named_by_what_the_store_does(
    call: str, path: str, previous: tuple[str, str] | None, kind: str
) -> None:
    before = None if previous is None else PointRecord(1, *previous)
    assert point_kind(PointRecord(2, call, path), before) == kind


def test_the_first_opens_points_are_no_cell() -> None:
    points = [(0, PointRecord(1, "create", SEGMENT)), (1, PointRecord(2, "create", SEGMENT))]
    assert point_kinds(points) == [FIRST_OPEN_KIND, "segment-roll"]
    assert "segment-roll/sync-error" not in POWER_CELLS  # no sync among a roll's calls
    assert "segment-sync/sync-error" in POWER_CELLS and len(POWER_CELLS) == 56


def test_the_gate_sweep_on_small_segments_cuts_every_cell(tmp_path: Path) -> None:
    """One profile's 8-step sweep on ``SWEEP_GEOMETRY``, then the steering sweeps: every
    cell cut. On the backend's own 1 MiB segments the same sweep leaves the roll, the
    new segment's entry, the mid-run checkpoint and reclaim empty, and says why."""
    plan = PowerPlan("commitlog", "sync", tmp_path, shrink=None)
    sweeps = run_power_sweeps(["smoke"], 0, plan)
    assert sweeps[0].geometry == SWEEP_GEOMETRY
    assert {"segment-roll", "segment-dir-entry", "checkpoint-write"} <= sweeps[0].kinds
    steered = steer_power_cells(["smoke", *GATE_PROFILES], 0, plan, sweeps)
    assert steered and all(s.steered and s.ok and s.cases for s in steered)
    summary = power_coverage([*sweeps, *steered])
    assert summary is not None and summary["never_cut"] == {}
    assert summary["cells"] == {"reachable": len(POWER_CELLS), "cut": len(POWER_CELLS)}
    # Each steering sweep ran one case per cell it was sent for, none twice.
    assert all(n == 1 for s in steered for n in s.cells.values())

    own = power_loss_sweep("smoke", 0, impl="commitlog", steps=8)
    assert own.geometry is None
    empty = power_cells_summary([own])["never_cut"]
    assert {"segment-roll/torn-write", "segment-dir-entry/lose-dir-entry",
            "checkpoint-rename/lose-unsynced", "reclaim-delete/keep-prefix"} <= set(empty)
    assert "geometry=" in empty["segment-roll/lose-unsynced"]
    lines = power_cells_lines(power_cells_summary([own]))
    assert lines[0].startswith("power-loss cells (1 sweeps, the backend's own file sizes)")
    assert any("segment-roll/lose-unsynced" in line for line in lines[1:])


def test_roll_no_dir_sync_dies_only_of_the_new_cells(tmp_path: Path) -> None:
    """The mutant's bug is on the roll path only: the old sweep (1 MiB segments, 8 steps
    of smoke) never rolls and passes it; the gate's sweep on small segments kills it, and
    its failing case's trace (which keeps the geometry) replays to the same anomaly."""
    old = power_loss_sweep("smoke", 0, impl=ROLL_NO_DIR_SYNC, steps=8)
    assert old.ok, [f.case.label() for f in old.failures[:3]]
    plan = PowerPlan(ROLL_NO_DIR_SYNC, "sync", tmp_path, shrink=None)
    (new,) = run_power_sweeps(["smoke"], 0, plan)
    assert new.base_problem is None and new.failures
    # Every failing cut comes after the first roll (the new cells' points, and those after).
    first_roll = min(c.point.index for c in new.cases if c.kind == "segment-roll")
    assert all(f.case.point.index > first_roll for f in new.failures)
    trace = read_power_trace(new.trace_paths[0])
    assert trace.geometry == SWEEP_GEOMETRY
    assert run_power_trace(trace).anomaly is not None
    assert run_power_trace(trace, impl="commitlog").ok  # the correct backend keeps it


def test_the_gate_prints_and_saves_the_power_cells(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [
        "gate", "--impl", "commitlog", "--seeds", "0:1", "--profiles", "smoke",
        "--no-crash-sweep", "--steps", "20", "--out", str(tmp_path),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"{len(POWER_CELLS)} of {len(POWER_CELLS)} (call kind x fault mode) cells cut" in \
        result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["power_coverage"]["never_cut"] == {}
    assert summary["power_loss"]["smoke"]["geometry"] == SWEEP_GEOMETRY
    assert any(name.endswith("(steered)") for name in summary["power_loss"])


def test_a_sweep_shape_selects_one_case_per_cell() -> None:
    cells = frozenset({"segment-roll/torn-write", "cq-write/sync-error"})
    sweep = power_loss_sweep("smoke", 0, impl="commitlog", steps=8,
                             shape=SweepShape(cells=cells, geometry=SWEEP_GEOMETRY))
    assert sorted(sweep.cells) == sorted(cells) and len(sweep.cases) == 2
