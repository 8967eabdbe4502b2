"""The simulations: determinism, budgets, coverage of every profile's purpose, speed.

The executor here is a small dict-based fake queue written for these tests (not the model:
``scenarios`` must stay testable on its own). It follows SPEC closely enough for the actors'
feedback loop to behave as it will against the real runner: ids per name that never repeat,
groups with positions, consume/seek semantics, and a crude retention that drops messages
every group has read past.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from rmqsim.scenarios.catalog import get_profile
from rmqsim.scenarios.names import NAME_MAX_BYTES, is_valid_name
from rmqsim.scenarios.queue.ops import (
    OP_KINDS,
    AdvanceClock,
    ArmCrash,
    Consume,
    Delivered,
    Outcome,
    Produce,
    Seek,
    Step,
    step_to_json,
)
from rmqsim.scenarios.queue.profiles import PROFILES, ROLE_BOOTSTRAP_KINDS, ROLE_KINDS, resolve
from rmqsim.scenarios.queue.sim import Simulation

ROOT = Path(__file__).resolve().parent.parent

OK = Outcome()


class FakeQueue:
    """A tiny in-memory queue with SPEC's error kinds; crashes and clock ops do nothing."""

    def __init__(self) -> None:
        self.messages: dict[str, list[Delivered]] = {}
        self.last_id: dict[str, int] = {}
        self.positions: dict[tuple[str, str], int] = {}
        self.log: list[tuple[Step, Outcome]] = []

    def __call__(self, step: Step) -> Outcome:
        outcome = self._apply(step.op)
        self.log.append((step, outcome))
        return outcome

    def _apply(self, op: object) -> Outcome:
        kind = op.kind  # type: ignore[attr-defined]
        for field in ("topic", "group"):
            name = getattr(op, field, None)
            if name is not None and not is_valid_name(name):
                return Outcome(error="InvalidArgument")
        if kind == "consume" and op.n < 0:  # type: ignore[attr-defined]
            return Outcome(error="InvalidArgument")
        topic = getattr(op, "topic", None)
        group = getattr(op, "group", None)
        if kind == "create_topic":
            self.messages.setdefault(topic, [])
            return OK
        if kind == "exist_group":
            return Outcome(value=(topic, group) in self.positions)
        if topic is not None and topic not in self.messages:
            return Outcome(error="TopicNotFound")
        if kind == "destroy_topic":
            del self.messages[topic]
            for key in [k for k in self.positions if k[0] == topic]:
                del self.positions[key]
            return OK
        if kind == "create_group":
            if (topic, group) in self.positions:
                return Outcome(error="GroupExists")
            self.positions[(topic, group)] = -1
            return OK
        if kind == "destroy_group":
            self.positions.pop((topic, group), None)
            return OK
        if kind == "produce":
            ids = []
            for message in op.messages:  # type: ignore[attr-defined]
                msg_id = self.last_id.get(topic, 0) + 1
                self.last_id[topic] = msg_id
                self.messages[topic].append(Delivered(msg_id, message.payload, message.properties))
                ids.append(msg_id)
            return Outcome(value=tuple(ids))
        if kind == "get_latest":
            retained = self.messages[topic]
            return Outcome(value=retained[-1].msg_id if retained else -1)
        if kind == "run_retention":
            for name, retained in self.messages.items():
                read = [p for (t, _), p in self.positions.items() if t == name]
                if read and min(read) > 0:
                    self.messages[name] = [m for m in retained if m.msg_id >= min(read)]
            return OK
        if topic is None:
            return OK  # advance_clock, crash_reopen, close_reopen, arm_crash
        key = (topic, group)
        if key not in self.positions:
            return Outcome(error="GroupNotFound")
        retained = self.messages[topic]
        if kind == "consume":
            position = self.positions[key]
            out = tuple(m for m in retained if m.msg_id >= position)[: op.n]  # type: ignore[attr-defined]
            if out:
                self.positions[key] = out[-1].msg_id + 1
            return Outcome(value=out)
        if kind == "seek":
            msg_id = op.msg_id  # type: ignore[attr-defined]
            exists = any(m.msg_id == msg_id for m in retained)
            self.positions[key] = msg_id if exists else -1
            return OK
        assert kind == "seek_to_latest", kind
        self.positions[key] = retained[-1].msg_id + 1 if retained else 0
        return OK


def run(profile_name: str, seed: int, steps: int | None = None) -> tuple[Simulation, FakeQueue]:
    """Run one simulation against a fresh fake queue."""
    simulation = Simulation(get_profile(profile_name), seed, steps)
    fake = FakeQueue()
    executed = simulation.run(fake)
    assert executed == len(fake.log) == simulation.executed
    return simulation, fake


def kinds_of(fake: FakeQueue) -> Counter[str]:
    return Counter(step.op.kind for step, _ in fake.log)


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_same_seed_same_steps(name: str) -> None:
    _, first = run(name, 11, steps=400)
    _, second = run(name, 11, steps=400)
    assert [s for s, _ in first.log] == [s for s, _ in second.log]
    assert [o for _, o in first.log] == [o for _, o in second.log]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_different_seeds_differ(name: str) -> None:
    _, first = run(name, 1, steps=200)
    _, second = run(name, 2, steps=200)
    assert [s for s, _ in first.log] != [s for s, _ in second.log]


_DIGEST_CODE = """
import hashlib, json, sys
from rmqsim.scenarios import Outcome, Simulation, get_profile, step_to_json
digest = hashlib.sha256()
for name in ("smoke", "churn", "swarm"):
    sim = Simulation(get_profile(name), 5, steps=300)
    sim.run(lambda step: (digest.update(json.dumps(step_to_json(step)).encode()), Outcome())[1])
print(digest.hexdigest())
"""


def test_determinism_does_not_depend_on_hash_randomisation() -> None:
    """str hashes differ per process; no set/hash order may reach the op sequence."""
    digests = set()
    for hash_seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST_CODE],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1, digests


def test_unresolved_and_resolved_swarm_replay_identically() -> None:
    """A trace header stores the resolved profile; replaying from it gives the same ops."""
    swarm = get_profile("swarm")
    steps_a: list[Step] = []
    steps_b: list[Step] = []
    Simulation(swarm, 9, steps=300).run(lambda s: (steps_a.append(s), OK)[1])
    Simulation(resolve(swarm, 9), 9, steps=300).run(lambda s: (steps_b.append(s), OK)[1])
    assert steps_a == steps_b


# --------------------------------------------------------------------------- the run loop


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_runs_its_budget(name: str) -> None:
    for seed in (0, 1):
        simulation, fake = run(name, seed)
        assert len(fake.log) == simulation.steps == simulation.profile.steps
        assert simulation.config == dict(simulation.profile.config)


def test_step_budget_override_and_zero() -> None:
    assert run("smoke", 3, steps=17)[0].executed == 17
    assert run("smoke", 3, steps=0)[0].executed == 0
    with pytest.raises(ValueError, match="steps"):
        Simulation(get_profile("smoke"), 3, steps=-1)
    with pytest.raises(TypeError, match="seed"):
        Simulation(get_profile("smoke"), "3")  # type: ignore[arg-type]


def test_a_simulation_runs_once() -> None:
    simulation = Simulation(get_profile("smoke"), 1, steps=5)
    simulation.run(lambda step: OK)
    with pytest.raises(RuntimeError):
        simulation.run(lambda step: OK)


def test_executor_exception_stops_the_run_at_once() -> None:
    calls: list[Step] = []

    def execute(step: Step) -> Outcome:
        calls.append(step)
        if len(calls) == 5:
            raise KeyError("boom")
        return OK

    with pytest.raises(KeyError, match="boom"):
        Simulation(get_profile("smoke"), 1).run(execute)
    assert len(calls) == 5


def test_executor_must_return_an_outcome() -> None:
    with pytest.raises(TypeError, match="Outcome"):
        Simulation(get_profile("smoke"), 1).run(lambda step: None)  # type: ignore[arg-type,return-value]


def test_clock_is_simulated_time_plus_skew() -> None:
    simulation, fake = run("retention", 4)
    steps = [step for step, _ in fake.log]
    assert all(type(s.time_s) is int and s.time_s >= 0 for s in steps)
    backward = 0
    for before, after in itertools.pairwise(steps):
        jump = before.op.seconds if type(before.op) is AdvanceClock else 0
        # Simulated time never goes back; only a jump moves the clock, by exactly its size.
        assert after.time_s >= before.time_s + jump
        backward += jump < 0
    assert backward, "the retention profile jumps the clock back now and then"
    assert simulation.clock_s() >= steps[-1].time_s


def test_actor_names() -> None:
    _, fake = run("smoke", 2)
    actors = {step.actor for step, _ in fake.log}
    assert {"clock", "retention", "crasher", "producer-0", "producer-1", "consumer-0"} <= actors
    assert all(
        a.rsplit("-", 1)[-1].isdigit() or a in ("clock", "retention", "crasher") for a in actors
    )


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_actors_emit_only_their_roles_kinds(name: str) -> None:
    simulation, fake = run(name, 6, steps=500)
    roles = {role.replace("_", "-"): role for role in ROLE_KINDS}
    for step, _ in fake.log:
        role = roles[step.actor if step.actor in roles else step.actor.rsplit("-", 1)[0]]
        allowed = ROLE_KINDS[role] + ROLE_BOOTSTRAP_KINDS.get(role, ())
        assert step.op.kind in allowed, (step.actor, step.op.kind)
        assert simulation.profile.kind_enabled(step.op.kind)


# --------------------------------------------------------------------------- profile purposes


def test_smoke_covers_every_kind_within_300_steps() -> None:
    complete = 0
    for seed in range(10):
        _, fake = run("smoke", seed, steps=300)
        kinds = kinds_of(fake)
        errors = Counter(outcome.error for _, outcome in fake.log)
        if set(kinds) == set(OP_KINDS) and errors["InvalidArgument"] > 0:
            complete += 1
    assert complete >= 9, f"only {complete}/10 seeds covered every kind and an invalid argument"


@pytest.mark.parametrize("name", ["smoke", "crashy", "churn"])
def test_the_crasher_draws_its_kinds_from_a_bag_of_the_weights(name: str) -> None:
    """Each run of ``sum(weights)`` crasher operations holds every crasher kind exactly
    its weight times, so a profile with rare crashes still shows every kind."""
    profile = get_profile(name)
    kinds = [k for k in ROLE_KINDS["crasher"] if profile.weights[k] > 0]
    bag_size = sum(profile.weights[k] for k in kinds)
    for seed in range(5):
        _, fake = run(name, seed, steps=3000 if name == "smoke" else 800)
        crasher = [step.op.kind for step, _ in fake.log if step.actor == "crasher"]
        assert len(crasher) >= bag_size
        for start in range(0, len(crasher) - bag_size + 1, bag_size):
            counts = Counter(crasher[start : start + bag_size])
            assert counts == {k: profile.weights[k] for k in kinds}, (seed, start, counts)


def test_queue_ops_mostly_hit_existing_topics_and_groups() -> None:
    queue_kinds = {"produce", "consume", "seek", "seek_to_latest", "get_latest"}
    for name in ("smoke", "seek-storm", "digits", "retention", "crashy"):
        _, fake = run(name, 8)
        relevant = [(s, o) for s, o in fake.log if s.op.kind in queue_kinds]
        misses = sum(o.error in ("TopicNotFound", "GroupNotFound") for _, o in relevant)
        assert relevant and misses / len(relevant) < 0.2, (name, misses, len(relevant))
        assert misses > 0, f"{name}: ops on absent topics/groups must still happen"


def test_swarm_seeds_differ_and_switch_kinds_off() -> None:
    swarm = get_profile("swarm")
    resolved = [resolve(swarm, seed) for seed in range(10)]
    assert len({json.dumps(p.to_json(), sort_keys=True) for p in resolved}) == 10
    assert len({tuple(p.weights.values()) for p in resolved}) == 10
    assert len({tuple(p.config.values()) for p in resolved}) > 3
    off_counts = [sum(1 for w in p.weights.values() if w == 0) for p in resolved]
    assert sum(1 for n in off_counts if n > 0) >= 8, off_counts
    # A switched-off kind is never emitted.
    for seed in range(4):
        simulation, fake = run("swarm", seed, steps=300)
        off = {k for k, w in simulation.profile.weights.items() if w == 0}
        assert not off & set(kinds_of(fake)), (seed, off)


def test_digits_crosses_the_decimal_boundaries_in_one_topic() -> None:
    _, fake = run("digits", 0)
    produced: Counter[str] = Counter()
    for step, outcome in fake.log:
        if type(step.op) is Produce and outcome.ok:
            produced[step.op.topic] += len(outcome.value)
    topic, count = produced.most_common(1)[0]
    assert count > 1000, produced
    sought = {s.op.msg_id for s, _ in fake.log if type(s.op) is Seek}
    assert {9, 10, 99, 100, 999, 1000} <= sought
    consumed = {
        m.msg_id
        for s, o in fake.log
        if type(s.op) is Consume and o.ok and s.op.topic == topic
        for m in o.value
    }
    assert {9, 10, 99, 100} <= consumed


def test_churn_names_prefix_suffix_and_byte_limits() -> None:
    _, fake = run("churn", 0)
    names = set()
    for step, _ in fake.log:
        for field in ("topic", "group"):
            name = getattr(step.op, field, None)
            if name is not None:
                names.add(name)
    sizes = {len(n.encode("utf-8", "surrogatepass")) for n in names}
    assert NAME_MAX_BYTES in sizes and NAME_MAX_BYTES + 1 in sizes
    short = sorted(n for n in names if len(n) < 8)
    assert any(a != b and b.startswith(a) for a in short for b in short), short
    assert any(a != b and b.endswith(a) for a in short for b in short), short
    assert {"t", "t1", "t10", "at"} <= names
    multibyte = [n for n in names if len(n.encode("utf-8", "surrogatepass")) == NAME_MAX_BYTES]
    assert any(len(n) < NAME_MAX_BYTES for n in multibyte), "a 4096-byte multi-byte name"
    kinds = kinds_of(fake)
    assert kinds["create_topic"] > 50 and kinds["destroy_topic"] > 30
    # Re-creation: some topic is created again after it was destroyed.
    destroyed: set[str] = set()
    recreated = False
    for step, outcome in fake.log:
        if step.op.kind == "destroy_topic" and outcome.ok:
            destroyed.add(step.op.topic)
        elif step.op.kind == "create_topic" and step.op.topic in destroyed:
            recreated = True
    assert recreated
    errors = Counter(o.error for _, o in fake.log)
    assert errors["InvalidArgument"] > 10


def test_seek_storm_aims_at_every_class_of_id() -> None:
    _, fake = run("seek-storm", 0)
    issued: dict[str, int] = {}
    classes: Counter[str] = Counter()
    for step, outcome in fake.log:
        op = step.op
        if type(op) is Produce and outcome.ok and outcome.value:
            issued[op.topic] = outcome.value[-1]
        if type(op) is Seek:
            if op.msg_id < 0:
                classes["negative"] += 1
            elif op.msg_id == 0:
                classes["zero"] += 1
            elif op.msg_id >= 2**31:
                classes["extreme"] += 1
            elif op.msg_id > issued.get(op.topic, 0):
                classes["never_issued"] += 1
            else:
                retained = fake.messages.get(op.topic, [])
                classes["existing_or_retained_away"] += 1
                del retained
    assert all(classes[c] > 5 for c in ("negative", "zero", "extreme", "never_issued")), classes
    assert classes["existing_or_retained_away"] > 50, classes
    kinds = kinds_of(fake)
    assert kinds["seek"] + kinds["seek_to_latest"] > 0.4 * len(fake.log)
    assert kinds["seek_to_latest"] > 20


def test_seek_storm_seeks_to_retained_away_ids() -> None:
    """Some seeks name an id that was issued and then deleted by retention."""
    retained_away = 0
    for seed in range(3):
        simulation = Simulation(get_profile("seek-storm"), seed, steps=600)
        fake = FakeQueue()

        def execute(step: Step, fake: FakeQueue = fake) -> Outcome:
            nonlocal retained_away
            op = step.op
            if type(op) is Seek and op.topic in fake.messages:
                retained = fake.messages[op.topic]
                if retained and 1 <= op.msg_id < retained[0].msg_id:
                    retained_away += 1
            return fake(step)

        simulation.run(execute)
    assert retained_away > 5


def test_crashy_crashes_often() -> None:
    _, fake = run("crashy", 0)
    kinds = kinds_of(fake)
    crashes = kinds["crash_reopen"] + kinds["arm_crash"]
    assert crashes > 0.05 * len(fake.log), kinds
    assert kinds["close_reopen"] > 0
    hits = [s.op.hit for s, _ in fake.log if type(s.op) is ArmCrash]
    assert min(hits) == 1 and max(hits) <= get_profile("crashy").arm_crash_max_hit
    assert len(set(hits)) > 3


def test_retention_profile_runs_retention_and_jumps_the_clock_often() -> None:
    simulation, fake = run("retention", 0)
    kinds = kinds_of(fake)
    assert kinds["run_retention"] > 60 and kinds["advance_clock"] > 40, kinds
    jumps = {s.op.seconds for s, _ in fake.log if type(s.op) is AdvanceClock}
    limit = simulation.config["retention_time_s"]
    assert {limit - 1, limit, limit + 1} <= jumps
    # Lagging groups: some consume returns a backlog larger than one page's worth.
    backlogs = [len(o.value) for s, o in fake.log if type(s.op) is Consume and o.ok]
    assert max(backlogs) >= 5


def test_producers_make_empty_payloads_unicode_properties_and_empty_batches() -> None:
    _, fake = run("smoke", 0, steps=800)
    batches = [s.op for s, _ in fake.log if type(s.op) is Produce]
    assert any(not b.messages for b in batches)
    messages = [m for b in batches for m in b.messages]
    assert any(m.payload == b"" for m in messages)
    keys = {k for m in messages for k, _ in m.properties}
    assert any(not k.isascii() for k in keys)
    polls = {s.op.n for s, _ in fake.log if type(s.op) is Consume}
    assert 0 in polls and any(n < 0 for n in polls)


# --------------------------------------------------------------------------- speed


def _steps_per_second(name: str, steps: int, execute: Callable[[Step], Outcome]) -> float:
    """Steps per CPU second of this process: what the simulation costs, whatever else
    shares the machine (per wall second, a loaded CI runner measured its neighbours)."""
    simulation = Simulation(get_profile(name), 1, steps=steps)
    started = time.process_time()
    assert simulation.run(execute) == steps
    return steps / (time.process_time() - started)


def test_per_step_overhead_is_small() -> None:
    """The lockstep target is 10k ops/s overall; the scenario side must be far faster."""
    rate = _steps_per_second("smoke", 20_000, lambda step: OK)
    print(f"smoke with a trivial executor: {rate:,.0f} steps per CPU second")
    assert rate > 20_000, f"{rate:,.0f} steps per CPU second"


def test_step_json_of_a_whole_run_is_plain() -> None:
    _, fake = run("churn", 1, steps=300)
    text = "\n".join(json.dumps(step_to_json(s)) for s, _ in fake.log)
    assert hashlib.sha256(text.encode()).hexdigest()


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from rmqsim.scenarios.__main__ import main

    assert main(["--profile", "churn", "--seed", "3", "--steps", "5", "--jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and all(json.loads(line)["op"]["kind"] for line in lines)
    assert main(["--profile", "swarm", "--seed", "3", "--profile-json"]) == 0
    assert json.loads(capsys.readouterr().out)["swarm"] is False
    assert main(["--profile", "smoke", "--steps", "50"]) == 0
    assert "smoke seed 0: 50 steps" in capsys.readouterr().out
    assert main(["--profile", "nope"]) == 2
    assert "known profiles" in capsys.readouterr().err
