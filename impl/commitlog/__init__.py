"""A second implementation of SPEC.md: RocketMQ's storage design on plain files.

Every message is appended to one *commit log* of preallocated segment files; per topic
incarnation a *consume queue* of fixed 20-byte entries indexes it; a *checkpoint* holds
the metadata at a log offset; an *abort* marker tells a crash from a clean close. All
metadata changes (topics, groups, positions, acks, retention) are control records in the
same log, so one operation is one appended batch, all or nothing. docs/STORAGE.md has the
format, the durability promise of each flush mode and recovery step by step.

Modules: ``fs`` (the one file-system interface, and the OS one), ``records`` (record
layout and checks), ``log`` (segments), ``cq`` (consume queues), ``state`` (metadata as
events, checkpoint encoding), ``recovery`` (open and recover), ``queue`` (``CommitLogMQ``).

``RecoveryHooks`` names recovery's extension points (``CommitLogMQ.open(hooks=...)``), for
tools that seed bugs in it; the defaults are correct.

``open_queue`` and ``open_queue_async`` are adapter factories:
``--impl impl.commitlog:open_queue`` (sync flush) or ``impl.commitlog:open_queue_async``.
They create stores of ``HARNESS_GEOMETRY`` (1 MiB segments, so that the harness's runs
and crash sweeps roll segments); ``CommitLogMQ.open`` defaults to ``DEFAULT_GEOMETRY``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rmqsim.impl.commitlog.fs import FileSystem, OsFileSystem
from rmqsim.impl.commitlog.queue import FLUSH_MODES, CommitLogMQ, FlushPolicy
from rmqsim.impl.commitlog.recovery import (
    DEFAULT_GEOMETRY,
    HARNESS_GEOMETRY,
    MIN_SEGMENT_SIZE_BYTES,
    Geometry,
    RecoveryHooks,
    TruncationHook,
)
from rmqsim.impl.faults import FaultHook
from rmqsim.model.api import Clock, MQConfig

__all__ = [
    "DEFAULT_GEOMETRY",
    "FLUSH_MODES",
    "HARNESS_GEOMETRY",
    "MIN_SEGMENT_SIZE_BYTES",
    "CommitLogMQ",
    "FileSystem",
    "FlushPolicy",
    "Geometry",
    "OsFileSystem",
    "RecoveryHooks",
    "TruncationHook",
    "chosen_geometry",
    "open_queue",
    "open_queue_async",
]


def chosen_geometry(
    geometry: Mapping[str, int] | None, default: Geometry = HARNESS_GEOMETRY
) -> Geometry:
    """The ``Geometry`` a factory's ``geometry=`` names (plain data: the keys of
    ``Geometry``), or ``default``."""
    if geometry is None:
        return default
    return Geometry(segment_size_bytes=int(geometry["segment_size_bytes"]),
                    cq_entries_per_file=int(geometry["cq_entries_per_file"]))


def open_queue(
    *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None,
    fs: FileSystem | None = None, geometry: Mapping[str, int] | None = None,
) -> CommitLogMQ:
    """Adapter factory: the commit-log queue, ``sync`` flush (every produce is synced).
    ``fs``: the file system (default the OS; the storage crash sweep passes its disk).
    ``geometry``: the file sizes of a new store, as plain data (``segment_size_bytes``,
    ``cq_entries_per_file``; the power-loss sweep's small ones), default ``HARNESS_GEOMETRY``."""
    return CommitLogMQ.open(path, config=config, clock=clock, faults=faults,
                            policy=FlushPolicy(mode="sync"), fs=fs,
                            geometry=chosen_geometry(geometry))


def open_queue_async(
    *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None,
    fs: FileSystem | None = None, geometry: Mapping[str, int] | None = None,
) -> CommitLogMQ:
    """Adapter factory: the commit-log queue, ``async`` flush (RocketMQ's defaults);
    ``fs`` and ``geometry`` as ``open_queue``'s."""
    return CommitLogMQ.open(path, config=config, clock=clock, faults=faults,
                            policy=FlushPolicy(mode="async"), fs=fs,
                            geometry=chosen_geometry(geometry))


# The durability promise each factory makes, as a storage backend declares it for the
# power-loss sweep (docs/ADAPTER.md).
open_queue.rmqsim_flush = "sync"  # type: ignore[attr-defined]
open_queue_async.rmqsim_flush = "async"  # type: ignore[attr-defined]
