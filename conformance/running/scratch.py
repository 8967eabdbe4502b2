"""Where a run keeps its SUT's database: a RAM-backed temporary directory when there is one.

A run opens, crashes and reopens its SUT's database many times. On a disk, each RocksDB open
and close pays for fsyncs (measured here: ~45 ms to open and ~55 ms to close on ``/tmp``
against ~8 ms and under 1 ms on ``/dev/shm``), and those fsyncs buy nothing that a run checks:
the crashes simulated are process crashes (the database must recover what the process handed
to the kernel), which a tmpfs keeps exactly as a disk does. Power loss is not simulated.

``RMQSIM_WORKDIR`` overrides the choice (for example to run on the disk the user ships on).
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

__all__ = [
    "RAM_DIRS",
    "WORKDIR_ENV",
    "ScratchDirError",
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
