"""The raw baselines of ``rmqsim bench``: the least work a queue's produce and consume
need, done directly on the storage each backend uses, timed by wall and by CPU.

- ``raw rocksdict`` (for ``impl.RocksMQ``): produce is one ``WriteBatch`` of 100 puts of
  the queue's message keys (tag + incarnation + big-endian id) per batch; consume is a
  bounded iterator scan over the next 100 keys, values only.
- ``raw append`` (for the commit-log backend): produce appends each batch to one file in
  one ``write`` (each payload framed by its length and CRC-32, the least a log needs to
  find its records again and to tell a torn one), with the backend's durability: ``sync``
  fsyncs after every batch, ``async`` when at least ``flush_least_pages`` pages are dirty
  or ``flush_thorough_interval_s`` passed since the last fsync (read from the backend's
  ``FlushPolicy``). Consume reads 100 records with one ``pread``, checks each CRC and
  slices the payloads out. The CRC-32 is the backend's own (``records.crc32``).

Every timing is a ``Timing``: wall seconds (``time.perf_counter``) and CPU seconds of the
whole process, every thread included (``time.process_time``: RocksDB's background
threads, a flusher thread), so a figure taken on a busy machine still means something.
"""

from __future__ import annotations

import functools
import os
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BATCH_MESSAGES",
    "CONSUME_N",
    "PAYLOAD_BYTES",
    "FlushRule",
    "Timing",
    "raw_append_consume",
    "raw_append_produce",
    "raw_rocksdict_consume",
    "raw_rocksdict_produce",
    "stopwatch",
]

BATCH_MESSAGES = 100
PAYLOAD_BYTES = 1024
CONSUME_N = 100
_RAW_INCARNATION = 1
_FRAME = struct.Struct(">II")  # payload length, CRC-32 of the payload


@dataclass(slots=True)
class Timing:
    """Wall and process-CPU seconds of one timed section."""

    wall_s: float = 0.0
    cpu_s: float = 0.0


@contextmanager
def stopwatch() -> Iterator[Timing]:
    """Times the ``with`` body: the yielded ``Timing`` is filled in when it ends."""
    timing = Timing()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield timing
    finally:
        timing.wall_s = time.perf_counter() - wall
        timing.cpu_s = time.process_time() - cpu


# --------------------------------------------------------------------------- rocksdict


class _RawDb:
    """A raw-mode rocksdict database with the queue's options (one column family)."""

    def __init__(self, path: Path) -> None:
        from rocksdict import Options, Rdict, WriteOptions

        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self.db = Rdict(str(path), options)
        self.write_options = WriteOptions()

    def close(self) -> None:
        self.db.close()
        del self.db


def _message_key() -> Callable[[int, int], bytes]:
    return functools.partial(struct.Struct(">cQQ").pack, b"m")  # the queue's message keys


def raw_rocksdict_produce(path: Path, payloads: list[bytes]) -> Timing:
    from rocksdict import WriteBatch

    raw = _RawDb(path)
    key = _message_key()
    try:
        with stopwatch() as timing:
            msg_id = 0
            for offset in range(0, len(payloads), BATCH_MESSAGES):
                batch = WriteBatch(raw_mode=True)
                for payload in payloads[offset : offset + BATCH_MESSAGES]:
                    msg_id += 1
                    batch.put(key(_RAW_INCARNATION, msg_id), payload)
                raw.db.write(batch, raw.write_options)
        return timing
    finally:
        raw.close()


def raw_rocksdict_consume(path: Path, messages: int) -> Timing:
    from rocksdict import ReadOptions

    raw = _RawDb(path)
    key = _message_key()
    try:
        with stopwatch() as timing:
            seen = 0
            for first in range(1, messages + 1, CONSUME_N):
                bound = ReadOptions()
                bound.set_iterate_upper_bound(key(_RAW_INCARNATION, first + CONSUME_N))
                values = list(raw.db.values(from_key=key(_RAW_INCARNATION, first),
                                            read_opt=bound))
                seen += len(values)
        assert seen == messages, (seen, messages)
        return timing
    finally:
        raw.close()


# --------------------------------------------------------------------------- file append


@dataclass(frozen=True, slots=True)
class FlushRule:
    """When the raw append fsyncs: after every batch (``sync``), or once ``dirty_bytes``
    are unsynced or ``interval_s`` passed since the last fsync (``async``)."""

    every_batch: bool
    dirty_bytes: int = 0
    interval_s: float = 0.0


def _write_all(handle: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def raw_append_produce(path: Path, payloads: list[bytes], rule: FlushRule,
                       crc32: Callable[[bytes], int]) -> Timing:
    """Append ``payloads`` in batches of 100, framed, fsynced as ``rule`` says."""
    frame = _FRAME.pack
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with stopwatch() as timing:
            dirty, last_sync = 0, time.monotonic()
            for offset in range(0, len(payloads), BATCH_MESSAGES):
                parts: list[bytes] = []
                for payload in payloads[offset : offset + BATCH_MESSAGES]:
                    parts += (frame(len(payload), crc32(payload)), payload)
                data = b"".join(parts)
                _write_all(handle, data)
                dirty += len(data)
                now = time.monotonic()
                if rule.every_batch or dirty >= rule.dirty_bytes or \
                        now - last_sync >= rule.interval_s:
                    os.fsync(handle)
                    dirty, last_sync = 0, now
        return timing
    finally:
        os.close(handle)


def raw_append_consume(path: Path, messages: int, crc32: Callable[[bytes], int]) -> Timing:
    """Read what ``raw_append_produce`` wrote, 100 records per ``pread``, each CRC checked
    (the payloads are all ``PAYLOAD_BYTES`` long, so a record's place is computed, as a
    consume queue's fixed-size entries make it for the backend)."""
    record_bytes = _FRAME.size + PAYLOAD_BYTES
    unpack = _FRAME.unpack_from
    handle = os.open(path, os.O_RDONLY)
    try:
        with stopwatch() as timing:
            seen = 0
            for first in range(0, messages, CONSUME_N):
                count = min(CONSUME_N, messages - first)
                data = os.pread(handle, count * record_bytes, first * record_bytes)
                values: list[bytes] = []
                for start in range(0, len(data), record_bytes):
                    length, crc = unpack(data, start)
                    payload = data[start + _FRAME.size : start + _FRAME.size + length]
                    assert crc32(payload) == crc, f"raw append: record {first} damaged"
                    values.append(payload)
                seen += len(values)
        assert seen == messages, (seen, messages)
        return timing
    finally:
        os.close(handle)
