"""Storage mutants: the commit-log backend with one durability bug in its file I/O.

Each one is ``impl.commitlog`` (sync flush) opened over a ``FileSystem`` wrapper that
changes what the backend asks of the disk, modelled on real bugs (the notes' part B): only
a power cut shows them, so they are killed by ``rmqsim crash-sweep --storage`` (not by the
gate, whose crashes kill the process and keep what the OS holds: they are not in the
catalogue). Nothing is patched globally: the wrapper is the backend's own seam.

- ``no-fsync``: the commit log's segments are never synced (a flush that forgets the
  fsync): in sync mode an operation returns before its bytes are durable.
- ``fsync-error-swallowed``: a failed fsync is logged away and the flushed position moves
  on (RocketMQ #2706, #9713): the operation returns as if durable.
- ``no-dir-sync``: a created file's directory is never synced (a new segment's entry is
  not durable; LazyFS's and ALICE's classic): a power cut may lose the whole file.
- ``no-crc-check``: the log's records are taken without checking their CRC (RocketMQ
  checks the body CRC only when ``checkCRCOnRecover`` is on): the wrapper gives every
  record read from a segment a CRC that matches, so a torn record is served.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from pathlib import Path
from typing import Any

from rmqsim.conformance.mutants import Mutant
from rmqsim.impl.commitlog import CommitLogMQ, FileSystem, FlushPolicy, OsFileSystem, records
from rmqsim.model.api import Clock, MQConfig

__all__ = [
    "MUTANTS",
    "open_fsync_error_swallowed",
    "open_no_crc_check",
    "open_no_dir_sync",
    "open_no_fsync",
]


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


class _NoCrcCheck(_Tracked):
    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        data = self.inner.read(handle, offset, size_bytes)
        if "/commitlog/" not in self.paths.get(handle, ""):
            return data
        fixed = bytearray(data)
        position = 0
        while position + records.BLANK_SIZE_BYTES <= len(fixed):
            size, magic = struct.unpack_from(">II", fixed, position)
            if magic != records.MAGIC_MESSAGE or not (
                records.HEADER_SIZE_BYTES <= size <= len(fixed) - position
            ):
                break
            crc = zlib.crc32(fixed[position + 12 : position + size])
            struct.pack_into(">I", fixed, position + 8, crc)
            position += size
        return bytes(fixed)


class _NoDirSync(_Wrapped):
    def sync_dir(self, path: str) -> None:
        del path  # the bug: the directory entry is never made durable


def _opener(wrapper: type[_Wrapped], name: str, doc: str) -> Any:
    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: Any, fs: FileSystem | None = None
    ) -> CommitLogMQ:
        return CommitLogMQ.open(path, config=config, clock=clock, faults=faults,
                                policy=FlushPolicy(mode="sync"),
                                fs=wrapper(fs or OsFileSystem()))

    factory.__qualname__ = factory.__name__ = name
    factory.__doc__ = doc
    return factory


open_no_fsync = _opener(_NoSegmentSync, "open_no_fsync", "Commit-log segments never synced.")
open_fsync_error_swallowed = _opener(_SwallowSyncErrors, "open_fsync_error_swallowed",
                                     "A failed fsync is swallowed.")
open_no_dir_sync = _opener(_NoDirSync, "open_no_dir_sync", "Directories never synced.")
open_no_crc_check = _opener(_NoCrcCheck, "open_no_crc_check", "Records read without CRC check.")

_MODULE = "rmqsim.conformance.mutants.storage"
MUTANTS: tuple[Mutant, ...] = (
    Mutant("no-fsync", "storage", "sync mode returns before the commit log is synced",
           f"{_MODULE}:open_no_fsync"),
    Mutant("fsync-error-swallowed", "storage",
           "a failed fsync is ignored and the operation returns as durable",
           f"{_MODULE}:open_fsync_error_swallowed"),
    Mutant("no-dir-sync", "storage", "a created file's directory is never synced",
           f"{_MODULE}:open_no_dir_sync"),
    Mutant("no-crc-check", "storage", "recovery takes the log's records without their CRC",
           f"{_MODULE}:open_no_crc_check"),
)
