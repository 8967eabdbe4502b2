"""A seeded, deterministic simpy simulation that drives a queue through an executor.

``Simulation(profile, seed).run(execute)`` starts the profile's actors as simpy processes
and calls ``execute(step)`` synchronously for every operation, in simulated-time order. The
executor (the lockstep runner) applies the operation to the model and the queue under test
and returns the model's ``Outcome``; the actors learn from it and nothing else.

Determinism is the point: the one ``random.Random(seed)`` feeds every draw, simulated time is
integer seconds, simpy runs events of equal time in scheduling order, and actors only choose
over ordered sequences. Same seed + same code => the same ``Step`` sequence, so a trace is
reproducible from ``(profile, seed, steps)`` alone and a divergence can be replayed.

The clock the queue sees is ``clock_s()`` = simulated time + skew; an ``AdvanceClock`` adds its
jump to the skew after it is executed (its own ``Step.time_s`` is the clock before the jump).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from typing import Any

import simpy
from simpy.core import EmptySchedule

from rmqsim.scenarios.queue.actors import Actor, Context, build_actors
from rmqsim.scenarios.queue.ops import AdvanceClock, Op, Outcome, Step
from rmqsim.scenarios.queue.profiles import Profile, resolve
from rmqsim.scenarios.queue.world import World

__all__ = ["MAX_STEPS", "Execute", "Simulation"]

#: The executor: applies one step and returns what the (model) queue returned.
Execute = Callable[[Step[Op]], Outcome]

#: Upper bound on one run's operation budget: far above any sensible run, low enough that a
#: typo (an extra zero or three) fails at once instead of running for hours.
MAX_STEPS = 100_000_000


class Simulation:
    """One run of a profile's actors for ``steps`` operations; runs once."""

    def __init__(self, profile: Profile, seed: int, steps: int | None = None) -> None:
        if type(seed) is not int:
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        resolved = resolve(profile, seed)
        assert not resolved.swarm, "resolve must return a concrete profile"
        budget = resolved.steps if steps is None else steps
        if type(budget) is not int or not 0 <= budget <= MAX_STEPS:
            raise ValueError(f"steps must be an int in [0, {MAX_STEPS}], got {budget!r}")
        #: The concrete (resolved) profile; its ``to_json()`` belongs in the trace header.
        self.profile: Profile = resolved
        self.seed: int = seed
        #: Operation budget of this run.
        self.steps: int = budget
        self.env = simpy.Environment()
        self.rng = random.Random(seed)
        self.world = World()
        self._skew_s = 0
        self._count = 0
        self._started = False
        self._execute: Execute | None = None
        self._failure: BaseException | None = None
        self.actors: list[Actor] = build_actors(
            Context(self.rng, resolved, self.world, self.clock_s)
        )

    @property
    def config(self) -> dict[str, int]:
        """The queue config of the resolved profile (a fresh dict; the runner builds MQConfig)."""
        return dict(self.profile.config)

    @property
    def executed(self) -> int:
        """Operations executed so far."""
        return self._count

    def clock_s(self) -> int:
        """The clock the queue sees now: simulated seconds plus the accumulated skew."""
        now_s = self.env.now
        assert type(now_s) is int, "simulated time stays in whole seconds: think times are ints"
        return now_s + self._skew_s

    def run(self, execute: Execute) -> int:
        """Run until ``steps`` operations were executed (or no actor is left); return the count.

        An exception from ``execute`` stops the run at once and propagates; no further
        operation is executed.
        """
        if self._started:
            raise RuntimeError("a Simulation runs once; build a new one to run again")
        self._started = True
        self._execute = execute
        env = self.env
        for actor in self.actors:
            env.process(self._live(actor))
        step = env.step
        while self._count < self.steps:
            try:
                step()
            except EmptySchedule:
                break
            if self._failure is not None:
                raise self._failure
        assert type(env.now) is int, "simulated time must stay in whole seconds"
        return self._count

    def _live(self, actor: Actor) -> Generator[simpy.Event, Any, None]:
        """An actor's process: think, emit one operation, repeat."""
        timeout = self.env.timeout
        randint = self.rng.randint
        low_s, high_s = actor.think_s
        next_op = actor.next_op
        emit = self._emit
        name = actor.name
        while True:
            yield timeout(low_s if low_s == high_s else randint(low_s, high_s))
            emit(name, next_op())

    def _emit(self, actor: str, op: Op) -> None:
        """Execute one operation and learn from its outcome."""
        # One operation per wake-up and a budget check after each event keep this true.
        assert self._count < self.steps, "an actor emitted past the step budget"
        step = Step(self.clock_s(), actor, op)
        execute = self._execute
        assert execute is not None, "actors run only inside run(), which sets the executor"
        try:
            outcome = execute(step)
            if type(outcome) is not Outcome:
                raise TypeError(
                    f"execute must return an Outcome, got {type(outcome).__name__} for {step}"
                )
        except BaseException as exc:
            # simpy would only re-raise this when it processes the dead process's event,
            # after other actors had run; remember it so that run() stops right now.
            self._failure = exc
            raise
        self._count += 1
        if type(op) is AdvanceClock:
            self._skew_s += op.seconds
            assert self.clock_s() >= 0, "the clock actor never moves the clock below 0"
        self.world.learn(op, outcome)
