"""Each property of ``conformance.stream.check.StreamChecker`` fires, under its anomaly
name, on an implementation outcome that breaks it, and stays quiet on the model's."""

from __future__ import annotations

from typing import Any

import pytest

from rmqsim.conformance.stream.check import StreamChecker, StreamViolation
from rmqsim.scenarios.queue.ops import Outcome
from rmqsim.scenarios.stream.ops import (
    INSERT,
    TIME_TICK,
    Broadcast,
    Consume,
    OpenConsumer,
    Seek,
    StreamMsg,
)

CHANNELS = ("ch0", "ch1")


def _msg(queue_id: int, end_ts: int, channel: str = "ch0", key: int = 0) -> tuple[Any, ...]:
    return (INSERT, queue_id, (queue_id,), end_ts, end_ts, channel, queue_id, (key,), b"")


def _pack(begin: int, end: int, msgs=(), starts=None, ends=None) -> tuple[Any, ...]:
    starts = starts or (("ch0", 1, begin), ("ch1", 1, begin))
    ends = ends or (("ch0", 5, end), ("ch1", 5, end))
    return (begin, end, tuple(msgs), starts, ends)


def _checker(tt: bool = True) -> StreamChecker:
    checker = StreamChecker(CHANNELS)
    checker.observe(OpenConsumer("c", tt, "g"), Outcome(), Outcome())
    return checker


def _consume(checker: StreamChecker, got: Any, want: Any = "same") -> None:
    want_value = got if want == "same" else want
    checker.observe(Consume("c"), Outcome(got), Outcome(want_value))


def _fires(anomaly: str, action) -> None:
    with pytest.raises(StreamViolation) as caught:
        action()
    assert caught.value.anomaly == anomaly


def test_a_good_sequence_of_packs_passes() -> None:
    checker = _checker()
    first = _pack(0, 100, [_msg(2, 50)])
    _consume(checker, first)
    _consume(checker, _pack(100, 200, [_msg(3, 150, "ch1", 1)], starts=first[4]))


def test_message_outside_pack() -> None:
    _fires("message-outside-pack", lambda: _consume(_checker(), _pack(0, 100, [_msg(2, 150)])))


def test_packs_not_chained() -> None:
    checker = _checker()
    first = _pack(0, 100)
    _consume(checker, first)
    _fires("packs-not-chained", lambda: _consume(checker, _pack(150, 200, starts=first[4])))
    _fires("packs-not-chained", lambda: _consume(_checker(), _pack(100, 100)))


def test_bad_position() -> None:
    checker = _checker()
    _consume(checker, _pack(0, 100))
    _fires("bad-position", lambda: _consume(checker, _pack(100, 200)))  # not the last end
    wrong_ts = (("ch0", 5, 90), ("ch1", 5, 100))
    _fires("bad-position", lambda: _consume(_checker(), _pack(0, 100, ends=wrong_ts)))
    one_channel = (("ch0", 5, 100),)
    _fires("bad-position", lambda: _consume(_checker(), _pack(0, 100, ends=one_channel)))


def _resumed() -> StreamChecker:
    checker = _checker()
    _consume(checker, _pack(0, 100, [_msg(2, 50)]))
    checker.observe(OpenConsumer("c", True, "g"), Outcome(), Outcome())
    checkpoint = (("ch0", 5, 100), ("ch1", 5, 100))
    checker.observe(Seek("c", checkpoint, True), Outcome(), Outcome())
    return checker


def test_repeated_and_lost_on_resume() -> None:
    again = _pack(100, 200, [_msg(2, 150)], starts=(("ch0", 5, 100), ("ch1", 5, 100)))
    _fires("repeated-on-resume", lambda: _consume(_resumed(), again))
    model = _pack(100, 200, [_msg(7, 150)], starts=(("ch0", 5, 100), ("ch1", 5, 100)))
    empty = _pack(100, 200, starts=(("ch0", 5, 100), ("ch1", 5, 100)))
    _fires("lost-on-resume", lambda: _consume(_resumed(), empty, model))
    _consume(_resumed(), model)


def test_pre_seek_delivered() -> None:
    checker = _checker(tt=False)
    checker.observe(Seek("c", (("ch0", 10, 0),), False), Outcome(), Outcome())
    plain = (50, 50, (_msg(10, 50),), (("ch0", 10, 50),), (("ch0", 10, 50),))
    _fires("pre-seek-delivered", lambda: _consume(checker, plain))
    later = (50, 50, (_msg(11, 50),), (("ch0", 11, 50),), (("ch0", 11, 50),))
    _consume(checker, later)


def test_wrong_channel() -> None:
    misrouted = _pack(0, 100, [_msg(2, 50, "ch0", key=1)])
    _fires("wrong-channel", lambda: _consume(_checker(), misrouted))


def test_broadcast_missed_channel() -> None:
    op = Broadcast("ticker", (StreamMsg(TIME_TICK, 0, 100, (0,)),))
    checker = _checker()
    checker.observe(op, Outcome((("ch0", (3,)), ("ch1", (4,)))), Outcome())
    _fires(
        "broadcast-missed-channel",
        lambda: checker.observe(op, Outcome((("ch0", (3,)),)), Outcome()),
    )


def test_stalled_delivery() -> None:
    _fires("stalled-delivery", lambda: _consume(_checker(), None, _pack(0, 100)))
    _consume(_checker(), None, None)
