"""The storage-level crash sweep: cut the power at every write and sync point of a run.

``power_loss_sweep`` takes a queue profile's scenario (the steps ``scenarios.queue.sim``
draws for the seed, executed on the model once to record them), and runs it on a
file-system backend (a factory that accepts ``fs=``, such as ``impl.commitlog:open_queue``)
over a ``conformance.crashing.simdisk.SimDisk``, next to the model (``model.ReferenceMQ``). A first
run without faults numbers every changing file-system call (a *point*; the first open's
are points too); then, for every point and every fault mode of ``simdisk.FAULT_MODES``
(``sync-error`` at sync points only), a *case* re-runs the steps with the disk armed there,
cuts the power (the failed sync's case goes on to the end of its step, then cuts power
losing everything unsynced), reopens the store on the disk the cut left, and checks it:

- ``sync`` promise: the recovered state equals the model's state before the operation in
  flight or after it; after a failed sync, the state after it if the operation returned
  normally (it claimed to be durable);
- ``async`` promise: the recovered state equals ONE of the model's states since the last
  durable point (RocksDB crash test's *expected state*): after the last step that left no
  unsynced byte or entry under ``<store>/commitlog``, every state since, and the state
  after the operation in flight. Anything else (a hole, a torn or foreign message, an id
  or a group position that went back past what was durable) is none of them;
- in both: recovery opens (a refusal is a failure), and a second crash and reopen changes
  nothing.

How the store reaches the disk is a ``DiskAccess``: ``InProcessAccess`` passes the disk as
``fs=`` to a factory in rmqsim's process (the default, ``through="fs"``);
``conformance.crashing.power_fuse.FuseAccess`` (``through="fuse"``) mounts the disk through FUSE and
runs the store as a child process (the wire protocol's server) with its directory on the
mount: the same points, cuts and checks, for a store in any language. The sweep is the
same either way.

A case is repeated from its ``spec`` (``POINT:MODE``); its cut's decisions (``SimDisk.cut``)
are plain data in its result, and ``conformance.crashing.power_trace`` writes it as a trace that
``rmqsim replay`` reproduces (the steps up to the cut; the cut as ``PowerCase.point_in_step``
of the last step, ``run_case(..., in_last_step=True)``). The steps before the cut must
give the model's outcomes (a case whose SUT diverged earlier says so). Cost: case ``i``
replays the steps before its point, so a sweep is quadratic in ``steps``.
"""

from __future__ import annotations

import bisect
import contextlib
import inspect
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from rmqsim.conformance.adapter import BadImplError, FaultHook, load_impl
from rmqsim.conformance.crashing.power_cells import POWER_CELL_KINDS, cell_name, point_kinds
from rmqsim.conformance.crashing.simdisk import (
    FAULT_MODES,
    DiskAccessError,
    PointRecord,
    PowerCut,
    SimDisk,
)
from rmqsim.conformance.running.apply import RUNNER_KINDS, apply_op, exception_text
from rmqsim.conformance.running.lockstep import SimClock
from rmqsim.conformance.running.statediff import MAX_LISTED, clip, diff_states
from rmqsim.impl.commitlog.fs import FileSystem
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import Clock, MessageQueue, MQConfig, State
from rmqsim.scenarios.catalog import queue_profile
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.queue.profiles import resolve
from rmqsim.scenarios.queue.sim import Simulation

__all__ = [
    "DEFAULT_POWER_STEPS",
    "PROMISES",
    "STORE_PATH",
    "SWEEP_GEOMETRY",
    "THROUGH",
    "CaseOutcome",
    "DiskAccess",
    "Geometry",
    "InProcessAccess",
    "PowerCase",
    "PowerFailure",
    "PowerSweepResult",
    "StorageFactory",
    "SweepShape",
    "access_geometry",
    "base_run",
    "disk_access",
    "disk_tree",
    "gate_promise",
    "parse_case",
    "power_loss_sweep",
    "quiet_recovery",
    "record_scenario",
    "run_case",
    "run_case_outcome",
    "storage_factory",
    "takes_geometry",
]

#: What a backend promises after a power cut (module docstring).
PROMISES = ("sync", "async")
#: The default factory of each promise.
DEFAULT_STORAGE_IMPLS = {"sync": "rmqsim.impl.commitlog:open_queue",
                         "async": "rmqsim.impl.commitlog:open_queue_async"}
#: Scenario steps a storage sweep runs by default (cases: points x modes, each replaying).
DEFAULT_POWER_STEPS = 20
#: The store's directory on the simulated disk (it exists, durably, before the first open).
STORE_PATH = "/sim/store"
#: The directory whose files hold the promise (the durable point of ``async``).
DURABLE_DIR = f"{STORE_PATH}/commitlog"
#: How the store reaches the disk: ``fs=`` in process, or a child process through FUSE.
THROUGH = ("fs", "fuse")
#: A store's file sizes, as plain data a backend's ``geometry=`` takes.
Geometry = Mapping[str, int]
#: The file sizes the gate's sweeps choose when the backend lets them (``takes_geometry``):
#: segments of 1 KiB and consume-queue files of 4 entries, so that 8 steps roll segments,
#: write mid-run checkpoints and turn consume-queue files over (docs/STORAGE.md,
#: "Power-loss cells"). Not 512 bytes: a torn write tears at a 512-byte boundary inside
#: the write, and no write into a 512-byte segment crosses one (the CRC mutants lived).
SWEEP_GEOMETRY: Geometry = {"segment_size_bytes": 1024, "cq_entries_per_file": 4}


class StorageFactory(Protocol):
    """A queue factory that also takes the file system to run on."""

    def __call__(
        self, *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None,
        fs: FileSystem,
    ) -> MessageQueue: ...


@runtime_checkable
class DiskAccess(Protocol):
    """How the store under test reaches a simulated disk (module docstring)."""

    #: ``THROUGH``'s name of the way.
    through: str
    #: CPU seconds of the processes the way started (its children), counted so far.
    child_cpu_s: float

    def open(self, disk: SimDisk, config: MQConfig, clock: Clock) -> Any:
        """The store at ``STORE_PATH`` on ``disk``, opened (recovering what is there).
        ``PowerCut`` when the disk lost power during the open."""
        ...

    def release(self, disk: SimDisk) -> None:
        """Nothing reaches ``disk`` any more: the power is gone, or its run is over
        (a child is killed, a mount removed). Idempotent."""
        ...

    def close(self) -> None:
        """Release every disk still in use."""
        ...


class InProcessAccess:
    """The store in rmqsim's process, the disk passed as ``fs=``; ``geometry`` (when not
    None) passed as ``geometry=``, to a factory that takes it (``takes_geometry``)."""

    through = "fs"

    def __init__(self, factory: StorageFactory, geometry: Geometry | None = None) -> None:
        self.factory = factory
        self.child_cpu_s = 0.0
        self.geometry = geometry if takes_geometry(factory) else None

    def open(self, disk: SimDisk, config: MQConfig, clock: Clock) -> Any:
        extra = {} if self.geometry is None else {"geometry": dict(self.geometry)}
        return self.factory(path=Path(STORE_PATH), config=config, clock=clock, faults=None,
                            fs=disk, **extra)

    def release(self, disk: SimDisk) -> None:
        del disk  # the store's objects hold the dead disk; nothing else writes to it

    def close(self) -> None:
        pass


def _as_access(way: DiskAccess | StorageFactory) -> DiskAccess:
    return way if isinstance(way, DiskAccess) else InProcessAccess(way)


def takes_geometry(factory: Callable[..., Any]) -> bool:
    """Whether a storage backend's ``factory`` lets rmqsim choose the file sizes of a new
    store: it names a ``geometry`` keyword (a mapping of ``SWEEP_GEOMETRY``'s keys)."""
    try:
        return "geometry" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def disk_access(impl: str, through: str = "fs", geometry: Geometry | None = None) -> DiskAccess:
    """The way ``impl`` reaches the disk ``through`` names: in process, ``impl`` must be a
    storage backend (``fs=``), given ``geometry`` when it takes one; through FUSE, anything
    the wire protocol's child runs (``MOD:FACTORY``, a built-in name, ``exec:COMMAND``),
    on its own geometry. ``FuseUnavailableError`` (``conformance.crashing.power_fuse``) says why
    FUSE cannot be used here."""
    if through not in THROUGH:
        raise ValueError(f"through must be one of {THROUGH}: {through!r}")
    if through == "fs":
        return InProcessAccess(storage_factory(impl), geometry)
    from rmqsim.conformance.crashing.power_fuse import FuseAccess

    return FuseAccess(impl, STORE_PATH)


def access_geometry(access: DiskAccess) -> dict[str, int] | None:
    """The file sizes ``access`` gives the store it opens (None: the backend's own)."""
    geometry = getattr(access, "geometry", None)
    return None if geometry is None else dict(geometry)


def disk_tree(disk: SimDisk) -> dict[str, bytes | None]:
    """Every directory (None) and file (its bytes) of ``disk``, by path."""
    tree: dict[str, bytes | None] = {}
    pending = ["/"]
    while pending:
        directory = pending.pop()
        tree[directory] = None
        for name in disk.list(directory):
            path = f"{directory.rstrip('/')}/{name}"
            if disk.is_dir(path):
                pending.append(path)
    tree.update(disk.contents())
    return dict(sorted(tree.items()))


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """What one case did (``run_case_outcome``): the problem (None: the promise held),
    the cut's decisions, the point that fired, the disk the reboot found
    (``disk_tree``, before recovery) and the state recovered on it."""

    problem: str | None
    cut: dict[str, Any] | None
    fired: PointRecord | None
    survivor: dict[str, bytes | None] | None = None
    recovered: State | None = None


@dataclass(frozen=True, slots=True)
class PowerCase:
    """Cut (or fail the sync) at ``point`` of step ``step`` (0: the first open), in ``mode``;
    ``point_in_step``: which point of that step (from 1), what a trace records."""

    point: PointRecord
    step: int
    mode: str
    point_in_step: int = 0
    #: What the store does at the point (``power_cells.point_kind``; "" when not known).
    kind: str = ""

    @property
    def spec(self) -> str:
        return f"{self.point.index}:{self.mode}"

    def label(self) -> str:
        p = self.point
        return f"point {p.index} ({p.call} {p.path}, step {self.step}) {self.mode}"


@dataclass(frozen=True, slots=True)
class PowerFailure:
    """A case whose recovery broke the promise: what, and the cut's decisions."""

    case: PowerCase
    problem: str
    cut: dict[str, Any] | None

    def as_json(self) -> dict[str, Any]:
        return {"case": self.case.spec, "label": self.case.label(), "problem": self.problem,
                "cut": self.cut}


@dataclass(slots=True)
class PowerSweepResult:
    """What one storage sweep found."""

    profile: str
    seed: int
    impl: str
    promise: str
    steps: int
    base_problem: str | None = None
    cases: list[PowerCase] = field(default_factory=list)
    failures: list[PowerFailure] = field(default_factory=list)
    #: Cases run, by (call, mode).
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Cases run, by power-loss cell (``power_cells``: ``kind/mode``), and the kinds of
    #: the points the base run made.
    cells: Counter[str] = field(default_factory=Counter)
    kinds: set[str] = field(default_factory=set)
    wall_s: float = 0.0
    #: How the store reached the disk (``THROUGH``), and the CPU seconds of the child
    #: processes it started (through FUSE: the store's).
    through: str = "fs"
    child_cpu_s: float = 0.0
    #: The scenario's config and recorded steps (what a failing case's trace holds).
    config: MQConfig | None = None
    recorded: list[Step] = field(default_factory=list)
    #: Traces written for failing cases (``power_trace.save_failures``), and the shrunk
    #: trace of the first, with its number of steps.
    trace_paths: list[Path] = field(default_factory=list)
    shrunk: tuple[Path, int] | None = None
    #: The file sizes rmqsim chose for the store (None: the backend's own).
    geometry: dict[str, int] | None = None
    #: A gate's steering sweep (``gate_power.steer_power_cells``): a case per empty cell.
    steered: bool = False

    @property
    def label(self) -> str:
        """The sweep's name in the gate's table and summary: its profile (steered)."""
        return f"{self.profile} (steered)" if self.steered else self.profile

    @property
    def ok(self) -> bool:
        return self.base_problem is None and not self.failures


def gate_promise(impl: str) -> str | None:
    """The promise a gate's power-loss sweep holds ``impl`` to: None when it is not a
    storage backend (its factory takes no ``fs=``), else the one it declares
    (``rmqsim_flush``; ``sync``, the full SPEC, when it declares none)."""
    loaded = load_impl(impl)
    return loaded.flush if loaded.layer == "storage" else None


def storage_factory(impl: str) -> StorageFactory:
    """The factory ``impl`` names; it must be a storage backend, accepting ``fs=``
    (BadImplError otherwise)."""
    loaded = load_impl(impl)
    if loaded.layer != "storage":
        raise BadImplError(f"--impl {impl}: a storage sweep needs a factory that accepts fs= "
                           "(a FileSystem, as impl.commitlog:open_queue does)")
    return cast(StorageFactory, loaded.factory)


def record_scenario(profile_name: str, seed: int, steps: int) -> tuple[MQConfig, list[Step]]:
    """The profile's config and the first ``steps`` steps its simulation draws for ``seed``
    (executed on the model, whose outcomes the actors see)."""
    profile = resolve(queue_profile(profile_name), seed)  # ProfileError: another layer's
    config = MQConfig(**profile.config)
    clock = SimClock()
    model = ReferenceMQ(config=config, clock=clock)
    recorded: list[Step] = []

    def execute(step: Step) -> Outcome:
        recorded.append(step)
        clock.now_s = step.time_s
        return Outcome() if step.op.kind in RUNNER_KINDS else apply_op(model, step.op)

    Simulation(profile, seed, steps=steps).run(execute)
    return config, recorded


class _Cut(Exception):
    """A case reached its cut: the states the recovered one may equal."""

    def __init__(self, allowed: list[State]) -> None:
        super().__init__("cut")
        self.allowed = allowed


class _CaseRun:
    """One run of the steps over one disk, next to the model (module docstring)."""

    def __init__(
        self, access: DiskAccess, config: MQConfig, promise: str, disk: SimDisk
    ) -> None:
        self.access = access
        self.config = config
        self.promise = promise
        self.disk = disk
        self.clock = SimClock()
        self.model = ReferenceMQ(config=config, clock=self.clock)
        self.step = 0
        self.sync_failed = False
        #: The model's states since the last durable point (``async``).
        self.history: list[State] = [self.model.snapshot()]
        self.sut: Any = None
        #: Points passed by the end of the first open (0) and of each step.
        self.marks: list[int] = []

    def open(self, disk: SimDisk) -> Any:
        return self.access.open(disk, self.config, self.clock)

    def run(self, steps: Sequence[Step], arm_last: tuple[int, str] | None = None) -> None:
        """Execute ``steps``; raise ``_Cut`` at the cut, ``RuntimeError`` (the problem)
        when the SUT diverges before it. ``arm_last`` (``point_in_step``, mode): arm the
        disk at that point of the last step (of the first open when there is none)."""
        if arm_last is not None and not steps:
            self.disk.arm(arm_last[0], arm_last[1])
        try:
            self.sut = self.open(self.disk)
        except PowerCut:
            raise _Cut([self.model.snapshot()]) from None
        except DiskAccessError:
            raise
        except Exception as exc:
            if self.disk.fired is None:
                raise RuntimeError(f"the first open raised {type(exc).__name__}: "
                                   f"{exception_text(exc)}") from None
            self.sync_failed = True
            raise _Cut([self.model.snapshot()]) from None
        if self.disk.fired is not None:  # the open returned over a failed sync
            self.sync_failed = True
            raise _Cut([self.model.snapshot()])
        self.marks.append(len(self.disk.points))
        for self.step, step in enumerate(steps, 1):
            self.clock.now_s = step.time_s
            if arm_last is not None and self.step == len(steps):
                self.disk.arm(len(self.disk.points) + arm_last[0], arm_last[1])
            self._execute(step)
            self._after_step()
            self.marks.append(len(self.disk.points))

    def _execute(self, step: Step) -> None:
        before = self.model.snapshot()
        kind = step.op.kind
        try:
            actual = self._sut_step(step)
        except PowerCut:
            if kind not in RUNNER_KINDS:
                apply_op(self.model, step.op)
            after = self.model.snapshot()
            raise _Cut(self._allowed(before, after, returned=False)) from None
        except DiskAccessError:
            raise
        except Exception as exc:  # only a failed sync excuses it
            if self.disk.fired is None:
                raise RuntimeError(f"step {self.step} {kind} raised {type(exc).__name__}: "
                                   f"{exception_text(exc)}") from None
            self.sync_failed = True
            if kind not in RUNNER_KINDS:
                apply_op(self.model, step.op)
            raise _Cut(self._allowed(before, self.model.snapshot(), returned=False)) from None
        if kind in RUNNER_KINDS:
            if self.disk.fired is not None:  # the armed sync failed and was not reported
                self.sync_failed = True
                raise _Cut(self._allowed(before, before, returned=True))
            return
        expected = apply_op(self.model, step.op)
        after = self.model.snapshot()
        if self.disk.fired is not None:  # the armed sync failed in this step
            self.sync_failed = True
            raise _Cut(self._allowed(before, after, returned=actual == expected))
        if actual != expected:
            raise RuntimeError(f"step {self.step} {kind}: the queue returned {actual}, "
                               f"the model {expected}")

    def _allowed(self, before: State, after: State, *, returned: bool) -> list[State]:
        if self.promise == "async":
            return [*self.history, after]
        return [after] if returned else [before, after]

    def _sut_step(self, step: Step) -> Outcome | None:
        kind = step.op.kind
        if kind == "crash_reopen":
            self.sut.crash()
            self.sut = self.open(self.disk)
        elif kind == "close_reopen":
            self.sut.close()
            self.sut = self.open(self.disk)
        elif kind not in RUNNER_KINDS:
            return apply_op(self.sut, step.op)
        return None

    def _after_step(self) -> None:
        state = self.model.snapshot()
        if not self.disk.unsynced_paths(DURABLE_DIR):
            self.history = [state]
        elif self.history[-1] != state:
            self.history.append(state)


def _recovery_problem(
    run: _CaseRun, disk: SimDisk, allowed: list[State]
) -> tuple[str | None, State | None]:
    """(None, the recovered state) if the store on ``disk`` opens to one of ``allowed``
    and stays so; else the problem (and the state when it opened)."""
    try:
        sut = run.open(disk)
        state = sut.snapshot()
    except DiskAccessError:
        raise
    except Exception as exc:  # the backend's failure to recover: a finding
        return f"recovery failed: {type(exc).__name__}: {exception_text(exc)}", None
    if state not in allowed:
        return (f"recovered state is none of the {len(allowed)} allowed: "
                f"{_describe(state, allowed)}", state)
    try:
        sut.crash()
        again = run.open(disk)
        second = again.snapshot()
        again.close()
    except DiskAccessError:
        raise
    except Exception as exc:
        return f"a second recovery failed: {type(exc).__name__}: {exception_text(exc)}", state
    if second != state:
        return f"a second recovery changed the state: {_describe(second, [state])}", state
    return None, state


def _describe(state: State, allowed: list[State]) -> str:
    """What the recovered state lost (or gained) against the closest allowed state: the
    differences ``statediff.diff_states`` lists (``missing in sut``: lost messages;
    ``only in sut``: foreign ones; ``payload``: torn ones; groups and pages)."""
    closest = min((diff_states(a, state) for a in allowed), key=len)
    shown = "; ".join(clip(d.render(), 120) for d in closest[:MAX_LISTED])
    more = f"; {len(closest) - MAX_LISTED} more" if len(closest) > MAX_LISTED else ""
    return f"against the closest (model=allowed, sut=recovered): {shown}{more}"


def run_case(
    factory: StorageFactory | DiskAccess, config: MQConfig, steps: Sequence[Step],
    promise: str, case_spec: tuple[int, str], seed: int, *, in_last_step: bool = False,
) -> tuple[str | None, dict[str, Any] | None, PointRecord | None]:  # fmt: skip
    """Run one case: (problem or None, the cut's decisions, the point that fired).
    ``case_spec``: (point, mode); with ``in_last_step``, the point counts from the start
    of the last step (a trace's case: ``PowerCase.point_in_step``). ``factory``: a
    storage factory (in process) or a ``DiskAccess``."""
    outcome = run_case_outcome(_as_access(factory), config, steps, promise, case_spec, seed,
                               in_last_step=in_last_step)
    return outcome.problem, outcome.cut, outcome.fired


def run_case_outcome(
    access: DiskAccess, config: MQConfig, steps: Sequence[Step], promise: str,
    case_spec: tuple[int, str], seed: int, *, in_last_step: bool = False,
) -> CaseOutcome:  # fmt: skip
    """``run_case`` with all it saw (``CaseOutcome``): the surviving disk and the state
    recovered on it too."""
    point, mode = case_spec
    disk = SimDisk(dirs=(STORE_PATH,))
    if not in_last_step:
        disk.arm(point, mode)
    run = _CaseRun(access, config, promise, disk)
    try:
        run.run(steps, (point, mode) if in_last_step else None)
    except _Cut as cut:
        access.release(disk)  # nothing more reaches the disk that lost power
        point = disk.fired.index if disk.fired is not None else point
        rng = random.Random(f"{seed}/{point}/{mode}")
        survivor = disk.cut("lose-unsynced" if run.sync_failed else mode, rng)
        tree = disk_tree(survivor)
        try:
            problem, state = _recovery_problem(run, survivor, cut.allowed)
        finally:
            access.release(survivor)
        return CaseOutcome(problem, disk.last_cut, disk.fired, tree, state)
    except RuntimeError as exc:
        return CaseOutcome(f"before the cut: {exc}", None, disk.fired)
    finally:
        access.release(disk)
    return CaseOutcome(f"point {point} was not reached (the run is not deterministic)", None,
                       None)


def base_run(
    access: DiskAccess, config: MQConfig, steps: Sequence[Step], promise: str
) -> tuple[str | None, list[tuple[int, PointRecord, int]]]:
    """The run without faults: a problem (or None), and every point (step, the point,
    its place in that step), as the disk numbered them."""
    disk = SimDisk(dirs=(STORE_PATH,))
    run = _CaseRun(access, config, promise, disk)
    try:
        run.run(steps)
        final = _final_state(run)
        if final != run.model.snapshot():
            return "the final state differs from the model's", []
        seen = []
        for record in disk.points:
            step = bisect.bisect_left(run.marks, record.index)
            seen.append((step, record, record.index - (run.marks[step - 1] if step else 0)))
        run.sut.close()
    except (RuntimeError, _Cut) as exc:
        return str(exc), []
    except DiskAccessError:  # the way to the disk failed: the harness's, never the backend's
        raise
    except Exception as exc:  # the backend's close: a finding, as its steps' exceptions are
        return f"close() raised {type(exc).__name__}: {exception_text(exc)}", []
    finally:
        access.release(disk)
    return None, seen


def _final_state(run: _CaseRun) -> Any:
    """The backend's state at the end of the base run; ``RuntimeError`` when its
    ``snapshot()`` raises (a finding, as a step's exception is)."""
    try:
        return run.sut.snapshot()
    except Exception as exc:
        raise RuntimeError(f"the final snapshot() raised {type(exc).__name__}: "
                           f"{exception_text(exc)}") from None


def parse_case(spec: str) -> tuple[int, str]:
    """``POINT:MODE`` (``--case``) as (point, mode); ValueError naming what is wrong."""
    point, sep, mode = spec.partition(":")
    if not sep or not point.isdigit() or int(point) < 1 or mode not in FAULT_MODES:
        raise ValueError(f"--case must be POINT:MODE (POINT >= 1, MODE one of "
                         f"{', '.join(FAULT_MODES)}), got {spec!r}")
    return int(point), mode


@dataclass(frozen=True, slots=True)
class SweepShape:
    """Which cases a sweep runs, and on which file sizes: ``only`` the one ``POINT:MODE``;
    ``cells``: one case per power-loss cell named (``power_cells``: ``kind/mode``), at
    the first point of its kind (the cheapest to replay); ``geometry``: the file sizes
    of a backend that takes ``geometry=`` (``takes_geometry``; None: its own)."""

    only: tuple[int, str] | None = None
    cells: frozenset[str] | None = None
    geometry: Geometry | None = None


def power_loss_sweep(
    profile: str,
    seed: int,
    *,
    promise: str = "sync",
    impl: str | None = None,
    steps: int = DEFAULT_POWER_STEPS,
    through: str = "fs",
    on_case: Callable[[int, int], None] | None = None,
    shape: SweepShape | None = None,
) -> PowerSweepResult:
    """Every case of the scenario (or those ``shape`` selects), under every fault mode,
    the store reaching the disk ``through`` one of ``THROUGH``, on ``shape.geometry``
    when the backend takes one; module docstring."""
    if promise not in PROMISES:
        raise ValueError(f"promise must be one of {PROMISES}: {promise!r}")
    impl = impl or DEFAULT_STORAGE_IMPLS[promise]
    shape = shape or SweepShape()
    access = disk_access(impl, through, shape.geometry)
    started = time.perf_counter()
    try:
        with quiet_recovery():
            config, recorded = record_scenario(profile, seed, steps)
            result = PowerSweepResult(profile, seed, impl, promise, len(recorded),
                                      config=config, recorded=recorded, through=through,
                                      geometry=access_geometry(access))
            _sweep(access, config, recorded, result, shape, on_case)
    finally:
        access.close()
    result.wall_s = time.perf_counter() - started
    result.child_cpu_s = access.child_cpu_s
    return result


@contextlib.contextmanager
def quiet_recovery() -> Iterator[None]:
    """Recovery's warnings (what it dropped) are what every case provokes: not shown."""
    logger = logging.getLogger("rmqsim.impl.commitlog")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _sweep(
    access: DiskAccess, config: MQConfig, recorded: list[Step], result: PowerSweepResult,
    shape: SweepShape, on_case: Callable[[int, int], None] | None,
) -> None:  # fmt: skip
    """The base run, then every case ``shape`` selects, into ``result``."""
    promise, seed = result.promise, result.seed
    result.base_problem, points = base_run(access, config, recorded, promise)
    kinds = point_kinds([(step, record) for step, record, _ in points])
    result.kinds = set(kinds)
    if result.base_problem is None:
        result.cases = _select(points, kinds, shape)
    for done, case in enumerate(result.cases, start=1):
        result.counts[(case.point.call, case.mode)] += 1
        if case.kind in POWER_CELL_KINDS:
            result.cells[cell_name(case.kind, case.mode)] += 1
        problem, cut, _ = run_case(access, config, recorded, promise,
                                   (case.point.index, case.mode), seed)
        if problem is not None:
            result.failures.append(PowerFailure(case, problem, cut))
        if on_case is not None:
            on_case(done, len(result.cases))


def _select(
    points: list[tuple[int, PointRecord, int]], kinds: list[str], shape: SweepShape
) -> list[PowerCase]:
    """The cases of the base run's ``points`` (of ``kinds``) that ``shape`` selects."""
    cases = [
        PowerCase(record, step, mode, in_step, kind)
        for (step, record, in_step), kind in zip(points, kinds, strict=True)
        for mode in FAULT_MODES
        if (mode != "sync-error" or record.is_sync)
        and (shape.only is None or shape.only == (record.index, mode))
    ]
    if shape.cells is None:
        return cases
    first: dict[str, PowerCase] = {}
    for case in cases:
        first.setdefault(cell_name(case.kind, case.mode), case)
    return sorted((c for cell, c in first.items() if cell in shape.cells),
                  key=lambda c: (c.point.index, FAULT_MODES.index(c.mode)))
