"""The one RocksDB database of a RocksMQ: opening and checking the directory, atomic write
batches, bounded reads, clean close and crash.

Everything that touches ``rocksdict`` lives here, so the traps of the binding are handled
in one place (see ``shared/NOTES-dependencies.md``):

- raw mode everywhere (bytes keys and values, nothing pickled), options passed explicitly
  on open, for the database and for its one column family (``default``, see ``keys``);
- ``set_iterate_lower_bound`` is never called (it sets the upper bound in 0.3.29); scans
  start with ``from_key`` and stop at ``set_iterate_upper_bound``;
- RocksDB keeps its LOCK while *any* iterator or handle is alive. So no rocksdict object
  ever leaves this module: write batches are built from a plain-Python ``Plan`` inside
  ``write`` and die with it, iterators die inside the read methods (``list`` drains them
  there), and ``close``/``crash`` drop every handle this object holds;
- ``items()``/``keys()``/``values()`` end at a damaged block exactly as at the end of
  their range, without an error: every scan either checks ``status()`` of its own
  iterator or seeks once past its last record to make the damage raise;
- RocksDB's errors are plain ``Exception``: they are mapped to ``impl.errors`` types.

Directory identity. A directory is *ours* when it holds ``rmqsim.lock`` (created before any
RocksDB file), only the ``default`` column family and the format record.
``open`` refuses anything else *before* RocksDB can write to it:

- a path that is a file: ``NotADatabaseError``;
- a non-empty directory without a RocksDB ``CURRENT`` file: ``NotADatabaseError``;
- a RocksDB directory without ``rmqsim.lock``, in pickled rocksdict mode, or with other
  column families: ``ForeignDatabaseError`` (``FormatVersionError`` for exactly layout 1's
  families: an rmqsim database of the old layout);
- an unreadable ``CURRENT``/``MANIFEST``: ``CorruptDatabaseError``;
- a damaged database (next section): ``CorruptDatabaseError`` naming the file;
- a directory another instance holds: ``DatabaseLockedError``.

Damaged databases. RocksDB's read-write open "repairs" what it cannot tell from a valid
state, and deletes on the way: a MANIFEST cut short reads as an older database and every
table file the lost records named is deleted as obsolete; a missing ``CURRENT`` under
``create_if_missing`` becomes a new empty database; its default WAL recovery stops at the
first bad record and deletes the rest with the WAL. So ``open`` proves a directory intact
*before* the read-write open, and refuses it otherwise with nothing changed:

- ``impl.integrity``'s record (``rmqsim.integrity``, written after every open and clean
  close) says what must be there. After a clean close the files must be byte-identical
  (this needs no RocksDB at all: the common case costs reading the files once). After a
  crash, the recorded files still there must keep their bytes, and then a *read-only*
  RocksDB open (which never deletes, writes or rotates a file) replays the MANIFEST and
  the WAL and checks the live table files; its sequence number must not be below the
  recorded one. Chosen over a read-only open alone because RocksDB cannot see what a
  record boundary cut (the finding of issue 25 opens read-only without an error), and
  over scanning every record because the digest also covers what no scan reads (OPTIONS,
  index blocks) at file-read speed.
- A database of ours without a record is accepted only if it is empty (creation cut
  between RocksDB creating it and the first record); with a record, a missing
  ``CURRENT`` is refused, never created.
- Not provable, and accepted: after a crash, what RocksDB wrote since the last record
  (table files of flushes and compactions, the MANIFEST's newer records, the WAL) is
  checked by RocksDB's checksums only. A MANIFEST cut exactly at a record boundary in
  that part looks like a crash before those records were written; RocksDB then deletes
  the table files they named, which a crash during their flush or compaction also leaves
  behind. Closing cleanly (or reopening after a crash) records the new state.

``rmqsim.lock`` is locked with ``flock`` (not ``fcntl``: closing another descriptor of the
file cannot drop it), before RocksDB is opened. A second open therefore fails before
RocksDB runs (RocksDB itself would first rotate the live instance's ``LOG``). A process
that forks keeps the lock in the child while the child lives.

Durability. Writes go through the WAL; ``sync_writes=False`` (the default) does not fsync
each batch: every batch that returned survives a process crash (the OS holds the WAL), not
a power loss. ``sync_writes=True`` fsyncs each batch and survives both, slower.

A damaged WAL. Recovery runs in RocksDB's ``TolerateCorruptedTailRecords`` mode: a record
with a bad checksum anywhere is refused (``CorruptDatabaseError`` naming the WAL), and only
an *incomplete last record* is dropped. A WAL record is one operation's ``WriteBatch``, so
what is lost is the operations at the end of the WAL, each whole, never part of one. A
process crash can only cut the batch being written, whose operation had not returned:
SPEC's "state before the interrupted operation" (SPEC's crashes are process crashes:
nothing that returned is lost). A power loss with ``sync_writes=False`` may cut operations
that returned but were not synced yet, always a suffix of them: the loss this mode accepts.
With ``sync_writes=True`` a cut below the last record is disk damage that rmqsim cannot
tell from the end of the log.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

from rocksdict import (
    AccessType,
    DBRecoveryMode,
    Options,
    Rdict,
    RdictIter,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from rmqsim.impl import codec, integrity, keys
from rmqsim.impl.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    ForeignDatabaseError,
    FormatVersionError,
    NotADatabaseError,
    StorageError,
)

__all__ = ["LOCK_FILE_NAME", "Plan", "Store", "inspect", "map_rocksdb_error"]

LOCK_FILE_NAME = "rmqsim.lock"
#: Info-log files RocksDB keeps per database (each open rotates one): bounded.
KEEP_LOG_FILES = 5
#: Level-0 table files that start a compaction (RocksDB's default is 4). Every reopen
#: after a crash flushes the recovered WAL into a new level-0 file, and each one costs
#: every later read a seek (≈1–2 µs per file per scan, measured): crash testing reopens
#: every few dozen operations, so they are merged early. The files are tiny.
L0_COMPACTION_TRIGGER_FILES = 2
#: Threads RocksDB starts at each open to open table files in parallel (its default is 16).
#: A queue's database holds few table files, and starting 16 threads cost ~4 ms of a ~8 ms
#: open when measured here (tmpfs, 2 cores); crash testing reopens often.
FILE_OPENING_THREADS = 1
#: The directory (inside the database's) where ``crash`` holds the frozen files while
#: RocksDB closes; removed before ``crash`` returns.
CRASH_HOLD_DIR_NAME = "rmqsim.crash"
#: Attempts at freezing a directory whose MANIFEST a background job keeps changing.
FREEZE_ATTEMPTS = 20
#: Names RocksDB itself creates in a database directory (for telling a half-created
#: database of ours from a foreign directory).
_OPTIONS_FILE = re.compile(r"^OPTIONS-\d+$")
#: RocksDB's files that no recovery reads back: ``crash`` leaves them as RocksDB does.
_NOT_HELD_FILE = re.compile(r"^(LOCK|LOG|LOG\.old\.\d+|rocksdict-config\.json)$")
_ROCKSDB_FILE = re.compile(
    r"^(LOCK|LOG|LOG\.old\.\d+|IDENTITY|CURRENT|MANIFEST-\d+|OPTIONS-\d+(\.dbtmp)?|"
    r"\d+\.(log|sst|blob|dbtmp)|rocksdict-config\.json)$"
)


@dataclass(slots=True)
class Plan:
    """Everything one operation writes, as plain bytes: applied as one ``WriteBatch``.

    Plain Python on purpose: a plan may sit in a traceback (the fault hook raised) without
    keeping any RocksDB handle, and so the LOCK, alive.
    """

    msg_puts: list[tuple[bytes, bytes]] = field(default_factory=list)
    meta_puts: list[tuple[bytes, bytes]] = field(default_factory=list)
    meta_deletes: list[bytes] = field(default_factory=list)
    msg_range_deletes: list[tuple[bytes, bytes]] = field(default_factory=list)
    meta_range_deletes: list[tuple[bytes, bytes]] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (
            self.msg_puts
            or self.meta_puts
            or self.meta_deletes
            or self.msg_range_deletes
            or self.meta_range_deletes
        )


def _rocksdb_text(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def map_rocksdb_error(exc: Exception, path: str, doing: str) -> StorageError:
    """A clear ``StorageError`` for a RocksDB ``Exception``; RocksDB's text comes last."""
    text = _rocksdb_text(exc)
    lowered = text.lower()
    if "lock" in lowered and ("hold" in lowered or "resource temporarily" in lowered):
        return DatabaseLockedError(
            f"cannot {doing}: the database at {path} is already open by another process "
            f"or instance (RocksDB: {text})"
        )
    if "corruption" in lowered:
        return CorruptDatabaseError(
            f"cannot {doing}: the database at {path} is corrupt (RocksDB: {text})"
        )
    if "column famil" in lowered:
        return ForeignDatabaseError(
            f"cannot {doing}: the database at {path} has column families other than "
            f"rmqsim's {list(keys.COLUMN_FAMILIES)} (RocksDB: {text})"
        )
    return StorageError(f"cannot {doing} the database at {path} (RocksDB: {text})")


def _options(*, create: bool) -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(create)
    options.set_keep_log_file_num(KEEP_LOG_FILES)
    options.set_max_file_opening_threads(FILE_OPENING_THREADS)
    options.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER_FILES)
    # A WAL record with a bad checksum is damage: refuse the open. Only an incomplete last
    # record (a write cut by a crash before it returned) is dropped. RocksDB's default
    # (point-in-time) would instead drop everything from the first bad record on, and the
    # flush after recovery would then delete the WAL that still held it.
    options.set_wal_recovery_mode(DBRecoveryMode.tolerate_corrupted_tail_records())
    options.set_paranoid_checks(True)  # RocksDB's default, stated: file sizes on open
    return options


def _open_read_only(path: str) -> Rdict:
    """A read-only handle: RocksDB replays the MANIFEST and WAL in memory and checks the
    live table files, but never deletes, writes or rotates a file."""
    options = _options(create=False)
    families = {name: options for name in keys.COLUMN_FAMILIES}
    return Rdict(
        path, options, column_families=families, access_type=AccessType.read_only(False)
    )


class _DirectoryKind:
    FRESH = "fresh"  # empty, or only what an interrupted creation of ours left behind
    UNRECORDED = "unrecorded"  # a RocksDB database with our lock file, no integrity record
    RECORDED = "recorded"  # a database of ours with its integrity record


def _classify(path: str) -> str:
    """Decide, without writing anything, whether ``path`` may be opened or created."""
    try:
        entries = set(os.listdir(path))
    except FileNotFoundError:
        return _DirectoryKind.FRESH
    except NotADirectoryError:
        raise NotADatabaseError(
            f"{path} is a file, not a database directory: pass a directory (new or holding "
            "an rmqsim database)"
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot read the directory {path}: {exc.strerror}") from None
    ours = LOCK_FILE_NAME in entries
    recorded = integrity.RECORD_FILE_NAME in entries
    if "CURRENT" not in entries:
        if recorded:  # never turned into a new, empty database over the old files
            raise integrity.damaged(path, "CURRENT", "is missing")
        others = entries - {LOCK_FILE_NAME}
        if not others or (ours and all(_ROCKSDB_FILE.match(name) for name in others)):
            return _DirectoryKind.FRESH  # empty, or our creation was cut before CURRENT
        raise NotADatabaseError(
            f"{path} is a non-empty directory that holds no database "
            f"(found {sorted(others)[:5]}): use an empty or new directory"
        )
    if not ours:
        if recorded:
            raise integrity.damaged(path, LOCK_FILE_NAME, "is missing")
        raise ForeignDatabaseError(
            f"{path} holds a RocksDB database that rmqsim did not create (no {LOCK_FILE_NAME}): "
            "refusing to open it"
        )
    return _DirectoryKind.RECORDED if recorded else _DirectoryKind.UNRECORDED


def _check_families(path: str) -> None:
    """rocksdict's mode and the column families must be rmqsim's (read-only checks)."""
    _check_rocksdict_config(path)
    try:
        families = Rdict.list_cf(path, _options(create=False))
    except Exception as exc:  # rocksdict raises plain Exception
        text = _rocksdb_text(exc)
        raise CorruptDatabaseError(
            f"{path} looks like a database but its CURRENT/MANIFEST cannot be read; it is "
            f"corrupt or incomplete (RocksDB: {text})"
        ) from exc
    if sorted(families) == sorted(keys.LAYOUT_V1_COLUMN_FAMILIES):
        raise FormatVersionError(
            f"{path} uses rmqsim layout version 1 (column families {families}); this code "
            f"reads only version {codec.FORMAT_VERSION}: recreate the database"
        )
    unknown = set(families) - set(keys.COLUMN_FAMILIES)
    if unknown:
        raise ForeignDatabaseError(
            f"{path} holds a RocksDB database with column families {sorted(unknown)} that "
            f"are not rmqsim's {list(keys.COLUMN_FAMILIES)}: refusing to open it"
        )


def _verify(path: str, kind: str) -> dict[str, integrity.FileFact]:
    """Refuse, before RocksDB opens ``path`` read-write, what cannot be proven intact.
    Returns the facts read of the files that never change (for the next record)."""
    if kind == _DirectoryKind.FRESH:
        return {}
    if kind == _DirectoryKind.UNRECORDED:
        _check_families(path)
        _check_unrecorded(path)
        return {}
    record = integrity.read_record(path)
    if record is None:
        raise integrity.damaged(path, integrity.RECORD_FILE_NAME, "is missing")
    manifest = integrity.current_manifest(path)
    entries = os.listdir(path)
    if record.state == integrity.STATE_CLOSED and manifest == record.manifest:
        # Closed cleanly and not opened since: byte for byte as rmqsim left it, which
        # RocksDB opens without recovering anything.
        facts = integrity.check_closed(path, record, entries)
    else:
        facts = integrity.check_continued(path, record, manifest, entries)
        _check_families(path)
        _check_recovery(path, record)
    return {
        name: fact
        for name, fact in facts.items()
        if integrity.file_kind(name) == integrity.FileKind.IMMUTABLE
    }


def _check_recovery(path: str, record: integrity.Record) -> None:
    """RocksDB's own checks, read-only: MANIFEST and WAL records (a bad checksum is
    refused, see ``_options``), live table files present at their sizes; and the latest
    sequence number is not below the recorded one (writes rmqsim saw are not gone)."""
    try:
        db = _open_read_only(path)
    except Exception as exc:  # rocksdict raises plain Exception
        raise _damage_found_by_rocksdb(path, exc) from exc
    try:
        sequence = db.latest_sequence_number()
    finally:
        db.close()
        del db
    if sequence < record.sequence:
        raise integrity.damaged(
            path,
            f"{record.manifest} or the write-ahead log",
            f"lost writes: RocksDB recovers up to sequence number {sequence}, rmqsim saw "
            f"{record.sequence}",
        )


def _check_unrecorded(path: str) -> None:
    """A database of ours without an integrity record is accepted only empty: creation
    was cut between RocksDB creating it and rmqsim recording it, before any write."""
    try:
        db = _open_read_only(path)
    except Exception as exc:  # rocksdict raises plain Exception
        raise _damage_found_by_rocksdb(path, exc) from exc
    try:
        empty = _check_identity(path, db)
    finally:
        db.close()
        del db
    if not empty:
        raise CorruptDatabaseError(
            f"the database at {path} holds rmqsim data but no {integrity.RECORD_FILE_NAME} "
            "(deleted, or written by an rmqsim without integrity records): rmqsim cannot "
            "prove it intact; refusing to open it (nothing in the directory was changed)"
        )


def _damage_found_by_rocksdb(path: str, exc: Exception) -> StorageError:
    """The error for a read-only open that failed: the file RocksDB names, else (a WAL
    record with a bad checksum: RocksDB's text names no file) the write-ahead logs."""
    text = _rocksdb_text(exc)
    if "corruption" not in text.lower() and "no such file" not in text.lower():
        return map_rocksdb_error(exc, path, "open")
    named = re.findall(re.escape(path + os.sep) + r"([^\s:,/]+)", text)
    if not named:
        logs = sorted(name for name in os.listdir(path) if name.endswith(".log"))
        named = [f"the write-ahead log {' or '.join(logs)}"] if logs else ["a database file"]
    return integrity.damaged(path, named[0], f"is damaged or missing (RocksDB: {text})")


def _check_identity(path: str, db: Rdict) -> bool:
    """The format record must be rmqsim's, or the database must be empty (creation of
    ours was interrupted before the format record was written): then True."""
    try:
        value = db.get(keys.FORMAT_KEY)
        if value is None:
            iterator = db.iter()
            try:
                iterator.seek_to_first()
                if not iterator.valid():
                    iterator.status()  # an unreadable first block is not an empty database
                    return True
            finally:
                del iterator  # an iterator keeps the LOCK: never let one outlive a read
    except Exception as exc:
        raise map_rocksdb_error(exc, path, "read") from exc
    if value is None:
        raise ForeignDatabaseError(
            f"{path} has rmqsim's column families and lock file but no format "
            "record, and holds data: it was not written by rmqsim; refusing to open it"
        )
    version = codec.decode_format(value)
    if version is None:
        raise ForeignDatabaseError(
            f"{path} has a format record that is not rmqsim's: refusing to open it"
        )
    if version != codec.FORMAT_VERSION:
        raise FormatVersionError(
            f"{path} uses rmqsim layout version {version}; this code reads only "
            f"version {codec.FORMAT_VERSION}"
        )
    return False


def _drain(iterator: RdictIter, begin: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
    """The records of ``[begin, end)`` from ``iterator``, in key order. A damaged block
    ends an iteration as its end would: ``status()`` tells them apart, and raises."""
    records: list[tuple[bytes, bytes]] = []
    iterator.seek(begin)
    while iterator.valid():
        key = iterator.key()
        if key >= end:
            break
        records.append((key, iterator.value()))
        iterator.next()
    iterator.status()
    return records


def _check_read_complete(db: Rdict, read_options: ReadOptions, resume: bytes) -> None:
    """rocksdict's ``items()``/``values()`` end at a damaged block as at the end of their
    range, silently. Seeking to ``resume``, just past the last record they gave, reaches
    that block again: raise its error, or confirm that nothing was left unread (one seek,
    ≈3 µs)."""
    iterator = db.iter(read_options)
    try:
        iterator.seek(resume)
        left = iterator.valid()
        iterator.status()
    finally:
        del iterator  # an iterator keeps the LOCK: never let one outlive a read
    if left:
        raise CorruptDatabaseError("a read ended before the end of its range without an error")


def _check_rocksdict_config(path: str) -> None:
    """rocksdict records its mode; a pickled-mode database is not ours."""
    config_path = os.path.join(path, "rocksdict-config.json")
    try:
        with open(config_path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return  # absent or unreadable: rocksdict rewrites it; the other checks decide
    if isinstance(config, dict) and config.get("raw_mode") is False:
        raise ForeignDatabaseError(
            f"{path} holds a rocksdict database in pickled mode (raw_mode false): it is not "
            "an rmqsim database; refusing to open it"
        )


@dataclass(frozen=True, slots=True)
class _Frozen:
    """A database file as ``crash`` froze it: which file (inode) and how many bytes."""

    inode: int
    size_bytes: int


def _held_names(path: str) -> list[str]:
    """The RocksDB files of ``path`` whose bytes a crash must keep as they are (not the
    LOCK, the info logs nor rocksdict's config, which no recovery reads back)."""
    return sorted(
        name
        for name in os.listdir(path)
        if _ROCKSDB_FILE.match(name) and not _NOT_HELD_FILE.match(name)
    )


def _manifest_mark(path: str) -> tuple[str, int]:
    manifest = integrity.current_manifest(path)
    return manifest, os.stat(os.path.join(path, manifest)).st_size


def _freeze(path: str) -> dict[str, _Frozen]:
    """Hard-link every held file of ``path`` into ``CRASH_HOLD_DIR_NAME`` with its size
    now. RocksDB's background work may finish a flush or a compaction meanwhile (new
    table files, a MANIFEST record, obsolete files deleted): a freeze during which the
    MANIFEST changed is taken again, so the files frozen are those of one instant."""
    hold = os.path.join(path, CRASH_HOLD_DIR_NAME)
    for _attempt in range(FREEZE_ATTEMPTS):
        try:
            os.mkdir(hold)
        except FileExistsError:  # a freeze taken again, or left by an interrupted crash
            shutil.rmtree(hold, ignore_errors=True)
            os.mkdir(hold)
        before = _manifest_mark(path)
        frozen: dict[str, _Frozen] = {}
        for name in _held_names(path):
            with contextlib.suppress(FileNotFoundError):  # an obsolete file deleted meanwhile
                os.link(os.path.join(path, name), os.path.join(hold, name))
                stat = os.stat(os.path.join(hold, name))
                frozen[name] = _Frozen(stat.st_ino, stat.st_size)
        if _manifest_mark(path) == before:
            return frozen
    raise StorageError(
        f"cannot crash the database at {path} as a killed process would: its MANIFEST kept "
        f"changing during {FREEZE_ATTEMPTS} attempts to freeze its files"
    )


def _thaw(path: str, frozen: dict[str, _Frozen]) -> None:
    """Put back the files ``_freeze`` froze, exactly as they were (see ``Store.crash``)."""
    hold = os.path.join(path, CRASH_HOLD_DIR_NAME)
    for name in _held_names(path):
        if name not in frozen:
            os.unlink(os.path.join(path, name))  # created after the crash instant
    still_held: list[str] = []
    for name, fact in frozen.items():
        target = os.path.join(path, name)
        try:
            stat: os.stat_result | None = os.stat(target)
        except FileNotFoundError:
            stat = None
        if stat is None or stat.st_ino != fact.inode:  # deleted, or replaced (CURRENT)
            os.replace(os.path.join(hold, name), target)
            stat = os.stat(target)
        else:
            still_held.append(name)
        size_bytes = stat.st_size
        if size_bytes < fact.size_bytes:
            raise StorageError(
                f"cannot crash the database at {path} as a killed process would: RocksDB "
                f"shortened {name} from {fact.size_bytes} to {size_bytes} bytes on close"
            )
        if size_bytes > fact.size_bytes:
            os.truncate(target, fact.size_bytes)  # appended after the crash instant
    # The hold holds exactly the links not moved back: unlinking them is a third of what
    # ``shutil.rmtree`` costs (it opens and checks the directory first).
    for name in still_held:
        os.unlink(os.path.join(hold, name))
    try:
        os.rmdir(hold)
    except OSError:  # something else appeared in it
        shutil.rmtree(hold)


def _lock_directory(path: str, *, create: bool) -> int:
    """Take ``rmqsim.lock`` exclusively; return its descriptor (closing it unlocks)."""
    flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(os.path.join(path, LOCK_FILE_NAME), flags, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot open {LOCK_FILE_NAME} in {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DatabaseLockedError(
                f"the database at {path} is already open by another RocksMQ instance (in this "
                "or another process): close it first"
            ) from None
        raise StorageError(f"cannot lock {LOCK_FILE_NAME} in {path}: {exc.strerror}") from None
    return fd


class Store:
    """An open rmqsim RocksDB database. Thread-safe: RocksDB is, and the handles here
    are only replaced by ``close``/``crash``, after which every method raises."""

    #: How message ids become keys (``msg_key``, ``msg_range``, ``parse_msg_key``). A
    #: seam: everything that builds or parses a message key goes through it, so a variant
    #: layout (the harness's seeded bugs) is one subclass, never a patch of ``keys``.
    message_keys: ClassVar[Any] = keys

    def __init__(self, path: str, db: Rdict, lock_fd: int, *, sync_writes: bool) -> None:
        self.path = path
        self._db: Rdict | None = db
        self._lock_fd: int | None = lock_fd
        self._write_options = WriteOptions()
        self._write_options.sync = sync_writes
        self._unlogged_options = WriteOptions()
        # RocksDB rejects disable_wal with sync (so these are options of their own).
        self._unlogged_options.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method
        #: Set when ``open`` found no format record in an empty database of ours.
        self.needs_init = False
        #: Facts of the files that never change (table files, OPTIONS, IDENTITY), by
        #: name: read once, reused by every record this instance writes.
        self._facts: dict[str, integrity.FileFact] = {}

    # ----------------------------------------------------------------------- open

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, sync_writes: bool = False) -> Store:
        """Open or create the database at ``path``; refuse anything that is not ours."""
        path = os.path.abspath(os.fspath(path))
        lock_path = os.path.join(path, LOCK_FILE_NAME)
        if os.path.exists(lock_path):
            fd = _lock_directory(path, create=False)
        else:
            if _classify(path) != _DirectoryKind.FRESH:
                raise ForeignDatabaseError(f"{path} holds a database rmqsim did not create")
            try:
                os.makedirs(path, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create the directory {path}: {exc.strerror}") from None
            fd = _lock_directory(path, create=True)
        try:
            kind = _classify(path)  # again, now that no other instance can change it
            facts = _verify(path, kind)
            options = _options(create=kind == _DirectoryKind.FRESH)
            try:
                # The column family's options are passed too: without them rocksdict
                # opens an existing database with the ones its last OPTIONS file holds,
                # and a change to ``_options`` would never reach databases made before it.
                families = {name: options for name in keys.COLUMN_FAMILIES}
                db = Rdict(path, options, column_families=families)
            except Exception as exc:
                raise map_rocksdb_error(exc, path, "open") from exc
            store = cls(path, db, fd, sync_writes=sync_writes)
            del db  # only ``store`` holds it: ``crash`` below must be able to release it
        except BaseException:
            os.close(fd)
            raise
        try:
            store.needs_init = _check_identity(path, store._live())
            store._facts.update(facts)
            store._record(integrity.STATE_OPEN)
        except BaseException as exc:
            store.crash()  # nothing written by us; release without flushing
            # A finished frame of the traceback may still hold the handle, and so the LOCK.
            traceback.clear_frames(exc.__traceback__)
            raise
        return store

    # ----------------------------------------------------------------------- writes

    def write(self, plan: Plan, *, logged: bool = True) -> None:
        """Apply ``plan`` as one atomic ``WriteBatch`` (all or nothing, also on crash).

        ``logged=False`` writes it without the write-ahead log (RocksDB's
        ``disable_wal``): it is durable only once a flush persists the memtable, and a
        crash before that loses it. rmqsim never does; the seam is for variants (the
        harness's seeded bugs), so they need no private names."""
        db = self._live()
        batch = WriteBatch(raw_mode=True)
        put = batch.put
        for key, value in plan.msg_puts:
            put(key, value)
        for key, value in plan.meta_puts:
            put(key, value)
        for key in plan.meta_deletes:
            batch.delete(key)
        for begin, end in plan.msg_range_deletes:
            batch.delete_range(begin, end)
        for begin, end in plan.meta_range_deletes:
            batch.delete_range(begin, end)
        try:
            db.write(batch, self._write_options if logged else self._unlogged_options)
        except Exception as exc:
            raise map_rocksdb_error(exc, self.path, "write to") from exc

    # ----------------------------------------------------------------------- reads

    def get_meta(self, key: bytes) -> bytes | None:
        db = self._live()
        try:
            return db.get(key)
        except Exception as exc:
            raise map_rocksdb_error(exc, self.path, "read") from exc

    def scan_meta(self) -> list[tuple[bytes, bytes]]:
        """Every metadata record, in key order (open and snapshot only)."""
        return self._scan(*keys.META_RANGE)

    def scan_messages(self) -> list[tuple[bytes, bytes]]:
        """Every message record, in key order (snapshot only: it reads everything)."""
        return self._scan(*keys.MSGS_RANGE)

    def scan_meta_range(self, begin: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        """Metadata records with ``begin <= key < end``, in key order (one bounded scan)."""
        assert keys.META_RANGE[0] <= begin <= end <= keys.META_RANGE[1], (begin, end)
        return self._scan(begin, end)

    def scan_message_range(self, incarnation: int, first_id: int) -> list[tuple[bytes, bytes]]:
        """Message records of one incarnation with id >= ``first_id``, in id order."""
        return self._scan(*self.message_keys.msg_range(incarnation, first_id))

    def scan_ranges(
        self, ranges: Sequence[tuple[bytes, bytes]]
    ) -> list[list[tuple[bytes, bytes]]]:
        """The records of each ``[begin, end)`` of ``ranges`` (ascending, disjoint), in key
        order, through one iterator: one consistent view, and one iterator's set-up for
        all of them. A seek on a live iterator costs less than a new bounded scan, and a
        one-topic snapshot reads three small ranges after nearly every operation."""
        assert ranges, ranges
        previous_end = b""
        for begin, end in ranges:  # a plain loop: generator checks cost ≈1 µs per call
            assert previous_end <= begin <= end, ranges
            previous_end = end
        db = self._live()
        bounded = ReadOptions()
        bounded.set_iterate_upper_bound(previous_end)
        found: list[list[tuple[bytes, bytes]]] = []
        try:
            iterator = db.iter(bounded)
            try:
                for begin, end in ranges:
                    found.append(_drain(iterator, begin, end))
            finally:
                del iterator  # an iterator keeps the LOCK: never let one outlive a read
        except Exception as exc:
            raise map_rocksdb_error(exc, self.path, "read") from exc
        return found

    def read_message_values(self, incarnation: int, first_id: int, last_id: int) -> list[bytes]:
        """Values of messages ``first_id..last_id`` (inclusive) of one incarnation: one
        bounded iterator, never past ``last_id``."""
        db = self._live()
        message_keys = self.message_keys
        read_options = ReadOptions()
        end = message_keys.msg_key(incarnation, last_id + 1)
        read_options.set_iterate_upper_bound(end)
        start = message_keys.msg_key(incarnation, first_id)
        try:
            values = list(db.values(from_key=start, read_opt=read_options))
            if len(values) <= last_id - first_id:  # fewer than asked: missing, or damaged
                iterator = db.iter(read_options)
                try:
                    _drain(iterator, start, end)  # raises where values() stopped silently
                finally:
                    del iterator  # an iterator keeps the LOCK: never let one outlive a read
        except Exception as exc:
            raise map_rocksdb_error(exc, self.path, "read") from exc
        return values

    def message_id_bounds(self, incarnation: int) -> tuple[int, int] | None:
        """``(first, last)`` stored message ids of an incarnation, or ``None``: two seeks."""
        db = self._live()
        message_keys = self.message_keys
        begin, end = message_keys.msg_range(incarnation)
        try:
            iterator = db.iter()
            try:
                iterator.seek(begin)
                first_key = iterator.key() if iterator.valid() else None
                iterator.status()
                # Backwards from ``end``: the last key before it (``end`` itself is no
                # message key). It is this incarnation's last message only if it is not
                # below ``begin`` (a lower bound cannot be set: the binding sets the upper
                # one instead, see the module docstring).
                iterator.seek_for_prev(end)
                last_key = iterator.key() if iterator.valid() else None
                iterator.status()
            finally:
                del iterator  # an iterator keeps the LOCK: never let one outlive a read
        except Exception as exc:
            raise map_rocksdb_error(exc, self.path, "read") from exc
        if first_key is None or first_key >= end:
            return None
        assert last_key is not None and begin <= last_key < end, (first_key, last_key)
        return message_keys.parse_msg_key(first_key)[1], message_keys.parse_msg_key(last_key)[1]

    def _scan(self, begin: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        """Records with ``begin <= key < end`` in key order: one bounded iterator, drained
        (and so dropped) here, its errors mapped."""
        db = self._live()
        bounded = ReadOptions()
        bounded.set_iterate_upper_bound(end)
        try:
            # Raw mode: keys and values are bytes (the stubs say any key type).
            records = cast(
                "list[tuple[bytes, bytes]]", list(db.items(from_key=begin, read_opt=bounded))
            )
            _check_read_complete(db, bounded, records[-1][0] + b"\x00" if records else begin)
        except Exception as exc:
            raise map_rocksdb_error(exc, self.path, "read") from exc
        return records

    def _live(self) -> Rdict:
        db = self._db
        if db is None:
            raise StorageError(f"the database at {self.path} is closed")
        return db

    # ----------------------------------------------------------------------- shutdown

    def close(self) -> None:
        """Flush the memtable, release RocksDB, record the closed directory (still under
        our lock) and release everything."""
        db = self._db
        if db is None:
            return
        try:
            sequence = db.latest_sequence_number()
            db.close()
        except Exception as exc:
            self._drop()
            raise map_rocksdb_error(exc, self.path, "close") from exc
        del db
        self._db = None
        try:
            self._record(integrity.STATE_CLOSED, sequence)
        finally:
            self._drop()

    def _record(self, state: str, sequence: int | None = None) -> None:
        """Write the integrity record: after an open (``STATE_OPEN``: the MANIFEST so far,
        the live table files, OPTIONS and IDENTITY) or after ``close`` (every file)."""
        path = self.path
        manifest = integrity.current_manifest(path)
        files = {manifest: integrity.digest_file(path, manifest)}
        if state == integrity.STATE_CLOSED:
            assert sequence is not None and self._db is None, state
            names = [name for name in os.listdir(path) if integrity.file_kind(name) is not None]
        else:
            db = self._live()
            try:
                # Only finished table files: the directory may hold one being compacted.
                tables = [str(live["name"]).lstrip("/") for live in db.live_files()]
                sequence = db.latest_sequence_number()
            except Exception as exc:
                raise map_rocksdb_error(exc, path, "read") from exc
            del db
            names = tables + [
                name
                for name in os.listdir(path)
                if name == "IDENTITY" or _OPTIONS_FILE.match(name)
            ]
        for name in sorted(set(names) - {manifest}):
            with contextlib.suppress(FileNotFoundError):  # compacted away meanwhile
                files[name] = self._fact(name)
        integrity.write_record(path, integrity.Record(state, manifest, files, sequence))

    def _fact(self, name: str) -> integrity.FileFact:
        """A file's fact; those of files that never change are read once per instance."""
        known = self._facts.get(name)
        if known is not None and os.stat(os.path.join(self.path, name)).st_size == known.size_bytes:
            return known
        fact = integrity.digest_file(self.path, name)
        if integrity.file_kind(name) == integrity.FileKind.IMMUTABLE:
            self._facts[name] = fact
        return fact

    def crash(self) -> None:
        """Release every handle and leave the directory's files as a killed process does.

        A killed process leaves exactly the bytes its files hold at that instant. RocksDB
        itself cannot be let go of that way: stopping its background work and dropping the
        handle both flush the memtable (and so persist writes made without the WAL, which
        a SIGKILL loses), rotate the WAL and delete files. So ``crash`` first *freezes* the
        directory (hard links to every RocksDB file, with its size: no bytes copied), lets
        RocksDB close, then puts the frozen files back: files RocksDB created since are
        removed, replaced or deleted ones come back, appended ones are cut back to their
        frozen size. Only then is the directory's lock released.
        """
        db = self._db
        if db is None:
            self._drop()
            return
        frozen: dict[str, _Frozen] | None = None
        try:
            frozen = _freeze(self.path)
        except FileNotFoundError:
            pass  # the directory is gone (removed under the open queue): nothing to keep
        except OSError as exc:  # e.g. a file system without hard links
            self._drop()  # RocksDB's close may flush: no longer a crash, but released
            raise StorageError(
                f"cannot crash the database at {self.path} as a killed process would: "
                f"freezing its files failed ({exc.strerror})"
            ) from exc
        except BaseException:
            self._drop()
            raise
        with contextlib.suppress(Exception):
            db.cancel_all_background(True)
            db.close()
        del db
        self._db = None
        try:
            if frozen is not None:
                _thaw(self.path, frozen)
        finally:
            self._drop()

    def _drop(self) -> None:
        self._db = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None


# --------------------------------------------------------------------------- inspection


@contextlib.contextmanager
def inspect(path: str | os.PathLike[str]) -> Iterator[Store]:
    """The database at ``path`` checked as ``Store.open`` checks it (refused with the same
    errors, naming ``path``), then opened for reading only, writing nothing at all:
    ``rmqsim store check``. No lock, no integrity record; RocksDB opens it read-only, and
    on a *view* of the directory (a temporary directory of symbolic links to its files),
    because rocksdict rewrites ``rocksdict-config.json`` at every open, even a read-only
    one: the view holds a copy of it. The info logs and ``LOCK`` are not linked (no
    read-only open reads them). The store serves reads only (``needs_init``: an empty
    database whose creation was cut short, which an open would initialise); it is
    released on exit."""
    path = os.path.abspath(os.fspath(path))
    kind = _classify(path)  # reads only
    if kind == _DirectoryKind.FRESH:
        raise NotADatabaseError(f"{path} holds no database yet (missing, empty, or a creation "
                                "cut short before RocksDB's CURRENT)")
    with tempfile.TemporaryDirectory(prefix="rmqsim-inspect-") as view:
        try:
            _link_view(path, view)
            _verify(view, kind)
            try:
                db = _open_read_only(view)
            except Exception as exc:  # rocksdict raises plain Exception
                raise _damage_found_by_rocksdb(view, exc) from exc
            store = Store(view, db, -1, sync_writes=False)
            store._lock_fd = None  # none taken: nothing to release but the handle
            del db
            try:
                store.needs_init = _check_identity(view, store._live())
                yield store
            finally:
                if store._db is not None:
                    store._db.close()
                store._drop()
        except StorageError as exc:
            raise type(exc)(str(exc).replace(view, path)) from exc


def _link_view(path: str, view: str) -> None:
    """``inspect``'s view of ``path`` in ``view``: links to its files, a copy of
    rocksdict's config."""
    for name in os.listdir(path):
        source = os.path.join(path, name)
        if name == "rocksdict-config.json":
            shutil.copyfile(source, os.path.join(view, name))
        elif not _NOT_HELD_FILE.match(name):
            os.symlink(source, os.path.join(view, name))
