"""The stream layer's operation cells (docs/STREAM.md "Operation cells"): each operation
of the stream contract crossed with the classes of its arguments (and, where it matters,
of the stream's state), counted as a run goes.

A cell is ``operation/class``: ``seek-plain/trimmed`` is a plain stream's seek naming a
position whose id retention removed. ``CellCounter.before(op)`` names the cells an
operation is in, from the model's queue just before the operation (the lockstep calls it
before the model applies the operation) and from what the model's outcomes told so far
(``after``); a seek of several positions is in the cell of each. The counts go into the
run's ``Stats.cells``; the gate merges them (``cells_summary``), says which cells stayed
empty (``cells_lines``) and steers runs of ``stream-steer`` at them
(``conformance.stream.gate_hooks``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MQError
from rmqsim.scenarios.queue.ops import Outcome, RunRetention
from rmqsim.scenarios.stream.ops import (
    Broadcast,
    Consume,
    CrashQueue,
    OpenConsumer,
    OpenProducer,
    PlainPosition,
    Produce,
    RecreateChannel,
    Seek,
    StreamOp,
)
from rmqsim.scenarios.stream.profiles import SEEK_CLASSES

__all__ = [
    "SEEK_POSITION_CLASSES",
    "STREAM_CELLS",
    "CellCounter",
    "cells_lines",
    "cells_summary",
    "steer_class",
]

#: What each class of a seek position means (the order of the table).
SEEK_POSITION_CLASSES: dict[str, str] = {
    "delivered": "a position the consumer was delivered (plain) or a checkpoint it was "
    "given (time-tick: a pack's end positions)",
    "undelivered": "a stored id the consumer was not delivered",
    "other-channel": "an id the consumer was delivered on another channel, named on this one",
    "earliest": "the channel's first stored id",
    "trimmed": "an id retention removed (below the first stored id, after the last re-create)",
    "recreated": "an id of the channel's earlier life, before it was destroyed and re-created",
    "unknown-channel": "a channel the stream does not consume (InvalidPosition)",
    "never-issued": "an id above the last the queue issued on the channel (InvalidPosition)",
}

_SUBSCRIBE = {
    f"{start}-{group}-group": f"as_consumer at {start.upper()}, the group "
    + ("on no channel yet" if group == "new" else "already on every channel")
    for start in ("earliest", "latest")
    for group in ("new", "existing")
}

#: Every cell, ``operation/class``, with what puts an operation in it (report order).
STREAM_CELLS: dict[str, str] = {
    "produce/default-repack": "produce by hash key, each DML row its own message",
    "produce/repack-func": "produce through a repack function (messages kept whole)",
    "broadcast/any": "broadcast to every producer channel",
    **{f"subscribe-plain/{c}": m for c, m in _SUBSCRIBE.items()},
    **{f"subscribe-tt/{c}": m for c, m in _SUBSCRIBE.items()},
    "consume-plain/any": "consume() of a plain stream",
    "consume-tt/any": "consume() of a time-tick stream",
    **{f"seek-plain/{c}": m for c, m in SEEK_POSITION_CLASSES.items()},
    **{f"seek-tt/{c}": m for c, m in SEEK_POSITION_CLASSES.items()},
    "seek-tt/after-consume": "a time-tick stream's seek after its first consume() "
    "(SeekAfterConsume)",
    "crash/any": "the whole process crashes (every stream is opened again)",
    "retention/any": "retention runs on the queue underneath",
    "recreate-channel/any": "a channel's topic is destroyed and created again underneath",
}


def steer_class(cell: str) -> str | None:
    """The class of ``SEEK_CLASSES`` (a ``stream-steer`` seed's focus) whose runs aim at
    ``cell``, or None when it is no seek cell."""
    kind, _, klass = cell.partition("/")
    if kind.startswith("seek-") and klass in SEEK_CLASSES:
        return klass
    return None


@dataclass(slots=True)
class _Consumer:
    tt: bool
    #: (channel, queue id) of what it was delivered, across restarts; its checkpoints'.
    delivered: set[tuple[str, int]] = field(default_factory=set)
    checkpoints: set[tuple[str, int]] = field(default_factory=set)
    #: Whether the stream now open has consumed (a time-tick stream's seek is refused).
    consumed: bool = False


class CellCounter:
    """Names the cells of each operation of one stream run (see the module's docstring)."""

    def __init__(self, queue: ReferenceMQ, channels: tuple[str, ...]) -> None:
        self.queue = queue
        self.channels = channels
        self.consumers: dict[str, _Consumer] = {}
        self.whole: set[str] = set()
        #: Per channel: the last id issued before it was last re-created.
        self.boundary: dict[str, int] = {}

    def before(self, op: StreamOp) -> list[str]:
        """The cells ``op`` is in, from the model's queue as it is now (before the model
        applies ``op``)."""
        if isinstance(op, RecreateChannel):
            peeked = self.queue.peek(op.channel, "")
            if peeked is not None:  # the ids of the channel's earlier life
                self.boundary[op.channel] = peeked[0]
        if isinstance(op, Produce):
            whole = op.producer in self.whole
            return ["produce/repack-func" if whole else "produce/default-repack"]
        if isinstance(op, OpenConsumer):
            return self._subscribe(op)
        if isinstance(op, Seek):
            return self._seek(op)
        if isinstance(op, Consume):
            consumer = self.consumers.get(op.consumer)
            if consumer is None:
                return []
            return ["consume-tt/any" if consumer.tt else "consume-plain/any"]
        simple = {Broadcast: "broadcast/any", CrashQueue: "crash/any",
                  RunRetention: "retention/any", RecreateChannel: "recreate-channel/any"}
        return [simple[type(op)]] if type(op) in simple else []  # fmt: skip

    def _subscribe(self, op: OpenConsumer) -> list[str]:
        held = [self._has_group(channel, op.group) for channel in self.channels]
        start = "latest" if op.latest else "earliest"
        kind = "subscribe-tt" if op.tt else "subscribe-plain"
        if all(held):
            return [f"{kind}/{start}-existing-group"]
        if not any(held):
            return [f"{kind}/{start}-new-group"]
        return []  # the group on some channels only (after a re-create): no cell of its own

    def _has_group(self, channel: str, group: str) -> bool:
        try:
            return self.queue.exist_consumer_group(channel, group) is True
        except MQError:
            return False

    def _seek(self, op: Seek) -> list[str]:
        consumer = self.consumers.get(op.consumer)
        if consumer is None:
            return []
        kind = "seek-tt" if consumer.tt else "seek-plain"
        if consumer.tt and consumer.consumed:
            return [f"{kind}/after-consume"]
        found = [f"{kind}/{klass}" for p in op.positions for klass in self._classes(consumer, p)]
        return list(dict.fromkeys(found))

    def _classes(self, consumer: _Consumer, position: PlainPosition) -> list[str]:
        """The classes of one position (``SEEK_POSITION_CLASSES``)."""
        channel, queue_id, _ts = position
        peeked = self.queue.peek(channel, "") if channel in self.channels else None
        if peeked is None:
            return ["unknown-channel"]
        last_id, first, _ = peeked
        if queue_id > last_id:
            return ["never-issued"]
        if queue_id <= self.boundary.get(channel, 0):
            return ["recreated"]
        if first is None or queue_id < first:
            return ["trimmed"]
        held = consumer.checkpoints if consumer.tt else consumer.delivered
        found = ["earliest"] if queue_id == first else []
        if (channel, queue_id) in held:
            return [*found, "delivered"]
        found.append("undelivered")
        if any(c != channel and q == queue_id for c, q in held):
            found.append("other-channel")
        return found

    def after(self, op: StreamOp, want: Outcome) -> None:
        """Learn from the model's outcome of ``op`` (after it was applied)."""
        if isinstance(op, OpenProducer) and want.error is None:
            (self.whole.add if op.whole else self.whole.discard)(op.producer)
        elif isinstance(op, OpenConsumer) and want.error is None:
            known = self.consumers.get(op.consumer)
            if known is None or known.tt != op.tt:
                known = self.consumers[op.consumer] = _Consumer(op.tt)
            known.consumed = False
        elif isinstance(op, Consume) and op.consumer in self.consumers:
            self._consumed(self.consumers[op.consumer], want)

    def _consumed(self, consumer: _Consumer, want: Outcome) -> None:
        consumer.consumed = True
        pack: Any = want.value
        if want.error is not None or pack is None:
            return
        consumer.delivered.update((msg[5], msg[6]) for msg in pack[2])
        if consumer.tt:
            consumer.checkpoints.update((p[0], p[1]) for p in pack[4])


def cells_summary(counts: Iterable[Mapping[str, int]], runs: int) -> dict[str, Any]:
    """``summary.json``'s ``stream_coverage``: the cells of the stream runs whose counts
    are ``counts`` (one mapping per run), how many are hit, and which never were."""
    merged: Counter[str] = Counter()
    for count in counts:
        merged.update(count)
    never = [cell for cell in STREAM_CELLS if not merged[cell]]
    return {
        "runs": runs,
        "cells": {"reachable": len(STREAM_CELLS), "hit": len(STREAM_CELLS) - len(never)},
        "never_hit": never,
        "counts": {cell: merged[cell] for cell in STREAM_CELLS},
    }


def cells_lines(summary: Mapping[str, Any], steered: int = 0) -> list[str]:
    """The printed summary's lines about the stream cells (``cells_summary``'s entry)."""
    cells = summary["cells"]
    steering = f", {steered} steered" if steered else ""
    lines = [
        f"stream cells ({summary['runs']} runs{steering}): {cells['hit']} of "
        f"{cells['reachable']} operation/argument cells hit"
    ]
    if summary["never_hit"]:
        lines.append("stream cells never hit: " + ", ".join(summary["never_hit"]))
    return lines
