"""The stream layer's values on the wire (docs/PROTOCOL.md "The stream layer"), both ways.

A message is ``{"type", "id", "timestamp", "hash_keys", "payload", "rows"}`` (and
``"position"`` on a delivered one); a position ``{"channel", "msg_id", "group",
"timestamp"}`` whose ``msg_id`` is the contract's 8 bytes in base64; a pack, a stream's
state and ``produce``'s answer (``[[channel, [queue ids]], ...]``, in the order written)
as below. Integers are JSON integers, exactly (a malformed pack may carry any integer: the
stream answers ``InvalidPack``). Decoding is strict, as ``conformance.wire.codec``'s: a
value of the wrong shape raises ``WireProtocolError`` naming the field.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from rmqsim.conformance.wire.codec import ERROR_KINDS, WireProtocolError, read_bytes, read_object
from rmqsim.model.api import MQError
from rmqsim.model.stream.api import (
    TYPE_CODES,
    ChannelState,
    InvalidPackError,
    InvalidPositionError,
    MsgPack,
    MsgPosition,
    MsgType,
    NoProducerError,
    NotSubscribedError,
    Row,
    SeekAfterConsumeError,
    StreamClosedError,
    StreamKind,
    StreamState,
    SubscriptionPosition,
    TsMsg,
)

__all__ = [
    "REPACK_NAMES",
    "STREAM_ERROR_KINDS",
    "STREAM_OPS",
    "SUBSCRIPTIONS",
    "decode_pack",
    "decode_positions",
    "decode_stream_state",
    "decode_ts_msgs",
    "decode_written",
    "encode_pack",
    "encode_positions",
    "encode_stream_state",
    "encode_ts_msgs",
    "encode_written",
]

#: The stream layer's own operations and their arguments, in order (a stream server also
#: serves the queue operations of ``codec.QUEUE_OPS`` on the queue under its streams).
STREAM_OPS: dict[str, tuple[str, ...]] = {
    "stream_new": ("stream", "kind"),
    "stream_as_producer": ("stream", "channels"),
    "stream_as_consumer": ("stream", "channels", "group", "initial_position"),
    "stream_set_repack": ("stream", "repack"),
    "stream_produce": ("stream", "msgs"),
    "stream_broadcast": ("stream", "msgs"),
    "stream_consume": ("stream",),
    "stream_seek": ("stream", "positions", "include_current"),
    "stream_get_latest_msg_id": ("stream", "channel"),
    "stream_close": ("stream",),
    "stream_snapshot": ("stream",),
}
#: The repack functions that have a wire form, by name (``null`` is the default repack).
#: Filled by the two ends with the same function (``conformance.stream.side``'s).
REPACK_NAMES = ("whole",)
#: The stream layer's error kinds (docs/STREAM.md "Errors"), then the queue's.
STREAM_ERROR_KINDS: dict[str, type[MQError]] = {
    "StreamClosed": StreamClosedError,
    "InvalidPack": InvalidPackError,
    "InvalidPosition": InvalidPositionError,
    "NoProducer": NoProducerError,
    "NotSubscribed": NotSubscribedError,
    "SeekAfterConsume": SeekAfterConsumeError,
    **ERROR_KINDS,
}

_MSG_FIELDS = ("type", "id", "timestamp", "hash_keys", "payload", "rows")
_POSITION_FIELDS = ("channel", "msg_id", "group", "timestamp")
_PACK_FIELDS = ("msgs", "begin_ts", "end_ts", "start_positions", "end_positions")
_STATE_FIELDS = ("kind", "closed", "producer_channels", "channels", "last_tick",
                 "packs_delivered")  # fmt: skip
_CHANNEL_FIELDS = ("channel", "group", "tick", "position", "min_queue_id", "buffered_ids",
                   "dropped_ids", "ignored_tick_ids", "duplicate_ids", "undecodable_ids")
_KINDS = {kind.value: kind for kind in StreamKind}
#: Where ``as_consumer`` starts, by its wire name.
SUBSCRIPTIONS = {position.value: position for position in SubscriptionPosition}


# --------------------------------------------------------------------------- checked reads


def _fail(where: str, wanted: str, value: object) -> WireProtocolError:
    return WireProtocolError(f"{where}: expected {wanted}, got {type(value).__name__}")


def _int(value: object, where: str) -> int:
    if type(value) is not int:
        raise _fail(where, "an integer", value)
    return value


def _str(value: object, where: str) -> str:
    if type(value) is not str:
        raise _fail(where, "a string", value)
    return value


def _list(value: object, where: str) -> list[Any]:
    if type(value) is not list:
        raise _fail(where, "a list", value)
    return value


def _ints(value: object, where: str) -> tuple[int, ...]:
    return tuple(_int(item, f"{where}[{i}]") for i, item in enumerate(_list(value, where)))


def _strs(value: object, where: str) -> tuple[str, ...]:
    return tuple(_str(item, f"{where}[{i}]") for i, item in enumerate(_list(value, where)))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --------------------------------------------------------------------------- positions


def _encode_position(position: MsgPosition | None) -> dict[str, Any] | None:
    if position is None:
        return None
    return {"channel": position.channel, "msg_id": _b64(position.msg_id),
            "group": position.group, "timestamp": position.timestamp}  # fmt: skip


def _position(value: object, where: str) -> MsgPosition:
    fields = read_object(value, where, _POSITION_FIELDS)
    return MsgPosition(_str(fields["channel"], f"{where}.channel"),
                       read_bytes(fields["msg_id"], f"{where}.msg_id"),
                       _str(fields["group"], f"{where}.group"),
                       _int(fields["timestamp"], f"{where}.timestamp"))  # fmt: skip


def encode_positions(positions: object) -> list[dict[str, Any] | None]:
    """Positions as the wire has them (``seek``'s, a pack's). What the harness seeks to is
    always a list of ``MsgPosition`` with bytes ids and int timestamps."""
    encoded = []
    for position in positions:  # type: ignore[attr-defined]  # checked by the caller
        assert isinstance(position, MsgPosition), position
        encoded.append(_encode_position(position))
    return encoded


def decode_positions(value: object, where: str) -> tuple[MsgPosition, ...]:
    return tuple(_position(item, f"{where}[{i}]") for i, item in enumerate(_list(value, where)))


# --------------------------------------------------------------------------- messages


def _encode_msg(msg: TsMsg, delivered: bool) -> dict[str, Any]:
    encoded = {
        "type": int(msg.msg_type),
        "id": msg.msg_id,
        "timestamp": msg.timestamp,
        "hash_keys": list(msg.hash_keys),
        "payload": _b64(msg.payload),
        "rows": [[row.row_id, row.timestamp] for row in msg.rows],
    }
    if delivered:
        encoded["position"] = _encode_position(msg.position)
    return encoded


def _msg(value: object, where: str, delivered: bool) -> TsMsg:
    fields = read_object(value, where, (*_MSG_FIELDS, "position") if delivered else _MSG_FIELDS)
    code = _int(fields["type"], f"{where}.type")
    rows = tuple(
        Row(_int(pair[0], f"{where}.rows[{i}][0]"), _int(pair[1], f"{where}.rows[{i}][1]"))
        for i, item in enumerate(_list(fields["rows"], f"{where}.rows"))
        for pair in (_pair(item, f"{where}.rows[{i}]"),)
    )
    position = fields.get("position")
    return TsMsg(
        MsgType(code) if code in TYPE_CODES else code,  # type: ignore[arg-type]  # refused by the stream
        _int(fields["id"], f"{where}.id"),
        _int(fields["timestamp"], f"{where}.timestamp"),
        _ints(fields["hash_keys"], f"{where}.hash_keys"),
        read_bytes(fields["payload"], f"{where}.payload"),
        rows,
        None if position is None else _position(position, f"{where}.position"),
    )


def _pair(value: object, where: str) -> list[Any]:
    pair = _list(value, where)
    if len(pair) != 2:
        raise WireProtocolError(f"{where}: expected [row_id, timestamp]")
    return pair


def encode_ts_msgs(msgs: object) -> list[dict[str, Any]]:
    """A pack's messages for ``stream_produce``/``stream_broadcast``. The harness sends
    only ``TsMsg`` values of int fields and bytes payloads (the stream checks the ranges)."""
    encoded = []
    for msg in msgs:  # type: ignore[attr-defined]  # checked by the caller
        assert isinstance(msg, TsMsg) and type(msg.payload) is bytes, msg
        encoded.append(_encode_msg(msg, delivered=False))
    return encoded


def decode_ts_msgs(value: object, where: str) -> tuple[TsMsg, ...]:
    return tuple(_msg(item, f"{where}[{i}]", False) for i, item in enumerate(_list(value, where)))


# --------------------------------------------------------------------------- packs


def encode_pack(pack: MsgPack | None) -> dict[str, Any] | None:
    """``stream_consume``'s answer: a pack, or ``null``."""
    if pack is None:
        return None
    return {
        "msgs": [_encode_msg(msg, delivered=True) for msg in pack.msgs],
        "begin_ts": pack.begin_ts,
        "end_ts": pack.end_ts,
        "start_positions": encode_positions(pack.start_positions),
        "end_positions": encode_positions(pack.end_positions),
    }


def decode_pack(value: object, where: str) -> MsgPack | None:
    if value is None:
        return None
    fields = read_object(value, where, _PACK_FIELDS)
    msgs = _list(fields["msgs"], f"{where}.msgs")
    return MsgPack(
        tuple(_msg(item, f"{where}.msgs[{i}]", True) for i, item in enumerate(msgs)),
        _int(fields["begin_ts"], f"{where}.begin_ts"),
        _int(fields["end_ts"], f"{where}.end_ts"),
        decode_positions(fields["start_positions"], f"{where}.start_positions"),
        decode_positions(fields["end_positions"], f"{where}.end_positions"),
    )


def encode_written(written: Mapping[str, list[int]]) -> list[list[Any]]:
    """``produce``/``broadcast``'s answer: ``[[channel, [queue ids]], ...]`` in its order."""
    return [[channel, list(ids)] for channel, ids in written.items()]


def decode_written(value: object, where: str) -> dict[str, list[int]]:
    written: dict[str, list[int]] = {}
    for i, item in enumerate(_list(value, where)):
        pair = _list(item, f"{where}[{i}]")
        if len(pair) != 2:
            raise WireProtocolError(f"{where}[{i}]: expected [channel, [queue ids]]")
        channel = _str(pair[0], f"{where}[{i}][0]")
        if channel in written:
            raise WireProtocolError(f"{where}: channel {channel!r} is listed twice")
        written[channel] = list(_ints(pair[1], f"{where}[{i}][1]"))
    return written


# --------------------------------------------------------------------------- state


def encode_stream_state(state: StreamState) -> dict[str, Any]:
    """``stream_snapshot``'s answer."""
    return {
        "kind": state.kind.value,
        "closed": state.closed,
        "producer_channels": list(state.producer_channels),
        "channels": [
            {
                "channel": c.channel,
                "group": c.group,
                "tick": c.tick,
                "position": _encode_position(c.position),
                "min_queue_id": c.min_queue_id,
                **{name: list(getattr(c, name)) for name in _CHANNEL_FIELDS[5:]},
            }
            for c in state.channels
        ],
        "last_tick": state.last_tick,
        "packs_delivered": state.packs_delivered,
    }


def _channel_state(value: object, where: str) -> ChannelState:
    fields = read_object(value, where, _CHANNEL_FIELDS)
    position = fields["position"]
    ids = {name: _ints(fields[name], f"{where}.{name}") for name in _CHANNEL_FIELDS[5:]}
    return ChannelState(
        _str(fields["channel"], f"{where}.channel"),
        _str(fields["group"], f"{where}.group"),
        _int(fields["tick"], f"{where}.tick"),
        None if position is None else _position(position, f"{where}.position"),
        _int(fields["min_queue_id"], f"{where}.min_queue_id"),
        **ids,
    )


def decode_stream_state(value: object, where: str) -> StreamState:
    fields = read_object(value, where, _STATE_FIELDS)
    kind, closed = fields["kind"], fields["closed"]
    if kind not in _KINDS:
        raise WireProtocolError(f"{where}.kind: expected 'plain' or 'time_tick', got {kind!r:.40}")
    if type(closed) is not bool:
        raise _fail(f"{where}.closed", "true or false", closed)
    channels = _list(fields["channels"], f"{where}.channels")
    return StreamState(
        _KINDS[kind],
        closed,
        _strs(fields["producer_channels"], f"{where}.producer_channels"),
        tuple(_channel_state(c, f"{where}.channels[{i}]") for i, c in enumerate(channels)),
        _int(fields["last_tick"], f"{where}.last_tick"),
        _int(fields["packs_delivered"], f"{where}.packs_delivered"),
    )
