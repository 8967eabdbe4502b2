"""``Store.open`` applies rmqsim's RocksDB options on every open, to existing databases too.

rocksdict, given no column families, opens an existing database with the column family
options its last ``OPTIONS`` file recorded, not the ones passed: a database created by
older code would keep that code's settings for ever.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqsim.impl import storage
from rmqsim.impl.storage import Store


def _recorded(path: Path, option: str) -> str:
    """The value of ``option`` in the newest ``OPTIONS`` file RocksDB wrote at ``path``."""
    newest = max(path.glob("OPTIONS-*"), key=lambda file: int(file.name.split("-")[1]))
    values = [
        line.split("=", 1)[1].strip()
        for line in newest.read_text().splitlines()
        if line.strip().startswith(f"{option}=")
    ]
    assert len(values) == 1, values  # one column family
    return values[0]


def test_reopen_applies_the_current_column_family_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "db"
    monkeypatch.setattr(storage, "L0_COMPACTION_TRIGGER_FILES", 7)  # "older code"
    Store.open(path).close()
    assert _recorded(path, "level0_file_num_compaction_trigger") == "7"

    monkeypatch.undo()
    Store.open(path).close()
    assert _recorded(path, "level0_file_num_compaction_trigger") == str(
        storage.L0_COMPACTION_TRIGGER_FILES
    )
