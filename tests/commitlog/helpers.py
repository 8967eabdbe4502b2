"""Helpers of the commit-log backend's tests: small geometry, opening, damaging files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rmqsim.impl.commitlog import CommitLogMQ, FlushPolicy, Geometry
from rmqsim.model.api import MQConfig, ProducerMessage

#: Small files, so that a few messages fill segments and consume-queue files.
SMALL = Geometry(segment_size_bytes=4096, cq_entries_per_file=8)


class Clock:
    def __init__(self, now: int = 1_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_mq(path: Path, *, mode: str = "sync", config: MQConfig | None = None,
            clock: Any = None, geometry: Geometry = SMALL, **kwargs: Any) -> CommitLogMQ:
    return CommitLogMQ.open(path, config=config or MQConfig(), clock=clock or Clock(),
                            policy=FlushPolicy(mode=mode), geometry=geometry, **kwargs)


def pm(payload: bytes, properties: dict[str, str] | None = None) -> ProducerMessage:
    return ProducerMessage(payload, properties or {})


def segments(path: Path) -> list[Path]:
    return sorted((path / "commitlog").iterdir())


def cq_dir(path: Path, incarnation: int = 1) -> Path:
    return path / "consumequeue" / f"{incarnation:020d}"


def cq_entry(path: Path, index: int, incarnation: int = 1, per_file: int = 8) -> tuple[int, int]:
    """``(log offset, size)`` of consume-queue entry ``index``."""
    first = index - index % per_file
    data = (cq_dir(path, incarnation) / f"{first:020d}").read_bytes()
    entry = data[(index - first) * 20 : (index - first + 1) * 20]
    return int.from_bytes(entry[:8], "big"), int.from_bytes(entry[8:12], "big")


def write_log_bytes(path: Path, offset: int, data: bytes, segment_size: int = 4096) -> Path:
    """Overwrite the log at physical ``offset`` (a damaged disk); returns the segment."""
    start = offset - offset % segment_size
    segment = path / "commitlog" / f"{start:020d}"
    fd = os.open(segment, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset - start)
    finally:
        os.close(fd)
    return segment
