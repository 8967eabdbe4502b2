"""Opening a store: creating it, or recovering it from the newest checkpoint.

Files under the store directory: ``rmqsim-commitlog`` (format and geometry), ``lock``
(``flock`` while open), ``abort`` (present while open: present at open means the last run
did not close cleanly), ``checkpoint`` (the metadata at a commit-log offset, replaced by
atomic rename), ``commitlog/`` and ``consumequeue/<incarnation>/``.

Recovery, step by step (docs/STORAGE.md says why):

1. check the directory: empty (create a store), ours (go on), anything else refused;
2. open the segments, checking names and lengths (the last one may be resized);
3. read the checkpoint: its metadata and the log offset it is valid at (a missing one is
   rebuilt from the whole log if no segment was ever reclaimed, else refused);
4. open the consume queues; after an abnormal stop, drop their entries past the
   checkpoint (they may index bytes that were never flushed);
5. scan the log from the checkpoint, checking every record (CRC, lengths, offset); stop
   at the first invalid one and keep whole operations only (up to the last batch end);
6. replay what was scanned: control events into the metadata, messages into the metadata
   and, as the dispatcher does, into the consume queues;
7. truncate the log there (zeroing the rest of the segment, removing later ones);
8. check every live consume queue against the log (each retained id's entry, nothing past
   the log), clear entries past the last id, remove files below the first retained id
   (the min-offset correction); rebuild a damaged one from the whole log;
9. remove the consume queues of destroyed incarnations, sync everything, create the abort
   marker. (No new checkpoint: as RocketMQ's normal recovery rescans its last files, a
   restart rechecks every record since the last checkpoint, which is written when a
   segment fills and before segments are reclaimed.)
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rmqsim.impl.commitlog.cq import ConsumeQueue, Entry, correct_min_offset
from rmqsim.impl.commitlog.fs import FileSystem, LockedError
from rmqsim.impl.commitlog.log import CommitLog
from rmqsim.impl.commitlog.records import FLAG_PAGE_CLOSE, Record
from rmqsim.impl.commitlog.state import (
    CheckpointError,
    Meta,
    apply_event,
    apply_message,
    decode_checkpoint,
    encode_checkpoint,
)
from rmqsim.impl.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    FormatVersionError,
    NotADatabaseError,
    StorageError,
)
from rmqsim.impl.faults import write_points

__all__ = [
    "DEFAULT_GEOMETRY",
    "FORMAT_FILE",
    "HARNESS_GEOMETRY",
    "MIN_SEGMENT_SIZE_BYTES",
    "Geometry",
    "OpenStore",
    "RecoveryHooks",
    "TruncationHook",
    "open_store",
    "os_problem",
    "truncate_after_last_operation",
    "write_checkpoint",
]

_log = logging.getLogger(__name__)

FORMAT_FILE = "rmqsim-commitlog"
#: The format written: 2 since produces store run records, which an rmqsim reading
#: format 1 would take for the damaged end of the log (and truncate there). A format-1
#: store (message records only) is read as it is and marked 2 when opened, before
#: anything is written to it, so that an older rmqsim refuses it instead.
_FORMAT_LINE = "rmqsim commitlog 2"
_OLDER_FORMAT_LINES = frozenset({"rmqsim commitlog 1"})
_IGNORED_WHEN_EMPTY = frozenset({"lock", FORMAT_FILE + ".tmp"})
#: The smallest segment a store may have (a sector; the default is 16 MiB).
MIN_SEGMENT_SIZE_BYTES = 512
#: Recovery's truncation point: given the valid records it keeps (in log order, the last
#: one ending the last whole operation) and the offset where that operation ends, the
#: offset from which the log is zeroed and later segments removed.
TruncationHook = Callable[[Sequence[Record], int], int]


def truncate_after_last_operation(valid: Sequence[Record], end_offset: int) -> int:
    """The correct ``TruncationHook``: keep every valid record, drop what follows."""
    del valid
    return end_offset


@dataclass(frozen=True, slots=True)
class RecoveryHooks:
    """Named extension points of recovery, for tools that seed bugs in it (rmqsim's
    storage mutants); the defaults are the correct behaviour. ``truncation_offset``:
    where step 7 (truncate the log) starts."""

    truncation_offset: TruncationHook = truncate_after_last_operation


@dataclass(frozen=True, slots=True)
class Geometry:
    """File sizes, fixed when a store is created (the stored values win at open)."""

    segment_size_bytes: int
    cq_entries_per_file: int


#: A new store's file sizes when ``CommitLogMQ.open`` is given none: 16 MiB segments
#: (a segment is preallocated by ``ftruncate``, sparse, so its size costs no disk until
#: written) and 4096 entries per consume-queue file. A produce that starts a segment also
#: writes a checkpoint and syncs, so fewer rolls is faster; but every open reads the last
#: segment whole (≈13 ms at 16 MiB, ≈90 ms at 64 MiB): docs/STORAGE.md, "Files".
DEFAULT_GEOMETRY = Geometry(segment_size_bytes=16 << 20, cq_entries_per_file=4096)
#: The file sizes of the harness's built-in adapters (``--impl commitlog`` and
#: ``commitlog-async``) and storage mutants: 1 MiB segments, so that runs and crash sweeps
#: roll segments, and a simulated disk, which holds every file in memory, stays small.
HARNESS_GEOMETRY = Geometry(segment_size_bytes=1 << 20, cq_entries_per_file=4096)


@dataclass(slots=True)
class OpenStore:
    fs: FileSystem
    root: str
    geometry: Geometry
    log: CommitLog
    meta: Meta
    cqs: dict[int, ConsumeQueue]
    lock_handle: int
    report: list[str] = field(default_factory=list)
    released: bool = False
    hooks: RecoveryHooks = field(default_factory=RecoveryHooks)

    def cq(self, incarnation: int) -> ConsumeQueue:
        queue = self.cqs.get(incarnation)
        if queue is None:
            directory = f"{self.root}/consumequeue/{incarnation:020d}"
            queue = ConsumeQueue(self.fs, directory, self.geometry.cq_entries_per_file)
            self.cqs[incarnation] = queue
        return queue

    def release(self) -> None:
        """Close every handle and the lock, writing nothing (once: a handle number may be
        reused by then)."""
        if self.released:
            return
        self.released = True
        self.log.close()
        for queue in self.cqs.values():
            queue.close()
        self.fs.close(self.lock_handle)


def write_checkpoint(store: OpenStore) -> None:
    """Sync the log and consume queues, then replace the checkpoint atomically."""
    store.log.flush()
    for queue in store.cqs.values():
        queue.flush()
    _write_atomically(store.fs, store.root, "checkpoint",
                      encode_checkpoint(store.meta, store.log.end_offset))


def _write_atomically(fs: FileSystem, root: str, name: str, data: bytes) -> None:
    temporary = f"{root}/{name}.tmp"
    handle = fs.open(temporary, create=True)
    try:
        fs.truncate(handle, 0)
        fs.write_at(handle, 0, data)
        fs.sync(handle)
    finally:
        fs.close(handle)
    fs.rename(temporary, f"{root}/{name}")
    fs.sync_dir(root)


def _read_file(fs: FileSystem, path: str) -> bytes:
    handle = fs.open(path, create=False)
    try:
        return fs.read(handle, 0, fs.size(handle))
    finally:
        fs.close(handle)


# --------------------------------------------------------------------------- open


def open_store(
    fs: FileSystem, root: str, geometry: Geometry, faults: Callable[[str], None] | None,
    hooks: RecoveryHooks | None = None,
) -> OpenStore:
    """Open (creating or recovering) the store at ``root``; see the module docstring.
    ``hooks``: recovery's extension points (default: the correct ones). Every failure is
    an ``impl.errors`` type: what the OS refuses (a read-only or full disk, a directory
    where a file belongs) is a ``StorageError`` naming the path."""
    try:
        return _open_store(fs, root, geometry, faults, hooks)
    except OSError as exc:
        raise StorageError(
            f"cannot open the commit-log store at {root}: {os_problem(exc)}"
        ) from exc


def os_problem(exc: OSError) -> str:
    """What an ``OSError`` says, with the path it names: ``<path>: <strerror>``."""
    text = exc.strerror or str(exc)
    return f"{exc.filename}: {text}" if exc.filename else text


def _open_store(
    fs: FileSystem, root: str, geometry: Geometry, faults: Callable[[str], None] | None,
    hooks: RecoveryHooks | None,
) -> OpenStore:
    if fs.exists(root):
        if not fs.is_dir(root):
            raise NotADatabaseError(f"{root} is a file, not a commit-log store directory")
        _refuse_foreign(fs, root)  # before the lock file is created: a refusal writes nothing
    fs.make_dir(root)
    try:
        lock_handle = fs.lock(f"{root}/lock")
    except LockedError:
        raise DatabaseLockedError(f"{root} is open in another queue (lock file held)") from None
    try:
        geometry = _format(fs, root, geometry, faults)
        log = CommitLog(fs, f"{root}/commitlog", geometry.segment_size_bytes)
        store = OpenStore(fs, root, geometry, log, Meta(), {}, lock_handle,
                          hooks=hooks or RecoveryHooks())
    except BaseException:
        fs.close(lock_handle)
        raise
    try:
        _recover(store)
    except BaseException:
        store.release()
        raise
    for line in store.report:
        _log.warning("recovering %s: %s", root, line)
    return store


def _format(
    fs: FileSystem, root: str, geometry: Geometry, faults: Callable[[str], None] | None
) -> Geometry:
    """The stored geometry; a new store is initialised (between the ``open`` points)."""
    path = f"{root}/{FORMAT_FILE}"
    if not fs.exists(path):
        _refuse_foreign(fs, root)  # again, under the lock
        before, after = write_points("open")
        if faults is not None:
            faults(before)
        _write_atomically(fs, root, FORMAT_FILE, _format_text(geometry))
        for directory in ("commitlog", "consumequeue"):
            fs.make_dir(f"{root}/{directory}")
        _write_atomically(fs, root, "checkpoint", encode_checkpoint(Meta(), 0))
        # The store's own entry in its parent: without this sync a power cut may take the
        # whole new store, synced puts and all (found by the storage layer's power sweep).
        fs.sync_dir(posixpath.dirname(root.rstrip("/")) or "/")
        if faults is not None:
            faults(after)
        return geometry
    try:
        lines = _read_file(fs, path).decode().splitlines()
        if lines[0] != _FORMAT_LINE and lines[0] not in _OLDER_FORMAT_LINES:
            raise FormatVersionError(f"{path}: unknown format {lines[0][:80]!r}")
        values = dict(line.split("=", 1) for line in lines[1:])
        stored = Geometry(int(values["segment_size_bytes"]), int(values["cq_entries_per_file"]))
    except (UnicodeDecodeError, IndexError, KeyError, ValueError) as exc:
        if isinstance(exc, FormatVersionError):
            raise
        raise CorruptDatabaseError(f"{path}: does not parse ({exc})") from None
    if stored.segment_size_bytes < MIN_SEGMENT_SIZE_BYTES or stored.cq_entries_per_file < 1:
        raise CorruptDatabaseError(f"{path}: impossible geometry {stored}")
    if lines[0] != _FORMAT_LINE:
        _log.warning("opening %s: format %r marked %r (produces now store run records)",
                     root, lines[0], _FORMAT_LINE)
        _write_atomically(fs, root, FORMAT_FILE, _format_text(stored))
    for directory in ("commitlog", "consumequeue"):
        fs.make_dir(f"{root}/{directory}")
    return stored


def _refuse_foreign(fs: FileSystem, root: str) -> None:
    """``NotADatabaseError`` for a directory that holds other files and no format file
    (another program's files, a RocksMQ database)."""
    if fs.exists(f"{root}/{FORMAT_FILE}"):
        return
    others = [name for name in fs.list(root) if name not in _IGNORED_WHEN_EMPTY]
    if others:
        raise NotADatabaseError(
            f"{root} is not empty and holds no {FORMAT_FILE} file: not a commit-log store"
        )


def _format_text(geometry: Geometry) -> bytes:
    return (f"{_FORMAT_LINE}\nsegment_size_bytes={geometry.segment_size_bytes}\n"
            f"cq_entries_per_file={geometry.cq_entries_per_file}\n").encode()


def _recover(store: OpenStore) -> None:
    fs, root, log = store.fs, store.root, store.log
    log.load(store.report)
    start = _load_checkpoint(store)
    log.check_lengths(start, store.report)
    abnormal = fs.exists(f"{root}/abort")
    _load_cqs(store, abnormal)
    scan = log.scan(start)
    valid = scan.records
    while valid and not valid[-1].is_batch_end:
        valid.pop()
    end = valid[-1].offset + valid[-1].size_bytes if valid else start
    if scan.problem is not None:
        store.report.append(f"the log ends at {scan.problem}; dropped from offset {end}")
    elif end != scan.end_offset:
        store.report.append(f"dropped an unfinished operation from offset {end}")
    _replay(store, valid)
    if scan.problem is not None or end != scan.end_offset:
        for path in log.truncate(store.hooks.truncation_offset(valid, end)):
            store.report.append(f"removed {path} (after the end of the valid log)")
    log.end_offset = end
    if not log.segments:
        log.new_segment(end, store.geometry.segment_size_bytes)
    _check_cqs(store, abnormal)
    store.log.flush()
    for queue in store.cqs.values():
        queue.flush()
    marker = fs.open(f"{root}/abort", create=True)
    fs.close(marker)
    fs.sync_dir(root)


def _load_checkpoint(store: OpenStore) -> int:
    path = f"{store.root}/checkpoint"
    log = store.log
    if not store.fs.exists(path):
        if log.min_offset != 0:
            raise CorruptDatabaseError(
                f"{path} is missing and the log no longer starts at offset 0: the metadata "
                "cannot be rebuilt"
            )
        store.report.append(f"{path} is missing: metadata rebuilt from the whole log")
        return 0
    if store.fs.is_dir(path):
        raise CorruptDatabaseError(f"{path}: a directory, not the checkpoint file")
    try:
        store.meta, start = decode_checkpoint(_read_file(store.fs, path))
    except CheckpointError as exc:
        raise CorruptDatabaseError(f"{path}: {exc}") from None
    last_end = log.segments[-1].end if log.segments else 0
    if not log.min_offset <= start <= max(last_end, log.min_offset):
        raise CorruptDatabaseError(
            f"{path} is valid at log offset {start}, outside the log's segments "
            f"({log.min_offset}..{last_end})"
        )
    return start


def _load_cqs(store: OpenStore, abnormal: bool) -> None:
    directory = f"{store.root}/consumequeue"
    for name in store.fs.list(directory):
        if len(name) != 20 or not name.isdigit():
            raise CorruptDatabaseError(f"{directory}/{name}: not a consume-queue directory name")
        if not store.fs.is_dir(f"{directory}/{name}"):
            raise CorruptDatabaseError(f"{directory}/{name}: a file, not a consume-queue directory")
        store.cq(int(name)).load(store.report)
    if abnormal:  # entries past the checkpoint may index unflushed bytes: rebuild them
        for topic in store.meta.topics.values():
            store.cq(topic.incarnation).clear_from(topic.cq_index(topic.last_id + 1))


def _replay(store: OpenStore, found: list[Record]) -> None:
    """Apply the scanned records to the metadata and dispatch messages (the dispatcher)."""
    for record in found:
        try:
            if record.is_control:
                apply_event(store.meta, json.loads(record.body))
                continue
            topic = apply_message(
                store.meta, record.incarnation, record.queue_offset, len(record.body),
                bool(record.flags & FLAG_PAGE_CLOSE), record.store_time,
            )  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDatabaseError(
                f"{store.log.directory}: the record at offset {record.offset} does not follow "
                f"from the ones before it ({exc})"
            ) from None
        if topic is not None:
            entry = Entry(record.offset, record.size_bytes, record.queue_offset)
            store.cq(record.incarnation).put(topic.cq_index(record.queue_offset), entry)


def _cq_problem(store: OpenStore, incarnation: int) -> str | None:
    """What is wrong with a live consume queue, or None."""
    topic = store.meta.by_incarnation[incarnation]
    queue = store.cq(incarnation)
    low, high = topic.cq_index(topic.trim_id + 1), topic.cq_index(topic.last_id + 1)
    entries = queue.get(low, high - low)
    log = store.log
    for index, entry in enumerate(entries, start=low):
        msg_id = topic.base_id + index
        if entry is None or entry.msg_id != msg_id:
            return f"{queue.directory}: no entry for id {msg_id}"
        if entry.offset + entry.size_bytes > log.end_offset:
            return f"{queue.directory}: the entry of id {msg_id} points past the log's end"
    # The min-offset correction: the first entry at or after the log's first byte must be
    # the first retained id (entries below would point into reclaimed segments).
    first_in_log = correct_min_offset(entries, log.min_offset)
    if first_in_log != 0:
        return (f"{queue.directory}: the entry of id {topic.trim_id + 1} points below the "
                f"log's first offset {log.min_offset}")
    wrong = log.misplaced([entry for entry in entries if entry is not None], incarnation)
    if wrong is not None:
        return (f"{queue.directory}: the entry of id {topic.trim_id + 1 + wrong} does not "
                "point at the record that holds it")
    return None


def _check_cqs(store: OpenStore, abnormal: bool) -> None:
    orphans = sorted(set(store.cqs) - set(store.meta.by_incarnation))
    never_created = [i for i in orphans if i >= store.meta.next_incarnation]
    if never_created and not abnormal:
        # After a clean stop every record the consume queues index was in the log: a queue
        # of a topic the whole log never created means the log lost records (segments
        # deleted), not a deleted topic (whose incarnation the log did create).
        raise CorruptDatabaseError(
            f"{store.cqs[never_created[0]].directory}: a consume queue of topic incarnation "
            f"{never_created[0]}, which the log never created (it created up to "
            f"{store.meta.next_incarnation - 1}): the log has lost records"
        )
    for incarnation in orphans:  # deleted topics' (or, after a crash, unflushed ones')
        store.cqs.pop(incarnation).destroy()
    problems = [p for inc in sorted(store.meta.by_incarnation) if (p := _cq_problem(store, inc))]
    if problems:
        store.report.extend(f"{p}: consume queues rebuilt from the whole log" for p in problems)
        _rebuild_cqs(store)
        problems = [p for i in sorted(store.meta.by_incarnation) if (p := _cq_problem(store, i))]
        if problems:
            raise CorruptDatabaseError(f"{problems[0]}, and the log does not hold it either")
    for topic in store.meta.topics.values():
        queue = store.cq(topic.incarnation)
        if queue.clear_from(topic.cq_index(topic.last_id + 1)):
            store.report.append(f"{queue.directory}: entries past the log's end dropped")
        queue.reclaim(topic.cq_index(topic.trim_id + 1))


def _rebuild_cqs(store: OpenStore) -> None:
    """The dispatcher over the whole log: an entry for every retained message."""
    scan = store.log.scan(store.log.min_offset)
    for record in scan.records:
        topic = store.meta.by_incarnation.get(record.incarnation)
        if record.is_control or topic is None:
            continue
        if topic.trim_id < record.queue_offset <= topic.last_id:
            entry = Entry(record.offset, record.size_bytes, record.queue_offset)
            store.cq(record.incarnation).put(topic.cq_index(record.queue_offset), entry)
