"""The one file-system interface every byte of the commit-log backend goes through.

``FileSystem`` is what the backend needs and nothing more: open a file (by path, giving a
handle), write at an offset, append, read, sync a file, sync a directory, truncate,
rename, remove, list, plus making directories and an advisory lock. ``OsFileSystem`` calls
the OS (``os.open``/``os.pwrite``/``os.pread``/``os.fsync``; a directory is synced by
fsyncing a descriptor opened on it). A simulated disk for power-loss tests implements the
same protocol and is passed to ``CommitLogMQ.open(..., fs=...)``.

Nothing here buffers in user space: a ``write_at`` that returned is in the OS (it survives
the death of the process, not a power cut); only ``sync`` makes it durable. So ``crash()``
of the queue, which closes handles without syncing, loses exactly what a SIGKILL loses.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Protocol, runtime_checkable

__all__ = ["FileSystem", "LockedError", "OsFileSystem"]


class LockedError(OSError):
    """``lock`` found the lock file held by another open store."""


@runtime_checkable
class FileSystem(Protocol):
    """File operations of the backend; paths are ``str``, handles opaque ints."""

    def open(self, path: str, *, create: bool) -> int: ...

    def close(self, handle: int) -> None: ...

    def size(self, handle: int) -> int: ...

    def write_at(self, handle: int, offset: int, data: bytes) -> None: ...

    def append(self, handle: int, data: bytes) -> int: ...

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes: ...

    def sync(self, handle: int) -> None: ...

    def truncate(self, handle: int, size_bytes: int) -> None: ...

    def sync_dir(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_dir(self, path: str) -> None: ...

    def make_dir(self, path: str) -> None: ...

    def list(self, path: str) -> list[str]: ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def lock(self, path: str) -> int: ...


class OsFileSystem:
    """``FileSystem`` on the real OS."""

    def open(self, path: str, *, create: bool) -> int:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)

    def close(self, handle: int) -> None:
        os.close(handle)

    def size(self, handle: int) -> int:
        return os.fstat(handle).st_size

    def write_at(self, handle: int, offset: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(handle, view, offset)
            view = view[written:]
            offset += written

    def append(self, handle: int, data: bytes) -> int:
        offset = self.size(handle)
        self.write_at(handle, offset, data)
        return offset

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        return os.pread(handle, size_bytes, offset)

    def sync(self, handle: int) -> None:
        os.fsync(handle)

    def truncate(self, handle: int, size_bytes: int) -> None:
        os.ftruncate(handle, size_bytes)

    def sync_dir(self, path: str) -> None:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(handle)
        finally:
            os.close(handle)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def remove(self, path: str) -> None:
        os.unlink(path)

    def remove_dir(self, path: str) -> None:
        os.rmdir(path)

    def make_dir(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def list(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def lock(self, path: str) -> int:
        """An exclusive ``flock`` on ``path`` (created if absent); closing the handle
        releases it. ``LockedError`` if another handle holds it."""
        handle = self.open(path, create=True)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with contextlib.suppress(OSError):
                os.close(handle)
            raise LockedError(f"{path} is locked by another open store") from None
        return handle
