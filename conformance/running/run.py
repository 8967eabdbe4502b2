"""The generic runner: one entry point per verb, for every layer (``conformance.layer``).

- ``run(spec)``: run a ``RunSpec``'s simulation in lockstep (``run_seed`` builds the spec
  of a profile and a seed);
- ``replay(trace)``: re-execute a trace's recorded steps; every recorded outcome must
  recur, and the final state the end line records;
- ``run_steps(header, steps)``: execute steps as they stand, no outcome expected (a
  shrink candidate: ``conformance.searching.shrink``).

Each asks the registry for the layer (``layer_for_profile``, ``layer_for_header``) and
never which layer it holds. Everything the trace holds is derived from the seed, the
profile and the code; wall time and temporary paths stay out of it, so the same seed gives
a byte-identical trace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import rmqsim.conformance.layers  # noqa: F401 (registers the built-in layers)
from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError, Factory
from rmqsim.conformance.crashing.crash_rate import check_rate
from rmqsim.conformance.layer import (
    CRASH_MODES,
    BadRecordedStep,
    HeaderError,
    Layer,
    LayerLockstep,
    RunSpec,
    UnknownLayerError,
    layer_for_header,
    layer_for_profile,
    layer_named,
    registered_layers,
)
from rmqsim.conformance.running.lockstep import Divergence
from rmqsim.conformance.running.run_result import (
    VERSIONED_PACKAGES,
    CrashFlip,
    RunResult,
    TraceRender,
    build_result,
    check_final_state,
    execute_recorded,
    git_commit,
    versions,
)
from rmqsim.conformance.running.scratch import scratch_dir
from rmqsim.conformance.running.trace import Trace, TraceFormatError, parse_lines, read_trace
from rmqsim.scenarios.queue.ops import Step

if TYPE_CHECKING:  # typing's from Python 3.12
    from typing_extensions import Unpack

__all__ = [
    "VERSIONED_PACKAGES",
    "CrashFlip",
    "RunOptions",
    "RunResult",
    "TraceRender",
    "check_final_state",
    "execute_recorded",
    "git_commit",
    "parse_run_lines",
    "read_run_trace",
    "replay",
    "replay_file",
    "replay_run_trace",
    "replay_trace",
    "run",
    "run_in_lockstep",
    "run_seed",
    "run_steps",
    "spec_for_seed",
    "versions",
]

#: Drives a lockstep: the simulation, a trace's recorded steps, a shrink candidate's.
Drive = Callable[[LayerLockstep], None]


def run_in_lockstep(
    layer: Layer,
    spec: RunSpec,
    sut: Any,
    drive: Drive,
    *,
    workdir: Path | None = None,
    log_faults: bool = False,
    recorded: bool = False,
) -> RunResult:
    """Open ``layer``'s lockstep for ``spec`` on ``sut`` in a fresh scratch directory, run
    ``drive`` on it, then the final check (unless ``spec.final_check`` is off); always
    release both sides, and collect the result."""
    started = time.perf_counter()
    with scratch_dir(workdir=workdir) as tmp:
        lockstep = layer.open_lockstep(
            spec, Path(tmp), sut=sut, recorded=recorded, log_faults=log_faults
        )
        divergence: Divergence | None = None
        try:
            drive(lockstep)
            if spec.final_check:
                lockstep.finish()
        except Divergence as found:
            divergence = found
        finally:
            lockstep.close()
        return build_result(spec, lockstep, divergence, started=started)


def run(
    spec: RunSpec,
    *,
    impl: str | Factory | None = None,
    workdir: Path | None = None,
    log_faults: bool = False,
) -> RunResult:
    """Run ``spec``'s simulation in lockstep and return its result (with every crash point
    passed, if ``log_faults``). ``impl`` (a name or a factory) overrides ``spec.impl``;
    the result's spec records the name the layer gives it."""
    layer = layer_named(spec.layer)
    name, sut = layer.resolve_impl(spec.impl if impl is None else impl, for_replay=False)
    spec = spec.replace(impl=name)

    def simulate(lockstep: LayerLockstep) -> None:
        layer.simulate(spec, lockstep)

    return run_in_lockstep(layer, spec, sut, simulate, workdir=workdir, log_faults=log_faults)


class RunOptions(TypedDict, total=False):
    """``run_seed``'s keyword arguments, each optional (its default in brackets)."""

    #: ``MOD:FACTORY`` or a factory [``DEFAULT_IMPL``].
    impl: str | Factory
    #: The step budget [None: the profile's].
    steps: int | None
    #: Compare the whole state at least every this many state changes [1].
    check_every: int
    #: Where the scratch directory goes [None: ``scratch.scratch_root``'s choice].
    workdir: Path | None
    #: Record every crash point the SUT passes [False].
    log_faults: bool
    #: The probability of arming a crash before each state-changing operation, for the
    #: layers that arm crashes so (``Layer.supports_crash_rate``) [0.0].
    crash_rate: float
    #: ``inprocess``, or ``process``: the SUT in a child process, SIGKILLed at crashes
    #: (``conformance.running.process_sut``; the queue layer's) [``inprocess``].
    crash_mode: str


def spec_for_seed(profile_name: str, seed: int, **options: Any) -> RunSpec:
    """The ``RunSpec`` of profile ``profile_name`` (of whichever layer has it) with
    ``seed``; ``options`` as ``RunOptions``' ``steps``, ``crash_rate``, ``crash_mode``,
    ``check_every``; ``impl`` a name (a factory is named when run). Bad values are
    ``UnknownProfileError``, ``BadImplError`` or ``ValueError``, with their message."""
    layer = layer_for_profile(profile_name)
    crash_mode = options.get("crash_mode", "inprocess")
    if crash_mode not in CRASH_MODES:
        raise BadImplError(
            f"--crash-mode must be one of {', '.join(CRASH_MODES)}, got {crash_mode!r}"
        )
    if crash_mode not in layer.crash_modes:
        takers = [other.name for other in registered_layers() if crash_mode in other.crash_modes]
        named = " and ".join([", ".join(takers[:-1]), takers[-1]] if len(takers) > 1 else takers)
        raise BadImplError(f"--crash-mode {crash_mode} applies to {named} profiles only")
    crash_rate = options.get("crash_rate", 0.0)
    resolved = layer.resolve_profile(profile_name, seed)
    impl = options.get("impl", DEFAULT_IMPL)
    return RunSpec(
        layer=layer.name,
        profile=resolved.name,
        seed=seed,
        impl=impl if isinstance(impl, str) else DEFAULT_IMPL,
        profile_config=resolved.profile_config,
        config=resolved.config,
        steps=options.get("steps"),
        crash_rate=check_rate(crash_rate) if layer.supports_crash_rate else 0.0,
        crash_mode=crash_mode,
        check_every=options.get("check_every", 1),
        named_in_header=not layer.implicit_in_header,
    )


def run_seed(profile_name: str, seed: int, **options: Unpack[RunOptions]) -> RunResult:
    """Run one scenario in lockstep against ``options["impl"]`` and return its result;
    ``RunOptions`` says what each option does. Whichever layer has the profile runs it
    (``--impl`` may name either of the queue's and the consumer's factories: ours
    stands in for the other)."""
    unknown = sorted(set(options) - RunOptions.__optional_keys__)
    if unknown:
        raise TypeError(f"run_seed() got an unexpected keyword argument {unknown[0]!r}")
    spec = spec_for_seed(profile_name, seed, **options)
    return run(
        spec,
        impl=options.get("impl", DEFAULT_IMPL),
        workdir=options.get("workdir"),
        log_faults=options.get("log_faults", False),
    )


def _layer_of(trace: Trace) -> Layer:
    """The layer whose run ``trace`` records; a ``TraceFormatError`` if none is."""
    try:
        return layer_for_header(trace.header)
    except UnknownLayerError as exc:
        raise TraceFormatError(trace.path, 1, str(exc)) from None


def _spec_of(trace: Trace, layer: Layer) -> RunSpec:
    try:
        return RunSpec.from_header(trace.header, layer=layer)
    except HeaderError as exc:
        raise TraceFormatError(trace.path, 1, str(exc)) from None


def _recorded_impl(layer: Layer, trace: Trace, impl: str | Factory | None) -> tuple[str, Any]:
    """``(name, sut)`` of ``impl``, or of the implementation the header names."""
    chosen = impl or trace.header.get("impl") or DEFAULT_IMPL
    try:
        return layer.resolve_impl(chosen, for_replay=True)
    except BadImplError as exc:
        if impl:
            raise
        raise BadImplError(
            f"{trace.path}: the implementation its header names cannot be used ({exc}); "
            "give another with --impl"
        ) from None


def replay(
    trace: Trace,
    *,
    impl: str | Factory | None = None,
    check_every: int = 1,
    workdir: Path | None = None,
) -> RunResult:
    """Re-execute a trace (of any layer) on the model and the SUT; every recorded outcome
    must recur (``execute_recorded``), and the final state the end line records
    (``check_final_state``). ``impl`` overrides the implementation named in the header.

    The trace is self-contained: neither the seed nor the simulation is consulted, so an
    edited or shrunk trace replays as it stands. Its layer checks it first
    (``Layer.check_trace``); a recorded step that cannot be what was recorded
    (``BadRecordedStep``) is a ``TraceFormatError`` naming its line, when its step comes
    (a divergence before it is reported instead: the steps before it are valid)."""
    layer = _layer_of(trace)
    name, sut = _recorded_impl(layer, trace, impl)
    layer.check_trace(trace)
    spec = _spec_of(trace, layer).replace(impl=name, check_every=check_every)
    flipped: list[CrashFlip] = []

    def drive(lockstep: LayerLockstep) -> None:
        execute_recorded(
            trace, lockstep.execute, crash_of=lockstep.last_crash, on_flip=flipped.append
        )

    try:
        result = run_in_lockstep(layer, spec, sut, drive, workdir=workdir, recorded=True)
    except BadRecordedStep as bad:
        raise TraceFormatError(trace.path, trace.steps[bad.index - 1].line, str(bad)) from None
    final_state = trace.end is not None and trace.end.get("state_digest") is not None
    result.notes.extend(flip.describe(final_state) for flip in flipped)
    return check_final_state(result, trace, flipped=bool(flipped))


def run_steps(
    header: Mapping[str, Any], steps: Iterable[Step], *, impl: str | Factory
) -> RunResult:
    """Execute ``steps`` as they stand, with the spec ``header`` records (its
    ``shrunk_from_steps`` kept): a shrinker's candidate. Unlike a replay, no recorded
    outcome is expected (dropping a step changes what later ones return); the model
    decides each outcome.

    A layer whose final check needs the whole run (``final_check_needs_whole_run``: a
    cut trace, without the simulation's drain at the end, fails it on any
    implementation) runs without it: a run that fails only there does not fail here, and
    is not shrunk. Its header says ``"final_check": false``, so that replaying the trace
    skips it too (and passes once the bug is fixed)."""
    layer = layer_for_header(header)
    spec = RunSpec.from_header(header, layer=layer)
    if layer.final_check_needs_whole_run:
        spec = spec.replace(final_check=False)
    name, sut = layer.resolve_impl(impl, for_replay=True)
    candidate = tuple(steps)

    def drive(lockstep: LayerLockstep) -> None:
        for step in candidate:
            lockstep.execute(step)

    return run_in_lockstep(layer, spec.replace(impl=name), sut, drive)


def _decoders(first_line: str | bytes) -> dict[str, Any]:
    """``read_trace``/``parse_lines`` keywords for the vocabulary of the layer whose
    header ``first_line`` holds (none, the queue's defaults, when it holds none: the
    parser then names what is wrong)."""
    try:
        header = json.loads(first_line)
        layer = layer_for_header(header) if isinstance(header, dict) else None
    except (ValueError, RecursionError, UnknownLayerError):
        layer = None
    if layer is None:
        return {}
    return {"decode_op": layer.codec.decode_op, "decode_outcome": layer.codec.decode_outcome}


def _checked(trace: Trace) -> Trace:
    _layer_of(trace).check_trace(trace)
    return trace


def read_run_trace(path: Path | str) -> Trace:
    """The trace file of a run of any layer, parsed with its vocabulary and checked by its
    layer (``Layer.check_trace``). The file is read once, so it may be a pipe."""
    return _checked(read_trace(path, choose_decoders=_decoders))


def parse_run_lines(lines: list[str], path: Path | str = "<memory>") -> Trace:
    """A run's trace lines (of any layer, read from ``path``, which errors name), parsed
    with its vocabulary and checked."""
    return _checked(parse_lines(lines, path, **(_decoders(lines[0]) if lines else {})))


def replay_file(path: Path | str, *, impl: str | Factory | None = None) -> RunResult:
    """Replay the trace file at ``path`` (``read_run_trace``, then ``replay``)."""
    return replay(read_run_trace(path), impl=impl)


def replay_trace(
    trace: Trace,
    *,
    impl: str | Factory | None = None,
    check_every: int = 1,
    workdir: Path | None = None,
) -> RunResult:
    """``replay`` (the older name)."""
    return replay(trace, impl=impl, check_every=check_every, workdir=workdir)


def replay_run_trace(trace: Trace, *, impl: str | Factory | None = None) -> RunResult:
    """``replay`` (the older name)."""
    return replay(trace, impl=impl)
