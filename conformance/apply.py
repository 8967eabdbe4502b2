"""Translate vocabulary operations (``scenarios.ops``) into queue calls and their results
into plain ``Outcome`` data, the one form both sides are compared in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rmqsim.model.api import ConsumerMessage, MessageQueue, MQError, ProducerMessage
from rmqsim.scenarios import ops
from rmqsim.scenarios.ops import Delivered, Outcome

__all__ = [
    "RUNNER_KINDS",
    "apply_op",
    "error_outcome",
]

#: Kinds handled by the runner itself rather than by a queue call.
RUNNER_KINDS = frozenset({"advance_clock", "crash_reopen", "close_reopen", "arm_crash"})


def _properties(properties: object) -> tuple[tuple[str, str], ...]:
    """Properties as sorted pairs; anything but a mapping (a SUT returning ``None``) stays
    visible as a marker, so the message differs in its properties, not as a crash."""
    if type(properties) is dict:  # the common case, without the ABC check's cost
        return tuple(sorted(properties.items()))
    if isinstance(properties, Mapping):
        return tuple(sorted(dict(properties).items()))
    return (("<not a mapping>", repr(properties)[:200]),)


def _delivered(messages: list[ConsumerMessage]) -> tuple[Delivered, ...]:
    return tuple(
        Delivered(m.msg_id, m.payload, _properties(m.properties))
        if isinstance(m, ConsumerMessage)
        else Delivered(-1, b"", (("<not a ConsumerMessage>", repr(m)[:200]),))
        for m in messages
    )


def _producer_messages(op: ops.Produce) -> list[ProducerMessage]:
    return [ProducerMessage(m.payload, dict(m.properties)) for m in op.messages]


_CALLS: dict[str, Callable[[MessageQueue, Any], Any]] = {
    "create_topic": lambda mq, op: mq.create_topic(op.topic),
    "destroy_topic": lambda mq, op: mq.destroy_topic(op.topic),
    "create_group": lambda mq, op: mq.create_consumer_group(op.topic, op.group),
    "destroy_group": lambda mq, op: mq.destroy_consumer_group(op.topic, op.group),
    "exist_group": lambda mq, op: bool(mq.exist_consumer_group(op.topic, op.group)),
    "produce": lambda mq, op: tuple(mq.produce(op.topic, _producer_messages(op))),
    "consume": lambda mq, op: _delivered(mq.consume(op.topic, op.group, op.n)),
    "seek": lambda mq, op: mq.seek(op.topic, op.group, op.msg_id),
    "seek_to_latest": lambda mq, op: mq.seek_to_latest(op.topic, op.group),
    "get_latest": lambda mq, op: mq.get_latest_msg(op.topic),
    "run_retention": lambda mq, op: mq.run_retention(),
}


def apply_op(mq: MessageQueue, op: ops.Op) -> Outcome:
    """Run one queue operation and capture its outcome: a value, or an error kind.

    Errors outside ``MQError`` are bugs of the implementation; they become the error kind
    ``unexpected:<Type>`` so that they show up as a divergence instead of a traceback.
    ``BaseException`` subclasses (the injected crash among them) propagate.
    """
    call = _CALLS[op.kind]
    try:
        value = call(mq, op)
    except Exception as exc:
        return error_outcome(exc)
    return Outcome(value=value)


def error_outcome(exc: Exception) -> Outcome:
    """The outcome of a call that raised ``exc``: an ``MQError``'s kind, or
    ``unexpected:<Type>: <message>`` for anything else (a bug of the implementation,
    compared and traced like any outcome, never a crash of rmqsim)."""
    if isinstance(exc, MQError):
        return Outcome(error=getattr(type(exc), "kind", type(exc).__name__))
    return Outcome(error=f"unexpected:{type(exc).__name__}: {str(exc)[:200]}")
