"""What a stream run checks besides equality with the model (docs/STREAM.md): properties of
the implementation's own outcomes, each named after what breaks, so that a failure says
more than "the values differ". ``StreamChecker.observe(op, got, want)`` sees every step's
implementation outcome (and the model's) and raises ``StreamViolation``.

Outcomes are plain data (``scenarios.stream.ops``): a pack is ``(begin_ts, end_ts, msgs,
start_positions, end_positions)``, a message ``(msg_type, msg_id, row_ids, begin_ts, end_ts,
channel, queue_id, hash_keys, payload)``, a position ``(channel, queue_id, timestamp)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqsim.scenarios.queue.ops import Outcome
from rmqsim.scenarios.stream.ops import (
    DELETE,
    INSERT,
    Broadcast,
    Consume,
    CrashQueue,
    OpenConsumer,
    Seek,
    StreamOp,
)

__all__ = [
    "STREAM_ANOMALIES",
    "StreamChecker",
    "StreamViolation",
    "describe_outcomes",
    "describe_states",
]

STREAM_ANOMALIES: dict[str, str] = {
    "stream-mismatch": "the implementation returned another value or error than the model",
    "stream-state-mismatch": "a stream's state (ticks, buffers, positions, dropped and "
    "ignored ids) differs from the model's",
    "message-outside-pack": "a time-tick pack holds a message whose end ts is not in the "
    "pack's (begin_ts, end_ts]",
    "packs-not-chained": "a time-tick pack does not begin where the previous one ended, or "
    "its interval is empty or goes back",
    "bad-position": "a pack's start or end positions do not say where it resumes: not one "
    "per channel, not the previous pack's end or the position sought, or another timestamp",
    "lost-on-resume": "after resuming from a checkpoint, a message the model delivers is missing",
    "repeated-on-resume": "after resuming from a checkpoint, a message delivered before the "
    "checkpoint is delivered again",
    "pre-seek-delivered": "after a seek, a plain stream delivers a message from before the "
    "position sought",
    "wrong-channel": "a DML row was delivered on another channel than its hash key's",
    "broadcast-missed-channel": "a broadcast did not write every message to every channel",
    "stalled-delivery": "consume() delivered nothing although the model delivers a pack: "
    "every channel has passed a tick",
}


class StreamViolation(Exception):
    """A property broken: ``anomaly`` is a key of ``STREAM_ANOMALIES``."""

    def __init__(self, anomaly: str, detail: str) -> None:
        assert anomaly in STREAM_ANOMALIES, anomaly
        super().__init__(f"{anomaly}: {detail}")
        self.anomaly = anomaly
        self.detail = detail


Position = tuple[str, int, int]


@dataclass
class _Consumer:
    """What the checker follows of one consumer's stream since it was opened."""

    tt: bool
    #: Time-tick: the last pack's end ts and end positions, the positions sought.
    last_end: int | None = None
    last_ends: tuple[Position, ...] | None = None
    sought: tuple[Position, ...] | None = None
    #: Whether the stream resumed from a checkpoint and has not delivered since.
    resumed: bool = False
    #: (channel, queue id) of every message this consumer delivered, across restarts.
    delivered: set[tuple[str, int]] = field(default_factory=set)
    #: Plain: per channel, the smallest queue id the seek allows next.
    floors: dict[str, int] = field(default_factory=dict)


class StreamChecker:
    """The properties of one run's implementation outcomes (see the module's docstring)."""

    def __init__(self, channels: tuple[str, ...]) -> None:
        self.channels = channels
        self.consumers: dict[str, _Consumer] = {}
        #: Every consumer's lifetime deliveries survive its restarts.
        self.history: dict[str, set[tuple[str, int]]] = {}
        #: Every time-tick consumer's checkpoints (end positions of its packs), across
        #: restarts: a seek to one is a resume; a seek elsewhere is not.
        self.checkpoints: dict[str, set[tuple[Position, ...]]] = {}

    def observe(self, op: StreamOp, got: Outcome, want: Outcome) -> None:
        """Check the implementation's outcome ``got`` of ``op`` (``want``: the model's)."""
        if isinstance(op, OpenConsumer) and got.error is None:
            history = self.history.setdefault(op.consumer, set())
            self.consumers[op.consumer] = _Consumer(op.tt, delivered=history)
        elif isinstance(op, CrashQueue):
            self.consumers.clear()
        elif isinstance(op, Seek) and got.error is None and op.consumer in self.consumers:
            self._sought(self.consumers[op.consumer], op, self.checkpoints.get(op.consumer))
        elif isinstance(op, Broadcast) and got.error is None:
            self._broadcast(op, got.value)
        elif isinstance(op, Consume) and op.consumer in self.consumers and got.error is None:
            consumer = self.consumers[op.consumer]
            self._consumed(consumer, got.value, want)
            if consumer.tt:
                known = self.checkpoints.setdefault(op.consumer, set())
                for outcome in (got, want):
                    pack: Any = outcome.value
                    if outcome.error is None and pack is not None:
                        known.add(tuple(pack[4]))

    # ----------------------------------------------------------------- writes

    def _broadcast(self, op: Broadcast, value: Any) -> None:
        written = dict(value)
        missing = [c for c in self.channels if len(written.get(c, ())) != len(op.msgs)]
        if missing:
            raise StreamViolation(
                "broadcast-missed-channel",
                f"{len(op.msgs)} messages broadcast, channel(s) {', '.join(missing)} got "
                f"{[len(written.get(c, ())) for c in missing]}",
            )

    # ----------------------------------------------------------------- seeks

    def _sought(
        self, consumer: _Consumer, op: Seek, checkpoints: set[tuple[Position, ...]] | None
    ) -> None:
        """A time-tick seek is a resume from a checkpoint (the resume properties hold for
        its first pack) when it goes to one of the consumer's checkpoints, or when the
        consumer was given none yet (a shrunk trace may keep a seek without the packs it
        came from); a seek elsewhere (the earliest id, an undelivered one...) is not."""
        if consumer.tt:
            consumer.sought = op.positions
            consumer.resumed = bool(op.positions) and (
                not checkpoints or op.positions in checkpoints
            )
            return
        for channel, queue_id, _ts in op.positions:
            consumer.floors[channel] = queue_id if op.include_current else queue_id + 1

    # ----------------------------------------------------------------- deliveries

    def _consumed(self, consumer: _Consumer, pack: Any, want: Outcome) -> None:
        expected: Any = want.value
        if pack is None:
            if expected is not None and consumer.tt:
                raise StreamViolation(
                    "stalled-delivery",
                    f"consume() returned None where the model delivers the pack "
                    f"({expected[0]}, {expected[1]}]",
                )
            return
        msgs = pack[2]
        for msg in msgs:
            self._routed(msg)
        if consumer.tt:
            self._tt_pack(consumer, pack, want)
        else:
            self._plain_msg(consumer, msgs[0])
        consumer.delivered.update((msg[5], msg[6]) for msg in msgs)

    def _routed(self, msg: Any) -> None:
        msg_type, _id, rows, _b, _e, channel, _q, keys, _p = msg
        if msg_type in (INSERT, DELETE) and len(rows) == 1:
            expected = self.channels[keys[0] % len(self.channels)]
            if channel != expected:
                raise StreamViolation(
                    "wrong-channel",
                    f"row {rows[0]} with hash key {keys[0]} delivered on {channel}, its key's "
                    f"channel is {expected}",
                )

    def _plain_msg(self, consumer: _Consumer, msg: Any) -> None:
        channel, queue_id = msg[5], msg[6]
        floor = consumer.floors.get(channel)
        if floor is not None and queue_id < floor:
            raise StreamViolation(
                "pre-seek-delivered",
                f"queue id {queue_id} on {channel} delivered after a seek to deliver from "
                f"{floor} on",
            )

    def _tt_pack(self, consumer: _Consumer, pack: Any, want: Outcome) -> None:
        begin_ts, end_ts, msgs, starts, ends = pack
        if end_ts <= begin_ts or (consumer.last_end is not None and begin_ts != consumer.last_end):
            raise StreamViolation(
                "packs-not-chained",
                f"pack ({begin_ts}, {end_ts}] after a pack that ended at {consumer.last_end}",
            )
        for msg in msgs:
            if not begin_ts < msg[4] <= end_ts:
                raise StreamViolation(
                    "message-outside-pack",
                    f"message {msg[1]} (queue id {msg[6]} on {msg[5]}) ends at {msg[4]}, "
                    f"outside the pack ({begin_ts}, {end_ts}]",
                )
        self._positions(consumer, starts, ends, end_ts)
        if consumer.resumed:
            self._resumed(consumer, msgs, want)
        consumer.last_end, consumer.last_ends, consumer.resumed = end_ts, ends, False
        consumer.sought = None

    def _positions(self, consumer: _Consumer, starts: Any, ends: Any, end_ts: int) -> None:
        names = [p[0] for p in ends]
        if [p[0] for p in starts] != list(self.channels) or names != list(self.channels):
            raise StreamViolation("bad-position", f"positions name {names}, not {self.channels}")
        if any(p[2] != end_ts for p in ends):
            raise StreamViolation("bad-position", f"end positions {ends} are not at {end_ts}")
        previous = consumer.last_ends
        if previous is not None and tuple(starts) != tuple(previous):
            raise StreamViolation(
                "bad-position", f"start positions {starts} are not the last end {previous}"
            )
        if consumer.sought is not None:
            sought = {p[0]: p for p in consumer.sought}
            wrong = [p for p in starts if p[0] in sought and p != sought[p[0]]]
            if wrong:
                raise StreamViolation(
                    "bad-position", f"after a seek to {consumer.sought} the pack starts at {starts}"
                )

    def _resumed(self, consumer: _Consumer, msgs: Any, want: Outcome) -> None:
        again = [m for m in msgs if (m[5], m[6]) in consumer.delivered]
        if again:
            raise StreamViolation(
                "repeated-on-resume",
                f"queue id {again[0][6]} on {again[0][5]} was delivered before the checkpoint",
            )
        expected: Any = want.value
        if expected is None:
            return
        got_ids = {(m[5], m[6]) for m in msgs}
        lost = [m for m in expected[2] if (m[5], m[6]) not in got_ids]
        if lost:
            raise StreamViolation(
                "lost-on-resume",
                f"queue id {lost[0][6]} on {lost[0][5]} (message {lost[0][1]}) is missing from "
                "the first pack after the resume",
            )


def _ids(pack: Any) -> list[tuple[str, int]]:
    return [(msg[5], msg[6]) for msg in pack[2]]


def describe_outcomes(want: Outcome, got: Outcome) -> str:
    """What differs between the model's outcome and the implementation's, in one line."""
    if want.error is not None or got.error is not None:
        return f"model {want.error or 'returned'}, implementation {got.error or 'returned'}"
    expected: Any = want.value
    actual: Any = got.value
    is_pack = type(expected) is tuple and len(expected) == 5 and type(actual) is tuple
    if is_pack and len(actual) == 5:
        missing = [i for i in _ids(expected) if i not in _ids(actual)]
        extra = [i for i in _ids(actual) if i not in _ids(expected)]
        if missing or extra:
            return f"pack ({expected[0]}, {expected[1]}]: missing {missing[:5]}, extra {extra[:5]}"
        return f"pack ({expected[0]}, {expected[1]}] vs ({actual[0]}, {actual[1]}]: {actual!r:.300}"
    return f"model {expected!r:.300}, implementation {actual!r:.300}"


def describe_states(name: str, want: Any, got: Any) -> str:
    """The first field of two stream states (``StreamState``) that differs."""
    if got is None:
        return f"stream {name}: the implementation has no such stream"
    for field_name in ("kind", "closed", "producer_channels", "last_tick", "packs_delivered"):
        if getattr(want, field_name) != getattr(got, field_name):
            return (
                f"stream {name}: {field_name} model {getattr(want, field_name)!r:.200}, "
                f"implementation {getattr(got, field_name)!r:.200}"
            )
    for model_channel, sut_channel in zip(want.channels, got.channels, strict=False):
        for field_name in model_channel.__slots__:
            mine, theirs = getattr(model_channel, field_name), getattr(sut_channel, field_name)
            if mine != theirs:
                return (
                    f"stream {name}, channel {model_channel.channel}: {field_name} model "
                    f"{mine!r:.200}, implementation {theirs!r:.200}"
                )
    return f"stream {name}: channels model {len(want.channels)}, implementation {len(got.channels)}"
