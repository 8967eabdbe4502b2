"""Shrinking: turn a failing trace into the smallest one that fails the same way.

A failing run of hundreds of operations is hard to read; the bug usually needs a handful.
``shrink_result`` searches for a shorter operation sequence that makes the same
implementation fail with the same anomaly, in passes repeated until none helps:

1. actors and topics: drop every step of one actor (a whole consumer, the clock, the
   crasher...), then every operation on one topic;
2. produces: merged per topic, then adjacent ones, then payloads emptied
   (``shrink_merge``: a failure that needs a backlog keeps every small produce otherwise);
3. operations: delta debugging (Zeller's ddmin, complements only: a sequence of queue
   operations rarely fails from a middle chunk alone) over the steps;
4. values: fewer messages per produce, empty or shorter payloads, no properties, smaller
   polls and smaller crash hits.

Dropping a step changes what later steps return, so every candidate is re-executed from
scratch in lockstep with its outcomes *not* checked against the original ones (they were
the model's, and the model is re-run too); a candidate is kept only when it diverges with
the same anomaly. It is then cut right after its diverging step, which is where the
lockstep stops anyway. Each candidate is a normal replayable trace, so the result is one
too: ``rmqsim replay <file>.shrunk.jsonl`` fails with the same anomaly.

Determinism: candidates are tried in a fixed order and each run is deterministic, and the
search is bounded by work (``ShrinkBudget.max_operations``: the operations its candidate
runs execute), not by time; so the same failing run shrinks to the same trace on a fast
machine and on a slow one, a laptop and CI alike. An optional wall-clock cap
(``max_seconds``) is for people who would rather wait less; a search it stops depends on
the machine's speed, and ``ShrinkStats`` says so, with the operations budget that
reproduces that result anywhere.

Candidates run under a short liveness bound (``watchdog.SHRINK_OP_TIMEOUT_S``, or the
command's ``--op-timeout-s`` when shorter): a failure that is a ``hang`` makes every
candidate that still fails wait out the bound once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from rmqsim.conformance.adapter import Factory
from rmqsim.conformance.layer import Layer, layer_for_header
from rmqsim.conformance.running.run import (
    RunResult,
    parse_run_lines,
    read_run_trace,
    replay,
    run_steps,
)
from rmqsim.conformance.running.trace import Trace, TraceFormatError
from rmqsim.conformance.running.watchdog import op_timeout, shrink_op_timeout_s
from rmqsim.conformance.searching.shrink_budget import (
    DEFAULT_SHRINK_BUDGET,
    STOPPED_BY_OPERATIONS,
    STOPPED_BY_TIME,
    OnRun,
    ShrinkBudget,
    ShrinkStats,
)
from rmqsim.scenarios.queue.ops import Step

__all__ = [
    "SHRUNK_SUFFIX",
    "AnyStep",
    "NotFailingError",
    "Pass",
    "R",
    "Runner",
    "ShrinkReport",
    "passes",
    "shrink_and_save",
    "shrink_file",
    "shrink_result",
    "shrink_steps",
    "shrunk_path",
]

#: A step of the runs the shrinker cuts (of any layer's vocabulary).
AnyStep = Step[Any]

#: Suffix of a shrunk trace written beside the original.
SHRUNK_SUFFIX = ".shrunk.jsonl"


class _OutOfBudget(Exception):
    """The budget is spent: stop searching, keep the best found so far."""


#: Executes a candidate's steps from scratch (outcomes decided by the model, none
#: expected): ``run.run_steps``.
Runner = Callable[[tuple[AnyStep, ...]], RunResult]


@dataclass(slots=True)
class _Search:
    """The state of one shrink: the target anomaly, the best failing run, the budget."""

    run: Runner
    anomaly: str
    #: Simpler variants of one operation (``Layer.simpler_ops``).
    simpler: Callable[[Any], Iterable[Any]]
    budget: ShrinkBudget
    #: ``time.perf_counter()`` past which no candidate starts (None: no time limit).
    deadline: float | None
    on_run: OnRun | None = None
    best: RunResult | None = None
    runs: int = 0
    #: Operations the candidate runs executed (a run counts at least one: the budget
    #: check before each run must see the count grow, for ``stats`` to reproduce a stop).
    operations: int = 0
    stopped_by: str | None = None
    #: Every candidate tried, with what ``fails`` returned for it.
    cache: dict[tuple[AnyStep, ...], tuple[tuple[AnyStep, ...], RunResult] | None] = field(
        default_factory=dict
    )

    def fails(self, steps: tuple[AnyStep, ...]) -> tuple[AnyStep, ...] | None:
        """Run ``steps``; if they fail with the target anomaly, return them cut after the
        diverging step, else None. The passes move to every candidate that fails, and
        never to a longer or less simple one, so the last failing run is the best."""
        if steps not in self.cache:
            self.cache[steps] = self._run(steps)
        found = self.cache[steps]
        if found is None:
            return None
        self.best = found[1]
        return found[0]

    def stats(self) -> ShrinkStats:
        return ShrinkStats(self.runs, self.operations, self.stopped_by)

    def _run(self, steps: tuple[AnyStep, ...]) -> tuple[tuple[AnyStep, ...], RunResult] | None:
        # The first run (the failing steps as they are) always runs: without it there is
        # no telling a spent budget from a failure that does not recur.
        if self.runs and self.operations >= self.budget.max_operations:
            self.stopped_by = STOPPED_BY_OPERATIONS
            raise _OutOfBudget
        if self.runs and self.deadline is not None and time.perf_counter() > self.deadline:
            self.stopped_by = STOPPED_BY_TIME
            raise _OutOfBudget
        self.runs += 1
        # Each candidate that still hangs waits out the liveness bound: keep it short.
        with op_timeout(shrink_op_timeout_s()):
            result = self.run(steps)
        self.operations += max(result.steps, 1)
        if self.on_run is not None:
            self.on_run(self.stats())
        if result.anomaly != self.anomaly:
            return None
        result.replay_only = True
        return steps[: result.steps], result


def _steps_of(trace: Trace) -> tuple[AnyStep, ...]:
    return tuple(Step(s.time_s, s.actor, s.op) for s in trace.steps)


def _drop_actors(search: _Search, steps: tuple[AnyStep, ...]) -> tuple[AnyStep, ...]:
    """Drop all steps of one actor at a time (actors in first-appearance order)."""
    for actor in dict.fromkeys(s.actor for s in steps):
        if not any(s.actor == actor for s in steps):
            continue  # an earlier success cut its steps off
        found = search.fails(tuple(s for s in steps if s.actor != actor))
        if found is not None:
            steps = found
    return steps


def _drop_topics(search: _Search, steps: tuple[AnyStep, ...]) -> tuple[AnyStep, ...]:
    """Drop all operations on one topic at a time (topics in first-appearance order)."""
    for topic in dict.fromkeys(_topic_of(s) for s in steps):
        if topic is None or not any(_topic_of(s) == topic for s in steps):
            continue
        found = search.fails(tuple(s for s in steps if _topic_of(s) != topic))
        if found is not None:
            steps = found
    return steps


def _topic_of(step: AnyStep) -> str | None:
    topic = getattr(step.op, "topic", None)
    return topic if isinstance(topic, str) else None


def _ddmin(search: _Search, steps: tuple[AnyStep, ...]) -> tuple[AnyStep, ...]:
    """Delta debugging over complements: remove chunks while the failure persists. After
    a removal the scan goes on from where it was, wrapping round, rather than from the
    first chunk again: the chunks before it were just tried and kept. It ends as
    classic ddmin does, when no single step can be removed (a whole scan found none)."""
    chunks = 2
    resume_at = 0
    while len(steps) >= 2:
        size = -(-len(steps) // chunks)  # ceiling division
        starts = range(0, len(steps), size)
        first = min(resume_at // size, len(starts) - 1)
        for start in (*starts[first:], *starts[:first]):
            found = search.fails(steps[:start] + steps[start + size :])
            if found is not None:
                steps = found
                chunks = max(chunks - 1, 2)
                resume_at = start
                break
        else:
            if chunks >= len(steps):
                return steps
            chunks = min(len(steps), chunks * 2)
            resume_at = 0
    return steps


def _simplify(search: _Search, steps: tuple[AnyStep, ...]) -> tuple[AnyStep, ...]:
    """Replace steps by simpler variants while the failure persists."""
    index = 0
    while index < len(steps):
        step = steps[index]
        for op in search.simpler(step.op):
            variant = replace(step, op=op)
            found = search.fails((*steps[:index], variant, *steps[index + 1 :]))
            if found is not None:
                steps = found
                break
        else:
            index += 1
    return steps


#: A pass: the steps it ends with, having tried candidates on the search.
Pass = Callable[[_Search, tuple[AnyStep, ...]], tuple[AnyStep, ...]]


def passes(layer: Layer) -> tuple[Pass, ...]:
    """The passes of one round, in order: drop actors, then topics, then the layer's own
    (``Layer.shrink_passes``: the consumer's drops a delivery with its completion, the
    queue's merges produces), then delta debugging, then simpler operations
    (``Layer.simpler_ops``)."""
    return (
        _drop_actors,
        _drop_topics,
        *layer.shrink_passes(),
        _ddmin,
        _simplify,
    )


def shrink_result(
    result: RunResult,
    *,
    impl: str | Factory | None = None,
    budget: ShrinkBudget = DEFAULT_SHRINK_BUDGET,
    on_run: OnRun | None = None,
) -> RunResult | None:
    """The failing run of the smallest trace found that fails like ``result`` (same
    implementation, same anomaly), or None when ``result`` does not fail again when
    re-run. Runs of every layer alike: candidates run through ``run.run_steps``, where a
    step that no longer makes sense after a cut (say, completing a batch that was never
    delivered) returns the same error on both sides; as always, a candidate is kept only
    if it still fails with the same anomaly. Bounded
    by ``budget``; the result's ``shrink_stats`` say how the search went, and ``on_run``
    hears how far it has gone after every candidate run."""
    assert not result.ok and result.anomaly is not None, "only a failing run can be shrunk"
    trace, layer, run = _runner(result.trace_lines, impl or result.impl)
    return shrink_steps(_steps_of(trace), run, result.anomaly, layer, budget=budget,
                        on_run=on_run)


#: What a runner given to ``shrink_steps`` returns (a ``RunResult``, or a run of the same
#: shape: ``steps``, ``anomaly``, ``replay_only``, ``shrink_stats``).
R = TypeVar("R")


def shrink_steps(
    steps: tuple[AnyStep, ...],
    run: Callable[[tuple[AnyStep, ...]], R],
    anomaly: str,
    layer: Layer,
    *,
    budget: ShrinkBudget = DEFAULT_SHRINK_BUDGET,
    on_run: OnRun | None = None,
) -> R | None:
    """``shrink_result``'s search over any ``run``ner of candidates (a power-cut case's,
    say: ``conformance.crashing.power_trace``): the failing run of the smallest sequence found from
    ``steps`` that ``run`` fails with ``anomaly``, by ``layer``'s passes and simpler
    operations; None when ``steps`` themselves do not fail so. A run is what ``run``
    returns: it has ``steps`` (executed; a candidate is cut there), ``anomaly``,
    ``replay_only`` and ``shrink_stats``."""
    deadline = None
    if budget.max_seconds is not None:
        deadline = time.perf_counter() + budget.max_seconds
    search = _Search(
        run=cast(Runner, run),  # the search reads only what R has (docstring)
        anomaly=anomaly,
        simpler=layer.simpler_ops,
        budget=budget,
        deadline=deadline,
        on_run=on_run,
    )
    try:
        found = search.fails(steps)
        if found is None:
            return None
        steps = found
        while True:
            before = steps
            for shrink_pass in passes(layer):
                steps = shrink_pass(search, steps)
            if steps == before:
                break
    except _OutOfBudget:
        pass
    if search.best is not None:
        search.best.shrink_stats = search.stats()
    return cast("R | None", search.best)


def _runner(lines: list[str], impl: str | Factory) -> tuple[Trace, Layer, Runner]:
    """The trace in ``lines``, its layer, and how to run a candidate cut from it."""
    trace = parse_run_lines(lines)
    header = dict(trace.header)
    header.setdefault("shrunk_from_steps", len(trace.steps))

    def run(steps: tuple[AnyStep, ...]) -> RunResult:
        return run_steps(header, steps, impl=impl)

    return trace, layer_for_header(header), run


@dataclass(frozen=True, slots=True)
class ShrinkReport:
    """What ``shrink_file`` did."""

    original_steps: int
    shrunk_steps: int
    anomaly: str
    path: Path
    seconds: float
    stats: ShrinkStats


def shrunk_path(path: Path) -> Path:
    """``dir/name.jsonl`` -> ``dir/name.shrunk.jsonl`` (beside the original)."""
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(stem + SHRUNK_SUFFIX)


def shrink_and_save(
    result: RunResult,
    *,
    impl: str | Factory | None,
    budget: ShrinkBudget,
    on_run: OnRun | None = None,
) -> RunResult | None:
    """Shrink a failing run whose trace was saved (``result.trace_path``) and write the
    shrunk trace beside it; remember it on ``result.shrunk``. None if it did not recur,
    or if the machine refused the write (a full disk: then a note on ``result`` says so,
    and the run's verdict stands)."""
    from rmqsim.conformance.running.trace import output_problem, write_lines

    assert result.trace_path is not None, "save the failing trace first"
    shrunk = shrink_result(result, impl=impl, budget=budget, on_run=on_run)
    if shrunk is not None:
        shrunk.trace_path = shrunk_path(result.trace_path)
        try:
            write_lines(shrunk.trace_path, shrunk.trace_lines)
        except OSError as exc:
            problem = output_problem(exc)
            if problem is None:
                raise
            result.notes.append(f"could not write its shrunk trace {shrunk.trace_path} "
                                f"({problem})")
            return None
        result.shrunk = shrunk
    return shrunk


class NotFailingError(Exception):
    """The trace given to ``shrink_file`` does not fail: there is nothing to shrink."""


def shrink_file(
    path: Path,
    *,
    impl: str | Factory | None = None,
    budget: ShrinkBudget = DEFAULT_SHRINK_BUDGET,
    on_run: OnRun | None = None,
) -> ShrinkReport:
    """Shrink the failing trace at ``path`` (of a queue or a consumer profile) into
    ``<stem>.shrunk.jsonl`` beside it."""
    started = time.perf_counter()
    trace = read_run_trace(path)
    layer = layer_for_header(trace.header)
    if not trace.steps:
        raise TraceFormatError(path, None, "the trace has no steps: nothing to shrink")
    original = replay(trace, impl=impl)
    if original.ok:
        raise NotFailingError(f"{path}: the trace does not fail on {original.impl}")
    if original.anomaly == "trace-mismatch":
        raise NotFailingError(
            f"{path}: the model no longer returns the recorded outcomes (trace-mismatch): "
            "it was written by other code; re-run its seed instead"
        )
    original.trace_path = path
    shrunk = shrink_and_save(original, impl=impl, budget=budget, on_run=on_run)
    if shrunk is None:
        why = "the failure did not recur when re-run"
        if layer.final_check_needs_whole_run:
            why += (
                f" (or it shows only at a {layer.name} run's final check, which needs the "
                "whole run: a cut trace fails that on any implementation)"
            )
        raise NotFailingError(f"{path}: {why}")
    assert shrunk.trace_path is not None and shrunk.anomaly is not None
    assert shrunk.shrink_stats is not None
    return ShrinkReport(
        original_steps=len(trace.steps),
        shrunk_steps=shrunk.steps,
        anomaly=shrunk.anomaly,
        path=shrunk.trace_path,
        seconds=time.perf_counter() - started,
        stats=shrunk.shrink_stats,
    )
