"""A damaged offset store (``impl.consumer.offsets``): reads that meet a damaged table file
raise ``CorruptDatabaseError`` naming it, as ``impl.storage`` does for a RocksMQ, never
RocksDB's bare ``Exception`` and never fewer offsets than are stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqsim.impl import CorruptDatabaseError
from rmqsim.impl.consumer import RocksOffsetStore
from rmqsim.model.api import ReadType

QUEUES = [f"q{index:03d}" for index in range(200)]  # more than one data block of offsets


def _store_on_disk(path: Path) -> Path:
    """An offset store of every queue in ``QUEUES``, closed: its one table file."""
    store = RocksOffsetStore(path, "g")
    for index, queue in enumerate(QUEUES):
        store.update(queue, 1_000 + index, increase_only=False)
    store.persist_all()
    store.close()
    (table,) = sorted(path.glob("*.sst"))
    return table


def _garble(file: Path, offset: int) -> None:
    """Flip 16 bytes from ``offset`` (negative: from the end)."""
    data = bytearray(file.read_bytes())
    start = offset % len(data)
    for index in range(start, min(start + 16, len(data))):
        data[index] ^= 0xFF
    file.write_bytes(bytes(data))


def test_a_damaged_data_block_is_a_corrupt_database_error_naming_the_file(
    tmp_path: Path,
) -> None:
    table = _store_on_disk(tmp_path)
    _garble(table, 16)  # the first data block: q000's offset
    store = RocksOffsetStore(tmp_path, "g")  # the open reads no data block
    try:
        with pytest.raises(CorruptDatabaseError) as by_read:
            store.read("q000", ReadType.STORE)
        with pytest.raises(CorruptDatabaseError) as by_stored:
            store.stored(QUEUES)
    finally:
        store.close()
    for caught in (by_read, by_stored):
        assert table.name in str(caught.value), str(caught.value)
        assert str(tmp_path) in str(caught.value) and "corrupt" in str(caught.value)


def test_a_damaged_table_footer_refuses_the_open_naming_the_file(tmp_path: Path) -> None:
    table = _store_on_disk(tmp_path)
    _garble(table, -16)  # the footer and its magic number
    with pytest.raises(CorruptDatabaseError) as caught:
        RocksOffsetStore(tmp_path, "g")
    assert table.name in str(caught.value), str(caught.value)
