"""The gate's coverage map: which (operation kind, condition, crash point) cells its runs hit.

In the spirit of FoundationDB's code probes: a pass that stays green says little unless it
is known which interesting situations were exercised. A **cell** is an operation kind
(``consume``, ``destroy_topic``, ``close_reopen``... and ``open``, the very first open of a
fresh directory), a **condition** that makes that operation interesting at that moment
(``CONDITIONS``: a lagging group, several topics, a re-created name, a poll over a large
backlog, an empty topic, after retention deleted something, right after a clock jump,
right after a reopen; ``any`` for every operation) and a **crash point**: ``-`` for the
operation itself, else a fault-hook point as the implementation names it
(``destroy_topic.before_write``...).

- an operation cell is *reachable* when its condition applies to its kind
  (``APPLICABLE``), and *hit* when an operation of that kind ran under that condition;
- a crash cell is *reachable* when an operation of that kind, under that condition,
  passed that point (so an implementation's own points are covered), and *hit* when a crash
  was armed there: a crash the run injected at that point inside such an operation (its
  step's crash record), or a crash sweep's case at that point of such a step.

Everything is computed afterwards from what a run records: its steps, each step's crash
record and the fault hook's log of points passed (``FaultInjector(log=True)``); the
conditions come from replaying the operations through the reference model
(``rmqsim.model.ReferenceMQ``). Output is sorted, so the same runs give the same map.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmqsim.conformance.crashing.crash_record import CrashRecord
from rmqsim.conformance.crashing.crash_sweep import SweepResult
from rmqsim.conformance.queue.layer import QUEUE_LAYER
from rmqsim.conformance.running.apply import RUNNER_KINDS, apply_op
from rmqsim.conformance.running.lockstep import PointPass, StepRecord
from rmqsim.conformance.running.run_result import RunResult, TraceRender
from rmqsim.conformance.running.trace import Trace, parse_lines
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.queue.ops import Consume, ExistGroup, Op

__all__ = [
    "APPLICABLE",
    "CONDITIONS",
    "FIRST_OPEN",
    "LARGE_BACKLOG_MESSAGES",
    "MAX_NAMED",
    "NO_POINT",
    "Cell",
    "CoverageMap",
    "CoverageStep",
    "MappedRun",
    "coverage_lines",
    "coverage_of_records",
    "coverage_of_result",
    "coverage_of_trace",
    "coverage_summary",
    "merged_coverage",
    "run_coverage",
    "steered_coverage",
    "sweep_coverage",
    "with_coverage",
]

#: The crash point of an operation cell (the operation ran; no crash point involved).
NO_POINT = "-"
#: The kind of the cells of the very first open of a fresh directory (step 0).
FIRST_OPEN = "open"
#: A poll "over a large backlog": it asks for at least this many messages while its group
#: has at least this many to read (a queue that caps a poll at a few hundred fails there).
LARGE_BACKLOG_MESSAGES = 1000

#: Every condition, in report order, with what makes it hold just before the operation.
CONDITIONS: dict[str, str] = {
    "any": "every operation of the kind",
    "several-topics": "two or more topics exist",
    "recreated-name": "the operation's topic name was destroyed before (a global "
    "operation: some live topic's was)",
    "empty-topic": "the operation's topic exists and holds no message (global: some topic)",
    "lagging-group": "the operation's topic has two or more groups with different backlogs "
    "(global: some topic has)",
    "large-backlog": f"consume: asks for >= {LARGE_BACKLOG_MESSAGES} while its group has "
    f">= {LARGE_BACKLOG_MESSAGES} to read; other kinds: the topic (global: some topic) holds "
    f">= {LARGE_BACKLOG_MESSAGES} messages",
    "after-retention": "retention deleted messages of the operation's topic earlier "
    "(global: of some topic)",
    "after-clock-jump": "the first queue operation after a clock jump (advance_clock)",
    "after-reopen": "the first queue operation after a crash_reopen or close_reopen",
}

_TOPIC_STATE = ("several-topics", "recreated-name", "empty-topic", "after-retention")
_GROUPS = ("lagging-group",)
_TIMED = ("after-clock-jump",)
_REOPENED = ("after-reopen",)

#: The conditions that apply to each kind: the operation cells the map calls reachable.
APPLICABLE: dict[str, tuple[str, ...]] = {
    FIRST_OPEN: ("any",),
    "create_topic": ("any", "several-topics", "recreated-name", *_REOPENED),
    "destroy_topic": ("any", *_TOPIC_STATE, *_GROUPS, "large-backlog", *_REOPENED),
    "create_group": ("any", *_TOPIC_STATE, *_GROUPS, *_REOPENED),
    "destroy_group": ("any", *_TOPIC_STATE, *_GROUPS, *_TIMED, *_REOPENED),
    "exist_group": ("any", "several-topics", "recreated-name", *_REOPENED),
    "produce": ("any", *_TOPIC_STATE, *_GROUPS, *_TIMED, *_REOPENED),
    "consume": ("any", *_TOPIC_STATE, *_GROUPS, "large-backlog", *_TIMED, *_REOPENED),
    "seek": ("any", *_TOPIC_STATE, *_GROUPS, *_TIMED, *_REOPENED),
    "seek_to_latest": ("any", *_TOPIC_STATE, *_GROUPS, *_TIMED, *_REOPENED),
    "get_latest": ("any", *_TOPIC_STATE, *_REOPENED),
    "run_retention": ("any", *_TOPIC_STATE, *_GROUPS, "large-backlog", *_TIMED, *_REOPENED),
    "close_reopen": ("any", *_TOPIC_STATE, *_GROUPS, "large-backlog"),
    "crash_reopen": ("any", *_TOPIC_STATE, *_GROUPS, "large-backlog"),
}

_REOPENS = ("crash_reopen", "close_reopen")


@dataclass(frozen=True, order=True, slots=True)
class Cell:
    """One cell of the map; ``point`` is ``NO_POINT`` for the operation itself."""

    kind: str
    condition: str
    point: str

    def label(self) -> str:
        return f"{self.kind}/{self.condition}/{self.point}"


@dataclass(slots=True)
class CoverageMap:
    """What some runs covered: operations run and points passed (``reached``), crashes
    armed (``crashed``), and the most crash points one operation of each kind passed."""

    reached: Counter[Cell] = field(default_factory=Counter)
    crashed: Counter[Cell] = field(default_factory=Counter)
    points_per_call: dict[str, int] = field(default_factory=dict)
    #: Per crash cell reached, where an ``ArmCrash`` first reaches it (log order): the
    #: ``(step, during, hit)`` of a crash sweep's case (``conformance.queue.steer`` arms it).
    first_passed: dict[Cell, tuple[int, str, int]] = field(default_factory=dict)

    def merge(self, other: CoverageMap) -> None:
        self.reached.update(other.reached)
        self.crashed.update(other.crashed)
        for cell, where in other.first_passed.items():
            self.first_passed.setdefault(cell, where)
        for kind, count in other.points_per_call.items():
            self.points_per_call[kind] = max(count, self.points_per_call.get(kind, 0))

    def reachable(self) -> list[Cell]:
        """Every reachable cell, sorted: each applicable operation cell, and each crash
        cell whose point was passed."""
        cells = {Cell(k, c, NO_POINT) for k, conditions in APPLICABLE.items() for c in conditions}
        cells.update(cell for cell in self.reached if cell.point != NO_POINT)
        return sorted(cells)

    def hit(self, cell: Cell) -> bool:
        if cell.point == NO_POINT:
            return self.reached[cell] > 0
        return self.crashed[cell] > 0

    def never_hit(self) -> list[Cell]:
        return [cell for cell in self.reachable() if not self.hit(cell)]

    def multi_write_kinds(self) -> list[str]:
        """Kinds of which one operation passed more than two points (more than one write
        between its ``before`` and ``after`` points)."""
        return sorted(kind for kind, count in self.points_per_call.items() if count > 2)

    def write_points(self) -> dict[str, dict[str, int]]:
        """Per kind, per point it passed: the crashes armed there (any condition)."""
        found: dict[str, dict[str, int]] = {}
        for cell in sorted(self.reached):
            if cell.point != NO_POINT and cell.condition == "any":
                found.setdefault(cell.kind, {})[cell.point] = self.crashed[cell]
        return found

    def to_json(self) -> dict[str, Any]:
        """The map as ``summary.json`` holds it (sorted, plain data)."""
        cells = self.reachable()
        operations = [c for c in cells if c.point == NO_POINT]
        crashes = [c for c in cells if c.point != NO_POINT]
        multi = self.multi_write_kinds()
        points = self.write_points()
        return {
            "operation_cells": {"reachable": len(operations), "hit": _count_hit(self, operations)},
            "crash_cells": {"reachable": len(crashes), "hit": _count_hit(self, crashes)},
            "never_hit": [c.label() for c in cells if not self.hit(c)],
            "cells": [
                {
                    "kind": c.kind,
                    "condition": c.condition,
                    "point": c.point,
                    "reached": self.reached[c],
                    "crashes": self.crashed[c],
                }
                for c in cells
            ],
            "write_points": points,
            "multi_write": {
                kind: {
                    "points": sorted(points.get(kind, {})),
                    "never_armed": sorted(p for p, n in points.get(kind, {}).items() if not n),
                }
                for kind in multi
            },
        }


def _count_hit(coverage: CoverageMap, cells: Iterable[Cell]) -> int:
    return sum(1 for cell in cells if coverage.hit(cell))


#: One recorded step: its simulated time, its operation and its crash record (or None).
CoverageStep = tuple[int, Op, CrashRecord | None]


class _Replay:
    """The reference model replaying a run's operations, and what the conditions need
    that the model does not keep: names destroyed, topics retention trimmed, groups."""

    def __init__(self, config: MQConfig) -> None:
        self.now_s = 0
        self.model = ReferenceMQ(config=config, clock=lambda: self.now_s)
        self.live: set[str] = set()
        self.groups: dict[str, set[str]] = {}
        self.destroyed: set[str] = set()
        self.trimmed: set[str] = set()
        self.clock_jumped = False
        self.reopened = False

    def conditions(self, op: Op) -> list[str]:
        """The conditions that hold just before ``op`` (filtered by ``APPLICABLE``)."""
        kind = op.kind
        found = ["any"]
        if len(self.live) >= 2:
            found.append("several-topics")
        topic = getattr(op, "topic", None)
        if isinstance(topic, str):
            found += self._topic_conditions(topic, op)
        else:
            for name in sorted(self.live):
                found += self._topic_conditions(name, op)
        if self.clock_jumped:
            found.append("after-clock-jump")
        if self.reopened:
            found.append("after-reopen")
        applicable = APPLICABLE.get(kind, ())
        return [c for c in dict.fromkeys(found) if c in applicable]

    def _topic_conditions(self, topic: str, op: Op) -> list[str]:
        found = ["recreated-name"] if topic in self.destroyed else []
        if topic not in self.live:
            return found
        last_id, first, _ = self.model.peek(topic, "") or (0, None, None)
        held = 0 if first is None else last_id - first + 1
        if held == 0:
            found.append("empty-topic")
        if topic in self.trimmed:
            found.append("after-retention")
        backlogs = [self._backlog(topic, group) for group in sorted(self.groups.get(topic, ()))]
        if len(set(backlogs)) >= 2:
            found.append("lagging-group")
        if isinstance(op, Consume):
            large = op.n >= LARGE_BACKLOG_MESSAGES and (
                self._backlog(topic, op.group) >= LARGE_BACKLOG_MESSAGES
            )
        else:
            large = held >= LARGE_BACKLOG_MESSAGES
        if large:
            found.append("large-backlog")
        return found

    def _backlog(self, topic: str, group: str) -> int:
        peeked = self.model.peek(topic, group)
        if peeked is None:
            return 0
        last_id, first, position = peeked
        if first is None or position is None:
            return 0
        return max(0, last_id - max(position, first) + 1)

    def apply(self, time_s: int, op: Op, undone: bool) -> None:
        """Apply ``op`` at ``time_s`` (not when a crash ``undone`` it) and note its effects."""
        self.now_s = time_s
        kind = op.kind
        if kind == "advance_clock":
            self.clock_jumped = True
            return
        if kind == "arm_crash":
            return
        self.clock_jumped = False
        self.reopened = kind in _REOPENS
        if undone or kind in RUNNER_KINDS:
            return
        firsts = {t: self.model.peek(t, "") for t in sorted(self.live)}
        apply_op(self.model, op)
        topic = getattr(op, "topic", None)
        if isinstance(topic, str):
            self._note_topic(topic, op)
        if kind == "run_retention":
            for name, before in firsts.items():
                after = self.model.peek(name, "")
                if before and before[1] is not None and after and after[1] != before[1]:
                    self.trimmed.add(name)

    def _note_topic(self, topic: str, op: Op) -> None:
        """After ``op`` on ``topic``: whether it lives, was destroyed, which groups it has."""
        was_live = topic in self.live
        if self.model.peek(topic, "") is None:
            self.live.discard(topic)
            if was_live:
                self.destroyed.add(topic)
                self.groups.pop(topic, None)
                self.trimmed.discard(topic)
            return
        self.live.add(topic)
        groups = self.groups.setdefault(topic, set())
        group = getattr(op, "group", None)
        if isinstance(group, str):
            if apply_op(self.model, ExistGroup(topic, group)).value is True:
                groups.add(group)
            else:
                groups.discard(group)


def run_coverage(
    config: MQConfig,
    steps: Sequence[CoverageStep],
    fault_log: Iterable[PointPass] = (),
    sweep_cases: Iterable[tuple[int, str]] = (),
) -> CoverageMap:
    """The coverage map of one queue run: ``steps`` (1-based, as the trace numbers them),
    the fault hook's log of the points they passed, and (a crash sweep's base run) the
    ``(step, point)`` of every case the sweep armed a crash at."""
    replay = _Replay(config)
    conditions: list[list[str]] = [["any"]]  # step 0: the first open
    coverage = CoverageMap()
    coverage.reached[Cell(FIRST_OPEN, "any", NO_POINT)] += 1
    for time_s, op, crash in steps:
        found = replay.conditions(op) if op.kind in APPLICABLE else []
        conditions.append(found)
        for condition in found:
            coverage.reached[Cell(op.kind, condition, NO_POINT)] += 1
        if crash is not None and found:
            for condition in found:
                coverage.crashed[Cell(op.kind, condition, crash.point)] += 1
        undone = crash is not None and crash.undid_operation
        replay.apply(time_s, op, undone)
    kinds = [FIRST_OPEN, *(op.kind for _, op, _ in steps)]
    _add_passes(coverage, fault_log, kinds, conditions)
    for step, point in sweep_cases:
        if 0 <= step < len(kinds):
            for condition in conditions[step]:
                coverage.crashed[Cell(kinds[step], condition, point)] += 1
    return coverage


def _add_passes(
    coverage: CoverageMap,
    fault_log: Iterable[PointPass],
    kinds: list[str],
    conditions: list[list[str]],
) -> None:
    """Count the points each step's own operation passed (not a recovery's after a crash:
    no crash can be armed there), and the most points one operation passed."""
    per_call: Counter[tuple[int, str]] = Counter()
    for passed in fault_log:
        if not 0 <= passed.step < len(kinds):
            continue
        kind = kinds[passed.step]
        own = passed.during == kind or (
            kind in (FIRST_OPEN, *_REOPENS) and passed.during in ("open", "close")
        )
        if not own:
            continue
        per_call[(passed.step, passed.during)] += 1
        where = (passed.step, passed.during, passed.hit)
        for condition in conditions[passed.step]:
            cell = Cell(kind, condition, passed.point)
            coverage.reached[cell] += 1
            coverage.first_passed.setdefault(cell, where)
    for (step, _), count in sorted(per_call.items()):
        kind = kinds[step]
        coverage.points_per_call[kind] = max(count, coverage.points_per_call.get(kind, 0))


def coverage_of_records(
    config: Mapping[str, Any], records: Iterable[StepRecord], fault_log: Iterable[PointPass] = ()
) -> CoverageMap:
    """The map of a run as the lockstep recorded it (``RunResult.trace``'s records),
    ``config`` being its trace header's ``config``."""
    steps = [(r.step.time_s, r.step.op, r.crash) for r in records]
    return run_coverage(MQConfig(**config), steps, fault_log)


def coverage_of_trace(
    trace: Trace,
    fault_log: Iterable[PointPass] = (),
    sweep_cases: Iterable[tuple[int, str]] = (),
) -> CoverageMap:
    """The map of a parsed queue trace (and of a crash sweep's cases on it)."""
    steps = [(s.time_s, s.op, s.crash) for s in trace.steps]
    return run_coverage(MQConfig(**trace.header["config"]), steps, fault_log, sweep_cases)


@dataclass(slots=True)
class MappedRun(RunResult):
    """A gate's profile run with the coverage map of its steps, computed where it ran
    (the gate drops a passing run's trace there: ``gate._run_one``)."""

    coverage: CoverageMap | None = None


def coverage_of_result(result: RunResult) -> CoverageMap | None:
    """The map of a queue run (its trace and, when run with ``log_faults``, the points it
    passed); None for a run of another layer (another vocabulary)."""
    if result.spec.layer != QUEUE_LAYER.name:
        return None
    trace = result.trace
    if isinstance(trace, TraceRender):
        return coverage_of_records(trace.header["config"], trace.records, result.fault_log)
    return coverage_of_trace(parse_lines(trace), result.fault_log)


def with_coverage(result: RunResult) -> RunResult:
    """``result`` as a ``MappedRun`` carrying its map, its fault log dropped (the map
    holds what the gate needs of it); a consumer run as it is."""
    coverage = coverage_of_result(result)
    if coverage is None:
        return result
    values = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.init}
    values["fault_log"] = []
    return MappedRun(**values, coverage=coverage)


def sweep_coverage(sweep: SweepResult) -> CoverageMap:
    """The map of a crash sweep: its base run's, and a crash armed at every case."""
    cases = [(case.step, case.point) for case in sweep.cases]
    trace = parse_lines(sweep.base.trace_lines)
    return coverage_of_trace(trace, sweep.base.fault_log, cases)


def steered_coverage(steered: SweepResult) -> CoverageMap:
    """The crashes steered cases armed (``conformance.queue.steer``): their base run is a
    profile run the map already counts, so only the crash cells its cases armed."""
    cases = [(case.step, case.point) for case in steered.cases]
    coverage = coverage_of_trace(parse_lines(steered.base.trace_lines), (), cases)
    return CoverageMap(crashed=coverage.crashed)


def merged_coverage(
    results: Iterable[RunResult],
    sweeps: Iterable[SweepResult],
    steered: Iterable[SweepResult] = (),
) -> tuple[CoverageMap, int]:
    """The map of the mapped profile runs of ``results`` (in their order: the first
    places of cells are theirs), the crash sweeps and the steered cases; and how many
    mapped runs there were."""
    merged = CoverageMap()
    runs = 0
    for result in results:
        if isinstance(result, MappedRun) and result.coverage is not None:
            merged.merge(result.coverage)
            runs += 1
    for sweep in sweeps:
        merged.merge(sweep_coverage(sweep))
    for steer in steered:
        merged.merge(steered_coverage(steer))
    return merged, runs


def coverage_summary(
    results: Iterable[RunResult],
    sweeps: Sequence[SweepResult],
    steered: Sequence[SweepResult] = (),
) -> dict[str, Any]:
    """The gate's ``summary.json`` entry: the map of its mapped profile runs (queue runs
    made by the gate's own runner), crash sweeps and steered crash cases."""
    merged, runs = merged_coverage(results, sweeps, steered)
    return {
        "runs": runs,
        "crash_sweeps": len(sweeps),
        "steered_cases": sum(len(s.cases) for s in steered),
        **merged.to_json(),
    }


#: Most never-hit cells the printed summary names on one line (summary.json has all).
MAX_NAMED = 12


def coverage_lines(summary: Mapping[str, Any]) -> list[str]:
    """The printed summary's lines about the map: ``summary`` is ``coverage_summary``'s
    entry of ``summary.json``, which holds the map whole (so the two cannot disagree)."""
    runs, sweeps, cases = summary["runs"], summary["crash_sweeps"], summary["steered_cases"]
    if not (runs or sweeps or cases):
        return []  # no queue run: the map has nothing to say (a gate on another layer)
    operations, crashes = summary["operation_cells"], summary["crash_cells"]
    steering = f", {cases} steered crash cases" if cases else ""
    lines = [
        f"coverage ({runs} runs, {sweeps} crash sweeps{steering}): "
        f"{operations['hit']} of "
        f"{operations['reachable']} operation cells hit, crashes armed in {crashes['hit']} of "
        f"{crashes['reachable']} crash cells"
    ]
    never = [c for c in summary["never_hit"] if c.endswith("/" + NO_POINT)]
    if never:
        lines.append("operation cells never hit: " + _named(c[: -len(NO_POINT) - 1] for c in never))
    crash_never = [c for c in summary["never_hit"] if not c.endswith("/" + NO_POINT)]
    if crash_never:
        lines.append("crash cells never armed: " + _named(crash_never))
    unarmed = [
        point for points in summary["write_points"].values() for point, n in points.items() if not n
    ]
    if unarmed:
        lines.append("write points never crashed at: " + _named(sorted(unarmed)))
    for kind, points in summary["multi_write"].items():
        lines.append(f"multi-write {kind}: " + _armed_points(points))
    return lines


def _armed_points(points: dict[str, Any]) -> str:
    """Where crashes were armed among a multi-write operation's points, and where never."""
    never = points["never_armed"]
    armed = [point for point in points["points"] if point not in never]
    if not never:
        return f"crash armed at every point ({', '.join(armed)})"
    return f"crash armed at {', '.join(armed) or 'no point'}; never at {', '.join(never)}"


def _named(labels: Iterable[str]) -> str:
    names = list(labels)
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" (+{len(names) - MAX_NAMED} more)" if len(names) > MAX_NAMED else "")
