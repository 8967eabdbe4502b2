"""The consumer layer: push consumers (``impl.consumer`` by default) over a queue, checked
against ``model.consumer`` and the guarantees of docs/CONSUMER.md
(``conformance.consumer.check``), driven by ``scenarios.consumer.sim``. The lockstep is
``conformance.consumer.run.ConsumerLockstep``. Its traces' headers do not name the layer
(they predate the field): a header whose ``profile_config`` has ``clients`` is a consumer
run's."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rmqsim.conformance.adapter import Factory
from rmqsim.conformance.consumer.check import CONSUMER_ANOMALIES
from rmqsim.conformance.consumer.run import (
    ConsumerLockstep,
    check_consumer_trace,
    consumer_profile_of,
    is_consumer_header,
    resolve_consumer_impl,
)
from rmqsim.conformance.consumer.shrink import drop_batches
from rmqsim.conformance.layer import (
    LayerLockstep,
    ResolvedProfile,
    RunSpec,
    ShrinkPass,
    StepCodec,
)
from rmqsim.conformance.queue.layer import simpler_messages
from rmqsim.conformance.running.trace import Trace
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.consumer.ops import (
    Complete,
    ProduceBatch,
    consumer_op_from_json,
    consumer_op_to_json,
    consumer_outcome_from_json,
    plain_to_json,
)
from rmqsim.scenarios.consumer.profiles import CONSUMER_PROFILES
from rmqsim.scenarios.consumer.sim import ConsumerSimulation
from rmqsim.scenarios.queue.ops import Message, Outcome

__all__ = [
    "CONSUMER_GATE_PROFILES",
    "CONSUMER_LAYER",
    "ConsumerLayer",
    "consumer_outcome_to_json",
]

#: The consumer profiles the gate runs (docs/CONSUMER.md), after the queue's.
CONSUMER_GATE_PROFILES = ("consumer", "consumer-crashy", "consumer-orderly")


def consumer_outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """A consumer step's outcome as a trace records it."""
    return {"value": plain_to_json(outcome.value), "error": outcome.error}


class ConsumerLayer:
    """The consumer layer (see the module's docstring)."""

    name = "consumer"
    implicit_in_header = True
    anomalies: Mapping[str, str] = MappingProxyType(CONSUMER_ANOMALIES)
    gate_profiles = CONSUMER_GATE_PROFILES
    codec = StepCodec(
        consumer_op_to_json, consumer_op_from_json, consumer_outcome_to_json,
        consumer_outcome_from_json,
    )  # fmt: skip
    crash_modes = ("inprocess",)
    supports_crash_rate = False
    final_check_needs_whole_run = True
    crash_sweep_refusal = (
        "crash-sweep runs queue profiles; {profile!r} is a consumer profile (its runs "
        "crash clients and the queue themselves: rmqsim run --profile {profile})"
    )

    def profile_names(self) -> Sequence[str]:
        return tuple(CONSUMER_PROFILES)

    def resolve_profile(self, name: str, seed: int) -> ResolvedProfile:
        profile = CONSUMER_PROFILES[name]
        config = dataclasses.asdict(MQConfig(**profile.config))
        return ResolvedProfile(profile.name, profile.to_json(), config)

    def claims_header(self, header: Mapping[str, Any]) -> bool:
        return is_consumer_header(header)

    def check_trace(self, trace: Trace) -> None:
        check_consumer_trace(trace)

    def resolve_impl(self, impl: str | Factory, *, for_replay: bool) -> tuple[str, Any]:
        """``--impl`` names a queue or a consumer factory; ours stands in for the other."""
        name, queue_factory, consumer_factory = resolve_consumer_impl(impl)
        return name, (queue_factory, consumer_factory)

    def simulate(self, spec: RunSpec, lockstep: LayerLockstep) -> None:
        self.fuzz_simulation(spec, lockstep).run(lockstep.execute)

    def fuzz_simulation(self, spec: RunSpec, lockstep: LayerLockstep) -> ConsumerSimulation:
        assert isinstance(lockstep, ConsumerLockstep), lockstep
        return ConsumerSimulation(lockstep.profile, spec.seed, spec.steps)

    def open_lockstep(
        self, spec: RunSpec, root: Path, *, sut: Any, recorded: bool, log_faults: bool
    ) -> LayerLockstep:
        profile = consumer_profile_of({"profile_config": spec.profile_config}, "<run>")
        lockstep = ConsumerLockstep(spec, profile, recorded=recorded)
        lockstep.open(root, *sut)
        return lockstep

    def shrink_passes(self) -> Sequence[ShrinkPass]:
        return (drop_batches,)  # a delivery with its completion

    def simpler_ops(self, op: Any) -> Iterable[Any]:
        if isinstance(op, ProduceBatch):
            for messages in simpler_messages(tuple(Message(p) for p in op.payloads)):
                yield dataclasses.replace(op, payloads=tuple(m.payload for m in messages))
        elif isinstance(op, Complete) and op.refused_positions:
            yield dataclasses.replace(op, refused_positions=())

    def sweep_fields(self, result: Any) -> Mapping[str, Any]:
        """The consumer profile's own knobs (canonical JSON, no description)."""
        config = result.spec.profile_config
        knobs = {k: v for k, v in config.items() if k != "description"}
        return {"consumer_config": json.dumps(knobs, sort_keys=True, separators=(",", ":"))}


#: The consumer layer (registered by ``conformance.layers``).
CONSUMER_LAYER = ConsumerLayer()
