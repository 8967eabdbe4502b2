"""An in-memory ``FileSystem`` for tests: every file lives in a dict, so a store that
works on it did all of its I/O through the interface. It records every call."""

from __future__ import annotations

import posixpath

from rmqsim.impl.commitlog.fs import LockedError


class MemoryFs:
    def __init__(self) -> None:
        self.files: dict[str, bytearray] = {}
        self.dirs: set[str] = set()
        self.handles: dict[int, str] = {}
        self.locks: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self._next = 3

    def _log(self, name: str, target: str) -> None:
        self.calls.append((name, target))

    def open(self, path: str, *, create: bool) -> int:
        if path not in self.files:
            if not create:
                raise FileNotFoundError(path)
            self.files[path] = bytearray()
        self._next += 1
        self.handles[self._next] = path
        self._log("open", path)
        return self._next

    def close(self, handle: int) -> None:
        path = self.handles.pop(handle)
        self.locks.discard(path)
        self._log("close", path)

    def size(self, handle: int) -> int:
        return len(self.files[self.handles[handle]])

    def write_at(self, handle: int, offset: int, data: bytes) -> None:
        content = self.files[self.handles[handle]]
        if len(content) < offset:
            content.extend(bytes(offset - len(content)))
        content[offset : offset + len(data)] = data
        self._log("write_at", self.handles[handle])

    def append(self, handle: int, data: bytes) -> int:
        offset = self.size(handle)
        self.write_at(handle, offset, data)
        return offset

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        return bytes(self.files[self.handles[handle]][offset : offset + size_bytes])

    def sync(self, handle: int) -> None:
        self._log("sync", self.handles[handle])

    def truncate(self, handle: int, size_bytes: int) -> None:
        content = self.files[self.handles[handle]]
        del content[size_bytes:]
        content.extend(bytes(size_bytes - len(content)))
        self._log("truncate", self.handles[handle])

    def sync_dir(self, path: str) -> None:
        self._log("sync_dir", path)

    def rename(self, source: str, target: str) -> None:
        self.files[target] = self.files.pop(source)
        self._log("rename", target)

    def remove(self, path: str) -> None:
        del self.files[path]
        self._log("remove", path)

    def remove_dir(self, path: str) -> None:
        self.dirs.discard(path)
        self._log("remove_dir", path)

    def make_dir(self, path: str) -> None:
        self.dirs.add(path)

    def list(self, path: str) -> list[str]:
        names = {posixpath.basename(p) for p in [*self.files, *self.dirs]
                 if posixpath.dirname(p) == path}
        return sorted(names)

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    def is_dir(self, path: str) -> bool:
        return path in self.dirs

    def lock(self, path: str) -> int:
        if path in self.locks:
            raise LockedError(path)
        handle = self.open(path, create=True)
        self.locks.add(path)
        return handle
