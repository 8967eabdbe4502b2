"""Where ``produce`` writes each message (docs/STREAM.md "Producing"): the default split
of DML messages by row and hash key, and a user's repack function with its answer checked.
Both answer ``{bucket: [messages]}``, a bucket being a producer channel's index."""

from __future__ import annotations

from collections.abc import Mapping

from rmqsim.model.stream.api import (
    DML_TYPES,
    InvalidPackError,
    MsgPack,
    RepackFunc,
    TsMsg,
    validate_pack,
)

__all__ = ["Buckets", "by_hash_key", "by_repack_func"]

Buckets = dict[int, list[TsMsg]]


def _one_row_messages(msg: TsMsg) -> list[tuple[int, TsMsg]]:
    """A DML message as one message per row, each with its row's hash key."""
    return [
        (key, TsMsg(msg.msg_type, msg.msg_id, msg.timestamp, (key,), msg.payload, (row,)))
        for row, key in zip(msg.rows, msg.hash_keys, strict=True)
    ]


def by_hash_key(msgs: tuple[TsMsg, ...], channel_count: int) -> Buckets:
    """The default repack, message by message by its own type: a DML message's rows each to
    ``key % channel_count``, any other message whole to its first key's channel."""
    buckets: Buckets = {}
    for msg in msgs:
        parts = _one_row_messages(msg) if msg.msg_type in DML_TYPES else [(msg.hash_keys[0], msg)]
        for key, part in parts:
            buckets.setdefault(key % channel_count, []).append(part)
    return buckets


def by_repack_func(repack: RepackFunc, msgs: tuple[TsMsg, ...], channel_count: int) -> Buckets:
    """A user's repack function's answer, checked: int buckets in range, each a list of
    well-formed messages (``InvalidPackError`` otherwise)."""
    key_buckets = tuple(tuple(key % channel_count for key in msg.hash_keys) for msg in msgs)
    answer = repack(msgs, key_buckets)
    if not isinstance(answer, Mapping):
        raise InvalidPackError(
            f"the repack function answered a {type(answer).__name__}, not a dict"
        )
    buckets: Buckets = {}
    for bucket, bucket_msgs in answer.items():
        if type(bucket) is not int or not 0 <= bucket < channel_count:
            raise InvalidPackError(
                f"the repack function answered bucket {bucket!r} for {channel_count} channels"
            )
        if not isinstance(bucket_msgs, (list, tuple)):
            raise InvalidPackError(
                f"repack bucket {bucket} is not a list but a {type(bucket_msgs).__name__}"
            )
        buckets[bucket] = list(validate_pack(MsgPack(msgs=tuple(bucket_msgs)), need_keys=False))
    return buckets
