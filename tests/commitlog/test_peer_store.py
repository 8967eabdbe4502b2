"""RocketMQ's store tests that apply to this backend, ported.

- ``DefaultMessageStoreTest.testRecover``: damage the last message, restart normally and
  then abnormally (abort file present): the log and the consume queue roll back to the
  message before, and the store stays writable;
- ``ConsumeQueueTest.testCorrectMinOffset`` and the min offset after reclaiming;
- the dispatcher (``ReputMessageService``, ``testPutMessagePositionInfo_buildCQRepeatedly``):
  consume queues rebuilt from the log, replaying twice adds nothing;
- ``AppendCallbackTest.testAppendMessageBatchEndOfFile``/``testAppendMessageBatchSucc``:
  a record that does not fit leaves a blank filler and starts the next segment.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from rmqsim.impl.commitlog import records
from rmqsim.impl.commitlog.cq import Entry, correct_min_offset
from rmqsim.impl.commitlog.recovery import RecoveryHooks, truncate_after_last_operation
from rmqsim.model.api import MQConfig
from tests.commitlog.helpers import (
    SMALL,
    cq_dir,
    cq_entry,
    open_mq,
    pm,
    segments,
    write_log_bytes,
)


def _produce_one_by_one(mq, count: int, topic: str = "t") -> None:
    mq.create_topic(topic)
    for index in range(count):
        mq.produce(topic, [pm(f"body-{index}".encode())])


def _damage_last_message_topic_length(path: Path, index: int) -> None:
    """As testRecover: zeros over the record's topic-length area (here at byte 48)."""
    offset, _size = cq_entry(path, index)
    write_log_bytes(path, offset + 48, b"\0\0\0\0")


def _check_recover(tmp_path: Path, *, abnormal: bool) -> None:
    path = tmp_path / "store"
    mq = open_mq(path)
    _produce_one_by_one(mq, 100)
    assert mq.get_latest_msg("t") == 100
    if abnormal:
        mq.crash()
        assert (path / "abort").exists()
    else:
        mq.close()
        assert not (path / "abort").exists()
    # A restart with nothing damaged keeps everything.
    mq = open_mq(path)
    assert mq.get_latest_msg("t") == 100 and mq.recovery_report == ()
    (mq.crash if abnormal else mq.close)()
    _damage_last_message_topic_length(path, 99)
    mq = open_mq(path)
    assert mq.get_latest_msg("t") == 99
    assert any("dropped from offset" in line for line in mq.recovery_report)
    mq.create_consumer_group("t", "g")
    assert [m.msg_id for m in mq.consume("t", "g", 200)] == list(range(1, 100))
    assert mq.produce("t", [pm(b"after")]) == [100]  # writable again
    mq.close()
    mq = open_mq(path)
    assert mq.get_latest_msg("t") == 100 and mq.recovery_report == ()
    mq.close()


def test_recover_damaged_last_message_after_a_normal_shutdown(tmp_path: Path) -> None:
    _check_recover(tmp_path, abnormal=False)


def test_recover_damaged_last_message_after_an_abnormal_shutdown(tmp_path: Path) -> None:
    _check_recover(tmp_path, abnormal=True)


def test_correct_min_offset_as_consume_queue_test() -> None:
    entries: list[Entry | None] = [Entry(100 * i, 100, i + 1) for i in range(50)]
    assert correct_min_offset(entries, 2000) == 20
    assert correct_min_offset(entries, 0) == 0
    assert correct_min_offset(entries, 100 * 50) == 50  # beyond every entry: min = max


def test_reclaiming_moves_the_consume_queue_min_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "store"
    config = MQConfig(page_size_bytes=100, retention_time_s=-1, retention_size_bytes=0)
    mq = open_mq(path, config=config)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for _ in range(60):
        mq.produce("t", [pm(b"x" * 150)])
    first_segments = segments(path)
    assert len(first_segments) > 2
    mq.consume("t", "g", 55)
    mq.run_retention()
    assert segments(path)[0] != first_segments[0]  # whole segments reclaimed
    cq_files = sorted(p.name for p in cq_dir(path).iterdir())
    assert int(cq_files[0]) + SMALL.cq_entries_per_file > 53  # files below the min removed
    assert int(cq_files[0]) > 0
    expected = mq.snapshot()
    assert [m.msg_id for m in expected.topics["t"].messages] == list(range(55, 61))
    mq.crash()
    mq = open_mq(path, config=config)
    assert mq.snapshot() == expected
    mq.close()


def test_the_dispatcher_rebuilds_a_lost_consume_queue_and_replays_without_duplicates(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    mq = open_mq(path)
    _produce_one_by_one(mq, 30)  # all after the checkpoint: the replay dispatches them
    expected = mq.snapshot()
    mq.crash()
    shutil.rmtree(cq_dir(path))
    mq = open_mq(path)
    assert mq.snapshot() == expected and mq.recovery_report == ()
    for index in range(70):  # fills a segment: a checkpoint now covers the entries
        mq.produce("t", [pm(f"more-{index}".encode())])
    expected = mq.snapshot()
    mq.crash()
    shutil.rmtree(cq_dir(path))
    mq = open_mq(path)
    assert mq.snapshot() == expected
    assert any("rebuilt from the whole log" in line for line in mq.recovery_report)
    mq.crash()
    for _ in range(2):  # build the consume queue repeatedly: nothing doubles
        mq = open_mq(path)
        assert mq.snapshot() == expected
        mq.crash()


def test_a_record_that_does_not_fit_leaves_a_blank_filler(tmp_path: Path) -> None:
    path = tmp_path / "store"
    mq = open_mq(path)
    mq.create_topic("t")
    # 5 x ~1005 > 4096: a run of 3, then a run of 2 in the next segment
    ids = mq.produce("t", [pm(b"p" * 1000) for _ in range(5)])
    assert ids == [1, 2, 3, 4, 5]
    first, second = segments(path)[:2]
    assert second.name == f"{4096:020d}"
    data = first.read_bytes()
    position, queue_offsets = 0, []
    while True:
        parsed = records.parse_records(data, position, position)
        if isinstance(parsed, int):
            break
        # the create_topic event comes first, then the messages' run
        queue_offsets += [r.queue_offset for r in parsed if not r.is_control]
        position += parsed[0].size_bytes
    assert parsed == 4096 - position >= records.BLANK_SIZE_BYTES
    assert struct.unpack(">II", data[position : position + 8]) == (4096 - position,
                                                                   records.MAGIC_BLANK)
    assert queue_offsets == [1, 2, 3]  # consecutive, each record checked
    offset, _size = cq_entry(path, 3)
    assert offset == 4096  # the fourth message starts the next segment
    mq.close()
    mq = open_mq(path)
    mq.create_consumer_group("t", "g")
    assert [m.payload for m in mq.consume("t", "g", 9)] == [b"p" * 1000] * 5
    mq.close()


def test_a_record_bigger_than_a_segment_gets_a_bigger_segment(tmp_path: Path) -> None:
    path = tmp_path / "store"
    mq = open_mq(path)
    mq.create_topic("t")
    mq.produce("t", [pm(b"a"), pm(b"b" * 10_000), pm(b"c")])
    sizes = [p.stat().st_size for p in segments(path)]
    assert sizes[1] == 3 * 4096 and all(size % 4096 == 0 for size in sizes)
    mq.crash()
    mq = open_mq(path)
    mq.create_consumer_group("t", "g")
    assert [len(m.payload) for m in mq.consume("t", "g", 9)] == [1, 10_000, 1]
    mq.close()


def test_an_entry_pointing_below_the_log_is_corrected_from_the_log(tmp_path: Path) -> None:
    """The min-offset check at recovery: the first retained id's entry must point at or
    after the log's first byte; one pointing into a reclaimed segment is rebuilt."""
    path = tmp_path / "store"
    config = MQConfig(page_size_bytes=100, retention_time_s=-1, retention_size_bytes=0)
    mq = open_mq(path, config=config)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for _ in range(60):
        mq.produce("t", [pm(b"x" * 150)])
    mq.consume("t", "g", 55)
    mq.run_retention()
    expected = mq.snapshot()
    mq.crash()
    index = 54  # id 55, the first retained
    first = index - index % SMALL.cq_entries_per_file
    with open(cq_dir(path) / f"{first:020d}", "r+b") as file:
        file.seek((index - first) * 20)
        file.write((0).to_bytes(8, "big"))  # into the reclaimed first segment
    mq = open_mq(path, config=config)
    assert mq.snapshot() == expected
    assert any("below the log's first offset" in line for line in mq.recovery_report)
    mq.close()


def test_recovery_truncates_where_its_named_hook_says(tmp_path: Path) -> None:
    """``RecoveryHooks.truncation_offset`` is where step 7 truncates (the extension point
    the truncate-one-record-off mutant uses): called once with the valid records and the
    end of the last whole operation, and the default keeps every valid record."""
    path = tmp_path / "store"
    mq = open_mq(path)
    _produce_one_by_one(mq, 3)
    mq.close()
    _damage_last_message_topic_length(path, 2)
    calls: list[tuple[int, int]] = []

    def spy(valid, end_offset: int) -> int:
        calls.append((valid[-1].queue_offset, end_offset))
        return truncate_after_last_operation(valid, end_offset)

    mq = open_mq(path, hooks=RecoveryHooks(truncation_offset=spy))
    second_offset, second_size = cq_entry(path, 1)
    assert calls == [(2, second_offset + second_size)]
    assert mq.get_latest_msg("t") == 2
    mq.close()
    assert RecoveryHooks().truncation_offset is truncate_after_last_operation
