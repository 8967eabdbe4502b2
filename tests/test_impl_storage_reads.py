"""``Store.scan_ranges``: several ranges through one iterator read exactly what one
bounded scan per range reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqsim.impl import keys
from rmqsim.impl.storage import Plan, Store


@pytest.fixture
def store(tmp_path: Path):
    opened = Store.open(tmp_path / "db")
    puts = [(keys.group_key(inc, g), b"\0" * 8) for inc in (1, 2, 3) for g in ("a", "b")]
    puts += [(keys.page_key(inc, end), b"p") for inc in (1, 2, 3) for end in (5, 9)]
    msgs = [(keys.msg_key(inc, i), b"\x01m") for inc in (1, 2, 3) for i in range(1, 12)]
    opened.write(Plan(meta_puts=puts, msg_puts=msgs))
    yield opened
    opened.close()


def test_scan_ranges_reads_what_separate_scans_read(store: Store) -> None:
    ranges = (keys.group_range(2), keys.page_range(2), keys.msg_range(2, 7))
    found = store.scan_ranges(ranges)
    assert found == [store._scan(begin, end) for begin, end in ranges]
    groups, pages, messages = found
    assert [keys.parse_group_key(k) for k, _ in groups] == [(2, "a"), (2, "b")]
    assert [keys.parse_page_key(k) for k, _ in pages] == [(2, 5), (2, 9)]
    assert [keys.parse_msg_key(k)[1] for k, _ in messages] == [7, 8, 9, 10, 11]


def test_scan_ranges_reads_empty_ranges_and_the_end_of_the_keyspace(store: Store) -> None:
    found = store.scan_ranges((keys.group_range(9), keys.msg_range(3, 11)))
    assert found[0] == []
    assert [keys.parse_msg_key(k) for k, _ in found[1]] == [(3, 11)]


def test_scan_ranges_refuses_ranges_out_of_order(store: Store) -> None:
    with pytest.raises(AssertionError):
        store.scan_ranges((keys.page_range(1), keys.group_range(1)))
    with pytest.raises(AssertionError):
        store.scan_ranges(())
