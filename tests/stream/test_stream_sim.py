"""The stream simulation (``scenarios.stream_*``): deterministic per seed, its operations
round-trip through JSON strictly, and each profile produces the workload it describes."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rmqsim.conformance.stream import StreamSide
from rmqsim.model.stream import StreamModelFactory
from rmqsim.scenarios.catalog import get_profile, queue_profile
from rmqsim.scenarios.queue.ops import OpDecodeError, Outcome, Step
from rmqsim.scenarios.queue.profiles import ProfileError
from rmqsim.scenarios.stream.ops import (
    DELETE,
    INSERT,
    Broadcast,
    CrashQueue,
    Produce,
    Seek,
    StreamOp,
    stream_op_from_json,
    stream_op_to_json,
    stream_outcome_from_json,
    stream_outcome_to_json,
)
from rmqsim.scenarios.stream.profiles import STREAM_PROFILES, StreamProfile, resolve_stream
from rmqsim.scenarios.stream.sim import StreamSimulation

Run = list[tuple[Step[StreamOp], Outcome]]


def _run(name: str, seed: int, steps: int | None = None) -> tuple[Run, StreamSide]:
    profile = resolve_stream(STREAM_PROFILES[name], seed)
    side = StreamSide(StreamModelFactory(), profile.channel_names, lambda factory: factory)
    run: Run = []

    def execute(step: Step[StreamOp]) -> Outcome:
        outcome = side.apply(step.op)
        run.append((step, outcome))
        return outcome

    StreamSimulation(profile, seed, steps).run(execute)
    return run, side


def _lines(run: Run) -> list[str]:
    return [
        json.dumps([s.time_s, s.actor, stream_op_to_json(s.op), stream_outcome_to_json(o)])
        for s, o in run
    ]


@pytest.mark.parametrize("name", sorted(STREAM_PROFILES))
def test_same_seed_same_steps(name: str) -> None:
    first, _ = _run(name, 7, steps=150)
    again, _ = _run(name, 7, steps=150)
    other, _ = _run(name, 8, steps=150)
    assert _lines(first) == _lines(again)
    assert _lines(first) != _lines(other)


@pytest.mark.parametrize("name", sorted(STREAM_PROFILES))
def test_every_step_round_trips_through_json(name: str) -> None:
    run, _ = _run(name, 3, steps=150)
    for step, outcome in run:
        encoded = json.loads(json.dumps(stream_op_to_json(step.op)))
        assert stream_op_from_json(encoded) == step.op
        recorded = json.loads(json.dumps(stream_outcome_to_json(outcome)))
        assert stream_outcome_from_json(recorded) == outcome


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "stream_explode"},
        {"kind": "stream_consume"},
        {"kind": "stream_consume", "consumer": "tt-0", "extra": 1},
        {"kind": "stream_consume", "consumer": 3},
        {"kind": "stream_seek", "consumer": "c", "positions": [["ch0", "1", 0]],
         "include_current": True},
        {"kind": "stream_seek", "consumer": "c", "positions": [], "include_current": 1},
        {"kind": "stream_produce", "producer": "p", "msgs": [[400, 1, 0, [1], {"b64": "@"}, []]]},
        {"kind": "stream_produce", "producer": "p", "msgs": [[400, 1, 0]]},
        {"kind": "stream_produce", "producer": "p", "msgs": [[400, True, 0, [], None, []]]},
        ["stream_consume"],
    ],
)  # fmt: skip
def test_malformed_operations_are_refused(obj: object) -> None:
    with pytest.raises(OpDecodeError):
        stream_op_from_json(obj)


@pytest.mark.parametrize("name", sorted(STREAM_PROFILES))
def test_profiles_round_trip_and_are_in_the_catalog(name: str) -> None:
    profile = resolve_stream(STREAM_PROFILES[name], 11)
    assert StreamProfile.from_json(json.loads(json.dumps(profile.to_json()))) == profile
    assert get_profile(name) is STREAM_PROFILES[name]
    with pytest.raises(ProfileError, match="stream profile"):
        queue_profile(name)


def test_swarm_draws_its_knobs_per_seed() -> None:
    swarm = STREAM_PROFILES["stream-swarm"]
    drawn = [resolve_stream(swarm, seed) for seed in range(12)]
    assert drawn[3] == resolve_stream(swarm, 3)
    assert not any(profile.swarm for profile in drawn)
    assert len({profile.channels for profile in drawn}) > 1
    assert len({profile.crash_every_s for profile in drawn}) > 1


def _kinds(run: Run) -> Counter[str]:
    return Counter(step.op.kind for step, _ in run)


def test_stream_profile_writes_what_it_describes() -> None:
    run, side = _run("stream", 1)
    produced = [m for s, _ in run if isinstance(s.op, Produce) for m in s.op.msgs]
    assert any(m.msg_type == INSERT and len(m.rows) > 1 for m in produced)
    assert any(m.msg_type == DELETE for m in produced)
    assert len({m.msg_id for m in produced}) < len(produced)  # retries and shared ids
    assert any(isinstance(s.op, Broadcast) and s.actor == "ddl" for s, _ in run)
    restarts = [s.op for s, _ in run if isinstance(s.op, Seek) and s.op.include_current]
    assert restarts, "the time-tick consumer restarts from its checkpoint"
    tt_state = side.streams["tt-0"].snapshot()
    assert sum(len(c.duplicate_ids) for c in tt_state.channels) > 0
    assert all(o.error is None for _, o in run)


def test_crashy_profile_crashes_repeats_ticks_and_writes_late() -> None:
    run, side = _run("stream-crashy", 2)
    kinds = _kinds(run)
    assert kinds[CrashQueue.kind] > 0 and kinds["run_retention"] > 0
    state = side.streams["tt-0"].snapshot()
    assert any(c.ignored_tick_ids for c in state.channels)
    ticks = [s for s, _ in run if s.actor == "ticker" and isinstance(s.op, Produce)]
    late = [s for s in ticks if s.op.msgs[0].hash_keys == (2,)]
    assert late and len(late) < len(ticks), "the last channel gets its ticks apart"
    dropped = sum(len(c.dropped_ids) for c in state.channels)
    assert dropped > 0


def test_seek_profile_seeks_plain_consumers() -> None:
    run, _ = _run("stream-seek", 4)
    seeks = [s.op for s, _ in run if isinstance(s.op, Seek) and s.actor.startswith("plain")]
    assert any(op.include_current for op in seeks) and any(not op.include_current for op in seeks)
    assert any(len(op.positions) > 1 for op in seeks)
