"""What the FUSE tests share: the skip (or, with ``RMQSIM_REQUIRE_FUSE=1``, the failure)
where FUSE cannot be used, and a program of a store's kind of file work on the
``FileSystem`` protocol, run in process on a ``SimDisk`` or as a child process on the OS
file system of a FUSE mount (``python -m tests.fuse_programs ROOT``: one JSON line of
each step's result)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.crashing.fuse_disk import fuse_available, fuse_required
from rmqsim.impl.commitlog import open_queue
from rmqsim.impl.commitlog.fs import FileSystem, OsFileSystem
from rmqsim.model.api import Clock, MessageQueue, MQConfig

ROOT = Path(__file__).resolve().parent.parent


def fuse_or_skip() -> None:
    """Skip the test, naming why, where FUSE cannot be used; fail it instead when CI
    requires FUSE (``RMQSIM_REQUIRE_FUSE=1``)."""
    reason = fuse_available()
    if reason is None:
        return
    if fuse_required():
        pytest.fail(f"FUSE is required here (RMQSIM_REQUIRE_FUSE=1), but {reason}")
    pytest.skip(f"FUSE cannot be used here: {reason}")


def program(fs: FileSystem, root: str) -> list[tuple[str, str]]:
    """Steps of a store's kind (the commit log's calls), each ``(step, "ok")`` or
    ``(step, ERRNO-NAME)``; a step whose handle could not be opened is ``skipped``. In
    process a ``PowerCut`` ends it where it is raised."""
    handles: dict[str, int] = {}
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("make_dir", lambda: fs.make_dir(f"{root}/dir")),
        ("lock", lambda: handles.__setitem__("lock", fs.lock(f"{root}/lock"))),
        ("create", lambda: handles.__setitem__("a", fs.open(f"{root}/dir/a.tmp", create=True))),
        ("write", lambda: fs.write_at(handles["a"], 0, b"x" * 700)),
        ("append", lambda: fs.append(handles["a"], b"y" * 900)),
        ("sync", lambda: fs.sync(handles["a"])),
        ("truncate", lambda: fs.truncate(handles["a"], 4096)),
        ("overwrite", lambda: fs.write_at(handles["a"], 512, b"z" * 1024)),
        ("close", lambda: fs.close(handles.pop("a"))),
        ("rename", lambda: fs.rename(f"{root}/dir/a.tmp", f"{root}/dir/a")),
        ("sync_dir", lambda: fs.sync_dir(f"{root}/dir")),
        ("create b", lambda: handles.__setitem__("b", fs.open(f"{root}/b", create=True))),
        ("write b", lambda: fs.write_at(handles["b"], 0, b"b" * 100)),
        ("close b", lambda: fs.close(handles.pop("b"))),
        ("remove b", lambda: fs.remove(f"{root}/b")),
        ("make_dir sub", lambda: fs.make_dir(f"{root}/dir/sub")),
        ("remove_dir sub", lambda: fs.remove_dir(f"{root}/dir/sub")),
        ("sync_dir root", lambda: fs.sync_dir(root)),
        ("read", lambda: _check_read(fs, f"{root}/dir/a")),
    ]
    results = []
    for name, step in steps:
        try:
            step()
        except KeyError:
            results.append((name, "skipped"))
        except OSError as exc:
            code = exc.errno if isinstance(exc.errno, int) else 0
            results.append((name, errno.errorcode.get(code, str(code))))
        else:
            results.append((name, "ok"))
    return results


def _check_read(fs: FileSystem, path: str) -> None:
    handle = fs.open(path, create=False)
    try:
        data = fs.read(handle, 0, 8192)
    finally:
        fs.close(handle)
    expected = b"x" * 512 + b"z" * 1024 + b"y" * 64 + bytes(4096 - 1600)
    if data != expected:
        raise OSError(errno.EBADMSG, "read back other bytes")


def run_child(root: Path) -> list[tuple[str, str]]:
    """``program`` on the OS file system at ``root``, in a child process."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.fuse_programs", str(root)], capture_output=True,
        text=True, timeout=60, cwd=ROOT, check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])},
    )  # fmt: skip
    return [tuple(step) for step in json.loads(done.stdout)]  # type: ignore[misc]


class _SyncsLost(OsFileSystem):
    """The OS file system, but ``fsync`` never happens."""

    def sync(self, handle: int) -> None:
        del handle


def open_queue_losing_os_syncs(
    *, path: Path, config: MQConfig, clock: Clock, faults: Any, fs: FileSystem | None = None,
) -> MessageQueue:
    """The commit log (sync flush), correct on a ``SimDisk`` given as ``fs`` (in
    process), but on the OS file system (a child through FUSE) its syncs never reach the
    disk: what a FUSE front that answered fsync without syncing would look like."""
    return open_queue(path=path, config=config, clock=clock, faults=faults,
                      fs=fs or _SyncsLost())


open_queue_losing_os_syncs.rmqsim_flush = "sync"  # type: ignore[attr-defined]


if __name__ == "__main__":
    print(json.dumps(program(OsFileSystem(), sys.argv[1])))
