"""A simulated disk: ``impl.commitlog.fs.FileSystem`` in memory, with power cuts.

Per file (an *inode*, so a rename or an open handle keeps following it) the disk keeps the
**durable image** and the **pending operations** since the last ``sync`` (writes and
truncations, in order); per path whether its **directory entry** is durable (a created,
renamed or removed entry becomes durable only when its directory is synced, as POSIX
promises and ext4/XFS keep to; a new directory's own entry likewise). Reads see the
current contents (the page cache).

Every call that changes something is a numbered **point** (``PointRecord``): writes,
truncations, syncs of files and of directories, creations, renames, removals. ``arm``
makes the disk act at one point:

- a **power cut** (``PowerCut``, a ``BaseException`` so that no ``except Exception`` of the
  code under test swallows it) is raised *instead of* the call; from then on the disk is
  dead (every call but ``close`` raises ``PowerCut`` again) and ``cut`` gives the disk that
  a reboot finds, by the armed fault mode (``FAULT_MODES``);
- in mode ``sync-error`` the call (a sync) fails with ``EIO`` and, as Linux does
  (fsyncgate), the file's pending writes are dropped from what will ever reach the disk
  while reads still show them; the harness cuts power later (``lose-unsynced``).

Fault modes at a cut (the decisions drawn from a ``random.Random`` the caller seeds):

- ``lose-unsynced``: every file keeps its durable image, every directory its durable
  entries: exactly what was synced survives;
- ``keep-prefix``: each file keeps a random prefix of its pending operations;
- ``keep-subset``: each file keeps a random subset of them, applied in order (a later
  write may survive without an earlier one: reordering);
- ``torn-write``: one pending write of one file is torn at a 512-byte boundary of the file
  inside it: the part before survives, the rest of its range is garbage; the operations
  before it survive, those after it and every other file's pending ones are lost;
- ``lose-dir-entry``: all data survives, but one directory entry that was never made
  durable (a created, renamed or removed name) is undone.

In the data modes the namespace survives as it is; an entry whose directory did not
survive is lost with it. ``cut`` records every decision as plain data (``last_cut``).
"""

from __future__ import annotations

import errno
import posixpath
import random
from dataclasses import dataclass
from typing import Any

from rmqsim.impl.commitlog.fs import LockedError

__all__ = [
    "DATA_FAULT_MODES",
    "FAULT_MODES",
    "SECTOR_SIZE_BYTES",
    "DiskAccessError",
    "PointRecord",
    "PowerCut",
    "SimDisk",
    "apply_ops",
]

#: Modes of a power cut, then the sync failure (armed at a sync point only).
FAULT_MODES = (
    "lose-unsynced", "keep-prefix", "keep-subset", "torn-write", "lose-dir-entry", "sync-error",
)
#: The modes that decide per file which pending operations survive.
DATA_FAULT_MODES = ("lose-unsynced", "keep-prefix", "keep-subset", "torn-write")
#: The unit a write may be torn at.
SECTOR_SIZE_BYTES = 512
_SYNC_CALLS = frozenset({"sync", "sync_dir"})
_ROOT = "/"

#: A pending operation: ``("write", offset, data)`` or ``("truncate", size_bytes)``.
PendingOp = tuple[Any, ...]


class PowerCut(BaseException):
    """The power went out at this call (or the disk is dead since an earlier cut)."""


class DiskAccessError(Exception):
    """The way to a disk failed (a mount that could not be made, as
    ``fuse_disk.FuseMountError`` says): the harness's failure, never the store's."""


@dataclass(frozen=True, slots=True)
class PointRecord:
    """The ``index``-th changing call (from 1): which call, on which path."""

    index: int
    call: str
    path: str

    @property
    def is_sync(self) -> bool:
        return self.call in _SYNC_CALLS


class _Inode:
    __slots__ = ("current", "durable", "pending")

    def __init__(self, data: bytes = b"") -> None:
        self.durable = bytearray(data)
        self.current = bytearray(data)
        self.pending: list[PendingOp] = []


def apply_ops(image: bytes | bytearray, ops: list[PendingOp]) -> bytearray:
    """``image`` after the pending operations ``ops``, in order."""
    data = bytearray(image)
    for op in ops:
        if op[0] == "write":
            _write(data, op[1], op[2])
        else:
            _truncate(data, op[1])
    return data


def _write(data: bytearray, offset: int, payload: bytes) -> None:
    if len(data) < offset:
        data.extend(bytes(offset - len(data)))
    data[offset : offset + len(payload)] = payload


def _truncate(data: bytearray, size_bytes: int) -> None:
    del data[size_bytes:]
    data.extend(bytes(size_bytes - len(data)))


def _parent(path: str) -> str:
    return posixpath.dirname(path) or _ROOT


class SimDisk:
    """The simulated disk (module docstring). ``files`` maps a path to its bytes for a new
    disk whose every byte and entry is durable (a rebooted disk is made so)."""

    def __init__(self, files: dict[str, bytes] | None = None, dirs: tuple[str, ...] = ()) -> None:
        self._ns: dict[str, _Inode] = {}
        self._dirs: set[str] = {_ROOT}
        for directory in dirs:
            self._add_dirs(directory)
        for path, data in sorted((files or {}).items()):
            self._add_dirs(_parent(path))
            self._ns[path] = _Inode(data)
        self._durable_ns = dict(self._ns)
        self._durable_dirs = set(self._dirs)
        self._handles: dict[int, tuple[str, _Inode]] = {}
        self._locks: set[str] = set()
        self._next_handle = 2
        #: Changing calls so far; every one of them is a point.
        self.points: list[PointRecord] = []
        self._armed: tuple[int, str] | None = None
        self.dead = False
        #: The armed point fired (the cut, or the failed sync).
        self.fired: PointRecord | None = None
        #: Plain data of the last ``cut``: mode, point and every decision.
        self.last_cut: dict[str, Any] | None = None

    # ------------------------------------------------------------------ arming and cuts

    def arm(self, point: int, mode: str) -> None:
        """Act at the ``point``-th changing call (module docstring)."""
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}: {mode!r}")
        self._armed = (point, mode)

    def _point(self, call: str, path: str) -> bool:
        """Count a changing call; raise ``PowerCut`` when armed so; True: fail the sync."""
        if self.dead:
            raise PowerCut(f"the disk is dead (cut at {self.fired})")
        record = PointRecord(len(self.points) + 1, call, path)
        self.points.append(record)
        if self._armed is None or self._armed[0] != record.index:
            return False
        self.fired = record
        if self._armed[1] == "sync-error":
            return record.is_sync
        self.dead = True
        raise PowerCut(f"power cut at point {record.index} ({call} {path})")

    def unsynced_paths(self, under: str) -> list[str]:
        """Paths under ``under`` with pending data or a non-durable entry (sorted)."""
        prefix = under.rstrip("/") + "/"
        names = {p for p in [*self._ns, *self._durable_ns, *self._dirs, *self._durable_dirs]
                 if p.startswith(prefix)}
        return sorted(p for p in names if self._unsynced(p))

    def _unsynced(self, path: str) -> bool:
        inode = self._ns.get(path)
        if self._durable_ns.get(path) is not inode:
            return True
        if (path in self._dirs) != (path in self._durable_dirs):
            return True
        return inode is not None and bool(inode.pending)

    def cut(self, mode: str, rng: random.Random) -> SimDisk:
        """The disk a reboot finds after a power cut in ``mode`` (``sync-error`` cuts as
        ``lose-unsynced``); ``last_cut`` records the decisions."""
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}: {mode!r}")
        self.dead = True
        fired = self.fired
        record: dict[str, Any] = {
            "mode": mode,
            "point": None if fired is None else {"index": fired.index, "call": fired.call,
                                                 "path": fired.path},
        }
        ns, dirs = self._surviving_namespace(mode, rng, record)
        data = self._surviving_data(mode, ns, rng, record)
        self.last_cut = record
        return SimDisk({path: bytes(data[path]) for path in ns}, tuple(sorted(dirs)))

    def _surviving_namespace(
        self, mode: str, rng: random.Random, record: dict[str, Any]
    ) -> tuple[dict[str, _Inode], set[str]]:
        if mode in ("lose-unsynced", "sync-error"):
            ns, dirs = dict(self._durable_ns), set(self._durable_dirs)
        else:
            ns, dirs = dict(self._ns), set(self._dirs)
        if mode == "lose-dir-entry":
            changed = sorted(
                p for p in {*self._ns, *self._durable_ns, *self._dirs, *self._durable_dirs}
                if self._durable_ns.get(p) is not self._ns.get(p)
                or (p in self._dirs) != (p in self._durable_dirs)
            )
            lost = rng.choice(changed) if changed else None
            record["lost_entry"] = lost
            if lost is not None:
                ns.pop(lost, None)
                dirs.discard(lost)
                if lost in self._durable_ns:
                    ns[lost] = self._durable_ns[lost]
                if lost in self._durable_dirs:
                    dirs.add(lost)
        kept_dirs = {d for d in sorted(dirs) if self._reachable(d, dirs)}
        orphans = sorted(p for p in ns if _parent(p) not in kept_dirs)
        if orphans or kept_dirs != dirs:
            record["orphaned"] = sorted([*orphans, *(dirs - kept_dirs)])
        return {p: i for p, i in ns.items() if _parent(p) in kept_dirs}, kept_dirs

    @staticmethod
    def _reachable(directory: str, dirs: set[str]) -> bool:
        while directory != _ROOT:
            if directory not in dirs:
                return False
            directory = _parent(directory)
        return True

    def _surviving_data(
        self, mode: str, ns: dict[str, _Inode], rng: random.Random, record: dict[str, Any]
    ) -> dict[str, bytearray]:
        decisions: dict[str, Any] = {}
        torn_path = self._torn_target(ns, rng) if mode == "torn-write" else None
        data: dict[str, bytearray] = {}
        for path in sorted(ns):
            inode = ns[path]
            count = len(inode.pending)
            note: dict[str, Any] | None
            if mode == "lose-dir-entry":
                kept, note = list(range(count)), None
            elif mode == "keep-prefix":
                kept = list(range(rng.randint(0, count))) if count else []
                note = {"kept_prefix": len(kept), "of": count}
            elif mode == "keep-subset":
                kept = sorted(rng.sample(range(count), rng.randint(0, count))) if count else []
                note = {"kept": kept, "of": count}
            else:
                kept, note = [], ({"kept_prefix": 0, "of": count} if count else None)
            image = apply_ops(inode.durable, [inode.pending[i] for i in kept])
            if path == torn_path:
                image, note = self._tear(inode, rng)
            if note is not None:
                decisions[path] = note
            data[path] = image
        record["files"] = decisions
        return data

    @staticmethod
    def _torn_target(ns: dict[str, _Inode], rng: random.Random) -> str | None:
        """A file with a pending write that crosses a sector boundary (sorted, drawn)."""
        candidates = [p for p in sorted(ns) if any(_tear_points(op) for op in ns[p].pending)]
        return rng.choice(candidates) if candidates else None

    @staticmethod
    def _tear(inode: _Inode, rng: random.Random) -> tuple[bytearray, dict[str, Any]]:
        choices = [i for i, op in enumerate(inode.pending) if _tear_points(op)]
        index = rng.choice(choices)
        op = inode.pending[index]
        boundary = rng.choice(_tear_points(op))
        end = op[1] + len(op[2])
        garbage = rng.randbytes(end - boundary)
        image = apply_ops(inode.durable, inode.pending[:index])
        _write(image, op[1], op[2][: boundary - op[1]] + garbage)
        note = {"torn_op": index, "of": len(inode.pending), "offset": op[1],
                "size_bytes": len(op[2]), "torn_at": boundary}
        return image, note

    # ------------------------------------------------------------------ FileSystem

    def _handle(self, handle: int) -> _Inode:
        if self.dead:
            raise PowerCut("the disk is dead")
        return self._handles[handle][1]

    def open(self, path: str, *, create: bool) -> int:
        if self.dead:
            raise PowerCut("the disk is dead")
        inode = self._ns.get(path)
        if inode is None:
            if path in self._dirs:
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            if not create or _parent(path) not in self._dirs:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            self._point("create", path)
            inode = self._ns[path] = _Inode()
        self._next_handle += 1
        self._handles[self._next_handle] = (path, inode)
        return self._next_handle

    def close(self, handle: int) -> None:
        path, _ = self._handles.pop(handle)
        self._locks.discard(path)

    def size(self, handle: int) -> int:
        return len(self._handle(handle).current)

    def write_at(self, handle: int, offset: int, data: bytes) -> None:
        inode = self._handle(handle)
        self._point("write", self._handles[handle][0])
        _write(inode.current, offset, bytes(data))
        inode.pending.append(("write", offset, bytes(data)))

    def append(self, handle: int, data: bytes) -> int:
        offset = self.size(handle)
        self.write_at(handle, offset, data)
        return offset

    def read(self, handle: int, offset: int, size_bytes: int) -> bytes:
        return bytes(self._handle(handle).current[offset : offset + size_bytes])

    def sync(self, handle: int) -> None:
        inode = self._handle(handle)
        if self._point("sync", self._handles[handle][0]):
            inode.pending.clear()  # fsyncgate: dropped, never to reach the disk
            raise OSError(errno.EIO, "simulated fsync failure", self._handles[handle][0])
        inode.durable = apply_ops(inode.durable, inode.pending)
        inode.pending.clear()

    def truncate(self, handle: int, size_bytes: int) -> None:
        inode = self._handle(handle)
        self._point("truncate", self._handles[handle][0])
        _truncate(inode.current, size_bytes)
        inode.pending.append(("truncate", size_bytes))

    def sync_dir(self, path: str) -> None:
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        if self._point("sync_dir", path):
            raise OSError(errno.EIO, "simulated directory fsync failure", path)
        for name in {*self._ns, *self._durable_ns}:
            if _parent(name) == path:
                if name in self._ns:
                    self._durable_ns[name] = self._ns[name]
                else:
                    self._durable_ns.pop(name, None)
        for name in {*self._dirs, *self._durable_dirs}:
            if name != _ROOT and _parent(name) == path:
                (self._durable_dirs.add if name in self._dirs else self._durable_dirs.discard)(name)

    def rename(self, source: str, target: str) -> None:
        if source not in self._ns:
            raise FileNotFoundError(errno.ENOENT, "no such file", source)
        self._point("rename", target)
        self._ns[target] = self._ns.pop(source)

    def remove(self, path: str) -> None:
        if path not in self._ns:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        self._point("remove", path)
        del self._ns[path]

    def remove_dir(self, path: str) -> None:
        if self.list(path):
            raise OSError(errno.ENOTEMPTY, "directory not empty", path)
        self._point("remove_dir", path)
        self._dirs.discard(path)

    def make_dir(self, path: str) -> None:
        if self.dead:
            raise PowerCut("the disk is dead")
        if path in self._ns:
            raise FileExistsError(errno.EEXIST, "a file", path)
        if path not in self._dirs:
            self._point("make_dir", path)
            self._add_dirs(path)

    def _add_dirs(self, path: str) -> None:
        while path not in self._dirs:
            self._dirs.add(path)
            path = _parent(path)

    def list(self, path: str) -> list[str]:
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        names = {p for p in [*self._ns, *self._dirs] if p != _ROOT and _parent(p) == path}
        return sorted(posixpath.basename(p) for p in names)

    def exists(self, path: str) -> bool:
        return path in self._ns or path in self._dirs

    def is_dir(self, path: str) -> bool:
        return path in self._dirs

    def lock(self, path: str) -> int:
        if path in self._locks:
            raise LockedError(f"{path} is locked by another open store")
        handle = self.open(path, create=True)
        self._locks.add(path)
        return handle

    # ------------------------------------------------------------------ inspection

    def contents(self) -> dict[str, bytes]:
        """Every file's current bytes (what reads see), by path."""
        return {path: bytes(inode.current) for path, inode in sorted(self._ns.items())}

    def durable_contents(self) -> dict[str, bytes]:
        """What survives for sure: durable entries with their durable images."""
        reachable = {d for d in self._durable_dirs if self._reachable(d, self._durable_dirs)}
        return {path: bytes(inode.durable) for path, inode in sorted(self._durable_ns.items())
                if _parent(path) in reachable}


def _tear_points(op: PendingOp) -> list[int]:
    """Sector boundaries strictly inside a pending write's range (none for a truncate)."""
    if op[0] != "write":
        return []
    start, end = op[1], op[1] + len(op[2])
    first = (start // SECTOR_SIZE_BYTES + 1) * SECTOR_SIZE_BYTES
    return list(range(first, end, SECTOR_SIZE_BYTES))
