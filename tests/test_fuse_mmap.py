"""What a FUSE disk observes of a shared writable mapping (a C program, compiled here, as
a store writing through mmap: RocketMQ's commit log): nothing while the program stores
into the mapping; the dirty pages arrive as writes at msync (then its fsync), at munmap,
and at the close of a descriptor of the file. A power cut before the msync loses the
mapped bytes; one after it keeps them."""

from __future__ import annotations

import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqsim.conformance.crashing.fuse_disk import FuseMount, cut_power, mount_disk
from rmqsim.conformance.crashing.simdisk import SimDisk
from tests.fuse_programs import fuse_or_skip

PAGE_BYTES = 4096
FILE_BYTES = 4 * PAGE_BYTES

_SOURCE = r"""
/* One command per line on stdin, "ok" or "error ERRNO" on stdout after each:
   open PATH | map | poke PAGE BYTE | msync | munmap | close | pwrite OFFSET BYTE | fsync */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
    char line[4096], path[4000];
    int fd = -1; char *map = NULL; long size = SIZE_BYTES;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        long a = 0, b = 0; int rc = 0;
        if (sscanf(line, "open %3999s", path) == 1) {
            fd = open(path, O_RDWR); rc = fd;
        } else if (strncmp(line, "map", 3) == 0) {
            map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            rc = map == MAP_FAILED ? -1 : 0;
        } else if (sscanf(line, "poke %ld %ld", &a, &b) == 2) {
            memset(map + a * PAGE_BYTES, (int)b, PAGE_BYTES);
        } else if (strncmp(line, "msync", 5) == 0) {
            rc = msync(map, size, MS_SYNC);
        } else if (strncmp(line, "munmap", 6) == 0) {
            rc = munmap(map, size);
        } else if (strncmp(line, "close", 5) == 0) {
            rc = close(fd);
        } else if (sscanf(line, "pwrite %ld %ld", &a, &b) == 2) {
            char c = (char)b; rc = pwrite(fd, &c, 1, a) == 1 ? 0 : -1;
        } else if (strncmp(line, "fsync", 5) == 0) {
            rc = fsync(fd);
        }
        if (rc < 0) printf("error %d\n", errno); else printf("ok\n");
    }
    return 0;
}
"""
_DEFINES = f"#define SIZE_BYTES {FILE_BYTES}\n#define PAGE_BYTES {PAGE_BYTES}\n"


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fuse_or_skip()
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler (gcc) to build the mmap test program")
    directory = tmp_path_factory.mktemp("mmap")
    (directory / "mmap_writer.c").write_text(_DEFINES + _SOURCE)
    subprocess.run([gcc, "-O1", "-Wall", "-Werror", "-o", str(directory / "mmap_writer"),
                    str(directory / "mmap_writer.c")], check=True)  # fmt: skip
    return directory / "mmap_writer"


class _Program:
    """The writer running on ``mount``'s file ``/d/f`` (which exists, durably)."""

    def __init__(self, writer: Path, mount: FuseMount) -> None:
        self.mount = mount
        self.process = subprocess.Popen([str(writer)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)  # fmt: skip
        mount.add_process(self.process.pid)
        assert self.say(f"open {mount.real_path('/d/f')}") == "ok"

    def say(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def writes_after(self, command: str) -> list[tuple[int, int]]:
        """The answer must be ok; the FUSE writes the command caused: (offset, bytes)."""
        assert self.mount.calls is not None
        seen = len(self.mount.calls)
        assert self.say(command) == "ok", command
        return [(c.offset, c.size_bytes) for c in self.mount.calls[seen:] if c.call == "write"]


@pytest.fixture
def mounted() -> Iterator[tuple[SimDisk, FuseMount]]:
    disk = SimDisk({"/d/f": bytes(FILE_BYTES)})
    with mount_disk(disk, record=True) as mount:
        yield disk, mount


def test_mapped_stores_reach_the_disk_only_at_msync_munmap_or_close(
    writer: Path, mounted: tuple[SimDisk, FuseMount]
) -> None:
    disk, mount = mounted
    program = _Program(writer, mount)
    assert program.writes_after("map") == []
    assert program.writes_after("poke 1 65") == []  # a store into memory: nothing
    assert program.writes_after("poke 2 66") == []
    assert disk.contents()["/d/f"] == bytes(FILE_BYTES)
    assert program.writes_after("msync") == [(PAGE_BYTES, 2 * PAGE_BYTES)]  # the dirty run
    assert [p.call for p in disk.points] == ["write", "sync"]  # msync: writes, then fsync
    assert program.writes_after("poke 3 67") == []
    assert program.writes_after("munmap") == [(3 * PAGE_BYTES, PAGE_BYTES)]
    assert disk.contents()["/d/f"] == bytes(PAGE_BYTES) + b"A" * PAGE_BYTES + (
        b"B" * PAGE_BYTES + b"C" * PAGE_BYTES)
    assert program.writes_after("close") == []


def test_the_close_of_a_descriptor_writes_the_mapped_pages_back(
    writer: Path, mounted: tuple[SimDisk, FuseMount]
) -> None:
    disk, mount = mounted
    program = _Program(writer, mount)
    program.writes_after("map")
    assert program.writes_after("poke 0 90") == []
    assert program.writes_after("close") == [(0, PAGE_BYTES)]  # the mapping outlives it
    assert program.writes_after("munmap") == []
    assert [p.call for p in disk.points] == ["write"]  # written, never synced


@pytest.mark.parametrize(("cut_at", "kept"), [(1, False), (3, True)])
def test_a_cut_before_the_msync_loses_the_mapped_bytes_and_after_it_keeps_them(
    writer: Path, cut_at: int, kept: bool
) -> None:
    """Points: 1 the msync's write, 2 its fsync, 3 a pwrite after it, 4 that fsync. Cut
    at 1 (the mapped bytes were on their way): lost; cut at 3: the msync made them
    durable."""
    disk = SimDisk({"/d/f": bytes(FILE_BYTES)})
    disk.arm(cut_at, "lose-unsynced")
    with mount_disk(disk, record=True) as mount:
        program = _Program(writer, mount)
        program.writes_after("map")
        program.writes_after("poke 1 65")
        assert program.say("msync") == ("ok" if kept else "error 5")  # EIO
        assert program.say("pwrite 0 1") == "error 5"
        survivor = cut_power(mount, "lose-unsynced", random.Random(0))
    assert disk.fired is not None and disk.fired.index == cut_at
    page = survivor.contents()["/d/f"][PAGE_BYTES : 2 * PAGE_BYTES]
    assert page == (b"A" * PAGE_BYTES if kept else bytes(PAGE_BYTES))
