"""A seeded simpy simulation of the storage layer (docs/STORAGE.md "The storage contract").

Actors: producers (single puts and batches to the profile's queues, bodies of random
bytes and lengths, empty ones among them), a reader (gets at offsets of every class: below
the minimum, at it, inside, the last, at the maximum, beyond it, on a queue never written;
and ``offsets``), a flusher, a retention timer (a cutoff some seconds behind the clock),
a crasher (sometimes twice in a row) and a clean reopener. A profile's ``invalid_fraction``
of puts and gets carries an invalid argument.

As the other simulations: one ``random.Random(seed)`` feeds every draw, time is whole
simulated seconds, and ``execute(step)`` returns the model's ``Outcome``, the only thing
the actors learn from (``StoreWorld``). The run stops after ``steps`` operations.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from rmqsim.scenarios.actors_base import ActorSimulation
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.store.ops import (
    CrashStore,
    Flush,
    Get,
    Offsets,
    Put,
    ReopenStore,
    Retain,
    StoreOp,
)
from rmqsim.scenarios.store.profiles import StoreProfile

__all__ = ["BATCH_OVERHEAD_BYTES", "OFFSET_CLASSES", "StoreSimulation", "StoreWorld"]

Execute = Callable[[Step[StoreOp]], Outcome]
#: Where a reader's offset lies, relative to what it believes the queue's bounds are.
OFFSET_CLASSES = ("below-min", "min", "inside", "last", "max", "beyond", "unwritten")
#: What a store may add to each body of a batch in its file (RocketMQ: a 90-odd-byte header,
#: the topic, the properties), counted when a batch is kept within half a file.
BATCH_OVERHEAD_BYTES = 256
_INVALID_TOPICS = ("", "bad/name", "x" * 128, "sp ace")


class StoreWorld:
    """What the actors believe of each queue: ``(min, max)`` from the outcomes they saw."""

    def __init__(self) -> None:
        self.bounds: dict[tuple[str, int], tuple[int, int]] = {}

    def learn(self, op: StoreOp, outcome: Outcome) -> None:
        if outcome.error is not None:
            return
        value: Any = outcome.value
        if isinstance(op, Put):
            low, _ = self.bounds.get((op.topic, op.queue), (0, 0))
            self.bounds[(op.topic, op.queue)] = (low, value + len(op.bodies))
        elif isinstance(op, Offsets):
            self.bounds[(op.topic, op.queue)] = value
        elif isinstance(op, Retain):
            for topic, queue, low in value:
                self.bounds[(topic, queue)] = (low, self.bounds[(topic, queue)][1])
        elif isinstance(op, CrashStore):
            for topic, queue, low, high in value:
                self.bounds[(topic, queue)] = (low, high)


class StoreSimulation(ActorSimulation[StoreOp, StoreWorld]):
    """One run of a storage profile; runs once."""

    def __init__(self, profile: StoreProfile, seed: int, steps: int | None = None) -> None:
        super().__init__(seed, StoreWorld())
        self.profile = profile
        self.steps = profile.steps if steps is None else steps
        #: Whether the run is past its active phase (a store's run has no drain: never).
        self.draining = False

    def run(self, execute: Execute) -> int:
        """Run until ``steps`` operations were executed; return how many."""
        self.execute = execute
        self._start_actors()
        self.step_until(lambda: self.executed >= self.steps)
        return self.executed

    def _start_actors(self) -> None:
        p, env = self.profile, self.env
        for index in range(p.producers):
            env.process(self._every(p.put_every_s, f"producer-{index}", self._put))
        env.process(self._every(p.read_every_s, "reader", self._read))
        timers: tuple[tuple[Any, str, Callable[[], StoreOp]], ...] = (
            (p.flush_every_s, "flusher", Flush),
            (p.retain_every_s, "retainer", self._retain),
            (p.crash_every_s, "crasher", self._crash),
            (p.reopen_every_s, "reopener", ReopenStore),
        )
        for span, actor, make in timers:
            if span is not None:
                env.process(self._every(span, actor, make))

    def _every(self, span: tuple[int, int], actor: str, make: Callable[[], StoreOp]
               ) -> Generator[simpy.Event, Any, None]:
        while self.executed < self.steps:
            yield self.env.timeout(self.between(span))
            if self.executed < self.steps:
                self.emit(actor, make())

    # ------------------------------------------------------------------ operations

    def _queue(self) -> tuple[str, int]:
        return (self.rng.choice(self.profile.topics),
                self.rng.randrange(self.profile.queues_per_topic))

    def _invalid(self) -> bool:
        return self.rng.random() < self.profile.invalid_fraction

    def _put(self) -> StoreOp:
        topic, queue = self._queue()
        bodies = self._fitting(tuple(self._body() for _ in range(self.between(
            self.profile.batch))))
        if self._invalid():
            choice = self.rng.randrange(4)
            if choice == 0:
                return Put(self.rng.choice(_INVALID_TOPICS), queue, bodies)
            if choice == 1:
                return Put(topic, -1, bodies)
            if choice == 2:
                return Put(topic, queue, ())
            return Put(topic, queue, (b"\x00" * (self.profile.max_body_bytes + 1),))
        return Put(topic, queue, bodies)

    def _fitting(self, bodies: tuple[bytes, ...]) -> tuple[bytes, ...]:
        """The first bodies of a batch that fit in half a file with a header each
        (``BATCH_OVERHEAD_BYTES``): a store may need a batch to fit in one file
        (RocketMQ does: docs/FINDINGS.md), which the contract leaves to its config."""
        budget = self.profile.segment_bytes // 2
        kept: list[bytes] = []
        for body in bodies:
            budget -= len(body) + BATCH_OVERHEAD_BYTES
            if budget < 0 and kept:
                break
            kept.append(body)
        return tuple(kept)

    def _body(self) -> bytes:
        low, high = self.profile.body_bytes
        if low == 0 and self.rng.random() < 0.05:
            return b""
        size = self.rng.randint(max(low, 1), high) if high else 0
        if self.rng.random() < 0.03:
            size = min(self.profile.max_body_bytes,
                       self.profile.segment_bytes // 2 - BATCH_OVERHEAD_BYTES)
        return self.rng.randbytes(size)

    def _read(self) -> StoreOp:
        topic, queue = self._queue()
        if self.rng.random() < 0.25:
            return Offsets(topic, queue)
        count = self.rng.randint(1, self.profile.read_count_max)
        if self._invalid():
            if self.rng.random() < 0.5:
                return Get(topic, queue, -1, count)
            return Get(topic, queue, 0, self.rng.choice((0, -3)))
        klass = self.rng.choice(OFFSET_CLASSES)
        if klass == "unwritten":
            return Get(topic, self.profile.queues_per_topic + 7, 0, count)
        return Get(topic, queue, self._offset(klass, (topic, queue)), count)

    def _offset(self, klass: str, key: tuple[str, int]) -> int:
        low, high = self.world.bounds.get(key, (0, 0))
        chosen = {
            "below-min": low - 1,
            "min": low,
            "inside": self.rng.randint(low, high - 1) if high > low else low,
            "last": high - 1,
            "max": high,
            "beyond": high + self.rng.randint(1, 5),
        }[klass]
        return max(chosen, 0)

    def _retain(self) -> StoreOp:
        return Retain(int(self.env.now) - self.between(self.profile.retain_age_s))

    def _crash(self) -> StoreOp:
        return CrashStore(self.rng.random() < self.profile.crash_twice_fraction)

