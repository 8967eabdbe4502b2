"""What one Spark task does: run a chunk of (profile, seed) work items in lockstep, each in
its own temporary directory, save failing traces, and turn each result into a row.

Nothing here imports Spark, so it runs (and is tested) the same in a Spark Python worker,
on a cluster's worker or in a plain process.
"""

from __future__ import annotations

import functools
import signal
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import Factory
from rmqsim.conformance.layer import RunSpec, layer_for_profile, layer_named
from rmqsim.conformance.queue.coverage import CoverageMap, MappedRun, with_coverage
from rmqsim.conformance.running.gate import save_failure
from rmqsim.conformance.running.interrupts import signals_raise
from rmqsim.conformance.running.run import RunResult, git_commit, run, spec_for_seed
from rmqsim.conformance.running.scratch import scratch_root
from rmqsim.conformance.running.statediff import clip
from rmqsim.conformance.searching.shrink import shrink_and_save
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET, ShrinkBudget
from rmqsim.reports.schema import (
    ALL_OP_KINDS,
    COLUMNS,
    CONFIG_COLUMNS,
    LAYER_QUEUE,
    MAX_DETAIL_CHARS,
    SCHEMA_VERSION,
    STATUS_ERROR,
    TRACES_DIR,
    trace_hash,
)
from rmqsim.scenarios.queue.profiles import UnknownProfileError

__all__ = [
    "TaskSpec",
    "WorkItem",
    "code_version",
    "coverage_columns",
    "error_row",
    "layer_of",
    "planned_spec",
    "profile_columns",
    "result_row",
    "run_chunk",
    "run_item",
    "run_spec",
]


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One run to do: ``repeat`` 1 marks the determinism re-run of a (profile, seed)."""

    profile: str
    seed: int
    repeat: int = 0


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What every task of a sweep shares (shipped to the workers with the closure)."""

    impl: str | Factory
    out_dir: str
    sweep_id: str
    steps: int | None = None
    #: How far a failing run is shrunk (None: never shrink).
    shrink: ShrinkBudget | None = DEFAULT_SHRINK_BUDGET
    #: Probability of arming a crash before each state-changing operation (``--crash-rate``).
    crash_rate: float = 0.0
    #: The driver's ``code_version()`` (None: the task's own): a cluster's executors run
    #: the code shipped from the driver, where no git checkout says which commit it is.
    code_version: str | None = None
    #: Log the crash points each run passes and give its result its coverage map, as
    #: ``rmqsim gate`` does (``conformance.queue.coverage``): ``gate --spark``'s results.
    coverage: bool = False
    #: The driver's git commit, written in every trace header of the task's runs (None:
    #: the task's own checkout's, if any): a cluster's executors run code shipped as a zip,
    #: which no git checkout names.
    git_commit: str | None = None


@functools.cache
def code_version() -> str:
    """The code that ran: the git commit of the checkout, else the package version."""
    commit = git_commit()
    if commit:
        return commit
    try:
        return f"rmqsim {metadata.version('rmqsim')}"
    except metadata.PackageNotFoundError:
        return "rmqsim unknown"


def _signature(result: RunResult) -> str | None:
    """How failures are grouped: the anomaly and the kind of operation it showed at."""
    div = result.divergence
    return f"{result.anomaly} @ {div.step.op.kind}" if div else None


def _detail(result: RunResult) -> str | None:
    div = result.divergence
    if div is None:
        return None
    parts = [div.detail] if div.detail else []
    parts.extend(d.render() for d in div.diffs[:2])
    return clip("; ".join(parts), MAX_DETAIL_CHARS) if parts else None


def layer_of(profile_name: str) -> str:
    """The layer that has the profile (``layer_for_profile``, as ``run_seed`` dispatches);
    the queue's for a profile no layer has (an error row of a profile this code lacks)."""
    try:
        return layer_for_profile(profile_name).name
    except UnknownProfileError:
        return LAYER_QUEUE


def planned_spec(item: WorkItem, spec: TaskSpec) -> RunSpec:
    """The run of ``item`` as planned: its layer and its profile resolved for its seed
    (what an error row shows of a run that did not finish)."""
    layer = layer_for_profile(item.profile)
    resolved = layer.resolve_profile(item.profile, item.seed)
    return RunSpec(
        layer=layer.name,
        profile=item.profile,
        seed=item.seed,
        impl=_impl_name(spec),
        profile_config=resolved.profile_config,
        config=resolved.config,
    )


def profile_columns(result: RunResult) -> dict[str, Any]:
    """The columns a row takes from its run's profile (``result.spec``): the layer, the
    queue config, the kinds a swarm seed switched off (weight 0) and the layer's own
    columns (``Layer.sweep_fields``)."""
    run = result.spec
    weights = run.profile_config.get("weights") or {}
    return {
        "layer": run.layer,
        **{name: run.config.get(name) for name in CONFIG_COLUMNS},
        "kinds_off": [kind for kind, weight in weights.items() if not weight],
        **layer_named(run.layer).sweep_fields(result),
    }


def _counters(result: RunResult) -> dict[str, Any]:
    """``op_counts`` (every kind of either vocabulary), ``crashes_injected``, ``reopens``:
    a run of either layer keeps them in its ``Stats``."""
    stats = result.stats
    unknown = sorted(set(stats.op_counts) - set(ALL_OP_KINDS))
    assert not unknown, f"operation kinds outside the row schema: {unknown}"
    return {
        "op_counts": {kind: stats.op_counts.get(kind, 0) for kind in ALL_OP_KINDS},
        "crashes_injected": stats.crashes_injected,
        "reopens": stats.reopens,
    }


def coverage_columns(coverage: CoverageMap | None) -> tuple[dict[str, int], dict[str, int]]:
    """A run's coverage map as a row's ``coverage_reached`` and ``coverage_crashed``:
    counts by cell label (``Cell.label``), sorted; empty for no map (another layer)."""
    if coverage is None:
        return {}, {}
    return (
        {cell.label(): n for cell, n in sorted(coverage.reached.items()) if n},
        {cell.label(): n for cell, n in sorted(coverage.crashed.items()) if n},
    )


def result_row(
    result: RunResult,
    item: WorkItem,
    spec: TaskSpec,
    *,
    trace_path: str | None,
    shrunk: RunResult | None,
    coverage: CoverageMap | None = None,
) -> tuple[Any, ...]:
    """The row of one run (of any layer's profile), a tuple in ``COLUMNS`` order, with
    the run's ``coverage`` map (a queue run's; None: empty columns)."""
    reached, crashed = coverage_columns(coverage)
    columns = profile_columns(result)
    div = result.divergence
    saved = shrunk or result
    row: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "sweep_id": spec.sweep_id,
        "profile": item.profile,
        "seed": item.seed,
        "implementation": result.impl,
        "code_version": spec.code_version or code_version(),
        "determinism_repeat": item.repeat,
        "status": result.status,
        "anomaly": result.anomaly,
        "signature": _signature(result),
        "divergence_step": div.step_index if div else None,
        "detail": _detail(result),
        "steps": result.steps,
        **_counters(result),
        "fault_points": dict(sorted(result.fault_points.items())),
        "coverage_reached": reached,
        "coverage_crashed": crashed,
        **columns,
        "sim_time_s": result.sim_time_s,
        "wall_s": result.wall_s,
        "trace_digest": result.trace_digest,
        "trace_hash": trace_hash(result.trace_digest),
        "state_digest": result.state_digest,
        "trace_path": trace_path,
        "trace_shrunk": shrunk is not None,
        "repro_steps": saved.steps if trace_path else None,
        "repro": None if result.ok else result.repro_command(),
    }
    assert set(row) == set(COLUMNS), set(row) ^ set(COLUMNS)
    return tuple(row[name] for name in COLUMNS)


def error_row(item: WorkItem, spec: TaskSpec, exc: BaseException, wall_s: float) -> tuple:
    """The row of a run on which rmqsim itself failed: kept, counted, never silently lost
    (even when the profile itself is what failed: its config columns are then null)."""
    try:
        planned = RunResult(spec=planned_spec(item, spec), status=STATUS_ERROR, steps=0)
        columns = profile_columns(planned)
    except Exception:  # the row must still be written; the detail says what failed
        columns = {"layer": layer_of(item.profile), "kinds_off": []}
    impl = _impl_name(spec)
    row: dict[str, Any] = {name: None for name in COLUMNS}
    row.update(
        schema_version=SCHEMA_VERSION,
        sweep_id=spec.sweep_id,
        profile=item.profile,
        seed=item.seed,
        implementation=impl,
        code_version=spec.code_version or code_version(),
        determinism_repeat=item.repeat,
        status=STATUS_ERROR,
        anomaly="internal-error",
        signature=f"internal-error @ {type(exc).__name__}",
        detail=clip(f"{type(exc).__name__}: {exc}", MAX_DETAIL_CHARS),
        steps=0,
        op_counts=dict.fromkeys(ALL_OP_KINDS, 0),
        crashes_injected=0,
        reopens=0,
        fault_points={},
        coverage_reached={},
        coverage_crashed={},
        sim_time_s=0,
        wall_s=wall_s,
        trace_digest="",
        trace_hash=0,
        trace_shrunk=False,
        **columns,
    )
    return tuple(row[name] for name in COLUMNS)


def run_spec(item: WorkItem, spec: TaskSpec) -> RunSpec:
    """The run of ``item`` (``rmqsim run``'s for its profile and seed), its header naming
    ``spec.git_commit`` when the driver sent one."""
    planned = spec_for_seed(
        item.profile, item.seed, impl=spec.impl, steps=spec.steps, crash_rate=spec.crash_rate
    )
    if spec.git_commit is None:
        return planned
    return planned.replace(git_commit=spec.git_commit)


def run_item(
    item: WorkItem, spec: TaskSpec, workdir: Path, shrunk_signatures: set[str | None]
) -> tuple[RunResult, tuple]:
    """Run one item; save its failing trace; return the result and its row.

    A failing run is shrunk (``conformance.searching.shrink``, within ``spec.shrink``) when
    it is the task's first failure of its signature: the report shows the smallest
    reproducer per signature, and shrinking a thousand runs of one bug would cost a
    thousand budgets for nothing. The row then points to the shrunk trace. A passing run's
    trace lines are dropped (memory stays flat); a determinism re-run saves nothing, its
    twin already did.
    """
    result = run(run_spec(item, spec), impl=spec.impl, workdir=workdir, log_faults=True)
    mapped = with_coverage(result)
    coverage = mapped.coverage if isinstance(mapped, MappedRun) else None
    if spec.coverage:
        result = mapped
    else:
        result.fault_log = []  # the map holds what the row needs of it
    trace_path: str | None = None
    shrunk: RunResult | None = None
    if not result.ok and item.repeat == 0:
        save_failure(result, Path(spec.out_dir) / TRACES_DIR)
        signature = _signature(result)
        if spec.shrink is not None and signature not in shrunk_signatures:
            shrunk_signatures.add(signature)
            shrunk = shrink_and_save(result, impl=spec.impl, budget=spec.shrink)
        saved = shrunk or result
        assert saved.trace_path is not None
        trace_path = f"{TRACES_DIR}/{saved.trace_path.name}"
    row = result_row(result, item, spec, trace_path=trace_path, shrunk=shrunk, coverage=coverage)
    if result.ok:
        result.trace_lines = []
    return result, row


def run_chunk(
    items: Iterable[WorkItem], spec: TaskSpec
) -> Iterator[tuple[WorkItem, RunResult, tuple]]:
    """Run the items of one task in a temporary directory of its own.

    An exception from rmqsim on one run becomes an ``error`` row, so one bad seed cannot
    sink a sweep of a million.
    """
    shrunk_signatures: set[str | None] = set()
    # SIGHUP: what PySpark's daemon sends its workers when Spark stops (the driver was
    # interrupted, say); raised here, it lets the temporary directory be removed.
    with (
        signals_raise(signal.SIGHUP, signal.SIGTERM),
        tempfile.TemporaryDirectory(prefix="rmqsim-task-", dir=scratch_root()) as tmp,
    ):
        for item in items:
            started = time.perf_counter()
            try:
                result, row = run_item(item, spec, Path(tmp), shrunk_signatures)
            except Exception as exc:  # reported as a row of status "error"
                result = _error_result(item, spec)
                row = error_row(item, spec, exc, time.perf_counter() - started)
            yield item, result, row


def _impl_name(spec: TaskSpec) -> str:
    return spec.impl if isinstance(spec.impl, str) else repr(spec.impl)


def _error_result(item: WorkItem, spec: TaskSpec) -> RunResult:
    impl = _impl_name(spec)
    run = RunSpec(layer=layer_of(item.profile), profile=item.profile, seed=item.seed, impl=impl)
    return RunResult(spec=run, status=STATUS_ERROR, steps=0)
