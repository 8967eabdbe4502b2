"""The queue layer's part of the gate (``conformance.layer.GateHooks``): each profile run
keeps its coverage map (``conformance.queue.coverage``), the summary holds the map of every
run, sweep and steered case (``coverage``) and says it in a few lines, and after the crash
sweeps a crash case is steered into each crash cell the runs reached and no sweep armed
(``conformance.queue.steer``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rmqsim.conformance.crashing.crash_sweep import SweepResult
from rmqsim.conformance.layer import GateHooks
from rmqsim.conformance.queue.coverage import coverage_lines, coverage_summary, with_coverage
from rmqsim.conformance.queue.steer import SteerPlan, run_steered, steer_targets
from rmqsim.conformance.running.run_result import RunResult

__all__ = ["QUEUE_GATE_HOOKS", "QueueGateHooks"]


class QueueGateHooks(GateHooks):
    """The queue layer's gate hooks (see the module's docstring)."""

    def map_run(self, result: RunResult) -> RunResult:
        return with_coverage(result)

    def summary(
        self, results: Sequence[RunResult], sweeps: Sequence[SweepResult],
        steered: Sequence[SweepResult],
    ) -> Mapping[str, Any]:
        """``coverage``: always there (zero runs when the gate ran no queue profile)."""
        return {"coverage": coverage_summary(results, sweeps, steered)}

    def summary_lines(self, summary: Mapping[str, Any]) -> list[str]:
        return coverage_lines(summary["coverage"])

    def steer_crashes(
        self, results: Sequence[RunResult], sweeps: Sequence[SweepResult], plan: Any, *,
        pool: Any, on_group: Callable[[SweepResult], None] | None,
    ) -> Sequence[SweepResult]:
        targets = steer_targets(results, sweeps)
        steer = SteerPlan(plan.impl, plan.out, plan.steps, plan.crash_rate)
        return run_steered(targets, steer, pool=pool, on_group=on_group)


#: The queue layer's gate hooks (registered by ``conformance.layers.gate``).
QUEUE_GATE_HOOKS = QueueGateHooks()
