"""The threaded ``impl.consumer.PushConsumer``: worker pool, orderly mode, persist thread,
crash and restart, on a real RocksMQ. Waits are bounded polls, never timing assertions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqsim.impl import RocksMQ
from rmqsim.impl.consumer import PushConsumer, PushOptions, RocksOffsetStore
from rmqsim.model.api import ConsumeMode, ConsumerConfig, ConsumeResult, Delivered, ProducerMessage
from tests.conftest import FakeClock
from tests.consumer.conftest import NO_RETENTION

WAIT_LIMIT_S = 60.0
DLQ = "%DLQ%g"


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, "the consumer made no progress"
        time.sleep(0.005)


class Recorder:
    """A handler: records every delivery; fails an origin ``fails(origin, k)`` says."""

    def __init__(self, fails: Callable[[int, int], bool] = lambda origin, k: False) -> None:
        self.fails = fails
        self.lock = threading.Lock()
        self.deliveries: list[Delivered] = []
        self.acked: set[int] = set()
        self.failure = ConsumeResult.RETRY_LATER

    def __call__(self, batch: tuple[Delivered, ...]) -> ConsumeResult:
        with self.lock:
            self.deliveries.extend(batch)
            if any(self.fails(m.origin_id, m.reconsume_times) for m in batch):
                return self.failure
            self.acked.update(m.origin_id for m in batch)
            return ConsumeResult.SUCCESS


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[RocksMQ]:
    mq = RocksMQ.open(tmp_path / "queue", config=NO_RETENTION, clock=FakeClock())
    mq.create_topic("t")
    yield mq
    mq.close()


def produce(mq: RocksMQ, count: int) -> None:
    for start in range(0, count, 50):
        mq.produce("t", [ProducerMessage(b"m%d" % i) for i in range(start, min(count, start + 50))])


def dead_letters(mq: RocksMQ) -> set[int]:
    if not mq.exist_consumer_group(DLQ, "check"):
        mq.create_consumer_group(DLQ, "check")
    mq.seek(DLQ, "check", -1)  # read from the start every time
    return {int(m.properties["%ORIGIN_ID"]) for m in mq.consume(DLQ, "check", 10_000)}


def consumer(mq: RocksMQ, tmp: Path, handler: Any, clock: Any = None, **config: Any) -> Any:
    return PushConsumer(
        mq,
        group="g",
        topic="t",
        handler=handler,
        path=tmp / "offsets",
        config=ConsumerConfig(**config),
        clock=clock or FakeClock(),
        options=PushOptions(workers=4),
    )


def consumer_threads() -> list[str]:
    names = ("pull", "persist")
    return [t.name for t in threading.enumerate() if t.name in names or "worker-" in t.name]


def test_pool_acks_or_dead_letters_everything_and_joins_its_threads(
    queue: RocksMQ, tmp_path: Path
) -> None:
    handler = Recorder(lambda origin, k: origin % 11 == 0 or (origin % 7 == 0 and k < 2))
    push = consumer(queue, tmp_path, handler, max_reconsume_times=2)
    produce(queue, 300)
    push.start()
    doomed = {i for i in range(1, 301) if i % 11 == 0}
    wait_until(lambda: len(handler.acked | dead_letters(queue)) == 300)
    push.close()
    assert consumer_threads() == [] and push.errors == []
    assert handler.acked == set(range(1, 301)) - doomed
    assert dead_letters(queue) == doomed
    per_origin: dict[int, list[int]] = {}
    for m in handler.deliveries:
        per_origin.setdefault(m.origin_id, []).append(m.reconsume_times)
    assert all(sorted(per_origin[i]) == [0, 1, 2] for i in doomed)  # max + 1 deliveries
    reopened = RocksOffsetStore(tmp_path / "offsets", "g")
    assert reopened.stored(["t"]) == {"t": 301}  # close persisted the final offset
    reopened.close()


def test_a_crashed_consumer_resumes_from_its_persisted_offset(
    queue: RocksMQ, tmp_path: Path
) -> None:
    clock = FakeClock()
    first = Recorder()
    push = consumer(queue, tmp_path, first, clock, persist_interval_s=5)
    produce(queue, 100)
    push.start()
    wait_until(lambda: len(first.acked) == 100)
    clock.advance(5)  # the persist thread persists offset 101
    wait_until(lambda: push.core.stored_offsets() == {"t": 101})
    produce(queue, 100)
    wait_until(lambda: len(first.acked) >= 150)  # acked, never persisted: the clock stands
    push.crash()
    assert consumer_threads() == []
    second = Recorder()
    again = consumer(queue, tmp_path, second, clock)
    assert again.start()["t"] == 101
    wait_until(lambda: len(second.acked) == 100)
    again.close()
    assert {m.msg_id for m in second.deliveries} == set(range(101, 201))


def test_orderly_pool_delivers_each_message_after_all_lower_ones(
    queue: RocksMQ, tmp_path: Path
) -> None:
    handler = Recorder(lambda origin, k: origin % 5 == 0 and k == 0)
    handler.failure = ConsumeResult.SUSPEND
    push = consumer(queue, tmp_path, handler, mode=ConsumeMode.ORDERLY, suspend_s=0)
    produce(queue, 120)
    push.start()
    wait_until(lambda: len(handler.acked) == 120)
    push.close()
    firsts = []
    for m in handler.deliveries:
        if not firsts or m.msg_id > firsts[-1]:
            firsts.append(m.msg_id)
        else:  # only a suspended message comes again, and nothing passes it meanwhile
            assert m.msg_id == firsts[-1] and m.msg_id % 5 == 0
    assert firsts == list(range(1, 121))
