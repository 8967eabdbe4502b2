"""The offset store and process queue rules of docs/CONSUMER.md, on model and impl."""

from __future__ import annotations

from typing import Any

from rmqsim.model.api import ConsumerMessage, ReadType
from rmqsim.model.consumer import Entry

MEM, STORE, BOTH = ReadType.MEMORY, ReadType.STORE, ReadType.MEMORY_THEN_STORE


def test_update_increase_only_never_moves_back_but_forced_does(offset_store: Any) -> None:
    store, _ = offset_store
    store.update("q", 5, increase_only=True)
    store.update("q", 3, increase_only=True)
    assert store.read("q", MEM) == 5
    store.update("q", 2, increase_only=False)
    assert store.read("q", MEM) == 2
    store.update("new", 7, increase_only=True)  # an unknown queue takes any value
    assert store.read("new", MEM) == 7


def test_reads_from_memory_store_or_memory_then_store(offset_store: Any) -> None:
    store, reopen = offset_store
    assert (store.read("q", MEM), store.read("q", STORE), store.read("q", BOTH)) == (-1, -1, -1)
    store.update("q", 4, increase_only=True)
    assert (store.read("q", MEM), store.read("q", STORE), store.read("q", BOTH)) == (4, -1, 4)
    store.persist(["q"])
    store.update("q", 9, increase_only=True)
    assert store.read("q", STORE) == 4
    assert store.read("q", MEM) == 9  # a store read only raises memory, never lowers it
    fresh = reopen()
    assert fresh.read("q", MEM) == -1
    assert fresh.read("q", BOTH) == 4  # falls back to the store...
    assert fresh.read("q", MEM) == 4  # ...and memory learns it


def test_persist_writes_listed_queues_only_and_keeps_the_others(offset_store: Any) -> None:
    store, reopen = offset_store
    store.update("a", 3, increase_only=True)
    store.update("b", 6, increase_only=True)
    store.persist(["a", "b"])
    store.update("a", 10, increase_only=True)
    store.update("b", 12, increase_only=True)
    store.persist(["a"])
    assert store.read("b", MEM) == 12  # not listed: memory keeps it
    fresh = reopen()
    assert (fresh.read("a", STORE), fresh.read("b", STORE)) == (10, 6)
    fresh.update("b", 20, increase_only=True)
    fresh.persist_all()
    assert reopen().read("b", STORE) == 20


def test_remove_forgets_memory_but_not_the_store(offset_store: Any) -> None:
    store, _ = offset_store
    store.update("q", 8, increase_only=True)
    store.persist(["q"])
    store.update("q", 11, increase_only=True)
    store.remove("q")
    assert store.read("q", MEM) == -1
    assert store.read("q", BOTH) == 8


def _put(pq: Any, *ids: int, size: int = 2) -> list[Any]:
    """Put entries of the process queue's own kind (the impl's ``Cached`` has the same
    fields as the model's ``Entry``)."""
    from rmqsim.impl.consumer import Cached, ProcessQueue

    cls = Cached if isinstance(pq, ProcessQueue) else Entry
    entries = [cls(ConsumerMessage(i, b"x" * size, {}), "t", i, 0) for i in ids]
    return pq.put(entries)


def _count(pq: Any) -> tuple[int, int]:
    if hasattr(pq, "cached_count"):
        return pq.cached_count, pq.cached_bytes
    return pq.count, pq.bytes


def test_remove_returns_lowest_cached_then_highest_plus_one(pq_cls: type) -> None:
    pq = pq_cls()
    assert pq.remove([1]) == -1  # nothing cached: nothing to commit
    assert len(_put(pq, 3, 4, 5, 6)) == 4
    assert len(_put(pq, 4, 7)) == 1  # an id already cached is ignored
    assert _count(pq) == (5, 10)
    assert pq.remove([5, 6]) == 3  # 3 is still pending
    assert pq.remove([3]) == 4
    assert pq.remove([4, 7]) == 8  # empty: highest ever put + 1
    assert _count(pq) == (0, 0)
    assert pq.remove([8]) == -1


def test_take_and_commit_for_orderly_consumption(pq_cls: type) -> None:
    pq = pq_cls()
    _put(pq, 5, 3, 4, size=1)
    taken = pq.take(2)
    assert [e.message.msg_id for e in taken] == [3, 4]
    assert _count(pq) == (3, 3)  # consuming messages still count for flow control
    pq.make_consume_again(taken)
    assert [e.message.msg_id for e in pq.take(2)] == [3, 4]  # taken again first
    assert pq.commit() == 5
    assert _count(pq) == (1, 1)
    assert pq.commit() == -1  # nothing consuming: nothing to commit
    assert [e.message.msg_id for e in pq.take(5)] == [5]
    assert pq.commit() == 6
