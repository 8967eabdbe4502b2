"""A deterministic script that exercises every operation of ``RocksMQ``, for the
crash-point sweep and the reopen tests.

Each step is ``(name, action)`` where ``action(mq, clock)`` runs one queue operation (and
may first move the clock). With the ``CONFIG`` below the script closes pages, acks them
through consume, seek, seek_to_latest and destroying a lagging group, deletes through both
retention passes, and destroys and re-creates a topic whose ids must continue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqsim.model.api import MQConfig, ProducerMessage

#: Pages close after 10 bytes; acked pages live 5 s.
CONFIG = MQConfig(page_size_bytes=10, retention_time_s=5, retention_size_bytes=-1)
START_S = 1_000


class ScriptClock:
    """The script's clock: steps set it; every read returns the current value."""

    def __init__(self, now: int = START_S) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def pm(payload: bytes, **properties: str) -> ProducerMessage:
    return ProducerMessage(payload, dict(properties))


def _at(seconds: int, action: Callable[[Any], Any]) -> Callable[[Any, ScriptClock], Any]:
    def step(mq: Any, clock: ScriptClock) -> Any:
        clock.now = seconds
        return action(mq)

    return step


def _now(action: Callable[[Any], Any]) -> Callable[[Any, ScriptClock], Any]:
    return lambda mq, clock: action(mq)


Step = tuple[str, Callable[[Any, ScriptClock], Any]]

STEPS: list[Step] = [
    ("create_topic a", _now(lambda mq: mq.create_topic("a"))),
    ("create_topic b", _now(lambda mq: mq.create_topic("b"))),
    ("create_topic a again", _now(lambda mq: mq.create_topic("a"))),
    ("create_consumer_group a/g1", _now(lambda mq: mq.create_consumer_group("a", "g1"))),
    ("create_consumer_group a/g2", _now(lambda mq: mq.create_consumer_group("a", "g2"))),
    (
        "produce a x4 (closes page 3)",
        _now(
            lambda mq: mq.produce(
                "a",
                [
                    pm(b"x" * 6),
                    pm(b"", kind="empty", ü="ünïcode ✓"),
                    pm(b"y" * 6, k=""),
                    pm(b"\x00\xff\x01\x02\x03"),
                ],
            )
        ),
    ),
    ("produce b x1 (closes page 1)", _now(lambda mq: mq.produce("b", [pm(b"z" * 11)]))),
    ("produce a []", _now(lambda mq: mq.produce("a", []))),
    ("consume a/g1 2", _now(lambda mq: mq.consume("a", "g1", 2))),
    ("seek a/g2 4", _now(lambda mq: mq.seek("a", "g2", 4))),
    ("seek_to_latest a/g1 (acks page 3)", _at(1_010, lambda mq: mq.seek_to_latest("a", "g1"))),
    ("consume a/g2 10", _now(lambda mq: mq.consume("a", "g2", 10))),
    ("consume a/g2 10 (nothing)", _now(lambda mq: mq.consume("a", "g2", 10))),
    ("produce a 20B (closes page 5)", _at(1_020, lambda mq: mq.produce("a", [pm(b"w" * 20)]))),
    ("run_retention (time pass: page 3)", _at(1_100, lambda mq: mq.run_retention())),
    ("create_consumer_group b/gb", _now(lambda mq: mq.create_consumer_group("b", "gb"))),
    ("consume b/gb 1 (acks b page 1)", _now(lambda mq: mq.consume("b", "gb", 1))),
    ("create_consumer_group a/g3", _now(lambda mq: mq.create_consumer_group("a", "g3"))),
    ("consume a/g1 10", _now(lambda mq: mq.consume("a", "g1", 10))),
    ("consume a/g2 10", _now(lambda mq: mq.consume("a", "g2", 10))),
    (
        "destroy_consumer_group a/g3 (acks page 5)",
        _at(1_200, lambda mq: mq.destroy_consumer_group("a", "g3")),
    ),
    ("destroy_consumer_group a/absent", _now(lambda mq: mq.destroy_consumer_group("a", "nope"))),
    ("seek a/g1 999 (not retained: -1)", _now(lambda mq: mq.seek("a", "g1", 999))),
    ("get_latest_msg a", _now(lambda mq: mq.get_latest_msg("a"))),
    ("exist_consumer_group a/g1", _now(lambda mq: mq.exist_consumer_group("a", "g1"))),
    ("destroy_topic b", _now(lambda mq: mq.destroy_topic("b"))),
    ("create_topic b (re-create)", _now(lambda mq: mq.create_topic("b"))),
    ("produce b (ids continue)", _now(lambda mq: mq.produce("b", [pm(b"again", n="2")]))),
    ("run_retention (time pass: page 5)", _at(2_000, lambda mq: mq.run_retention())),
    ("run_retention (nothing)", _now(lambda mq: mq.run_retention())),
    ("seek_to_latest a/g2 (nothing retained: 0)", _now(lambda mq: mq.seek_to_latest("a", "g2"))),
    ("produce a x2", _now(lambda mq: mq.produce("a", [pm(b"v" * 3), pm(b"u" * 4)]))),
    ("consume a/g1 1 (from earliest)", _now(lambda mq: mq.consume("a", "g1", 1))),
]
