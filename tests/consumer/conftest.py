"""Fixtures that run every consumer rule against the model and the implementation.

``side`` is ``model`` (``model.consumer`` over ``ReferenceMQ``, offsets in a dict) or
``impl`` (``impl.consumer`` over ``RocksMQ``, offsets in RocksDB). ``Env.restart`` crashes
the client (memory lost, the store kept) and starts a new one on the same queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqsim.impl import RocksMQ
from rmqsim.impl.consumer import ConsumerCore, ProcessQueue, RocksOffsetStore
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import ConsumerConfig, MessageQueue, MQConfig, ProducerMessage
from rmqsim.model.consumer import OffsetStore, PushConsumerModel
from rmqsim.model.consumer import ProcessQueue as ModelProcessQueue
from tests.conftest import FakeClock

SIDES = ("model", "impl")
NO_RETENTION = MQConfig(retention_time_s=-1, retention_size_bytes=-1)


class Env:
    """A queue with topic ``t`` and one consumer of group ``g`` on it."""

    def __init__(self, side: str, tmp: Path, config: ConsumerConfig, send_hook: Any) -> None:
        self.side = side
        self.tmp = tmp
        self.clock = FakeClock()
        self.config = config
        self.send_hook = send_hook
        self.store: dict[str, int] = {}
        self.mq: MessageQueue = (
            ReferenceMQ(config=NO_RETENTION, clock=self.clock)
            if side == "model"
            else RocksMQ.open(tmp / "queue", config=NO_RETENTION, clock=self.clock)
        )
        self.mq.create_topic("t")
        self.consumer: Any = None

    def new_consumer(self) -> Any:
        common = {
            "group": "g",
            "topic": "t",
            "config": self.config,
            "clock": self.clock,
            "send_hook": self.send_hook,
        }
        if self.side == "model":
            return PushConsumerModel(self.mq, store=self.store, **common)
        return ConsumerCore.open(queue=self.mq, path=self.tmp / "offsets", **common)

    def start(self) -> dict[str, int]:
        self.consumer = self.new_consumer()
        return self.consumer.start()

    def restart(self) -> dict[str, int]:
        self.consumer.crash()
        return self.start()

    def produce(self, *payloads: bytes) -> list[int]:
        return self.mq.produce("t", [ProducerMessage(p) for p in payloads])

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.crash()
        self.mq.close()


@pytest.fixture(params=SIDES)
def side(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_env(side: str, tmp_path: Path) -> Iterator[Any]:
    envs: list[Env] = []

    def make(send_hook: Any = None, **config: Any) -> Env:
        env = Env(side, tmp_path / str(len(envs)), ConsumerConfig(**config), send_hook)
        envs.append(env)
        env.start()
        return env

    yield make
    for env in envs:
        env.close()


@pytest.fixture
def offset_store(side: str, tmp_path: Path) -> Iterator[Any]:
    """An offset store of group ``g`` and a way to get a fresh one on the same store."""
    if side == "model":
        durable: dict[str, int] = {}
        stores = [OffsetStore(durable)]
        yield stores[0], lambda: OffsetStore(durable)
        return
    opened: list[RocksOffsetStore] = [RocksOffsetStore(tmp_path / "o", "g")]

    def reopen() -> RocksOffsetStore:
        opened[-1].crash()
        opened.append(RocksOffsetStore(tmp_path / "o", "g"))
        return opened[-1]

    yield opened[0], reopen
    opened[-1].close()


@pytest.fixture
def pq_cls(side: str) -> type:
    return ModelProcessQueue if side == "model" else ProcessQueue
