"""Anomalies are named from the structure of a state difference, never from its text: a
topic's name may hold any word ("missing", "duplicated", "order")."""

from __future__ import annotations

import pytest

from rmqsim.conformance.reporting.anomalies import classify_state
from rmqsim.conformance.running.statediff import MessageDiff, diff_topic
from rmqsim.model.api import ConsumerMessage, TopicState


def _topic(*ids: int) -> TopicState:
    messages = tuple(ConsumerMessage(i, b"x", {}) for i in ids)
    return TopicState(messages=messages, pages=(), open_page_bytes=0, last_id=max(ids))


@pytest.mark.parametrize("name", ["t", "missing", "only in sut", "duplicated", "x order"])
@pytest.mark.parametrize(
    ("sut_ids", "kind", "anomaly"),
    [
        ((1, 2), MessageDiff.MISSING, "lost-write"),
        ((1, 2, 3, 3), MessageDiff.DUPLICATED, "duplicate"),
        ((1, 3, 2), MessageDiff.ORDER, "nonmonotonic-poll"),
    ],
)
def test_a_messages_difference_is_named_by_its_kind_whatever_the_topic(
    name: str, sut_ids: tuple[int, ...], kind: MessageDiff, anomaly: str
) -> None:
    diffs = diff_topic(name, _topic(1, 2, 3), _topic(*sut_ids))
    assert [d.kind for d in diffs if d.area == "messages"] == [kind]
    assert classify_state(diffs) == anomaly


def test_a_message_only_in_the_sut_is_resurrected_and_a_missing_one_after_retention_premature(
) -> None:
    extra = diff_topic("missing", _topic(1, 2), _topic(1, 2, 3))
    assert classify_state(extra) == "resurrected-message"
    gone = diff_topic("duplicated", _topic(1, 2, 3), _topic(2, 3))
    assert classify_state(gone, retention=True) == "premature-retention"
