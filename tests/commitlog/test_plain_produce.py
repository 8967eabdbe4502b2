"""The batch-level produce path (messages without properties: ``queue._produce_plain``)
writes exactly what the general path writes: the same records, page closings, metadata,
consume-queue entries and files, segment rolls included."""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqsim.impl.commitlog import records
from rmqsim.impl.commitlog.log import PendingRecord
from rmqsim.impl.commitlog.state import page_closings
from rmqsim.model.api import MQConfig, ProducerMessage
from tests.commitlog.helpers import open_mq


class _Batch(list):  # type: ignore[type-arg]
    """A list subclass: ``validate_messages`` accepts it, the plain path does not take it,
    so a produce of one goes the general way (message by message)."""


@settings(max_examples=60, deadline=None)
@given(
    offset=st.integers(0, 2**40), first_id=st.integers(1, 2**40),
    store_time=st.integers(-(2**62), 2**62), incarnation=st.integers(0, 2**40),
    topic=st.binary(max_size=40),
    messages=st.lists(st.tuples(st.binary(max_size=300), st.sampled_from([0, 1, 2, 3])),
                      min_size=1, max_size=12),
)  # fmt: skip
def test_a_plain_run_encodes_to_the_general_encoders_bytes(
    offset: int, first_id: int, store_time: int, incarnation: int, topic: bytes,
    messages: list[tuple[bytes, int]],
) -> None:  # fmt: skip
    bodies = [body for body, _ in messages]
    flags = [flag for _, flag in messages]
    pending = [PendingRecord(flag, first_id + i, store_time, incarnation, topic, b"", body)
               for i, (body, flag) in enumerate(messages)]  # fmt: skip
    parts, _placed = records.encode_batch(offset, pending)
    assert records.encode_plain_run(offset, first_id, store_time, incarnation, topic, bodies,
                                    flags) == b"".join(parts)  # fmt: skip


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


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != "lock"}  # fmt: skip


def test_the_plain_path_writes_the_general_paths_files(tmp_path: Path) -> None:
    """Random batches on 4 KiB segments (rolls, blank fillers, checkpoints) and 300-byte
    pages (closings inside batches): byte-identical stores and states, also reopened."""
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
        mq.consume("t", "g", 17)
        stores[name] = (ids, mq.snapshot())
        mq.close()
        reopened = open_mq(tmp_path / name, config=config)
        assert reopened.snapshot() == stores[name][1]
        reopened.close()
    assert stores["plain"] == stores["general"]
    assert len(stores["plain"][1].topics["t"].pages) > 10
    assert _files(tmp_path / "plain") == _files(tmp_path / "general")
    assert len(list((tmp_path / "plain" / "commitlog").iterdir())) > 2  # rolled
