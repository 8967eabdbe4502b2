"""Reopen restores exactly the last state: topics, messages with properties, pages with
their acks, open page bytes, group positions, and the id high-water marks of every name,
destroyed names included; after a clean close and after ``crash()``; and the caches
rebuilt on open behave exactly like the ones before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from impl_helpers.script import CONFIG, STEPS, ScriptClock, pm

from rmqsim.impl import RocksMQ, storage
from rmqsim.impl.storage import CRASH_HOLD_DIR_NAME
from rmqsim.model.api import NotServingError


def _run_script(mq: RocksMQ, clock: ScriptClock, upto: int) -> None:
    for _, action in STEPS[:upto]:
        action(mq, clock)


@pytest.mark.parametrize("crash", [False, True], ids=["close", "crash"])
@pytest.mark.parametrize("upto", [6, 11, 17, 21, 28, len(STEPS)])
def test_reopen_restores_everything(tmp_path: Path, crash: bool, upto: int) -> None:
    clock = ScriptClock()
    mq = RocksMQ.open(tmp_path / "db", CONFIG, clock=clock)
    _run_script(mq, clock, upto)
    expected = mq.snapshot()
    mq.crash() if crash else mq.close()
    again = RocksMQ.open(tmp_path / "db", CONFIG, clock=clock)
    try:
        assert again.snapshot() == expected
    finally:
        again.close()


def test_reopened_queue_continues_ids_positions_and_acks(tmp_path: Path) -> None:
    clock = ScriptClock()
    path = tmp_path / "db"
    mq = RocksMQ.open(path, CONFIG, clock=clock)
    mq.create_topic("t")
    mq.create_topic("gone")
    assert mq.produce("gone", [pm(b"1"), pm(b"2"), pm(b"3")]) == [1, 2, 3]
    mq.destroy_topic("gone")
    mq.create_consumer_group("t", "g")
    mq.create_consumer_group("t", "h")
    assert mq.produce("t", [pm(b"a" * 11), pm(b"b"), pm(b"c" * 10, p="q")]) == [1, 2, 3]
    assert [m.msg_id for m in mq.consume("t", "g", 2)] == [1, 2]
    mq.crash()

    mq = RocksMQ.open(path, CONFIG, clock=clock)
    # The destroyed name keeps its high-water mark: a re-created topic continues at 4.
    mq.create_topic("gone")
    assert mq.produce("gone", [pm(b"4")]) == [4]
    # Positions survived: g continues at 3, h (never read) from the earliest.
    got = mq.consume("t", "g", 10)
    assert [(m.msg_id, m.payload, m.properties) for m in got] == [(3, b"c" * 10, {"p": "q"})]
    assert [m.msg_id for m in mq.consume("t", "h", 1)] == [1]
    # Acks are evaluated against the restored pages: h at 2 > end_id 1 acked page 1 (at
    # 1000, the restored g at 3 counting); h at 4 acks page 3.
    clock.now = 2_000
    mq.seek_to_latest("t", "h")
    pages = mq.snapshot().topics["t"].pages
    assert [(p.end_id, p.acked_ts) for p in pages] == [(1, 1_000), (3, 2_000)]
    mq.close()

    mq = RocksMQ.open(path, CONFIG, clock=clock)
    assert [(p.end_id, p.acked_ts) for p in mq.snapshot().topics["t"].pages] == [
        (1, 1_000),
        (3, 2_000),
    ]
    clock.now = 3_000
    mq.run_retention()
    state = mq.snapshot().topics["t"]
    assert state.messages == () and state.pages == () and state.last_id == 3
    assert mq.get_latest_msg("t") == -1
    mq.close()

    mq = RocksMQ.open(path, CONFIG, clock=clock)
    assert mq.produce("t", [pm(b"x")]) == [4]  # ids continue after retention emptied it
    mq.seek("t", "g", 4)
    assert [m.msg_id for m in mq.consume("t", "g", 5)] == [4]
    mq.close()


def test_close_twice_and_everything_after_close_is_not_serving(tmp_path: Path) -> None:
    mq = RocksMQ.open(tmp_path / "db")
    mq.create_topic("t")
    mq.close()
    mq.close()
    for call in (
        lambda: mq.create_topic("t"),
        lambda: mq.produce("t", []),
        lambda: mq.snapshot(),
        lambda: mq.run_retention(),
        lambda: mq.exist_consumer_group("t", "g"),
    ):
        with pytest.raises(NotServingError):
            call()
    # The lock is released: the same path opens again at once.
    RocksMQ.open(tmp_path / "db").close()


def _files(path: Path) -> dict[str, int]:
    """Name -> size of every file but RocksDB's informational LOG."""
    return {
        name: os.path.getsize(path / name)
        for name in sorted(os.listdir(path))
        if not name.startswith("LOG")
    }


def test_crash_writes_nothing_more(tmp_path: Path) -> None:
    """``crash()`` flushes no memtable: the files are the same before and after it, and
    reopening recovers the data from the WAL alone."""
    path = tmp_path / "db"
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    mq.produce("t", [pm(b"payload")])
    before = _files(path)
    mq.crash()
    assert _files(path) == before
    assert not any(name.endswith(".sst") for name in before)
    mq = RocksMQ.open(path)
    assert [m.payload for m in mq.snapshot().topics["t"].messages] == [b"payload"]
    mq.close()


def test_a_crash_over_a_hold_left_by_an_interrupted_crash_still_writes_nothing(
    tmp_path: Path,
) -> None:
    """``crash()`` freezes into a hold directory it then empties link by link: a hold an
    interrupted crash left behind (with a stray file in it) is replaced, the crash still
    leaves the files as they were, and no hold remains."""
    path = tmp_path / "db"
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    mq.produce("t", [pm(b"payload")])
    before = _files(path)
    hold = path / CRASH_HOLD_DIR_NAME
    hold.mkdir()
    (hold / "stray").write_bytes(b"left over")
    mq.crash()
    assert _files(path) == before
    assert not hold.exists()
    mq = RocksMQ.open(path)
    assert [m.payload for m in mq.snapshot().topics["t"].messages] == [b"payload"]
    mq.close()


def test_thaw_puts_back_what_changed_after_the_freeze(tmp_path: Path) -> None:
    """What a RocksDB close may do after the crash instant is undone, file by file: a
    deleted file comes back, one replaced by a rename (``CURRENT``) is the frozen one
    again, an appended one is cut back, a new one is removed; and the hold is gone."""
    frozen_bytes = {
        "CURRENT": b"MANIFEST-000005\n",
        "MANIFEST-000005": b"manifest",
        "000004.log": b"wal",
        "000007.sst": b"table",
        "OPTIONS-000006": b"options",
    }
    for name, content in frozen_bytes.items():
        (tmp_path / name).write_bytes(content)
    frozen = storage._freeze(str(tmp_path))
    assert sorted(frozen) == sorted(frozen_bytes)
    (tmp_path / "000007.sst").unlink()
    (tmp_path / "CURRENT.tmp").write_bytes(b"MANIFEST-000009\n")
    os.replace(tmp_path / "CURRENT.tmp", tmp_path / "CURRENT")
    with open(tmp_path / "000004.log", "ab") as log:
        log.write(b" appended")
    (tmp_path / "000009.sst").write_bytes(b"flushed on close")
    storage._thaw(str(tmp_path), frozen)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == frozen_bytes


def test_crash_after_close_and_close_after_crash_are_harmless(tmp_path: Path) -> None:
    mq = RocksMQ.open(tmp_path / "db")
    mq.close()
    mq.crash()
    mq.close()
    with pytest.raises(NotServingError):
        mq.snapshot()
