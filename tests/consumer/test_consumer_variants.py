"""Wrong push consumers that are not in the mutant catalogue, each breaking one guarantee
of docs/CONSUMER.md: the consumer profiles must catch every one, under the anomaly that
names what it broke. They prove the checks are not looser than the rules (a retention the
guard does not hold back, duplicates outside the crash window or without a crash, pulls past
the flow-control limits, two orderly batches at once, dead letters one delivery late, a
failure acknowledged)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rmqsim.conformance.mutants.consumer import core_factory
from rmqsim.conformance.running.run import run_seed
from rmqsim.impl.consumer import ConsumerCore
from rmqsim.model.api import (
    Completion,
    ConsumerConfig,
    ConsumeResult,
    ReadType,
    pull_group,
)


class _GuardAtLatest(ConsumerCore):
    """Persist moves the guard group to the latest message instead of the persisted
    offset: retention then deletes pulled messages that are not finished, and a restart
    from the persisted offset finds them gone."""

    def _persist_locked(self) -> dict[str, int]:
        stored = super()._persist_locked()
        for name in self._queues:
            self._mq.seek_to_latest(name, self._group)
        return stored


class _RepullFromCommitted(ConsumerCore):
    """Every pull rewinds the pull cursor to the committed offset, so messages finished
    above a pending one come again with no crash to explain them."""

    def pull(self) -> dict[str, tuple[int, ...] | None]:
        with self._lock:
            for name in self._queues:
                offset = self._offsets.read(name, ReadType.MEMORY)
                if offset >= 1 and self._serving:
                    self._mq.seek(name, pull_group(self._group), offset)
            return super().pull()


class _RestartFromEarliest(ConsumerCore):
    """A restart ignores the persisted offsets and consumes from the earliest retained
    message: redelivery far below the un-persisted window."""

    def start(self) -> dict[str, int]:
        with self._lock:
            offsets = super().start()
            for name, state in self._queues.items():
                state.floor = -1
                self._mq.seek(name, pull_group(self._group), -1)
            return offsets


class _OrderlyTwoAtOnce(ConsumerCore):
    """Orderly mode hands out the next batch of a queue while a worker still holds one."""

    def _next_orderly(self) -> Any:
        held = {name: state.inflight for name, state in self._queues.items()}
        try:
            for state in self._queues.values():
                state.inflight = 0
            return super()._next_orderly()
        finally:
            for name, state in self._queues.items():
                state.inflight = held[name]


class _AcksFailures(ConsumerCore):
    """A batch the handler failed is acknowledged as if it had succeeded."""

    def complete(self, seq: int, result: ConsumeResult) -> Completion:
        if result is ConsumeResult.RETRY_LATER:
            result = ConsumeResult.SUCCESS
        return super().complete(seq, result)


def _unlimited(config: ConsumerConfig) -> ConsumerConfig:
    return dataclasses.replace(config, max_cached_count=10**9, max_cached_bytes=10**12)


def _one_more_delivery(config: ConsumerConfig) -> ConsumerConfig:
    return dataclasses.replace(config, max_reconsume_times=config.max_reconsume_times + 1)


#: variant -> (factory, profile, seeds, the anomaly the checks must name). Some seeds
#: catch a variant only as a bare ``consumer-mismatch`` with the model (a rewound pull
#: that re-reads cached messages adds fewer ids: not wrong by itself) or not at all (no
#: crash came while retention had deleted what a restart needs); those listed name it.
CASES: dict[str, tuple[Any, str, tuple[int, ...], str]] = {
    "guard-at-latest": (core_factory(_GuardAtLatest), "consumer-orderly", (1, 2), "consumer-lost"),
    "repull-from-committed": (
        core_factory(_RepullFromCommitted),
        "consumer-orderly",
        (0, 1),
        "consumer-duplicate",
    ),
    "restart-from-earliest": (
        core_factory(_RestartFromEarliest),
        "consumer-crashy",
        (0, 1),
        "consumer-duplicate",
    ),
    "ignores-flow-control": (
        core_factory(ConsumerCore, _unlimited),
        "consumer",
        (0, 1),
        "flow-control",
    ),
    "orderly-two-at-once": (
        core_factory(_OrderlyTwoAtOnce),
        "consumer-orderly",
        (0, 1),
        "order-violation",
    ),
    "dead-letters-late": (
        core_factory(ConsumerCore, _one_more_delivery),
        "consumer",
        (1, 2),
        "dlq-mismatch",
    ),
    "acks-failures": (core_factory(_AcksFailures), "consumer", (0, 1), "completion-mismatch"),
}


@pytest.mark.parametrize("name", CASES)
def test_each_wrong_consumer_is_caught_by_name(name: str) -> None:
    factory, profile, seeds, anomaly = CASES[name]
    for seed in seeds:
        result = run_seed(profile, seed, impl=factory)
        detail = result.divergence and result.divergence.detail
        assert not result.ok and result.anomaly == anomaly, (seed, result.anomaly, detail)
