"""What every actor simulation of a layer shares (the consumer's, the stream's and the
storage layer's): one simpy environment, one seeded RNG, a world of beliefs that learns
each outcome, and the one place an operation leaves the simulation (``emit``).

The queue's ``scenarios.queue.sim.Simulation`` predates it and keeps its own, richer loop
(crash points, clock skew).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import simpy
from simpy.core import EmptySchedule

from rmqsim.scenarios.queue.ops import Outcome, Step

__all__ = ["ActorSimulation", "World"]

OpT = TypeVar("OpT")


class World(Protocol):
    """A layer's beliefs: learnt from each operation and its outcome."""

    def learn(self, op: Any, outcome: Outcome) -> None: ...


WorldT = TypeVar("WorldT", bound=World)


class ActorSimulation(Generic[OpT, WorldT]):
    """The shared state and moves of a layer's simulation; a subclass adds its actors
    (simpy processes that call ``emit``) and its ``run``."""

    def __init__(self, seed: int, world: WorldT) -> None:
        if type(seed) is not int:
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.seed = seed
        self.env = simpy.Environment()
        self.rng = random.Random(seed)
        self.world = world
        self.executed = 0
        self.execute: Callable[[Step[OpT]], Outcome] | None = None
        self.failure: BaseException | None = None

    def emit(self, actor: str, op: OpT) -> Outcome:
        """Execute ``op`` as ``actor`` now; the world learns its outcome. An exception of
        the executor stops the run at once (``step_until`` raises it again)."""
        execute = self.execute
        assert execute is not None, "actors run only inside run(), which sets the executor"
        try:
            outcome = execute(Step(int(self.env.now), actor, op))
        except BaseException as exc:
            self.failure = exc
            raise
        self.executed += 1
        self.world.learn(op, outcome)
        return outcome

    def between(self, span: tuple[int, int]) -> int:
        """A draw from ``span`` (both ends included); no draw when it is one value."""
        low, high = span
        return low if low == high else self.rng.randint(low, high)

    def step_until(self, done: Callable[[], bool]) -> None:
        """Advance the simulation event by event until ``done()`` or nothing is left to
        do; an executor's exception inside an actor is raised here."""
        while not done():
            try:
                self.env.step()
            except EmptySchedule:
                return
            if self.failure is not None:
                raise self.failure
