"""The reference streams: docs/STREAM.md as executable Python over any ``MessageQueue``.

``PlainStreamModel`` and ``TtStreamModel`` are deterministic, single-threaded and never
block: ``consume()`` reads what the queue holds right now and returns a pack, or ``None``
when nothing is deliverable yet. Each channel is read one queue message at a time through
the stream's consumer group, so the queue's group position is always just after the last
message the stream read. ``StreamModelFactory`` makes them over one queue (by default a
``ReferenceMQ`` with retention off and a constant clock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from rmqsim.model.api import (
    InvalidArgumentError,
    MessageQueue,
    MQConfig,
    ProducerMessage,
    TopicNotFoundError,
    validate_name,
)
from rmqsim.model.reference import ReferenceMQ
from rmqsim.model.stream.api import (
    DML_TYPES,
    ChannelState,
    InvalidPackError,
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
from rmqsim.model.stream.codec import MessageDecodeError, decode_msg, encode_msg

__all__ = ["PlainStreamModel", "StreamModelFactory", "TtStreamModel", "default_repack"]


def default_repack(msgs: tuple[TsMsg, ...], channel_count: int) -> dict[int, list[TsMsg]]:
    """STREAM.md "Repack": each DML row becomes its own message on channel
    ``key % channel_count`` of its own hash key; any other message goes whole to the channel
    of its first hash key. Buckets keep the pack's order."""
    buckets: dict[int, list[TsMsg]] = {}
    for msg in msgs:
        if msg.msg_type in DML_TYPES:
            for row, key in zip(msg.rows, msg.hash_keys, strict=True):
                one_row = replace(msg, rows=(row,), hash_keys=(key,))
                buckets.setdefault(key % channel_count, []).append(one_row)
        else:
            buckets.setdefault(msg.hash_keys[0] % channel_count, []).append(msg)
    return buckets


def _custom_repack(
    repack: RepackFunc, msgs: tuple[TsMsg, ...], channel_count: int
) -> dict[int, list[TsMsg]]:
    """Run a user's repack function and check its answer (bucket -> messages)."""
    keys = tuple(tuple(key % channel_count for key in msg.hash_keys) for msg in msgs)
    answer = repack(msgs, keys)
    if not isinstance(answer, Mapping):
        raise InvalidPackError(f"the repack function returned {type(answer).__name__}, not a dict")
    buckets: dict[int, list[TsMsg]] = {}
    for bucket, bucket_msgs in answer.items():
        if type(bucket) is not int or not 0 <= bucket < channel_count:
            raise InvalidPackError(
                f"the repack function returned bucket {bucket!r} for {channel_count} channels"
            )
        if not isinstance(bucket_msgs, (list, tuple)):
            raise InvalidPackError(f"the repack function's bucket {bucket} is not a list")
        buckets[bucket] = list(validate_pack(MsgPack(msgs=tuple(bucket_msgs)), need_keys=False))
    return buckets


@dataclass(slots=True, eq=False)
class _Channel:
    """One consumed channel's mutable state (``ChannelState`` is its frozen view)."""

    name: str
    group: str
    tick: int = 0
    position: MsgPosition | None = None
    min_queue_id: int = 0
    #: Queue id of the last message read since the last seek, None if none.
    last_read_id: int | None = None
    buffer: list[tuple[int, TsMsg]] = field(default_factory=list)
    dropped_ids: list[int] = field(default_factory=list)
    ignored_tick_ids: list[int] = field(default_factory=list)
    duplicate_ids: list[int] = field(default_factory=list)
    undecodable_ids: list[int] = field(default_factory=list)

    def state(self) -> ChannelState:
        return ChannelState(
            channel=self.name,
            group=self.group,
            tick=self.tick,
            position=self.position,
            min_queue_id=self.min_queue_id,
            buffered_ids=tuple(queue_id for queue_id, _ in self.buffer),
            dropped_ids=tuple(self.dropped_ids),
            ignored_tick_ids=tuple(self.ignored_tick_ids),
            duplicate_ids=tuple(self.duplicate_ids),
            undecodable_ids=tuple(self.undecodable_ids),
        )


class _StreamModel:
    """What both streams share: producing, subscribing, reading one queue message."""

    kind: StreamKind

    def __init__(self, mq: MessageQueue) -> None:
        self._mq = mq
        self._closed = False
        self._producer_channels: tuple[str, ...] = ()
        self._repack: RepackFunc | None = None
        self._channels: dict[str, _Channel] = {}
        self._last_tick = 0
        self._packs_delivered = 0

    # ----------------------------------------------------------------- checks

    def _check_open(self) -> None:
        if self._closed:
            raise StreamClosedError("the stream is closed")

    def _require_channels(self) -> list[_Channel]:
        if not self._channels:
            raise NotSubscribedError("the stream consumes no channel: call as_consumer first")
        return list(self._channels.values())

    # ----------------------------------------------------------------- producer side

    def as_producer(self, channels: Sequence[str]) -> None:
        self._check_open()
        names = validate_channels("producer", channels)
        for name in names:
            self._mq.create_topic(name)
        self._producer_channels = tuple(dict.fromkeys(self._producer_channels + names))

    def set_repack_func(self, repack_func: RepackFunc | None) -> None:
        self._check_open()
        if repack_func is not None and not callable(repack_func):
            raise InvalidArgumentError("the repack function must be callable or None")
        self._repack = repack_func

    def _write(self, channel: str, msgs: Sequence[TsMsg]) -> list[int]:
        return self._mq.produce(channel, [ProducerMessage(encode_msg(msg)) for msg in msgs])

    def produce(self, pack: MsgPack) -> dict[str, list[int]]:
        self._check_open()
        msgs = validate_pack(pack, need_keys=True)
        if not self._producer_channels:
            raise NoProducerError("produce before as_producer: the stream has no channel")
        count = len(self._producer_channels)
        if self._repack is None:
            buckets = default_repack(msgs, count)
        else:
            buckets = _custom_repack(self._repack, msgs, count)
        return {
            self._producer_channels[bucket]: self._write(self._producer_channels[bucket], msgs)
            for bucket, msgs in sorted(buckets.items())
            if msgs
        }

    def broadcast(self, pack: MsgPack) -> dict[str, list[int]]:
        self._check_open()
        msgs = validate_pack(pack, need_keys=False)
        if not self._producer_channels:
            raise NoProducerError("broadcast before as_producer: the stream has no channel")
        return {channel: self._write(channel, msgs) for channel in self._producer_channels}

    # ----------------------------------------------------------------- consumer side

    def as_consumer(
        self,
        channels: Sequence[str],
        group: str,
        initial_position: SubscriptionPosition = SubscriptionPosition.EARLIEST,
    ) -> None:
        self._check_open()
        names = validate_channels("consumer", channels)
        validate_name("group", group)
        if not isinstance(initial_position, SubscriptionPosition):
            raise InvalidArgumentError(
                f"initial_position must be a SubscriptionPosition, got {initial_position!r}"
            )
        for name in names:
            if name in self._channels:
                continue  # subscribing a channel twice is a no-op
            self._mq.create_topic(name)
            if not self._mq.exist_consumer_group(name, group):
                self._mq.create_consumer_group(name, group)
            if initial_position is SubscriptionPosition.LATEST:
                self._mq.seek_to_latest(name, group)
            self._channels[name] = _Channel(name, group, tick=self._last_tick)

    def get_latest_msg_id(self, channel: str) -> int:
        self._check_open()
        if channel not in self._channels:
            raise NotSubscribedError(f"channel {channel!r} is not consumed by this stream")
        return self._mq.get_latest_msg(channel)

    def _read(self, channel: _Channel) -> tuple[int, TsMsg] | None:
        """The channel's next deliverable queue message, decoded; None if none is stored.
        Ids below ``min_queue_id`` are passed over, undecodable payloads recorded."""
        while True:
            got = self._mq.consume(channel.name, channel.group, 1)
            if not got:
                return None
            queue_id = got[0].msg_id
            if queue_id < channel.min_queue_id:
                continue
            channel.last_read_id = queue_id
            try:
                return queue_id, decode_msg(got[0].payload)
            except MessageDecodeError:
                channel.undecodable_ids.append(queue_id)

    def _check_issued(self, positions: Sequence[MsgPosition]) -> None:
        """A position whose id was never issued on its channel names nowhere to resume."""
        topics = self._mq.snapshot().topics
        for position in positions:
            if position.channel not in topics:
                raise TopicNotFoundError(f"channel {position.channel!r} no longer exists")
            last_id = topics[position.channel].last_id
            if position.queue_id > last_id:
                raise InvalidPositionError(
                    f"position id {position.queue_id} on channel {position.channel!r} was never "
                    f"issued (the channel's last id is {last_id})"
                )

    def _move_to(self, channel: _Channel, position: MsgPosition, min_queue_id: int) -> None:
        self._mq.seek(channel.name, channel.group, position.queue_id)
        channel.min_queue_id = min_queue_id
        channel.last_read_id = None

    # ----------------------------------------------------------------- life cycle

    def close(self) -> None:
        self._closed = True

    def snapshot(self) -> StreamState:
        return StreamState(
            kind=self.kind,
            closed=self._closed,
            producer_channels=self._producer_channels,
            channels=tuple(channel.state() for channel in self._channels.values()),
            last_tick=self._last_tick,
            packs_delivered=self._packs_delivered,
        )


class PlainStreamModel(_StreamModel):
    """The plain stream: every message is its own pack; channels are taken in turn."""

    kind = StreamKind.PLAIN

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        #: Index (in subscription order) of the channel the next consume() tries first.
        self._next_channel = 0

    def consume(self) -> MsgPack | None:
        self._check_open()
        channels = self._require_channels()
        for step in range(len(channels)):
            index = (self._next_channel + step) % len(channels)
            got = self._read(channels[index])
            if got is None:
                continue
            self._next_channel = (index + 1) % len(channels)
            queue_id, msg = got
            channel = channels[index]
            position = MsgPosition.at(channel.name, queue_id, channel.group, msg.begin_ts)
            channel.position = position
            self._packs_delivered += 1
            delivered = replace(msg, position=position)
            return MsgPack((delivered,), msg.begin_ts, msg.end_ts, (position,), (position,))
        return None

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = False) -> None:
        """Each channel next delivers the first message after the position's id (with
        ``include_current``, from that id); ids missing below are passed over."""
        self._check_open()
        positions = validate_positions(positions, tuple(self._channels))
        if not isinstance(include_current, bool):
            raise InvalidArgumentError("include_current must be a bool")
        self._check_issued(positions)
        for position in positions:
            channel = self._channels[position.channel]
            first = position.queue_id if include_current else position.queue_id + 1
            self._move_to(channel, position, first)
            channel.position = position


class TtStreamModel(_StreamModel):
    """The time-tick stream: packs of the interval between two global ticks."""

    kind = StreamKind.TIME_TICK

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self._consume_called = False

    def _take(self, channel: _Channel, queue_id: int, msg: TsMsg) -> None:
        """File one message read from ``channel``: a tick above the channel's raises it,
        anything else at or below it is not delivered (STREAM.md "Late messages")."""
        if channel.position is None:
            channel.position = MsgPosition.at(
                channel.name, queue_id, channel.group, self._last_tick
            )
        if msg.msg_type == MsgType.TIME_TICK:
            if msg.timestamp > channel.tick:
                channel.tick = msg.timestamp
            else:
                channel.ignored_tick_ids.append(queue_id)
        elif msg.end_ts <= channel.tick:
            channel.dropped_ids.append(queue_id)
        else:
            channel.buffer.append((queue_id, msg))

    def consume(self) -> MsgPack | None:
        self._check_open()
        channels = self._require_channels()
        self._consume_called = True
        for channel in channels:
            while channel.tick <= self._last_tick:
                got = self._read(channel)
                if got is None:
                    break
                self._take(channel, *got)
        if any(channel.tick <= self._last_tick for channel in channels):
            return None
        return self._emit(channels, min(channel.tick for channel in channels))

    def _emit(self, channels: list[_Channel], end_ts: int) -> MsgPack:
        """The pack ``(last tick, end_ts]``: every buffered message with ``end_ts`` at or
        below it, channel by channel in read order; a DML message equal to one this pack already
        holds from the same channel is dropped."""
        msgs: list[TsMsg] = []
        starts: list[MsgPosition] = []
        ends: list[MsgPosition] = []
        for channel in channels:
            assert channel.position is not None, "a channel past the last tick has a position"
            starts.append(channel.position)
            kept: list[tuple[int, TsMsg]] = []
            seen: set[TsMsg] = set()
            for queue_id, msg in channel.buffer:
                if msg.end_ts > end_ts:
                    kept.append((queue_id, msg))
                elif msg.msg_type in DML_TYPES and msg in seen:
                    channel.duplicate_ids.append(queue_id)
                else:
                    seen.add(msg)
                    at = MsgPosition.at(channel.name, queue_id, channel.group, msg.begin_ts)
                    msgs.append(replace(msg, position=at))
            channel.buffer = kept
            resume_id = kept[0][0] if kept else channel.last_read_id
            if resume_id is not None:  # None: nothing read since the position sought
                channel.position = MsgPosition.at(channel.name, resume_id, channel.group, end_ts)
            ends.append(channel.position)
        pack = MsgPack(tuple(msgs), self._last_tick, end_ts, tuple(starts), tuple(ends))
        self._last_tick = end_ts
        self._packs_delivered += 1
        return pack

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        """Resume each channel from its position: read from the position's id on, deliver
        only messages above its timestamp. ``include_current`` has no effect here (the
        timestamp decides about the message at the id). Only before the first consume()."""
        self._check_open()
        positions = validate_positions(positions, tuple(self._channels))
        if not isinstance(include_current, bool):
            raise InvalidArgumentError("include_current must be a bool")
        if self._consume_called:
            raise SeekAfterConsumeError("a time-tick stream seeks only before its first consume()")
        self._check_issued(positions)
        for position in positions:
            channel = self._channels[position.channel]
            self._move_to(channel, position, position.queue_id)
            channel.tick = position.timestamp
            channel.position = position
        if positions:
            self._last_tick = min(channel.tick for channel in self._channels.values())


def _constant_clock() -> int:
    return 0


class StreamModelFactory:
    """Makes model streams over one queue: ``mq``, or a fresh ``ReferenceMQ`` with retention
    off and a constant clock (so nothing reads the time)."""

    def __init__(self, mq: MessageQueue | None = None) -> None:
        if mq is None:
            config = MQConfig(retention_time_s=-1, retention_size_bytes=-1)
            mq = ReferenceMQ(config=config, clock=_constant_clock)
        self.mq = mq

    def new_msg_stream(self) -> PlainStreamModel:
        return PlainStreamModel(self.mq)

    def new_tt_msg_stream(self) -> TtStreamModel:
        return TtStreamModel(self.mq)
