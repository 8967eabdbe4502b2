"""Storage mutants: the commit-log backend with one durability bug in its file I/O.

Each one is ``impl.commitlog`` (sync flush) opened over a ``FileSystem`` wrapper that
changes what the backend asks of the disk (or, for recovery's own logic, with one of its
``RecoveryHooks``), modelled on real bugs (the notes' part B): only
a power cut shows them (a process crash keeps what the OS holds), so they are killed by
``rmqsim crash-sweep --storage sync`` and by the gate's power-loss sweep; in the catalogue
their layer is ``storage``, and the kill matrix kills them with power-loss sweeps.
Nothing is patched globally: the wrapper and the hooks are the backend's own seams.

- ``no-fsync``: the commit log's segments are never synced (a flush that forgets the
  fsync): in sync mode an operation returns before its bytes are durable.
- ``fsync-error-swallowed``: a failed fsync is logged away and the flushed position moves
  on (RocketMQ #2706, #9713): the operation returns as if durable.
- ``no-dir-sync``: a created file's directory is never synced (a new segment's entry is
  not durable; LazyFS's and ALICE's classic): a power cut may lose the whole file.
- ``no-crc-check``: the log's records are taken without checking their CRC (RocketMQ
  checks the body CRC only when ``checkCRCOnRecover`` is on): the wrapper gives every
  record read from a segment (a message record or a run record) a CRC that matches, so
  a torn record is served.
- ``tmp-not-synced``: a file replaced by rename (the checkpoint, the format file) is
  renamed over the old one without an fsync of the temporary (ALICE's and LazyFS's
  classic; ext4's ``auto_da_alloc`` discussion): the new name may hold an empty file.
- ``rename-no-dir-sync``: the store directory is never synced after a rename or a
  creation there (the checkpoint's, the format file's, the abort marker's): the rename
  is not durable, a power cut brings the old name back or loses the new one.
- ``roll-skips-previous-segment``: a flush syncs only the newest segment, so at a segment
  roll the previous one's tail (the records and the blank filler written into it) is never
  synced, and the checkpoint written at the roll points past bytes that a power cut loses
  ("flushed position persisted ahead of the data"; RocketMQ #678). It runs on segments of
  512 bytes (``ROLL_GEOMETRY``) so that the gate's short power-loss sweeps roll within
  their first steps (smoke's seed 0 rolls at its third); ``open_small_segments`` is the
  correct backend on the same geometry (the control).
- ``truncate-one-record-off``: recovery's truncation of a torn tail starts one record
  early and also cuts the last good record (RocketMQ #2571, ``truncateDirtyLogicFiles``
  off by one entry): recovery keeps it in the metadata, the log no longer holds it. It
  goes through recovery's named extension point (``RecoveryHooks.truncation_offset``), not
  the file system.
- ``control-crc-unchecked``: a metadata control record (topics, groups, positions,
  retention) is applied without checking its CRC (the messages' CRC is checked): a torn
  control record is applied, or breaks recovery.
- ``roll-no-dir-sync``: a segment roll never makes the new segment's directory entry
  durable (the commit log's directory is synced when the store is created, never after a
  segment other than the first was created): the records a sync-flush operation wrote
  into the new segment are synced, the name that finds them is not, and a power cut may
  lose the whole segment (the ext4/LazyFS classic, on the roll path only). Only a power
  cut after a roll shows it: the gate's sweeps on small segments (``power_loss.
  SWEEP_GEOMETRY``, cell ``segment-dir-entry``) kill it; on 1 MiB segments, 8 steps never
  roll and it survives.
- ``fsync-retried``: a failed fsync is retried, and the retry's success taken for
  durability (PostgreSQL's "fsyncgate", 2018): on Linux the failed pages were dropped, so
  the retry syncs nothing and the operation returns as durable.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.impl.commitlog import (
    HARNESS_GEOMETRY,
    MIN_SEGMENT_SIZE_BYTES,
    CommitLogMQ,
    FileSystem,
    FlushPolicy,
    Geometry,
    OsFileSystem,
    RecoveryHooks,
    chosen_geometry,
    records,
)
from rmqsim.impl.commitlog.records import Record
from rmqsim.model.api import Clock, MQConfig

__all__ = [
    "MUTANTS",
    "ROLL_GEOMETRY",
    "open_control_crc_unchecked",
    "open_fsync_error_swallowed",
    "open_fsync_retried",
    "open_no_crc_check",
    "open_no_dir_sync",
    "open_no_fsync",
    "open_rename_no_dir_sync",
    "open_roll_no_dir_sync",
    "open_roll_skips_previous_segment",
    "open_small_segments",
    "open_tmp_not_synced",
    "open_truncate_one_record_off",
]

#: Segments of 512 bytes (the smallest the format allows, a sector): a few records fill one,
#: so the gate's 8-step power-loss sweeps (``GATE_POWER_STEPS``) reach a roll.
ROLL_GEOMETRY = Geometry(segment_size_bytes=MIN_SEGMENT_SIZE_BYTES, cq_entries_per_file=64)


class _Wrapped:
    """Every call goes to ``inner`` unless a subclass overrides it."""

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Tracked(_Wrapped):
    """Knows the path of each open handle."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.paths: dict[int, str] = {}

    def open(self, path: str, *, create: bool) -> int:
        handle = self.inner.open(path, create=create)
        self.paths[handle] = path
        return handle


class _NoSegmentSync(_Tracked):
    def sync(self, handle: int) -> None:
        if "/commitlog/" not in self.paths.get(handle, ""):
            self.inner.sync(handle)


class _SwallowSyncErrors(_Wrapped):
    def sync(self, handle: int) -> None:
        with contextlib.suppress(OSError):  # the bug: "logged", and the position advances
            self.inner.sync(handle)


#: The smallest record of each magic whose CRC the wrapper recomputes (message records
#: and run records: both keep their CRC at byte 8, over bytes 12 to their end).
_SMALLEST = {
    records.MAGIC_MESSAGE: records.HEADER_SIZE_BYTES,
    records.MAGIC_RUN: records.RUN_HEADER_SIZE_BYTES + records.RUN_PER_MESSAGE_BYTES,
}


class _NoCrcCheck(_Tracked):
    #: The records whose CRC is made to match: those with one of these flags (0: all).
    only_flags = 0

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        data = self.inner.read(handle, offset, size_bytes)
        if "/commitlog/" not in self.paths.get(handle, ""):
            return data
        fixed = bytearray(data)
        position = 0
        while position + records.BLANK_SIZE_BYTES <= len(fixed):
            size, magic = struct.unpack_from(">II", fixed, position)
            smallest = _SMALLEST.get(magic)
            if smallest is None or not smallest <= size <= len(fixed) - position:
                break
            (flags,) = struct.unpack_from(">I", fixed, position + 12)
            if not self.only_flags or flags & self.only_flags:
                crc = zlib.crc32(fixed[position + 12 : position + size])
                struct.pack_into(">I", fixed, position + 8, crc)
            position += size
        return bytes(fixed)


class _ControlCrcUnchecked(_NoCrcCheck):
    only_flags = records.FLAG_CONTROL


class _TmpNotSynced(_Tracked):
    def sync(self, handle: int) -> None:
        if not self.paths.get(handle, "").endswith(".tmp"):
            self.inner.sync(handle)


class _RenameNoDirSync(_Wrapped):
    def sync_dir(self, path: str) -> None:
        # The bug: only the log's and the consume queues' directories are synced.
        if path.endswith("/commitlog") or "/consumequeue" in path:
            self.inner.sync_dir(path)


class _RollSkipsPrevious(_Tracked):
    def sync(self, handle: int) -> None:
        path = self.paths.get(handle, "")
        segments = [p for p in self.paths.values() if "/commitlog/" in p]
        if "/commitlog/" not in path or path == max(segments):
            self.inner.sync(handle)


def _one_record_early(valid: Sequence[Record], end_offset: int) -> int:
    """The bug (``RecoveryHooks.truncation_offset``): recovery's truncation starts at the
    last valid record instead of after it, so the log loses the last whole operation's
    last record while the replayed metadata keeps it."""
    return valid[-1].offset if valid else end_offset


class _FsyncRetried(_Wrapped):
    def sync(self, handle: int) -> None:
        try:
            self.inner.sync(handle)
        except OSError:  # the bug: "transient", try again (the pages are gone by now)
            self.inner.sync(handle)


class _RollNoDirSync(_Tracked):
    """Skips the commit log's directory sync once a segment beyond the first exists."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.rolled = False

    def open(self, path: str, *, create: bool) -> int:
        handle = super().open(path, create=create)
        name = path.rpartition("/")[2]
        if create and "/commitlog/" in path and name.strip("0"):
            self.rolled = True  # a segment that does not start the log: a roll
        return handle

    def sync_dir(self, path: str) -> None:
        if not (self.rolled and path.endswith("/commitlog")):
            self.inner.sync_dir(path)


class _NoDirSync(_Wrapped):
    def sync_dir(self, path: str) -> None:
        del path  # the bug: the directory entry is never made durable


def _opener(
    wrapper: type[_Wrapped], name: str, doc: str, pinned: Geometry | None = None,
    hooks: RecoveryHooks | None = None,
) -> Any:
    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: Any,
        fs: FileSystem | None = None, geometry: Mapping[str, int] | None = None,
    ) -> CommitLogMQ:
        # The sweep's geometry (``geometry=``) wins over the mutant's own, as over ours.
        return CommitLogMQ.open(path, config=config, clock=clock, faults=faults,
                                policy=FlushPolicy(mode="sync"),
                                fs=wrapper(fs or OsFileSystem()),
                                geometry=chosen_geometry(geometry, pinned or HARNESS_GEOMETRY),
                                hooks=hooks)

    factory.__qualname__ = factory.__name__ = name
    factory.__doc__ = f"Bug class: storage (sync flush; only a power cut shows it). {doc}"
    return factory


open_no_fsync = _opener(_NoSegmentSync, "open_no_fsync", "Commit-log segments never synced.")
open_fsync_error_swallowed = _opener(_SwallowSyncErrors, "open_fsync_error_swallowed",
                                     "A failed fsync is swallowed.")
open_no_dir_sync = _opener(_NoDirSync, "open_no_dir_sync", "Directories never synced.")
open_no_crc_check = _opener(_NoCrcCheck, "open_no_crc_check", "Records read without CRC check.")
open_tmp_not_synced = _opener(_TmpNotSynced, "open_tmp_not_synced",
                              "A temporary renamed into place without an fsync.")
open_rename_no_dir_sync = _opener(_RenameNoDirSync, "open_rename_no_dir_sync",
                                  "The store directory never synced after a rename.")
open_roll_skips_previous_segment = _opener(
    _RollSkipsPrevious, "open_roll_skips_previous_segment",
    "A flush syncs only the newest segment (512-byte segments).", ROLL_GEOMETRY,
)
open_small_segments = _opener(_Wrapped, "open_small_segments",
                              "The correct backend on 512-byte segments (the control).",
                              ROLL_GEOMETRY)
open_small_segments.__doc__ = "The correct backend on 512-byte segments (the control: no bug)."
open_truncate_one_record_off = _opener(
    _Wrapped, "open_truncate_one_record_off",
    "Recovery's truncation also cuts the last good record.",
    hooks=RecoveryHooks(truncation_offset=_one_record_early),
)
open_control_crc_unchecked = _opener(_ControlCrcUnchecked, "open_control_crc_unchecked",
                                     "Control records applied without their CRC checked.")
open_roll_no_dir_sync = _opener(_RollNoDirSync, "open_roll_no_dir_sync",
                                "A roll never syncs the new segment's directory entry.")
open_fsync_retried = _opener(_FsyncRetried, "open_fsync_retried",
                             "A failed fsync retried, the retry taken for durability.")

_MODULE = "rmqsim.conformance.mutants.storage"
MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-fsync", "storage", "sync mode returns before the commit log is synced",
           f"{_MODULE}:open_no_fsync", "storage"),
    Mutant("fsync-error-swallowed", "storage",
           "a failed fsync is ignored and the operation returns as durable",
           f"{_MODULE}:open_fsync_error_swallowed", "storage"),
    Mutant("no-dir-sync", "storage", "a created file's directory is never synced",
           f"{_MODULE}:open_no_dir_sync", "storage"),
    Mutant("no-crc-check", "storage", "recovery takes the log's records without their CRC",
           f"{_MODULE}:open_no_crc_check", "storage"),
    Mutant("tmp-not-synced", "storage",
           "a checkpoint is renamed into place before its temporary file is synced",
           f"{_MODULE}:open_tmp_not_synced", "storage"),
    Mutant("rename-no-dir-sync", "storage",
           "the store directory is never synced after a rename (the checkpoint's)",
           f"{_MODULE}:open_rename_no_dir_sync", "storage"),
    Mutant("roll-skips-previous-segment", "storage",
           "at a segment roll the previous segment's tail is never synced",
           f"{_MODULE}:open_roll_skips_previous_segment", "storage"),
    Mutant("truncate-one-record-off", "storage",
           "recovery's truncation of a torn tail also cuts the last good record",
           f"{_MODULE}:open_truncate_one_record_off", "storage"),
    Mutant("control-crc-unchecked", "storage",
           "a metadata control record is applied before its CRC is checked",
           f"{_MODULE}:open_control_crc_unchecked", "storage"),
    Mutant("roll-no-dir-sync", "storage",
           "a segment roll never syncs the new segment's directory entry",
           f"{_MODULE}:open_roll_no_dir_sync", "storage"),
    Mutant("fsync-retried", "storage",
           "a failed fsync is retried and the retry's success taken for durability",
           f"{_MODULE}:open_fsync_retried", "storage"),
)
