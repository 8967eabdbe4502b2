"""The history checks (``conformance.consumer.check``) fed by hand: each guarantee of
docs/CONSUMER.md accepts what the rules allow and names what they forbid."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.conformance.consumer.check import ConsumerViolation, GroupHistory
from rmqsim.model.api import Completion, ConsumeResult, Delivered, Delivery

R = "%RETRY%g"
OK, LATER, SUSPEND = ConsumeResult.SUCCESS, ConsumeResult.RETRY_LATER, ConsumeResult.SUSPEND


def delivery(seq: int, queue: str, *messages: tuple[int, int, int]) -> Delivery:
    """Messages as (msg_id, origin_id, reconsume_times)."""
    origin_topic = "t"
    return Delivery(
        seq,
        queue,
        tuple(Delivered(queue, i, b"", {}, origin_topic, o, k) for i, o, k in messages),
    )


def completion(seq: int, queue: str, offset: int, **parts: Any) -> Completion:
    fields = {"acked": (), "retried": (), "dead": (), "kept": ()}
    fields.update(parts)
    return Completion(seq=seq, queue=queue, offset=offset, **fields)


def history(orderly: bool = False, **limits: int) -> GroupHistory:
    h = GroupHistory("g", "t", max_reconsume_times=1, orderly=orderly, **limits)
    h.started({})
    h.produced([1, 2, 3], [4, 4, 4])
    return h


def violation(action: Any) -> str:
    with pytest.raises(ConsumerViolation) as raised:
        action()
    return raised.value.anomaly


def ack(h: GroupHistory, seq: int, *ids: int, offset: int) -> None:
    """Deliver ``ids`` as batch ``seq`` of the topic and acknowledge them."""
    h.delivered(delivery(seq, "t", *((i, i, 0) for i in ids)))
    h.completed(completion(seq, "t", offset, acked=ids), OK)


def test_checks_name_each_broken_guarantee() -> None:
    h = history()
    h.delivered(delivery(1, "t", (1, 1, 0)))
    h.delivered(delivery(2, "t", (2, 2, 0)))
    assert violation(lambda: h.completed(completion(2, "t", 3, acked=(2,)))) == (
        "offset-passes-unacked"
    )
    h = history()
    h.delivered(delivery(1, "t", (1, 1, 0)))
    assert violation(lambda: h.delivered(delivery(2, "t", (1, 1, 0)))) == "consumer-duplicate"
    h.completed(completion(1, "t", 2, acked=(1,)))
    h.persisted({"t": 2})
    assert violation(lambda: h.persisted({})) == "offset-regression"
    h.started({"t": 2})
    assert violation(lambda: h.delivered(delivery(1, "t", (1, 1, 0)))) == "consumer-duplicate"
    assert violation(lambda: h.delivered(delivery(2, "t", (2, 2, 1)))) == "retry-mismatch"
    h.delivered(delivery(2, "t", (2, 2, 0)))
    assert violation(lambda: h.completed(completion(2, "t", 3, dead=((2, 1),)))) == ("dlq-mismatch")
    assert violation(h.finish) == "consumer-lost"
    ordered = history(orderly=True)
    assert violation(lambda: ordered.delivered(delivery(1, "t", (2, 2, 0)))) == ("order-violation")


def test_checks_accept_a_retry_then_a_dead_letter() -> None:
    h = history()
    for msg_id in (1, 2, 3):
        h.delivered(delivery(msg_id, "t", (msg_id, msg_id, 0)))
        h.completed(
            completion(
                msg_id,
                "t",
                msg_id + 1,
                acked=(msg_id,) if msg_id > 1 else (),
                retried=((1, 1),) if msg_id == 1 else (),
            ),
            OK if msg_id > 1 else LATER,
        )
    h.delivered(delivery(4, R, (1, 1, 1)))
    h.completed(completion(4, R, 2, dead=((1, 1),)), LATER)
    h.persisted({"t": 4, R: 2})
    h.finish()


# ---------------------------------------------------------------------- duplicates


def test_a_crash_explains_redelivery_within_the_unpersisted_window() -> None:
    h = history()
    h.pulled({"t": (1, 2, 3)})
    h.delivered(delivery(1, "t", (1, 1, 0)))
    ack(h, 2, 2, offset=1)  # 1 is pending: the offset stays at 1
    h.persisted({"t": 1})
    h.started({"t": 1})  # a client crash: 2 was finished above the stored offset
    h.pulled({"t": (1, 2, 3)})
    ack(h, 3, 1, 2, offset=3)
    ack(h, 4, 3, offset=4)
    h.finish()


def test_a_finished_message_again_without_a_crash_is_a_duplicate() -> None:
    h = history()
    h.pulled({"t": (1, 2)})
    ack(h, 1, 1, offset=2)
    assert violation(lambda: h.pulled({"t": (1,)})) == "consumer-duplicate"
    assert violation(lambda: h.delivered(delivery(2, "t", (1, 1, 0)))) == "consumer-duplicate"


def test_a_redelivery_below_the_persisted_offset_is_a_duplicate() -> None:
    h = history()
    h.pulled({"t": (1, 2, 3)})
    ack(h, 1, 1, 2, offset=3)
    h.persisted({"t": 3})
    h.started({"t": 3})
    assert violation(lambda: h.pulled({"t": (2, 3)})) == "consumer-duplicate"
    assert violation(lambda: h.delivered(delivery(2, "t", (2, 2, 0)))) == "consumer-duplicate"


def test_a_local_retry_explains_a_second_delivery() -> None:
    h = history()
    h.delivered(delivery(1, "t", (1, 1, 0)))
    h.completed(completion(1, "t", 1, kept=(1,)), LATER, refused=(1,))
    h.delivered(delivery(2, "t", (1, 1, 1)))  # the same message, one more failure counted
    h.completed(completion(2, "t", 2, acked=(1,)), OK)


# ---------------------------------------------------------------------- offsets and pulls


def test_a_restart_offset_past_an_unfinished_message_is_caught() -> None:
    h = history()
    assert violation(lambda: h.started({"t": 3})) == "offset-passes-unacked"


def test_a_pull_may_skip_only_finished_messages() -> None:
    h = history()
    h.pulled({"t": (1,)})
    assert violation(lambda: h.pulled({"t": (3,)})) == "consumer-lost"  # 2 never finished
    h = history()
    h.pulled({"t": (1, 2)})
    ack(h, 1, 1, 2, offset=3)
    h.started({"t": -1})  # nothing persisted: from the start, 1 and 2 may be skipped
    h.pulled({"t": (3,)})


def test_flow_control_pulls_exactly_while_within_the_limits() -> None:
    h = history(max_cached_count=1, max_cached_bytes=100)
    h.pulled({"t": (1,)})
    h.pulled({"t": (2,)})  # one cached: not over the limit
    assert violation(lambda: h.pulled({"t": (3,)})) == "flow-control"
    h.pulled({"t": None})
    ack(h, 1, 1, offset=2)
    assert violation(lambda: h.pulled({"t": None})) == "flow-control"  # 1 cached: may pull
    heavy = history(max_cached_count=100, max_cached_bytes=7)
    heavy.pulled({"t": (1, 2)})  # 8 bytes cached
    assert violation(lambda: heavy.pulled({"t": (3,)})) == "flow-control"


# ---------------------------------------------------------------------- completions


def test_a_completion_accounts_for_each_message_of_its_batch_once() -> None:
    h = history()
    h.delivered(delivery(1, "t", (1, 1, 0), (2, 2, 0)))
    assert violation(lambda: h.completed(completion(1, "t", 1, acked=(1,)))) == (
        "completion-mismatch"
    )
    h = history()
    h.delivered(delivery(1, "t", (1, 1, 0)))
    both = completion(1, "t", 2, acked=(1,), retried=((1, 1),))  # acked and sent back
    assert violation(lambda: h.completed(both)) == "completion-mismatch"
    assert violation(lambda: h.completed(completion(7, "t", 2, acked=(1,)))) == (
        "completion-mismatch"
    )


def test_a_completion_does_what_its_result_and_the_refused_sends_say() -> None:
    h = history()
    h.delivered(delivery(1, "t", (1, 1, 0)))
    kept = completion(1, "t", 1, kept=(1,))
    assert violation(lambda: h.completed(kept, OK)) == "completion-mismatch"
    assert violation(lambda: h.completed(kept, LATER)) == "completion-mismatch"  # not refused
    sent = completion(1, "t", 2, retried=((1, 1),))
    assert violation(lambda: h.completed(sent, LATER, refused=(1,))) == "completion-mismatch"
    h.completed(kept, LATER, refused=(1,))


def test_orderly_suspend_dead_letters_exactly_the_used_up_prefix() -> None:
    h = history(orderly=True)
    h.delivered(delivery(1, "t", (1, 1, 0), (2, 2, 0)))
    h.completed(completion(1, "t", -1, kept=(1, 2)), SUSPEND)
    h.delivered(delivery(2, "t", (1, 1, 1), (2, 2, 1)))  # 1 used up its deliveries (max 1)
    put_back = completion(2, "t", -1, kept=(1, 2))
    assert violation(lambda: h.completed(put_back, SUSPEND)) == "dlq-mismatch"
    h.completed(put_back, SUSPEND, refused=(1,))  # its send failed: kept in place is right
    h.delivered(delivery(3, "t", (1, 1, 2), (2, 2, 2)))
    h.completed(completion(3, "t", 2, dead=((1, 1),), kept=(2,)), SUSPEND, refused=(2,))
