"""Mount hygiene for rmqsim's FUSE disks: a registry of live mounts, and the clean-up of
the mounts a killed run left behind.

Every mount gets a record in the scratch area (``scratch.scratch_root()/rmqsim-fuse/``,
one small JSON file per mount, written *before* the mount is made): its mount point, the
process that serves it (pid and start time, so that a reused pid is not taken for it) and
the children started on it. The mount point itself is a directory beside the records.
When the serving process is gone (a run killed by SIGKILL leaves its mount behind, in the
state "Transport endpoint is not connected"), ``clean_stale_mounts`` kills what is left of
the recorded children's process groups, unmounts the mount point (lazily), removes it and
the record. Every ``fuse_disk`` mount calls it first, so the next start cleans up.

Unmounting: as root ``umount2(2)`` (``MNT_DETACH`` for a lazy one), else ``fusermount3 -u``
(``-z``). The connection of a mount whose server is stuck can be aborted through the
``fusectl`` file system (``/sys/fs/fuse/connections/<device>/abort``), mounted for the
abort (as root) when it is not, and unmounted again.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rmqsim.conformance.running import procfs
from rmqsim.conformance.running.scratch import scratch_root

__all__ = [
    "FUSECTL_DIR",
    "FUSE_DIR_NAME",
    "MountRecord",
    "abort_connection",
    "clean_stale_mounts",
    "fuse_dir",
    "is_mounted",
    "kill_group",
    "new_mountpoint",
    "process_alive",
    "process_start",
    "unmount",
    "wait_gone",
]

#: The directory under the scratch root that holds the records and the mount points.
FUSE_DIR_NAME = "rmqsim-fuse"
#: ``umount2`` flag: detach now, finish when the last user is gone.
_MNT_DETACH = 2
#: Where the fusectl file system (a connection's ``abort``) is mounted.
FUSECTL_DIR = Path("/sys/fs/fuse/connections")
_SERIAL = itertools.count(1)


def fuse_dir() -> Path:
    """Where records and mount points live (created when missing)."""
    path = scratch_root() / FUSE_DIR_NAME
    path.mkdir(parents=True, exist_ok=True)
    return path


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from ``/proc``), or
    None when there is no such process: with the pid, it names one process for good."""
    return procfs.start_ticks(pid)


def process_alive(pid: int, start: str | None) -> bool:
    """Process ``pid`` that started at ``start`` (``process_start``) still exists (a
    reused pid is another process)."""
    return start is not None and process_start(pid) == start


def kill_group(pid: int, start: str | None) -> None:
    """SIGKILL the process group led by ``pid`` and the process itself, if it is still
    the process that started at ``start``."""
    if process_alive(pid, start):
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)


@dataclass(slots=True)
class MountRecord:
    """One mount's record (module docstring); ``path`` is the record's file."""

    path: Path
    mountpoint: str
    owner_pid: int
    owner_start: str | None
    children: list[tuple[int, str | None]] = field(default_factory=list)

    @classmethod
    def create(cls, mountpoint: Path) -> MountRecord:
        pid = os.getpid()
        path = fuse_dir() / f"{pid}-{next(_SERIAL)}.json"
        record = cls(path, str(mountpoint), pid, process_start(pid))
        record.save()
        return record

    @classmethod
    def load(cls, path: Path) -> MountRecord | None:
        """The record in ``path``; None when it is not one (a half-written file)."""
        try:
            raw = json.loads(path.read_text())
            return cls(path, str(raw["mountpoint"]), int(raw["owner_pid"]), raw["owner_start"],
                       [(int(pid), start) for pid, start in raw["children"]])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self) -> None:
        """Write the record atomically (a reader never sees half of it)."""
        text = json.dumps({"mountpoint": self.mountpoint, "owner_pid": self.owner_pid,
                           "owner_start": self.owner_start, "children": self.children})
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(text)
        temporary.replace(self.path)

    def add_child(self, pid: int) -> tuple[int, str | None]:
        """Record a process started on the mount (killed with its group if rmqsim dies);
        (pid, start time)."""
        child = (pid, process_start(pid))
        self.children = [c for c in self.children if process_alive(*c)] + [child]
        self.save()
        return child

    def forget(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    @property
    def stale(self) -> bool:
        """The process that served the mount is gone."""
        return not process_alive(self.owner_pid, self.owner_start)

    def kill_children(self) -> None:
        """SIGKILL the process group of every recorded child still alive."""
        for pid, start in self.children:
            kill_group(pid, start)


def new_mountpoint() -> Path:
    """A new empty directory to mount on (``mnt-<pid>-<n>`` under ``fuse_dir()``)."""
    while True:
        path = fuse_dir() / f"mnt-{os.getpid()}-{next(_SERIAL)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path


def _unescape(field_text: str) -> str:
    """A mountinfo field with its octal escapes (``\\040`` for a space) decoded."""
    return field_text.encode().decode("unicode_escape").encode("latin-1").decode(
        "utf-8", "surrogateescape")


def _mount_entry(path: str) -> tuple[str, str] | None:
    """(device ``major:minor``, file-system type) of the mount at ``path``, if any."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == path:
            after = fields.index("-") if "-" in fields else len(fields) - 1
            found = (fields[2], fields[after + 1] if after + 1 < len(fields) else "")
    return found  # the last one: the mount on top


def is_mounted(path: Path | str) -> bool:
    """A file system is mounted at ``path`` (even one whose server is gone)."""
    return _mount_entry(str(path)) is not None


@contextlib.contextmanager
def _fusectl() -> Iterator[bool]:
    """Whether the fusectl file system is at ``/sys/fs/fuse/connections`` for the block:
    mounted there as root when it is not (as systemd does at boot), and then unmounted
    after it, so that an abort leaves no mount behind."""
    if is_mounted(FUSECTL_DIR):
        yield True
        return
    if os.geteuid() != 0 or not FUSECTL_DIR.is_dir():
        yield False
        return
    libc = ctypes.CDLL(None, use_errno=True)
    target = str(FUSECTL_DIR).encode()
    if libc.mount(b"fusectl", target, b"fusectl", 0, None) != 0:
        yield False
        return
    try:
        yield True
    finally:
        libc.umount2(target, 0)


def abort_connection(path: Path | str) -> bool:
    """Abort the FUSE connection of the mount at ``path``: every request waiting on it
    fails (a process stuck in a FUSE call, which not even SIGKILL ends while its request
    is with the server, can then die), and the server's loop ends. False when it cannot
    be done here (not a FUSE mount, no fusectl)."""
    entry = _mount_entry(str(path))
    if entry is None or not entry[1].startswith("fuse"):
        return False
    minor = entry[0].partition(":")[2]
    with _fusectl() as available:
        if not available:
            return False
        try:
            (FUSECTL_DIR / minor / "abort").write_text("1")
        except OSError:
            return False
    return True


def wait_gone(pids: list[int], wait_s: float) -> list[int]:
    """Wait up to ``wait_s`` for the processes ``pids`` to end (a zombie has ended);
    the ones still running."""
    deadline_s = time.monotonic() + wait_s
    while True:
        running = [pid for pid in pids if _running(pid)]
        if not running or time.monotonic() >= deadline_s:
            return running
        time.sleep(0.005)


def _running(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = text[text.rfind(")") + 2 :].split()[0]
    return state not in ("Z", "X")


def unmount(path: Path | str, *, lazy: bool) -> str | None:
    """Unmount ``path``: None when done (or nothing was mounted), else the reason
    (``EBUSY``: still in use; then a ``lazy`` one detaches it at once)."""
    target = str(path)
    if not is_mounted(target):
        return None
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(target.encode(), _MNT_DETACH if lazy else 0) == 0:
            return None
        code = ctypes.get_errno()
        return None if code == errno.EINVAL and not is_mounted(target) else os.strerror(code)
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool is None:
        return "not root, and no fusermount3 to unmount with"
    done = subprocess.run([tool, "-u", *(["-z"] if lazy else []), target],
                          capture_output=True, text=True, check=False)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def clean_stale_mounts() -> list[str]:
    """Clean up after every run that died with a mount (module docstring); one line per
    mount cleaned, saying what was done."""
    cleaned: list[str] = []
    try:
        records = sorted(fuse_dir().glob("*.json"))
    except OSError:
        return cleaned
    for path in records:
        record = MountRecord.load(path)
        if record is None or not record.stale:
            continue
        record.kill_children()
        problem = unmount(record.mountpoint, lazy=True)
        with contextlib.suppress(OSError):
            Path(record.mountpoint).rmdir()
        record.forget()
        what = "unmounted" if problem is None else f"could not unmount ({problem})"
        cleaned.append(f"{what} {record.mountpoint}, left by a killed run (pid "
                       f"{record.owner_pid})")
    _remove_orphan_mountpoints()
    return cleaned


def _remove_orphan_mountpoints() -> None:
    """Remove the empty mount points of dead processes that no record names (a run
    killed between making the directory and recording it)."""
    recorded = {r.mountpoint for p in fuse_dir().glob("*.json") if (r := MountRecord.load(p))}
    for path in fuse_dir().glob("mnt-*-*"):
        pid = path.name.split("-")[1]
        if (str(path) not in recorded and pid.isdigit() and process_start(int(pid)) is None
                and not is_mounted(path)):
            with contextlib.suppress(OSError):
                path.rmdir()
