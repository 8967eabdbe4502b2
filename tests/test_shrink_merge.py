"""The shrink's produce-merging pass (conformance/queue/shrink.py): the candidates it
tries, and the capped-poll mutant's gate failure, which needs a backlog of small produces,
shrunk to a handful of operations well within the budget."""

from __future__ import annotations

from pathlib import Path

from rmqsim.conformance.mutants.blind import POLL_CAP
from rmqsim.conformance.queue.shrink import merged_by_topic, merged_runs, plain_payloads
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.trace import write_lines
from rmqsim.conformance.searching.shrink import shrink_and_save
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET
from rmqsim.scenarios.queue.ops import Consume, CreateTopic, Message, Op, Produce, Step

CAPPED = "rmqsim.conformance.mutants.blind:capped_poll"


def _steps(*ops: Op) -> tuple[Step[Op], ...]:
    return tuple(Step(i, "a", op) for i, op in enumerate(ops))


def _produce(topic: str, *payloads: bytes) -> Produce:
    return Produce(topic, tuple(Message(p) for p in payloads))


def test_merged_by_topic_moves_every_produce_of_a_topic_into_its_first() -> None:
    steps = _steps(
        _produce("t", b"1"),
        _produce("u", b"2"),
        Consume("t", "g", 5),
        _produce("t", b"3", b"4"),
        _produce("u", b"5"),
    )
    first, second = merged_by_topic(steps)
    assert [s.op for s in first] == [
        _produce("t", b"1", b"3", b"4"),
        _produce("u", b"2"),
        Consume("t", "g", 5),
        _produce("u", b"5"),
    ]
    assert first[0].time_s == 0  # the first produce's step, its time
    assert [s.op for s in second] == [
        _produce("t", b"1"),
        _produce("u", b"2", b"5"),
        Consume("t", "g", 5),
        _produce("t", b"3", b"4"),
    ]


def test_merged_runs_merges_adjacent_produces_to_one_topic_only() -> None:
    steps = _steps(
        CreateTopic("t"),
        _produce("t", b"1"),
        _produce("t", b"2"),
        _produce("u", b"3"),
        _produce("t", b"4"),
        _produce("t", b"5"),
    )
    candidates = [[s.op for s in c] for c in merged_runs(steps)]
    assert candidates == [
        [
            CreateTopic("t"),
            _produce("t", b"1", b"2"),
            _produce("u", b"3"),
            *[s.op for s in steps[4:]],
        ],
        [*[s.op for s in steps[:4]], _produce("t", b"4", b"5")],
    ]


def test_plain_payloads_empties_every_message_once_and_then_has_nothing_to_offer() -> None:
    steps = _steps(Produce("t", (Message(b"ab", (("k", "v"),)),)), _produce("t", b"c"))
    (plain,) = plain_payloads(steps)
    assert [s.op for s in plain] == [_produce("t", b""), _produce("t", b"")]
    assert list(plain_payloads(plain)) == []


def test_the_capped_poll_gate_failure_shrinks_far_below_its_budget(tmp_path: Path) -> None:
    # Swarm seed 8 is the gate's killing run of capped-poll: a backlog of more than
    # POLL_CAP messages built from small produces, which delta debugging alone must keep
    # one by one (it stopped at its budget with 112 operations).
    failed = run_seed("swarm", 8, impl=CAPPED)
    assert (failed.status, failed.anomaly) == ("divergence", "short-poll")
    failed.trace_path = tmp_path / "capped.jsonl"
    write_lines(failed.trace_path, failed.trace_lines)
    shrunk = shrink_and_save(failed, impl=CAPPED, budget=DEFAULT_SHRINK_BUDGET)
    assert shrunk is not None and shrunk.anomaly == "short-poll"
    stats = shrunk.shrink_stats
    assert stats is not None and stats.stopped_by is None  # searched to its end
    assert stats.operations < DEFAULT_SHRINK_BUDGET.max_operations // 10
    assert shrunk.steps <= 5
    produced = [s for s in shrunk.trace_lines if '"kind":"produce"' in s]
    assert len(produced) == 1 and produced[0].count('"payload"') > POLL_CAP
