"""``rmqsim gate --spark``: the conformance gate run by the sweep pipeline on Spark.

conformance/ cannot import reports/ (layering), so ``rmqsim gate`` finds this runner
through the ``rmqsim.gate_runners`` entry point group. It takes the arguments of
``conformance.running.gate.run_profiles`` and returns the same ``GateResult``, so the gate's
table, JUnit XML and JSON summary are made by the same code either way. The rows also go
to Parquet under ``out`` (``rmqsim report OUT`` works on a gate's directory).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from rmqsim.conformance.adapter import resolve_impl
from rmqsim.conformance.running.gate import GatePlan, GateResult, ProfileSummary
from rmqsim.conformance.running.run import RunResult
from rmqsim.conformance.searching.shrink_budget import OnRun
from rmqsim.reports.schema import STATUS_ERROR
from rmqsim.reports.spark import DEFAULT_MASTER, Shipping, spark_session
from rmqsim.reports.sweep import SweepSpec, run_sweep

__all__ = ["SparkGateError", "run_profiles_spark"]


class SparkGateError(RuntimeError):
    """rmqsim failed on some run inside a Spark task (an internal error, exit 3)."""


def run_profiles_spark(
    plan: GatePlan,
    *,
    on_result: Callable[[RunResult], None] | None = None,
    on_shrink_run: OnRun | None = None,
    master: str | None = None,
) -> GateResult:
    """Every seed of every profile of ``plan`` on Spark ``master``; failing traces under
    ``plan.out`` (``conformance.running.gate.run_profiles``'s arguments, plus ``master``).

    The normal gate does not re-run seeds for determinism, so neither does this one. Each
    task shrinks its first failure of each signature within ``plan.shrink`` (None:
    none), where the normal gate shrinks its first few failures. Shrinks run inside the
    tasks, so ``on_shrink_run`` is never called: the bar counts finished runs.
    """
    names, seeds, impl, out = plan.profiles, plan.seeds, plan.impl, plan.out
    gate = GateResult(impl=resolve_impl(impl)[0], seeds=seeds)
    shipping = Shipping(impl=impl)
    master = master or DEFAULT_MASTER
    with spark_session(master, "rmqsim gate", shipping=shipping, quick_start=True) as spark:
        sweep = SweepSpec(
            names, seeds, impl, plan.steps, sample=0, shrink=plan.shrink, crash_rate=plan.crash_rate
        )
        outcome = run_sweep(spark, sweep, out=out, keep_results=True)
    broken = [r for r in outcome.results if r.status == STATUS_ERROR]
    if broken:
        raise SparkGateError(
            f"rmqsim failed on {len(broken)} run(s), e.g. {broken[0].profile} seed "
            f"{broken[0].seed}; `{shlex.join(['rmqsim', 'report', str(out)])}` lists them"
        )
    for name in names:
        gate.summaries[name] = ProfileSummary(name)
    for result in outcome.results:
        gate.summaries[result.profile].add(result)
        gate.results.append(result)
        if on_result is not None:
            on_result(result)
    return gate
