"""``rmqsim store check`` and ``rmqsim store dump`` (issue 39): every damage case of
tests/test_impl_damaged_store.py and of the commit-log damage tests, checked read-only:
the exit code says clean (0), damaged (1, naming what) or not a store (2), and no file or
directory under the store changes (its hashes, its names, its modification times)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.impl import RocksMQ
from rmqsim.impl.integrity import RECORD_FILE_NAME
from rmqsim.model.api import MQConfig, ProducerMessage
from tests.commitlog.helpers import cq_dir, cq_entry, open_mq, pm, segments, write_log_bytes
from tests.test_impl_damaged_store import (
    PAYLOAD,
    _garble,
    _kill_child_after,
    _make,
    _one,
    _plain_rocksdb_open,
    _truncate,
)


def _tree(path: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``path``: a file's SHA-256 (a directory: "dir") and mtime."""
    found: dict[str, tuple[str, int]] = {}
    for directory, names, files in os.walk(path):
        for name in names + files:
            full = os.path.join(directory, name)
            digest = "dir" if name in names else hashlib.sha256(
                Path(full).read_bytes()).hexdigest()
            found[os.path.relpath(full, path)] = (digest, os.lstat(full).st_mtime_ns)
    return found


def _check(path: Path, expected: int, *named: str, command: str = "check") -> str:
    """``rmqsim store check PATH``: exit ``expected``, ``named`` in its output, and the
    directory as it was."""
    before = _tree(path) if path.is_dir() else None
    done = CliRunner().invoke(cli, ["store", command, str(path)])
    assert done.exit_code == expected, done.output
    assert "internal error" not in done.output and "Traceback" not in done.output
    for name in named:
        assert name in done.output, (name, done.output)
    if before is not None:
        assert _tree(path) == before, "the check changed the store's directory"
    # A dump is its JSON lines on stdout (the command's time goes to stderr).
    return str(done.stdout if command == "dump" and expected == 0 else done.output)


# --------------------------------------------------------------------- RocksMQ: clean


def test_a_closed_rocksmq_store_is_clean_and_dumped(tmp_path: Path) -> None:
    _make(tmp_path)
    out = _check(tmp_path, 0, "(rocksmq): CLEAN", "topic 't': ids 1..50", "groups: g=-1")
    assert "note" not in out
    lines = [json.loads(line) for line in _check(tmp_path, 0, command="dump").splitlines()]
    assert lines[0] == {"kind": "store", "backend": "rocksmq", "path": str(tmp_path)}
    assert lines[1]["kind"] == "topic" and lines[1]["last_id"] == 50
    assert lines[2] == {"kind": "group", "topic": "t", "group": "g", "position": -1}
    messages = [line for line in lines if line["kind"] == "message"]
    assert [m["id"] for m in messages] == list(range(1, 51))
    assert base64.b64decode(messages[0]["payload_base64"]) == PAYLOAD


def test_a_crashed_rocksmq_store_is_clean_with_a_note(tmp_path: Path) -> None:
    _make(tmp_path, crash=True)
    _check(tmp_path, 0, "CLEAN", "not closed cleanly", "ids 1..50")


# --------------------------------------------------------------------- RocksMQ: damaged


def _truncated_manifest(path: Path) -> str:
    _make(path)
    manifest = _one(path, "MANIFEST-*")
    _truncate(manifest)
    return manifest.name


def _garbled_manifest(path: Path) -> str:
    _make(path)
    manifest = _one(path, "MANIFEST-*")
    _garble(manifest)
    return manifest.name


def _current(damage: Callable[[Path], None]) -> Callable[[Path], str]:
    def make(path: Path) -> str:
        _make(path)
        damage(path / "CURRENT")
        return "CURRENT"

    return make


def _options(damage: Callable[[Path], None]) -> Callable[[Path], str]:
    def make(path: Path) -> str:
        _make(path)
        options = sorted(path.glob("OPTIONS-*"))[-1]
        damage(options)
        return options.name

    return make


def _table(damage: Callable[[Path], None], *, crash: bool = False) -> Callable[[Path], str]:
    def make(path: Path) -> str:
        _make(path)
        if crash:
            mq = RocksMQ.open(path)
            mq.produce("t", [ProducerMessage(PAYLOAD)])
            mq.crash()
        table = _one(path, "*.sst")
        damage(table)
        return table.name

    return make


def _integrity(missing: bool) -> Callable[[Path], str]:
    def make(path: Path) -> str:
        _make(path)
        record = path / RECORD_FILE_NAME
        _garble(record)
        if missing:
            record.unlink()
        return RECORD_FILE_NAME

    return make


def _left_file(path: Path) -> str:
    _make(path)
    (path / "999999.sst").write_bytes(_one(path, "*.sst").read_bytes())
    return "999999.sst"


def _wal_after_crash(path: Path) -> str:
    _make(path, crash=True)
    wal = _one(path, "*.log")
    _garble(wal)
    return wal.name


def _wal_after_sigkill(path: Path) -> str:
    _kill_child_after(path, produces=30)
    wal = max(path.glob("*.log"), key=lambda file: file.stat().st_size)
    _garble(wal)
    return wal.name


def _manifest_cut_after_crash(path: Path) -> str:
    _make(path)
    mq = RocksMQ.open(path)
    mq.produce("t", [ProducerMessage(PAYLOAD)])
    mq.crash()
    manifest = _one(path, "MANIFEST-*")
    _truncate(manifest)
    return manifest.name


def _block_found_by_reads(path: Path) -> str:
    """test_a_damaged_block_makes_a_scan_raise_not_return_less: a table file damaged where
    only a read of its blocks finds it (here: after a crash, so the open's digest of the
    closed files does not find it first)."""
    mq = RocksMQ.open(path)
    mq.create_topic("t")
    for _ in range(20):
        mq.produce("t", [ProducerMessage(PAYLOAD)] * 100)
    mq.close()
    mq = RocksMQ.open(path)
    mq.crash()
    table = _one(path, "*.sst")
    _garble(table, offset=table.stat().st_size // 3)
    return table.name


ROCKSMQ_DAMAGE: dict[str, Callable[[Path], str]] = {
    "truncated-manifest": _truncated_manifest,
    "garbled-manifest": _garbled_manifest,
    "current-missing": _current(lambda current: current.unlink()),
    "current-garbled": _current(lambda current: _garble(current, offset=0)),
    "current-names-missing-manifest": _current(
        lambda current: current.write_bytes(b"MANIFEST-999999\n")),
    "options-garbled": _options(_garble),
    "options-truncated": _options(_truncate),
    "table-garbled": _table(_garble),
    "table-truncated": _table(_truncate),
    "integrity-garbled": _integrity(missing=False),
    "integrity-missing": _integrity(missing=True),
    "file-left-in-closed-database": _left_file,
    "wal-garbled-after-crash": _wal_after_crash,
    "wal-garbled-after-sigkill": _wal_after_sigkill,
    "manifest-cut-after-crash": _manifest_cut_after_crash,
    "table-garbled-after-crash": _table(_garble, crash=True),
    "block-found-by-reads": _block_found_by_reads,
}


@pytest.mark.parametrize("damage", list(ROCKSMQ_DAMAGE))
def test_every_damaged_rocksmq_case_is_damaged_naming_the_file(tmp_path: Path,
                                                               damage: str) -> None:
    path = tmp_path / "db"
    path.mkdir()
    named = ROCKSMQ_DAMAGE[damage](path)
    _check(path, 1, "(rocksmq): DAMAGED", named, "keeps      nothing")


def test_a_wal_cut_short_after_a_crash_keeps_all_but_the_last_operation(tmp_path: Path) -> None:
    _make(tmp_path, crash=True, batches=20, per_batch=3)
    wal = _one(tmp_path, "*.log")
    _truncate(wal, wal.stat().st_size - 5)
    _check(tmp_path, 0, "CLEAN", "ids 1..57 (57 retained, last id 57)")


def test_a_database_reopened_by_rocksdb_since_its_close_is_clean(tmp_path: Path) -> None:
    _make(tmp_path)
    _plain_rocksdb_open(tmp_path)
    _check(tmp_path, 0, "CLEAN", "ids 1..50")


def test_an_interrupted_creation_is_clean_and_empty(tmp_path: Path) -> None:
    (tmp_path / "rmqsim.lock").write_bytes(b"")
    _plain_rocksdb_open(tmp_path, create=True)
    _check(tmp_path, 0, "CLEAN", "creation was cut short", "keeps      no topic")


# --------------------------------------------------------------------- commit log


def _commitlog(path: Path, count: int, *, crash: bool = True, properties: bool = True) -> None:
    mq = open_mq(path)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for index in range(count):
        mq.produce("t", [pm(f"message-{index:04d}".encode(),
                            {"k": str(index)} if properties else None)])
    mq.consume("t", "g", 3)
    (mq.crash if crash else mq.close)()


@pytest.mark.parametrize("crash", [False, True], ids=["closed", "crashed"])
def test_a_commit_log_store_is_clean_and_dumped(tmp_path: Path, crash: bool) -> None:
    path = tmp_path / "store"
    _commitlog(path, 100, crash=crash)
    _check(path, 0, "(commitlog): CLEAN", "ids 1..100", "groups: g=4")
    lines = [json.loads(line) for line in _check(path, 0, command="dump").splitlines()]
    messages = [line for line in lines if line["kind"] == "message"]
    assert [m["id"] for m in messages] == list(range(1, 101))
    assert messages[5]["properties"] == {"k": "5"}
    assert base64.b64decode(messages[5]["payload_base64"]) == b"message-0005"


def _garbage_in_the_middle(path: Path) -> str:
    _commitlog(path, 30)
    offset, size = cq_entry(path, 9)
    return str(write_log_bytes(path, offset + size - 3, b"XYZ"))


def _damaged_before_the_checkpoint(path: Path) -> str:
    _commitlog(path, 100)
    offset, size = cq_entry(path, 4)
    write_log_bytes(path, offset + size - 1, b"!")
    return "id 5"


def _last_segment_resized(path: Path) -> str:
    _commitlog(path, 100)
    os.truncate(segments(path)[-1], 300)
    return "300 bytes"


def _middle_segment_resized(path: Path) -> str:
    _commitlog(path, 200)
    middle = segments(path)[1]
    os.truncate(middle, 4000)
    return str(middle)


def _checkpoint_missing(path: Path) -> str:
    _commitlog(path, 100)
    (path / "checkpoint").unlink()
    return "checkpoint is missing"


def _checkpoint_missing_after_reclaiming(path: Path) -> str:
    config = MQConfig(page_size_bytes=10, retention_time_s=-1, retention_size_bytes=0)
    mq = open_mq(path, config=config)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for _ in range(40):
        mq.produce("t", [pm(b"y" * 300)])
    mq.consume("t", "g", 40)
    mq.run_retention()
    mq.close()
    (path / "checkpoint").unlink()
    return "recovery would refuse it"


def _checkpoint_garbled(path: Path) -> str:
    _commitlog(path, 3)
    (path / "checkpoint").write_bytes(b"\x00\x01garbage")
    return str(path / "checkpoint")


def _cq_past_the_log(path: Path) -> str:
    _commitlog(path, 5, crash=False)
    with open(cq_dir(path) / f"{0:020d}", "r+b") as file:
        file.seek(5 * 20)
        file.write((10**9).to_bytes(8, "big") + (100).to_bytes(4, "big") + (6).to_bytes(8, "big"))
    return "past the log's end"


def _cq_entry_renamed(path: Path) -> str:
    _commitlog(path, 100)
    with open(cq_dir(path) / f"{0:020d}", "r+b") as file:
        file.seek(2 * 20 + 12)
        file.write((4).to_bytes(8, "big"))
    return "no entry for id 3"


def _cq_entries_swapped(path: Path) -> str:
    _commitlog(path, 100, crash=False, properties=False)
    cq_file = cq_dir(path) / f"{0:020d}"
    data = bytearray(cq_file.read_bytes())
    data[40:52], data[100:112] = data[100:112], data[40:52]
    cq_file.write_bytes(bytes(data))
    return "does not point at the record that holds it"


def _format(text: str) -> Callable[[Path], str]:
    def make(path: Path) -> str:
        _commitlog(path, 1)
        (path / "rmqsim-commitlog").write_text(text)
        return "rmqsim-commitlog"

    return make


def _stray(kind: str) -> Callable[[Path], str]:
    def make(path: Path) -> str:
        _commitlog(path, 3, crash=False)
        named = path / {"file": "commitlog/notes.txt", "cq-file": "consumequeue/" + "9" * 20,
                        "segment-dir": "commitlog/" + "9" * 20, "checkpoint-dir": "checkpoint"
                        }[kind]
        if kind in ("file", "cq-file"):
            named.write_text("x")
        else:
            if kind == "checkpoint-dir":
                named.unlink()
            named.mkdir()
        return str(named)

    return make


COMMITLOG_DAMAGE: dict[str, Callable[[Path], str]] = {
    "garbage-in-the-middle": _garbage_in_the_middle,
    "damaged-before-the-checkpoint": _damaged_before_the_checkpoint,
    "last-segment-resized": _last_segment_resized,
    "middle-segment-resized": _middle_segment_resized,
    "checkpoint-missing": _checkpoint_missing,
    "checkpoint-missing-after-reclaiming": _checkpoint_missing_after_reclaiming,
    "checkpoint-garbled": _checkpoint_garbled,
    "cq-past-the-log": _cq_past_the_log,
    "cq-entry-renamed": _cq_entry_renamed,
    "cq-entries-swapped": _cq_entries_swapped,
    "format-newer": _format("rmqsim commitlog 9\n"),
    "format-garbled": _format("rmqsim commitlog 2\nsegment_size_bytes=x\n"),
    "foreign-file-among-segments": _stray("file"),
    "stray-cq-file": _stray("cq-file"),
    "stray-segment-dir": _stray("segment-dir"),
    "checkpoint-dir": _stray("checkpoint-dir"),
}


@pytest.mark.parametrize("damage", list(COMMITLOG_DAMAGE))
def test_every_damaged_commit_log_case_is_damaged_naming_it(tmp_path: Path,
                                                            damage: str) -> None:
    path = tmp_path / "store"
    named = COMMITLOG_DAMAGE[damage](path)
    _check(path, 1, "(commitlog): DAMAGED", named)


def test_a_recovery_that_drops_says_what_it_keeps(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _garbage_in_the_middle(path)
    out = _check(path, 1, "recovery   ", "dropped from offset", "ids 1..9 (9 retained")
    assert "damaged" not in out  # recovery handles it: nothing else is wrong


def test_a_message_damaged_before_the_checkpoint_is_named_and_left_out(tmp_path: Path) -> None:
    path = tmp_path / "store"
    _damaged_before_the_checkpoint(path)
    out = _check(path, 1, "CRC", "topic 't' id 5", "(99 retained")
    assert "before the end recovery keeps" in out


# --------------------------------------------------------------------- not a store


@pytest.mark.parametrize("what", ["missing", "file", "empty", "foreign", "foreign-rocksdb"])
def test_what_is_no_store_is_exit_2(tmp_path: Path, what: str) -> None:
    path = tmp_path / "p"
    if what == "file":
        path.write_text("x")
    elif what == "empty":
        path.mkdir()
    elif what == "foreign":
        path.mkdir()
        (path / "data.txt").write_text("x")
    elif what == "foreign-rocksdb":
        _plain_rocksdb_open(path, create=True)
    for command in ("check", "dump"):
        assert "not a store" in _check(path, 2, command=command)


def test_the_docs_list_the_command() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "commands" / "store.md").read_text()
    assert "`rmqsim store check PATH`" in page and "`rmqsim store dump PATH`" in page


def test_the_overlay_reads_the_disk_and_keeps_its_writes_in_memory(tmp_path: Path) -> None:
    from rmqsim.impl.commitlog.fs import OverlayFileSystem

    (tmp_path / "a").write_bytes(b"on disk")
    (tmp_path / "d").mkdir()
    before = _tree(tmp_path)
    fs = OverlayFileSystem()
    root = str(tmp_path)
    handle = fs.open(f"{root}/a", create=False)
    assert fs.read(handle, 0, 100) == b"on disk"
    fs.write_at(handle, 3, b"DISK!")
    fs.truncate(handle, 9)
    assert fs.read(handle, 0, 100) == b"on DISK!\0" and fs.size(handle) == 9
    fs.close(handle)
    new = fs.open(f"{root}/d/new", create=True)
    fs.write_at(new, 0, b"x")
    fs.close(new)
    fs.rename(f"{root}/a", f"{root}/b")
    fs.remove(f"{root}/d/new")
    fs.make_dir(f"{root}/e")
    assert fs.list(root) == ["b", "d", "e"] and fs.is_dir(f"{root}/e")
    assert not fs.exists(f"{root}/a") and fs.list(f"{root}/d") == []
    assert _tree(tmp_path) == before  # the disk never saw any of it
