"""The ``Layer`` interface: what differs between the layers rmqsim checks (the queue, the push
consumer, ...), so that one generic harness runs, replays, shrinks, gates and sweeps them all.

A run is a typed value, ``RunSpec``: the layer, the profile (its name and its resolved JSON
form), the seed, the implementation, the step budget, the crash rate and mode, the check
cadence and what a trace header records besides (versions, a shrink's origin, ...). A trace
header is ``spec.to_header()``; parsing one gives ``RunSpec.from_header(header)`` back.

A layer (one object, registered with ``register_layer``) supplies:

- **profiles**: ``profile_names()`` (names -> profile) and ``resolve_profile(name, seed)``:
  the profile's JSON form and the queue configuration it runs with (a swarm profile draws
  its own per seed); ``gate_profiles``: the ones the gate runs by default;
- **an operation vocabulary and its JSON form**: ``codec``, a ``StepCodec`` of four
  functions (encode/decode a step's op and outcome; decoders raise ``ValueError`` or
  ``TypeError`` on bad input), and ``check_trace(trace)``: what one line cannot say alone
  (raise ``TraceFormatError`` naming the line);
- **a simulation**: ``simulate(spec, lockstep)`` feeds the steps of ``spec``'s seed to
  ``lockstep.execute`` (each outcome is the model's; later choices may depend on it);
- **a lockstep**: ``open_lockstep(spec, root, recorded=...)`` opens the model and the
  implementation in the scratch directory ``root`` and returns a ``LayerLockstep``:
  ``execute(step) -> Outcome`` (the model's; raises ``Divergence`` on a mismatch, or
  ``BadRecordedStep`` when ``recorded`` and the step cannot be what a trace recorded),
  ``finish()`` (the final check after the last step, not called when the spec turns it
  off: ``RunSpec.final_check``; ``Divergence``), ``close()`` (always
  called), ``records`` (a ``StepRecord`` per executed step, the trace's lines), ``stats``,
  ``state_digest()`` (the model's final state, for the end line), ``last_crash()`` (the
  crash record of the last step, if a crash fired in it: a replay's crash flips),
  ``fault_points`` and ``fault_log`` (crash points passed; empty if the layer has none);
  ``impl_name(impl)``: the name a header records for ``--impl`` (``BadImplError`` if this
  layer cannot run it);
- **anomaly names**: ``anomalies``, the names its divergences may carry (besides the
  generic ``trace-mismatch``, ``hang`` and ``unrecoverable``), each with the one line
  that says what it means (the failure report's first line);
- **extra shrink passes**: ``shrink_passes()``, functions from a list of steps to smaller
  candidate lists, tried after the generic passes (drop actors, chunks, single steps);
- **sweep-row fields**: ``sweep_fields(result)``, the layer's own columns of a sweep row.

What a layer adds to the gate beyond its runs (a coverage map, runs or crash cases steered
at what the profiles left empty, its entries of the summary) is its ``GateHooks``,
registered apart (``register_gate_hooks``; the built-in layers' by
``conformance.layers.gate``): the gate calls every registered layer's and names none.

The registry (``register_layer``, ``layer_for_profile``, ``layer_for_header``,
``registered_layers``) is filled with the built-in layers when
``rmqsim.conformance.layers`` is imported (``conformance.running.run`` does); a layer defined
elsewhere (a test, a plugin) registers itself. A header of a built-in layer whose traces
predate the ``layer`` header field (queue, consumer: ``implicit_in_header``) does not name
its layer, so that their traces stay byte-identical; ``claims_header`` recognises it.
Every other layer's headers name it (``"layer": name``).
"""

from __future__ import annotations

import dataclasses
import functools
import platform
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rmqsim.conformance.crashing.crash_record import ArmedCrash, CrashRecord, CrashRecordError
from rmqsim.conformance.running.lockstep import PointPass, Stats, StepRecord
from rmqsim.conformance.running.trace import FORMAT, FORMAT_VERSION, Trace
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.queue.profiles import UnknownProfileError

__all__ = [
    "CRASH_MODES",
    "NO_GATE_HOOKS",
    "VERSIONED_PACKAGES",
    "BadRecordedStep",
    "FuzzableLayer",
    "GateHooks",
    "HeaderError",
    "Layer",
    "LayerLockstep",
    "OperationCrashes",
    "ResolvedProfile",
    "RunSpec",
    "ShrinkPass",
    "ShrinkSearch",
    "StepCodec",
    "UnknownLayerError",
    "gate_hooks",
    "git_commit",
    "layer_for_header",
    "layer_for_profile",
    "layer_named",
    "register_gate_hooks",
    "register_layer",
    "registered_layers",
    "unregister_layer",
    "versions",
]

#: ``RunSpec.crash_mode`` values: crash in process, or SIGKILL a child process.
CRASH_MODES = ("inprocess", "process")


#: Packages whose versions go into a trace header (they decide behaviour).
VERSIONED_PACKAGES = ("rmqsim", "rocksdict", "simpy", "hypothesis")


@functools.cache
def versions() -> dict[str, str]:
    """Versions of Python and the packages that decide a run's behaviour."""
    found = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


@functools.cache
def git_commit() -> str | None:
    """The commit of the rmqsim checkout, when it is one (None otherwise)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and len(commit) == 40 else None


class HeaderError(ValueError):
    """A trace header's field is missing or wrong; ``str()`` names the field."""


class UnknownLayerError(LookupError):
    """No registered layer has the name, or recognises the header, asked for."""


class BadRecordedStep(Exception):
    """A recorded step (``open_lockstep(..., recorded=True)``) cannot be what a trace
    recorded: bad input, reported as a ``TraceFormatError`` naming the step's line."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True, slots=True)
class StepCodec:
    """A layer's operations and outcomes in JSON. Module-level functions, so that a trace
    rendered later (``run_result.TraceRender``) pickles with its codec."""

    encode_op: Callable[[Any], Any]
    decode_op: Callable[[object], Any]
    encode_outcome: Callable[[Outcome], Any]
    decode_outcome: Callable[[object], Outcome]


@dataclass(frozen=True, slots=True)
class ResolvedProfile:
    """A profile as one seed runs it: its name, its JSON form (``profile_config`` of the
    header) and the configuration of the queue it runs on (``config``)."""

    name: str
    profile_config: Mapping[str, Any]
    config: Mapping[str, Any]


class ShrinkSearch(Protocol):
    """What a shrink pass gets of the search (``conformance.searching.shrink``): ``fails(steps)``
    runs a candidate and returns it (cut after its divergence) if it fails as wanted,
    else None; ``best`` is the last run that did (a ``RunResult``)."""

    best: Any

    def fails(self, steps: tuple[Step[Any], ...]) -> tuple[Step[Any], ...] | None: ...


#: A layer's shrink pass: the steps it ends with, having tried candidates on the search.
ShrinkPass = Callable[[ShrinkSearch, tuple[Step[Any], ...]], tuple[Step[Any], ...]]


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run: what its trace header records (``to_header``/``from_header``), plus how it
    is checked (``check_every``, not recorded). Fields at their default are not written,
    so that a header holds what it held before each field existed."""

    layer: str
    profile: str
    seed: int
    impl: str
    #: The profile as this seed runs it, and the queue configuration (JSON forms).
    profile_config: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    #: The step budget (None: the profile's).
    steps: int | None = None
    #: The probability of arming a crash before each state-changing operation.
    crash_rate: float = 0.0
    #: ``inprocess``, or ``process`` (the SUT in a child, SIGKILLed at crashes).
    crash_mode: str = "inprocess"
    #: Compare the whole state at least every this many state changes (not recorded).
    check_every: int = field(default=1, compare=False)
    #: A crash armed in the first open (a crash-sweep case).
    open_crash: ArmedCrash | None = None
    #: Whether the run ends with the layer's final check (a shrunk consumer trace: not).
    final_check: bool = True
    #: The command that reproduces the run when not ``rmqsim run`` (fuzz, corpus).
    repro: str | None = None
    #: The implementation a corpus trace was found on.
    found_on: str | None = None
    #: The step count of the trace a shrunk one came from.
    shrunk_from_steps: int | None = None
    #: Whether the run is a crash-sweep case (``crash_sweep.case_inputs``: the sweep's and
    #: the steered cases; recorded only when true, a shrunk case's header keeps it).
    crash_sweep: bool = False
    #: Versions and commit of the code that ran it (default: this code's).
    versions: Mapping[str, str] = field(default_factory=lambda: versions())
    git_commit: str | None = field(default_factory=lambda: git_commit())
    #: Whether ``to_header`` names the layer (False for layers whose headers predate the
    #: field: ``Layer.implicit_in_header``).
    named_in_header: bool = True

    def __post_init__(self) -> None:
        assert self.crash_mode in CRASH_MODES, self.crash_mode
        assert 0.0 <= self.crash_rate <= 1.0, self.crash_rate
        assert self.check_every >= 1, self.check_every

    def replace(self, **changes: Any) -> RunSpec:
        """This spec with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def to_header(self) -> dict[str, Any]:
        """The trace header line of this run (a dict; ``trace.dumps`` writes it)."""
        header: dict[str, Any] = {
            "type": "header",
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "seed": self.seed,
            "profile": self.profile,
            "profile_config": dict(self.profile_config),
            "config": dict(self.config),
            "impl": self.impl,
            "steps": self.steps,
            "versions": dict(self.versions),
            "git_commit": self.git_commit,
        }
        optional = {
            "layer": self.layer if self.named_in_header else None,
            "crash_rate": self.crash_rate or None,
            "crash_mode": None if self.crash_mode == "inprocess" else self.crash_mode,
            "open_crash": None if self.open_crash is None else self.open_crash.to_json(),
            "final_check": None if self.final_check else False,
            "repro": self.repro,
            "found_on": self.found_on,
            "shrunk_from_steps": self.shrunk_from_steps,
            "crash_sweep": self.crash_sweep or None,
        }
        header.update({key: value for key, value in optional.items() if value is not None})
        return header

    @classmethod
    def from_header(cls, header: Mapping[str, Any], *, layer: Layer | None = None) -> RunSpec:
        """The spec a (parsed) trace header records; ``HeaderError`` naming a bad field.
        ``layer``: the header's (default: ``layer_for_header``)."""
        layer = layer or layer_for_header(header)
        crash_rate = _field(header, "crash_rate", (int, float), 0.0)
        crash_mode = _field(header, "crash_mode", str, "inprocess")
        if crash_mode not in CRASH_MODES:
            raise HeaderError(f"header crash_mode must be one of {', '.join(CRASH_MODES)}")
        if not 0.0 <= crash_rate <= 1.0:
            raise HeaderError("header crash_rate must be in [0, 1]")
        open_crash = _field(header, "open_crash", dict, None)
        try:
            open_crash = None if open_crash is None else ArmedCrash.from_json(open_crash)
        except CrashRecordError:
            raise HeaderError("header open_crash must be {point, hit}") from None
        final_check = header.get("final_check", True)
        if type(final_check) is not bool:
            raise HeaderError("header final_check must be true or false")
        recorded_versions = header.get("versions")
        return cls(
            layer=layer.name,
            profile=_field(header, "profile", str, None),
            seed=_field(header, "seed", int, None),
            impl=_field(header, "impl", str, ""),
            profile_config=_field(header, "profile_config", dict, {}),
            config=_field(header, "config", dict, {}),
            steps=_field(header, "steps", int, None),
            crash_rate=crash_rate,
            crash_mode=crash_mode,
            open_crash=open_crash,
            final_check=final_check,
            repro=_field(header, "repro", str, None),
            found_on=_field(header, "found_on", str, None),
            shrunk_from_steps=_field(header, "shrunk_from_steps", int, None),
            crash_sweep=_field(header, "crash_sweep", bool, False),
            versions=recorded_versions if isinstance(recorded_versions, dict) else {},
            git_commit=header.get("git_commit"),
            named_in_header="layer" in header,
        )


def _field(header: Mapping[str, Any], key: str, kind: Any, default: Any) -> Any:
    """``header[key]`` checked to be a ``kind`` (``bool`` is no ``int``); ``default`` when
    absent or null, ``HeaderError`` when wrong (or absent with no default)."""
    value = header.get(key)
    if value is None:
        if default is None and key in ("profile", "seed"):
            raise HeaderError(f"header field {key!r} is missing")
        return default
    is_bool = isinstance(value, bool)
    if not isinstance(value, kind) or (is_bool and kind is not bool):
        raise HeaderError(f"header field {key!r} is wrong: {value!r:.80}")
    return value


@runtime_checkable
class LayerLockstep(Protocol):
    """One run in progress: the model and the implementation of a layer in lockstep."""

    @property
    def records(self) -> list[StepRecord]:
        """A record per executed step, the diverging one included: the trace's lines."""
        ...

    @property
    def stats(self) -> Stats:
        """The run's counters (``steps`` counts the executed steps)."""
        ...

    def execute(self, step: Step[Any]) -> Outcome:
        """Apply ``step`` to both sides; the model's outcome, or ``Divergence``."""
        ...

    def finish(self) -> None:
        """The final check after the last step (``Divergence``)."""
        ...

    def close(self) -> None:
        """Release both sides (always called, after a divergence too)."""
        ...

    def state_digest(self) -> str:
        """The digest of the model's state (the end line's ``state_digest``)."""
        ...

    def last_crash(self) -> CrashRecord | None:
        """The crash record of the last executed step, if a crash fired in it."""
        ...

    @property
    def fault_points(self) -> Mapping[str, int]:
        """How often each crash point (``kind:point``) was passed."""
        ...

    @property
    def fault_log(self) -> list[PointPass]:
        """Every crash point passed, in order (when the run logs them)."""
        ...


class OperationCrashes:
    """A base for a layer's lockstep whose crashes are operations of its simulation, never
    armed at an implementation's fault points: the ``LayerLockstep`` members about armed
    crashes, all empty."""

    def last_crash(self) -> CrashRecord | None:
        return None

    @property
    def fault_points(self) -> Mapping[str, int]:
        return {}

    @property
    def fault_log(self) -> list[PointPass]:
        return []


@runtime_checkable
class Layer(Protocol):
    """What one layer supplies to the generic harness (see the module's docstring)."""

    @property
    def name(self) -> str:
        """The layer's name (``RunSpec.layer``; a header's ``layer`` field)."""
        ...

    @property
    def implicit_in_header(self) -> bool:
        """Whether its headers do not name it (queue, consumer: older than the field)."""
        ...

    @property
    def anomalies(self) -> Mapping[str, str]:
        """The anomaly names its divergences may carry, besides the generic ones, each
        with what it means."""
        ...

    @property
    def gate_profiles(self) -> tuple[str, ...]:
        """The profiles the gate runs by default, in order."""
        ...

    @property
    def codec(self) -> StepCodec:
        """Its operations and outcomes in JSON."""
        ...

    @property
    def crash_modes(self) -> tuple[str, ...]:
        """The crash modes its runs take (``RunSpec.crash_mode``)."""
        ...

    @property
    def supports_crash_rate(self) -> bool:
        """Whether its simulation arms crashes at ``RunSpec.crash_rate`` (if not, a rate
        given is not used, nor recorded)."""
        ...

    @property
    def final_check_needs_whole_run(self) -> bool:
        """Whether its final check needs the whole run (a cut trace, a shrink candidate,
        would fail it on any implementation: they run without it)."""
        ...

    @property
    def crash_sweep_refusal(self) -> str | None:
        """Why ``rmqsim crash-sweep`` does not apply to its profiles (a message with a
        ``{profile}`` field), or None when it does."""
        ...

    def profile_names(self) -> Sequence[str]:
        """Its profiles' names."""
        ...

    def resolve_profile(self, name: str, seed: int) -> ResolvedProfile:
        """Profile ``name`` as ``seed`` runs it."""
        ...

    def claims_header(self, header: Mapping[str, Any]) -> bool:
        """Whether a header that names no layer is this (implicit) layer's."""
        ...

    def check_trace(self, trace: Trace) -> None:
        """What one line cannot say alone; ``TraceFormatError`` naming the line."""
        ...

    def resolve_impl(self, impl: Any, *, for_replay: bool) -> tuple[str, Any]:
        """``(name, sut)`` for ``--impl`` (a name or a factory): the name a header records,
        and what ``open_lockstep`` opens (``BadImplError`` if it cannot be used)."""
        ...

    def simulate(self, spec: RunSpec, lockstep: LayerLockstep) -> None:
        """Feed the steps of ``spec``'s seed to ``lockstep`` (one it opened)."""
        ...

    def open_lockstep(
        self, spec: RunSpec, root: Path, *, sut: Any, recorded: bool, log_faults: bool
    ) -> LayerLockstep:
        """Open model and ``sut`` (from ``resolve_impl``) in the scratch directory
        ``root``; ``recorded``: the steps will be a trace's (``BadRecordedStep``)."""
        ...

    def shrink_passes(self) -> Sequence[ShrinkPass]:
        """Its own shrink passes, run after dropping actors and topics."""
        ...

    def simpler_ops(self, op: Any) -> Iterable[Any]:
        """Simpler variants of one operation, most aggressive first (may be none)."""
        ...

    def sweep_fields(self, result: Any) -> Mapping[str, Any]:
        """The layer's own columns of a sweep row for ``result`` (a ``RunResult``: typed
        ``Any`` here, as ``run_result`` builds on this module)."""
        ...


@runtime_checkable
class FuzzableLayer(Layer, Protocol):
    """A layer whose runs are a simulation of actors that ``rmqsim fuzz`` can steer
    (``conformance.searching.fuzz_layers``): it hands out the simulation instead of running it."""

    def fuzz_simulation(self, spec: RunSpec, lockstep: LayerLockstep) -> Any:
        """The simulation ``simulate`` runs for ``spec`` on ``lockstep`` (one it opened),
        not yet run: an object with an ``rng`` (a ``random.Random``: the fuzzer replaces it
        by hypothesis's draws), a ``draining`` flag (True once its drain began; the fuzzer
        stops steering there) and ``run(execute)``."""
        ...


class GateHooks:
    """What a layer adds to the gate beyond its profile runs (``conformance.running.gate``),
    each a no-op here: a layer's hooks (registered with ``register_gate_hooks``) override
    the ones it needs. The gate calls them for every registered layer, so it never names
    a layer: the queue maps its runs' coverage and steers crash cases into the crash cells
    no sweep armed; the streams steer runs at the stream cells the profiles left empty.

    A result here is a ``RunResult``, a sweep a ``SweepResult``."""

    def map_run(self, result: Any) -> Any:
        """``result`` (a finished profile run of this layer, its trace still held) as the
        gate keeps it: e.g. with its coverage map (the trace is then dropped if it passed)."""
        return result

    def summary(
        self, results: Sequence[Any], sweeps: Sequence[Any], steered: Sequence[Any]
    ) -> Mapping[str, Any]:
        """This layer's entries of the gate's ``summary.json`` (key -> JSON value), from
        every profile run, crash sweep and steered crash case of the gate."""
        return {}

    def summary_lines(self, summary: Mapping[str, Any]) -> list[str]:
        """The printed summary's lines about this layer's entries of ``summary`` (the
        written ``summary.json``, so that the two cannot disagree)."""
        return []

    def steering_runs(
        self, runs: Callable[[], Sequence[Any]], first_seed: int
    ) -> Iterable[tuple[str, int]]:
        """(profile, seed) of runs to add after the profile runs, each chosen when the one
        before it has finished: ``runs()`` is this layer's runs so far; seeds from
        ``first_seed`` on are beyond the gate's. The gate stops at a failing one."""
        return ()

    def steer_crashes(
        self, results: Sequence[Any], sweeps: Sequence[Any], plan: Any, *, pool: Any,
        on_group: Callable[[Any], None] | None,
    ) -> Sequence[Any]:
        """Crash cases beyond the crash sweeps (a ``SweepResult`` per (profile, seed)),
        chosen from the gate's profile ``results`` and ``sweeps``; ``plan`` has the run's
        ``impl``, ``out``, ``steps`` and ``crash_rate``; with a ``pool``, its tasks;
        ``on_group`` hears each result."""
        return ()


#: What a layer without registered hooks adds to the gate: nothing.
NO_GATE_HOOKS = GateHooks()
_GATE_HOOKS: dict[str, GateHooks] = {}


def register_gate_hooks(layer_name: str, hooks: GateHooks) -> GateHooks:
    """Give the layer called ``layer_name`` its gate hooks (again: replaces them)."""
    _GATE_HOOKS[layer_name] = hooks
    return hooks


def gate_hooks(layer: Layer) -> GateHooks:
    """``layer``'s gate hooks (``NO_GATE_HOOKS`` when none were registered)."""
    return _GATE_HOOKS.get(layer.name, NO_GATE_HOOKS)


_LAYERS: dict[str, Layer] = {}


def register_layer(layer: Layer) -> Layer:
    """Add ``layer`` to the registry (again: replaces the one of that name); returns it.
    Its profile names must not be another layer's."""
    taken = {
        name: other.name
        for other in _LAYERS.values()
        if other.name != layer.name
        for name in other.profile_names()
    }
    clash = sorted(set(layer.profile_names()) & set(taken))
    if clash:
        raise ValueError(
            f"layer {layer.name!r}: profile {clash[0]!r} is layer {taken[clash[0]]!r}'s"
        )
    _LAYERS[layer.name] = layer
    return layer


def unregister_layer(name: str) -> None:
    """Remove the layer called ``name`` from the registry (a test's layer, at its end)."""
    _LAYERS.pop(name, None)


def registered_layers() -> tuple[Layer, ...]:
    """Every registered layer, in the order registered."""
    return tuple(_LAYERS.values())


def layer_named(name: str) -> Layer:
    """The registered layer called ``name``; ``UnknownLayerError`` otherwise."""
    try:
        return _LAYERS[name]
    except KeyError:
        known = ", ".join(_LAYERS)
        raise UnknownLayerError(f"unknown layer {name!r:.80} (known: {known})") from None


def layer_for_profile(profile: str) -> Layer:
    """The layer that has the profile ``profile``; ``UnknownProfileError`` (a
    ``ProfileError``, listing every layer's profiles) otherwise."""
    for layer in _LAYERS.values():
        if profile in layer.profile_names():
            return layer
    known = ", ".join(name for layer in _LAYERS.values() for name in layer.profile_names())
    raise UnknownProfileError(f"unknown profile {profile!r}; known profiles: {known}")


def layer_for_header(header: Mapping[str, Any]) -> Layer:
    """The layer whose run a trace header records: the one it names (``"layer"``), else
    the first implicit layer that claims it (``claims_header``)."""
    named = header.get("layer")
    if named is not None:
        if not isinstance(named, str) or named not in _LAYERS:
            known = ", ".join(_LAYERS)
            raise UnknownLayerError(f"header names an unknown layer {named!r:.80} (known: {known})")
        return _LAYERS[named]
    for layer in _LAYERS.values():
        if layer.implicit_in_header and layer.claims_header(header):
            return layer
    raise UnknownLayerError("no layer recognises the trace header")
