"""The stream layer (docs/STREAM.md): Milvus-style message streams (``impl.stream`` by
default) over a queue (``impl.RocksMQ`` by default), checked against ``model.stream`` and
the properties of ``conformance.stream.check``, driven by ``scenarios.stream.sim``. The
lockstep is ``conformance.stream.run.StreamLockstep``. Its traces' headers name the layer.

``--impl`` names a stream factory (``factory(queue=...) -> StreamFactory``; ``stream`` and
``stream-threaded`` are ours; a stream server, ``exec:COMMAND``, brings its own queue), or
a queue factory, under our streams. ``--crash-mode process`` serves it through the wire
protocol's reference server (the streams and their queue, or the queue alone, in a child
process that a crash SIGKILLs)."""

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
from rmqsim.conformance.running.trace import Trace
from rmqsim.conformance.stream.check import STREAM_ANOMALIES
from rmqsim.conformance.stream.run import (
    StreamLockstep,
    check_stream_trace,
    resolve_stream_impl,
    stream_profile_of,
)
from rmqsim.conformance.stream.shrink import drop_idle_consumes, drop_retention
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.stream.ops import (
    Broadcast,
    Produce,
    Seek,
    stream_op_from_json,
    stream_op_to_json,
    stream_outcome_from_json,
    stream_outcome_to_json,
)
from rmqsim.scenarios.stream.profiles import STREAM_PROFILES, resolve_stream
from rmqsim.scenarios.stream.sim import StreamSimulation

__all__ = ["STREAM_GATE_PROFILES", "STREAM_LAYER", "StreamLayer"]

#: The stream profiles the gate runs.
STREAM_GATE_PROFILES = ("stream", "stream-crashy", "stream-seek", "stream-swarm", "stream-args")


class StreamLayer:
    """The stream layer (see the module's docstring)."""

    name = "stream"
    implicit_in_header = False
    anomalies: Mapping[str, str] = MappingProxyType(STREAM_ANOMALIES)
    gate_profiles = STREAM_GATE_PROFILES
    codec = StepCodec(
        stream_op_to_json, stream_op_from_json, stream_outcome_to_json, stream_outcome_from_json
    )
    crash_modes = ("inprocess", "process")
    supports_crash_rate = False
    final_check_needs_whole_run = False
    crash_sweep_refusal = (
        "crash-sweep runs queue profiles; {profile!r} is a stream profile (its runs crash "
        "the queue themselves: rmqsim run --profile {profile})"
    )

    def profile_names(self) -> Sequence[str]:
        return tuple(STREAM_PROFILES)

    def resolve_profile(self, name: str, seed: int) -> ResolvedProfile:
        profile = resolve_stream(STREAM_PROFILES[name], seed)
        config = dataclasses.asdict(MQConfig(**profile.config))
        return ResolvedProfile(name, profile.to_json(), config)

    def claims_header(self, header: Mapping[str, Any]) -> bool:
        return False  # its headers name it

    def check_trace(self, trace: Trace) -> None:
        check_stream_trace(trace)

    def resolve_impl(self, impl: Any, *, for_replay: bool) -> tuple[str, Any]:
        name, sut = resolve_stream_impl(impl)
        return name, (impl, sut)

    def simulate(self, spec: RunSpec, lockstep: LayerLockstep) -> None:
        self.fuzz_simulation(spec, lockstep).run(lockstep.execute)

    def fuzz_simulation(self, spec: RunSpec, lockstep: LayerLockstep) -> StreamSimulation:
        assert isinstance(lockstep, StreamLockstep), lockstep
        return StreamSimulation(lockstep.profile, spec.seed, spec.steps)

    def open_lockstep(
        self, spec: RunSpec, root: Path, *, sut: Any, recorded: bool, log_faults: bool
    ) -> LayerLockstep:
        profile = stream_profile_of({"profile_config": spec.profile_config}, "<run>")
        impl, pair = sut
        if spec.crash_mode == "process":  # through the reference server, SIGKILLed at crashes
            from rmqsim.conformance.running.process_sut import process_factory

            served = "stream" if impl == DEFAULT_IMPL else impl
            pair = resolve_stream_impl(process_factory(served))[1]
        lockstep = StreamLockstep(spec, profile)
        lockstep.open(root, pair)
        return lockstep

    def shrink_passes(self) -> Sequence[ShrinkPass]:
        return (drop_retention, drop_idle_consumes)

    def simpler_ops(self, op: Any) -> Iterable[Any]:
        """A pack of fewer messages (the first half, then each message alone); a seek to
        lower queue ids (1, then half), so that the writes before it can go too."""
        if isinstance(op, Produce | Broadcast) and len(op.msgs) > 1:
            yield dataclasses.replace(op, msgs=op.msgs[: len(op.msgs) // 2])
            for msg in op.msgs:
                yield dataclasses.replace(op, msgs=(msg,))
        elif isinstance(op, Seek) and any(queue_id > 1 for _, queue_id, _ in op.positions):
            for lower in (lambda queue_id: 1, lambda queue_id: max(1, queue_id // 2)):
                positions = tuple((c, lower(q), ts) for c, q, ts in op.positions)
                yield dataclasses.replace(op, positions=positions)

    def sweep_fields(self, result: Any) -> Mapping[str, Any]:
        """The stream profile's own knobs (canonical JSON, no description)."""
        config = result.spec.profile_config
        knobs = {k: v for k, v in config.items() if k != "description"}
        return {"consumer_config": json.dumps(knobs, sort_keys=True, separators=(",", ":"))}


#: The stream layer (registered by ``conformance.layers``).
STREAM_LAYER = StreamLayer()
