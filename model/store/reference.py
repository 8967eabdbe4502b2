"""``ReferenceStore``: the storage contract as an executable model (docs/STORAGE.md).

It is a store (``MessageStore``) whose every answer is the contract's strictest one, and it
keeps what a checker needs to judge a store that may answer otherwise where the contract
allows (``QueueLog``): every body ever acknowledged with the clock's second it was put at
(so that retention's bound and a recovered message can be checked), the retained minimum,
and how many messages are *durable* (they must survive a crash or a power cut: under
``sync`` flush every acknowledged put, under ``async`` those a ``flush`` covered).

Where the contract leaves a choice (how far retention goes, what an ``async`` crash keeps,
how many messages a ``get`` returns), ``adopt`` takes the store's observed answer once the
checker found it allowed: the model then goes on from what the store did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rmqsim.model.api import Clock, NotServingError
from rmqsim.model.store.api import (
    QueueKey,
    StoreConfig,
    validate_get,
    validate_put,
    validate_queue,
)

__all__ = ["QueueLog", "ReferenceStore"]


@dataclass(slots=True)
class QueueLog:
    """One queue as the model knows it. ``bodies[i]`` and ``put_s[i]`` are offset ``i``'s
    (kept after retention: a recovered store may serve a retained message again, and it
    must be the same); ``min_offset`` the lowest retained; ``durable`` how many of the
    first offsets must survive a crash."""

    bodies: list[bytes] = field(default_factory=list)
    put_s: list[int] = field(default_factory=list)
    min_offset: int = 0
    durable: int = 0
    #: The highest minimum any retention so far allowed: a recovered minimum above both
    #: it and ``min_offset`` lost messages no retention deleted.
    min_ceiling: int = 0
    #: Where each put's batch ended (its offset after the last body): where a crash may
    #: cut a store whose batches are all or nothing.
    batch_ends: set[int] = field(default_factory=lambda: {0})

    @property
    def max_offset(self) -> int:
        return len(self.bodies)

    def retention_ceiling(self, cutoff_s: int) -> int:
        """The highest ``min`` a retention at ``cutoff_s`` may leave: the first offset put
        at or after the cutoff (the clock may go back: the first, not a binary search),
        never below the current minimum."""
        for offset in range(self.min_offset, len(self.put_s)):
            if self.put_s[offset] >= cutoff_s:
                return offset
        return len(self.put_s)

    def truncate(self, max_offset: int) -> None:
        """Forget offsets from ``max_offset`` on (a crash lost them: they are issued again)."""
        assert self.durable <= max_offset <= len(self.bodies), (self.durable, max_offset)
        del self.bodies[max_offset:]
        del self.put_s[max_offset:]
        self.batch_ends = {end for end in self.batch_ends if end <= max_offset} | {max_offset}


class ReferenceStore:
    """The model (see the module's docstring); also a ``MessageStore`` itself."""

    def __init__(self, config: StoreConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.queues: dict[QueueKey, QueueLog] = {}
        self.serving = True

    # ---------------------------------------------------------------- the contract

    def put(self, topic: str, queue: int, bodies: Sequence[bytes]) -> int:
        self._check_serving()
        validate_put(topic, queue, bodies, self.config)
        log = self.queues.setdefault((topic, queue), QueueLog())
        first = log.max_offset
        now_s = self.clock()
        log.bodies.extend(bodies)
        log.put_s.extend([now_s] * len(bodies))
        log.batch_ends.add(log.max_offset)
        if self.config.flush == "sync":
            log.durable = log.max_offset
        return first

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        self._check_serving()
        validate_get(topic, queue, offset, max_count)
        log = self.queues.get((topic, queue))
        if log is None or not log.min_offset <= offset < log.max_offset:
            return []
        return log.bodies[offset : offset + max_count]

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        self._check_serving()
        validate_queue(topic, queue)
        log = self.queues.get((topic, queue))
        return (0, 0) if log is None else (log.min_offset, log.max_offset)

    def flush(self) -> None:
        self._check_serving()
        for log in self.queues.values():
            log.durable = log.max_offset

    def retain(self, cutoff_s: int) -> None:
        """The model's own retention goes as far as allowed (message by message)."""
        self._check_serving()
        self.allow_retention(cutoff_s)
        for log in self.queues.values():
            log.min_offset = log.retention_ceiling(cutoff_s)

    def close(self) -> None:
        self.serving = False

    def crash(self) -> None:
        """As a store whose unflushed writes are all lost."""
        self.serving = False
        for log in self.queues.values():
            log.truncate(log.durable)
            log.min_offset = min(log.min_offset, log.max_offset)

    # ---------------------------------------------------------------- for checkers

    def queue_keys(self) -> Iterator[QueueKey]:
        """Every queue ever written, in a fixed order."""
        return iter(sorted(self.queues))

    def log(self, key: QueueKey) -> QueueLog:
        return self.queues.setdefault(key, QueueLog())

    def allow_retention(self, cutoff_s: int) -> None:
        """A retention at ``cutoff_s`` ran (or was in flight): raise each queue's
        ``min_ceiling`` to what it allowed."""
        for log in self.queues.values():
            log.min_ceiling = max(log.min_ceiling, log.retention_ceiling(cutoff_s))

    def adopt(self, key: QueueKey, min_offset: int, max_offset: int) -> None:
        """Go on from a store that (allowed by the contract) kept ``[min, max)``."""
        log = self.log(key)
        log.truncate(max_offset)
        log.min_offset = min_offset

    def _check_serving(self) -> None:
        if not self.serving:
            raise NotServingError("the store is not serving")

