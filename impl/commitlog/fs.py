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
import errno
import fcntl
import os
import posixpath
from typing import Protocol, runtime_checkable

__all__ = ["FileSystem", "LockedError", "OsFileSystem", "OverlayFileSystem"]


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


class OverlayFileSystem:
    """``FileSystem`` that reads the OS and never changes it: files are opened read-only,
    and what the backend writes (a recovery's truncation, a rebuilt consume queue, the
    lock file, the abort marker) lands in memory, copy-on-write per file, and is read
    back from there. A recovery run on it says what it would keep and drop, and leaves
    every byte on disk as it was (``rmqsim store check``). Nothing is locked: a store
    open elsewhere may change under it."""

    def __init__(self) -> None:
        self._memory: dict[str, bytearray] = {}  # files created or changed, by path
        self._made_dirs: set[str] = set()
        self._removed: set[str] = set()
        self._handles: dict[int, tuple[str, int | None]] = {}  # handle -> (path, OS fd)
        self._next = 0

    def _on_disk(self, path: str) -> bool:
        return path not in self._removed and os.path.lexists(path)

    def open(self, path: str, *, create: bool) -> int:
        fd: int | None = None
        if path not in self._memory:
            if self._on_disk(path):
                if os.path.isdir(path):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            elif create:
                self._memory[path] = bytearray()
            else:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        self._next += 1
        self._handles[self._next] = (path, fd)
        return self._next

    def close(self, handle: int) -> None:
        _path, fd = self._handles.pop(handle)
        if fd is not None:
            os.close(fd)

    def _written(self, handle: int) -> bytearray:
        """The file's bytes in memory, copied from disk at its first change."""
        path, fd = self._handles[handle]
        content = self._memory.get(path)
        if content is None:
            assert fd is not None, path
            content = bytearray(os.pread(fd, os.fstat(fd).st_size, 0))
            self._memory[path] = content
        return content

    def size(self, handle: int) -> int:
        path, fd = self._handles[handle]
        content = self._memory.get(path)
        if content is not None:
            return len(content)
        assert fd is not None, path
        return os.fstat(fd).st_size

    def write_at(self, handle: int, offset: int, data: bytes) -> None:
        content = self._written(handle)
        if len(content) < offset:
            content.extend(bytes(offset - len(content)))
        content[offset : offset + len(data)] = data

    def append(self, handle: int, data: bytes) -> int:
        offset = self.size(handle)
        self.write_at(handle, offset, data)
        return offset

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        path, fd = self._handles[handle]
        content = self._memory.get(path)
        if content is not None:
            return bytes(content[offset : offset + size_bytes])
        assert fd is not None, path
        return os.pread(fd, size_bytes, offset)

    def sync(self, handle: int) -> None:
        del handle

    def truncate(self, handle: int, size_bytes: int) -> None:
        content = self._written(handle)
        del content[size_bytes:]
        content.extend(bytes(size_bytes - len(content)))

    def sync_dir(self, path: str) -> None:
        del path

    def rename(self, source: str, target: str) -> None:
        if source not in self._memory:
            with open(source, "rb") as file:
                self._memory[source] = bytearray(file.read())
        self._memory[target] = self._memory.pop(source)
        self._removed.add(source)
        self._removed.discard(target)

    def remove(self, path: str) -> None:
        if not self.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        self._memory.pop(path, None)
        self._removed.add(path)

    def remove_dir(self, path: str) -> None:
        self._made_dirs.discard(path)
        self._removed.add(path)

    def make_dir(self, path: str) -> None:
        if not self.exists(path):
            self._made_dirs.add(path)
            self._removed.discard(path)

    def list(self, path: str) -> list[str]:
        names = set(os.listdir(path)) if self._on_disk(path) and os.path.isdir(path) else set()
        names -= {posixpath.basename(p) for p in self._removed if posixpath.dirname(p) == path}
        names |= {posixpath.basename(p) for p in (*self._memory, *self._made_dirs)
                  if posixpath.dirname(p) == path}
        return sorted(names)

    def exists(self, path: str) -> bool:
        return path in self._memory or path in self._made_dirs or self._on_disk(path)

    def is_dir(self, path: str) -> bool:
        if path in self._memory:
            return False
        return path in self._made_dirs or (self._on_disk(path) and os.path.isdir(path))

    def lock(self, path: str) -> int:
        return self.open(path, create=True)
