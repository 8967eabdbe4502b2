"""The storage layer (docs/STORAGE.md "The storage contract"): a message store (our commit
log through ``impl.store`` by default, or a user's, or a protocol server such as the real
RocketMQ store's driver) checked against ``model.store`` by ``conformance.store``, driven by
``scenarios.store.sim``. Its traces' headers name the layer."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.layer import (
    LayerLockstep,
    ResolvedProfile,
    RunSpec,
    ShrinkPass,
    StepCodec,
)
from rmqsim.conformance.running.trace import Trace, TraceFormatError
from rmqsim.conformance.store.check import STORE_ANOMALIES
from rmqsim.conformance.store.run import DEFAULT_STORE_IMPL, StoreLockstep, resolve_store_impl
from rmqsim.model.store.api import StoreConfig
from rmqsim.scenarios.queue.profiles import ProfileError
from rmqsim.scenarios.store.ops import (
    Get,
    Put,
    store_op_from_json,
    store_op_to_json,
    store_outcome_from_json,
    store_outcome_to_json,
)
from rmqsim.scenarios.store.profiles import STORE_GATE_PROFILES, STORE_PROFILES, StoreProfile
from rmqsim.scenarios.store.sim import StoreSimulation

__all__ = ["STORE_LAYER", "StoreLayer", "store_profile_of"]


def store_profile_of(header: Mapping[str, Any], path: Path | str) -> StoreProfile:
    """The profile a storage trace's header records, checked (a bad value is the trace's
    error: file and line 1)."""
    try:
        profile = StoreProfile.from_json(header.get("profile_config"))
        StoreConfig(**profile.store_config())
    except (ProfileError, ValueError, TypeError) as exc:
        raise TraceFormatError(path, 1, f"header profile_config: {exc}") from None
    return profile


class StoreLayer:
    """The storage layer (see the module's docstring)."""

    name = "store"
    implicit_in_header = False
    #: Its runs take a message store, not a queue: a queue's gate does not run them.
    above_queue = False
    #: ``rmqsim fuzz`` runs examples this many times its profile's steps long: retention
    #: (and the bugs in its minimum) needs simulated time to pass (``stateful.default_steps``).
    fuzz_steps_factor = 4
    anomalies: Mapping[str, str] = MappingProxyType(STORE_ANOMALIES)
    gate_profiles = STORE_GATE_PROFILES
    codec = StepCodec(
        store_op_to_json, store_op_from_json, store_outcome_to_json, store_outcome_from_json
    )
    crash_modes = ("inprocess", "process")
    supports_crash_rate = False
    final_check_needs_whole_run = False
    crash_sweep_refusal = (
        "crash-sweep runs queue profiles; {profile!r} is a storage profile (its runs crash "
        "the store themselves: rmqsim run --profile {profile})"
    )

    def profile_names(self) -> Sequence[str]:
        return tuple(STORE_PROFILES)

    def resolve_profile(self, name: str, seed: int) -> ResolvedProfile:
        profile = STORE_PROFILES[name]
        return ResolvedProfile(name, profile.to_json(), profile.store_config())

    def claims_header(self, header: Mapping[str, Any]) -> bool:
        return False  # its headers name it

    def check_trace(self, trace: Trace) -> None:
        store_profile_of(trace.header, trace.path)

    def resolve_impl(self, impl: Any, *, for_replay: bool) -> tuple[str, Any]:
        name, factory = resolve_store_impl(impl)
        return name, (impl, factory)

    def simulate(self, spec: RunSpec, lockstep: LayerLockstep) -> None:
        self.fuzz_simulation(spec, lockstep).run(lockstep.execute)

    def fuzz_simulation(self, spec: RunSpec, lockstep: LayerLockstep) -> StoreSimulation:
        assert isinstance(lockstep, StoreLockstep), lockstep
        return StoreSimulation(lockstep.profile, spec.seed, spec.steps)

    def open_lockstep(
        self, spec: RunSpec, root: Path, *, sut: Any, recorded: bool, log_faults: bool
    ) -> LayerLockstep:
        profile = store_profile_of({"profile_config": spec.profile_config}, "<run>")
        impl, factory = sut
        if spec.crash_mode == "process":  # a Python store behind the reference server
            from rmqsim.conformance.running.process_sut import process_factory

            factory = process_factory(DEFAULT_STORE_IMPL if impl == DEFAULT_IMPL else impl)
        lockstep = StoreLockstep(spec, profile, factory, root)
        lockstep.open()
        return lockstep

    def shrink_passes(self) -> Sequence[ShrinkPass]:
        return ()

    def simpler_ops(self, op: Any) -> Iterable[Any]:
        """A put of fewer bodies (the first, then each alone) and shorter bodies; a get of
        one body."""
        if isinstance(op, Put) and len(op.bodies) > 1:
            yield dataclasses.replace(op, bodies=op.bodies[:1])
            for body in op.bodies[1:]:
                yield dataclasses.replace(op, bodies=(body,))
        if isinstance(op, Put) and any(len(body) > 1 for body in op.bodies):
            yield dataclasses.replace(op, bodies=tuple(body[:1] for body in op.bodies))
        if isinstance(op, Get) and op.max_count > 1:
            yield dataclasses.replace(op, max_count=1)

    def sweep_fields(self, result: Any) -> Mapping[str, Any]:
        """The storage profile's own knobs (canonical JSON, no description)."""
        config = result.spec.profile_config
        knobs = {k: v for k, v in config.items() if k != "description"}
        return {"consumer_config": json.dumps(knobs, sort_keys=True, separators=(",", ":"))}


#: The storage layer (registered by ``conformance.layers``).
STORE_LAYER = StoreLayer()
