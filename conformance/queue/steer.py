"""Steering the gate's crashes into the crash cells its sweeps never armed.

The crash sweeps crash at every point of ONE seed's first ``DEFAULT_SWEEP_STEPS`` steps;
the profile runs over all the seeds reach more crash cells (``conformance.queue.coverage``: an
operation kind, a condition, a crash point) than that. After the sweeps, every reachable
crash cell still not armed gets one case: at the FIRST place a profile run reached it, in
the gate's order (profile, seed, then the run's log of points passed: step, point, hit).
The case is a crash sweep's case (``crash_sweep.case_trace``, ``crash_sweep.run_case``):
the run's steps before that one, ``ArmCrash(hit, point)``, the step, ``crash_reopen``, the
rest of the run, all checked in lockstep.

- bounded: at most one case per unarmed cell, fewer when cells share a first place (the
  conditions of one step), and at most ``max_cases``;
- deterministic: the places come from the runs' maps and the runs replay their seeds, so
  the same seeds give the same cases and traces, whatever ``--jobs``;
- a case per (profile, seed) group re-runs that seed once (the gate keeps no passing trace)
  and replays each case of it: one ``SweepResult`` per group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rmqsim.conformance.adapter import Factory
from rmqsim.conformance.crashing.crash_sweep import (
    STEER_PREFIX,
    CrashCase,
    SweepResult,
    case_inputs,
    run_case,
)
from rmqsim.conformance.queue.coverage import NO_POINT, Cell, MappedRun, merged_coverage
from rmqsim.conformance.running.pool import WorkerPool
from rmqsim.conformance.running.run import RunResult, run_seed

__all__ = [
    "MAX_STEERED_CASES",
    "STEER_PREFIX",
    "SteerPlan",
    "SteerTarget",
    "run_steered",
    "steer_run",
    "steer_targets",
]

#: The most steered cases one gate runs (the first ones, in the gate's order).
MAX_STEERED_CASES = 200


@dataclass(frozen=True, slots=True)
class SteerTarget:
    """Crash ``case`` in the run of ``profile`` with ``seed``: the first place the gate's
    runs reached ``cells`` (crash cells no sweep armed; the conditions of one step)."""

    profile: str
    seed: int
    case: CrashCase
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class SteerPlan:
    """How the gate ran its profiles (the runs steered cases replay): ``impl``, ``steps``
    and ``crash_rate``; failing cases are saved under ``out``."""

    impl: str | Factory
    out: Path
    steps: int | None = None
    crash_rate: float = 0.0


def steer_targets(
    results: Sequence[RunResult],
    sweeps: Iterable[SweepResult],
    *,
    max_cases: int = MAX_STEERED_CASES,
) -> list[SteerTarget]:
    """The cases that arm the crash cells the mapped ``results`` reached and neither they
    nor ``sweeps`` armed: each cell at its first place in ``results``' order, one case per
    place, in that order, at most ``max_cases``."""
    merged, _ = merged_coverage(results, sweeps)
    unarmed = {cell for cell in merged.never_hit() if cell.point != NO_POINT}
    places: dict[tuple[int, int, str, str, int], list[Cell]] = {}
    for index, result in enumerate(results):
        if not isinstance(result, MappedRun) or result.coverage is None or not result.ok:
            continue
        for cell, (step, during, hit) in sorted(result.coverage.first_passed.items()):
            if cell in unarmed:
                unarmed.discard(cell)
                places.setdefault((index, step, during, cell.point, hit), []).append(cell)
    targets = []
    for (index, step, during, point, hit), cells in sorted(places.items())[:max_cases]:
        run = results[index]
        case = CrashCase(step, during, point, hit)
        targets.append(SteerTarget(run.profile, run.seed, case, tuple(cells)))
    return targets


def _groups(targets: Iterable[SteerTarget]) -> list[tuple[str, int, list[CrashCase]]]:
    """The targets' cases per (profile, seed), in the targets' order."""
    grouped: dict[tuple[str, int], list[CrashCase]] = {}
    for target in targets:
        grouped.setdefault((target.profile, target.seed), []).append(target.case)
    return [(profile, seed, cases) for (profile, seed), cases in grouped.items()]


def steer_run(profile: str, seed: int, cases: list[CrashCase], plan: SteerPlan) -> SweepResult:
    """Re-run ``seed`` of ``profile`` as the gate ran it and replay each of ``cases`` on
    it (its base trace rendered: it may go to another process)."""
    started = time.perf_counter()
    base = run_seed(profile, seed, impl=plan.impl, steps=plan.steps, crash_rate=plan.crash_rate)
    base.trace_lines = list(base.trace_lines)
    result = SweepResult(profile, seed, base.impl, base.steps, base)
    if not base.ok:  # not the run the gate passed: reported as a failure
        result.wall_s = time.perf_counter() - started
        return result
    header, recorded = case_inputs(base)
    result.cases = list(cases)
    for case in cases:
        run_case(result, header, recorded, case, impl=plan.impl, out=plan.out,
                 prefix=STEER_PREFIX)  # fmt: skip
    result.wall_s = time.perf_counter() - started
    return result


def run_steered(
    targets: Sequence[SteerTarget],
    plan: SteerPlan,
    *,
    pool: WorkerPool | None = None,
    on_group: Callable[[SweepResult], None] | None = None,
) -> list[SweepResult]:
    """Run the ``targets``' cases, one ``SweepResult`` per (profile, seed), in the
    targets' order (with a ``pool``, its tasks: the same results)."""
    groups = _groups(targets)
    if pool is None:
        done = (steer_run(profile, seed, cases, plan) for profile, seed, cases in groups)
    else:
        futures = [pool.submit(steer_run, p, s, cases, plan) for p, s, cases in groups]
        done = (future.result() for future in futures)
    results = []
    for result in done:
        results.append(result)
        if on_group is not None:
            on_group(result)
    return results
