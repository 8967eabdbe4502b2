"""The file-system seam, the two flush modes, ``crash()`` and the abort marker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqsim.impl.commitlog import CommitLogMQ, FlushPolicy, Geometry
from rmqsim.impl.errors import StorageError
from rmqsim.model.api import MQConfig, NotServingError
from tests.commitlog.helpers import Clock, open_mq, pm
from tests.commitlog.memfs import MemoryFs


def _segment_calls(fs: MemoryFs, start: int) -> list[str]:
    return [name for name, target in fs.calls[start:] if "/commitlog/" in target]


def test_every_byte_goes_through_the_file_system_interface(tmp_path: Path) -> None:
    fs = MemoryFs()
    root = tmp_path / "store"
    mq = open_mq(root, fs=fs, config=MQConfig(page_size_bytes=5))
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    for index in range(80):
        mq.produce("t", [pm(b"z" * 90, {"i": str(index)})])
    mq.consume("t", "g", 50)
    state = mq.snapshot()
    mq.crash()
    mq = open_mq(root, fs=fs, config=MQConfig(page_size_bytes=5))
    assert mq.snapshot() == state
    mq.close()
    assert not root.exists()  # nothing reached the real disk
    assert any(path.startswith(f"{root}/commitlog/") for path in fs.files)


def test_sync_mode_syncs_the_segment_before_produce_returns(tmp_path: Path) -> None:
    fs = MemoryFs()
    mq = open_mq(tmp_path / "s", fs=fs, mode="sync")
    mq.create_topic("t")
    start = len(fs.calls)
    mq.produce("t", [pm(b"durable")])
    assert _segment_calls(fs, start) == ["write_at", "sync"]
    mq.close()


def test_async_mode_syncs_after_four_dirty_pages_or_ten_clock_seconds(tmp_path: Path) -> None:
    fs = MemoryFs()
    clock = Clock(1_000)
    geometry = Geometry(segment_size_bytes=1 << 20, cq_entries_per_file=64)
    mq = open_mq(tmp_path / "s", fs=fs, mode="async", clock=clock, geometry=geometry)
    mq.create_topic("t")
    start = len(fs.calls)
    mq.produce("t", [pm(b"a" * 100)])
    clock.now += 9
    mq.produce("t", [pm(b"b" * 100)])
    assert "sync" not in _segment_calls(fs, start)  # in the OS only
    clock.now += 1  # 10 s since the first unsynced write: the thorough flush
    mq.produce("t", [pm(b"c")])
    assert _segment_calls(fs, start)[-1] == "sync"
    start = len(fs.calls)
    for _ in range(3):
        mq.produce("t", [pm(b"d" * 5000)])  # 15 KB: under 4 pages
    assert "sync" not in _segment_calls(fs, start)
    mq.produce("t", [pm(b"e" * 2000)])  # 17 KB: 4 pages dirty
    assert "sync" in _segment_calls(fs, start)
    mq.close()


def test_crash_writes_and_syncs_nothing_and_loses_nothing_the_os_has(tmp_path: Path) -> None:
    fs = MemoryFs()
    root = tmp_path / "s"
    mq = open_mq(root, fs=fs, mode="async")
    mq.create_topic("t")
    mq.produce("t", [pm(b"unsynced")])
    start = len(fs.calls)
    mq.crash()
    assert {name for name, _target in fs.calls[start:]} == {"close"}
    assert f"{root}/abort" in fs.files  # abnormal: the next open knows
    mq = open_mq(root, fs=fs, mode="async")
    assert mq.get_latest_msg("t") == 1  # it was in the OS: a killed process keeps it
    mq.close()
    assert f"{root}/abort" not in fs.files


def test_a_background_flusher_syncs_only_when_asked_for(tmp_path: Path) -> None:
    fs = MemoryFs()
    policy = FlushPolicy(mode="async", background_flush_interval_s=0.01)
    mq = CommitLogMQ.open(tmp_path / "s", clock=Clock(), policy=policy, fs=fs)
    mq.create_topic("t")
    start = len(fs.calls)
    mq.produce("t", [pm(b"x")])
    deadline = time.monotonic() + 5
    while "sync" not in _segment_calls(fs, start) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "sync" in _segment_calls(fs, start)
    mq.close()


class _FailingSyncFs(MemoryFs):
    fail = False

    def sync(self, handle: int) -> None:
        if self.fail:
            raise OSError(5, "Input/output error")
        super().sync(handle)


def test_a_failed_sync_is_never_swallowed_the_queue_stops_serving(tmp_path: Path) -> None:
    """RocketMQ #2706/#9713: a failed fsync was logged and the produce acknowledged."""
    fs = _FailingSyncFs()
    mq = open_mq(tmp_path / "s", fs=fs, mode="sync")
    mq.create_topic("t")
    fs.fail = True
    with pytest.raises(StorageError, match="Input/output error"):
        mq.produce("t", [pm(b"maybe lost")])
    with pytest.raises(NotServingError):
        mq.get_latest_msg("t")
    mq.crash()
    fs.fail = False
    mq = open_mq(tmp_path / "s", fs=fs, mode="sync")
    assert mq.get_latest_msg("t") in (-1, 1)  # before or after, never torn
    mq.close()


def test_crash_after_close_releases_nothing_twice(tmp_path: Path) -> None:
    fs = MemoryFs()
    mq = open_mq(tmp_path / "s", fs=fs)
    mq.close()
    mq.crash()  # a handle number may already belong to someone else
    mq.close()
    open_mq(tmp_path / "s", fs=fs).close()


def test_the_same_operations_write_the_same_bytes(tmp_path: Path) -> None:
    """Determinism: nothing but the injected clock reaches the files."""

    def build(root: Path) -> dict[str, bytes]:
        mq = open_mq(root, mode="async", config=MQConfig(page_size_bytes=50))
        mq.create_topic("t")
        mq.create_consumer_group("t", "g")
        for index in range(40):
            mq.produce("t", [pm(b"q" * (index * 7 % 90), {"n": str(index)})])
            mq.consume("t", "g", 3)
        mq.run_retention()
        mq.close()
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and p.name != "lock"}

    assert build(tmp_path / "a") == build(tmp_path / "b")


def _segment_sizes(root: Path) -> list[int]:
    return [path.stat().st_size for path in sorted((root / "commitlog").iterdir())]


def test_a_users_store_has_16_mib_segments_and_the_harness_keeps_1_mib(tmp_path: Path) -> None:
    from rmqsim.conformance.mutants.storage import open_no_fsync
    from rmqsim.impl.commitlog import DEFAULT_GEOMETRY, HARNESS_GEOMETRY, open_queue_async

    assert DEFAULT_GEOMETRY.segment_size_bytes == 16 << 20
    assert HARNESS_GEOMETRY.segment_size_bytes == 1 << 20
    user = CommitLogMQ.open(tmp_path / "user", clock=Clock())
    harness = [factory(path=tmp_path / name, config=MQConfig(), clock=Clock(), faults=None)
               for name, factory in (("adapter", open_queue_async), ("mutant", open_no_fsync))]
    for mq in (user, *harness):
        mq.create_topic("t")
        mq.produce("t", [pm(b"x" * 1000)] * 3)
        mq.close()
    assert _segment_sizes(tmp_path / "user") == [16 << 20]  # sparse: costs no disk
    assert _segment_sizes(tmp_path / "adapter") == _segment_sizes(tmp_path / "mutant") == [1 << 20]
    reopened = CommitLogMQ.open(tmp_path / "adapter", clock=Clock())  # the stored size wins
    reopened.produce("t", [pm(b"y" * (1 << 20))])
    reopened.close()
    assert _segment_sizes(tmp_path / "adapter") == [1 << 20, 2 << 20]
