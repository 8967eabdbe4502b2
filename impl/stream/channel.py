"""``ChannelReader``: one consumed channel of a stream, read through its consumer group.

The reader takes one queue message at a time (``mq.consume(channel, group, 1)``), so the
group always stands just after the last message the stream read, passes over ids below its
floor (set by a seek), and keeps the undecodable ones aside. What it read and has not
delivered is in its lists; ``state()`` is their frozen view (``ChannelState``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rmqsim.impl.stream.codec import RecordError, unpack_record
from rmqsim.model.api import MessageQueue
from rmqsim.model.stream.api import ChannelState, MsgPosition, TsMsg

__all__ = ["ChannelReader", "Read"]

#: One message read from a channel: its queue id and the decoded message.
Read = tuple[int, TsMsg]


@dataclass(slots=True, eq=False)
class ChannelReader:
    """What a stream holds for one channel (see ``ChannelState`` for each field)."""

    name: str
    group: str
    tick: int
    position: MsgPosition | None = None
    #: The smallest queue id delivered (ids below it were before the position sought).
    floor_id: int = 0
    #: The queue id of the last message read since the last seek (None: none yet).
    last_read_id: int | None = None
    pending: deque[Read] = field(default_factory=deque)
    dropped_ids: list[int] = field(default_factory=list)
    ignored_tick_ids: list[int] = field(default_factory=list)
    duplicate_ids: list[int] = field(default_factory=list)
    undecodable_ids: list[int] = field(default_factory=list)

    def next_message(self, mq: MessageQueue) -> Read | None:
        """The next stored message at or above the floor, decoded; None if none is stored."""
        while got := mq.consume(self.name, self.group, 1):
            stored = got[0]
            if stored.msg_id < self.floor_id:
                continue
            self.last_read_id = stored.msg_id
            try:
                return stored.msg_id, unpack_record(stored.payload)
            except RecordError:
                self.undecodable_ids.append(stored.msg_id)
        return None

    def restart_at(self, mq: MessageQueue, queue_id: int, floor_id: int) -> None:
        """Read again from ``queue_id`` (the queue passes missing ids over), delivering
        nothing below ``floor_id``."""
        mq.seek(self.name, self.group, queue_id)
        self.floor_id = floor_id
        self.last_read_id = None

    def at(self, queue_id: int, timestamp: int) -> MsgPosition:
        """A position in this channel."""
        return MsgPosition.at(self.name, queue_id, self.group, timestamp)

    def state(self) -> ChannelState:
        return ChannelState(
            channel=self.name,
            group=self.group,
            tick=self.tick,
            position=self.position,
            min_queue_id=self.floor_id,
            buffered_ids=tuple(queue_id for queue_id, _ in self.pending),
            dropped_ids=tuple(self.dropped_ids),
            ignored_tick_ids=tuple(self.ignored_tick_ids),
            duplicate_ids=tuple(self.duplicate_ids),
            undecodable_ids=tuple(self.undecodable_ids),
        )
