"""``--crash-rate R``: arm a crash before a random fraction of the operations.

Before each state-changing queue operation, with probability ``rate``, the runner executes
an ``ArmCrash(hit)`` step of its own (actor ``crash-rate``) so that the operation crashes
at its ``hit``-th fault-hook call. ``hit`` is drawn from 1 up to the most calls an
operation of that kind has made so far (learned from the hook, at least 1), so crashes
land on points the implementation really has. The draws come from their own generator,
seeded from the run's seed, so the scenario itself is unchanged, the same seed gives the
same crashes, and the arms are ordinary steps of the trace: replay reproduces them.
"""

from __future__ import annotations

import random

from rmqsim.conformance.running.apply import RUNNER_KINDS
from rmqsim.conformance.running.lockstep import Lockstep
from rmqsim.scenarios.queue.ops import STATE_CHANGING, ArmCrash, Outcome, Step
from rmqsim.scenarios.queue.sim import Execute

__all__ = [
    "CRASH_RATE_ACTOR",
    "check_rate",
    "with_crash_rate",
]

#: The actor name of the arms the crash rate adds.
CRASH_RATE_ACTOR = "crash-rate"


def check_rate(rate: float) -> float:
    """``rate`` if it is a probability, else ValueError."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"the crash rate must be in [0, 1], got {rate}")
    return rate


def with_crash_rate(lockstep: Lockstep, seed: int, rate: float) -> Execute:
    """``lockstep.execute``, arming a crash before each state-changing queue operation
    with probability ``rate``."""
    check_rate(rate)
    rng = random.Random(f"rmqsim-crash-rate:{seed}")
    execute = lockstep.execute
    max_calls = lockstep.faults.max_calls

    def execute_with_crashes(step: Step) -> Outcome:
        kind = step.op.kind
        if kind in STATE_CHANGING and kind not in RUNNER_KINDS and rng.random() < rate:
            hit = rng.randint(1, max(1, max_calls.get(kind, 1)))
            execute(Step(step.time_s, CRASH_RATE_ACTOR, ArmCrash(hit)))
        return execute(step)

    return execute_with_crashes
