"""The FUSE disk (conformance/crashing/fuse_disk.py): a SimDisk seen by another process through a
FUSE mount numbers the same points as in process, fails every call with EIO after the cut,
and gives the same surviving disk; mounts are recorded and cleaned up, a failing mount and
a child stuck in a FUSE call end with one line."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import rmqsim.conformance.crashing.fuse_disk as fuse_disk
from rmqsim.conformance.crashing.fuse_disk import FuseMountError, cut_power, mount_disk
from rmqsim.conformance.crashing.fuse_mounts import (
    FUSECTL_DIR,
    MountRecord,
    clean_stale_mounts,
    fuse_dir,
    is_mounted,
    process_start,
)
from rmqsim.conformance.crashing.simdisk import PowerCut, SimDisk
from tests.fuse_programs import ROOT, fuse_or_skip, program, run_child

pytestmark = pytest.mark.usefixtures("fuse")


@pytest.fixture
def fuse() -> None:
    fuse_or_skip()


def _points(disk: SimDisk) -> list[tuple[str, str]]:
    return [(p.call, p.path) for p in disk.points]


def test_a_child_on_the_mount_makes_the_points_the_same_program_makes_in_process() -> None:
    """The commit log's calls (create, write, append, sync, truncate, rename, sync_dir,
    remove, make_dir, remove_dir, the lock) through FUSE are the in-process points, one
    for one, and leave the same bytes and the same durable state."""
    in_process = SimDisk(dirs=("/d",))
    assert all(result == "ok" for _, result in program(in_process, "/d"))
    disk = SimDisk(dirs=("/d",))
    with mount_disk(disk) as mount:
        results = run_child(mount.real_path("/d"))
    assert results == [(step, "ok") for step, _ in results]
    assert _points(disk) == _points(in_process)
    assert len(disk.points) == 16
    assert disk.contents() == in_process.contents()
    assert disk.durable_contents() == in_process.durable_contents()
    assert disk.unsynced_paths("/d") == in_process.unsynced_paths("/d")


@pytest.mark.parametrize(("point", "mode"), [(4, "keep-subset"), (9, "torn-write"),
                                             (10, "lose-dir-entry"), (3, "lose-unsynced")])
def test_after_the_cut_every_call_fails_and_the_same_disk_survives(point: int, mode: str) -> None:
    """Armed at a point, that call and every later one fails with EIO in the child (reads
    too); the disk that survives (and the cut's decisions) is the in-process one's."""
    in_process = SimDisk(dirs=("/d",))
    in_process.arm(point, mode)
    with pytest.raises(PowerCut):
        program(in_process, "/d")
    expected = in_process.cut(mode, random.Random(f"0/{point}/{mode}"))

    disk = SimDisk(dirs=("/d",))
    disk.arm(point, mode)
    with mount_disk(disk) as mount:
        results = run_child(mount.real_path("/d"))
        assert mount.cut_event.is_set()
        survivor = cut_power(mount, mode, random.Random(f"0/{point}/{mode}"))
        assert not is_mounted(mount.path)
    failed = [i for i, (_, result) in enumerate(results) if result != "ok"]
    assert results[failed[0]][1] == "EIO" and disk.fired is not None
    assert disk.fired.index == point
    assert {result for _, result in results[failed[0] :]} <= {"EIO", "skipped"}, results
    assert results[-1] == ("read", "EIO")
    assert _points(disk) == _points(in_process)
    assert disk.last_cut == in_process.last_cut
    assert survivor.contents() == expected.contents()


def test_a_failed_sync_fails_the_childs_fsync_and_its_writes_never_reach_the_disk() -> None:
    disk = SimDisk(dirs=("/d",))
    disk.arm(6, "sync-error")  # the program's first sync
    with mount_disk(disk) as mount:
        results = run_child(mount.real_path("/d"))
    assert dict(results)["sync"] == "EIO"
    assert [r for r in results if r[1] != "ok"] == [("sync", "EIO")]
    assert disk.contents()["/d/dir/a"][:4] == b"xxxx"  # reads still show the writes
    survivor = disk.cut("sync-error", random.Random(0))
    # The renamed file's entry was made durable by the directory syncs; its writes before
    # the failed sync were dropped by it (fsyncgate), and nothing after it was synced.
    assert survivor.contents()["/d/dir/a"] == b""


def test_a_write_longer_than_the_kernels_limit_arrives_in_pieces() -> None:
    """FUSE passes a write() of up to 1 MiB (256 pages, counting the page it starts in)
    as one call; a longer one is split: a point per piece (docs/STORAGE.md)."""
    disk = SimDisk(dirs=("/d",))
    with mount_disk(disk) as mount:
        path = mount.real_path("/d/f")
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            os.pwrite(fd, b"a" * (1 << 20), 0)
            os.pwrite(fd, b"b" * ((1 << 20) + 4096), 0)
        finally:
            os.close(fd)
    assert [p.call for p in disk.points] == ["create", "write", "write", "write"]


def test_an_unlinked_open_file_is_written_and_truncated_without_hidden_names() -> None:
    disk = SimDisk(dirs=("/d",))
    with mount_disk(disk) as mount:
        path = mount.real_path("/d/f")
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            os.unlink(path)
            os.pwrite(fd, b"still", 0)
            os.ftruncate(fd, 2)
            assert os.pread(fd, 10, 0) == b"st"
            assert os.listdir(mount.real_path("/d")) == []
        finally:
            os.close(fd)
    assert [p.call for p in disk.points] == ["create", "remove", "write", "truncate"]


def test_mounting_leaves_sigterm_to_its_default() -> None:
    """libfuse's loop would install a handler that only ends the loop on SIGTERM: rmqsim
    would outlive a kill. The mount keeps the default where Python has it."""
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def caught() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
        raise AssertionError("no SigCgt")

    with mount_disk(SimDisk()):
        assert not caught() & (1 << (signal.SIGTERM - 1))
        assert not caught() & (1 << (signal.SIGHUP - 1))


def test_a_mount_that_fails_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(FuseMountError) as failed, mount_disk(SimDisk(), at=missing):
        pass
    message = str(failed.value)
    assert "\n" not in message and str(missing) in message
    assert message.startswith(f"cannot mount the simulated disk at {missing}: ")
    assert len(message) > len(f"cannot mount the simulated disk at {missing}: ")
    assert not is_mounted(missing)
    assert not [r for r in fuse_dir().glob("*.json")
                if (m := MountRecord.load(r)) and m.mountpoint == str(missing)]
    assert not [t for t in threading.enumerate() if t.name.startswith("rmqsim-fuse:")]


_KILLED_RUN = """
import subprocess, sys, time
from rmqsim.conformance.crashing.fuse_disk import mount_disk
from rmqsim.conformance.crashing.simdisk import SimDisk
with mount_disk(SimDisk(dirs=("/d",))) as mount:
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    mount.add_process(child.pid)
    print(mount.path, child.pid, flush=True)
    time.sleep(600)
"""


def test_a_mount_left_by_a_killed_run_is_cleaned_at_the_next_start() -> None:
    run = subprocess.Popen([sys.executable, "-c", _KILLED_RUN], stdout=subprocess.PIPE,
                           text=True, cwd=ROOT)
    assert run.stdout is not None
    mountpoint, child = run.stdout.readline().split()
    try:
        run.kill()
        run.wait()
        assert is_mounted(mountpoint)  # left behind, its server gone
        assert process_start(int(child)) is not None
        with pytest.raises(OSError):
            os.listdir(mountpoint)  # "Transport endpoint is not connected"
        cleaned = clean_stale_mounts()
        assert [line for line in cleaned if mountpoint in line] == [
            f"unmounted {mountpoint}, left by a killed run (pid {run.pid})"
        ]
        assert not is_mounted(mountpoint) and not Path(mountpoint).exists()
        assert _gone(int(child))
        assert not [r for r in fuse_dir().glob("*.json")
                    if (m := MountRecord.load(r)) and m.mountpoint == mountpoint]
    finally:
        run.kill()
        os.system(f"umount -l {mountpoint} 2>/dev/null; kill -9 {child} 2>/dev/null")


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    deadline_s = time.monotonic() + wait_s
    while time.monotonic() < deadline_s:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.01)
    return False


class _StallingDisk(SimDisk):
    """A disk whose writes wait until ``release`` is set: the FUSE server is stuck in a
    call, and the child that made it hangs inside it (not even SIGKILL ends it)."""

    def __init__(self) -> None:
        super().__init__(dirs=("/d",))
        self.release = threading.Event()

    def write_at(self, handle: int, offset: int, data: bytes) -> None:
        self.release.wait(60)
        super().write_at(handle, offset, data)


def test_a_child_stuck_in_a_fuse_call_ends_with_one_line_and_nothing_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fuse_disk, "UNMOUNT_WAIT_S", 1.0)
    monkeypatch.setattr(fuse_disk, "EXIT_WAIT_S", 0.5)
    fusectl_was_mounted = is_mounted(FUSECTL_DIR)  # the abort may mount it: not leave it
    disk = _StallingDisk()
    context = mount_disk(disk)
    mount = context.__enter__()
    path = mount.real_path("/d/f")
    child = subprocess.Popen(
        [sys.executable, "-c", f"import os; fd = os.open({str(path)!r}, os.O_RDWR | "
         "os.O_CREAT); os.write(fd, b'x')"], start_new_session=True)  # fmt: skip
    mount.add_process(child.pid)
    try:
        deadline_s = time.monotonic() + 30
        while (mount.in_flight or ("",))[0] != "write" and time.monotonic() < deadline_s:
            time.sleep(0.01)
        assert mount.describe_in_flight() is not None
        with pytest.raises(FuseMountError) as failed:
            context.__exit__(None, None, None)
        message = str(failed.value)
        assert "\n" not in message
        assert message.startswith(f"the FUSE server of {mount.path} is stuck in write /d/f")
        assert child.wait(10) == -signal.SIGKILL  # freed by the connection's abort
        assert not is_mounted(mount.path) and not mount.path.exists()
        assert is_mounted(FUSECTL_DIR) == fusectl_was_mounted
    finally:
        disk.release.set()
        child.kill()
    deadline_s = time.monotonic() + 10
    while any(t.name == f"rmqsim-fuse:{mount.path}" for t in threading.enumerate()):
        assert time.monotonic() < deadline_s, "the server thread did not end"
        time.sleep(0.01)


def test_modification_times_and_free_space_are_what_a_store_reads() -> None:
    """A store that back-dates a file (RocketMQ's retention reads mtimes) sees the time it
    set, over a remount when carried; statfs shows a file system with room; neither is a
    point."""
    disk = SimDisk({"/d/f": b"data"})
    with mount_disk(disk) as mount:
        path = mount.real_path("/d/f")
        os.utime(path, ns=(1_000_000_000, 2_000_000_000))
        assert os.stat(path).st_mtime_ns == 2_000_000_000
        space = os.statvfs(mount.path)
        assert space.f_bavail * space.f_frsize > 60 * 2**30
        carried = dict(mount.mtimes_ns)
    assert disk.points == []
    with mount_disk(disk, mtimes_ns=carried) as again:
        assert os.stat(again.real_path("/d/f")).st_mtime_ns == 2_000_000_000
