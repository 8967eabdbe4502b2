"""Steering the gate's crashes (conformance/queue/steer.py): after the sweeps, one crash case at
the first place the runs reached each crash cell no sweep armed; the cases arm those
cells, find what the sweep missed, and are the same with a worker pool."""

from __future__ import annotations

from pathlib import Path

from rmqsim.conformance.queue.coverage import NO_POINT, Cell, merged_coverage
from rmqsim.conformance.queue.steer import steer_targets
from rmqsim.conformance.running.gate import (
    GatePlan,
    GateResult,
    SweepPlan,
    junit_xml,
    run_profiles,
    run_steering,
    run_sweeps,
    summary_json,
)
from rmqsim.conformance.running.pool import worker_pool

TWO_STEP = "rmqsim.conformance.mutants.blind:two_step_destroy_topic"
BETWEEN = "destroy_topic.between_writes"


def _swept_gate(plan: GatePlan) -> GateResult:
    gate = run_profiles(plan)
    gate.sweeps = run_sweeps(
        plan.profiles, SweepPlan(plan.seeds.start, plan.impl, plan.out, steps=20)
    )
    return gate


def _unarmed_crash_cells(gate: GateResult) -> list[Cell]:
    merged, _ = merged_coverage(gate.results, gate.sweeps, gate.steered)
    return [cell for cell in merged.never_hit() if cell.point != NO_POINT]


def test_steering_arms_every_crash_cell_the_runs_reached_and_rocksmq_passes(
    tmp_path: Path,
) -> None:
    plan = GatePlan(("churn",), range(0, 3), "rocksmq", tmp_path, steps=60)
    gate = _swept_gate(plan)
    unarmed = _unarmed_crash_cells(gate)
    assert unarmed  # the sweep of seed 0's first 20 steps leaves cells the runs reached
    targets = steer_targets(gate.results, gate.sweeps)
    cells = [cell for target in targets for cell in target.cells]
    assert sorted(cells) == unarmed  # each unarmed cell once, at one place
    run_steering(gate, plan)
    assert gate.ok
    assert _unarmed_crash_cells(gate) == []
    summary = summary_json(gate)
    assert summary["coverage"]["steered_cases"] == len(targets)
    assert summary["coverage"]["crash_cells"]["hit"] == summary["coverage"]["crash_cells"][
        "reachable"
    ]
    assert [c for s in summary["crash_steer"] for c in s["cases"]] == [
        t.case.label() for t in targets
    ]
    assert b'name="steered churn seed' in junit_xml(gate)


def test_steering_kills_the_two_step_destroy_the_sweep_missed(tmp_path: Path) -> None:
    # Churn seed 40 destroys a topic holding messages at step 279; the sweep of its first
    # steps crashes between the two writes only of destroys of empty topics.
    plan = GatePlan(("churn",), range(40, 41), TWO_STEP, tmp_path, steps=300)
    gate = _swept_gate(plan)
    assert gate.ok  # neither the runs nor seed 40's sweep crash between the two writes
    run_steering(gate, plan)
    assert not gate.ok
    failing = [case for s in gate.steered for case, _ in s.failures]
    assert failing and all(case.point == BETWEEN for case in failing)
    summary = summary_json(gate)
    assert any(f["failures"] for f in summary["crash_steer"])
    assert b"failing crash case" in junit_xml(gate)
    assert list(tmp_path.glob("crash-steer-*.jsonl"))


def test_steering_gives_the_same_cases_in_a_worker_pool(tmp_path: Path) -> None:
    plan = GatePlan(("churn",), range(40, 42), TWO_STEP, tmp_path, steps=120)
    alone = _swept_gate(plan)
    run_steering(alone, plan)
    pooled = _swept_gate(plan)
    with worker_pool(2) as pool:
        run_steering(pooled, plan, pool=pool)
    assert alone.steered
    assert [(s.profile, s.seed, s.cases, s.case_digests) for s in pooled.steered] == [
        (s.profile, s.seed, s.cases, s.case_digests) for s in alone.steered
    ]
