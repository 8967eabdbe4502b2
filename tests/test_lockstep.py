"""The lockstep runner fails on wrong implementations, names the anomaly, and is
deterministic; traces replay."""

from __future__ import annotations

import pytest

from rmqsim.conformance.adapter import make_model_factory, model_factory
from rmqsim.conformance.running.run import replay_trace, run_seed
from rmqsim.conformance.running.trace import parse_lines
from tests.wrong_models import EXPECTED

#: Seeds tried per profile before a wrong model counts as not caught.
SEARCH_SEEDS = range(12)


def first_divergence(model_cls: type, profiles: tuple[str, ...]):
    factory = make_model_factory(model_cls)
    for profile in profiles:
        for seed in SEARCH_SEEDS:
            result = run_seed(profile, seed, impl=factory)
            if not result.ok:
                return result
    return None


@pytest.mark.parametrize("model_cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_runner_catches_and_names_each_anomaly(model_cls: type) -> None:
    anomaly, profiles = EXPECTED[model_cls]
    result = first_divergence(model_cls, profiles)
    assert result is not None, f"{model_cls.__name__} was not caught"
    assert result.anomaly == anomaly, result.divergence
    # The failing trace reproduces the same anomaly on replay.
    replayed = replay_trace(parse_lines(result.trace_lines), impl=make_model_factory(model_cls))
    assert replayed.anomaly == anomaly


@pytest.mark.parametrize(
    "profile", ["smoke", "crashy", "retention", "seek-storm", "churn", "swarm"]
)
def test_reference_model_conforms_to_itself(profile: str) -> None:
    for seed in range(3):
        result = run_seed(profile, seed, impl=model_factory)
        assert result.ok, result.divergence


def test_same_seed_gives_byte_identical_trace() -> None:
    first = run_seed("swarm", 11, impl=model_factory)
    second = run_seed("swarm", 11, impl=model_factory)
    assert first.trace_lines == second.trace_lines
    assert first.trace_digest == second.trace_digest
    other = run_seed("swarm", 12, impl=model_factory)
    assert other.trace_digest != first.trace_digest


def test_trace_replays_clean_and_detects_a_changed_outcome() -> None:
    result = run_seed("smoke", 3, impl=model_factory)
    trace = parse_lines(result.trace_lines)
    assert trace.end is not None and trace.end["status"] == "ok"
    assert replay_trace(trace, impl=model_factory).ok
    # Tamper with one recorded produce outcome: replay must say the trace no longer matches.
    lines = list(result.trace_lines)
    index = next(
        i for i, line in enumerate(lines) if '"kind":"produce"' in line and '"value":[1' in line
    )
    lines[index] = lines[index].replace('"value":[1', '"value":[999999,1', 1)
    tampered = replay_trace(parse_lines(lines), impl=model_factory)
    assert tampered.anomaly == "trace-mismatch"


def test_a_run_ending_on_arm_crash_closes_cleanly(tmp_path) -> None:
    """Regression (found by a 200-seed sweep): a crash armed by the last step must not fire
    when the run releases the SUT; it is disarmed first."""
    from rmqsim.conformance.adapter import rocksmq_factory
    from rmqsim.conformance.running.lockstep import Lockstep
    from rmqsim.model.api import MQConfig
    from rmqsim.scenarios.queue.ops import ArmCrash, CreateTopic, Step

    lockstep = Lockstep(rocksmq_factory, MQConfig(), tmp_path)
    lockstep.execute(Step(0, "t", CreateTopic("a")))
    last = Step(1, "crasher", ArmCrash(hit=1, point="close.before_flush"))
    lockstep.execute(last)
    assert lockstep.faults.armed == ("close.before_flush", 1)
    lockstep.close()  # also without ``finish`` first, which disarms too
    assert lockstep.faults.armed is None


def test_gate_keeps_traces_of_failing_runs_only(tmp_path) -> None:
    from rmqsim.conformance.running.gate import GatePlan, run_profiles
    from tests.wrong_models import LostWrite

    passing = run_profiles(GatePlan(("smoke",), range(2), model_factory, tmp_path))
    assert passing.ok and all(r.trace_lines == [] for r in passing.results)
    failing = run_profiles(GatePlan(("smoke",), range(6), make_model_factory(LostWrite), tmp_path))
    assert failing.failures and all(r.trace_lines for r in failing.failures)
    assert all(r.trace_path is not None and r.trace_path.exists() for r in failing.failures)


def test_model_peek_agrees_with_its_snapshot() -> None:
    """``ReferenceMQ.peek`` (what the runner reads before each operation to name an
    anomaly) says what a full snapshot says, through produce, retention and churn."""
    from rmqsim.conformance.running.apply import RUNNER_KINDS, apply_op
    from rmqsim.conformance.running.lockstep import SimClock
    from rmqsim.model import ReferenceMQ
    from rmqsim.model.api import MQConfig
    from rmqsim.scenarios import Outcome, Simulation, get_profile

    profile = get_profile("retention")
    clock = SimClock()
    model = ReferenceMQ(MQConfig(**profile.config), clock=clock)
    checked = 0

    def execute(step):  # type: ignore[no-untyped-def]
        nonlocal checked
        clock.now_s = step.time_s
        outcome = Outcome() if step.op.kind in RUNNER_KINDS else apply_op(model, step.op)
        state = model.snapshot()
        for (topic, group), position in state.groups.items():
            retained = state.topics[topic].messages
            first = retained[0].msg_id if retained else None
            assert model.peek(topic, group) == (state.topics[topic].last_id, first, position)
            checked += 1
        for topic, topic_state in state.topics.items():
            first = topic_state.messages[0].msg_id if topic_state.messages else None
            assert model.peek(topic, "no such group") == (topic_state.last_id, first, None)
        assert model.peek("never-created", "g") is None
        return outcome

    Simulation(profile, 4, steps=400).run(execute)
    assert checked > 400


def test_a_runs_trace_is_rendered_on_first_use_and_pickles() -> None:
    """A run keeps its records and renders the trace lines when first asked for (a
    passing gate run never asks); rendered late, pickled or not, the lines are the same."""
    import pickle

    from rmqsim.conformance.running.run import TraceRender

    first = run_seed("smoke", 5, impl=model_factory)
    second = run_seed("smoke", 5, impl=model_factory)
    assert isinstance(first.trace, TraceRender)
    revived = pickle.loads(pickle.dumps(first))
    assert isinstance(revived.trace, TraceRender)
    assert first.trace_lines == second.trace_lines == revived.trace_lines
    assert first.trace_lines is first.trace_lines  # rendered once, then kept
    assert parse_lines(first.trace_lines).end["status"] == "ok"


def test_a_run_releases_its_sut_with_crash_at_the_end(tmp_path) -> None:
    """The last thing a run does to the SUT is ``crash()`` (nothing is checked after the
    last step, and a close would only flush files that are deleted); clean closes happen
    at ``close_reopen`` steps, where they are checked."""
    from rmqsim.conformance.adapter import rocksmq_factory

    calls: list[str] = []

    class Recording:
        def __init__(self, inner) -> None:
            self._inner = inner

        def __getattr__(self, name: str):
            return getattr(self._inner, name)

        def snapshot(self, topics=None, messages_from=None):
            return self._inner.snapshot(topics=topics, messages_from=messages_from)

        def close(self) -> None:
            calls.append("close")
            self._inner.close()

        def crash(self) -> None:
            calls.append("crash")
            self._inner.crash()

    def factory(**kwargs):
        calls.append("open")
        return Recording(rocksmq_factory(**kwargs))

    factory.rmqsim_layer = "queue"

    result = run_seed("smoke", 0, impl=factory, workdir=tmp_path)
    assert result.ok, result.divergence
    assert calls[-1] == "crash"
    closes = sum(1 for r in parse_lines(result.trace_lines).steps if r.op.kind == "close_reopen")
    # Each close_reopen closes twice: the second close() is the closed-queue probe's
    # (SPEC: "close() twice is fine").
    assert calls.count("close") == 2 * closes > 0
