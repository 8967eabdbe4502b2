"""The gate's crash sweeps as a typed plan (``gate.SweepPlan``): ``run_sweeps`` submits them
to a pool heaviest first (by the gate's runs of each profile) and reports them in the
given order, with the results of a serial run."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.running.gate import GateResult, SweepPlan, run_sweeps
from rmqsim.conformance.running.pool import WorkerPool
from rmqsim.conformance.running.run import run_seed


class _InlineExecutor:
    """Runs each task at once, noting which profile's sweep each task was."""

    def __init__(self) -> None:
        self.profiles: list[str] = []

    def submit(self, func: Callable[..., Any], *args: Any) -> Future[Any]:
        # ``WorkerPool.submit``: (in_worker, bound, task, profile, plan)
        self.profiles.append(args[2])
        future: Future[Any] = Future()
        future.set_result(func(*args))
        return future


def _gate(walls: dict[str, float]) -> GateResult:
    gate = GateResult(impl=DEFAULT_IMPL, seeds=range(0, 1))
    for profile, wall_s in walls.items():
        result = run_seed(profile, 0, steps=1)
        result.wall_s = wall_s
        gate.add(result)
    return gate


def test_sweeps_run_heaviest_first_in_a_pool_and_report_in_order(tmp_path: Path) -> None:
    plan = SweepPlan(seed=0, impl=DEFAULT_IMPL, out=tmp_path, steps=4)
    profiles = ["smoke", "churn", "swarm"]
    executor = _InlineExecutor()
    pool = WorkerPool(executor, 2)  # type: ignore[arg-type]  # runs tasks inline
    seen: list[str] = []
    pooled = run_sweeps(
        profiles,
        plan,
        pool=pool,
        weighed_by=_gate({"smoke": 1.0, "churn": 0.5, "swarm": 9.0}),
        on_sweep=lambda sweep: seen.append(sweep.profile),
    )
    assert executor.profiles == ["swarm", "smoke", "churn"]
    assert [s.profile for s in pooled] == seen == profiles
    serial = run_sweeps(profiles, plan)
    assert [s.case_digests for s in pooled] == [s.case_digests for s in serial]
    assert all(s.cases and s.ok for s in serial)


def test_without_the_gates_weights_a_pool_runs_the_sweeps_in_order(tmp_path: Path) -> None:
    executor = _InlineExecutor()
    pool = WorkerPool(executor, 2)  # type: ignore[arg-type]  # runs tasks inline
    run_sweeps(["churn", "smoke"], SweepPlan(0, DEFAULT_IMPL, tmp_path, steps=2), pool=pool)
    assert executor.profiles == ["churn", "smoke"]
