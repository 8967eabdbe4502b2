"""A path that is not one of our databases is refused with a clear error of impl's own,
and nothing is written to it (every file's name and bytes are the same afterwards)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from rmqsim.impl import (
    CorruptDatabaseError,
    DatabaseLockedError,
    ForeignDatabaseError,
    FormatVersionError,
    NotADatabaseError,
    RocksMQ,
    StorageError,
    codec,
    keys,
)
from rmqsim.model.api import MQError, ProducerMessage


def _fingerprint(path: Path) -> dict[str, str]:
    """Every file under ``path`` with a hash of its bytes (or the file itself)."""
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    result = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = Path(root) / name
            result[str(full.relative_to(path))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return result


def _refused(path: Path, error: type[StorageError], *words: str) -> StorageError:
    before = _fingerprint(path)
    with pytest.raises(error) as info:
        RocksMQ.open(path)
    assert _fingerprint(path) == before, "a refused open wrote to the directory"
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message
    assert isinstance(info.value, MQError)
    return info.value


def _plain_rocksdict(path: Path, *, raw: bool) -> None:
    options = Options(raw_mode=raw)
    db = Rdict(str(path), options)
    db[b"k" if raw else "k"] = b"v" if raw else "v"
    db.close()
    del db


def test_path_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"not a database")
    _refused(path, NotADatabaseError, "is a file")


def test_non_empty_directory_without_a_database(tmp_path: Path) -> None:
    path = tmp_path / "dir"
    path.mkdir()
    (path / "notes.txt").write_text("hello")
    _refused(path, NotADatabaseError, "holds no database")


def test_foreign_rocksdb_in_raw_mode(tmp_path: Path) -> None:
    path = tmp_path / "foreign"
    _plain_rocksdict(path, raw=True)
    _refused(path, ForeignDatabaseError, "did not create")


def test_foreign_rocksdb_in_pickled_mode(tmp_path: Path) -> None:
    path = tmp_path / "pickled"
    _plain_rocksdict(path, raw=False)
    _refused(path, ForeignDatabaseError)


def test_foreign_database_with_our_lock_file_but_other_column_families(tmp_path: Path) -> None:
    path = tmp_path / "other-cfs"
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    db = Rdict(str(path), options, column_families={"default": options, "theirs": options})
    db.close()
    del db
    (path / "rmqsim.lock").write_bytes(b"")
    _refused(path, ForeignDatabaseError, "theirs")


def test_database_of_layout_version_1_is_refused_with_its_version(tmp_path: Path) -> None:
    """Layout 1 kept metadata and messages in two column families of their own."""
    path = tmp_path / "layout-1"
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    families = {name: options for name in ("default", "rmqsim_meta", "rmqsim_msgs")}
    db = Rdict(str(path), options, column_families=families)
    db.close()
    del db
    (path / "rmqsim.lock").write_bytes(b"")
    _refused(path, FormatVersionError, "version 1", f"only version {codec.FORMAT_VERSION}")


def test_corrupt_current_file(tmp_path: Path) -> None:
    path = tmp_path / "db"
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    mq.close()
    (path / "CURRENT").write_bytes(b"\x00garbage without newline")
    _refused(path, CorruptDatabaseError, "corrupt")


def test_current_points_to_a_missing_manifest(tmp_path: Path) -> None:
    path = tmp_path / "db"
    RocksMQ.open(path).close()
    (path / "CURRENT").write_bytes(b"MANIFEST-999999\n")
    _refused(path, CorruptDatabaseError)


def test_database_already_open_in_this_process(tmp_path: Path) -> None:
    path = tmp_path / "db"
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    try:
        error = _refused(path, DatabaseLockedError, "already open")
        assert "RocksDB" not in str(error)  # refused by rmqsim before RocksDB ran
        mq.produce("t", [])  # the first instance is unaffected
    finally:
        mq.close()
    RocksMQ.open(path).close()  # and the lock went with the close


def test_database_with_a_foreign_format_record_or_newer_version(tmp_path: Path) -> None:
    path = tmp_path / "db"
    RocksMQ.open(path).close()
    _poke(path, {keys.FORMAT_KEY: codec.FORMAT_MAGIC + b"\x00\x63"})  # version 99
    with pytest.raises(FormatVersionError, match="version 99"):
        RocksMQ.open(path)
    _poke(path, {keys.FORMAT_KEY: b"something else"})
    with pytest.raises(ForeignDatabaseError, match="not rmqsim's"):
        RocksMQ.open(path)


def _poke(path: Path, records: dict[bytes, bytes | None]) -> None:
    """Write (or, for None, delete) raw records behind the queue's back."""
    db = Rdict(str(path), Options(raw_mode=True))
    for key, value in records.items():
        if value is None:
            del db[key]
        else:
            db[key] = value
    db.close()
    del db


def test_damaged_record_is_reported_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "db"
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    mq.produce("t", [ProducerMessage(b"x")])
    mq.close()
    _poke(path, {keys.msg_key(1, 1): None})  # a message the topic's records say is retained
    with pytest.raises(CorruptDatabaseError, match="stores message ids"):
        RocksMQ.open(path)


def test_new_directory_is_created_and_empty_directory_is_used(tmp_path: Path) -> None:
    RocksMQ.open(tmp_path / "new" / "nested").close()
    empty = tmp_path / "empty"
    empty.mkdir()
    mq = RocksMQ.open(empty)
    assert mq.snapshot().topics == {}
    mq.close()


MALFORMED_KEYS = {
    "page": keys.TAG_PAGE + b"\x00" * 15,  # 16 bytes: one short of tag, incarnation, end id
    "group": keys.TAG_GROUP + b"\x00" * 8,  # tag and incarnation, no group name
}


@pytest.mark.parametrize("what", sorted(MALFORMED_KEYS))
def test_a_malformed_metadata_key_is_a_corrupt_database_even_under_python_o(
    what: str, tmp_path: Path
) -> None:
    """Keys read from the database are checked by real exceptions, not assertions: the
    refusal names the key under ``python -O`` too (where an ``assert`` would vanish)."""
    path = tmp_path / "db"
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    mq.close()
    _poke(path, {MALFORMED_KEYS[what]: b"\x00" * 8})
    with pytest.raises(CorruptDatabaseError, match=f"malformed {what} key"):
        RocksMQ.open(path)
    script = (
        "import sys\n"
        "from rmqsim.impl import RocksMQ, CorruptDatabaseError\n"
        "try:\n"
        "    RocksMQ.open(sys.argv[1])\n"
        "except CorruptDatabaseError as e:\n"
        "    print('refused:', e)\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-O", "-c", script, str(path)],
        env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"refused: the database breaks rmqsim's layout: a malformed {what} key" in done.stdout
