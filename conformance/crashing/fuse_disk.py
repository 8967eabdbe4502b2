"""A simulated disk for any process: a ``SimDisk`` served as a FUSE file system.

``mount_disk(disk)`` mounts ``disk`` (``conformance.crashing.simdisk.SimDisk``) at a real empty
directory and yields a ``FuseMount``; a process in any language then sees a normal
directory (``mount.real_path("/store")``), and every FUSE call it causes is translated onto
the disk's ``FileSystem`` methods, so the disk numbers the same points as for a store that
calls it in process (``fs=``), and its arming, fault modes and cuts work unchanged:

    disk = SimDisk(dirs=("/store",))
    disk.arm(12, "torn-write")
    with mount_disk(disk) as mount:
        child = subprocess.Popen([...,  str(mount.real_path("/store"))],
                                 start_new_session=True)
        mount.add_process(child.pid)              # killed with its group at the cut
        mount.cut_event.wait(timeout_s)           # the armed point fired
        survivor = cut_power(mount, "torn-write", random.Random("seed/12"))
    with mount_disk(survivor) as mount:           # the rebooted disk: recover, check
        ...

The server is a thread of rmqsim's process running libfuse's single-threaded loop
(``mfusepy``, ctypes over libfuse 3), with libfuse's default options: no ``direct_io``, so
a ``write()`` reaches the disk synchronously as one FUSE write (up to 1 MiB, 256 pages,
counting the page it starts in: a longer one arrives split, one point per piece), and a
shared writable ``mmap`` works (its dirty pages reach the disk as writes only at
``msync``, ``fsync``, ``munmap``, the ``close`` of a descriptor of the file, or the
kernel's own writeback).
Translation:

| FUSE call | SimDisk | point |
|---|---|---|
| create (``open`` with ``O_CREAT`` of a new name) | ``open(create=True)`` | create |
| open (``O_TRUNC``: and ``truncate(0)``) | ``open(create=False)`` | - |
| write / read | ``write_at`` / ``read`` | write / - |
| setattr size (``ftruncate``), fallocate mode 0 growing a file | ``truncate`` | truncate |
| fsync, fdatasync (and ``msync``, after its writes) | ``sync`` | sync |
| fsyncdir (``fsync`` of a directory descriptor) | ``sync_dir`` | sync_dir |
| mkdir, rmdir, unlink, rename | ``make_dir``, ``remove_dir``, ``remove``, ``rename`` | its own |
| getattr, readdir, statfs, flush, release, utimens, chmod, chown | read-only, or ``close`` | - |

``flock``/``fcntl`` locks are the kernel's own (the file system does not implement them).
Modification times are kept per mount, in memory (``FuseMount.mtimes_ns``), and are not
durable. Not supported: hard and symbolic links, renaming a directory, extended
attributes (``ENOTSUP``/``ENOSYS``).

When the armed point fires as a power cut (``PowerCut``), that call and every later one
fails with ``EIO`` (the machine lost power) and ``cut_event`` is set; ``cut_power`` then
SIGKILLs the process groups added to the mount, unmounts it (lazily when busy) and gives
``disk.cut(mode, rng)``; with ``FuseMount.kill_at_cut`` the firing call SIGKILLs them
at once (a caller that uses nothing they do after the cut need not wait for them). A
failed sync (mode ``sync-error``) fails that ``fsync`` with ``EIO``, as in process.
Mount hygiene (every mount recorded, a killed run's mounts cleaned at the next start) is
``conformance.crashing.fuse_mounts``; ``fuse_available()`` says why FUSE cannot be used
here, or None.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqsim.conformance.crashing.fuse_mounts import (
    MountRecord,
    abort_connection,
    clean_stale_mounts,
    kill_group,
    new_mountpoint,
    process_alive,
    unmount,
    wait_gone,
)
from rmqsim.conformance.crashing.simdisk import DiskAccessError, PowerCut, SimDisk

__all__ = [
    "FSNAME",
    "REQUIRE_FUSE_ENV",
    "FuseCall",
    "FuseMount",
    "FuseMountError",
    "cut_power",
    "fuse_available",
    "fuse_required",
    "mount_disk",
]

#: Set to 1 (CI does): where FUSE cannot be used, what would be skipped fails instead.
REQUIRE_FUSE_ENV = "RMQSIM_REQUIRE_FUSE"
#: The file system's name in ``/proc/mounts``.
FSNAME = "rmqsim-simdisk"
#: How long a mount may take to come up, and an unmount's server to stop.
MOUNT_WAIT_S = 10.0
UNMOUNT_WAIT_S = 10.0
#: How long killed processes may take to exit before the mount's connection is aborted
#: (their last FUSE calls, the flushes of a closing file, are still answered).
EXIT_WAIT_S = 2.0
_log = logging.getLogger("rmqsim.fuse")
#: FUSE calls not written to ``FuseMount.calls`` (lookups and listings).
_UNRECORDED = frozenset({"getattr", "readdir", "opendir", "releasedir", "statfs"})
_RENAME_NOREPLACE = 1


class FuseMountError(DiskAccessError):
    """A mount could not be made, or its server could not be stopped (one line)."""


@dataclass(frozen=True, slots=True)
class FuseCall:
    """One FUSE call the server answered (``FuseMount.calls`` when recording): which,
    on which path, at which offset and of how many bytes (writes, reads, truncations),
    and the error number it failed with (0: it succeeded)."""

    call: str
    path: str
    offset: int = 0
    size_bytes: int = 0
    error: int = 0


# --------------------------------------------------------------------------- the library


def _mfusepy() -> Any:
    """The ``mfusepy`` module on libfuse 3 (ImportError or OSError when missing)."""
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")
    import mfusepy

    return mfusepy


#: libfuse's log lines since the last ``_take_libfuse_log`` (libfuse writes them to
#: stderr otherwise: a failed mount says why here, in one line of rmqsim's).
_LIBFUSE_LOG: list[str] = []
_LOG_FUNC_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


@_LOG_FUNC_TYPE
def _libfuse_log(level: int, fmt: bytes, arguments: int) -> None:
    del level
    buffer = ctypes.create_string_buffer(1024)
    ctypes.CDLL(None).vsnprintf(buffer, ctypes.c_size_t(len(buffer)), fmt,
                                ctypes.c_void_p(arguments))
    _LIBFUSE_LOG.append(buffer.value.decode("utf-8", "replace").strip())


@functools.cache
def _capture_libfuse_log() -> None:
    """Route libfuse's log through ``_libfuse_log`` (libfuse >= 3.7; x86-64 and arm64
    pass a ``va_list`` as a pointer, which is what the callback forwards)."""
    with contextlib.suppress(OSError, AttributeError):
        library = ctypes.CDLL("libfuse3.so.3")
        library.fuse_set_log_func(_libfuse_log)


def _take_libfuse_log() -> str:
    lines = [line for line in _LIBFUSE_LOG if line]
    _LIBFUSE_LOG.clear()
    return "; ".join(lines)


@functools.cache
def fuse_available() -> str | None:
    """None when this process can mount a FUSE disk, else why not (no ``/dev/fuse``,
    not permitted, the library missing); found once per process, by mounting an empty
    disk. Also cleans up the mounts a killed run left behind."""
    if not sys.platform.startswith("linux"):
        return f"FUSE disks need Linux (this is {sys.platform})"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (the fuse kernel module is not loaded, or a container hides it)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"cannot open /dev/fuse: {exc.strerror or exc}"
    try:
        library = _mfusepy()
    except ImportError:
        return "the Python package mfusepy is missing (pip install 'rmqsim[fuse]')"
    except OSError as exc:
        return f"libfuse 3 is missing ({exc}; apt-get install fuse3 libfuse3-3)"
    if library.fuse_version_major != 3:
        return f"mfusepy found libfuse {library.fuse_version_major}, not libfuse 3"
    try:
        with mount_disk(SimDisk()) as mount:
            os.listdir(mount.path)
    except (FuseMountError, OSError) as exc:
        return f"mounting a FUSE file system failed: {exc}"
    return None


def fuse_required() -> bool:
    """``RMQSIM_REQUIRE_FUSE=1``: FUSE must be usable (no skipping)."""
    return os.environ.get(REQUIRE_FUSE_ENV) == "1"


# --------------------------------------------------------------------------- the server


class _Operations:
    """What mfusepy calls: each FUSE call onto the disk (module docstring's table).
    Errors are ``OSError``s, which mfusepy answers as their error numbers."""

    use_ns = True

    def __init__(self, disk: SimDisk, mount: FuseMount) -> None:
        self.disk = disk
        self.mount = mount
        self.started_ns = time.time_ns()

    # -- the frame around every call

    def _do(self, call: str, path: str | None, action: Callable[[], Any], offset: int = 0,
            size_bytes: int = 0) -> Any:  # fmt: skip
        mount = self.mount
        where = path or "?"
        mount.in_flight = (call, where, time.monotonic())
        code = 0
        try:
            if self.disk.dead and call not in ("release", "releasedir"):
                raise PowerCut("the disk is dead")
            return action()
        except PowerCut:
            if mount.kill_at_cut and not mount.cut_event.is_set():
                mount.kill_processes()  # the machine's processes end with its power
            mount.cut_event.set()
            code = errno.EIO
            raise OSError(errno.EIO, "the simulated disk lost power") from None
        except KeyError:
            code = errno.EBADF
            raise OSError(errno.EBADF, "no such handle") from None
        except OSError as exc:
            code = exc.errno if isinstance(exc.errno, int) and exc.errno > 0 else errno.EIO
            raise OSError(code, exc.strerror or str(exc)) from None
        finally:
            mount.in_flight = None
            if mount.calls is not None and call not in _UNRECORDED:
                mount.calls.append(FuseCall(call, where, offset, size_bytes, code))

    def _touch(self, path: str | None) -> None:
        if path is not None:
            self.mount.mtimes_ns[path] = time.time_ns()

    # -- attributes and listings

    def init_with_config(self, conn: Any, config: Any) -> None:
        del conn
        if config is not None:
            config.hard_remove = 1  # an unlinked open file is not renamed to .fuse_hidden*
        _keep_default_signals()
        self.mount.mounted = True
        self.mount.ready.set()

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        def attributes() -> dict[str, Any]:
            disk = self.disk
            mtime_ns = self.mount.mtimes_ns.get(path or "", self.started_ns)
            times = {"st_mtime": mtime_ns, "st_ctime": mtime_ns, "st_atime": mtime_ns}
            if path is not None and disk.is_dir(path):
                return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, **times}
            if fh is not None:
                size = disk.size(fh)
            else:
                handle = disk.open(path or "", create=False)
                try:
                    size = disk.size(handle)
                finally:
                    disk.close(handle)
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": size,
                    "st_blocks": -(-size // 512), "st_blksize": 4096, **times}

        return self._do("getattr", path, attributes)

    def readdir(self, path: str, fh: int) -> list[str]:
        del fh
        return [".", "..", *self._do("readdir", path, lambda: self.disk.list(path))]

    def opendir(self, path: str) -> int:
        def check() -> int:
            if not self.disk.is_dir(path):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
            return 0

        return self._do("opendir", path, check)

    def releasedir(self, path: str | None, fh: int) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        """A 64 GiB file system, nearly empty (a store that checks its free space, as
        RocketMQ's does before it writes, finds plenty)."""
        blocks = 1 << 24
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": blocks,
                "f_bfree": blocks - (1 << 16), "f_bavail": blocks - (1 << 16),
                "f_files": 1 << 20, "f_ffree": (1 << 20) - 1024, "f_namemax": 255}

    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        def set_times() -> int:
            if path is not None and not self.disk.exists(path):
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            if path is not None:
                self.mount.mtimes_ns[path] = time.time_ns() if times is None else int(times[1])
            return 0

        return self._do("utimens", path, set_times)

    def chmod(self, path: str | None, mode: int) -> int:
        return self._do("chmod", path, lambda: 0)

    def chown(self, path: str | None, uid: int, gid: int) -> int:
        return self._do("chown", path, lambda: 0)

    # -- files

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        def create_file() -> int:
            handle = self.disk.open(path, create=True)
            self._touch(path)
            return handle

        return self._do("create", path, create_file)

    def open(self, path: str, flags: int) -> int:
        def open_file() -> int:
            handle = self.disk.open(path, create=False)
            if flags & os.O_TRUNC:
                self.disk.truncate(handle, 0)
            return handle

        return self._do("open", path, open_file)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        return self._do(
            "read", path, lambda: self.disk.read(fh, offset, size), offset, size)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        def write_data() -> int:
            self.disk.write_at(fh, offset, data)
            self._touch(path)
            return len(data)

        return self._do("write", path, write_data, offset, len(data))

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        def truncate_file() -> int:
            handle = fh if fh is not None else self.disk.open(path or "", create=False)
            try:
                self.disk.truncate(handle, length)
            finally:
                if fh is None:
                    self.disk.close(handle)
            self._touch(path)
            return 0

        return self._do("truncate", path, truncate_file, length)

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        def allocate() -> int:
            if mode != 0:
                raise OSError(errno.EOPNOTSUPP, "only fallocate mode 0 is supported")
            if self.disk.size(fh) < offset + size:
                self.disk.truncate(fh, offset + size)
            return 0

        return self._do("fallocate", path, allocate, offset, size)

    def flush(self, path: str | None, fh: int) -> int:
        return self._do("flush", path, lambda: 0)

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        def sync() -> int:
            self.disk.sync(fh)
            return 0

        return self._do("fsync", path, sync)

    def release(self, path: str | None, fh: int) -> int:
        def close() -> int:
            self.disk.close(fh)
            return 0

        return self._do("release", path, close)

    # -- the namespace

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        def sync_dir() -> int:
            self.disk.sync_dir(path or "/")
            return 0

        return self._do("fsyncdir", path, sync_dir)

    def mkdir(self, path: str, mode: int) -> int:
        def make() -> int:
            self.disk.make_dir(path)
            self._touch(path)
            return 0

        return self._do("mkdir", path, make)

    def rmdir(self, path: str) -> int:
        return self._do("rmdir", path, lambda: self.disk.remove_dir(path))

    def unlink(self, path: str) -> int:
        def remove() -> None:
            if self.disk.is_dir(path):
                raise IsADirectoryError(errno.EISDIR, "a directory", path)
            self.disk.remove(path)
            self.mount.mtimes_ns.pop(path, None)

        return self._do("unlink", path, remove)

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        def move() -> None:
            disk = self.disk
            if disk.is_dir(old):
                raise OSError(errno.ENOTSUP, "renaming a directory is not supported", old)
            if disk.is_dir(new):
                raise IsADirectoryError(errno.EISDIR, "a directory", new)
            if flags & ~_RENAME_NOREPLACE:
                raise OSError(errno.EINVAL, "rename flags other than RENAME_NOREPLACE", old)
            if flags & _RENAME_NOREPLACE and disk.exists(new):
                raise FileExistsError(errno.EEXIST, "exists", new)
            disk.rename(old, new)
            mtimes = self.mount.mtimes_ns
            if old in mtimes:
                mtimes[new] = mtimes.pop(old)

        return self._do("rename", old, move)


def _keep_default_signals() -> None:
    """Undo libfuse's signal handlers. Its loop installs, process-wide, a handler that
    ends the loop on SIGHUP, SIGINT and SIGTERM where the disposition was the default:
    rmqsim would then outlive a SIGTERM. Where Python says the default, the default is
    put back (called from the loop's ``init``, after libfuse installed them)."""
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) == signal.SIG_DFL:
            libc.signal(int(signum), None)  # SIG_DFL is the null pointer


@functools.cache
def _server_class() -> Any:
    """mfusepy's ``FUSE`` with two calls that pass what libfuse 3 gives: ``truncate``
    the open handle (``ftruncate`` of an unlinked file has no path), ``rename`` its flags."""
    base: Any = _mfusepy().FUSE

    class _Server(base):  # mfusepy has no type hints: Any
        def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
            name = None if path is None else path.decode(self.encoding, self.errors)
            handle = fip.contents.fh if fip else None
            return self.operations.truncate(name, length, handle)

        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
            return self.operations.rename(
                old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors),
                flags)

    return _Server


# --------------------------------------------------------------------------- mounts


class FuseMount:
    """A ``SimDisk`` mounted at ``path`` (``mount_disk``)."""

    def __init__(self, disk: SimDisk, path: Path, *, record: bool, owned: bool,
                 mtimes_ns: dict[str, int] | None = None) -> None:  # fmt: skip
        self.disk = disk
        self.path = path
        #: Every FUSE call answered, in order (when mounted with ``record=True``).
        self.calls: list[FuseCall] | None = [] if record else None
        #: Set when the armed point fired as a power cut: every call fails from then on.
        self.cut_event = threading.Event()
        #: Whether the cut SIGKILLs the processes added (``add_process``) at once, from the
        #: call that fired it, rather than leaving them to see ``EIO`` until ``cut_power``:
        #: for a caller that uses nothing they do after the cut (``power_fuse``).
        self.kill_at_cut = False
        #: The FUSE call being answered: (call, path, ``time.monotonic()`` at its start).
        self.in_flight: tuple[str, str, float] | None = None
        #: Modification times set or caused through the mount (not durable), by path.
        self.mtimes_ns: dict[str, int] = dict(mtimes_ns or {})
        self.ready = threading.Event()
        self._owned = owned
        self._record = MountRecord.create(path)
        self._processes: list[tuple[int, str | None]] = []
        self._thread: threading.Thread | None = None
        self._error: str | None = None
        self.mounted = False

    def real_path(self, disk_path: str) -> Path:
        """Where the disk's absolute path ``disk_path`` is seen through the mount."""
        return self.path / disk_path.lstrip("/")

    def add_process(self, pid: int) -> None:
        """A process started on the mount, leading its own process group: ``cut_power``
        and ``unmount`` SIGKILL that group (and a later run does, if rmqsim dies)."""
        self._processes = [*filter(lambda p: process_alive(*p), self._processes),
                           self._record.add_child(pid)]

    def describe_in_flight(self) -> str | None:
        """The FUSE call being answered and for how long, or None."""
        current = self.in_flight
        if current is None:
            return None
        return f"{current[0]} {current[1]} (for {time.monotonic() - current[2]:.1f} s)"

    def kill_processes(self) -> None:
        """SIGKILL the process groups added to the mount (the ones still there)."""
        for pid, start in self._processes:
            kill_group(pid, start)

    # -- mounting

    def start(self) -> None:
        """Mount, serving from a thread; ``FuseMountError`` (one line) when it fails."""
        _capture_libfuse_log()
        operations = _Operations(self.disk, self)
        server = _server_class()

        def serve() -> None:
            try:
                server(operations, str(self.path), foreground=True, nothreads=True,
                       fsname=FSNAME)
            except BaseException as exc:  # the loop's end, whatever it was
                self._error = f"{type(exc).__name__}: {exc}"
            finally:
                self.ready.set()

        self._thread = threading.Thread(target=serve, name=f"rmqsim-fuse:{self.path}",
                                        daemon=True)
        self._thread.start()
        if not self.ready.wait(MOUNT_WAIT_S) or not self.mounted:
            said = _take_libfuse_log()
            self.unmount()
            reason = said or self._error or f"not up within {MOUNT_WAIT_S:g} s"
            raise FuseMountError(f"cannot mount the simulated disk at {self.path}: {reason}")

    def unmount(self) -> None:
        """Kill the processes added and let them exit; unmount (when still busy: abort
        the connection, which frees a process stuck in a FUSE call, and detach lazily);
        stop the server; remove the mount point and the record. ``FuseMountError`` (one
        line) when the server does not stop (the mount is gone all the same), or naming
        a process that outlived it all. Idempotent."""
        self.kill_processes()
        left = wait_gone([pid for pid, start in self._processes if process_alive(pid, start)],
                         EXIT_WAIT_S)
        problem = unmount(self.path, lazy=False)
        if problem is not None or left:
            abort_connection(self.path)
            problem = unmount(self.path, lazy=True)
            left = wait_gone(left, EXIT_WAIT_S)
        thread, self._thread = self._thread, None
        stuck = None
        if thread is not None:
            thread.join(UNMOUNT_WAIT_S)
            if thread.is_alive():
                stuck = self.describe_in_flight() or "its loop"
        self.mounted = False
        if self._owned:
            with contextlib.suppress(OSError):
                self.path.rmdir()
        self._record.forget()
        _take_libfuse_log()
        if problem is not None:
            raise FuseMountError(f"cannot unmount {self.path}: {problem}")
        if stuck is not None:
            raise FuseMountError(f"the FUSE server of {self.path} is stuck in {stuck}; the "
                                 "mount is detached")
        if left:
            raise FuseMountError(f"process {left[0]} on {self.path} did not end after SIGKILL "
                                 "and the connection's abort; the mount is detached")


@contextlib.contextmanager
def mount_disk(disk: SimDisk, at: Path | None = None, *, record: bool = False,
               mtimes_ns: dict[str, int] | None = None) -> Iterator[FuseMount]:  # fmt: skip
    """Mount ``disk`` at ``at`` (an existing empty directory; default a new one in the
    scratch area) for the ``with`` block; unmounted at its end whatever happens, after
    the processes added to it are killed. ``record``: keep every FUSE call in
    ``FuseMount.calls``. ``mtimes_ns``: the modification times to start from (a
    previous mount's, to carry them over a remount)."""
    for line in clean_stale_mounts():
        _log.warning("rmqsim: %s", line)
    owned = at is None
    path = new_mountpoint() if at is None else at
    mount = FuseMount(disk, path, record=record, owned=owned, mtimes_ns=mtimes_ns)
    try:
        mount.start()
        yield mount
    finally:
        mount.unmount()


def cut_power(mount: FuseMount, mode: str, rng: Any) -> SimDisk:
    """The power is gone: kill the processes added to ``mount``, unmount it, and give the
    disk a reboot finds (``SimDisk.cut(mode, rng)``)."""
    mount.disk.dead = True  # nothing more reaches it, whatever the kill and unmount cause
    mount.unmount()
    return mount.disk.cut(mode, rng)
