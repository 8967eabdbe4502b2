"""The gate's coverage map (conformance/queue/coverage.py): each condition is classified from a
hand-made run, crash records and crash-sweep cases arm crash cells, the fault log makes
crash cells reachable, and the map's JSON is sorted and stable."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.crash_record import CrashRecord
from rmqsim.conformance.queue.coverage import (
    FIRST_OPEN,
    LARGE_BACKLOG_MESSAGES,
    NO_POINT,
    Cell,
    CoverageMap,
    CoverageStep,
    MappedRun,
    coverage_lines,
    coverage_of_trace,
    coverage_summary,
    run_coverage,
    with_coverage,
)
from rmqsim.conformance.running.gate import (
    GatePlan,
    SweepPlan,
    run_profiles,
    run_sweeps,
    summary_json,
)
from rmqsim.conformance.running.lockstep import PointPass
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.trace import parse_lines
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.queue.ops import (
    AdvanceClock,
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    DestroyTopic,
    Message,
    Op,
    Produce,
    RunRetention,
    Seek,
)

CONFIG = MQConfig()


def _steps(*ops: Op, crash: Mapping[int, dict[str, Any]] | None = None) -> list[CoverageStep]:
    """Steps one second apart; ``crash`` maps a 1-based step to its crash record."""
    records = {i: CrashRecord.from_json(record) for i, record in (crash or {}).items()}
    return [(i, op, records.get(i)) for i, op in enumerate(ops, start=1)]


def _produce(topic: str, count: int, payload: bytes = b"x") -> Produce:
    return Produce(topic, tuple(Message(payload) for _ in range(count)))


def _reached(coverage: CoverageMap, kind: str, condition: str) -> int:
    return coverage.reached[Cell(kind, condition, NO_POINT)]


def test_a_lagging_group_is_one_behind_another_of_its_topic() -> None:
    coverage = run_coverage(
        CONFIG,
        _steps(
            CreateTopic("t"),
            CreateGroup("t", "a"),
            CreateGroup("t", "b"),
            _produce("t", 3),
            Consume("t", "a", 1),  # both groups had 3 to read: not lagging yet
            Consume("t", "b", 1),  # a has 2 left, b 3: b lags
            Consume("t", "b", 1),  # both have 2 left again
        ),
    )
    assert _reached(coverage, "consume", "lagging-group") == 1
    assert _reached(coverage, "consume", "any") == 3
    assert _reached(coverage, "produce", "lagging-group") == 0


def test_several_topics_need_two_live_topics_before_the_operation() -> None:
    coverage = run_coverage(
        CONFIG,
        _steps(CreateTopic("t"), CreateTopic("u"), _produce("t", 1), DestroyTopic("u"),
               _produce("t", 1)),
    )  # fmt: skip
    assert _reached(coverage, "create_topic", "several-topics") == 0
    assert _reached(coverage, "produce", "several-topics") == 1
    assert _reached(coverage, "destroy_topic", "several-topics") == 1


def test_a_recreated_name_is_a_name_destroyed_before() -> None:
    coverage = run_coverage(
        CONFIG,
        _steps(CreateTopic("t"), DestroyTopic("t"), CreateTopic("t"), _produce("t", 1),
               DestroyTopic("t"), DestroyTopic("nope")),
    )  # fmt: skip
    assert _reached(coverage, "create_topic", "recreated-name") == 1
    assert _reached(coverage, "produce", "recreated-name") == 1
    # The first destroy is of a first incarnation; the second of a re-created one.
    assert _reached(coverage, "destroy_topic", "recreated-name") == 1


def test_a_large_backlog_poll_asks_for_and_has_a_thousand() -> None:
    big = LARGE_BACKLOG_MESSAGES
    coverage = run_coverage(
        CONFIG,
        _steps(
            CreateTopic("t"),
            CreateGroup("t", "g"),
            _produce("t", big - 1),
            Consume("t", "g", 5000),  # has 999 to read: not large
            Seek("t", "g", 1),
            _produce("t", 1),
            Consume("t", "g", big - 1),  # asks for 999: not large
            Seek("t", "g", 1),
            Consume("t", "g", 5000),  # asks 5000, has 1000: large
        ),
    )
    assert _reached(coverage, "consume", "large-backlog") == 1
    assert _reached(coverage, "seek", "large-backlog") == 0  # not a condition of seek


def test_an_empty_topic_holds_no_message() -> None:
    coverage = run_coverage(
        CONFIG,
        _steps(CreateTopic("t"), CreateGroup("t", "g"), Consume("t", "g", 1), _produce("t", 1),
               Consume("t", "g", 1), Consume("t", "g", 1)),
    )  # fmt: skip
    # Consumed, the message is still retained: only the first poll saw an empty topic.
    assert _reached(coverage, "consume", "empty-topic") == 1
    assert _reached(coverage, "produce", "empty-topic") == 1


def _retention_steps() -> list[CoverageStep]:
    """A page closes at each message (page size 1); retention after 10 s deletes what
    every group read past."""
    return [
        (1, CreateTopic("t"), None),
        (1, CreateGroup("t", "g"), None),
        (2, _produce("t", 2, b"ab"), None),
        (3, Consume("t", "g", 1), None),
        (4, RunRetention(), None),  # the acked page is 1 s old: nothing deleted
        (5, _produce("t", 1, b"ab"), None),
        (100, RunRetention(), None),  # deletes message 1
        (101, _produce("t", 1, b"ab"), None),
        (102, DestroyTopic("t"), None),
        (103, CreateTopic("t"), None),
        (104, _produce("t", 1, b"ab"), None),  # a new incarnation: not after retention
    ]


def test_after_retention_means_retention_deleted_messages_of_the_topic() -> None:
    config = MQConfig(page_size_bytes=1, retention_time_s=10, retention_size_bytes=-1)
    coverage = run_coverage(config, _retention_steps())
    assert _reached(coverage, "produce", "after-retention") == 1
    assert _reached(coverage, "produce", "any") == 4
    assert _reached(coverage, "run_retention", "after-retention") == 0
    assert _reached(coverage, "destroy_topic", "after-retention") == 1


def test_after_a_clock_jump_and_after_a_reopen_hold_for_the_next_operation_only() -> None:
    coverage = run_coverage(
        CONFIG,
        _steps(CreateTopic("t"), AdvanceClock(3600), _produce("t", 1), _produce("t", 1),
               CrashReopen(), _produce("t", 1), _produce("t", 1)),
    )  # fmt: skip
    assert _reached(coverage, "produce", "after-clock-jump") == 1
    assert _reached(coverage, "produce", "after-reopen") == 1
    assert _reached(coverage, "crash_reopen", "any") == 1
    assert Cell("advance_clock", "any", NO_POINT) not in coverage.reached


def test_a_crash_record_arms_its_cells_and_a_crash_resolved_before_undoes_the_operation() -> None:
    crash = {"point": "produce.before_write", "hit": 1, "resolved": "before"}
    coverage = run_coverage(
        CONFIG,
        _steps(CreateTopic("t"), CreateTopic("u"), CreateGroup("t", "g"), _produce("t", 1),
               Consume("t", "g", 1), crash={4: crash}),
    )  # fmt: skip
    armed = Cell("produce", "several-topics", "produce.before_write")
    assert coverage.crashed[armed] == 1
    assert coverage.crashed[Cell("produce", "any", "produce.before_write")] == 1
    # The produce was undone: the topic the poll reads is still empty.
    assert _reached(coverage, "consume", "empty-topic") == 1


def test_the_fault_log_makes_crash_cells_reachable_and_sweep_cases_arm_them() -> None:
    steps = _steps(CreateTopic("t"), DestroyTopic("t"), CrashReopen())
    log = [
        PointPass(0, "open", "open.before_write", 1),
        PointPass(1, "create_topic", "create_topic.before_write", 1),
        PointPass(2, "destroy_topic", "destroy_topic.before_write", 1),
        PointPass(2, "destroy_topic", "destroy_topic.between_writes", 1),
        PointPass(2, "destroy_topic", "destroy_topic.after_write", 1),
        PointPass(2, "open", "open.recover", 1),  # a recovery after a crash: not its own
        PointPass(3, "close", "close.before_flush", 1),
    ]
    coverage = run_coverage(
        CONFIG, steps, log, [(2, "destroy_topic.between_writes"), (0, "open.before_write")]
    )
    between = Cell("destroy_topic", "any", "destroy_topic.between_writes")
    assert coverage.reached[between] == 1 and coverage.crashed[between] == 1
    assert coverage.crashed[Cell(FIRST_OPEN, "any", "open.before_write")] == 1
    assert Cell("destroy_topic", "any", "open.recover") not in coverage.reached
    assert coverage.reached[Cell("crash_reopen", "any", "close.before_flush")] == 1
    assert coverage.multi_write_kinds() == ["destroy_topic"]
    summary = coverage.to_json()
    assert summary["multi_write"] == {
        "destroy_topic": {
            "points": [
                "destroy_topic.after_write",
                "destroy_topic.before_write",
                "destroy_topic.between_writes",
            ],
            "never_armed": ["destroy_topic.after_write", "destroy_topic.before_write"],
        }
    }
    assert "create_topic/any/create_topic.before_write" in summary["never_hit"]
    assert "destroy_topic/any/destroy_topic.between_writes" not in summary["never_hit"]
    assert "consume/large-backlog/-" in summary["never_hit"]


def test_the_map_merges_and_its_json_is_sorted_and_stable() -> None:
    first = run_coverage(CONFIG, _steps(CreateTopic("t"), _produce("t", 1)))
    second = run_coverage(CONFIG, _steps(CreateTopic("u"), CreateTopic("t")))
    merged = CoverageMap()
    merged.merge(second)
    merged.merge(first)
    again = CoverageMap()
    again.merge(first)
    again.merge(second)
    assert json.dumps(merged.to_json()) == json.dumps(again.to_json())
    cells = [(c["kind"], c["condition"], c["point"]) for c in merged.to_json()["cells"]]
    assert cells == sorted(cells)
    assert _reached(merged, "create_topic", "any") == 3
    assert _reached(merged, FIRST_OPEN, "any") == 2


TWO_STEP = "rmqsim.conformance.mutants.blind:two_step_destroy_topic"


def _gate_coverage(tmp_path: Path, *, sweep: bool) -> dict[str, Any]:
    plan = GatePlan(("churn",), range(0, 1), TWO_STEP, tmp_path, steps=20)
    gate = run_profiles(plan)
    if sweep:
        gate.sweeps = run_sweeps(["churn"], SweepPlan(0, TWO_STEP, tmp_path, steps=20))
    return summary_json(gate)["coverage"]


def test_the_gate_summary_names_the_write_points_a_crash_was_never_armed_at(
    tmp_path: Path,
) -> None:
    between = "destroy_topic.between_writes"
    unswept = _gate_coverage(tmp_path / "runs", sweep=False)
    assert unswept["runs"] == 1 and unswept["crash_sweeps"] == 0
    multi = unswept["multi_write"]["destroy_topic"]
    assert between in multi["points"] and between in multi["never_armed"]
    assert f"destroy_topic/any/{between}" in unswept["never_hit"]
    # The crash sweep arms a crash at every point the steps pass, this one included.
    swept = _gate_coverage(tmp_path / "swept", sweep=True)
    assert swept["crash_sweeps"] == 1
    assert swept["multi_write"]["destroy_topic"]["never_armed"] == []
    assert swept["write_points"]["destroy_topic"][between] >= 1
    assert swept["operation_cells"] == unswept["operation_cells"]


def test_the_printed_multi_write_line_names_the_points_never_armed_or_says_all_were(
    tmp_path: Path,
) -> None:
    between = "destroy_topic.between_writes"
    plan = GatePlan(("churn",), range(0, 1), TWO_STEP, tmp_path, steps=20)
    gate = run_profiles(plan)

    def line() -> str:
        lines = coverage_lines(coverage_summary(gate.results, gate.sweeps, gate.steered))
        (found,) = [x for x in lines if x.startswith("multi-write destroy_topic: ")]
        return found

    assert between in line().split("; never at ", 1)[1].split(", ")
    gate.sweeps = run_sweeps(["churn"], SweepPlan(0, TWO_STEP, tmp_path, steps=20))
    armed = line()
    assert armed.startswith("multi-write destroy_topic: crash armed at every point (")
    assert between in armed and "never" not in armed


def test_the_printed_gate_summary_shows_the_map(tmp_path: Path) -> None:
    args = ["gate", "--profiles", "smoke", "--seeds", "0:1", "--steps", "50"]
    args += ["--no-crash-sweep", "--jobs", "1", "--out", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "coverage (1 runs, 0 crash sweeps):" in result.output
    assert "operation cells never hit: " in result.output
    assert "consume/large-backlog" in result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["coverage"]["runs"] == 1


def test_a_mapped_run_keeps_every_field_and_its_map_is_the_traces() -> None:
    result = run_seed("crashy", 0, steps=120, log_faults=True, crash_rate=0.2)
    assert result.fault_log
    mapped = with_coverage(result)
    assert isinstance(mapped, MappedRun) and mapped.coverage is not None
    for name in (f.name for f in dataclasses.fields(result)):
        if name != "fault_log":
            assert getattr(mapped, name) is getattr(result, name), name
    assert mapped.fault_log == []
    # From the lockstep's records (the gate) or from the rendered trace (a sweep's base):
    # the same map.
    parsed = coverage_of_trace(parse_lines(result.trace_lines), result.fault_log)
    assert parsed.to_json() == mapped.coverage.to_json()
    assert mapped.coverage.crashed  # the crash rate armed crashes inside operations


def test_the_map_keeps_the_first_place_each_crash_cell_was_reached() -> None:
    steps = _steps(CreateTopic("t"), _produce("t", 1), CreateTopic("u"), _produce("t", 1))
    log = [
        PointPass(2, "produce", "produce.before_write", 1),
        PointPass(4, "produce", "produce.before_write", 1),
        PointPass(4, "produce", "produce.before_write", 2),
    ]
    coverage = run_coverage(CONFIG, steps, log)
    assert coverage.first_passed[Cell("produce", "any", "produce.before_write")] == (
        2, "produce", 1
    )
    # Two topics live only before step 4: its first pass is that cell's first place.
    assert coverage.first_passed[Cell("produce", "several-topics", "produce.before_write")] == (
        4, "produce", 1
    )
    merged = CoverageMap()
    merged.merge(run_coverage(CONFIG, steps, log[1:]))
    merged.merge(coverage)
    assert merged.first_passed[Cell("produce", "any", "produce.before_write")] == (4, "produce", 1)
