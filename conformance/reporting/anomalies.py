"""Name a divergence after the anomaly it shows, as Jepsen's checkers do.

The classifier looks at the operation, both outcomes, the model's view before the
operation, and the state differences, and picks the most specific name. Names are stable:
reports, the regression corpus and the mutant kill matrix group by them.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqsim.conformance.running.apply import WRONG_RESULT_TYPE
from rmqsim.conformance.running.statediff import Difference, MessageDiff
from rmqsim.scenarios.queue.ops import Outcome

__all__ = [
    "ANOMALIES",
    "PROTOCOL_ERROR_PREFIX",
    "Before",
    "classify_consume",
    "classify_outcome",
    "classify_state",
    "is_protocol_error",
]

#: Every anomaly name, with what it means. Order is severity: the first that applies wins.
ANOMALIES: dict[str, str] = {
    "torn-operation": "after a crash inside an operation the state is neither before nor after it",
    "unrecoverable": "the queue cannot be opened, or after a crash or a close reopened or read",
    "hang": "a call into the implementation did not return within the bound (--op-timeout-s)",
    "lost-write": "a message, topic or group that completed is missing",
    "resurrected-message": "a deleted or retained-away message (or topic) came back",
    "id-reuse": "an id was issued twice under one name, or the id high-water mark went back",
    "duplicate": "a message was delivered or stored twice",
    "nonmonotonic-poll": "a poll returned ids out of order",
    "poll-skip": "a poll skipped a retained message the group had not read",
    "short-poll": "a poll returned only the first of the messages it should have (two or more "
    "missing at its end, none in between)",
    "premature-retention": "retention deleted a message it had to keep",
    "payload-mismatch": "a message's payload or properties differ",
    "position-mismatch": "a group's position (or existence) differs",
    "ack-mismatch": "a page's acked_ts differs",
    "page-mismatch": "page boundaries, sizes, close times or the open page differ",
    "id-gap": "ids skip numbers or the high-water mark ran ahead",
    "wrong-result-type": "produce or consume returned something other than a list (a tuple, "
    "a generator, ...)",
    "error-mismatch": "one side raised and the other did not, or they raised different kinds",
    "outcome-mismatch": "the returned values differ in a way no finer check explains",
    "protocol-error": "an implementation in another process broke the wire protocol "
    "(docs/PROTOCOL.md): a line that is not JSON, a reply of the wrong shape or to another "
    "request, output that ended inside a line",
    "trace-mismatch": "replaying a trace, the model's outcome or final state differs from the "
    "recorded one",
}


@dataclass(frozen=True, slots=True)
class Before:
    """What the model knew just before the diverging operation."""

    last_id: int  # the topic name's id high-water mark (0 if none)
    first_retained_id: int | None  # None when nothing is retained
    position: int | None  # the group's position, when the op names an existing group


def _delivered_ids(outcome: Outcome) -> list[int]:
    value = outcome.value
    return [d.msg_id for d in value] if isinstance(value, tuple) else []


def classify_consume(expected: Outcome, actual: Outcome, before: Before) -> str | None:
    """Anomaly of a consume whose deliveries differ, or None if nothing specific."""
    got = _delivered_ids(actual)
    want = _delivered_ids(expected)
    if len(set(got)) != len(got):
        return "duplicate"
    if got != sorted(got):
        return "nonmonotonic-poll"
    wanted, gotten = set(want), set(got)
    extra = [i for i in got if i not in wanted]
    if extra:
        if before.position is not None and any(0 <= i < before.position for i in extra):
            return "duplicate"
        if before.first_retained_id is None or any(i < before.first_retained_id for i in extra):
            return "resurrected-message"
        if any(i > before.last_id for i in extra):
            return "id-gap"
        return "poll-skip" if want and got and got[0] > want[0] else "outcome-mismatch"
    if len(got) < len(want) - 1 and got == want[: len(got)]:
        # The first messages only, nothing in between skipped. One missing message at the
        # end is what a skip of the poll's last message looks like too: poll-skip.
        return "short-poll"
    if any(i not in gotten for i in want):
        return "poll-skip"
    return "payload-mismatch" if got == want else None


#: The outcome of a call whose reply broke the wire protocol (``conformance.wire``).
PROTOCOL_ERROR_PREFIX = "unexpected:WireProtocolError"


def is_protocol_error(error: object) -> bool:
    """Whether an outcome's error (or a failure's description) is a wire protocol error."""
    return isinstance(error, str) and error.startswith(PROTOCOL_ERROR_PREFIX)


def classify_outcome(kind: str, expected: Outcome, actual: Outcome, before: Before) -> str:
    """Anomaly of an operation whose outcomes differ."""
    if is_protocol_error(actual.error):
        return "protocol-error"
    if actual.error is not None and actual.error.startswith(WRONG_RESULT_TYPE):
        return "wrong-result-type"
    if expected.error != actual.error:
        return "error-mismatch"
    if kind == "consume":
        return classify_consume(expected, actual, before) or "outcome-mismatch"
    if kind == "produce" and isinstance(actual.value, tuple):
        ids = [i for i in actual.value if isinstance(i, int)]
        if len(set(ids)) != len(ids) or any(i <= before.last_id for i in ids):
            return "id-reuse"
        return "id-gap"
    if kind == "get_latest" and isinstance(actual.value, int) and isinstance(expected.value, int):
        if actual.value > expected.value:
            return "resurrected-message" if actual.value <= before.last_id else "id-gap"
        return "lost-write"
    if kind == "exist_group":
        return "position-mismatch"
    return "outcome-mismatch"


#: The anomaly of each kind of ``messages`` difference but a missing message (which is
#: ``lost-write``, or ``premature-retention`` after a retention pass).
_MESSAGE_ANOMALY = {
    MessageDiff.DUPLICATED: "duplicate",
    MessageDiff.ONLY_IN_SUT: "resurrected-message",
    MessageDiff.ORDER: "nonmonotonic-poll",
}


def classify_state(diffs: list[Difference], *, retention: bool = False) -> str:
    """Anomaly of a state difference (outcomes agreed). ``retention`` says the diverging
    operation was a retention pass, which turns missing old messages into premature ones."""
    found: set[str] = set()
    for d in diffs:
        if d.area == "topic":
            found.add("lost-write" if d.expected == "exists" else "resurrected-message")
        elif d.area == "messages":
            assert d.kind is not None, d  # statediff gives every messages difference one
            found.add(_MESSAGE_ANOMALY[d.kind] if d.kind is not MessageDiff.MISSING
                      else "premature-retention" if retention else "lost-write")
        elif d.area == "payload":
            found.add("payload-mismatch")
        elif d.area == "last_id":
            lower = isinstance(d.actual, int) and d.actual < d.expected
            found.add("id-reuse" if lower else "id-gap")
        elif d.area == "group":
            found.add("lost-write" if d.actual == "absent" else "position-mismatch")
        elif d.area == "acks":
            found.add("ack-mismatch")
        else:
            found.add("page-mismatch")
    for name in ANOMALIES:
        if name in found:
            return name
    return "outcome-mismatch"
