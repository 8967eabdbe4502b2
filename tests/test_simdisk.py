"""The simulated disk (conformance/crashing/simdisk.py): each fault mode, the failed sync, power
cuts and determinism; and a differential test against the real file system: the disk's
view is the OS's, its durable image is what the OS file held at its last fsync, and no
cut keeps anything a real disk could not (never kinder than a real power cut)."""

from __future__ import annotations

import errno
import json
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqsim.conformance.crashing.simdisk import SECTOR_SIZE_BYTES, PowerCut, SimDisk
from rmqsim.impl.commitlog.fs import OsFileSystem


def _disk_with(path: str = "/d/f", *, synced: bytes = b"", dir_synced: bool = True) -> tuple[
    SimDisk, int
]:
    disk = SimDisk(dirs=("/d",))
    handle = disk.open(path, create=True)
    if synced:
        disk.write_at(handle, 0, synced)
        disk.sync(handle)
    if dir_synced:
        disk.sync_dir("/d")
    return disk, handle


def _three_pending(disk: SimDisk, handle: int) -> list[bytes]:
    """Three pending writes at 0, 10, 20; the images after each prefix of them."""
    images = [disk.contents()["/d/f"]]
    for i, chunk in enumerate((b"A" * 10, b"B" * 10, b"C" * 10)):
        disk.write_at(handle, 10 * i, chunk)
        images.append(disk.contents()["/d/f"])
    return images


def test_lose_unsynced_keeps_exactly_the_synced_state() -> None:
    disk, handle = _disk_with(synced=b"durable!")
    disk.write_at(handle, 0, b"LOST")
    disk.open("/d/new", create=True)  # its directory is never synced
    after = disk.cut("lose-unsynced", random.Random(0))
    assert after.contents() == {"/d/f": b"durable!"}
    assert disk.last_cut is not None and disk.last_cut["files"] == {
        "/d/f": {"kept_prefix": 0, "of": 1}
    }


def test_a_synced_file_whose_directory_entry_is_not_durable_is_lost() -> None:
    disk, _ = _disk_with(synced=b"x", dir_synced=False)
    assert disk.cut("lose-unsynced", random.Random(0)).contents() == {}


def test_an_unsynced_rename_comes_undone_and_a_synced_one_stays() -> None:
    disk, _ = _disk_with(synced=b"old")
    tmp = disk.open("/d/tmp", create=True)
    disk.write_at(tmp, 0, b"new")
    disk.sync(tmp)
    disk.rename("/d/tmp", "/d/f")
    assert disk.cut("lose-unsynced", random.Random(0)).contents() == {"/d/f": b"old"}
    disk2, _ = _disk_with(synced=b"old")
    tmp = disk2.open("/d/tmp", create=True)
    disk2.write_at(tmp, 0, b"new")
    disk2.sync(tmp)
    disk2.rename("/d/tmp", "/d/f")
    disk2.sync_dir("/d")
    assert disk2.cut("lose-unsynced", random.Random(0)).contents() == {"/d/f": b"new"}


def test_keep_prefix_keeps_a_prefix_of_the_pending_writes_and_varies_with_the_seed() -> None:
    kept = set()
    for seed in range(30):
        disk, handle = _disk_with(synced=b"s" * 5)
        images = _three_pending(disk, handle)
        after = disk.cut("keep-prefix", random.Random(seed)).contents()["/d/f"]
        assert disk.last_cut is not None
        decision = disk.last_cut["files"]["/d/f"]
        assert after == images[decision["kept_prefix"]]
        kept.add(decision["kept_prefix"])
    assert kept == {0, 1, 2, 3}


def test_keep_subset_applies_a_subset_in_order_and_reorders_sometimes() -> None:
    reordered = False
    for seed in range(30):
        disk, handle = _disk_with()
        _three_pending(disk, handle)
        after = disk.cut("keep-subset", random.Random(seed)).contents()["/d/f"]
        assert disk.last_cut is not None
        kept = disk.last_cut["files"]["/d/f"]["kept"]
        expected = bytearray()
        for i in kept:
            expected.extend(bytes(10 * i - len(expected)))
            expected[10 * i : 10 * i + 10] = b"ABC"[i : i + 1] * 10
        assert after == bytes(expected)
        reordered |= kept != list(range(len(kept)))
    assert reordered  # a later write survived without an earlier one


def test_torn_write_keeps_the_part_before_a_sector_boundary_and_garbage_after() -> None:
    disk, handle = _disk_with(synced=b"s" * 100)
    payload = bytes(range(256)) * 8  # 2048 bytes at offset 100: boundaries 512..2048
    disk.write_at(handle, 100, payload)
    disk.write_at(handle, 0, b"LATER")  # after the torn write: lost
    after = disk.cut("torn-write", random.Random(3)).contents()["/d/f"]
    assert disk.last_cut is not None
    note = disk.last_cut["files"]["/d/f"]
    torn_at = note["torn_at"]
    assert torn_at % SECTOR_SIZE_BYTES == 0 and 100 < torn_at < 100 + len(payload)
    assert after[:100] == b"s" * 100
    assert after[100:torn_at] == payload[: torn_at - 100]
    assert after[torn_at : 100 + len(payload)] != payload[torn_at - 100 :]
    assert note["torn_op"] == 0 and note["of"] == 2


def test_lose_dir_entry_undoes_one_entry_and_keeps_every_byte() -> None:
    disk, handle = _disk_with(synced=b"a")
    disk.write_at(handle, 1, b"b")  # unsynced data: kept in this mode
    other = disk.open("/d/g", create=True)
    disk.write_at(other, 0, b"g")
    after = disk.cut("lose-dir-entry", random.Random(0))
    assert disk.last_cut is not None and disk.last_cut["lost_entry"] == "/d/g"
    assert after.contents() == {"/d/f": b"ab"}


def test_a_failed_sync_raises_eio_and_its_writes_never_become_durable() -> None:
    disk, handle = _disk_with(synced=b"old")
    disk.write_at(handle, 0, b"NEW")
    disk.arm(len(disk.points) + 1, "sync-error")
    with pytest.raises(OSError) as failed:
        disk.sync(handle)
    assert failed.value.errno == errno.EIO
    assert disk.read(handle, 0, 3) == b"NEW"  # still in the page cache
    disk.sync(handle)  # succeeds, but the dropped writes are gone (fsyncgate)
    assert disk.cut("sync-error", random.Random(0)).contents() == {"/d/f": b"old"}


def test_a_power_cut_replaces_the_call_and_kills_the_disk() -> None:
    disk, handle = _disk_with(synced=b"old")
    disk.arm(len(disk.points) + 1, "lose-unsynced")
    with pytest.raises(PowerCut):
        disk.write_at(handle, 0, b"NEW")
    assert disk.contents() == {"/d/f": b"old"}  # the write did not happen
    with pytest.raises(PowerCut):
        disk.read(handle, 0, 1)
    disk.close(handle)  # releasing handles still works
    assert disk.fired is not None and disk.fired.call == "write"


def test_a_cut_is_deterministic_from_the_seed_and_recorded_as_plain_data() -> None:
    def run(seed: int) -> tuple[dict[str, bytes], str]:
        disk, handle = _disk_with(synced=b"s" * 700)
        disk.write_at(handle, 300, bytes(1500))
        disk.write_at(handle, 10, b"x" * 600)
        after = disk.cut("torn-write", random.Random(seed))
        return after.contents(), json.dumps(disk.last_cut, sort_keys=True)

    assert run(7) == run(7)
    assert len({run(seed)[1] for seed in range(10)}) > 1


# ---------------------------------------------------------------- differential fidelity

_OP = st.one_of(
    st.tuples(st.just("write"), st.sampled_from("fg"), st.integers(0, 1500),
              st.integers(1, 1200)),
    st.tuples(st.just("truncate"), st.sampled_from("fg"), st.integers(0, 2000)),
    st.tuples(st.just("sync"), st.sampled_from("fg")),
    st.tuples(st.just("sync_dir"),),
)


class _Twin:
    """The same program on the OS (under ``real``) and on a SimDisk (under ``/d``), with
    what a real power cut must keep: each file's OS contents at its last fsync, and the
    names present at the last directory fsync."""

    def __init__(self, real: Path) -> None:
        self.os, self.sim = OsFileSystem(), SimDisk(dirs=("/d",))
        self.real = real
        self.handles: dict[str, tuple[int, int]] = {}
        self.at_sync: dict[str, bytes] = {}
        self.since_sync: dict[str, list[bytes]] = {}
        self.durable_names: set[str] = set()
        self.counter = 0

    def handle(self, name: str) -> tuple[int, int]:
        if name not in self.handles:
            self.handles[name] = (self.os.open(str(self.real / name), create=True),
                                  self.sim.open(f"/d/{name}", create=True))
            self.at_sync[name], self.since_sync[name] = b"", [b""]
        return self.handles[name]

    def real_bytes(self, name: str) -> bytes:
        return (self.real / name).read_bytes()

    def do(self, op: tuple) -> None:
        if op[0] == "sync_dir":
            self.os.sync_dir(str(self.real))
            self.sim.sync_dir("/d")
            self.durable_names = set(self.handles)
            return
        name = op[1]
        real, sim = self.handle(name)
        if op[0] == "write":
            self.counter += 1
            data = bytes([self.counter % 251 + 1]) * op[3]
            self.os.write_at(real, op[2], data)
            self.sim.write_at(sim, op[2], data)
        elif op[0] == "truncate":
            self.os.truncate(real, op[2])
            self.sim.truncate(sim, op[2])
        else:
            self.os.sync(real)
            self.sim.sync(sim)
            self.at_sync[name] = self.real_bytes(name)
            self.since_sync[name] = [self.at_sync[name]]
            assert self.sim.durable_contents().get(f"/d/{name}", self.at_sync[name]) == (
                self.at_sync[name]
            )
            return
        self.since_sync[name].append(self.real_bytes(name))
        assert self.sim.contents()[f"/d/{name}"] == self.real_bytes(name)

    def close(self) -> None:
        for real, _ in self.handles.values():
            os.close(real)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.lists(_OP, max_size=14), seed=st.integers(0, 2**16))
def test_the_simulated_cut_is_never_kinder_than_a_real_one(
    tmp_path_factory: pytest.TempPathFactory, program: list[tuple], seed: int
) -> None:
    twin = _Twin(tmp_path_factory.mktemp("real"))
    try:
        for op in program:
            twin.do(op)
    finally:
        twin.close()
    expected = {f"/d/{n}": twin.at_sync[n] for n in sorted(twin.durable_names)}
    for mode in ("lose-unsynced", "keep-prefix", "keep-subset", "torn-write", "lose-dir-entry"):
        after = twin.sim.cut(mode, random.Random(seed)).contents()
        if mode == "lose-unsynced":
            assert after == expected  # exactly what the OS held at the fsyncs
            continue
        if mode == "lose-dir-entry":  # every byte, but one entry fewer at most
            assert {p: twin.real_bytes(p[3:]) for p in after} == after
            assert len(after) >= len(twin.handles) - 1
            continue
        for path, data in after.items():
            name = path.rsplit("/", 1)[1]
            if mode == "keep-subset":  # each byte: synced, or some pending write's, or 0
                images = twin.since_sync[name]
                assert len(data) <= max(len(image) for image in images)
                assert all(byte == 0 or any(pos < len(i) and i[pos] == byte for i in images)
                           for pos, byte in enumerate(data))
            elif mode == "keep-prefix":  # the OS file as it was after some pending op
                assert data in twin.since_sync[name]
            elif mode == "torn-write" and path in (twin.sim.last_cut or {}).get("files", {}) \
                    and "torn_at" in twin.sim.last_cut["files"][path]:
                note = twin.sim.last_cut["files"][path]
                assert data[: note["torn_at"]] in [s[: note["torn_at"]]
                                                   for s in twin.since_sync[name]]
            elif mode == "torn-write":
                assert data == twin.at_sync[name]
        # every synced entry survives in the data modes (their namespace is the current one)
        assert set(expected) <= set(after)
