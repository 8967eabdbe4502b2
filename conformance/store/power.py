"""The storage layer's power-loss sweep: cut the power at every write and sync point of a
storage scenario, on a store that runs on rmqsim's simulated disk (a factory that takes
``fs=``, as ``impl.store:open_store`` does), and judge what the reboot finds.

The scenario is a storage profile's first ``steps`` operations for the seed, drawn with the
model as the store (``record_store_scenario``; crashes and clean reopens left out: the cut
is the crash). A base run on a fresh ``SimDisk`` numbers every changing file-system call
(a *point*; the first open's are step 0's); then each point x fault mode of
``simdisk.FAULT_MODES`` (``sync-error`` at sync points only) is a *case*: the steps run
again in lockstep (``StoreLockstep``, every answer checked) on a disk armed there; at the
cut, the disk the reboot finds (``SimDisk.cut``) is opened by a new store, every queue is
read whole and judged by ``check.check_recovered`` against the model with the operation in
flight applied, and the durable floor of before it: every put acknowledged under ``sync``
flush (or covered by a ``flush`` under ``async``) is there, nothing never put, no body
changed, no hole, no minimum above what retention allowed; a batch of a store that
promises batches all or nothing (``batch_atomic``) is whole or absent. In mode
``sync-error`` the failed sync's operation runs to its end and the power is cut after it
(losing what is unsynced): if it returned normally it claimed durability. Then the
recovered store is crashed and reopened: a second recovery must change nothing.

A case is named ``POINT:MODE``; ``rmqsim crash-sweep --store PROFILE --seed S --case
POINT:MODE`` runs it alone. Cost: the cases of one point replay the steps before it once
(``run_store_cases``: the power-cut modes share the run to the cut; a ``sync-error`` case
has its own), each then reopens its survivor twice.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from rmqsim.conformance.adapter import load_impl
from rmqsim.conformance.bad_impl import BadImplError
from rmqsim.conformance.crashing.power_loss import (
    PowerCase,
    PowerFailure,
    PowerSweepResult,
    quiet_recovery,
)
from rmqsim.conformance.crashing.simdisk import FAULT_MODES, PointRecord, PowerCut, SimDisk
from rmqsim.conformance.layer import RunSpec
from rmqsim.conformance.running.lockstep import Divergence, SimClock
from rmqsim.conformance.running.watchdog import OperationHang
from rmqsim.conformance.store.check import StoreViolation, check_recovered, observe
from rmqsim.conformance.store.run import StoreLockstep
from rmqsim.model.store.api import QueueKey, StoreConfig
from rmqsim.model.store.reference import ReferenceStore
from rmqsim.scenarios.queue.ops import Outcome, Step
from rmqsim.scenarios.store.ops import CrashStore, Offsets, Put, ReopenStore, Retain, StoreOp
from rmqsim.scenarios.store.profiles import STORE_PROFILES, StoreProfile
from rmqsim.scenarios.store.sim import StoreSimulation

__all__ = [
    "DEFAULT_STORE_POWER_STEPS",
    "FUSE_GATE_PROFILES",
    "FUSE_GATE_STEPS",
    "FuseWay",
    "InProcessWay",
    "StoreDiskWay",
    "as_way",
    "batch_atomic",
    "case_command",
    "power_factory",
    "record_store_scenario",
    "run_store_case",
    "run_store_cases",
    "store_disk_way",
    "store_power_sweep",
    "takes_fs",
]

#: Steps of a storage power-loss sweep by default.
DEFAULT_STORE_POWER_STEPS = 16
#: The gate's sweep of a store in another process (through FUSE, seconds a case): these
#: profiles (one per flush mode), this many steps, one case per (call kind, mode) cell.
FUSE_GATE_PROFILES = ("store", "store-async")
FUSE_GATE_STEPS = 4
#: The directory the store's own directory is created in (it exists, durably, as the
#: parent of a store's path does when rmqsim opens a store the first time).
_SIM_ROOT = Path("/sim")


def record_store_scenario(profile: StoreProfile, seed: int, steps: int) -> list[Step[StoreOp]]:
    """The first ``steps`` operations the profile's simulation draws for ``seed`` with the
    model as the store, crashes and clean reopens left out."""
    clock = SimClock()
    model = ReferenceStore(StoreConfig(**profile.store_config()), clock)
    recorded: list[Step[StoreOp]] = []

    def execute(step: Step[StoreOp]) -> Outcome:
        clock.now_s = step.time_s
        op = step.op
        if isinstance(op, CrashStore | ReopenStore):
            return Outcome(tuple((k[0], k[1], *model.offsets(*k)) for k in model.queue_keys()))
        recorded.append(step)
        if isinstance(op, Retain):
            model.retain(op.cutoff_s)
            return Outcome(tuple((k[0], k[1], model.log(k).min_offset)
                                 for k in model.queue_keys()))
        return _model_outcome(model, op)

    StoreSimulation(profile, seed, steps).run(execute)
    return recorded


def _model_outcome(model: ReferenceStore, op: StoreOp) -> Outcome:
    try:
        if isinstance(op, Put):
            return Outcome(model.put(op.topic, op.queue, op.bodies))
        if isinstance(op, Offsets):
            return Outcome(model.offsets(op.topic, op.queue))
        if op.kind == "get":
            return Outcome(tuple(model.get(op.topic, op.queue, op.offset,  # type: ignore[union-attr]
                                           op.max_count)))  # type: ignore[union-attr]
        model.flush()
        return Outcome(None)
    except Exception as exc:
        return Outcome(error=getattr(type(exc), "kind", type(exc).__name__))


class _Case:
    """One run of the steps over one disk, in lockstep, cut at the armed point."""

    def __init__(self, way: StoreDiskWay, profile: StoreProfile, disk: SimDisk) -> None:
        self.way = way
        self.profile = profile
        self.disk = disk
        spec = RunSpec("store", profile.name, 0, "power", profile.to_json(),
                       profile.store_config())
        self.lockstep = StoreLockstep(spec, profile, functools.partial(self._open, disk),
                                      _SIM_ROOT)
        #: The points each step ended at (step 0: the first open).
        self.step_ends: list[int] = []

    def _open(self, disk: SimDisk, *, path: Path, store_config: StoreConfig, clock: Any,
              faults: Any) -> Any:
        """The lockstep's factory: the store at the sweep's path on ``disk``."""
        del path, faults  # the way knows where the store lives on the disk
        return self.way.open(disk, store_config, clock)

    def run(self, recorded: Sequence[Step[StoreOp]]) -> tuple[int, dict[QueueKey, int]] | None:
        """Run until the cut: ``(the step in flight, the durable floor of each queue
        before it)``, or None when no cut came (the base run)."""
        lockstep = self.lockstep
        try:
            lockstep.open()
        except PowerCut:
            return 0, {}
        self.step_ends.append(len(self.disk.points))
        if lockstep.open_failure is not None and self.disk.fired is not None:
            return 0, {}  # a failed sync refused the first open: allowed
        if lockstep.open_failure is not None:
            raise _Failed(f"the first open failed: {lockstep.open_failure}")
        for index, step in enumerate(recorded, start=1):
            floor = {key: lockstep.model.log(key).durable for key in lockstep.model.queue_keys()}
            cut = self._step(index, step, floor)
            self.step_ends.append(len(self.disk.points))
            if cut is not None:
                return cut
        return None

    def _step(self, index: int, step: Step[StoreOp], floor: dict[QueueKey, int]
              ) -> tuple[int, dict[QueueKey, int]] | None:
        try:
            self.lockstep.execute(step)
        except PowerCut:
            self._in_flight(step)
            return index, floor
        except Divergence as divergence:
            if self.disk.fired is None:
                raise _Failed(f"step {index} ({step.op.kind}) diverged before any cut: "
                              f"{divergence}") from None
            return index, floor  # the failed sync's operation failed: nothing it claimed
        if self.disk.fired is not None:  # sync-error: it returned, so it claimed durability
            return index, {key: self.lockstep.model.log(key).durable
                           for key in self.lockstep.model.queue_keys()}
        return None

    def _in_flight(self, step: Step[StoreOp]) -> None:
        """The model after the operation the cut interrupted (a put is applied by the
        lockstep before the store is called; a retention is allowed here)."""
        if isinstance(step.op, Retain):
            self.lockstep.model.allow_retention(step.op.cutoff_s)


class _Failed(Exception):
    """The case could not be judged: the store diverged before the cut, or never opened."""


def run_store_case(way: StoreDiskWay | Callable[..., Any], profile: StoreProfile,
                   recorded: Sequence[Step[StoreOp]], case: tuple[int, str], seed: int
                   ) -> tuple[str | None, dict[str, Any] | None]:
    """Run one case ``(point, mode)``: ``(problem or None, the cut's decisions)``."""
    point, mode = case
    return run_store_cases(way, profile, recorded, point, (mode,), seed)[mode]


def run_store_cases(way: StoreDiskWay | Callable[..., Any], profile: StoreProfile,
                    recorded: Sequence[Step[StoreOp]], point: int, modes: Sequence[str],
                    seed: int) -> dict[str, tuple[str | None, dict[str, Any] | None]]:
    """The cases ``(point, mode)`` of each of ``modes``: ``{mode: (problem or None, the
    cut's decisions)}``. The power-cut modes share one run of the steps to the cut (the
    store cannot tell them apart before the power goes: the mode only decides what the
    reboot finds), then each is judged on its own survivor, drawn as a lone case draws it;
    ``sync-error`` (the run goes on after the failed sync) comes alone."""
    if len(modes) > 1 and "sync-error" in modes:
        raise ValueError(f"sync-error shares no run with another mode: {modes}")
    way = as_way(way)
    disk = SimDisk(dirs=(str(_SIM_ROOT),))
    disk.arm(point, modes[0])
    run = _Case(way, profile, disk)
    try:
        cut = run.run(recorded)
    except _Failed as failed:
        return {mode: (str(failed), None) for mode in modes}
    finally:
        if disk.fired is not None and run.lockstep.sut is not None:
            with contextlib.suppress(Exception, OperationHang):
                run.lockstep.sut.crash()  # a sync-error case: the power goes now
        run.lockstep.sut = None  # its disk is dead: nothing to close
        run.lockstep.close()
        way.release(disk)
    if cut is None:
        return {mode: (None, None) for mode in modes}  # never reached (a shorter replay)
    outcomes: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
    for mode in modes:
        survivor = disk.cut("lose-unsynced" if mode == "sync-error" else mode,
                            random.Random(f"{seed}:{point}:{mode}"))
        try:
            outcomes[mode] = _judge(run, survivor, cut[1]), disk.last_cut
        finally:
            way.release(survivor)
    return outcomes


def _judge(run: _Case, survivor: SimDisk, floor: dict[QueueKey, int]) -> str | None:
    """Open the surviving disk, read every queue, judge it, crash and reopen, compare."""
    model = run.lockstep.model
    for key in model.queue_keys():
        model.log(key).durable = min(floor.get(key, 0), model.log(key).max_offset)
    views = []
    for attempt in ("recovery", "second recovery"):
        reopened = _Reopen(run, survivor)
        try:
            views.append(reopened.observe())
        except _Failed as failed:
            return f"{failed} (at the {attempt})"
    try:
        check_recovered(model, views[0], run.way.batch_atomic)
    except StoreViolation as violation:
        return f"{violation.anomaly}: {violation.detail}"
    if views[1] != views[0]:
        return "recovery-unstable: a second crash and recovery changed the recovered state"
    return None


class _Reopen:
    """A store opened on ``survivor`` (then crashed: its files stay for the next open)."""

    def __init__(self, run: _Case, survivor: SimDisk) -> None:
        self.run = run
        self.survivor = survivor

    def observe(self) -> dict[QueueKey, Any]:
        lockstep = self.run.lockstep
        try:
            store = self.run.way.open(self.survivor, lockstep.config, lockstep.clock)
        except (Exception, PowerCut) as exc:
            raise _Failed(f"unrecoverable: the store did not open: {type(exc).__name__}: "
                          f"{str(exc)[:300]}") from None
        try:
            return observe(store, lockstep.model.queue_keys(), _read_back)
        finally:
            with contextlib.suppress(Exception, OperationHang):
                store.crash()


def _last_of_each_cell(cases: list[PowerCase]) -> list[PowerCase]:
    """The last case of each (call kind, mode) cell, in point order."""
    last: dict[tuple[str, str], PowerCase] = {}
    for case in cases:
        last[(case.point.call, case.mode)] = case
    return sorted(last.values(), key=lambda case: (case.point.index, case.mode))


def _read_back(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """One read of a recovered store: a get that raises inside the bounds the store gave
    is a ``hole`` (it claims what it cannot serve); any other call's exception is an
    answer outside the contract."""
    try:
        return fn(*args)
    except Exception as exc:
        anomaly = "hole" if what == "get" else "outcome-mismatch"
        raise _Failed(f"{anomaly}: {what}{args!r:.80} on the recovered store raised "
                      f"{type(exc).__name__}: {str(exc)[:300]}") from None


def _points(way: StoreDiskWay, profile: StoreProfile,
            recorded: Sequence[Step[StoreOp]]) -> tuple[str | None, list[tuple[int, PointRecord]]]:
    """The base run: ``(a problem or None, (step, point) of every point)``."""
    disk = SimDisk(dirs=(str(_SIM_ROOT),))
    run = _Case(way, profile, disk)
    try:
        run.run(recorded)
        run.lockstep.finish()
    except (_Failed, Divergence) as failed:
        return f"{failed}", []
    finally:
        run.lockstep.close()
        way.release(disk)
    steps: list[tuple[int, PointRecord]] = []
    for point in disk.points:  # those after the last step (the final read, close): no case
        step = next((i for i, end in enumerate(run.step_ends) if point.index <= end), None)
        if step is not None:
            steps.append((step, point))
    return None, steps


def store_power_sweep(
    profile_name: str, seed: int, way: StoreDiskWay | Callable[..., Any], *, impl: str,
    steps: int = DEFAULT_STORE_POWER_STEPS, modes: Sequence[str] = FAULT_MODES,
    only: tuple[int, str] | None = None, one_per_cell: bool = False,
) -> PowerSweepResult:
    """Every case of the profile's scenario for ``seed`` (or ``only`` one), on the store
    ``way`` reaches the disk with (``StoreDiskWay``; a factory taking ``fs=``: in
    process); the module's docstring says what is judged. ``one_per_cell``: one case per
    (call kind, fault mode) cell, at its last point (inside the operations rather than
    the first open): what a store that costs seconds a case can afford."""
    way = as_way(way)
    profile = STORE_PROFILES[profile_name]
    started = time.perf_counter()
    recorded = record_store_scenario(profile, seed, steps)
    result = PowerSweepResult(profile_name, seed, impl, profile.flush, len(recorded),
                              through=way.through)
    try:
        with quiet_recovery():
            result.base_problem, points = _points(way, profile, recorded)
            result.cases = [PowerCase(point, step, mode) for step, point in points
                            for mode in modes if (mode != "sync-error" or point.is_sync)
                            and (only is None or only == (point.index, mode))]
            if one_per_cell:
                result.cases = _last_of_each_cell(result.cases)
            outcomes = _run_cases(way, profile, recorded, result.cases, seed)
            for case in result.cases:
                result.counts[(case.point.call, case.mode)] += 1
                problem, cut = outcomes[(case.point.index, case.mode)]
                if problem is not None:
                    result.failures.append(PowerFailure(case, problem, cut))
    finally:
        way.close()
    result.wall_s = time.perf_counter() - started
    return result


def _run_cases(way: StoreDiskWay, profile: StoreProfile, recorded: Sequence[Step[StoreOp]],
               cases: Sequence[PowerCase], seed: int
               ) -> dict[tuple[int, str], tuple[str | None, dict[str, Any] | None]]:
    """Every case's outcome by ``(point, mode)``: the power-cut modes of one point in one
    run of the steps (``run_store_cases``), a sync-error case in a run of its own."""
    groups: dict[tuple[int, bool], list[str]] = {}
    for case in cases:
        groups.setdefault((case.point.index, case.mode == "sync-error"), []).append(case.mode)
    outcomes: dict[tuple[int, str], tuple[str | None, dict[str, Any] | None]] = {}
    for (point, _), modes in groups.items():
        for mode, outcome in run_store_cases(way, profile, recorded, point, modes,
                                             seed).items():
            outcomes[(point, mode)] = outcome
    return outcomes


class StoreDiskWay(Protocol):
    """How the store under test reaches a simulated disk: in process (``fs=``) or as a
    child process through FUSE."""

    #: ``fs`` or ``fuse``.
    through: str
    #: Whether the store promises batches all or nothing (``torn-batch``).
    batch_atomic: bool

    def open(self, disk: SimDisk, store_config: StoreConfig, clock: Any) -> Any:
        """The store at the sweep's path on ``disk``, opened (recovering what is there);
        ``PowerCut`` when the disk lost power during the open."""
        ...

    def release(self, disk: SimDisk) -> None:
        """Nothing reaches ``disk`` any more (a child killed, a mount removed)."""
        ...

    def close(self) -> None:
        """Release every disk still in use."""
        ...


class InProcessWay:
    """The store in rmqsim's process, the disk passed as ``fs=``."""

    through = "fs"

    def __init__(self, factory: Callable[..., Any]) -> None:
        self.factory = factory
        self.batch_atomic = batch_atomic(factory)

    def open(self, disk: SimDisk, store_config: StoreConfig, clock: Any) -> Any:
        return self.factory(path=_SIM_ROOT / "store", store_config=store_config, clock=clock,
                            faults=None, fs=disk)

    def release(self, disk: SimDisk) -> None:
        del disk  # the store's objects hold the dead disk; nothing else writes to it

    def close(self) -> None:
        pass


class FuseWay:
    """The store as a child process (a protocol server: ``exec:``, a named driver, or a
    Python factory served by the reference server) on a FUSE mount of the disk
    (``conformance.crashing.power_fuse.FuseAccess``)."""

    through = "fuse"

    def __init__(self, impl: str) -> None:
        from rmqsim.conformance.crashing.power_fuse import FuseAccess

        self.access = FuseAccess(impl, str(_SIM_ROOT / "store"))
        self.batch_atomic = batch_atomic(self.access.factory)

    def open(self, disk: SimDisk, store_config: StoreConfig, clock: Any) -> Any:
        return self.access.open_with(disk, store_config=store_config, clock=clock, faults=None)

    def release(self, disk: SimDisk) -> None:
        self.access.release(disk)

    def close(self) -> None:
        self.access.close()


def as_way(way: StoreDiskWay | Callable[..., Any]) -> StoreDiskWay:
    """``way``, or a factory taking ``fs=`` as the in-process way."""
    if isinstance(way, InProcessWay | FuseWay):
        return way
    if hasattr(way, "through"):
        return way  # type: ignore[return-value]  # another StoreDiskWay (a test's)
    return InProcessWay(way)


def store_disk_way(impl: str, through: str = "fs") -> StoreDiskWay:
    """The way ``impl`` reaches the disk: in process (its factory must take ``fs=``) or
    through FUSE (any storage-layer implementation the wire protocol's child runs);
    ``FuseUnavailableError`` says why FUSE cannot be used here."""
    if through == "fuse":
        loaded = load_impl(impl)
        if loaded.layer != "store":
            raise BadImplError(f"--impl {impl}: a storage profile's power-loss sweep needs a "
                               "message store (docs/STORAGE.md)")
        return FuseWay(impl)
    return InProcessWay(power_factory(impl))


def case_command(result: PowerSweepResult, case: PowerCase) -> str:
    """The command that runs one failing case of a storage sweep again."""
    via = "" if result.through == "fs" else f" --through {result.through}"
    return (f"rmqsim crash-sweep --profile {result.profile} --seed {result.seed} --steps "
            f"{result.steps} --impl {result.impl}{via} --case {case.spec}")


def power_factory(impl: str) -> Callable[..., Any]:
    """The message store factory ``impl`` names, when it takes ``fs=`` (it can run on
    the simulated disk); ``BadImplError`` otherwise."""
    loaded = load_impl(impl)
    if loaded.layer != "store":
        raise BadImplError(f"--impl {impl}: a storage profile's power-loss sweep needs a "
                           "message store factory(path=, store_config=, clock=, faults=, fs=)")
    if not takes_fs(loaded.factory):
        raise BadImplError(f"--impl {impl}: its factory takes no fs=, so rmqsim cannot put it "
                           "on its simulated disk (a store in another process: through FUSE)")
    return loaded.factory


def batch_atomic(factory: Callable[..., Any]) -> bool:
    """Whether the store ``factory`` opens promises batches all or nothing: its
    ``rmqsim_batch_atomic``, or its protocol server's ``hello``."""
    hello = getattr(factory, "rmqsim_hello", None)
    declared = getattr(factory, "rmqsim_batch_atomic", None)
    return bool(declared if declared is not None else getattr(hello, "batch_atomic", False))


def takes_fs(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` accepts ``fs=`` (a ``FileSystem``)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "fs" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD
                                     for p in parameters.values())
