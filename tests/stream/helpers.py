"""Builders and readers shared by the stream tests."""

from __future__ import annotations

from rmqsim.model.stream.api import MsgPack, MsgStream, MsgType, Row, TsMsg


def insert(msg_id: int, *rows: tuple[int, int, int], payload: bytes = b"") -> TsMsg:
    """An Insert whose rows are ``(row_id, timestamp, hash_key)``."""
    return TsMsg(
        MsgType.INSERT,
        msg_id,
        hash_keys=tuple(key for _, _, key in rows),
        payload=payload,
        rows=tuple(Row(row_id, ts) for row_id, ts, _ in rows),
    )


def insert_at(ts: int, msg_id: int | None = None, key: int = 0) -> TsMsg:
    """A one-row Insert at ``ts`` (row id and message id default to ``ts``)."""
    ident = ts if msg_id is None else msg_id
    return insert(ident, (ident, ts, key))


def delete(msg_id: int, *rows: tuple[int, int, int]) -> TsMsg:
    """A Delete whose rows are ``(row_id, timestamp, hash_key)``."""
    return TsMsg(
        MsgType.DELETE,
        msg_id,
        hash_keys=tuple(key for _, _, key in rows),
        rows=tuple(Row(row_id, ts) for row_id, ts, _ in rows),
    )


def ddl(msg_type: MsgType, msg_id: int, ts: int, key: int = 0) -> TsMsg:
    return TsMsg(msg_type, msg_id, ts, hash_keys=(key,))


def tick(ts: int) -> MsgPack:
    return MsgPack.of(TsMsg.time_tick(ts))


def pack(*msgs: TsMsg) -> MsgPack:
    return MsgPack.of(*msgs)


def drain(stream: MsgStream, limit: int = 1000) -> list[MsgPack]:
    """Every pack the stream can deliver now (consume() until it returns None)."""
    packs = []
    for _ in range(limit):
        got = stream.consume()
        if got is None:
            return packs
        packs.append(got)
    raise AssertionError(f"the stream delivered more than {limit} packs")


def row_ids(got: MsgPack) -> list[int]:
    """The row ids of a pack's DML messages, in order."""
    return [row.row_id for msg in got.msgs for row in msg.rows]


def msg_ids(packs: list[MsgPack]) -> list[int]:
    return [msg.msg_id for got in packs for msg in got.msgs]
