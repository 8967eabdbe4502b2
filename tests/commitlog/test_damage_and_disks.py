"""Issue 39's commit-log findings, each reproduced: a consume queue pointing at the wrong
record, stray entries where files or directories belong, a refused open that wrote to the
directory, a full disk during a segment roll's checkpoint, a read-only file system. Every
error is an ``impl.errors`` type (catching ``MQError`` catches everything the queue
raises), and what the store serves is what its log holds."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from rmqsim.impl import RocksMQ
from rmqsim.impl.commitlog.fs import OsFileSystem
from rmqsim.impl.errors import NotADatabaseError, StorageError
from rmqsim.model.api import MQError, NotServingError
from tests.commitlog.helpers import cq_dir, cq_entry, open_mq, pm


def _tree(path: Path) -> dict[str, str]:
    """Every file and directory under ``path`` (directories as "dir"), with file hashes."""
    found: dict[str, str] = {}
    for directory, names, files in os.walk(path):
        for name in names:
            found[os.path.relpath(os.path.join(directory, name), path)] = "dir"
        for name in files:
            full = os.path.join(directory, name)
            found[os.path.relpath(full, path)] = hashlib.sha256(
                Path(full).read_bytes()).hexdigest()
    return found


def _closed_store(tmp_path: Path, count: int = 100) -> tuple[Path, object]:
    path = tmp_path / "store"
    mq = open_mq(path)
    mq.create_topic("t")
    for index in range(count):
        mq.produce("t", [pm(f"message-{index:04d}".encode())])
    state = mq.snapshot()
    mq.close()
    return path, state


# ----------------------------------------------------------------- 1: the wrong record


def test_consume_queue_entries_pointing_at_each_others_records_are_rebuilt(
    tmp_path: Path,
) -> None:
    path, state = _closed_store(tmp_path)  # rolls segments: the checkpoint covers ids 3..6
    cq_file = cq_dir(path) / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    first, second = data[2 * 20 : 2 * 20 + 12], data[5 * 20 : 5 * 20 + 12]
    data[2 * 20 : 2 * 20 + 12], data[5 * 20 : 5 * 20 + 12] = second, first  # ids kept
    cq_file.write_bytes(bytes(data))
    assert cq_entry(path, 2) != cq_entry(path, 5)
    mq = open_mq(path)
    assert mq.snapshot() == state
    assert any("id 3" in line and "rebuilt" in line for line in mq.recovery_report), (
        mq.recovery_report)
    mq.create_consumer_group("t", "g")
    assert [m.msg_id for m in mq.consume("t", "g", 10)] == list(range(1, 11))
    mq.close()


def test_an_entry_pointing_into_another_run_is_rebuilt(tmp_path: Path) -> None:
    """Runs of four messages share a place per run (segments roll: the checkpoint covers
    them, so recovery does not dispatch them again): id 6's entry given the place of the
    run of ids 1..4 (keeping its id) holds an id that run does not."""
    path = tmp_path / "store"
    mq = open_mq(path)
    mq.create_topic("t")
    for batch in range(40):
        mq.produce("t", [pm(b"%d-%d-" % (batch, index) + b"x" * 100) for index in range(4)])
    state = mq.snapshot()
    mq.close()
    cq_file = cq_dir(path) / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    data[5 * 20 : 5 * 20 + 12] = data[0:12]
    cq_file.write_bytes(bytes(data))
    mq = open_mq(path)
    assert mq.snapshot() == state
    assert any("id 6 does not point" in line for line in mq.recovery_report), mq.recovery_report
    mq.close()


# ----------------------------------------------------------------- 2: stray entries


@pytest.mark.parametrize("stray", ["cq-file", "segment-dir", "checkpoint-dir"])
def test_a_stray_file_or_directory_is_a_storage_error_naming_it(tmp_path: Path,
                                                                 stray: str) -> None:
    path, _state = _closed_store(tmp_path, 3)
    if stray == "cq-file":
        named = path / "consumequeue" / ("9" * 20)
        named.write_bytes(b"x")
    elif stray == "segment-dir":
        named = path / "commitlog" / ("9" * 20)
        named.mkdir()
    else:
        named = path / "checkpoint"
        named.unlink()
        named.mkdir()
    with pytest.raises(StorageError, match=str(named)):
        open_mq(path)


# ----------------------------------------------------------------- 3: a refused open


def test_a_refused_open_leaves_the_directory_as_it_found_it(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.txt").write_text("x")
    rocks = tmp_path / "rocks"
    RocksMQ.open(str(rocks)).close()
    for path in (foreign, rocks):
        before = _tree(path)
        with pytest.raises(NotADatabaseError):
            open_mq(path)
        assert _tree(path) == before, path


# ----------------------------------------------------------------- 4: a full disk


class _FullFor(OsFileSystem):
    """The OS, but a write to a path containing ``target`` finds the disk full once
    ``full`` is set (the checkpoint's temporary file: what a 2 MiB tmpfs did at a segment
    roll; a consume-queue file: the dispatch after the log write)."""

    full = False

    def __init__(self, target: str) -> None:
        self.target = target
        self.paths: dict[int, str] = {}

    def open(self, path: str, *, create: bool) -> int:
        handle = super().open(path, create=create)
        self.paths[handle] = path
        return handle

    def write_at(self, handle: int, offset: int, data: bytes) -> None:
        if self.full and self.target in self.paths.get(handle, ""):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().write_at(handle, offset, data)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("target", ["checkpoint.tmp", "/consumequeue/"])
def test_a_full_disk_after_the_log_write_is_typed_and_stops_serving(
    tmp_path: Path, target: str, mode: str
) -> None:
    fs = _FullFor(target)
    mq = open_mq(tmp_path / "s", fs=fs, mode=mode)
    mq.create_topic("t")
    fs.full = True
    acknowledged = 0
    with pytest.raises(StorageError, match="No space left"):
        for _ in range(1000):  # until a produce starts a segment (or dispatches)
            mq.produce("t", [pm(b"x" * 300)])
            acknowledged += 1
    assert acknowledged < 1000
    with pytest.raises(NotServingError):  # a retrying caller cannot duplicate it unseen
        mq.get_latest_msg("t")
    mq.crash()
    fs.full = False
    mq = open_mq(tmp_path / "s", fs=fs)
    assert mq.get_latest_msg("t") in (acknowledged or -1, acknowledged + 1)
    mq.close()


# ----------------------------------------------------------------- 5: a read-only disk


class _ReadOnly(OsFileSystem):
    """The OS mounted read-only: opening for writing, creating and changing fail EROFS."""

    @staticmethod
    def _refuse(path: str) -> OSError:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    def open(self, path: str, *, create: bool) -> int:
        raise self._refuse(path)  # the backend opens read-write

    def lock(self, path: str) -> int:
        raise self._refuse(path)

    def make_dir(self, path: str) -> None:
        if not os.path.isdir(path):
            raise self._refuse(path)


@pytest.mark.parametrize("existing", [True, False], ids=["existing-store", "new-path"])
def test_a_read_only_file_system_is_a_storage_error(tmp_path: Path, existing: bool) -> None:
    path = _closed_store(tmp_path, 2)[0] if existing else tmp_path / "new"
    with pytest.raises(StorageError, match="Read-only file system") as caught:
        open_mq(path, fs=_ReadOnly())
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, MQError)


# ----------------------------------------------------------------- a failing read


class _FailingReads(OsFileSystem):
    """The OS, but reads fail with EIO once ``failing`` is set (a dying disk)."""

    failing = False

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        if self.failing:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return super().read(handle, offset, size_bytes)


def test_a_read_the_disk_refuses_is_a_storage_error(tmp_path: Path) -> None:
    fs = _FailingReads()
    mq = open_mq(tmp_path / "s", fs=fs)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.produce("t", [pm(b"x")])
    fs.failing = True
    with pytest.raises(StorageError, match="Input/output error"):
        mq.consume("t", "g", 1)
    with pytest.raises(StorageError, match="Input/output error"):
        mq.snapshot()
    fs.failing = False
    assert [m.payload for m in mq.consume("t", "g", 1)] == [b"x"]  # nothing moved
    mq.close()
