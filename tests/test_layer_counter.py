"""A third layer defined here, in the test folder only: a durable counter (increment, read,
crash), its model, a correct file-backed implementation and a buggy one that flushes only
every third increment (a crash loses the others). Run, replay, shrink and the gate work
for it through the public API (``conformance.layer``, ``conformance.running.run``,
``conformance.searching.shrink``, ``conformance.running.gate``), with no change to the generic
code: the
proof that a new layer costs one ``Layer``, not a second harness."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import pytest

from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError, resolve_impl
from rmqsim.conformance.layer import (
    LayerLockstep,
    OperationCrashes,
    ResolvedProfile,
    RunSpec,
    ShrinkPass,
    StepCodec,
    layer_for_header,
    layer_for_profile,
    register_layer,
    unregister_layer,
)
from rmqsim.conformance.running.gate import GatePlan, run_profiles, write_outputs
from rmqsim.conformance.running.lockstep import Divergence, Stats, StepRecord
from rmqsim.conformance.running.run import read_run_trace, replay, run, run_seed, spec_for_seed
from rmqsim.conformance.running.trace import Trace, write_lines
from rmqsim.conformance.searching.shrink import shrink_file, shrink_result
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget
from rmqsim.scenarios.queue.ops import Outcome, Step

GOOD = "tests.test_layer_counter:good_counter"
BUGGY = "tests.test_layer_counter:buggy_counter"
COUNTER_PROFILES: dict[str, dict[str, Any]] = {
    "counter": {"name": "counter", "steps": 40, "crash_weight": 0.15},
}


# ----------------------------------------------------------------- the vocabulary and codec


@dataclass(frozen=True, slots=True)
class Increment:
    by: int
    kind: ClassVar[str] = "increment"


@dataclass(frozen=True, slots=True)
class Read:
    kind: ClassVar[str] = "read"


@dataclass(frozen=True, slots=True)
class Crash:
    kind: ClassVar[str] = "crash"


def encode_op(op: Increment | Read | Crash) -> dict[str, Any]:
    return {"kind": op.kind, "by": op.by} if isinstance(op, Increment) else {"kind": op.kind}


def decode_op(obj: object) -> Increment | Read | Crash:
    if not isinstance(obj, dict):
        raise TypeError("op must be an object")
    kind = obj.get("kind")
    if kind == "increment" and set(obj) == {"kind", "by"} and type(obj["by"]) is int:
        return Increment(obj["by"])
    if kind in ("read", "crash") and set(obj) == {"kind"}:
        return Read() if kind == "read" else Crash()
    raise ValueError(f"not a counter operation: {obj!r:.80}")


def encode_outcome(outcome: Outcome) -> dict[str, Any]:
    return {"value": outcome.value, "error": outcome.error}


def decode_outcome(obj: object) -> Outcome:
    if not isinstance(obj, dict) or set(obj) != {"value", "error"}:
        raise ValueError("outcome must be {value, error}")
    return Outcome(obj["value"], obj["error"])


# ------------------------------------------------------------ the implementations and model


class FileCounter:
    """A counter kept in a file, written every ``flush_every`` increments."""

    def __init__(self, path: Path, flush_every: int) -> None:
        self.path = path
        self.flush_every = flush_every
        self.value = int(path.read_text()) if path.exists() else 0
        self.unflushed = 0

    def increment(self, by: int) -> int:
        self.value += by
        self.unflushed += 1
        if self.unflushed >= self.flush_every:
            self.path.write_text(str(self.value))
            self.unflushed = 0
        return self.value

    def reopened(self) -> FileCounter:
        """The counter after a crash: what its file holds."""
        return FileCounter(self.path, self.flush_every)


# ``--impl MOD:FACTORY`` loads a factory with a queue factory's keywords (``adapter``).
def good_counter(
    *, path: Path, config: Any = None, clock: Any = None, faults: Any = None
) -> FileCounter:
    return FileCounter(path, flush_every=1)


def buggy_counter(
    *, path: Path, config: Any = None, clock: Any = None, faults: Any = None
) -> FileCounter:
    return FileCounter(path, flush_every=3)


class CounterLockstep(OperationCrashes):
    """The model (an int) and an implementation, step by step."""

    def __init__(self, factory: Any, root: Path) -> None:
        self.sut = factory(path=root / "counter")
        self.model = 0
        self.records: list[StepRecord] = []
        self.stats = Stats()

    def _apply(self, op: Any) -> tuple[Outcome, Outcome]:
        if isinstance(op, Increment):
            self.model += op.by
            return Outcome(self.model), Outcome(self.sut.increment(op.by))
        if isinstance(op, Crash):
            self.sut = self.sut.reopened()
            self.stats.crashes_injected += 1
            return Outcome(), Outcome()
        return Outcome(self.model), Outcome(self.sut.value)

    def execute(self, step: Step[Any]) -> Outcome:
        self.stats.steps += 1
        self.stats.op_counts[step.op.kind] += 1
        want, got = self._apply(step.op)
        if got != want:
            self.records.append(StepRecord(step, want, sut_outcome=got))
            anomaly = "lost-increment" if got.value < want.value else "counter-mismatch"  # type: ignore[operator]  # both ints: only reads and increments differ
            raise Divergence(
                anomaly=anomaly,
                step_index=self.stats.steps,
                step=step,
                expected=want,
                actual=got,
                detail="counts differ",
            )
        self.records.append(StepRecord(step, want))
        return want

    def finish(self) -> None:
        if self.records and self.sut.value != self.model:
            last = self.records[-1].step
            raise Divergence(
                anomaly="lost-increment", step_index=self.stats.steps, step=last, detail="end"
            )

    def close(self) -> None:
        pass

    def state_digest(self) -> str:
        return "sha256:" + hashlib.sha256(str(self.model).encode()).hexdigest()


class CounterLayer:
    name = "counter"
    implicit_in_header = False
    anomalies = MappingProxyType(
        {
            "lost-increment": "an increment that returned is not in the count",
            "counter-mismatch": "a read returned another count than the model's",
        }
    )
    gate_profiles = ("counter",)
    codec = StepCodec(encode_op, decode_op, encode_outcome, decode_outcome)
    crash_modes = ("inprocess",)
    supports_crash_rate = False
    final_check_needs_whole_run = False
    crash_sweep_refusal = "crash-sweep runs queue profiles; {profile!r} is a counter profile"

    def profile_names(self) -> Sequence[str]:
        return tuple(COUNTER_PROFILES)

    def resolve_profile(self, name: str, seed: int) -> ResolvedProfile:
        return ResolvedProfile(name, dict(COUNTER_PROFILES[name]), {})

    def claims_header(self, header: Mapping[str, Any]) -> bool:
        return False  # its headers name it

    def check_trace(self, trace: Trace) -> None:
        pass

    def resolve_impl(self, impl: Any, *, for_replay: bool) -> tuple[str, Any]:
        return resolve_impl(GOOD if impl == DEFAULT_IMPL else impl)

    def simulate(self, spec: RunSpec, lockstep: LayerLockstep) -> None:
        rng = random.Random(f"counter:{spec.seed}")
        for time_s in range(spec.steps or spec.profile_config["steps"]):
            roll = rng.random()
            if roll < spec.profile_config["crash_weight"]:
                lockstep.execute(Step(time_s, "crasher", Crash()))
            elif roll < 0.7:
                lockstep.execute(Step(time_s, "writer", Increment(rng.randint(1, 5))))
            else:
                lockstep.execute(Step(time_s, "reader", Read()))

    def open_lockstep(
        self, spec: RunSpec, root: Path, *, sut: Any, recorded: bool, log_faults: bool
    ) -> LayerLockstep:
        return CounterLockstep(sut, root)

    def shrink_passes(self) -> Sequence[ShrinkPass]:
        return ()

    def simpler_ops(self, op: Any) -> Iterable[Any]:
        if isinstance(op, Increment) and op.by > 1:
            yield Increment(1)

    def sweep_fields(self, result: Any) -> Mapping[str, Any]:
        return {"consumer_config": None}


@pytest.fixture(autouse=True)
def counter_layer() -> Iterator[CounterLayer]:
    layer = CounterLayer()
    register_layer(layer)
    yield layer
    unregister_layer(layer.name)


def _first_failure(impl: str = BUGGY) -> Any:
    for seed in range(10):
        result = run_seed("counter", seed, impl=impl)
        if not result.ok:
            return result
    raise AssertionError("the buggy counter never failed")


# ------------------------------------------------------------------------------ the tests


def test_run_a_counter_profile_through_the_registry(counter_layer: CounterLayer) -> None:
    assert layer_for_profile("counter") is counter_layer
    good = run_seed("counter", 3, impl=GOOD)
    assert good.ok and good.steps == 40 and good.impl == GOOD
    header = json.loads(good.trace_lines[0])
    assert header["layer"] == "counter" and layer_for_header(header) is counter_layer
    assert good.trace_digest == run_seed("counter", 3, impl=GOOD).trace_digest
    assert run_seed("counter", 3).ok  # the default implementation: the layer's choice
    failing = _first_failure()
    assert failing.anomaly == "lost-increment" and failing.divergence is not None
    assert failing.spec.layer == "counter" and failing.profile == "counter"
    # One entry point for a spec: the same run, from its RunSpec.
    again = run(spec_for_seed("counter", failing.seed), impl=BUGGY)
    assert again.trace_digest == failing.trace_digest


def test_a_spec_round_trips_through_its_header() -> None:
    spec = spec_for_seed("counter", 7, steps=12).replace(impl=BUGGY)
    header = spec.to_header()
    assert RunSpec.from_header(header) == spec
    assert RunSpec.from_header(json.loads(json.dumps(header))).to_header() == header


def test_replay_a_counter_trace(tmp_path: Path) -> None:
    failing = _first_failure()
    path = tmp_path / "counter.jsonl"
    write_lines(path, failing.trace_lines)
    trace = read_run_trace(path)
    assert isinstance(trace.steps[0].op, Increment | Read | Crash)
    replayed = replay(trace)  # on the implementation its header names: the buggy one
    assert replayed.anomaly == failing.anomaly and replayed.trace_lines == failing.trace_lines
    assert replay(trace, impl=GOOD).ok  # the recorded outcomes are the model's
    good = run_seed("counter", 1, impl=GOOD)
    write_lines(path, good.trace_lines)
    assert replay(read_run_trace(path)).trace_lines == good.trace_lines
    with pytest.raises(BadImplError):
        replay(trace, impl="tests.test_layer_counter:no_such_factory")


def test_shrink_a_counter_failure(tmp_path: Path) -> None:
    failing = _first_failure()
    shrunk = shrink_result(failing, budget=ShrinkBudget(max_operations=20_000))
    assert shrunk is not None and shrunk.anomaly == failing.anomaly
    assert shrunk.steps < failing.steps
    ops = [json.loads(line)["op"] for line in shrunk.trace_lines[1:-1]]
    # The least a lost increment needs: one unflushed increment and a crash (the final
    # check looks).
    assert [op["kind"] for op in ops] == ["increment", "crash"]
    assert ops[0] == {"kind": "increment", "by": 1}  # simplified by the layer's variants
    path = tmp_path / "failing.jsonl"
    write_lines(path, failing.trace_lines)
    report = shrink_file(path, budget=ShrinkBudget(max_operations=20_000))
    assert report.shrunk_steps == shrunk.steps
    assert replay(read_run_trace(report.path)).anomaly == failing.anomaly


def test_the_gate_runs_a_counter_profile(tmp_path: Path) -> None:
    plan = GatePlan(
        profiles=("counter",),
        seeds=range(0, 6),
        impl=BUGGY,
        out=tmp_path,
        shrink=ShrinkBudget(max_operations=20_000),
    )
    gate = run_profiles(plan)
    assert not gate.ok and gate.failures
    assert {r.anomaly for r in gate.failures} == {"lost-increment"}
    first = gate.failures[0]
    assert first.trace_path is not None and first.trace_path.exists()
    assert first.shrunk is not None and first.shrunk.steps == 2
    junit, summary = write_outputs(gate, tmp_path)
    assert json.loads(summary.read_text())["status"] != "ok" and junit.exists()
    passing = run_profiles(GatePlan(("counter",), range(0, 6), GOOD, tmp_path / "good"))
    assert passing.ok and len(passing.results) == 6
