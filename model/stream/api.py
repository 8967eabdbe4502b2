"""The contract of the message-stream layer (docs/STREAM.md): values, errors, protocols.

This module is to the streams what ``model/api.py`` is to the queue: it holds the contract
and nothing else, so that both the reference model (``model.stream``) and a real stream
implementation can import it. Message values are not validated when built (as
``ProducerMessage`` is not): ``produce``/``broadcast`` validate them with ``validate_pack``,
so that a malformed pack is a typed error from the stream and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Protocol, TypeGuard, runtime_checkable

from rmqsim.model.api import InvalidArgumentError, MessageQueue, MQError, validate_name

__all__ = [
    "DML_TYPES",
    "MAX_HASH_KEY",
    "MAX_MSG_ID",
    "MAX_PAYLOAD_BYTES",
    "MAX_TIMESTAMP",
    "TYPE_CODES",
    "ChannelState",
    "InvalidPackError",
    "InvalidPositionError",
    "MsgPack",
    "MsgPosition",
    "MsgStream",
    "MsgType",
    "NoProducerError",
    "NotSubscribedError",
    "RepackFunc",
    "Row",
    "SeekAfterConsumeError",
    "StreamClosedError",
    "StreamError",
    "StreamFactory",
    "StreamKind",
    "StreamState",
    "SubscriptionPosition",
    "TsMsg",
    "forget_valid_packs",
    "validate_channels",
    "validate_pack",
    "validate_positions",
]

#: Timestamps are Milvus hybrid timestamps: unsigned 64-bit integers.
MAX_TIMESTAMP = 2**64 - 1
#: A message's own id (Milvus ``Base.MsgID``) and a row id are signed 64-bit; ours are >= 0.
MAX_MSG_ID = 2**63 - 1
#: Hash keys are unsigned 32-bit (Milvus ``HashKeys() []uint32``).
MAX_HASH_KEY = 2**32 - 1
#: The encoding stores a payload's length in 4 bytes.
MAX_PAYLOAD_BYTES = 2**32 - 1


# --------------------------------------------------------------------------- errors


class StreamError(MQError):
    """Base of the errors a stream raises itself (queue errors pass through unchanged)."""

    kind = "StreamError"


class StreamClosedError(StreamError):
    """The stream was closed: every operation but ``close()`` raises this."""

    kind = "StreamClosed"


class InvalidPackError(StreamError, ValueError):
    """A malformed pack or message, or a repack function's malformed answer; nothing written."""

    kind = "InvalidPack"


class InvalidPositionError(StreamError, ValueError):
    """A seek position that names no place to resume: not a MsgPosition, an id that is not
    8 bytes (empty included), a channel the stream does not consume, a channel named twice,
    or an id never issued on the channel; the stream is unchanged."""

    kind = "InvalidPosition"


class NoProducerError(StreamError):
    """``produce``/``broadcast`` before ``as_producer`` gave the stream any channel."""

    kind = "NoProducer"


class NotSubscribedError(StreamError):
    """``consume`` before ``as_consumer``, or ``get_latest_msg_id`` of a channel the stream
    does not consume."""

    kind = "NotSubscribed"


class SeekAfterConsumeError(StreamError):
    """A time-tick stream's ``seek`` after its first ``consume()``."""

    kind = "SeekAfterConsume"


# --------------------------------------------------------------------------- values


class MsgType(IntEnum):
    """The message types a stream carries, with Milvus's ``commonpb.MsgType`` codes."""

    CREATE_COLLECTION = 100
    DROP_COLLECTION = 101
    CREATE_PARTITION = 200
    DROP_PARTITION = 201
    INSERT = 400
    DELETE = 401
    FLUSH = 402
    TIME_TICK = 1200


#: Every known type code.
TYPE_CODES = frozenset(int(msg_type) for msg_type in MsgType)

#: Data-manipulation types: they carry rows, one hash key per row, and are split by row.
DML_TYPES = frozenset({MsgType.INSERT, MsgType.DELETE})


class StreamKind(StrEnum):
    """A plain stream delivers one message per pack; a time-tick stream one tick interval."""

    PLAIN = "plain"
    TIME_TICK = "time_tick"


class SubscriptionPosition(StrEnum):
    """Where ``as_consumer`` starts a group it subscribes."""

    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True, slots=True)
class Row:
    """One row of an Insert (or one deleted key of a Delete): its id and its timestamp."""

    row_id: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class MsgPosition:
    """A place in a channel: ``msg_id`` is a queue id serialized as 8 little-endian bytes
    (as Milvus serializes a RocksMQ id), ``timestamp`` the tick the position stands at."""

    channel: str
    msg_id: bytes
    group: str
    timestamp: int

    @property
    def queue_id(self) -> int:
        """The queue id this position names (call only on a validated position)."""
        return int.from_bytes(self.msg_id, "little", signed=True)

    @staticmethod
    def at(channel: str, queue_id: int, group: str, timestamp: int) -> MsgPosition:
        return MsgPosition(channel, queue_id.to_bytes(8, "little", signed=True), group, timestamp)


@dataclass(frozen=True, slots=True)
class TsMsg:
    """One stream message. ``msg_id`` is the message's own id (Milvus ``Base.MsgID``), not
    a queue id. DML messages (Insert, Delete) carry ``rows`` and one hash key per row
    (row i's key is ``hash_keys[i]``), and leave ``timestamp`` 0: their begin/end timestamps
    are their rows' smallest and largest. Every other type has no rows and its
    ``timestamp`` is both begin and end. ``position`` is set on delivered messages only and
    is not part of equality."""

    msg_type: MsgType
    msg_id: int
    timestamp: int = 0
    hash_keys: tuple[int, ...] = ()
    payload: bytes = b""
    rows: tuple[Row, ...] = ()
    position: MsgPosition | None = field(default=None, compare=False)

    @property
    def begin_ts(self) -> int:
        if self.msg_type in DML_TYPES and self.rows:
            rows = self.rows
            if type(rows) is tuple and len(rows) == 1:
                return rows[0].timestamp
            return min(row.timestamp for row in rows)
        return self.timestamp

    @property
    def end_ts(self) -> int:
        if self.msg_type in DML_TYPES and self.rows:
            rows = self.rows
            if type(rows) is tuple and len(rows) == 1:
                return rows[0].timestamp
            return max(row.timestamp for row in rows)
        return self.timestamp

    @staticmethod
    def time_tick(timestamp: int, msg_id: int = 0) -> TsMsg:
        """A time tick as Milvus's root coordinator broadcasts it (hash key 0)."""
        return TsMsg(MsgType.TIME_TICK, msg_id, timestamp, hash_keys=(0,))


@dataclass(frozen=True, slots=True)
class MsgPack:
    """What ``produce`` takes and ``consume`` returns. On produce only ``msgs`` is written
    (the other fields must be well-formed and are ignored)."""

    msgs: tuple[TsMsg, ...] = ()
    begin_ts: int = 0
    end_ts: int = 0
    start_positions: tuple[MsgPosition, ...] = ()
    end_positions: tuple[MsgPosition, ...] = ()

    @staticmethod
    def of(*msgs: TsMsg) -> MsgPack:
        return MsgPack(msgs=tuple(msgs))


@dataclass(frozen=True, slots=True)
class ChannelState:
    """What a stream holds for one channel it consumes. ``tick`` is the channel's highest
    tick read (or the timestamp of the position sought); ``position`` is where a consumer
    resumes this channel from (the last pack's end position); ``min_queue_id`` the smallest
    queue id the channel still delivers (after a seek). The id lists name queue messages the
    stream read and did not deliver: ``buffered_ids`` wait for their tick, ``dropped_ids``
    were at or below the channel's tick when read (written late, or delivered before the
    position sought), ``ignored_tick_ids`` are ticks at or below it, ``duplicate_ids`` DML
    messages equal to one the same pack already holds from this channel, and
    ``undecodable_ids`` payloads that are not stream messages."""

    channel: str
    group: str
    tick: int
    position: MsgPosition | None
    min_queue_id: int
    buffered_ids: tuple[int, ...]
    dropped_ids: tuple[int, ...]
    ignored_tick_ids: tuple[int, ...]
    duplicate_ids: tuple[int, ...]
    undecodable_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StreamState:
    """A stream's whole logical state, frozen and comparable with ``==``: its kind, whether
    it is closed, its producer channels, its consumer channels in subscription order, the
    end timestamp of the last pack it delivered (a time-tick stream's ``last_tick``; 0 for
    a plain stream) and how many packs it delivered."""

    kind: StreamKind
    closed: bool
    producer_channels: tuple[str, ...]
    channels: tuple[ChannelState, ...]
    last_tick: int
    packs_delivered: int


#: ``repack(msgs, buckets) -> {bucket: messages}``: ``buckets[i]`` lists, for message i, the
#: bucket (producer channel index) of each of its hash keys (``key % channel count``).
RepackFunc = Callable[
    [tuple[TsMsg, ...], tuple[tuple[int, ...], ...]], Mapping[int, Sequence[TsMsg]]
]


# --------------------------------------------------------------------------- validation


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(where: str, value: object, high: int) -> None:
    if not _is_int(value):
        raise InvalidPackError(f"{where} must be an int, got {type(value).__name__}")
    if not 0 <= value <= high:
        raise InvalidPackError(f"{where} must be in [0, {high}], got {value}")


def _check_ints(where: str, values: object, high: int) -> None:
    if not isinstance(values, (tuple, list)):
        raise InvalidPackError(f"{where} must be a tuple of ints, got {type(values).__name__}")
    for index, value in enumerate(values):
        _check_int(f"{where}[{index}]", value, high)


def _check_rows(where: str, msg: TsMsg) -> None:
    if not isinstance(msg.rows, (tuple, list)):
        raise InvalidPackError(
            f"{where}.rows must be a tuple of Row, got {type(msg.rows).__name__}"
        )
    for index, row in enumerate(msg.rows):
        if not isinstance(row, Row):
            raise InvalidPackError(f"{where}.rows[{index}] must be a Row, got {type(row).__name__}")
        _check_int(f"{where}.rows[{index}].row_id", row.row_id, MAX_MSG_ID)
        _check_int(f"{where}.rows[{index}].timestamp", row.timestamp, MAX_TIMESTAMP)
    if msg.msg_type in DML_TYPES:
        if not msg.rows:
            raise InvalidPackError(f"{where} is a {MsgType(msg.msg_type).name} with no rows")
        if len(msg.hash_keys) != len(msg.rows):
            raise InvalidPackError(
                f"{where} has {len(msg.rows)} rows but {len(msg.hash_keys)} hash keys "
                "(a DML message needs one hash key per row)"
            )
        if msg.timestamp != 0:
            raise InvalidPackError(
                f"{where} is DML: its timestamps are its rows', timestamp must be 0"
            )
    elif msg.rows:
        raise InvalidPackError(
            f"{where} is a {MsgType(msg.msg_type).name}: only Insert and Delete carry rows"
        )


def _check_msg(where: str, msg: object, need_keys: bool) -> None:
    if not isinstance(msg, TsMsg):
        raise InvalidPackError(f"{where} must be a TsMsg, got {type(msg).__name__}")
    if not _is_int(msg.msg_type) or msg.msg_type not in TYPE_CODES:
        raise InvalidPackError(f"{where} has an unknown message type {msg.msg_type!r}")
    _check_int(f"{where}.msg_id", msg.msg_id, MAX_MSG_ID)
    _check_int(f"{where}.timestamp", msg.timestamp, MAX_TIMESTAMP)
    _check_ints(f"{where}.hash_keys", msg.hash_keys, MAX_HASH_KEY)
    if not isinstance(msg.payload, bytes):
        raise InvalidPackError(f"{where}.payload must be bytes, got {type(msg.payload).__name__}")
    if len(msg.payload) > MAX_PAYLOAD_BYTES:
        raise InvalidPackError(f"{where}.payload is over {MAX_PAYLOAD_BYTES} bytes")
    _check_rows(where, msg)
    if need_keys and not msg.hash_keys:
        raise InvalidPackError(f"{where} has no hash key: produce cannot route it")


def _is_int_in(value: object, high: int) -> bool:
    """``value`` is exactly an ``int`` in ``[0, high]`` (what ``_check_int`` accepts, less
    its subclasses)."""
    return type(value) is int and 0 <= value <= high


def _is_plain_valid_msg(msg: object, need_keys: bool) -> bool:
    """True when ``msg`` is a ``TsMsg`` made of exact types (ints, bytes, tuples, ``Row``)
    that passes every check of ``_check_msg``: the common case, checked cheaply. False
    decides nothing: ``_check_msg`` then checks it (and names the fault)."""
    if type(msg) is not TsMsg:
        return False
    msg_type, keys, rows = msg.msg_type, msg.hash_keys, msg.rows
    if type(msg_type) is not MsgType and not (type(msg_type) is int and msg_type in TYPE_CODES):
        return False
    if not (_is_int_in(msg.msg_id, MAX_MSG_ID) and _is_int_in(msg.timestamp, MAX_TIMESTAMP)):
        return False
    if type(keys) is not tuple or (need_keys and not keys) or type(rows) is not tuple:
        return False
    for key in keys:
        if type(key) is not int or not 0 <= key <= MAX_HASH_KEY:
            return False
    if type(msg.payload) is not bytes or len(msg.payload) > MAX_PAYLOAD_BYTES:
        return False
    for row in rows:
        if type(row) is not Row or not (
            _is_int_in(row.row_id, MAX_MSG_ID) and _is_int_in(row.timestamp, MAX_TIMESTAMP)
        ):
            return False
    if msg_type in DML_TYPES:
        return bool(rows) and len(keys) == len(rows) and msg.timestamp == 0
    return not rows


def _is_plain_valid_pack(pack: object, need_keys: bool) -> TypeGuard[MsgPack]:
    """``_is_plain_valid_msg`` for a whole pack: a ``MsgPack`` of tuples that passes every
    check of ``validate_pack``; False decides nothing."""
    if type(pack) is not MsgPack or type(pack.msgs) is not tuple:
        return False
    if not (_is_int_in(pack.begin_ts, MAX_TIMESTAMP) and _is_int_in(pack.end_ts, MAX_TIMESTAMP)):
        return False
    for positions in (pack.start_positions, pack.end_positions):
        if type(positions) is not tuple:
            return False
        for position in positions:
            if type(position) is not MsgPosition:
                return False
    return all(_is_plain_valid_msg(msg, need_keys) for msg in pack.msgs)


#: Packs the fast path accepted lately, by identity (each held, so that its id names no
#: other object while it is here), with whether they were checked with ``need_keys``.
#: Such a pack is immutable all through (exact frozen types, tuples, ints, bytes), so it
#: stays valid: when one object is validated again (the model's streams and the streams
#: under test are given the same pack in lockstep), the first check answers.
_VALID_PACKS: dict[int, tuple[MsgPack, bool]] = {}
#: At most this many packs are remembered (then the memory starts again, empty).
_VALID_PACKS_KEPT = 4096


def forget_valid_packs() -> None:
    """Empty ``_VALID_PACKS`` (a measurement's way of running starts cold)."""
    _VALID_PACKS.clear()


def validate_pack(pack: object, need_keys: bool) -> tuple[TsMsg, ...]:
    """Check a pack for ``produce`` (``need_keys``: every message must have a hash key) or
    ``broadcast``; return its messages. Raises ``InvalidPackError`` naming the first fault.
    A pack of exact types is checked on a fast path (``_is_plain_valid_pack``) that
    accepts only what the field-by-field checks (``_checked_pack``) accept, and is
    remembered (``_VALID_PACKS``)."""
    known = _VALID_PACKS.get(id(pack))
    if known is not None and known[0] is pack and (known[1] or not need_keys):
        return known[0].msgs
    if _is_plain_valid_pack(pack, need_keys):
        if len(_VALID_PACKS) >= _VALID_PACKS_KEPT:
            _VALID_PACKS.clear()
        _VALID_PACKS[id(pack)] = (pack, need_keys)
        return pack.msgs
    return _checked_pack(pack, need_keys)


def _checked_pack(pack: object, need_keys: bool) -> tuple[TsMsg, ...]:
    """``validate_pack``'s checks, field by field, naming the first fault."""
    if not isinstance(pack, MsgPack):
        raise InvalidPackError(f"pack must be a MsgPack, got {type(pack).__name__}")
    _check_int("pack.begin_ts", pack.begin_ts, MAX_TIMESTAMP)
    _check_int("pack.end_ts", pack.end_ts, MAX_TIMESTAMP)
    for name in ("start_positions", "end_positions"):
        positions = getattr(pack, name)
        if not isinstance(positions, (tuple, list)) or not all(
            isinstance(position, MsgPosition) for position in positions
        ):
            raise InvalidPackError(f"pack.{name} must be a tuple of MsgPosition")
    if not isinstance(pack.msgs, (tuple, list)):
        raise InvalidPackError(
            f"pack.msgs must be a tuple of TsMsg, got {type(pack.msgs).__name__}"
        )
    for index, msg in enumerate(pack.msgs):
        _check_msg(f"pack.msgs[{index}]", msg, need_keys)
    return tuple(pack.msgs)


def validate_channels(what: str, channels: object) -> tuple[str, ...]:
    """A non-empty list of valid channel (queue topic) names; repeats are kept once."""
    if not isinstance(channels, (tuple, list)) or not channels:
        raise InvalidArgumentError(f"{what} channels must be a non-empty list of names")
    for channel in channels:
        validate_name("channel", channel)
    return tuple(dict.fromkeys(channels))


def validate_positions(positions: object, subscribed: Sequence[str]) -> tuple[MsgPosition, ...]:
    """Seek positions: MsgPosition values for distinct subscribed channels, each with an
    8-byte id and an int timestamp. Raises ``InvalidPositionError`` naming the fault."""
    if not isinstance(positions, (tuple, list)):
        raise InvalidPositionError(f"positions must be a list, got {type(positions).__name__}")
    seen: set[str] = set()
    for index, position in enumerate(positions):
        where = f"positions[{index}]"
        if not isinstance(position, MsgPosition):
            raise InvalidPositionError(
                f"{where} must be a MsgPosition, got {type(position).__name__}"
            )
        if position.channel not in subscribed:
            raise InvalidPositionError(
                f"{where}: channel {position.channel!r} is not consumed here"
            )
        if position.channel in seen:
            raise InvalidPositionError(f"{where}: channel {position.channel!r} is named twice")
        seen.add(position.channel)
        if not isinstance(position.msg_id, bytes) or len(position.msg_id) != 8:
            raise InvalidPositionError(f"{where}: msg_id must be 8 bytes, got {position.msg_id!r}")
        if not _is_int(position.timestamp) or not 0 <= position.timestamp <= MAX_TIMESTAMP:
            raise InvalidPositionError(f"{where}: timestamp must be an int in [0, 2**64)")
        if not isinstance(position.group, str):
            raise InvalidPositionError(f"{where}: group must be a str")
    return tuple(positions)


# --------------------------------------------------------------------------- protocols


@runtime_checkable
class MsgStream(Protocol):
    """A plain or time-tick message stream over a queue (docs/STREAM.md). Checks run in this
    order: closed, arguments, state; an operation that raises has changed nothing."""

    kind: StreamKind

    def as_producer(self, channels: Sequence[str]) -> None: ...

    def as_consumer(
        self,
        channels: Sequence[str],
        group: str,
        initial_position: SubscriptionPosition = SubscriptionPosition.EARLIEST,
    ) -> None: ...

    def set_repack_func(self, repack_func: RepackFunc | None) -> None: ...

    def produce(self, pack: MsgPack) -> dict[str, list[int]]: ...

    def broadcast(self, pack: MsgPack) -> dict[str, list[int]]: ...

    def consume(self) -> MsgPack | None: ...

    def seek(self, positions: Sequence[MsgPosition], include_current: bool = False) -> None: ...

    def get_latest_msg_id(self, channel: str) -> int: ...

    def close(self) -> None: ...

    def snapshot(self) -> StreamState: ...


@runtime_checkable
class StreamFactory(Protocol):
    """Makes streams over one queue, ``mq`` (Milvus's ``msgstream.Factory``)."""

    mq: MessageQueue

    def new_msg_stream(self) -> MsgStream: ...

    def new_tt_msg_stream(self) -> MsgStream: ...
