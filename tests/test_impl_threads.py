"""Many producer and consumer threads on one instance: nothing lost, nothing duplicated.

50 producer threads append to one topic while 100 consumer threads, each with its own
group, read it, and a retention thread deletes what every group has read. Each group must
see every message exactly once, in id order, each producer's messages in the order that
producer sent them; the ids ``produce`` returned are exactly 1..N, each once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rmqsim.impl import RocksMQ
from rmqsim.model.api import MQConfig, ProducerMessage

PRODUCERS = 50
CONSUMERS = 100
BATCHES_PER_PRODUCER = 10
BATCH_MESSAGES = 4
TOTAL = PRODUCERS * BATCHES_PER_PRODUCER * BATCH_MESSAGES
DEADLINE_S = 60.0


def test_many_producers_and_consumers_on_one_instance(tmp_path: Path) -> None:
    # Small pages and size-0 retention: retention deletes whatever every group has read,
    # concurrently with the readers, which must still see everything exactly once.
    config = MQConfig(page_size_bytes=64, retention_time_s=-1, retention_size_bytes=0)
    mq = RocksMQ.open(tmp_path / "db", config)
    mq.create_topic("t")
    for c in range(CONSUMERS):
        mq.create_consumer_group("t", f"g{c}")
    start = threading.Barrier(PRODUCERS + CONSUMERS + 2)  # + retention + this thread
    errors: list[BaseException] = []
    returned_ids: list[list[int]] = [[] for _ in range(PRODUCERS)]
    seen: list[list[tuple[int, bytes, dict[str, str]]]] = [[] for _ in range(CONSUMERS)]
    producers_done = threading.Event()
    deadline = time.monotonic() + DEADLINE_S

    def produce(p: int) -> None:
        try:
            start.wait(DEADLINE_S)
            for b in range(BATCHES_PER_PRODUCER):
                batch = [
                    ProducerMessage(f"{p}:{b}:{i}".encode(), {"p": str(p), "seq": str(b * 10 + i)})
                    for i in range(BATCH_MESSAGES)
                ]
                returned_ids[p].extend(mq.produce("t", batch))
        except BaseException as exc:
            errors.append(exc)

    def consume(c: int) -> None:
        try:
            start.wait(DEADLINE_S)
            group = f"g{c}"
            n = 1 + c % 17
            while len(seen[c]) < TOTAL and time.monotonic() < deadline:
                got = mq.consume("t", group, n)
                if not got:
                    time.sleep(0.002)
                    continue
                seen[c].extend((m.msg_id, m.payload, dict(m.properties)) for m in got)
        except BaseException as exc:
            errors.append(exc)

    def retain() -> None:
        try:
            start.wait(DEADLINE_S)
            while not producers_done.is_set() or any(len(s) < TOTAL for s in seen):
                if time.monotonic() > deadline:
                    return
                mq.run_retention()
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(PRODUCERS)]
    threads += [threading.Thread(target=consume, args=(c,)) for c in range(CONSUMERS)]
    retention = threading.Thread(target=retain)
    for thread in [*threads, retention]:
        thread.start()
    start.wait(DEADLINE_S)
    for thread in threads[:PRODUCERS]:
        thread.join()
    producers_done.set()
    for thread in [*threads[PRODUCERS:], retention]:
        thread.join()
    assert not errors, errors[:3]

    all_ids = sorted(i for ids in returned_ids for i in ids)
    assert all_ids == list(range(1, TOTAL + 1)), "produce returned lost or repeated ids"
    for p, ids in enumerate(returned_ids):
        assert ids == sorted(ids), f"producer {p} got ids out of order"
    payload_of = {}
    for p in range(PRODUCERS):
        for b in range(BATCHES_PER_PRODUCER):
            for i in range(BATCH_MESSAGES):
                msg_id = returned_ids[p][b * BATCH_MESSAGES + i]
                payload_of[msg_id] = f"{p}:{b}:{i}".encode()
    for c, messages in enumerate(seen):
        assert [m[0] for m in messages] == list(range(1, TOTAL + 1)), f"group g{c}"
        for msg_id, payload, properties in messages:
            assert payload == payload_of[msg_id]
            assert properties["p"] == payload.split(b":")[0].decode()

    # Every group read everything, so retention may delete every closed page; the state
    # on disk agrees with what the threads saw, and survives a reopen.
    state = mq.snapshot()
    assert state.topics["t"].last_id == TOTAL
    assert all(position == TOTAL + 1 for position in state.groups.values())
    mq.run_retention()
    state = mq.snapshot()
    # The size pass is strict (total - (deleted + size) > 0): the newest acked page stays.
    assert len([page for page in state.topics["t"].pages if page.acked_ts is not None]) == 1
    mq.close()
    again = RocksMQ.open(tmp_path / "db", config)
    assert again.snapshot() == state
    again.close()
