"""Fuzzing the layers whose runs are a simulation of actors (the push consumer, the message
streams, the message store): hypothesis draws every choice the layer's own simulation
makes, and the layer's own lockstep checks each step. The fuzzer reaches a layer only
through its ``Layer`` object: ``layer.FuzzableLayer.fuzz_simulation`` hands out the
simulation ``simulate`` would run.

The queue layer has its own state machine (``conformance.searching.stateful``): its operations are
independent calls, so hypothesis can pick each one. A consumer's or a stream's are not:
a completion names a batch a delivery handed out, a seek a position a consume returned,
actors restart from checkpoints. Their simulations already make only valid programs, so
the fuzzer keeps them and replaces their random source: each ``random()``,
``randint()``, ``choice()`` or ``randbytes()`` of the active phase is a hypothesis draw
(``st.randoms``), so hypothesis picks the profile, the step count, the timings, the
failures and the crashes, and steers them toward the values that break things (a
campaign's rounds do not shrink with hypothesis: ``stateful.run_round`` shrinks the
failing example's trace with rmqsim's shrinker). The drain after the active phase (the
consumers finish every message) is long and not where choices matter: it draws from a
``random.Random`` seeded by one hypothesis draw, so an example stays within
hypothesis's bounds.

Every step goes through the layer's lockstep (``Layer.open_lockstep``), with its checks,
its crashes and its final check: there are no checks here. The failing example's steps
are a normal trace of the layer (``run_result.build_result``), which ``rmqsim replay``
re-executes. ``fuzz_layer_round`` runs one round; ``conformance.searching.stateful.fuzz`` runs
campaigns of rounds for every layer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import StopTest

import rmqsim.conformance.layers  # noqa: F401 (registers the built-in layers)
from rmqsim.conformance.adapter import Factory
from rmqsim.conformance.layer import (
    FuzzableLayer,
    LayerLockstep,
    RunSpec,
    layer_named,
    registered_layers,
)
from rmqsim.conformance.running.lockstep import Divergence
from rmqsim.conformance.running.run import run_in_lockstep
from rmqsim.conformance.running.run_result import RunResult, build_result, failed_at_final_check

__all__ = [
    "MAX_STEERED_BYTES",
    "MAX_STEERED_DRAWS",
    "PROFILE_SEEDS",
    "LayerRound",
    "SteeredRandom",
    "fuzz_layer_round",
    "fuzzable_layers",
]

#: Draws of an example's active phase that hypothesis makes (the rest: its fallback), so
#: that an example stays within hypothesis's bound on the data of one example.
MAX_STEERED_DRAWS = 1000
#: The longest ``randbytes`` hypothesis draws (``SteeredRandom._randbytes``).
MAX_STEERED_BYTES = 64
#: Profile seeds an example draws from (a swarm profile draws its knobs from its seed).
PROFILE_SEEDS = 1 << 16


def fuzzable_layers() -> tuple[str, ...]:
    """The layers ``rmqsim fuzz --layer`` takes: the queue (``conformance.searching.stateful``'s
    machine) and every registered layer that hands out its simulation
    (``layer.FuzzableLayer``), in the registry's order."""
    steered = [layer.name for layer in registered_layers()
               if layer.name != "queue" and isinstance(layer, FuzzableLayer)]
    return ("queue", *steered)


class SteeredRandom:
    """A random source whose draws are hypothesis's (``steered``) until ``draining()``
    turns true or ``max_draws`` were made, then ``fallback``'s: the simulation reads
    ``rng.<method>`` at each draw."""

    def __init__(
        self,
        steered: random.Random,
        fallback: random.Random,
        draining: Callable[[], bool],
        max_draws: int = MAX_STEERED_DRAWS,
    ) -> None:
        self.steered = steered
        self.fallback = fallback
        self.draining = draining
        self.draws_left = max_draws

    def __getattr__(self, name: str) -> Any:
        if self.draws_left <= 0 or self.draining():
            return getattr(self.fallback, name)
        if name == "randbytes":
            return self._randbytes
        self.draws_left -= 1
        return getattr(self.steered, name)

    def _randbytes(self, n: int) -> bytes:
        """Bytes of a payload: hypothesis's up to ``MAX_STEERED_BYTES`` (their length is
        its draw either way); longer ones are filler from ``fallback``, which keeps a
        layer whose operations carry bodies (the message store's) within hypothesis's
        bound on the data of one example."""
        if n > MAX_STEERED_BYTES:
            return self.fallback.randbytes(n)
        self.draws_left -= 1
        return self.steered.randbytes(n)


@dataclass(slots=True)
class LayerRound:
    """What one round of examples on a layer did (``stateful.run_round`` reports it)."""

    layer: str
    impl: str
    examples: int = 0
    steps: int = 0
    crashes_injected: int = 0
    #: The example (1-based) that first failed, before shrinking (0: none), and when.
    first_failure: int = 0
    first_failure_s: float = 0.0
    coverage: set[str] = field(default_factory=set)
    #: The failing example (hypothesis's last run of it: shrunk only if the settings
    #: have hypothesis's shrink phase).
    failure: RunResult | None = None
    last: RunResult | None = None


def _coverage(lockstep: LayerLockstep, profile: str) -> set[str]:
    """Operation/outcome pairs, and the profile the example ran."""
    keys = {f"profile:{profile}"}
    for record in lockstep.records:
        outcome = record.outcome
        keys.add(f"{record.step.op.kind}:{outcome.error if outcome and outcome.error else 'ok'}")
    return keys


def _run_example(
    layer: FuzzableLayer, spec: RunSpec, sut: Any, steer: Callable[[Any], SteeredRandom]
) -> tuple[RunResult, LayerLockstep]:
    """Run ``spec``'s simulation with the random source ``steer(simulation)`` in the
    layer's lockstep (``run.run_in_lockstep``: then its final check, both sides released)."""
    started = time.perf_counter()
    opened: list[LayerLockstep] = []

    def drive(lockstep: LayerLockstep) -> None:
        opened.append(lockstep)
        simulation = layer.fuzz_simulation(spec, lockstep)
        simulation.rng = steer(simulation)
        try:
            simulation.run(lockstep.execute)
        except StopTest as stop:  # hypothesis's data ran out inside a simpy process
            # simpy re-raises a process's exception as a copy; hypothesis wants its own.
            raise (stop.__cause__ if isinstance(stop.__cause__, StopTest) else stop) from None

    result = run_in_lockstep(layer, spec, sut, drive)
    lockstep = opened[0]
    divergence = result.divergence
    if divergence is None or not layer.final_check_needs_whole_run:
        return result, lockstep
    if failed_at_final_check(result):
        return result, lockstep
    # Cut at the failing step: a replay must not run the final check (see ``run_steps``).
    cut = spec.replace(final_check=False)
    return build_result(cut, lockstep, divergence, started=started), lockstep


def fuzz_layer_round(
    layer_name: str,
    impl: str | Factory,
    *,
    seed: int,
    round_settings: settings,
    max_steps: int,
    repro: str,
) -> LayerRound:
    """Run ``round_settings.max_examples`` examples of ``layer_name`` against ``impl`` on
    hypothesis seed ``seed``; each runs one of the layer's gate profiles for at most
    ``max_steps`` operations before its drain. A failure comes back as hypothesis last
    ran it (shrunk only if ``round_settings`` has the shrink phase), its trace's
    header naming ``repro`` (the command that repeats the campaign)."""
    layer = layer_named(layer_name)
    if not isinstance(layer, FuzzableLayer):
        raise ValueError(f"no fuzzer drives the layer {layer_name!r:.80}")
    name, sut = layer.resolve_impl(impl, for_replay=False)
    done = LayerRound(layer_name, name)
    started = time.perf_counter()

    @hypothesis_seed(seed)
    @settings(round_settings)
    @given(data=st.data())
    def example(data: st.DataObject) -> None:
        profile = data.draw(st.sampled_from(layer.gate_profiles), label="profile")
        profile_seed = data.draw(st.integers(0, PROFILE_SEEDS - 1), label="profile seed")
        steps = data.draw(st.integers(1, max_steps), label="steps")
        steered = data.draw(st.randoms(use_true_random=False), label="choices")
        drain_seed = data.draw(st.integers(0, 2**32 - 1), label="drain seed")
        resolved = layer.resolve_profile(profile, profile_seed)
        spec = RunSpec(
            layer=layer.name, profile=resolved.name, seed=profile_seed, impl=name,
            profile_config=resolved.profile_config, config=resolved.config, steps=steps,
            repro=repro, named_in_header=not layer.implicit_in_header,
        )  # fmt: skip

        def steer(simulation: Any) -> SteeredRandom:
            return SteeredRandom(steered, random.Random(drain_seed), lambda: simulation.draining)

        done.examples += 1
        result, lockstep = _run_example(layer, spec, sut, steer)
        done.last = result
        done.steps += result.steps
        done.crashes_injected += lockstep.stats.crashes_injected
        done.coverage |= _coverage(lockstep, profile)
        if result.divergence is not None:
            if not done.first_failure:
                done.first_failure = done.examples
                done.first_failure_s = time.perf_counter() - started
            raise result.divergence

    try:
        example()
    except Divergence:
        done.failure = done.last  # hypothesis ran the failing example last
    return done
