"""A damaged store opens by recovering what is valid and saying what it dropped, or is
refused with an ``impl.errors`` type naming the file; a corrupt message is never served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqsim.impl import RocksMQ
from rmqsim.impl.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    FormatVersionError,
    NotADatabaseError,
)
from rmqsim.model.api import MQConfig
from tests.commitlog.helpers import cq_dir, cq_entry, open_mq, pm, segments, write_log_bytes


def _store(tmp_path: Path, count: int, *, crash: bool = True) -> tuple[Path, object]:
    path = tmp_path / "store"
    mq = open_mq(path)
    mq.create_topic("t")
    for index in range(count):
        mq.produce("t", [pm(f"message-{index:04d}".encode(), {"k": str(index)})])
    state = mq.snapshot()
    (mq.crash if crash else mq.close)()
    return path, state


def _ids(mq) -> list[int]:
    return [m.msg_id for m in mq.snapshot().topics["t"].messages]


def test_garbage_in_the_middle_of_the_log_drops_it_and_what_follows(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 30)
    offset, size = cq_entry(path, 9)  # id 10
    segment = write_log_bytes(path, offset + size - 3, b"XYZ")  # in its body
    mq = open_mq(path)
    assert _ids(mq) == list(range(1, 10))
    assert any(str(segment) in line and "CRC" in line for line in mq.recovery_report)
    mq.close()


def test_a_damaged_message_before_the_checkpoint_is_refused_not_served(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 100)  # fills a segment: a checkpoint covers id 5
    offset, size = cq_entry(path, 4)
    segment = write_log_bytes(path, offset + size - 1, b"!")
    mq = open_mq(path)
    mq.create_consumer_group("t", "g")
    with pytest.raises(CorruptDatabaseError, match=str(segment)):
        mq.consume("t", "g", 10)
    with pytest.raises(CorruptDatabaseError, match=str(segment)):
        mq.snapshot()
    mq.close()


def test_a_last_segment_of_the_wrong_length_is_resized_and_rescanned(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 100)
    last = segments(path)[-1]
    os.truncate(last, 300)  # cuts a record in two
    mq = open_mq(path)
    report = " ".join(mq.recovery_report)
    assert f"{last}: 300 bytes" in report and "dropped" in report
    ids = _ids(mq)
    assert ids == list(range(1, len(ids) + 1)) and 50 < len(ids) < 100
    mq.close()


def test_a_middle_segment_of_the_wrong_length_is_refused_naming_it(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 200)
    middle = segments(path)[1]
    os.truncate(middle, 4000)
    with pytest.raises(CorruptDatabaseError, match=str(middle)):
        open_mq(path)
    os.truncate(middle, 4096)  # and the refusal left everything as it was
    open_mq(path).close()


def test_a_missing_checkpoint_is_rebuilt_from_the_whole_log(tmp_path: Path) -> None:
    path, state = _store(tmp_path, 100)
    (path / "checkpoint").unlink()
    mq = open_mq(path)
    assert mq.snapshot() == state
    assert any("checkpoint is missing" in line for line in mq.recovery_report)
    mq.close()


def test_a_missing_checkpoint_after_reclaiming_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    config = MQConfig(page_size_bytes=10, retention_time_s=-1, retention_size_bytes=0)
    mq = open_mq(path, config=config)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for _ in range(40):
        mq.produce("t", [pm(b"y" * 300)])
    mq.consume("t", "g", 40)
    mq.run_retention()
    mq.close()
    assert segments(path)[0].name != "0" * 20
    (path / "checkpoint").unlink()
    with pytest.raises(CorruptDatabaseError, match=str(path / "checkpoint")):
        open_mq(path, config=config)


def test_a_damaged_checkpoint_is_refused_naming_it(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 3)
    (path / "checkpoint").write_bytes(b"\x00\x01garbage")
    with pytest.raises(CorruptDatabaseError, match=str(path / "checkpoint")):
        open_mq(path)


def test_a_cleanly_closed_store_whose_log_segments_are_gone_is_refused(tmp_path: Path) -> None:
    """Every segment deleted: the consume queues name a topic the log never created. It
    opened as an empty store (and ``store check`` said CLEAN), every message lost. A
    deleted topic's queue, whose incarnation the log did create, is still removed quietly."""
    path, _state = _store(tmp_path, 5, crash=False)
    mq = open_mq(path)
    mq.create_topic("gone")
    mq.produce("gone", [pm(b"x")])
    mq.destroy_topic("gone")
    mq.close()
    reopened = open_mq(path)  # the deleted topic's consume queue is no damage
    reopened.close()
    for segment in segments(path):
        segment.unlink()
    with pytest.raises(CorruptDatabaseError, match=r"never created .* the log has lost records"):
        open_mq(path)


def test_a_consume_queue_pointing_past_the_log_is_cut_back(tmp_path: Path) -> None:
    path, state = _store(tmp_path, 5, crash=False)
    cq_file = cq_dir(path) / f"{0:020d}"
    with open(cq_file, "r+b") as file:  # entry 5 (id 6): far past the log's end
        file.seek(5 * 20)
        file.write((10**9).to_bytes(8, "big") + (100).to_bytes(4, "big") + (6).to_bytes(8, "big"))
    mq = open_mq(path)
    assert mq.snapshot() == state
    assert any("past the log's end" in line for line in mq.recovery_report)
    assert mq.produce("t", [pm(b"new")]) == [6]
    mq.create_consumer_group("t", "g")
    assert mq.consume("t", "g", 10)[-1].payload == b"new"
    mq.close()


def test_a_consume_queue_entry_pointing_elsewhere_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    path, state = _store(tmp_path, 100)
    cq_file = cq_dir(path) / f"{0:020d}"
    with open(cq_file, "r+b") as file:  # entry 2 (id 3) says it is id 4
        file.seek(2 * 20 + 12)
        file.write((4).to_bytes(8, "big"))
    mq = open_mq(path)
    assert mq.snapshot() == state
    assert any("no entry for id 3" in line for line in mq.recovery_report)
    mq.close()


def test_directories_that_are_no_commit_log_store_are_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(NotADatabaseError, match=str(a_file)):
        open_mq(a_file)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.txt").write_text("x")
    with pytest.raises(NotADatabaseError, match="rmqsim-commitlog"):
        open_mq(foreign)
    rocks = tmp_path / "rocks"
    RocksMQ.open(str(rocks)).close()
    with pytest.raises(NotADatabaseError):
        open_mq(rocks)


def test_a_store_open_elsewhere_is_refused(tmp_path: Path) -> None:
    mq = open_mq(tmp_path / "store")
    with pytest.raises(DatabaseLockedError):
        open_mq(tmp_path / "store")
    mq.close()
    open_mq(tmp_path / "store").close()


def test_a_damaged_or_newer_format_file_is_refused(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 1)
    (path / "rmqsim-commitlog").write_text("rmqsim commitlog 9\n")
    with pytest.raises(FormatVersionError, match="rmqsim-commitlog"):
        open_mq(path)
    (path / "rmqsim-commitlog").write_text("rmqsim commitlog 2\nsegment_size_bytes=x\n")
    with pytest.raises(CorruptDatabaseError, match="rmqsim-commitlog"):
        open_mq(path)


def test_a_format_1_store_opens_and_is_marked_format_2_before_anything_is_written(
    tmp_path: Path
) -> None:  # fmt: skip
    """A store of format 1 (a record per message, as the general path still writes) is
    read as it is; its format file says 2 from its first open on, so that an rmqsim that
    knows only format 1 refuses it instead of taking run records for a damaged tail."""
    path = tmp_path / "store"
    mq = open_mq(path)
    mq.create_topic("t")
    mq.produce("t", _OneByOne([pm(b"old-%d" % i) for i in range(5)]))
    expected = mq.snapshot()
    mq.close()
    format_file = path / "rmqsim-commitlog"
    text = format_file.read_text()
    assert text.startswith("rmqsim commitlog 2\n")
    format_file.write_text(text.replace("rmqsim commitlog 2", "rmqsim commitlog 1"))
    mq = open_mq(path)
    assert format_file.read_text() == text
    assert mq.snapshot() == expected and mq.recovery_report == ()
    mq.produce("t", [pm(b"new")])  # a run record after the message records
    mq.create_consumer_group("t", "g")
    assert [m.payload for m in mq.consume("t", "g", 9)] == [b"old-%d" % i for i in range(5)] + [
        b"new"]
    mq.close()


class _OneByOne(list):  # type: ignore[type-arg]
    """A list subclass: a produce of one stores a record per message (format 1's way)."""


def test_a_foreign_file_among_the_segments_is_refused_naming_it(tmp_path: Path) -> None:
    path, _state = _store(tmp_path, 1)
    stray = path / "commitlog" / "notes.txt"
    stray.write_text("x")
    with pytest.raises(CorruptDatabaseError, match=str(stray)):
        open_mq(path)


def test_records_after_a_truncation_never_come_back(tmp_path: Path) -> None:
    """Truncating zeroes the rest of the segment: a record written over a dropped one of
    the same size must not make the stale records after it valid again."""
    path, _state = _store(tmp_path, 30)
    offset, size = cq_entry(path, 9)
    write_log_bytes(path, offset + size - 3, b"XYZ")
    mq = open_mq(path)
    assert mq.produce("t", [pm(b"message-9999", {"k": "9"})]) == [10]  # same size as id 10
    mq.crash()
    mq = open_mq(path)
    assert _ids(mq) == list(range(1, 11)) and mq.recovery_report == ()
    mq.close()
