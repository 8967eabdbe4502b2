"""The gate reaches a layer's own parts (coverage, steered runs, steered crash cases, the
summary's entries and lines) only through its registered ``GateHooks``: hooks registered for
a layer that has none (the consumer's) are called, and taking the queue's away takes its
coverage out of the summary."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.layer import (
    NO_GATE_HOOKS,
    GateHooks,
    gate_hooks,
    register_gate_hooks,
)
from rmqsim.conformance.layers import CONSUMER_LAYER, QUEUE_LAYER
from rmqsim.conformance.layers.gate import register_builtin_gate_hooks
from rmqsim.conformance.running.gate import (
    GatePlan,
    run_layer_steering,
    run_profiles,
    run_steering,
    summary_json,
)
from rmqsim.conformance.running.run_result import RunResult


class _Recording(GateHooks):
    """Consumer hooks that mark each run, add one steered run, and count."""

    def __init__(self) -> None:
        self.mapped: list[str] = []
        self.seen_runs: list[int] = []
        self.crash_calls = 0

    def map_run(self, result: RunResult) -> RunResult:
        self.mapped.append(f"{result.profile}:{result.seed}")
        return result

    def summary(self, results: Sequence[RunResult], sweeps: Sequence[Any],
                steered: Sequence[Any]) -> Mapping[str, Any]:
        return {"consumer_extra": {"runs": len(results)}}

    def steering_runs(self, runs: Callable[[], Sequence[RunResult]],
                      first_seed: int) -> Iterator[tuple[str, int]]:
        self.seen_runs.append(len(runs()))
        yield "consumer", first_seed
        self.seen_runs.append(len(runs()))  # chosen after the one before finished

    def steer_crashes(self, results: Sequence[RunResult], sweeps: Sequence[Any], plan: Any, *,
                      pool: Any, on_group: Any) -> Sequence[Any]:
        self.crash_calls += 1
        return ()


@pytest.fixture
def restored_hooks() -> Iterator[None]:
    yield
    register_gate_hooks(CONSUMER_LAYER.name, NO_GATE_HOOKS)
    register_builtin_gate_hooks()


def test_a_layers_registered_hooks_are_what_the_gate_calls(
        tmp_path: Path, restored_hooks: None) -> None:
    assert gate_hooks(CONSUMER_LAYER) is NO_GATE_HOOKS
    hooks = register_gate_hooks(CONSUMER_LAYER.name, _Recording())
    assert isinstance(hooks, _Recording)
    plan = GatePlan(("consumer",), range(0, 1), "rocksmq", tmp_path, steps=20)
    gate = run_profiles(plan)
    assert hooks.mapped == ["consumer:0"]
    run_layer_steering(gate, plan)
    assert hooks.seen_runs == [1, 2]  # the steered run was added as a profile run
    assert [(r.profile, r.seed) for r in gate.results] == [("consumer", 0), ("consumer", 1)]
    assert hooks.mapped == ["consumer:0", "consumer:1"]
    run_steering(gate, plan)
    assert hooks.crash_calls == 1 and gate.steered == []
    summary = summary_json(gate)
    assert summary["consumer_extra"] == {"runs": 2}
    assert summary["coverage"]["runs"] == 0  # the queue's hooks: no queue run here


def test_without_the_queues_hooks_the_summary_has_no_queue_coverage(
        tmp_path: Path, restored_hooks: None) -> None:
    plan = GatePlan(("smoke",), range(0, 1), "rocksmq", tmp_path, steps=20)
    with_hooks = summary_json(run_profiles(plan))
    assert with_hooks["coverage"]["runs"] == 1
    register_gate_hooks(QUEUE_LAYER.name, NO_GATE_HOOKS)
    assert "coverage" not in summary_json(run_profiles(plan))
