"""The batch-level produce path (messages without properties: ``queue._produce_plain``)
stores run records (``records.encode_run``) where the general path stores a record per
message: the two give the same messages, page closings, metadata and ids, segment rolls
included, and a run is checked as a whole (any damage refuses it)."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqsim.impl.commitlog import HARNESS_GEOMETRY, records
from rmqsim.impl.commitlog.state import page_closings
from rmqsim.model.api import MQConfig, ProducerMessage
from tests.commitlog.helpers import cq_entry, open_mq, segments


class _Batch(list):  # type: ignore[type-arg]
    """A list subclass: ``validate_messages`` accepts it, the plain path does not take it,
    so a produce of one goes the general way (message by message)."""


_RUNS = st.fixed_dictionaries({
    "offset": st.integers(0, 2**40), "flags": st.sampled_from([0, records.FLAG_BATCH_END]),
    "first_id": st.integers(1, 2**40), "store_time": st.integers(-(2**62), 2**62),
    "incarnation": st.integers(0, 2**40), "topic": st.text(max_size=20).map(str.encode),
    "messages": st.lists(st.tuples(st.binary(max_size=300), st.sampled_from([0, 1])),
                         min_size=1, max_size=12),
})  # fmt: skip


def _encode(run: dict[str, Any]) -> bytes:
    bodies = [body for body, _ in run["messages"]]
    closes = bytes(mark for _, mark in run["messages"])
    return b"".join(records.encode_run(run["offset"], run["flags"], run["first_id"],
                                       run["store_time"], run["incarnation"], run["topic"],
                                       bodies, closes))  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(run=_RUNS, before=st.binary(max_size=9))
def test_a_run_record_parses_back_to_its_messages(run: dict[str, Any], before: bytes) -> None:
    data = before + _encode(run)
    parsed = records.parse_records(data, len(before), run["offset"])
    assert isinstance(parsed, list)
    last = len(run["messages"]) - 1
    assert [(r.queue_offset, r.body, r.flags) for r in parsed] == [
        (run["first_id"] + i, body, records.FLAG_PAGE_CLOSE * mark | (run["flags"] * (i == last)))
        for i, (body, mark) in enumerate(run["messages"])
    ]
    assert {(r.offset, r.size_bytes, r.store_time, r.incarnation, r.topic, r.properties)
            for r in parsed} == {(run["offset"], len(data) - len(before), run["store_time"],
                                  run["incarnation"], run["topic"].decode(), b"")}  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(run=_RUNS, low=st.integers(0, 11), count=st.integers(1, 12))
def test_a_read_builds_only_the_messages_it_asks_for(
    run: dict[str, Any], low: int, count: int
) -> None:  # fmt: skip
    """``wanted``: the same records as a whole parse, sliced; ids outside the run are a
    ``RecordError`` (a consume-queue entry pointing at the wrong run)."""
    data = _encode(run)
    whole = records.parse_records(data, 0, run["offset"])
    assert isinstance(whole, list)
    wanted = (run["first_id"] + low, count)
    if low + count <= len(whole):
        assert records.parse_records(data, 0, run["offset"], wanted) == whole[low : low + count]
    else:
        with pytest.raises(records.RecordError, match="the run holds ids"):
            records.parse_records(data, 0, run["offset"], wanted)
    with pytest.raises(records.RecordError, match="the run holds ids"):
        records.parse_records(data, 0, run["offset"], (run["first_id"] - 1, 1))


@settings(max_examples=80, deadline=None)
@given(run=_RUNS, where=st.integers(0), bit=st.integers(0, 7))
def test_any_flipped_bit_or_cut_refuses_the_whole_run(
    run: dict[str, Any], where: int, bit: int
) -> None:  # fmt: skip
    """What a torn or rotten run looks like: one bit flipped anywhere (the size and magic
    included), or the record cut short. A parser that skipped the CRC would accept
    most of these flips (a body's byte), so this fails on it."""
    data = bytearray(_encode(run))
    where %= len(data)
    data[where] ^= 1 << bit
    with pytest.raises(records.RecordError):
        records.parse_records(bytes(data), 0, run["offset"])
    with pytest.raises(records.RecordError):
        records.parse_records(_encode(run)[:where], 0, run["offset"])
    with pytest.raises(records.RecordError):  # the right bytes at another place
        records.parse_records(_encode(run), 0, run["offset"] + 1)


@pytest.mark.parametrize("field", ["count", "length", "mark", "flags"])
def test_a_run_whose_fields_do_not_add_up_is_refused_even_with_a_matching_crc(
    field: str
) -> None:  # fmt: skip
    """A run written wrong by its writer (the CRC matches what is there): a count, a body
    length, a page mark or a flag that does not fit is a ``RecordError``, never an index
    error or a message cut at the wrong place."""
    data = bytearray(_encode({"offset": 0, "flags": 1, "first_id": 1, "store_time": 0,
                              "incarnation": 1, "topic": b"t",
                              "messages": [(b"ab", 0), (b"cde", 1)]}))  # fmt: skip
    table = records.RUN_HEADER_SIZE_BYTES + 1
    if field == "count":
        struct.pack_into(">I", data, 48, 3)
    elif field == "length":
        struct.pack_into(">I", data, table, 3)
    elif field == "mark":
        data[table + 8] = 2
    else:
        struct.pack_into(">I", data, 12, records.FLAG_CONTROL)
    struct.pack_into(">I", data, 8, records.crc32(bytes(data[12:])))
    with pytest.raises(records.RecordError):
        records.parse_records(bytes(data), 0, 0)


def test_a_run_is_refused_to_its_writer_when_it_breaks_the_format() -> None:
    with pytest.raises(ValueError, match="page-close mark"):
        records.encode_run(0, 0, 1, 0, 1, b"t", [b"a", b"b"], b"\0")
    with pytest.raises(ValueError, match="RUN_BODIES_MAX_BYTES"):
        records.encode_run(0, 0, 1, 0, 1, b"t", [bytes(40 << 10)] * 2, b"\0\0")
    one = b"".join(records.encode_run(0, 0, 1, 0, 1, b"t", [bytes(100 << 10)], b"\0"))
    assert len(one) > records.RUN_BODIES_MAX_BYTES  # one message may exceed it


@given(open_bytes=st.integers(0, 100), lengths=st.lists(st.integers(0, 250), max_size=30),
       page_size=st.integers(1, 100))  # fmt: skip
def test_page_closings_follow_the_message_by_message_rule(
    open_bytes: int, lengths: list[int], page_size: int
) -> None:
    open_bytes = min(open_bytes, page_size)  # an open page never holds more
    closing = page_closings(open_bytes, lengths, page_size)
    expected = []
    for index, length in enumerate(lengths):
        if open_bytes + length > page_size:
            expected.append(index)
            open_bytes = 0
        else:
            open_bytes += length
    assert closing == expected


def _magics(path: Path) -> list[int]:
    """The magic of every record in the log, in order (blank fillers end a segment)."""
    found = []
    for segment in segments(path):
        data, position = segment.read_bytes(), 0
        while position + 8 <= len(data):
            size, magic = struct.unpack_from(">II", data, position)
            if magic in (0, records.MAGIC_BLANK):
                break
            found.append(magic)
            position += size
    return found


def test_the_plain_path_stores_what_the_general_path_stores(tmp_path: Path) -> None:
    """Random batches on 4 KiB segments (rolls, blank fillers, checkpoints, runs split at
    a segment's end) and 300-byte pages (closings inside batches): the same ids, states
    and messages, also reopened and after a crash; the plain store holds run records,
    the general one a record per message."""
    rng = random.Random(5)
    batches = [[ProducerMessage(rng.randbytes(rng.randrange(0, 700)))
                for _ in range(rng.randrange(1, 12))] for _ in range(60)]  # fmt: skip
    config = MQConfig(page_size_bytes=300)
    stores = {}
    for name, wrap in (("plain", list), ("general", _Batch)):
        mq = open_mq(tmp_path / name, mode="async", config=config)
        mq.create_topic("t")
        mq.create_consumer_group("t", "g")
        ids = [mq.produce("t", wrap(batch)) for batch in batches]
        consumed = mq.consume("t", "g", 17)
        stores[name] = (ids, consumed, mq.snapshot())
        mq.flush()
        mq.crash()
        for reopening in range(2):
            reopened = open_mq(tmp_path / name, config=config)
            assert reopened.snapshot() == stores[name][2]
            reopened.create_consumer_group("t", f"again-{reopening}")
            everything = reopened.consume("t", f"again-{reopening}", 10_000)
            assert [m.payload for m in everything] == [m.payload for b in batches for m in b]
            reopened.destroy_consumer_group("t", f"again-{reopening}")
            reopened.close()
    assert stores["plain"] == stores["general"]
    assert len(stores["plain"][2].topics["t"].pages) > 10
    plain, general = _magics(tmp_path / "plain"), _magics(tmp_path / "general")
    assert plain.count(records.MAGIC_RUN) >= len(batches)  # a run per batch, or more
    assert records.MAGIC_RUN not in general
    assert general.count(records.MAGIC_MESSAGE) > sum(map(len, batches))  # and the events
    assert len(segments(tmp_path / "plain")) > 2  # rolled


def test_a_batch_over_the_run_limit_is_split_into_runs(tmp_path: Path) -> None:
    """100 messages of 1 KiB (on 1 MiB segments): two runs, each within
    ``RUN_BODIES_MAX_BYTES``, both read back; the consume-queue entries point at them."""
    mq = open_mq(tmp_path / "s", geometry=HARNESS_GEOMETRY)
    mq.create_topic("t")
    bodies = [bytes([i]) * 1024 for i in range(100)]
    assert mq.produce("t", [ProducerMessage(b) for b in bodies]) == list(range(1, 101))
    mq.create_consumer_group("t", "g")
    assert [m.payload for m in mq.consume("t", "g", 100)] == bodies
    assert [m.payload for m in mq.consume("t", "g", 1)] == []
    mq.close()
    per_run = records.RUN_BODIES_MAX_BYTES // (1024 + records.RUN_PER_MESSAGE_BYTES)
    assert _magics(tmp_path / "s").count(records.MAGIC_RUN) == -(-100 // per_run) == 2
    places = {cq_entry(tmp_path / "s", index, per_file=4096) for index in range(100)}
    assert len(places) == 2 and all(size <= (64 << 10) + 512 for _offset, size in places)
