"""A consumer trace file is input: what a step's line cannot say alone is checked against
the rest of the trace, and bad input is exit 2 with one line naming the file and line,
never a trace mismatch (exit 1, which blames the implementation) nor silently ignored.

* a ``complete``'s result must be one its client's mode allows (refused on read);
* an operation's client must be one of the header's profile (refused on read);
* refused positions must be distinct and ascending (refused on read), and each within
  its batch, which only replaying builds (refused when its step is replayed); a shrink
  candidate may hold positions past its (smaller) batch, and its trace records only the
  positions that took effect, so that shrunk traces replay.

The traces are written with a blank line after the header, so a step's line in the file
is not its index plus one: the error must name the line, not the step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.run import read_run_trace, run_seed, run_steps
from rmqsim.conformance.running.trace import TraceFormatError
from rmqsim.scenarios.consumer.ops import (
    Complete,
    Deliver,
    ProduceBatch,
    Pull,
    StartClient,
    consumer_op_from_json,
)
from rmqsim.scenarios.queue.ops import OpDecodeError, Step


@cache
def _recorded(profile: str) -> tuple[str, ...]:
    """A short passing run's trace lines (seed 0, 80 operations, then the drain)."""
    result = run_seed(profile, 0, steps=80)
    assert result.ok
    return tuple(result.trace_lines)


def _edited(
    tmp_path: Path,
    profile: str,
    pick: Callable[[dict[str, Any]], bool],
    edit: Callable[[dict[str, Any]], None],
) -> tuple[Path, int]:
    """The recorded trace with the first step ``pick`` accepts changed by ``edit``,
    written with a blank line after the header; (its path, the edited step's line)."""
    lines = [json.loads(line) for line in _recorded(profile)]
    index = next(i for i, line in enumerate(lines) if line.get("type") == "step" and pick(line))
    edit(lines[index])
    path = tmp_path / "edited.jsonl"
    text = [json.dumps(line) for line in lines]
    path.write_text("\n".join([text[0], "", *text[1:]]) + "\n")
    return path, index + 2  # 1-based, after the blank line


def _refused(path: Path, line: int) -> str:
    """The one-line error that ``rmqsim replay`` exits 2 with, checked to name ``line``."""
    result = CliRunner().invoke(cli, ["replay", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (message,) = result.output.strip().splitlines()
    assert message.startswith(f"rmqsim: error: {path}:{line}: "), message
    return message


def _complete_of(client: str) -> Callable[[dict[str, Any]], bool]:
    return lambda line: line["op"]["kind"] == "complete" and line["op"]["client"] == client


@pytest.mark.parametrize(
    ("profile", "client", "result", "allowed"),
    [
        ("consumer-orderly", "ordered", "retry_later", "allowed 'success' or 'suspend'"),
        ("consumer-orderly", "busy", "suspend", "allowed 'success' or 'retry_later'"),
        ("consumer", "slow", "SUCCESS", "allowed 'success' or 'retry_later'"),
    ],
)
def test_a_result_its_clients_mode_does_not_allow_is_refused_on_read(
    profile: str, client: str, result: str, allowed: str, tmp_path: Path
) -> None:
    def set_result(line: dict[str, Any]) -> None:
        line["op"]["result"] = result

    path, line = _edited(tmp_path, profile, _complete_of(client), set_result)
    with pytest.raises(TraceFormatError) as refused:
        read_run_trace(path)  # on read, before anything runs
    assert refused.value.line == line
    message = _refused(path, line)
    assert f"{result!r} is not a result of client {client!r}" in message
    assert message.endswith(allowed), message


def test_a_client_the_profile_does_not_have_is_refused_on_read(tmp_path: Path) -> None:
    def rename(line: dict[str, Any]) -> None:
        line["op"]["client"] = "nobody"

    pull = lambda line: line["op"]["kind"] == "pull"  # noqa: E731
    path, line = _edited(tmp_path, "consumer", pull, rename)
    with pytest.raises(TraceFormatError):
        read_run_trace(path)
    message = _refused(path, line)
    assert "'nobody' is not a client of the header's profile_config" in message
    assert "clients: 'busy', 'slow'" in message


@pytest.mark.parametrize("positions", [[1, 0], [0, 0]])
def test_refused_positions_must_be_distinct_and_ascending(
    positions: list[int], tmp_path: Path
) -> None:
    op = {"kind": "complete", "client": "busy", "seq": 1, "result": "retry_later"}
    with pytest.raises(OpDecodeError, match="distinct and ascending"):
        consumer_op_from_json({**op, "refused_positions": positions})

    def refuse(line: dict[str, Any]) -> None:
        line["op"]["result"] = "retry_later"
        line["op"]["refused_positions"] = positions

    path, line = _edited(tmp_path, "consumer", _complete_of("busy"), refuse)
    assert "positions must be distinct and ascending" in _refused(path, line)


def _batch_size(lines: list[dict[str, Any]], complete: dict[str, Any]) -> int:
    """How many messages the batch a recorded ``complete`` names held: its client's
    last delivery of that seq before it."""
    op = complete["op"]
    deliveries = [
        line["outcome"]["value"]
        for line in lines[: complete["i"]]
        if line.get("type") == "step"
        and line["op"] == {"kind": "deliver", "client": op["client"]}
        and line["outcome"]["value"]
        and line["outcome"]["value"][0] == op["seq"]
    ]
    return len(deliveries[-1][2])


def test_a_refused_position_past_its_batch_is_refused_when_replayed(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in _recorded("consumer")]
    refusing = next(
        line for line in lines if line.get("type") == "step" and line["op"].get("refused_positions")
    )
    size = _batch_size(lines, refusing)

    def past_the_end(line: dict[str, Any]) -> None:
        line["op"]["refused_positions"] = [*line["op"]["refused_positions"], size]

    path, line = _edited(tmp_path, "consumer", lambda line: line == refusing, past_the_end)
    message = _refused(path, line)
    assert f"refused_positions: {size} is past the batch: batch {refusing['op']['seq']}" in message
    assert f"holds {size} message(s), so its positions are below {size}" in message


def test_a_refused_position_of_a_batch_never_delivered_is_refused_when_replayed(
    tmp_path: Path,
) -> None:
    def no_such_batch(line: dict[str, Any]) -> None:
        line["op"].update(seq=999, result="retry_later", refused_positions=[0])

    path, line = _edited(tmp_path, "consumer", _complete_of("busy"), no_such_batch)
    message = _refused(path, line)
    assert "client 'busy' has no batch 999 being consumed" in message
    assert "the positions must be []" in message


def test_a_shrink_candidate_records_only_the_positions_its_batch_has(tmp_path: Path) -> None:
    """Cutting produces shrinks later batches and cutting a delivery leaves its completion
    naming none, so a candidate may hold positions past its batch: they refuse nothing,
    the run goes on, and its trace (what a shrunk trace is) records the positions that
    took effect, so that replaying it, which refuses such positions, passes."""
    header = json.loads(_recorded("consumer")[0])
    ops = [
        StartClient("busy"),
        ProduceBatch("t", (b"a", b"b")),
        Pull("busy"),
        Deliver("busy"),  # batch 1: two messages
        Complete("busy", 1, "retry_later", (1, 5)),
        Complete("busy", 7, "retry_later", (0,)),  # no batch 7
    ]
    result = run_steps(
        header, [Step(i, "x", op) for i, op in enumerate(ops)], impl=DEFAULT_IMPL
    )
    assert result.ok, result.divergence and result.divergence.detail
    recorded = [json.loads(line)["op"] for line in result.trace_lines[-3:-1]]
    assert [op["refused_positions"] for op in recorded] == [[1], []]
    path = tmp_path / "candidate.jsonl"
    path.write_text("\n".join(result.trace_lines) + "\n")
    replayed = CliRunner().invoke(cli, ["replay", str(path)])
    assert replayed.exit_code == 0, replayed.output
