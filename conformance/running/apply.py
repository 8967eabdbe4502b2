"""Translate vocabulary operations (``scenarios.queue.ops``) into queue calls and their results
into plain ``Outcome`` data, the one form both sides are compared in."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rmqsim.model.api import ConsumerMessage, MessageQueue, MQError, ProducerMessage
from rmqsim.scenarios.queue import ops
from rmqsim.scenarios.queue.ops import Delivered, Outcome

__all__ = [
    "RUNNER_KINDS",
    "SUT_FAILURES",
    "WRONG_RESULT_TYPE",
    "apply_op",
    "error_outcome",
    "exception_text",
]

#: What a call into an implementation may raise that rmqsim records as the
#: implementation's failure (an outcome, a divergence): any ``Exception``, and
#: ``SystemExit``: a ``sys.exit`` inside an in-process implementation would otherwise end
#: rmqsim itself, with that exit status and no verdict. ``KeyboardInterrupt`` and the
#: injected crash (``BaseException``s too) still propagate.
SUT_FAILURES: tuple[type[BaseException], ...] = (Exception, SystemExit)
#: Kinds handled by the runner itself rather than by a queue call.
RUNNER_KINDS = frozenset({"advance_clock", "crash_reopen", "close_reopen", "arm_crash"})
#: The prefix of the error an operation's outcome carries when the queue returned a value
#: of the wrong type (``produce`` and ``consume`` must return a ``list``): the anomaly
#: ``wrong-result-type`` (``anomalies.classify_outcome``).
WRONG_RESULT_TYPE = "wrong-result-type:"


class _WrongResultType(Exception):
    """A queue call returned a value of another type than the contract's."""


def _list(kind: str, value: object) -> list[Any]:
    """``value`` when it is exactly a ``list`` (one type check per call: the lockstep runs
    thousands of operations a second); else ``_WrongResultType``. A generator, a tuple or
    a list subclass is not what the contract promises callers: they may index it, iterate
    it twice or serialise it."""
    if type(value) is not list:
        raise _WrongResultType(f"{kind} returned {type(value).__name__}, not list")
    return value


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
    "produce": lambda mq, op: tuple(_list("produce", mq.produce(op.topic,
                                                                  _producer_messages(op)))),
    "consume": lambda mq, op: _delivered(_list("consume", mq.consume(op.topic, op.group, op.n))),
    "seek": lambda mq, op: mq.seek(op.topic, op.group, op.msg_id),
    "seek_to_latest": lambda mq, op: mq.seek_to_latest(op.topic, op.group),
    "get_latest": lambda mq, op: mq.get_latest_msg(op.topic),
    "run_retention": lambda mq, op: mq.run_retention(),
}


def apply_op(mq: MessageQueue, op: ops.Op) -> Outcome:
    """Run one queue operation and capture its outcome: a value, or an error kind.

    Errors outside ``MQError`` are bugs of the implementation; they become the error kind
    ``unexpected:<Type>`` so that they show up as a divergence instead of a traceback.
    A ``produce`` or ``consume`` result that is not a ``list`` becomes the error
    ``wrong-result-type:<kind> returned <type>, not list``.
    ``BaseException`` subclasses other than ``SystemExit`` (the injected crash among
    them) propagate.
    """
    call = _CALLS[op.kind]
    try:
        value = call(mq, op)
    except _WrongResultType as wrong:
        return Outcome(error=WRONG_RESULT_TYPE + wrong.args[0])
    except SUT_FAILURES as exc:
        return error_outcome(exc)
    return Outcome(value=value)


def error_outcome(exc: BaseException) -> Outcome:
    """The outcome of a call that raised ``exc``: an ``MQError``'s kind, or
    ``unexpected:<Type>: <message>`` for anything else (a bug of the implementation,
    compared and traced like any outcome, never a crash of rmqsim)."""
    if isinstance(exc, MQError):
        return Outcome(error=getattr(type(exc), "kind", type(exc).__name__))
    return Outcome(error=f"unexpected:{type(exc).__name__}: {exception_text(exc)[:200]}")


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or a note saying it could not be rendered when the exception's own
    ``__str__`` raises (an adapter's exception must never crash rmqsim)."""
    try:
        return str(exc)
    except Exception as failure:
        return (f"<the message could not be rendered: its __str__ raised "
                f"{type(failure).__name__}>")
