"""Failing consumer runs shrink like queue runs: to a short trace that fails the same way on
the wrong consumer, replays as it stands, and passes on a correct one. A cut trace lacks the
simulation's drain, so only the checks made at each step judge it; a run that fails only
at its final check is not shrunk, and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli import cli
from rmqsim.conformance.consumer.shrink import client_epochs, without_batch
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.mutants.consumer import MUTANTS as CONSUMER_MUTANTS
from rmqsim.conformance.mutants.kill import KILLED, kill_mutant
from rmqsim.conformance.running.run import replay_file, run_seed, run_steps
from rmqsim.conformance.running.trace import TraceFormatError, read_trace, write_lines
from rmqsim.conformance.searching.shrink import (
    NotFailingError,
    shrink_file,
    shrink_result,
)
from rmqsim.conformance.searching.shrink_budget import ShrinkBudget
from rmqsim.scenarios.consumer.ops import (
    Complete,
    CrashClient,
    Deliver,
    ProduceBatch,
    Pull,
    StartClient,
    consumer_op_from_json,
    consumer_outcome_from_json,
)
from rmqsim.scenarios.queue.ops import OpDecodeError, Step

from .test_consumer_variants import CASES

#: Wrong consumers whose first failing seed shrinks in about a second or two, and how
#: long the shrunk reproducer may be (measured: 7, 8, 6, 5, 6 and 10 operations).
FAST = {
    "repull-from-committed": 10,
    "restart-from-earliest": 12,
    "ignores-flow-control": 10,
    "orderly-two-at-once": 10,
    "acks-failures": 10,
    "guard-at-latest": 14,
}


def _read(path: Path):
    return read_trace(
        path, decode_op=consumer_op_from_json, decode_outcome=consumer_outcome_from_json
    )


@pytest.mark.parametrize("name", FAST)
def test_a_wrong_consumer_shrinks_to_a_short_trace_that_replays(name: str, tmp_path: Path) -> None:
    factory, profile, seeds, anomaly = CASES[name]
    failing = run_seed(profile, seeds[0], impl=factory)
    assert failing.anomaly == anomaly
    shrunk = shrink_result(failing, impl=factory)
    assert shrunk is not None and shrunk.anomaly == anomaly
    assert shrunk.steps <= FAST[name] and shrunk.steps < failing.steps
    path = tmp_path / "shrunk.jsonl"
    write_lines(path, shrunk.trace_lines)
    header = _read(path).header
    assert header["final_check"] is False and header["shrunk_from_steps"] == failing.steps
    assert replay_file(path, impl=factory).anomaly == anomaly
    # Once the bug is gone the reproducer passes: it fails because of the bug, not the cut.
    assert replay_file(path, impl=DEFAULT_IMPL).ok


def test_shrinking_is_deterministic() -> None:
    factory, profile, seeds, _ = CASES["acks-failures"]
    failing = run_seed(profile, seeds[0], impl=factory)
    budget = ShrinkBudget(max_operations=300)  # stops part-way (528 to converge)
    first, second = (shrink_result(failing, impl=factory, budget=budget) for _ in range(2))
    assert first is not None and second is not None
    assert first.trace_lines[1:] == second.trace_lines[1:]
    assert first.shrink_stats == second.shrink_stats
    assert first.shrink_stats is not None and first.shrink_stats.stopped_by == "operations"


def test_the_shrink_command_shrinks_a_consumer_trace(tmp_path: Path) -> None:
    factory, profile, seeds, anomaly = CASES["orderly-two-at-once"]
    failing = run_seed(profile, seeds[0], impl=factory)
    path = tmp_path / "fail.jsonl"
    write_lines(path, failing.trace_lines)
    report = shrink_file(path, impl=factory)
    assert report.anomaly == anomaly and report.shrunk_steps < report.original_steps
    assert report.path == tmp_path / "fail.shrunk.jsonl" and report.path.exists()


def test_a_failure_only_at_the_final_check_is_not_shrunk(tmp_path: Path) -> None:
    """A correct run cut before its drain fails the final check (messages never
    finished); shrinking must not 'reproduce' that on a cut trace."""
    passing = run_seed("consumer", 0)
    assert passing.ok
    lines = passing.trace_lines
    # No drain: produced messages are left unfinished. A cut trace keeps an end line that
    # counts its steps (a trace without one is refused as truncated).
    cut = [lines[0], *lines[1:30], '{"type":"end","steps":29}']
    path = tmp_path / "cut.jsonl"
    write_lines(path, cut)
    replayed = replay_file(path)
    assert replayed.anomaly == "consumer-lost" and "never finished" in replayed.divergence.detail
    assert shrink_result(replayed, impl=DEFAULT_IMPL) is None
    with pytest.raises(NotFailingError, match="final check"):
        shrink_file(path)
    result = CliRunner().invoke(cli, ["shrink", str(path)])
    assert result.exit_code == 2 and "final check" in result.output


def test_a_candidate_with_steps_that_no_longer_make_sense_runs_to_its_end() -> None:
    """Cutting steps leaves operations on batches never delivered: both sides refuse them
    the same way and the run goes on (no exception escapes, no false divergence)."""
    passing = run_seed("consumer", 0)
    header = json.loads(passing.trace_lines[0])
    steps = [Step(0, "producer-0", ProduceBatch("t", (b"a",)))]
    clients = [c["group"] for c in header["profile_config"]["clients"]]
    steps += [Step(1, "client", StartClient(group)) for group in clients]
    steps += [Step(2, "worker", Complete(group, 99, "success")) for group in clients]
    result = run_steps(header, steps, impl=DEFAULT_IMPL)
    assert result.ok and result.steps == len(steps)
    completes = [json.loads(line) for line in result.trace_lines[-1 - len(clients) : -1]]
    assert all(line["outcome"]["error"] for line in completes), completes


def test_replay_refuses_a_final_check_that_is_not_a_bool(tmp_path: Path) -> None:
    passing = run_seed("consumer", 0, steps=5)
    header = json.loads(passing.trace_lines[0])
    header["final_check"] = "no"
    path = tmp_path / "bad.jsonl"
    write_lines(path, [json.dumps(header), *passing.trace_lines[1:]])
    with pytest.raises(TraceFormatError, match="final_check"):
        replay_file(path)


def test_dropping_a_batch_renumbers_only_that_clients_later_batches() -> None:
    ops = [
        StartClient("a"),  # 0
        StartClient("b"),  # 1
        Deliver("a"),  # 2: a's batch 1
        Deliver("a"),  # 3: a's batch 2
        Deliver("b"),  # 4: b's batch 1
        Complete("a", 2, "success"),  # 5
        Complete("b", 1, "success"),  # 6
        Complete("a", 1, "success"),  # 7
        CrashClient("a"),  # 8: a restarts, its batches count from 1 again
        Deliver("a"),  # 9
        Complete("a", 1, "success"),  # 10
    ]
    steps = tuple(Step(i, "x", op) for i, op in enumerate(ops))
    epochs = client_epochs(steps)
    assert epochs == [1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2]
    kept = [s.op for s in without_batch(steps, 2, ("a", 1, 1), epochs)]
    assert kept == [
        StartClient("a"),
        StartClient("b"),
        Deliver("a"),
        Deliver("b"),
        Complete("a", 1, "success"),  # was a's batch 2
        Complete("b", 1, "success"),  # b's numbering is its own
        CrashClient("a"),
        Deliver("a"),
        Complete("a", 1, "success"),  # after the restart: untouched
    ]


def _completion_of(steps: list[Step], impl: str = DEFAULT_IMPL) -> tuple:
    """The last step's outcome value, the steps run on the consumer profile."""
    header = json.loads(run_seed("consumer", 0, steps=3).trace_lines[0])
    result = run_steps(header, steps, impl=impl)
    assert result.ok, result.divergence and result.divergence.detail
    return tuple(json.loads(result.trace_lines[-2])["outcome"]["value"])


def _retry_with_refused(positions: tuple[int, ...]) -> list[Step]:
    ops = [
        StartClient("busy"),
        ProduceBatch("t", (b"a", b"b")),
        Pull("busy"),
        Deliver("busy"),  # batch 1: messages 1 and 2
        Complete("busy", 1, "retry_later", positions),
    ]
    return [Step(i, "x", op) for i, op in enumerate(ops)]


def test_a_refused_position_names_that_message_of_the_batch() -> None:
    # (queue, acked, retried, dead, kept, offset): a refused send-back keeps the message.
    queue, acked, retried, dead, kept, _ = _completion_of(_retry_with_refused((1,)))
    assert (queue, acked, dead, kept) == ("t", [], [], [2]) and [p[0] for p in retried] == [1]
    assert _completion_of(_retry_with_refused((0, 1)))[4] == [1, 2]
    # A position past the end of the batch refuses nothing (a shrunk trace may hold one).
    assert _completion_of(_retry_with_refused((5,)))[4] == []


def test_a_refused_send_back_is_a_position_in_the_trace_format() -> None:
    op = {"kind": "complete", "client": "c", "seq": 1, "result": "retry_later"}
    assert consumer_op_from_json({**op, "refused_positions": [0, 2]}) == Complete(
        "c", 1, "retry_later", (0, 2)
    )
    with pytest.raises(OpDecodeError, match="refused_positions"):
        consumer_op_from_json({**op, "refused_positions": [-1]})
    with pytest.raises(OpDecodeError, match=r"older rmqsim.*re-run the seed"):
        consumer_op_from_json({**op, "failed_sends": [7]})


def test_replaying_a_trace_of_the_older_format_is_exit_2(tmp_path: Path) -> None:
    lines = run_seed("consumer", 0, steps=40).trace_lines
    assert any('"refused_positions"' in line for line in lines)
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(lines).replace('"refused_positions"', '"failed_sends"') + "\n")
    result = CliRunner().invoke(cli, ["replay", str(old)])
    assert result.exit_code == 2 and "re-run the seed" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", [m.name for m in CONSUMER_MUTANTS])
def test_every_consumer_mutant_shrinks_to_at_most_ten_operations(name: str, tmp_path: Path) -> None:
    """Issue 8's target for every mutant's shrunk reproducer."""
    (mutant,) = select([name])
    kill = kill_mutant(mutant, range(0, 2), out=tmp_path)
    assert kill.status == KILLED and kill.shrunk_steps is not None
    assert kill.shrunk_steps <= 10, (kill.shrunk_steps, kill.shrunk_trace)
