"""Damaged databases: ``RocksMQ.open`` refuses every one it cannot prove intact, names the
damaged file, and leaves every byte of the directory as it was (RocksDB never ran
read-write on it). A WAL cut short after a crash is the one damage recovered from: what
is lost is the operation that was being written, whole (impl/storage.py's docstring).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rocksdict import Options, Rdict

from rmqsim.impl import CorruptDatabaseError, RocksMQ
from rmqsim.impl.integrity import RECORD_FILE_NAME
from rmqsim.impl.storage import Store
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import ProducerMessage

MESSAGES = 50
PAYLOAD = b"p" * 100
CHILD = Path(__file__).resolve().parent / "impl_helpers" / "sigkill_child.py"
REPO = Path(__file__).resolve().parent.parent


def _fill(mq: Any, batches: int, per_batch: int) -> None:
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for _ in range(batches):
        mq.produce("t", [ProducerMessage(PAYLOAD)] * per_batch)


def _make(path: Path, *, crash: bool = False, batches: int = MESSAGES, per_batch: int = 1) -> None:
    """A topic, a group and ``batches`` produces; closed cleanly, or crashed."""
    mq = RocksMQ.open(path, clock=_clock)
    _fill(mq, batches, per_batch)
    if crash:
        mq.crash()
    else:
        mq.close()


def _clock() -> int:
    return 1_000


def _tree(path: Path) -> dict[str, str]:
    """Every file of the directory, by name, with the SHA-256 of its bytes."""
    return {
        name: hashlib.sha256((path / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(path))
    }


def _one(path: Path, pattern: str) -> Path:
    found = sorted(path.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def _garble(file: Path, offset: int | None = None) -> None:
    """Flip 16 bytes, in the middle of the file unless ``offset`` is given."""
    data = bytearray(file.read_bytes())
    start = len(data) // 2 if offset is None else offset
    for index in range(start, min(start + 16, len(data))):
        data[index] ^= 0xFF
    file.write_bytes(bytes(data))


def _truncate(file: Path, size_bytes: int | None = None) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2 if size_bytes is None else size_bytes])


def _refused(path: Path, named: str) -> CorruptDatabaseError:
    """Open is refused with a CorruptDatabaseError naming ``named``; no byte changed."""
    before = _tree(path)
    with pytest.raises(CorruptDatabaseError) as caught:
        RocksMQ.open(path)
    assert named in str(caught.value), str(caught.value)
    assert _tree(path) == before, "a refused open changed the directory"
    with pytest.raises(CorruptDatabaseError):  # and so again: the refusal is stable
        RocksMQ.open(path)
    assert _tree(path) == before
    return caught.value


# --------------------------------------------------------------------- after a clean close


def test_truncated_manifest_is_refused_and_the_table_file_kept(tmp_path: Path) -> None:
    """Issue 25's finding: RocksDB reads a MANIFEST cut in half as an older, empty
    database, and its read-write open deleted the table file holding every message."""
    _make(tmp_path)
    table = _one(tmp_path, "*.sst")
    manifest = _one(tmp_path, "MANIFEST-*")
    _truncate(manifest)
    _refused(tmp_path, manifest.name)
    assert table.exists()


def test_garbled_manifest_is_refused(tmp_path: Path) -> None:
    _make(tmp_path)
    manifest = _one(tmp_path, "MANIFEST-*")
    _garble(manifest)
    _refused(tmp_path, manifest.name)


def test_current_missing_garbled_or_naming_a_missing_manifest_is_refused(
    tmp_path: Path,
) -> None:
    """Missing, ``CURRENT`` became, under create_if_missing, a new empty database over
    the old files; garbled or naming a missing MANIFEST, RocksDB refused it already."""
    damages: dict[str, Callable[[Path], None]] = {
        "missing": lambda current: current.unlink(),
        "garbled": lambda current: _garble(current, offset=0),
        "missing-manifest": lambda current: current.write_bytes(b"MANIFEST-999999\n"),
    }
    for name, damage in damages.items():
        path = tmp_path / name
        _make(path)
        damage(path / "CURRENT")
        _refused(path, "CURRENT")


@pytest.mark.parametrize("damage", [_garble, _truncate], ids=["garbled", "truncated"])
def test_damaged_options_file_is_refused(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    _make(tmp_path)
    options = sorted(tmp_path.glob("OPTIONS-*"))[-1]
    damage(options)
    _refused(tmp_path, options.name)


@pytest.mark.parametrize("damage", [_garble, _truncate], ids=["garbled", "truncated"])
def test_damaged_table_file_is_refused(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    _make(tmp_path)
    table = _one(tmp_path, "*.sst")
    damage(table)
    _refused(tmp_path, table.name)


def test_damaged_or_missing_integrity_record_is_refused(tmp_path: Path) -> None:
    _make(tmp_path)
    record = tmp_path / RECORD_FILE_NAME
    _garble(record)
    _refused(tmp_path, RECORD_FILE_NAME)
    # JSON of the wrong shape, or without a field: named as such, not as Python's error
    for text, says in (("[]", "not a sealed record"), ('{"body": {}}', "no field 'sha256'")):
        record.write_text(text)
        assert says in str(_refused(tmp_path, RECORD_FILE_NAME))
    record.unlink()  # a database of ours with data but no record cannot be proven intact
    _refused(tmp_path, RECORD_FILE_NAME)


def test_a_file_left_in_a_closed_database_is_refused(tmp_path: Path) -> None:
    """RocksDB would delete a table file it does not know: not in a directory rmqsim
    closed without it."""
    _make(tmp_path)
    table = _one(tmp_path, "*.sst")
    (tmp_path / "999999.sst").write_bytes(table.read_bytes())
    _refused(tmp_path, "999999.sst")


# --------------------------------------------------------------------- after a crash


def test_wal_garbled_after_a_crash_is_refused(tmp_path: Path) -> None:
    """RocksDB's default recovery would stop at the bad record and then delete the WAL
    holding everything after it; rmqsim refuses (a bad checksum is damage)."""
    _make(tmp_path, crash=True)
    wal = _one(tmp_path, "*.log")
    _garble(wal)
    _refused(tmp_path, wal.name)


def test_wal_garbled_after_a_sigkill_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "db"
    _kill_child_after(path, produces=30)
    wal = max(path.glob("*.log"), key=lambda file: file.stat().st_size)
    _garble(wal)
    _refused(path, wal.name)


def test_manifest_cut_below_what_rmqsim_saw_is_refused_after_a_crash(tmp_path: Path) -> None:
    _make(tmp_path)  # the table file of the 50 messages
    mq = RocksMQ.open(tmp_path)  # records the new MANIFEST and the live table files
    mq.produce("t", [ProducerMessage(PAYLOAD)])
    mq.crash()
    manifest = _one(tmp_path, "MANIFEST-*")
    _truncate(manifest)
    _refused(tmp_path, manifest.name)
    assert list(tmp_path.glob("*.sst"))


def test_table_file_garbled_after_a_crash_is_refused(tmp_path: Path) -> None:
    _make(tmp_path)
    mq = RocksMQ.open(tmp_path)
    mq.produce("t", [ProducerMessage(PAYLOAD)])
    mq.crash()
    table = _one(tmp_path, "*.sst")
    _garble(table)
    _refused(tmp_path, table.name)


def test_wal_cut_short_after_a_crash_loses_only_the_last_operation_whole(tmp_path: Path) -> None:
    """A WAL whose last record is incomplete is what a crash in the middle of writing it
    leaves (or a power loss, for writes not yet synced): RocksDB drops that record, and
    rmqsim accepts it. A record is one operation's batch, so the state recovered is the
    state before that operation (SPEC: all or nothing), the ones before all kept."""
    batches, per_batch = 20, 3
    _make(tmp_path, crash=True, batches=batches, per_batch=per_batch)
    wal = _one(tmp_path, "*.log")
    _truncate(wal, wal.stat().st_size - 5)  # into the last record: the 20th produce
    before_last = ReferenceMQ(clock=_clock)
    _fill(before_last, batches - 1, per_batch)
    mq = RocksMQ.open(tmp_path, clock=_clock)
    try:
        assert mq.snapshot() == before_last.snapshot()
        assert mq.snapshot().topics["t"].last_id == (batches - 1) * per_batch
        assert mq.produce("t", [ProducerMessage(b"next")]) == [(batches - 1) * per_batch + 1]
    finally:
        mq.close()


def test_a_database_reopened_by_rocksdb_since_the_clean_close_still_opens(
    tmp_path: Path,
) -> None:
    """An open that crashed before writing its record (here: another RocksDB writer)
    leaves a newer MANIFEST than the closed record names: checked as after a crash."""
    _make(tmp_path)
    _plain_rocksdb_open(tmp_path)
    mq = RocksMQ.open(tmp_path)
    assert len(mq.snapshot().topics["t"].messages) == MESSAGES
    mq.close()


def test_an_empty_database_without_a_record_is_an_interrupted_creation(tmp_path: Path) -> None:
    """Creation cut after RocksDB made the database and before rmqsim recorded it: the
    lock file (made first) and an empty RocksDB database. That one opens."""
    (tmp_path / "rmqsim.lock").write_bytes(b"")
    _plain_rocksdb_open(tmp_path, create=True)
    mq = RocksMQ.open(tmp_path)
    assert mq.snapshot().topics == {}
    mq.close()
    assert (tmp_path / RECORD_FILE_NAME).exists()


def _plain_rocksdb_open(path: Path, *, create: bool = False) -> None:
    """Open and close the database with rocksdict directly, as another writer would."""
    options = Options(raw_mode=True)
    options.create_if_missing(create)
    db = Rdict(str(path), options)
    db.close()
    del db


# --------------------------------------------------------------------- damage found by reads


def test_a_damaged_block_makes_a_scan_raise_not_return_less(tmp_path: Path) -> None:
    """rocksdict's items() ends at a damaged block as at the end of the range; the store's
    scans must raise instead of returning fewer records."""
    mq = RocksMQ.open(tmp_path)
    mq.create_topic("t")
    for _ in range(20):
        mq.produce("t", [ProducerMessage(PAYLOAD)] * 100)
    mq.close()
    store = Store.open(tmp_path)  # verified intact; now damaged behind its back
    try:
        table = _one(tmp_path, "*.sst")
        _garble(table, offset=table.stat().st_size // 3)
        with pytest.raises(CorruptDatabaseError, match=table.name):
            store.scan_messages()
    finally:
        store.crash()


# --------------------------------------------------------------------- a real SIGKILL


def _kill_child_after(path: Path, produces: int) -> None:
    """Run ``impl_helpers/sigkill_child.py`` until ``produces`` produces returned, then
    SIGKILL it (its WAL then holds what it wrote, unflushed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(CHILD.parent.parent)]))
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    seen = 0
    deadline = time.monotonic() + 60.0
    try:
        assert child.stdout is not None
        for line in child.stdout:
            seen += line.startswith("P ")
            if seen >= produces or time.monotonic() > deadline:
                break
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        _, stderr = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, stderr
    assert seen >= produces, stderr
