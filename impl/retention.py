"""Which acked pages a retention pass deletes (SPEC "Retention", Milvus's expiredCleanUp).

A pure function, so the rule is written once and testable without a database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rmqsim.model.api import Page

__all__ = ["pages_to_delete"]


def pages_to_delete(
    acked: Sequence[Page],
    *,
    retention_time_s: int,
    retention_size_bytes: int,
    now: Callable[[], int],
) -> int:
    """How many pages, from the oldest, of a topic's acked prefix ``acked`` to delete.

    ``total`` is the size of the whole acked prefix. The time pass deletes while
    ``acked_ts + retention_time_s < now``; the size pass continues from there and deletes
    while ``total - (deleted + page.size_bytes) > retention_size_bytes``. ``-1`` disables
    a pass. ``now`` is called at most once, and only if the time pass needs it.
    """
    assert all(page.acked_ts is not None for page in acked), "only acked pages are retained"
    count = 0
    deleted_bytes = 0
    if retention_time_s != -1 and acked:
        now_s = now()
        while count < len(acked):
            acked_ts = acked[count].acked_ts
            assert acked_ts is not None
            if not acked_ts + retention_time_s < now_s:
                break
            deleted_bytes += acked[count].size_bytes
            count += 1
    if retention_size_bytes != -1:
        total_bytes = sum(page.size_bytes for page in acked)
        while count < len(acked):
            size = acked[count].size_bytes
            if not total_bytes - (deleted_bytes + size) > retention_size_bytes:
                break
            deleted_bytes += size
            count += 1
    assert 0 <= count <= len(acked)
    return count
