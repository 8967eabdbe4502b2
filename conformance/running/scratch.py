"""Where a run keeps its SUT's database: a RAM-backed temporary directory when there is one.

A run opens, crashes and reopens its SUT's database many times. On a disk, each RocksDB open
and close pays for fsyncs (measured here: ~45 ms to open and ~55 ms to close on ``/tmp``
against ~8 ms and under 1 ms on ``/dev/shm``), and those fsyncs buy nothing that a run checks:
the crashes simulated are process crashes (the database must recover what the process handed
to the kernel), which a tmpfs keeps exactly as a disk does. Power loss is not simulated.

``RMQSIM_WORKDIR`` overrides the choice (for example to run on the disk the user ships on).

A run's directory (``scratch_dir``) is named after the process that made it and its host
(``rmqsim-<pid>-<host key>-XXXXXXXX``) and removed when the run ends. A process that is
killed (a SIGKILL, the watchdog's last resort for a call that never gives way) cannot
remove its own: the first scratch directory a later process makes on the same host removes
those whose process is gone (``remove_stale``), so a RAM-backed directory does not fill up
with the databases of dead runs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

__all__ = [
    "RAM_DIRS",
    "WORKDIR_ENV",
    "ScratchDirError",
    "owned_prefix",
    "remove_stale",
    "remove_stale_once",
    "scratch_dir",
    "scratch_root",
    "unwritable_dir",
]

#: Environment variable naming the directory runs create their temporary directories in.
WORKDIR_ENV = "RMQSIM_WORKDIR"
#: RAM-backed directories tried in order when ``RMQSIM_WORKDIR`` is not set.
RAM_DIRS = ("/dev/shm",)


@functools.cache
def _ram_dir() -> str | None:
    for candidate in RAM_DIRS:
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None


class ScratchDirError(Exception):
    """``RMQSIM_WORKDIR`` names something runs cannot use; the message says what."""


def scratch_root(workdir: Path | None = None) -> Path:
    """The directory in which runs create their temporary directories: ``workdir`` when
    a caller chose one, else ``RMQSIM_WORKDIR``, else a RAM-backed directory or the
    system's temporary directory.

    ``RMQSIM_WORKDIR`` is created when missing but its parent exists (a typo in the parent
    must not create a tree of directories); one that cannot be created or is not a
    writable directory raises ``ScratchDirError`` (bad input, exit 2), not an error from
    deep in a run.
    """
    if workdir is not None:
        return workdir
    chosen = os.environ.get(WORKDIR_ENV)
    if chosen:
        return _checked_workdir(chosen)
    return Path(_ram_dir() or tempfile.gettempdir())


@functools.cache
def _checked_workdir(chosen: str) -> Path:
    """``chosen`` as a directory runs can write in (checked once per value)."""
    path = Path(chosen)
    if not path.exists() and not path.parent.exists():
        raise ScratchDirError(
            f"{WORKDIR_ENV}={path}: its parent directory {path.parent} does not exist "
            "(only the last part of the path is created)"
        )
    problem = unwritable_dir(path)
    if problem is not None:
        raise ScratchDirError(f"{WORKDIR_ENV}={problem}")
    return path


def unwritable_dir(path: Path) -> str | None:
    """Create ``path`` if needed; None if files can be written in it, else what is wrong
    (``"<path>: not a writable directory (<reason>)"``). Every directory rmqsim is told
    to write in (``RMQSIM_WORKDIR``, the CLI's ``--out`` and the like) is checked so,
    before any run, so that a bad one is bad input, not an error deep inside a run."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path):
            pass
    except OSError as exc:
        return f"{path}: not a writable directory ({exc.strerror or exc})"
    return None


#: This host's part of a scratch directory's name: a directory of another host (a shared
#: ``RMQSIM_WORKDIR``) is never taken for one whose process is gone.
_HOST_KEY = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
#: ``rmqsim-[<kind>-]<pid>-<host key>-<mkdtemp's 8 characters>``.
_OWNED = re.compile(r"rmqsim-(?:[a-z]+-)?(?P<pid>[1-9][0-9]*)-(?P<host>[0-9a-f]{8})-[a-z0-9_]{8}")


def owned_prefix(kind: str = "") -> str:
    """The name prefix of a scratch directory this process makes (``kind``: ``""`` for a
    run's, ``"pool"`` for a worker pool's)."""
    return f"rmqsim-{kind + '-' if kind else ''}{os.getpid()}-{_HOST_KEY}-"


def scratch_dir(kind: str = "", workdir: Path | None = None) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory in ``scratch_root(workdir)`` named as this process's
    (``owned_prefix``); those of this host's dead processes are removed first, once per
    process and root."""
    root = scratch_root(workdir)
    remove_stale_once(root)
    return tempfile.TemporaryDirectory(prefix=owned_prefix(kind), dir=root)


def remove_stale_once(root: Path) -> None:
    """``remove_stale(root)``, the first time this process asks for ``root``."""
    _remove_stale_once(str(root))


@functools.cache
def _remove_stale_once(root: str) -> None:
    remove_stale(Path(root))


def remove_stale(root: Path) -> list[Path]:
    """Remove the scratch directories in ``root`` made on this host by processes that no
    longer exist; what was removed. A directory of a live process, of another host or of
    another name is left alone (a process id reused since keeps one until it ends too)."""
    removed: list[Path] = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        match = _OWNED.fullmatch(name)
        if match is None or match["host"] != _HOST_KEY or not _is_gone(int(match["pid"])):
            continue
        shutil.rmtree(root / name, ignore_errors=True)
        removed.append(root / name)
    return removed


def _is_gone(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's: alive
        return False
    return False
