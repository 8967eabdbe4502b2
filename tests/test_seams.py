"""The public seams that the harness's own code and the seeded bugs use instead of another
module's private names: the model's ``reopen`` (the model as a SUT, ``conformance.adapter``),
``RocksMQ.ack_floor`` with ``group_positions`` (the ack-rule mutants) and ``store_class``
(the high-water-mark mutant)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from rmqsim.conformance.mutants.classic import StaleAcks, stale_acks
from rmqsim.conformance.mutants.crash import hwm_not_persisted
from rmqsim.impl import RocksMQ
from rmqsim.impl.storage import Store
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MQConfig, NotServingError, ProducerMessage

#: Three messages a page: a poll of four closes one page and reads past it.
CONFIG = MQConfig(page_size_bytes=3)


def _produce(mq: object, topic: str, count: int) -> list[int]:
    return mq.produce(topic, [ProducerMessage(b"x", {}) for _ in range(count)])  # type: ignore[attr-defined]  # any queue


def test_a_closed_model_reopens_with_its_state() -> None:
    model = ReferenceMQ()
    model.create_topic("t")
    _produce(model, "t", 2)
    model.close()
    with pytest.raises(NotServingError):
        model.get_latest_msg("t")
    model.reopen()
    assert model.get_latest_msg("t") == 2


class _NothingAcked(RocksMQ):
    """A variant through the public seam: no position counts."""

    def ack_floor(self, topic: str, positions: Mapping[str, int]) -> int:
        return -1


def _acked_pages(cls: type[RocksMQ], path: Path, clock: object) -> int:
    mq = cls.open(path, config=CONFIG, clock=clock)  # type: ignore[arg-type]  # a FakeClock
    try:
        mq.create_topic("t")
        mq.create_consumer_group("t", "g")
        _produce(mq, "t", 7)
        mq.consume("t", "g", 4)
        assert mq.group_positions("t") == {"g": 5}  # the next id to read
        assert mq.group_positions("gone") == {}
        return sum(page.acked_ts is not None for page in mq.snapshot().topics["t"].pages)
    finally:
        mq.close()


def test_ack_floor_is_the_seam_that_decides_acks(tmp_path: Path, clock: object) -> None:
    assert _acked_pages(RocksMQ, tmp_path / "real", clock) == 1
    assert _acked_pages(_NothingAcked, tmp_path / "variant", clock) == 0


def test_the_stale_acks_mutant_acks_one_move_late(tmp_path: Path, clock: object) -> None:
    assert "ack_floor" in vars(StaleAcks)  # the public seam, nothing private
    mq = stale_acks(path=tmp_path, config=CONFIG, clock=clock, faults=None)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    _produce(mq, "t", 7)
    mq.consume("t", "g", 4)
    assert [p.acked_ts for p in mq.snapshot().topics["t"].pages if p.acked_ts is not None] == []
    mq.consume("t", "g", 1)  # the previous move's acks come now
    assert sum(p.acked_ts is not None for p in mq.snapshot().topics["t"].pages) == 1
    mq.crash()  # type: ignore[attr-defined]  # RocksMQ crashes


def test_the_hwm_mutant_stores_through_the_store_class_seam(
    tmp_path: Path, clock: object
) -> None:
    mq = hwm_not_persisted(path=tmp_path, config=MQConfig(), clock=clock, faults=None)
    assert isinstance(mq, RocksMQ) and type(mq.store_class) is type
    assert issubclass(mq.store_class, Store) and mq.store_class is not Store
    mq.create_topic("t")
    assert _produce(mq, "t", 2) == [1, 2]
    mq.destroy_topic("t")
    mq.close()
    mq = hwm_not_persisted(path=tmp_path, config=MQConfig(), clock=clock, faults=None)
    mq.create_topic("t")
    assert _produce(mq, "t", 1) == [1]  # the bug: the id is issued again
    mq.close()
