"""The push consumer's rules (docs/CONSUMER.md), step by step, on model and impl alike."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.model.api import (
    PROP_RECONSUME_TIMES,
    ConsumeMode,
    ConsumeResult,
    InvalidArgumentError,
    NotServingError,
)
from rmqsim.model.api import (
    NotServingError as Refused,
)

OK, LATER, SUSPEND = ConsumeResult.SUCCESS, ConsumeResult.RETRY_LATER, ConsumeResult.SUSPEND
RETRY, DLQ = "%RETRY%g", "%DLQ%g"


def drain_batches(consumer: Any) -> list[Any]:
    batches = []
    while (batch := consumer.next_batch()) is not None:
        batches.append(batch)
    return batches


def ids(batch: Any) -> list[int]:
    return [m.msg_id for m in batch.messages]


def test_offset_is_the_lowest_pending_id_whatever_order_batches_finish_in(make_env: Any) -> None:
    env = make_env()
    env.produce(b"a", b"b", b"c", b"d")
    assert env.consumer.pull() == {"t": (1, 2, 3, 4), RETRY: ()}
    b1, b2, b3, b4 = drain_batches(env.consumer)
    assert env.consumer.complete(b3.seq, OK).offset == 1
    assert env.consumer.complete(b4.seq, OK).offset == 1
    assert env.consumer.complete(b1.seq, OK).offset == 2
    assert env.consumer.complete(b2.seq, OK).offset == 5  # empty: highest + 1


def test_retry_later_goes_to_the_retry_topic_then_the_dead_letter_topic(make_env: Any) -> None:
    env = make_env(max_reconsume_times=2)
    env.produce(b"p")
    seen = []
    for _ in range(4):
        env.consumer.pull()
        (batch,) = drain_batches(env.consumer)
        (message,) = batch.messages
        seen.append((message.queue, message.origin_id, message.reconsume_times))
        done = env.consumer.complete(batch.seq, LATER)
        if done.dead:
            break
    assert seen == [("t", 1, 0), (RETRY, 1, 1), (RETRY, 1, 2)]  # max + 1 deliveries
    assert done.dead == ((2, 1),) and done.retried == ()
    env.mq.create_consumer_group(DLQ, "check")
    (dead,) = env.mq.consume(DLQ, "check", 10)
    assert dead.payload == b"p" and dead.properties[PROP_RECONSUME_TIMES] == "3"
    env.consumer.pull()
    assert drain_batches(env.consumer) == []  # nothing left to deliver


def test_a_failed_send_back_keeps_the_message_and_the_offset_behind_it(make_env: Any) -> None:
    failing = {1}

    def hook(topic: str, msg_id: int) -> None:
        if msg_id in failing:
            raise Refused("injected")

    env = make_env(send_hook=hook)
    env.produce(b"a", b"b")
    env.consumer.pull()
    b1, b2 = drain_batches(env.consumer)
    done = env.consumer.complete(b1.seq, LATER)
    assert (done.kept, done.retried, done.offset) == ((1,), (), 1)
    assert env.consumer.complete(b2.seq, OK).offset == 1  # 1 is still pending
    (again,) = drain_batches(env.consumer)  # retried locally, one more failed delivery
    assert ids(again) == [1] and again.messages[0].reconsume_times == 1
    failing.clear()
    done = env.consumer.complete(again.seq, LATER)
    assert done.retried == ((1, 1),) and done.offset == 3
    env.consumer.pull()
    (retried,) = drain_batches(env.consumer)
    assert retried.queue == RETRY and retried.messages[0].reconsume_times == 2


def test_flow_control_stops_pulling_over_the_count_or_byte_limit(make_env: Any) -> None:
    env = make_env(pull_batch_size=2, max_cached_count=2, max_cached_bytes=1000)
    env.produce(*[b"x"] * 7)
    assert env.consumer.pull()["t"] == (1, 2)
    assert env.consumer.pull()["t"] == (3, 4)  # 2 cached: not over the limit yet
    assert env.consumer.pull()["t"] is None  # 4 cached > 2: flow control
    for batch in drain_batches(env.consumer)[:3]:
        env.consumer.complete(batch.seq, OK)
    assert env.consumer.pull()["t"] == (5, 6)
    heavy = make_env(max_cached_bytes=5)
    heavy.produce(b"123456", b"7")
    assert heavy.consumer.pull()["t"] == (1, 2)
    assert heavy.consumer.pull()["t"] is None  # 7 bytes cached > 5


def test_restart_resumes_from_the_persisted_offset_only(make_env: Any) -> None:
    env = make_env()
    env.produce(b"a", b"b", b"c")
    env.consumer.pull()
    for batch in drain_batches(env.consumer)[:2]:
        env.consumer.complete(batch.seq, OK)
    assert env.consumer.persist() == {"t": 3}
    assert env.consumer.stored_offsets() == {"t": 3}
    env.produce(b"d")
    env.consumer.pull()
    for batch in drain_batches(env.consumer):
        env.consumer.complete(batch.seq, OK)  # acked, not persisted: the duplicate window
    assert env.restart() == {"t": 3, RETRY: -1}
    assert env.consumer.pull()["t"] == (3, 4)
    for batch in drain_batches(env.consumer):
        env.consumer.complete(batch.seq, OK)
    env.consumer.close()
    env.start()
    assert env.consumer.pull()["t"] == ()  # close persisted everything


def test_restart_at_an_id_not_issued_yet_skips_nothing_and_repeats_nothing(
    make_env: Any,
) -> None:
    env = make_env()
    env.produce(b"a")
    env.consumer.pull()
    (batch,) = drain_batches(env.consumer)
    env.consumer.complete(batch.seq, OK)
    env.consumer.persist()
    env.restart()  # offset 2 is not issued: the cursor rewinds and the floor filters
    env.produce(b"b")
    assert env.consumer.pull()["t"] == (2,)


def test_persist_moves_the_guard_group_so_retention_keeps_pending_messages(
    make_env: Any,
) -> None:
    env = make_env()
    env.produce(b"a", b"b", b"c")
    env.consumer.pull()
    b1, _, _ = drain_batches(env.consumer)
    env.consumer.complete(b1.seq, OK)
    env.consumer.persist()
    groups = env.mq.snapshot().groups
    assert groups[("t", "g")] == 2  # the guard: the first message not finished
    assert groups[("t", "%PULL%g")] == 4  # the pull cursor is ahead


def test_orderly_consumes_one_batch_at_a_time_in_id_order(make_env: Any) -> None:
    env = make_env(mode=ConsumeMode.ORDERLY, consume_batch_size=2)
    env.produce(b"a", b"b", b"c")
    assert env.consumer.pull() == {"t": (1, 2, 3)}
    first = env.consumer.next_batch()
    assert ids(first) == [1, 2]
    assert env.consumer.next_batch() is None  # the queue is held by a worker
    assert env.consumer.complete(first.seq, OK).offset == 3
    second = env.consumer.next_batch()
    assert ids(second) == [3]
    assert env.consumer.complete(second.seq, OK).offset == 4


def test_orderly_suspend_retries_in_place_then_dead_letters_the_prefix(make_env: Any) -> None:
    env = make_env(mode=ConsumeMode.ORDERLY, max_reconsume_times=1, suspend_s=5)
    env.produce(b"a", b"b")
    env.consumer.pull()
    batch = env.consumer.next_batch()
    done = env.consumer.complete(batch.seq, SUSPEND)
    assert (done.kept, done.dead, done.offset) == ((1,), (), -1)  # nothing committed
    assert env.consumer.next_batch() is None  # suspended for 5 s
    env.clock.advance(5)
    again = env.consumer.next_batch()
    assert ids(again) == [1] and again.messages[0].reconsume_times == 1
    done = env.consumer.complete(again.seq, SUSPEND)  # used up: dead-lettered, committed
    assert (done.kept, done.dead, done.offset) == ((), ((1, 1),), 2)
    after = env.consumer.next_batch()
    assert ids(after) == [2] and after.messages[0].reconsume_times == 0


def test_wrong_results_unknown_batches_and_a_crashed_consumer_are_refused(
    make_env: Any,
) -> None:
    env = make_env()
    env.produce(b"a")
    env.consumer.pull()
    (batch,) = drain_batches(env.consumer)
    with pytest.raises(InvalidArgumentError):
        env.consumer.complete(batch.seq, SUSPEND)  # an orderly result
    with pytest.raises(InvalidArgumentError):
        env.consumer.complete(batch.seq + 1, OK)
    assert env.consumer.complete(batch.seq, OK).acked == (1,)  # the refusal changed nothing
    env.consumer.crash()
    with pytest.raises(NotServingError):
        env.consumer.pull()


def test_group_names_too_long_for_the_retry_topic_are_refused(make_env: Any, side: str) -> None:
    env = make_env()
    args: dict[str, Any] = {"group": "g" * 4090, "topic": "t", "config": env.config}
    args["clock"] = env.clock
    if side == "impl":
        args["path"] = env.tmp / "other"
    with pytest.raises(InvalidArgumentError):
        type(env.consumer)(env.mq, **args)
