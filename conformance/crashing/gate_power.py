"""The gate's power-loss step: a storage sweep (``conformance.crashing.power_loss``) of the first
seed of each queue profile, when the implementation is a file-system backend (its factory
takes ``fs=``), held to the promise ``power_loss.gate_promise`` names.

``run_power_sweeps`` runs them (in the gate's worker pool when there is one) and saves
the trace of every failing case (``conformance.crashing.power_trace``: ``rmqsim replay`` reproduces
it); ``power_suite`` and ``power_summary`` are their JUnit suite and JSON summary.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqsim.conformance.crashing.power_cells import power_cells_summary
from rmqsim.conformance.crashing.power_loss import (
    SWEEP_GEOMETRY,
    Geometry,
    PowerSweepResult,
    SweepShape,
    power_loss_sweep,
)
from rmqsim.conformance.crashing.power_trace import save_failures
from rmqsim.conformance.running.pool import WorkerPool
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET, ShrinkBudget

__all__ = [
    "GATE_POWER_STEPS",
    "STEER_POWER_STEPS",
    "PowerPlan",
    "power_coverage",
    "power_suite",
    "power_summary",
    "queue_power_sweeps",
    "run_power_sweeps",
    "steer_power_cells",
]

#: Steps of each profile's power-loss sweep in the gate (README: what it costs).
GATE_POWER_STEPS = 8
#: Steps of a steering sweep (``steer_power_cells``): longer scenarios, a case per cell.
STEER_POWER_STEPS = 40
#: Failing cases of one sweep listed in the JUnit failure text (all have traces).
_LISTED = 5


@dataclass(frozen=True, slots=True)
class PowerPlan:
    """What ``run_power_sweeps`` runs: ``impl`` held to ``promise`` over ``steps`` steps
    on ``geometry`` (``power_loss.SWEEP_GEOMETRY``'s small segments, when the backend
    takes ``geometry=``), failing cases' traces saved under ``out``, the first of each
    sweep shrunk within ``shrink`` (None: not shrunk)."""

    impl: str
    promise: str
    out: Path
    steps: int = GATE_POWER_STEPS
    shrink: ShrinkBudget | None = DEFAULT_SHRINK_BUDGET
    #: The file sizes chosen for a backend that lets rmqsim choose them (None: its own).
    geometry: Geometry | None = field(default_factory=lambda: dict(SWEEP_GEOMETRY))


def _sweep_one(profile: str, seed: int, plan: PowerPlan) -> PowerSweepResult:
    """One sweep, its failing cases saved (in the worker, when there is a pool)."""
    sweep = power_loss_sweep(profile, seed, promise=plan.promise, impl=plan.impl,
                             steps=plan.steps,
                             shape=SweepShape(geometry=plan.geometry))  # fmt: skip
    if not sweep.ok and sweep.config is not None:
        save_failures(sweep, plan.out, shrink=plan.shrink)
    return sweep


def run_power_sweeps(
    profiles: Iterable[str],
    seed: int,
    plan: PowerPlan,
    *,
    pool: WorkerPool | None = None,
    on_sweep: Callable[[PowerSweepResult], None] | None = None,
) -> list[PowerSweepResult]:
    """The power-loss sweep of ``seed`` of every profile by ``plan``, in the order of
    ``profiles`` (tasks of ``pool`` when there is one)."""
    futures: list[Future[PowerSweepResult]] = []
    if pool is None:
        done: Iterable[PowerSweepResult] = (_sweep_one(p, seed, plan) for p in profiles)
    else:
        futures = [pool.submit(_sweep_one, profile, seed, plan) for profile in profiles]
        done = (future.result() for future in futures)
    sweeps: list[PowerSweepResult] = []
    try:
        for sweep in done:
            sweeps.append(sweep)
            if on_sweep is not None:
                on_sweep(sweep)
    finally:
        for future in futures:
            future.cancel()
    return sweeps


def _with_traces(sweep: PowerSweepResult) -> list[tuple[Any, Path | None]]:
    """Each failing case with its trace (None: a sweep that writes none, the storage
    layer's)."""
    paths: list[Path | None] = list(sweep.trace_paths)
    return list(zip(sweep.failures, paths + [None] * (len(sweep.failures) - len(paths)),
                    strict=True))


def _problems(sweep: PowerSweepResult) -> list[str]:
    """One line per failing case (the first ``_LISTED``): what, and its trace."""
    lines = []
    if sweep.base_problem is not None:
        lines.append(f"the run without power cuts failed: {sweep.base_problem}")
    for failure, path in _with_traces(sweep)[:_LISTED]:
        repro = f"  rmqsim replay {path}" if path is not None else ""
        lines.append(f"{failure.case.label()}: {failure.problem}{repro}")
    if len(sweep.failures) > _LISTED:
        lines.append(f"... {len(sweep.failures) - _LISTED} more failing case(s)")
    return lines


def power_suite(root: ET.Element, sweeps: list[PowerSweepResult]) -> None:
    """One JUnit test suite for the power-loss sweeps: a test case per profile."""
    suite = ET.SubElement(
        root, "testsuite", name="rmqsim.power-loss", tests=str(len(sweeps)),
        failures=str(sum(not s.ok for s in sweeps)), errors="0",
        time=f"{sum(s.wall_s for s in sweeps):.3f}",
    )  # fmt: skip
    for sweep in sweeps:
        case = ET.SubElement(
            suite, "testcase", classname="rmqsim.power-loss",
            name=f"{sweep.label} seed {sweep.seed} {sweep.promise} ({len(sweep.cases)} cases)",
            time=f"{sweep.wall_s:.3f}",
        )  # fmt: skip
        if not sweep.ok:
            failure = ET.SubElement(
                case, "failure", type="power-loss",
                message=f"{len(sweep.failures)} failing power-cut case(s)",
            )  # fmt: skip
            failure.text = "\n".join(_problems(sweep))


def power_summary(sweeps: list[PowerSweepResult]) -> dict[str, Any]:
    """The power-loss sweeps in the gate's JSON summary, by profile."""
    return {
        s.label: {
            "seed": s.seed,
            "promise": s.promise,
            "steps": s.steps,
            "cases": len(s.cases),
            "failed": len(s.failures) + (0 if s.base_problem is None else 1),
            "base_problem": s.base_problem,
            "wall_s": round(s.wall_s, 3),
            "geometry": s.geometry,
            "shrunk_trace": str(s.shrunk[0]) if s.shrunk else None,
            "shrunk_steps": s.shrunk[1] if s.shrunk else None,
            "failures": [
                {"case": f.case.label(), "problem": f.problem,
                 "trace": None if path is None else str(path)}
                for f, path in _with_traces(s)[:_LISTED]
            ],
        }
        for s in sweeps
    }


def queue_power_sweeps(sweeps: Iterable[PowerSweepResult]) -> list[PowerSweepResult]:
    """The sweeps of a queue's storage backend (``conformance.crashing.power_loss``: they hold the
    queue config of their scenario), not the storage layer's (``conformance.store.power``)."""
    return [s for s in sweeps if s.config is not None]


def power_coverage(sweeps: Iterable[PowerSweepResult]) -> dict[str, Any] | None:
    """``summary.json``'s ``power_coverage``: the power-loss cells (``power_cells``) the
    sweeps of a queue's storage backend cut; None when there were none."""
    queue = queue_power_sweeps(sweeps)
    return power_cells_summary(queue) if queue else None


def steer_power_cells(
    profiles: Iterable[str], seed: int, plan: PowerPlan, done: list[PowerSweepResult],
    *, steps: int = STEER_POWER_STEPS,
) -> list[PowerSweepResult]:
    """After the sweeps ``done``: while a power-loss cell stays empty, a sweep of the next
    of ``profiles`` over ``steps`` steps that runs one case per empty cell, at the first
    point of its kind (``SweepShape.cells``); the steering sweeps, in order. A cell no
    profile reaches stays empty (``power_cells_summary`` says why)."""
    steered: list[PowerSweepResult] = []
    for profile in dict.fromkeys(profiles):
        empty = power_cells_summary([*done, *steered])["never_cut"]
        if not empty:
            break
        sweep = power_loss_sweep(profile, seed, promise=plan.promise, impl=plan.impl,
                                 steps=steps, shape=SweepShape(cells=frozenset(empty),
                                                               geometry=plan.geometry))
        if not sweep.ok and sweep.config is not None:
            save_failures(sweep, plan.out, prefix="steer-", shrink=plan.shrink)
        sweep.steered = True
        if sweep.cases or not sweep.ok:
            steered.append(sweep)
    return steered
