"""The commit log's read path (``CommitLogMQ._read``: a consume, a ``read``, a snapshot)
keeps every check while it builds messages straight from a run's bodies: damage found
on disk after the open (a flipped byte, a zeroed or misplaced consume-queue entry) is a
``CorruptDatabaseError`` naming the file and nothing moves the group; a run's CRC is
computed once per read of it; properties come back as fresh dicts."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rmqsim.impl.commitlog import CommitLogMQ, records
from rmqsim.impl.errors import CorruptDatabaseError
from tests.commitlog.helpers import cq_dir, cq_entry, open_mq, pm, write_log_bytes

_BIG = 1 << 20  # one segment: every run of the store lies in it


def _store(path: Path) -> CommitLogMQ:
    """Ids 1..8 as two runs of four (no properties), then ids 9..10 with properties."""
    from rmqsim.impl.commitlog import Geometry

    mq = open_mq(path, geometry=Geometry(segment_size_bytes=_BIG, cq_entries_per_file=64))
    mq.create_topic("t")
    for batch in range(2):
        mq.produce("t", [pm(b"run%d-%d" % (batch, index) * 10) for index in range(4)])
    mq.produce("t", [pm(b"nine", {"k": "v"}), pm(b"ten", {"k": "w", "x": "y"})])
    mq.create_consumer_group("t", "g")
    return mq


def _entry(path: Path, index: int) -> tuple[int, int]:
    return cq_entry(path, index, per_file=64)


def test_a_read_gives_each_message_with_fresh_properties(tmp_path: Path) -> None:
    mq = _store(tmp_path / "s")
    got = mq.consume("t", "g", 10)
    assert [m.msg_id for m in got] == list(range(1, 11))
    assert got[5].payload == b"run1-1" * 10 and got[8].payload == b"nine"
    assert [dict(m.properties) for m in got[7:]] == [{}, {"k": "v"}, {"k": "w", "x": "y"}]
    assert len({id(m.properties) for m in got}) == 10  # no dict shared between messages
    got[0].properties["added"] = "1"  # type: ignore[index]
    got[8].properties["k"] = "changed"  # type: ignore[index]
    again = mq.read("t", 1, 10)
    assert again[0].properties == {} and again[8].properties == {"k": "v"}
    assert [m.msg_id for m in mq.read("t", 3, 4)] == [3, 4, 5, 6]  # across two runs
    mq.close()


def test_a_run_is_crc_checked_once_per_read(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    mq = _store(tmp_path / "s")
    calls: list[int] = []
    real = records.crc32

    def counting(data: bytes, *start: int) -> int:
        calls.append(len(data))
        return real(data, *start)

    monkeypatch.setattr(records, "crc32", counting)
    assert len(mq.read("t", 2, 6)) == 6  # ids 2..4 of the first run, 5..7 of the second
    assert len(calls) == 2, calls
    calls.clear()
    assert len(mq.read("t", 1, 10)) == 10  # two runs, two message records
    assert len(calls) == 4, calls
    mq.close()


def test_a_byte_flipped_in_a_run_is_refused_and_the_group_stays(tmp_path: Path) -> None:
    path = tmp_path / "s"
    mq = _store(path)
    offset, size = _entry(path, 5)  # index 5: id 6, in the second run (ids 5..8)
    segment = write_log_bytes(path, offset + size - 3, b"\xff", segment_size=_BIG)
    with pytest.raises(CorruptDatabaseError, match=f"{re.escape(str(segment))}.*CRC mismatch"):
        mq.consume("t", "g", 6)
    with pytest.raises(CorruptDatabaseError, match="CRC mismatch"):
        mq.read("t", 8, 1)
    assert [m.msg_id for m in mq.consume("t", "g", 4)] == [1, 2, 3, 4]  # the group stayed
    mq.crash()


def test_a_byte_flipped_in_a_message_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    mq = _store(path)
    offset, size = _entry(path, 9)  # index 9: id 10, a message record of its own
    write_log_bytes(path, offset + size - 2, b"\x00", segment_size=_BIG)
    with pytest.raises(CorruptDatabaseError, match="CRC mismatch"):
        mq.read("t", 10, 1)
    assert mq.read("t", 9, 1)[0].payload == b"nine"
    mq.crash()


def _rewrite_entry(path: Path, index: int, place: bytes) -> None:
    """Overwrite entry ``index``'s first 12 bytes (its log offset and size)."""
    fd = os.open(cq_dir(path) / f"{0:020d}", os.O_RDWR)
    try:
        os.pwrite(fd, place, index * 20)
    finally:
        os.close(fd)


def test_a_zeroed_entry_is_no_entry_for_its_id(tmp_path: Path) -> None:
    path = tmp_path / "s"
    mq = _store(path)
    _rewrite_entry(path, 6, bytes(12))  # id 7: size 0, "none"
    with pytest.raises(CorruptDatabaseError, match="no entry for id 7"):
        mq.consume("t", "g", 10)
    assert [m.msg_id for m in mq.read("t", 1, 6)] == list(range(1, 7))
    mq.crash()


def test_an_entry_pointing_at_another_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    mq = _store(path)
    first_run = (cq_dir(path) / f"{0:020d}").read_bytes()[:12]
    _rewrite_entry(path, 6, first_run)  # id 7 pointing at the run of ids 1..4
    with pytest.raises(CorruptDatabaseError, match=r"the run holds ids 1\.\.4"):
        mq.read("t", 5, 4)
    message_nine = (cq_dir(path) / f"{0:020d}").read_bytes()[8 * 20 : 8 * 20 + 12]
    _rewrite_entry(path, 9, message_nine)  # id 10 pointing at id 9's record
    with pytest.raises(CorruptDatabaseError, match="the entry of id 10 points at another"):
        mq.read("t", 10, 1)
    mq.crash()
