"""Adapters that misbehave in ways the harness must report as the implementation's
anomaly, never crash on (issue 39, items 6 and 7): an exception whose ``__str__`` raises,
and results of the wrong type (the contract says ``produce`` and ``consume`` return lists).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import make_model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.apply import apply_op
from rmqsim.conformance.running.run import run_seed
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import ConsumerMessage, ProducerMessage
from rmqsim.scenarios.queue.ops import (
    Consume,
    CreateGroup,
    CreateTopic,
    GetLatest,
    Message,
    Produce,
)


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("no text for you")


class _RaisesUnprintable(ReferenceMQ):
    def get_latest_msg(self, topic: str) -> int:
        raise Unprintable("x")


class _ConsumeGenerator(ReferenceMQ):
    def consume(self, topic: str, group: str, n: int) -> Any:
        messages = super().consume(topic, group, n)

        def each() -> Iterator[ConsumerMessage]:
            yield from messages

        return each()


class _ProduceTuple(ReferenceMQ):
    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> Any:
        return tuple(super().produce(topic, messages))


class _ProduceGenerator(ReferenceMQ):
    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> Any:
        return iter(super().produce(topic, messages))


unprintable_factory = make_model_factory(_RaisesUnprintable)


def test_an_exception_whose_str_raises_is_an_outcome_with_a_note() -> None:

    outcome = apply_op(_RaisesUnprintable(), GetLatest("t"))
    assert outcome.error is not None
    assert outcome.error.startswith("unexpected:Unprintable: ")
    assert "could not be rendered" in outcome.error and "ValueError" in outcome.error


def test_a_run_against_an_unprintable_exception_diverges_instead_of_crashing(
    tmp_path: Path,
) -> None:
    result = run_seed("smoke", 0, impl=unprintable_factory, steps=200)
    assert result.divergence is not None and result.anomaly == "error-mismatch"
    done = CliRunner().invoke(cli, ["run", "--profile", "smoke", "--seed", "0", "--impl",
                                    f"{__name__}:unprintable_factory", "--out", str(tmp_path)])
    assert done.exit_code == 1, done.output
    assert "internal error" not in done.output


def _fed(queue: ReferenceMQ) -> ReferenceMQ:
    apply_op(queue, CreateTopic("t"))
    apply_op(queue, CreateGroup("t", "g"))
    return queue


@pytest.mark.parametrize(
    ("queue", "op", "returned"),
    [
        (_ConsumeGenerator, Consume("t", "g", 5), "generator"),
        (_ProduceTuple, Produce("t", (Message(b"x"),)), "tuple"),
        (_ProduceGenerator, Produce("t", (Message(b"x"),)), "list_iterator"),
    ],
)
def test_a_result_that_is_not_a_list_is_the_implementations_anomaly(
    queue: type[ReferenceMQ], op: Any, returned: str
) -> None:
    outcome = apply_op(_fed(queue()), op)
    assert outcome.error == f"wrong-result-type:{op.kind} returned {returned}, not list"
    assert apply_op(_fed(ReferenceMQ()), op).ok


@pytest.mark.parametrize("queue", [_ConsumeGenerator, _ProduceTuple, _ProduceGenerator])
def test_a_run_against_results_of_the_wrong_type_diverges(queue: type[ReferenceMQ]) -> None:
    result = run_seed("smoke", 0, impl=make_model_factory(queue), steps=300)
    assert result.divergence is not None and result.anomaly == "wrong-result-type"


def unprintable_open_factory(**_: Any) -> Any:
    raise Unprintable("x")


unprintable_open_factory.rmqsim_layer = "queue"  # type: ignore[attr-defined]  # its form


@pytest.mark.parametrize("profile", ["smoke", "consumer"])
def test_an_open_raising_an_unprintable_exception_is_unrecoverable(profile: str) -> None:
    result = run_seed(profile, 0, impl=unprintable_open_factory)
    assert result.divergence is not None and result.anomaly == "unrecoverable"
    assert "could not be rendered" in result.divergence.detail
