"""The deterministic streams: ``PlainStream`` and ``TtStream`` over any ``MessageQueue``.

Nothing here starts a thread or waits: ``consume()`` reads what the queue holds now and
returns a pack or ``None``. The simulation steps these streams directly; ``threaded``
wraps ``TtStream`` with a reader thread per channel. The rules are docs/STREAM.md; each
decision a stream takes is a small method, so that a variant (a seeded bug) overrides one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from rmqsim.impl.stream.channel import ChannelReader, Read
from rmqsim.impl.stream.codec import pack_record
from rmqsim.impl.stream.routing import Buckets, by_hash_key, by_repack_func
from rmqsim.model.api import (
    InvalidArgumentError,
    MessageQueue,
    ProducerMessage,
    TopicNotFoundError,
    validate_name,
)
from rmqsim.model.stream.api import (
    DML_TYPES,
    MAX_MSG_ID,
    InvalidPositionError,
    MsgPack,
    MsgPosition,
    MsgType,
    NoProducerError,
    NotSubscribedError,
    RepackFunc,
    SeekAfterConsumeError,
    StreamClosedError,
    StreamKind,
    StreamState,
    SubscriptionPosition,
    TsMsg,
    validate_channels,
    validate_pack,
    validate_positions,
)

__all__ = ["PlainStream", "StreamBase", "TtStream", "last_issued_id"]


def last_issued_id(mq: MessageQueue, channel: str) -> int:
    """The highest id the queue ever gave on ``channel`` (``TopicNotFoundError`` if the
    channel is gone). Uses ``snapshot(topics=..., messages_from=...)`` where the queue
    offers that extension (``impl.RocksMQ``), so that no message is read."""
    try:
        state = mq.snapshot(topics=[channel], messages_from={channel: MAX_MSG_ID})  # type: ignore[call-arg]  # RocksMQ's extension
    except TypeError:  # a queue with the protocol's snapshot() only
        state = mq.snapshot()
    topic = state.topics.get(channel)
    if topic is None:
        raise TopicNotFoundError(f"channel {channel!r} no longer exists")
    return topic.last_id


class StreamBase:
    """Producing, subscribing and the checks both streams share.

    Hooks a subclass may override (the stream layer's seeded bugs,
    ``conformance.mutants.stream``, are such subclasses):

    - ``buckets(msgs)``: which producer channel (by index) gets which messages of a pack;
    - ``send_to_channel(channel, msgs)``: write messages to one channel, their ids back;
    - ``subscribe_channel(name, group, initial_position)``: start reading one channel;
    - ``apply_seek(positions, ...)`` (each stream's): move the channels to checked positions.
    """

    kind: StreamKind

    def __init__(self, mq: MessageQueue) -> None:
        self.mq = mq
        self.closed = False
        self.producer_channels: tuple[str, ...] = ()
        self.repack_func: RepackFunc | None = None
        self.readers: dict[str, ChannelReader] = {}
        self.last_tick = 0
        self.packs_delivered = 0

    def _open(self) -> None:
        if self.closed:
            raise StreamClosedError("the stream is closed")

    def _subscribed(self) -> list[ChannelReader]:
        if not self.readers:
            raise NotSubscribedError("consume before as_consumer: the stream reads no channel")
        return list(self.readers.values())

    # ----------------------------------------------------------------- producing

    def as_producer(self, channels: Sequence[str]) -> None:
        self._open()
        names = validate_channels("producer", channels)
        for name in names:
            self.mq.create_topic(name)
        self.producer_channels += tuple(n for n in names if n not in self.producer_channels)

    def set_repack_func(self, repack_func: RepackFunc | None) -> None:
        self._open()
        if repack_func is not None and not callable(repack_func):
            raise InvalidArgumentError("the repack function must be callable or None")
        self.repack_func = repack_func

    def send_to_channel(self, channel: str, msgs: Sequence[TsMsg]) -> list[int]:
        return self.mq.produce(channel, [ProducerMessage(pack_record(msg)) for msg in msgs])

    def buckets(self, msgs: tuple[TsMsg, ...]) -> Buckets:
        count = len(self.producer_channels)
        if self.repack_func is None:
            return by_hash_key(msgs, count)
        return by_repack_func(self.repack_func, msgs, count)

    def produce(self, pack: MsgPack) -> dict[str, list[int]]:
        self._open()
        msgs = validate_pack(pack, need_keys=True)
        if not self.producer_channels:
            raise NoProducerError("produce before as_producer: no channel to write to")
        written: dict[str, list[int]] = {}
        for bucket, bucket_msgs in sorted(self.buckets(msgs).items()):
            if bucket_msgs:
                channel = self.producer_channels[bucket]
                written[channel] = self.send_to_channel(channel, bucket_msgs)
        return written

    def broadcast(self, pack: MsgPack) -> dict[str, list[int]]:
        self._open()
        msgs = validate_pack(pack, need_keys=False)
        if not self.producer_channels:
            raise NoProducerError("broadcast before as_producer: no channel to write to")
        return {channel: self.send_to_channel(channel, msgs) for channel in self.producer_channels}

    # ----------------------------------------------------------------- subscribing

    def as_consumer(
        self,
        channels: Sequence[str],
        group: str,
        initial_position: SubscriptionPosition = SubscriptionPosition.EARLIEST,
    ) -> None:
        self._open()
        names = validate_channels("consumer", channels)
        validate_name("group", group)
        if not isinstance(initial_position, SubscriptionPosition):
            raise InvalidArgumentError(
                f"initial_position must be a SubscriptionPosition, got {initial_position!r}"
            )
        for name in names:
            if name not in self.readers:
                self.subscribe_channel(name, group, initial_position)

    def subscribe_channel(
        self, name: str, group: str, initial_position: SubscriptionPosition
    ) -> None:
        self.mq.create_topic(name)
        if not self.mq.exist_consumer_group(name, group):
            self.mq.create_consumer_group(name, group)
        if initial_position is SubscriptionPosition.LATEST:
            self.mq.seek_to_latest(name, group)
        self.readers[name] = ChannelReader(name, group, tick=self.last_tick)

    def get_latest_msg_id(self, channel: str) -> int:
        self._open()
        if channel not in self.readers:
            raise NotSubscribedError(f"channel {channel!r} is not consumed by this stream")
        return self.mq.get_latest_msg(channel)

    def _checked_positions(
        self, positions: Sequence[MsgPosition], include_current: object
    ) -> tuple[MsgPosition, ...]:
        """Validated positions (arguments first, then that every id was issued)."""
        checked = validate_positions(positions, tuple(self.readers))
        if not isinstance(include_current, bool):
            raise InvalidArgumentError("include_current must be a bool")
        return checked

    def _check_issued(self, positions: Sequence[MsgPosition]) -> None:
        for position in positions:
            last_id = last_issued_id(self.mq, position.channel)
            if position.queue_id > last_id:
                raise InvalidPositionError(
                    f"id {position.queue_id} was never issued on channel {position.channel!r} "
                    f"(its last id is {last_id})"
                )

    # ----------------------------------------------------------------- life cycle

    def close(self) -> None:
        self.closed = True

    def snapshot(self) -> StreamState:
        return StreamState(
            kind=self.kind,
            closed=self.closed,
            producer_channels=self.producer_channels,
            channels=tuple(reader.state() for reader in self.readers.values()),
            last_tick=self.last_tick,
            packs_delivered=self.packs_delivered,
        )


class PlainStream(StreamBase):
    """One message per pack; channels taken in turn after the last delivery's.

    Hooks: those of ``StreamBase``, with ``apply_seek(positions, include_current)``."""

    kind = StreamKind.PLAIN

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self.turn = 0  # the subscription index consume() tries first

    def consume(self) -> MsgPack | None:
        self._open()
        readers = self._subscribed()
        for index in [*range(self.turn, len(readers)), *range(self.turn)]:
            read = readers[index].next_message(self.mq)
            if read is not None:
                self.turn = (index + 1) % len(readers)
                return self._deliver(readers[index], read)
        return None

    def _deliver(self, reader: ChannelReader, read: Read) -> MsgPack:
        queue_id, msg = read
        position = reader.at(queue_id, msg.begin_ts)
        reader.position = position
        self.packs_delivered += 1
        delivered = TsMsg(
            msg.msg_type, msg.msg_id, msg.timestamp, msg.hash_keys, msg.payload, msg.rows, position
        )
        return MsgPack((delivered,), msg.begin_ts, msg.end_ts, (position,), (position,))

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = False) -> None:
        self._open()
        checked = self._checked_positions(positions, include_current)
        self._check_issued(checked)
        self.apply_seek(checked, include_current)

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        """Every position: its channel next delivers from the id (inclusive) or after it."""
        for position in positions:
            reader = self.readers[position.channel]
            first_id = position.queue_id if include_current else position.queue_id + 1
            reader.restart_at(self.mq, position.queue_id, first_id)
            reader.position = position


class TtStream(StreamBase):
    """Packs of the interval between the last pack's end and the smallest channel tick.

    Hooks: those of ``StreamBase``, with ``apply_seek(positions)``, and each decision of
    packing: ``file``, ``raises_tick``, ``is_late``, ``fill``, ``fill_lagging``, ``cut``,
    ``in_pack``, ``is_retry``, ``resume_id`` and ``take_from(reader, end_ts)`` (a channel's
    part of the pack)."""

    kind = StreamKind.TIME_TICK

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self.consumed = False

    # ----------------------------------------------------------------- reading

    def file(self, reader: ChannelReader, read: Read) -> None:
        """Tick, drop or buffer one message read from ``reader``'s channel."""
        queue_id, msg = read
        if reader.position is None:  # the channel's first read: its start position
            reader.position = reader.at(queue_id, self.last_tick)
        if msg.msg_type == MsgType.TIME_TICK:
            if self.raises_tick(reader, msg.timestamp):
                reader.tick = msg.timestamp
            else:
                reader.ignored_tick_ids.append(queue_id)
        elif self.is_late(reader, msg):
            reader.dropped_ids.append(queue_id)
        else:
            reader.pending.append(read)

    def raises_tick(self, reader: ChannelReader, tick: int) -> bool:
        return tick > reader.tick

    def is_late(self, reader: ChannelReader, msg: TsMsg) -> bool:
        return msg.end_ts <= reader.tick

    def fill(self, reader: ChannelReader, last_tick: int) -> None:
        """Read ``reader``'s channel until its tick passes ``last_tick`` or nothing more is
        stored (what each reader thread of the threaded stream runs)."""
        while reader.tick <= last_tick:
            read = reader.next_message(self.mq)
            if read is None:
                return
            self.file(reader, read)

    def fill_lagging(self, readers: list[ChannelReader]) -> None:
        """Fill every channel whose tick is not past the last pack's end."""
        for reader in readers:
            if reader.tick <= self.last_tick:
                self.fill(reader, self.last_tick)

    # ----------------------------------------------------------------- packs

    def consume(self) -> MsgPack | None:
        self._open()
        readers = self._subscribed()
        self.consumed = True
        self.fill_lagging(readers)
        end_ts = self.cut(readers)
        return None if end_ts is None else self._pack(readers, end_ts)

    def cut(self, readers: list[ChannelReader]) -> int | None:
        """The end of the next pack: the smallest tick, once every tick passed the last end."""
        lowest = min(reader.tick for reader in readers)
        return lowest if lowest > self.last_tick else None

    def in_pack(self, msg: TsMsg, end_ts: int) -> bool:
        return msg.end_ts <= end_ts

    def is_retry(self, msg: TsMsg, taken: set[TsMsg]) -> bool:
        """A DML message equal to one the pack already holds from this channel."""
        return msg.msg_type in DML_TYPES and msg in taken

    def resume_id(self, reader: ChannelReader) -> int | None:
        """Where the channel resumes: its first buffered message, else its last read."""
        return reader.pending[0][0] if reader.pending else reader.last_read_id

    def take_from(self, reader: ChannelReader, end_ts: int) -> list[TsMsg]:
        """The channel's part of the pack; what is above ``end_ts`` stays buffered."""
        kept: deque[Read] = deque()
        taken: set[TsMsg] = set()
        out: list[TsMsg] = []
        for queue_id, msg in reader.pending:
            if not self.in_pack(msg, end_ts):
                kept.append((queue_id, msg))
            elif self.is_retry(msg, taken):
                reader.duplicate_ids.append(queue_id)
            else:
                taken.add(msg)
                at = reader.at(queue_id, msg.begin_ts)
                out.append(
                    TsMsg(
                        msg.msg_type,
                        msg.msg_id,
                        msg.timestamp,
                        msg.hash_keys,
                        msg.payload,
                        msg.rows,
                        at,
                    )
                )
        reader.pending = kept
        return out

    def _pack(self, readers: list[ChannelReader], end_ts: int) -> MsgPack:
        msgs: list[TsMsg] = []
        starts: list[MsgPosition] = []
        ends: list[MsgPosition] = []
        for reader in readers:
            assert reader.position is not None, "a channel past the last end has a position"
            starts.append(reader.position)
            msgs += self.take_from(reader, end_ts)
            resume = self.resume_id(reader)
            if resume is not None:
                reader.position = reader.at(resume, end_ts)
            ends.append(reader.position)
        pack = MsgPack(tuple(msgs), self.last_tick, end_ts, tuple(starts), tuple(ends))
        self.last_tick = end_ts
        self.packs_delivered += 1
        return pack

    # ----------------------------------------------------------------- seek

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        """Resume each channel at its position: from its id on, nothing at or below its
        timestamp. Only before the first consume()."""
        self._open()
        checked = self._checked_positions(positions, include_current)
        if self.consumed:
            raise SeekAfterConsumeError("a time-tick stream seeks only before its first consume()")
        self._check_issued(checked)
        self.apply_seek(checked)

    def apply_seek(self, positions: Sequence[MsgPosition]) -> None:
        """Every position: its channel rereads from the id with the position's tick."""
        for position in positions:
            reader = self.readers[position.channel]
            reader.restart_at(self.mq, position.queue_id, position.queue_id)
            reader.tick = position.timestamp
            reader.position = position
        if positions:
            self.last_tick = min(reader.tick for reader in self.readers.values())
