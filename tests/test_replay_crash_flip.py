"""Replaying a trace whose armed crash resolves the other legal way than recorded.

SPEC (Durability): a crash inside an operation leaves the state before or after it, the
implementation's choice. A trace recorded on one queue (a corpus file found on a buggy
one) may meet the other choice on another queue, or no crash at all on a queue without
that crash point. The replay must then go on checking the model against the SUT, not
report a ``trace-mismatch``; and it must still find a real divergence after the flip.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory, model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.queue.layer import trace_header
from rmqsim.conformance.reporting.report import render_failure
from rmqsim.conformance.running.run import replay_trace
from rmqsim.conformance.running.trace import Trace, TraceStep, parse_lines, write_lines
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.queue.ops import ArmCrash, Consume, CreateGroup, CreateTopic, Message, Produce
from tests.wrong_models import FlippedPayload, TwoStepProduce

CONFIG = MQConfig(page_size_bytes=32, retention_size_bytes=64, retention_time_s=10)


def _messages(*payloads: bytes) -> tuple[Message, ...]:
    return tuple(Message(payload) for payload in payloads)


PROGRAM = (
    CreateTopic("t"),
    ArmCrash(hit=1, point=None),  # the first crash point of the next operation
    Produce("t", _messages(b"a", b"b")),
    Produce("t", _messages(b"c", b"d", b"e")),
    CreateGroup("t", "g"),
    Consume("t", "g", 5),
)


def _recorded_lines(impl: object) -> list[str]:
    """``PROGRAM`` as a trace recorded on ``impl``: replayed without outcomes, which the
    replay's result then holds (the model's, given how ``impl`` resolved the crash)."""
    header = trace_header(
        profile="fuzz",
        profile_config={},
        config=CONFIG,
        seed=0,
        impl="test",
        steps=None,
    )
    steps = [TraceStep(i, 0, "test", op, None) for i, op in enumerate(PROGRAM, 1)]
    result = replay_trace(Trace(header=header, steps=steps), impl=impl)
    assert result.ok, result.divergence
    return result.trace_lines


def _recorded_on(impl: object) -> Trace:
    return parse_lines(_recorded_lines(impl))


def test_our_queue_and_the_model_resolve_the_crash_differently() -> None:
    """The premise: ours crashes inside the produce (before: ``Crashed``); the model as
    a SUT has no crash points, so the produce completes (after)."""
    ours = _recorded_on(DEFAULT_IMPL).steps[2]
    model = _recorded_on(model_factory).steps[2]
    assert ours.outcome is not None and ours.outcome.error == "Crashed"
    assert ours.crash is not None and ours.crash.resolved == "before"
    assert model.outcome is not None and model.outcome.value == (1, 2) and model.crash is None


def test_a_trace_recorded_after_replays_clean_where_the_crash_resolves_before() -> None:
    trace = _recorded_on(model_factory)
    result = replay_trace(trace, impl=DEFAULT_IMPL)
    assert result.ok, result.divergence  # was trace-mismatch at operation 3
    (note,) = result.notes
    assert "operation 3 resolved before it, where the trace recorded after" in note
    # The program still catches the bug it exists for.
    torn = replay_trace(trace, impl=make_model_factory(TwoStepProduce))
    assert torn.anomaly == "torn-operation", torn.divergence


def test_a_trace_recorded_before_replays_clean_where_no_crash_fires() -> None:
    result = replay_trace(_recorded_on(DEFAULT_IMPL), impl=model_factory)
    assert result.ok, result.divergence
    (note,) = result.notes
    assert "operation 3 resolved after it, where the trace recorded before" in note


def test_after_a_flip_a_real_divergence_is_still_found_and_the_report_says_why() -> None:
    """After the flip, ids 1..5 exist on the replay (the trace recorded 1..3), and the
    wrong queue corrupts message 5: the lockstep must still see it."""
    result = replay_trace(_recorded_on(DEFAULT_IMPL), impl=make_model_factory(FlippedPayload))
    assert result.anomaly == "payload-mismatch", result.divergence
    assert result.divergence is not None and result.divergence.step_index == 6
    report = render_failure(result)
    assert "note       the crash armed for operation 3 resolved after it" in report


def test_an_outcome_that_differs_without_a_flip_is_still_a_trace_mismatch() -> None:
    """Only a different crash resolution excuses a different outcome: a recorded outcome
    edited after the crash step (same resolution) is still caught."""
    trace = _recorded_on(DEFAULT_IMPL)
    steps = list(trace.steps)
    fourth = steps[3]
    assert fourth.outcome is not None
    steps[3] = dataclasses.replace(fourth, outcome=dataclasses.replace(fourth.outcome, value=(9,)))
    result = replay_trace(dataclasses.replace(trace, steps=steps), impl=DEFAULT_IMPL)
    assert result.anomaly == "trace-mismatch" and result.notes == []
    assert result.divergence is not None and result.divergence.step_index == 4


def test_cli_replay_prints_the_note(tmp_path: Path) -> None:
    path = tmp_path / "flip.jsonl"
    write_lines(path, _recorded_lines(model_factory))
    done = CliRunner().invoke(cli, ["replay", str(path), "--impl", DEFAULT_IMPL])
    assert done.exit_code == 0, done.output
    assert "6 operations conform" in done.output
    assert "note: the crash armed for operation 3 resolved before it" in done.output
