"""The optional background retention thread: off by default, and when on, it runs passes
on real time (the injected clock still decides what is old) and stops with the queue."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rmqsim.impl import RocksMQ
from rmqsim.model.api import InvalidArgumentError, MQConfig, ProducerMessage

CONFIG = MQConfig(page_size_bytes=1, retention_time_s=10, retention_size_bytes=-1)


def _retention_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rmqsim-retention")]


def test_off_by_default(tmp_path: Path) -> None:
    before = len(_retention_threads())
    mq = RocksMQ.open(tmp_path / "db", CONFIG, clock=lambda: 1_000)
    try:
        assert len(_retention_threads()) == before
        assert mq.retention_passes == 0
    finally:
        mq.close()


def test_runs_passes_and_stops_with_close(tmp_path: Path) -> None:
    now = [1_000]
    mq = RocksMQ.open(tmp_path / "db", CONFIG, clock=lambda: now[0], retention_interval_s=0.02)
    mq.create_topic("t")
    mq.create_consumer_group("t", "g")
    mq.produce("t", [ProducerMessage(b"ab"), ProducerMessage(b"cd")])  # two closed pages
    assert len(mq.consume("t", "g", 10)) == 2  # both acked at 1000
    deadline = time.monotonic() + 10
    while mq.retention_passes < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mq.retention_passes >= 2
    assert len(mq.snapshot().topics["t"].messages) == 2  # not old enough yet: 1000 + 10 !< now
    now[0] = 2_000
    while mq.snapshot().topics["t"].messages and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mq.snapshot().topics["t"].messages == ()
    thread = mq._retention_thread
    mq.close()
    assert thread is not None and not thread.is_alive()
    passes = mq.retention_passes
    time.sleep(0.1)
    assert mq.retention_passes == passes


def test_crash_stops_the_thread_too(tmp_path: Path) -> None:
    mq = RocksMQ.open(tmp_path / "db", CONFIG, clock=lambda: 1, retention_interval_s=0.01)
    thread = mq._retention_thread
    mq.crash()
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive()
    RocksMQ.open(tmp_path / "db", CONFIG).close()


@pytest.mark.parametrize("interval", [0, -1, float("nan"), "1", True])
def test_bad_interval_is_refused_before_opening(tmp_path: Path, interval: object) -> None:
    with pytest.raises(InvalidArgumentError):
        RocksMQ.open(tmp_path / "db", CONFIG, retention_interval_s=interval)  # type: ignore[arg-type]
    assert not (tmp_path / "db").exists()
