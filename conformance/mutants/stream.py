"""Stream-layer mutants: the real Milvus message-stream bugs of docs/STREAM.md (and the
research notes' table), each a small subclass of ``impl.stream``'s streams behind a stream
factory, for ``--impl`` on the stream profiles. A factory takes the queue the harness opened
(``factory(queue=...) -> StreamFactory``), as ``impl.stream.stream_factory`` does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.impl.stream import PlainStream, RocksStreamFactory, TtStream
from rmqsim.impl.stream.channel import ChannelReader, Read
from rmqsim.impl.stream.routing import Buckets, by_hash_key
from rmqsim.model.api import MessageQueue, MQError
from rmqsim.model.stream.api import (
    DML_TYPES,
    InvalidPackError,
    MsgPack,
    MsgPosition,
    MsgType,
    SubscriptionPosition,
    TsMsg,
)

__all__ = [
    "MUTANTS",
    "ForwardSeekIgnored",
    "consumed_only",
    "dedup_by_msg_id",
    "end_position_past_buffered",
    "equal_ticks_only",
    "exclusive_seek_drops_next",
    "forward_seek_ignored",
    "keep_latest_group",
    "late_write_delivered",
    "latest_keeps_existing_group",
    "lost_wakeup",
    "missing_id_seeks_to_latest",
    "missing_ids",
    "non_increasing_tick_accepted",
    "pack_by_begin_ts",
    "pre_seek_read_ahead_leaks",
    "repack_by_first_type",
    "seek_drops_by_begin_ts",
    "seek_first_position_only",
    "seek_skipped_at_earliest",
    "seek_unknown_channel_ignored",
    "stream_factory_of",
]

StreamFactoryFn = Callable[..., RocksStreamFactory]


def stream_factory_of(
    plain_cls: type[PlainStream] = PlainStream, tt_cls: type[TtStream] = TtStream
) -> StreamFactoryFn:
    """A stream ``--impl`` factory making ``plain_cls`` and ``tt_cls`` streams."""
    factory_cls = type(
        "MutantStreamFactory", (RocksStreamFactory,), {"plain_cls": plain_cls, "tt_cls": tt_cls}
    )

    def factory(*, queue: MessageQueue) -> RocksStreamFactory:
        return factory_cls(queue)

    factory.__doc__ = (plain_cls if plain_cls is not PlainStream else tt_cls).__doc__
    return factory


# --------------------------------------------------------------------------- seek


class _FirstPositionOnly(PlainStream):
    """Bug class: stream seek.
    Milvus #7535: ``MqMsgStream.Seek`` applied only the first position (a ``break`` in
    the loop); the other channels go on where they were."""

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        super().apply_seek(positions[:1], include_current)


class _ReadAhead(PlainStream):
    """Bug class: stream seek.
    Milvus #11418: each channel's next message is read ahead into the consumer's channel
    buffer, and a seek does not clear it: the message from before the seek is delivered
    after it."""

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self.ahead: dict[str, Read] = {}

    def consume(self) -> MsgPack | None:
        self._open()
        readers = self._subscribed()
        for index in [*range(self.turn, len(readers)), *range(self.turn)]:
            reader = readers[index]
            read = self.ahead.pop(reader.name, None) or reader.next_message(self.mq)
            if read is not None:
                self.turn = (index + 1) % len(readers)
                following = reader.next_message(self.mq)
                if following is not None:
                    self.ahead[reader.name] = following
                return self._deliver(reader, read)
        return None


class _SkipEarliestPlain(PlainStream):
    """Bug class: stream seek.
    Milvus #40733: a position that looks like the earliest (id <= 1) is not sought at
    all, so the channel goes on from wherever its group stands."""

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        super().apply_seek([p for p in positions if p.queue_id > 1], include_current)


class _SkipEarliestTt(TtStream):
    """Bug class: stream seek.
    Milvus #40733 in the time-tick stream: a checkpoint at id <= 1 is ignored."""

    def apply_seek(self, positions: Sequence[MsgPosition]) -> None:
        super().apply_seek([p for p in positions if p.queue_id > 1])


class _SkippingReader(ChannelReader):
    """The wrapper's ``skip``: drops the next message it reads, whatever its id."""

    skip = False

    def next_message(self, mq: MessageQueue) -> Read | None:
        read = ChannelReader.next_message(self, mq)
        if read is not None and self.skip:
            self.skip = False
            read = ChannelReader.next_message(self, mq)
        return read


class _DropNextAfterExclusiveSeek(PlainStream):
    """Bug class: stream seek.
    Milvus's RocksMQ wrapper: an exclusive seek seeks the queue inclusively and drops
    the next delivered message, whatever its id: a seek to an id no longer stored resets to
    the earliest message and then loses it."""

    def subscribe_channel(self, name: str, group: str, initial_position: Any) -> None:
        super().subscribe_channel(name, group, initial_position)
        self.readers[name] = _SkippingReader(name, group, tick=self.readers[name].tick)

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        for position in positions:
            reader = self.readers[position.channel]
            assert isinstance(reader, _SkippingReader)
            reader.restart_at(self.mq, position.queue_id, 0)
            reader.position = position
            reader.skip = not include_current


class _SeekDropsByBeginTs(TtStream):
    """Bug class: stream seek.
    Milvus's time-tick seek keeps a message only if its BeginTs is above the position's
    timestamp, while packs take messages by EndTs: a message whose rows straddle a tick is
    dropped (here: on every channel read, as the rule is one comparison)."""

    def is_late(self, reader: ChannelReader, msg: TsMsg) -> bool:
        return msg.begin_ts <= reader.tick


# --------------------------------------------------------------------------- packs


class _DedupByMsgId(TtStream):
    """Bug class: stream packs.
    Milvus #18216: a pack drops every DML message whose message id it already holds, so
    distinct Inserts sharing an id are lost."""

    def take_from(self, reader: ChannelReader, end_ts: int) -> list[TsMsg]:
        self.seen_ids: set[int] = set()
        return super().take_from(reader, end_ts)

    def is_retry(self, msg: TsMsg, taken: set[TsMsg]) -> bool:
        if msg.msg_type not in DML_TYPES:
            return False
        if msg.msg_id in self.seen_ids:
            return True
        self.seen_ids.add(msg.msg_id)
        return False


class _EndPastBuffered(TtStream):
    """Bug class: stream packs.
    A checkpoint past a still-buffered message: the end position names the last
    message read even when an earlier one waits for a later tick, so a resume skips it."""

    def resume_id(self, reader: ChannelReader) -> int | None:
        return reader.last_read_id


class _AnyTick(TtStream):
    """Bug class: stream ticks.
    A tick that is not strictly increasing is taken: a repeated tick is not listed as
    ignored, and an older one moves the channel's tick back."""

    def raises_tick(self, reader: ChannelReader, tick: int) -> bool:
        return True


class _PackByBeginTs(TtStream):
    """Bug class: stream packs.
    Milvus's newest stream takes a message into a pack by its begin timestamp: a
    message whose last row is above the pack's end is delivered in it."""

    def in_pack(self, msg: TsMsg, end_ts: int) -> bool:
        return msg.begin_ts <= end_ts


class _LateWriteDelivered(TtStream):
    """Bug class: stream ticks.
    Milvus: a message written below the channel's last tick is buffered and delivered
    in the next pack, outside its interval (only a resume from a checkpoint drops it)."""

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self.sought_ts: dict[str, int] = {}

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        super().seek(positions, include_current)
        self.sought_ts.update((p.channel, p.timestamp) for p in positions)

    def is_late(self, reader: ChannelReader, msg: TsMsg) -> bool:
        return msg.end_ts <= self.sought_ts.get(reader.name, -1)


class _EqualTicksOnly(TtStream):
    """Bug class: stream liveness.
    Milvus's ``allChanReachSameTtMsg``: a pack is cut only when every channel holds the
    same tick value; channels whose ticks differ deliver nothing."""

    def cut(self, readers: list[ChannelReader]) -> int | None:
        ticks = {reader.tick for reader in readers}
        return super().cut(readers) if len(ticks) == 1 else None


class _SleepyReader(ChannelReader):
    """A reader that, once it found its channel empty, waits for a wake-up that only this
    stream's own writes send (the signal of other writers is lost: Milvus #34045)."""

    asleep = False

    def next_message(self, mq: MessageQueue) -> Read | None:
        if self.asleep:
            return None
        read = ChannelReader.next_message(self, mq)
        self.asleep = read is None
        return read


class _LostWakeup(TtStream):
    """Bug class: stream liveness.
    Milvus #34045: a lost wake-up: a channel reader that caught up sleeps until a
    notify that other producers' writes never send, so delivery stalls."""

    def subscribe_channel(self, name: str, group: str, initial_position: Any) -> None:
        super().subscribe_channel(name, group, initial_position)
        old = self.readers[name]
        self.readers[name] = _SleepyReader(old.name, old.group, tick=old.tick)

    def send_to_channel(self, channel: str, msgs: Sequence[TsMsg]) -> list[int]:
        ids = super().send_to_channel(channel, msgs)
        for reader in self.readers.values():
            if isinstance(reader, _SleepyReader):
                reader.asleep = False
        return ids


# --------------------------------------------------------------------------- produce


class _RepackByFirstType(PlainStream):
    """Bug class: stream produce.
    Milvus's ``Produce``: the repack function is chosen by the type of the pack's first
    message: an Insert first splits every message by row (refusing other types), a Delete
    first sends every message whole to its first key's channel."""

    def buckets(self, msgs: tuple[TsMsg, ...]) -> Buckets:
        if self.repack_func is not None or not msgs:
            return super().buckets(msgs)
        count = len(self.producer_channels)
        if msgs[0].msg_type == MsgType.INSERT:
            if any(msg.msg_type != MsgType.INSERT for msg in msgs):
                raise InvalidPackError("msg's must be Insert")
            return by_hash_key(msgs, count)
        buckets: Buckets = {}
        for msg in msgs:
            buckets.setdefault(msg.hash_keys[0] % count, []).append(msg)
        return buckets


class _RepackByFirstTypeTt(TtStream):
    __doc__ = _RepackByFirstType.__doc__
    buckets = _RepackByFirstType.buckets


seek_first_position_only = stream_factory_of(plain_cls=_FirstPositionOnly)
pre_seek_read_ahead_leaks = stream_factory_of(plain_cls=_ReadAhead)
seek_skipped_at_earliest = stream_factory_of(_SkipEarliestPlain, _SkipEarliestTt)
exclusive_seek_drops_next = stream_factory_of(plain_cls=_DropNextAfterExclusiveSeek)
seek_drops_by_begin_ts = stream_factory_of(tt_cls=_SeekDropsByBeginTs)
dedup_by_msg_id = stream_factory_of(tt_cls=_DedupByMsgId)
end_position_past_buffered = stream_factory_of(tt_cls=_EndPastBuffered)
non_increasing_tick_accepted = stream_factory_of(tt_cls=_AnyTick)
# --------------------------------------------------------------------------- argument cells
# Bugs only the operation cells of docs/STREAM.md reach: a subscription at LATEST, seeks to
# a channel not consumed, forward to undelivered ids, to ids no longer stored.


def keep_latest_group(stream: PlainStream | TtStream, name: str, group: str, start: Any) -> Any:
    """EARLIEST instead of LATEST when the group already exists on ``name``."""
    if start is not SubscriptionPosition.LATEST:
        return start
    try:
        existing = stream.mq.exist_consumer_group(name, group)
    except MQError:
        existing = False
    return SubscriptionPosition.EARLIEST if existing else start


class _LatestKeepsGroupPlain(PlainStream):
    """Bug class: stream subscribe.
    ``as_consumer`` at LATEST moves only a new group to the latest message: an existing
    group stays where it was, so a consumer reopened at LATEST re-reads its backlog."""

    def subscribe_channel(
        self, name: str, group: str, initial_position: SubscriptionPosition
    ) -> None:
        start = keep_latest_group(self, name, group, initial_position)
        super().subscribe_channel(name, group, start)


class _LatestKeepsGroupTt(TtStream):
    """Bug class: stream subscribe (the time-tick stream's, as ``_LatestKeepsGroupPlain``)."""

    def subscribe_channel(
        self, name: str, group: str, initial_position: SubscriptionPosition
    ) -> None:
        start = keep_latest_group(self, name, group, initial_position)
        super().subscribe_channel(name, group, start)


def consumed_only(stream: PlainStream | TtStream, positions: Any) -> Any:
    """The positions of ``positions`` on channels ``stream`` consumes (anything else
    kept, for the stream's own checks)."""
    if not isinstance(positions, (list, tuple)):
        return positions
    return [p for p in positions if not isinstance(p, MsgPosition) or p.channel in stream.readers]


class _UnknownChannelIgnoredPlain(PlainStream):
    """Bug class: stream seek.
    A seek position naming a channel the stream does not consume is dropped silently
    instead of refusing the seek (``InvalidPosition``), so the other positions apply."""

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = False) -> None:
        super().seek(consumed_only(self, positions), include_current)


class _UnknownChannelIgnoredTt(TtStream):
    """Bug class: stream seek (the time-tick stream's, as ``_UnknownChannelIgnoredPlain``)."""

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        super().seek(consumed_only(self, positions), include_current)


class ForwardSeekIgnored(PlainStream):
    """Bug class: stream seek.
    A seek is taken as a rewind only: a position past the highest id the stream has
    delivered on its channel (an id it was not delivered yet) is ignored, and the channel
    goes on from where it was instead of skipping ahead."""

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq)
        self.highest: dict[str, int] = {}

    def consume(self) -> MsgPack | None:
        pack = super().consume()
        self.note_delivered(pack)
        return pack

    def note_delivered(self, pack: MsgPack | None) -> None:
        """Remember the highest id ``pack`` delivered on each channel."""
        for msg in pack.msgs if pack is not None else ():
            if msg.position is not None:
                channel = msg.position.channel
                self.highest[channel] = max(self.highest.get(channel, 0), msg.position.queue_id)

    def kept(self, positions: Sequence[MsgPosition]) -> list[MsgPosition]:
        """The positions this bug applies: none past the highest id delivered."""
        return [p for p in positions if p.queue_id <= self.highest.get(p.channel, p.queue_id)]

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        super().apply_seek(self.kept(positions), include_current)


def _first_stored(mq: MessageQueue, channel: str) -> int | None:
    topic = mq.snapshot().topics.get(channel)
    return topic.messages[0].msg_id if topic is not None and topic.messages else None


class _MissingIdToLatest(PlainStream):
    """Bug class: stream seek.
    A seek to an id no longer stored (retention removed it, or the channel was destroyed
    and re-created since) sends the channel to its latest message instead of its earliest
    stored one: every stored message after the position is skipped."""

    def apply_seek(self, positions: Sequence[MsgPosition], include_current: bool) -> None:
        super().apply_seek(positions, include_current)
        for position in missing_ids(self.mq, positions):
            self.mq.seek_to_latest(position.channel, self.readers[position.channel].group)


def missing_ids(mq: MessageQueue, positions: Sequence[MsgPosition]) -> list[MsgPosition]:
    """The positions of ``positions`` whose id ``mq`` no longer stores (below its
    channel's first stored id): those ``missing_id_seeks_to_latest`` sends to the latest."""
    found = []
    for position in positions:
        first = _first_stored(mq, position.channel)
        if first is not None and position.queue_id < first:
            found.append(position)
    return found


pack_by_begin_ts = stream_factory_of(tt_cls=_PackByBeginTs)
late_write_delivered = stream_factory_of(tt_cls=_LateWriteDelivered)
equal_ticks_only = stream_factory_of(tt_cls=_EqualTicksOnly)
lost_wakeup = stream_factory_of(tt_cls=_LostWakeup)
repack_by_first_type = stream_factory_of(_RepackByFirstType, _RepackByFirstTypeTt)
latest_keeps_existing_group = stream_factory_of(_LatestKeepsGroupPlain, _LatestKeepsGroupTt)
seek_unknown_channel_ignored = stream_factory_of(
    _UnknownChannelIgnoredPlain, _UnknownChannelIgnoredTt
)
forward_seek_ignored = stream_factory_of(ForwardSeekIgnored)
missing_id_seeks_to_latest = stream_factory_of(_MissingIdToLatest)

_MODULE = __name__


def _mutant(name: str, bug_class: str, summary: str) -> Mutant:
    return Mutant(name, bug_class, summary, f"{_MODULE}:{name.replace('-', '_')}", "stream")


MUTANTS: tuple[Mutant, ...] = (
    _mutant("seek-first-position-only", "stream-seek",
            "a plain stream's seek applies only the first position (Milvus #7535)"),
    _mutant("pre-seek-read-ahead-leaks", "stream-seek",
            "a message read ahead before a seek is delivered after it (Milvus #11418)"),
    _mutant("seek-skipped-at-earliest", "stream-seek",
            "a seek to a position that looks earliest (id <= 1) is skipped (Milvus #40733)"),
    _mutant("exclusive-seek-drops-next", "stream-seek",
            "an exclusive seek drops the next delivered message whatever its id, losing "
            "one after a seek to an id no longer stored (Milvus's RocksMQ wrapper)"),
    _mutant("seek-drops-by-begin-ts", "stream-seek",
            "a message is dropped by its begin ts while packs take it by its end ts: rows "
            "straddling a tick are lost (Milvus's time-tick seek)"),
    _mutant("dedup-by-msg-id", "stream-packs",
            "a pack drops DML messages by message id, losing distinct inserts sharing one "
            "(Milvus #18216)"),
    _mutant("end-position-past-buffered", "stream-packs",
            "an end position names the last message read although an earlier one is still "
            "buffered, so a resume from the checkpoint loses it"),
    _mutant("non-increasing-tick-accepted", "stream-ticks",
            "a repeated or older tick is taken as the channel's tick"),
    _mutant("pack-by-begin-ts", "stream-packs",
            "a message joins the pack its begin ts falls in, so rows above the pack's end "
            "are delivered in it (Milvus's newest stream)"),
    _mutant("late-write-delivered", "stream-ticks",
            "a message written below the last tick is delivered in the next pack, outside "
            "its interval (Milvus)"),
    _mutant("equal-ticks-only", "stream-liveness",
            "a pack is cut only when every channel holds the same tick value "
            "(Milvus's allChanReachSameTtMsg)"),
    _mutant("lost-wakeup", "stream-liveness",
            "a caught-up channel reader sleeps until a wake-up other writers never send, "
            "stalling delivery (Milvus #34045)"),
    _mutant("latest-keeps-existing-group", "stream-subscribe",
            "as_consumer at LATEST leaves an existing group where it was (only a new one "
            "moves to the latest message)"),
    _mutant("seek-unknown-channel-ignored", "stream-seek-argument",
            "a seek position on a channel the stream does not consume is dropped instead "
            "of refusing the seek"),
    _mutant("forward-seek-ignored", "stream-seek-argument",
            "a plain stream's seek only rewinds: a position past the highest id it "
            "delivered on the channel is ignored"),
    _mutant("missing-id-seeks-to-latest", "stream-seek-argument",
            "a seek to an id no longer stored (trimmed, or of a re-created channel) goes "
            "to the latest message instead of the earliest stored"),
    _mutant("repack-by-first-type", "stream-produce",
            "produce picks the repack by the first message's type: a Delete first sends "
            "every message whole to its first key's channel (Milvus)"),
)  # fmt: skip
