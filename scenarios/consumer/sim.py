"""A seeded simpy simulation of push consumers: producers, and per client a puller, a pool
of workers with processing times and failures, a persist timer, plus a crasher and a
retention timer.

As ``simulation.Simulation``: one ``random.Random(seed)`` feeds every draw, time is whole
simulated seconds, and ``execute(step)`` applies each operation synchronously and returns
the model's ``Outcome``, the only thing the actors learn from. After ``steps`` operations
the producers and the crasher stop and the consumers drain: the run ends once every client
finished (acknowledged or dead-lettered) every produced message, or ``drain_limit_s`` later.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from rmqsim.scenarios.actors_base import ActorSimulation
from rmqsim.scenarios.consumer.ops import (
    Complete,
    ConsumerOp,
    CrashClient,
    CrashQueue,
    Deliver,
    Persist,
    ProduceBatch,
    Pull,
    RunRetention,
    StartClient,
)
from rmqsim.scenarios.consumer.profiles import ClientSpec, ConsumerProfile
from rmqsim.scenarios.queue.ops import Outcome, Step

__all__ = ["ConsumerSimulation", "ConsumerWorld"]

Execute = Callable[[Step[ConsumerOp]], Outcome]
#: A worker with nothing to do looks again after this many seconds.
IDLE_S = 1


class ConsumerWorld:
    """What the actors know from outcomes: produced origins, which each client finished,
    and each client's incarnation (a batch held across a crash is dropped)."""

    def __init__(self, clients: tuple[ClientSpec, ...]) -> None:
        self.produced = 0  # ids 1..produced of the topic exist
        self.incarnation = {c.group: 0 for c in clients}
        self.finished: dict[str, set[int]] = {c.group: set() for c in clients}
        self.origins: dict[str, dict[tuple[str, int], int]] = {c.group: {} for c in clients}

    def drained(self) -> bool:
        return all(len(done) == self.produced for done in self.finished.values())

    def learn(self, op: ConsumerOp, outcome: Outcome) -> None:
        """Learn from a successful outcome, whose value is plain data (see ``consumer_ops``):
        the ids of a produce, a delivered batch or None, a completion."""
        value = outcome.value
        if outcome.error is not None:
            return
        if type(op) is ProduceBatch:
            assert type(value) is tuple, "a produce returns its ids"
            self.produced = max(self.produced, *value) if value else self.produced
        elif type(op) is Deliver and value is not None:
            assert type(value) is tuple, "a batch is (seq, queue, messages)"
            _, queue, messages = value
            for msg_id, _origin_topic, origin_id, _k, _payload in messages:
                self.origins[op.client][(queue, msg_id)] = origin_id
        elif type(op) is Complete:
            assert type(value) is tuple, "a completion is (queue, acked, retried, dead, ...)"
            queue, acked, _retried, dead, _kept, _offset = value
            origins = self.origins[op.client]
            for msg_id in (*acked, *(old for old, _ in dead)):
                self.finished[op.client].add(origins[(queue, msg_id)])
        elif type(op) is CrashClient:
            self.incarnation[op.client] += 1
        elif type(op) is CrashQueue:
            for client in self.incarnation:
                self.incarnation[client] += 1


class ConsumerSimulation(ActorSimulation[ConsumerOp, ConsumerWorld]):
    """One run of a consumer profile; runs once."""

    def __init__(self, profile: ConsumerProfile, seed: int, steps: int | None = None) -> None:
        super().__init__(seed, ConsumerWorld(profile.clients))
        self.profile = profile
        self.steps = profile.steps if steps is None else steps
        self.draining = False

    @property
    def drained(self) -> bool:
        return self.world.drained()

    def run(self, execute: Execute) -> int:
        """Run the active phase and the drain; return the operations executed."""
        self.execute = execute
        env = self.env
        for client in self.profile.clients:
            self.emit("setup", StartClient(client.group))
        for index in range(self.profile.producers):
            env.process(self._producer(f"producer-{index}"))
        for client in self.profile.clients:
            env.process(self._puller(client))
            for index in range(client.workers):
                env.process(self._worker(client, f"{client.group}-worker-{index}"))
            env.process(self._persister(client))
        if self.profile.crash_every_s is not None:
            env.process(self._crasher())
        if self.profile.retention_every_s is not None:
            env.process(self._retainer(self.profile.retention_every_s))
        deadline_s: list[int] = []  # set when the drain starts

        def done() -> bool:
            if not deadline_s and self.executed >= self.steps:
                self.draining = True
                deadline_s.append(int(env.now) + self.profile.drain_limit_s)
            return bool(deadline_s) and (self.drained or env.now > deadline_s[0])

        self.step_until(done)
        return self.executed

    # ------------------------------------------------------------------ actors

    def _producer(self, name: str) -> Generator[simpy.Event, Any, None]:
        profile = self.profile
        while True:
            yield self.env.timeout(self.between(profile.produce_every_s))
            if self.draining:
                return
            count = self.between(profile.batch_size)
            payloads = tuple(
                self.rng.randbytes(self.between(profile.payload_size_bytes)) for _ in range(count)
            )
            self.emit(name, ProduceBatch(profile.topic, payloads))

    def _puller(self, client: ClientSpec) -> Generator[simpy.Event, Any, None]:
        while not (self.draining and self.drained):
            yield self.env.timeout(self.between(client.pull_every_s))
            self.emit(f"{client.group}-puller", Pull(client.group))

    def _persister(self, client: ClientSpec) -> Generator[simpy.Event, Any, None]:
        while not (self.draining and self.drained):
            yield self.env.timeout(max(1, client.persist_interval_s))
            self.emit(f"{client.group}-persist", Persist(client.group))

    def _worker(self, client: ClientSpec, name: str) -> Generator[simpy.Event, Any, None]:
        group, rng = client.group, self.rng
        failure = "suspend" if client.mode == "orderly" else "retry_later"
        while not (self.draining and self.drained):
            incarnation = self.world.incarnation[group]
            batch = self.emit(name, Deliver(group)).value
            if batch is None:
                yield self.env.timeout(IDLE_S)
                continue
            assert type(batch) is tuple, "a batch is (seq, queue, messages)"
            seq, _queue, messages = batch
            yield self.env.timeout(self.between(client.process_time_s))
            if self.world.incarnation[group] != incarnation:
                continue  # the client crashed while we worked: the batch is gone
            result = failure if rng.random() < client.fail_fraction else "success"
            refused: tuple[int, ...] = ()
            if result == "retry_later" and client.send_fail_fraction:
                fraction = client.send_fail_fraction
                refused = tuple(i for i in range(len(messages)) if rng.random() < fraction)
            self.emit(name, Complete(group, seq, result, refused))

    def _retainer(self, every_s: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
        """Retention passes at the simulated clock, through the drain: only the guard
        groups keep what a consumer has not finished."""
        while not (self.draining and self.drained):
            yield self.env.timeout(self.between(every_s))
            self.emit("retention", RunRetention())

    def _crasher(self) -> Generator[simpy.Event, Any, None]:
        profile = self.profile
        assert profile.crash_every_s is not None
        groups = [c.group for c in profile.clients]
        while True:
            yield self.env.timeout(self.between(profile.crash_every_s))
            if self.draining:
                return
            if self.rng.random() < profile.queue_crash_fraction:
                self.emit("crasher", CrashQueue())
            else:
                self.emit("crasher", CrashClient(self.rng.choice(groups)))
