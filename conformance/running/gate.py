"""The conformance gate: every standard profile over a range of seeds, a summary table,
JUnit XML for CI and a JSON summary. What the README's main-job command runs."""

from __future__ import annotations

import functools
import itertools
import json
import xml.etree.ElementTree as ET
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rmqsim.conformance.adapter import QUEUE_LAYERS, Factory, resolve_impl
from rmqsim.conformance.crashing.crash_sweep import (
    DEFAULT_SWEEP_STEPS,
    STEER_PREFIX,
    CrashCase,
    SweepResult,
    crash_sweep,
)
from rmqsim.conformance.crashing.gate_power import power_coverage, power_suite, power_summary
from rmqsim.conformance.crashing.power_loss import PowerSweepResult
from rmqsim.conformance.layer import (
    Layer,
    gate_hooks,
    layer_for_profile,
    layer_named,
    registered_layers,
)
from rmqsim.conformance.layers import CONSUMER_LAYER, QUEUE_LAYER, STREAM_LAYER
from rmqsim.conformance.layers.gate import register_builtin_gate_hooks
from rmqsim.conformance.reporting.deviations import Deviation, DeviationProfile
from rmqsim.conformance.reporting.report import render_failure
from rmqsim.conformance.running import interrupts
from rmqsim.conformance.running.corpus import replay_corpus
from rmqsim.conformance.running.failfast import (
    GateStop,
    failure_count,
    stop_check,
    stop_json,
    stop_note,
)
from rmqsim.conformance.running.pool import WorkerPool
from rmqsim.conformance.running.run import RunResult, run_seed
from rmqsim.conformance.running.trace import output_problem, write_lines
from rmqsim.conformance.searching.shrink_budget import OnRun, ShrinkBudget

__all__ = [
    "CORPUS_SUITE",
    "DEFAULT_GATE_SEEDS",
    "GATE_CONSUMER_PROFILES",
    "GATE_PROFILES",
    "GATE_STREAM_PROFILES",
    "MAX_SHRUNK_FAILURES",
    "GatePlan",
    "GateResult",
    "ProfileSummary",
    "SweepPlan",
    "all_gate_profiles",
    "collect_sweeps",
    "crash_case_failures",
    "gate_profiles_for",
    "junit_xml",
    "layer_runs",
    "not_run",
    "run_corpus",
    "run_layer_steering",
    "run_profiles",
    "run_steering",
    "run_sweeps",
    "save_failure",
    "save_failure_or_note",
    "shrink_crash_cases",
    "submit_sweeps",
    "summary_json",
    "sweep_order",
    "trace_name",
    "write_outputs",
]

#: Profiles the gate runs, in this order (each seed of each): the queue layer's.
GATE_PROFILES = QUEUE_LAYER.gate_profiles
#: Consumer profiles the gate runs after those (docs/CONSUMER.md): the consumer layer's.
GATE_CONSUMER_PROFILES = CONSUMER_LAYER.gate_profiles
#: Stream profiles the gate runs after those (docs/STREAM.md): the stream layer's.
GATE_STREAM_PROFILES = STREAM_LAYER.gate_profiles


def all_gate_profiles() -> tuple[str, ...]:
    """The profiles ``rmqsim gate`` and ``rmqsim sweep`` run by default: every registered
    layer's gate profiles, in the order the layers were registered (queue, consumer,
    stream, then any a user registered) that run above a queue: not the storage layer's,
    whose runs take a message store (``Layer.above_queue`` false)."""
    return tuple(name for layer in registered_layers() if getattr(layer, "above_queue", True)
                 for name in layer.gate_profiles)


def gate_profiles_for(impl_layer: str) -> tuple[str, ...]:
    """The profiles ``rmqsim gate --impl X`` runs by default, by X's layer
    (``adapter.load_impl``): for a queue or a storage backend every layer's
    (``all_gate_profiles``: ours run above it), for a push consumer or a stream factory
    its own layer's gate profiles."""
    if impl_layer in QUEUE_LAYERS:
        return all_gate_profiles()
    return tuple(layer_named(impl_layer).gate_profiles)

#: The gate's summary row and JUnit suite of the regression corpus replays.
CORPUS_SUITE = "regressions"
#: Default seeds per profile: sized so that the whole gate takes a few minutes here.
DEFAULT_GATE_SEEDS = range(0, 20)
#: The gate shrinks at most this many failing runs (the report shows the first ones), and
#: as many failing crash cases (``shrink_crash_cases``).
MAX_SHRUNK_FAILURES = 5

T = TypeVar("T")

register_builtin_gate_hooks()


@dataclass(slots=True)
class ProfileSummary:
    """Totals of one profile in a gate or run."""

    profile: str
    runs: int = 0
    failed: int = 0
    steps: int = 0
    wall_s: float = 0.0
    anomalies: dict[str, int] = field(default_factory=dict)

    def add(self, result: RunResult) -> None:
        self.runs += 1
        self.steps += result.steps
        self.wall_s += result.wall_s
        if not result.ok:
            self.failed += 1
            key = result.anomaly or "unknown"
            self.anomalies[key] = self.anomalies.get(key, 0) + 1


@dataclass(slots=True)
class GateResult:
    """All results of a gate, grouped by profile, in run order."""

    impl: str
    seeds: range
    summaries: dict[str, ProfileSummary] = field(default_factory=dict)
    results: list[RunResult] = field(default_factory=list)
    #: Crash sweeps run after the profiles (one per profile, on the first seed).
    sweeps: list[SweepResult] = field(default_factory=list)
    #: Replays of the regression corpus (``conformance.running.corpus``), one per file.
    corpus: list[RunResult] = field(default_factory=list)
    #: Power-loss sweeps (``conformance.crashing.gate_power``), when the implementation is a
    #: file-system backend: one per profile, on the first seed.
    power_sweeps: list[PowerSweepResult] = field(default_factory=list)
    #: Crash cases steered into the crash cells no sweep armed (``conformance.queue.steer``),
    #: one result per (profile, seed) they crash in.
    steered: list[SweepResult] = field(default_factory=list)
    #: The signal that stopped the gate before its end (``"SIGINT"``, ``"SIGTERM"``), or
    #: None: the outputs then hold only what had finished.
    interrupted_by: str | None = None
    #: The known deviations of the implementation (``--expect``): a failing run that
    #: shows one is expected, not a failure (``conformance.reporting.deviations``).
    expected: DeviationProfile | None = None
    #: Where the gate stopped early (``--max-failures``: ``conformance.running.failfast``)
    #: and what it did not run, or None: it ran everything.
    stopped: GateStop | None = None

    def add(self, result: RunResult) -> None:
        """Count one finished profile run (its profile's summary is made on first use)."""
        self.summaries.setdefault(result.profile, ProfileSummary(result.profile)).add(result)
        self.results.append(result)

    def unexpected(self, result: RunResult) -> bool:
        """Whether ``result``, if it fails, is a failure: it shows no listed deviation."""
        return self.expected is None or self.expected.match(result) is None

    def deviations(self) -> list[tuple[RunResult, Deviation]]:
        """Every failing run or crash case that shows a listed deviation, with it."""
        if self.expected is None:
            return []
        failing = [r for r in (*self.results, *self.corpus) if not r.ok]
        failing += self._all_sweep_failures()
        return [(r, d) for r in failing if (d := self.expected.match(r)) is not None]

    @property
    def failures(self) -> list[RunResult]:
        return [r for r in (*self.results, *self.corpus) if not r.ok and self.unexpected(r)]

    def _all_sweep_failures(self) -> list[RunResult]:
        bases = [s.base for s in (*self.sweeps, *self.steered) if not s.base.ok]
        return bases + crash_case_failures(self)

    @property
    def sweep_failures(self) -> list[RunResult]:
        """The failing run of every failing sweep case (and failing sweep base runs) but
        those that show a listed deviation."""
        return [r for r in self._all_sweep_failures() if self.unexpected(r)]

    def power_deviations(self) -> list[tuple[Any, Deviation]]:
        """Every failing power-cut case that shows a listed deviation, with it."""
        if self.expected is None:
            return []
        found = [(f, self.expected.match_power(f)) for s in self.power_sweeps for f in s.failures]
        return [(f, d) for f, d in found if d is not None]

    def _power_ok(self) -> bool:
        """Every power-loss sweep passed, but for failing cases that show a listed
        deviation."""
        listed = {id(f) for f, _ in self.power_deviations()}
        return all(s.base_problem is None and all(id(f) in listed for f in s.failures)
                   for s in self.power_sweeps)

    @property
    def ok(self) -> bool:
        if self.expected is not None:
            return not self.failures and not self.sweep_failures and self._power_ok()
        return (not self.failures and all(s.ok for s in self.sweeps)
                and all(s.ok for s in self.steered)
                and all(s.ok for s in self.power_sweeps))


def trace_name(result: RunResult) -> str:
    """File name of a saved failing trace: profile, seed and anomaly say what it is."""
    return f"{result.profile}-seed{result.seed}-{result.anomaly or 'failure'}.jsonl"


def save_failure_or_note(result: RunResult, out: Path, *, prefix: str = "") -> Path | None:
    """``save_failure``, or, when the machine refuses the write (a full disk:
    ``trace.output_problem``), None and a note on ``result`` saying what was not written:
    the run's verdict stands."""
    try:
        return save_failure(result, out, prefix=prefix)
    except OSError as exc:
        problem = output_problem(exc)
        if problem is None:
            raise
        result.notes.append(f"could not write its trace under {out} ({problem})")
        return None


def save_failure(result: RunResult, out: Path, *, prefix: str = "") -> Path:
    """Write a failing run's trace under ``out`` (named ``prefix`` + ``trace_name``) and
    remember where. A shrunk trace left beside it by an earlier run is removed: it would
    pass for this run's reproducer."""
    from rmqsim.conformance.searching.shrink import shrunk_path  # it imports this module

    path = out / (prefix + trace_name(result))
    write_lines(path, result.trace_lines)
    shrunk_path(path).unlink(missing_ok=True)
    result.trace_path = path
    return path


@dataclass(frozen=True, slots=True)
class GatePlan:
    """What ``run_profiles`` runs: every seed of every profile on ``impl``, failing traces
    saved under ``out``; the first ``MAX_SHRUNK_FAILURES`` failures shrunk within ``shrink``
    each (None: not shrunk); with ``until_failure``, nothing after the first failing run (the
    mutant kill matrix); with ``max_failures`` N, nothing after the point of the gate's order
    at which N failures are known (``conformance.running.failfast``)."""

    profiles: tuple[str, ...]
    seeds: range
    impl: str | Factory
    out: Path
    steps: int | None = None
    shrink: ShrinkBudget | None = None
    crash_rate: float = 0.0
    until_failure: bool = False
    #: ``--expect``: runs that end at a listed deviation are not failures (not shrunk).
    expected: DeviationProfile | None = None
    #: ``process``: every run's implementation in a child process, through the wire
    #: protocol (``conformance.running.process_sut``), crashed by SIGKILL.
    crash_mode: str = "inprocess"
    #: ``--max-failures``: None runs everything.
    max_failures: int | None = None


def _run_one(profile: str, seed: int, plan: GatePlan) -> RunResult:
    """One profile run as its layer's gate hooks keep it (``GateHooks.map_run``: the
    queue's with its coverage map; the points it passes are logged for it), its trace
    dropped if it passed (memory stays flat) and rendered if not (it may go to another
    process)."""
    layer = layer_for_profile(profile)
    crash_mode = plan.crash_mode if plan.crash_mode in layer.crash_modes else "inprocess"
    result = run_seed(
        profile, seed, impl=plan.impl, steps=plan.steps, crash_rate=plan.crash_rate,
        log_faults=True, crash_mode=crash_mode,
    )  # fmt: skip
    result = gate_hooks(layer).map_run(result)
    if result.ok:
        result.trace_lines = []
    else:
        result.trace_lines = list(result.trace_lines)
    return result


def _shrink_one(result: RunResult, plan: GatePlan) -> RunResult:
    """Shrink a failing run whose trace is saved (the shrunk trace goes beside it)."""
    from rmqsim.conformance.searching.shrink import shrink_and_save

    assert plan.shrink is not None
    shrink_and_save(result, impl=plan.impl, budget=plan.shrink)
    return result


def run_profiles(
    plan: GatePlan,
    *,
    on_result: Callable[[RunResult], None] | None = None,
    on_shrink_run: OnRun | None = None,
    pool: WorkerPool | None = None,
) -> GateResult:
    """Run ``plan`` (``GatePlan``), calling ``on_result`` with each finished run in
    (profile, seed) order and ``on_shrink_run`` as each shrink goes on. With a ``pool``
    (``conformance.running.pool.worker_pool``) the runs and shrinks are its tasks (the same
    results, traces and files; ``on_shrink_run`` is not called)."""
    # A name is kept as given (each run's layer loads it: a stream factory is no queue's).
    name = plan.impl if isinstance(plan.impl, str) else resolve_impl(plan.impl)[0]
    gate = GateResult(impl=name, seeds=plan.seeds, expected=plan.expected)
    for profile in plan.profiles:
        gate.summaries.setdefault(profile, ProfileSummary(profile))
    pairs = [(profile, seed) for profile in plan.profiles for seed in plan.seeds]
    pending: deque[Future[RunResult]] = deque()
    if pool is None:
        results: Iterator[RunResult] = (_run_one(p, s, plan) for p, s in pairs)
        shrinker = functools.partial(_shrink_here, plan=plan, on_run=on_shrink_run)
    else:
        tasks = [functools.partial(pool.submit, _run_one, p, s, plan) for p, s in pairs]
        results = _in_order(tasks, pending, window=2 * pool.jobs)
        shrinker = functools.partial(_shrink_in_pool, plan=plan, pool=pool)
    stop = stop_check(gate, plan.max_failures, lambda: _run_label(gate.results[-1]))
    try:
        for done, result in enumerate(results, 1):
            if _reaches_limit(gate, result, plan):  # its shrink does not queue behind them
                for future in pending:
                    future.cancel()
            _finish(gate, result, plan, shrinker, on_result)
            interrupts.raise_if_interrupted()  # one a finalizer swallowed (its module)
            if plan.until_failure and not result.ok:
                break
            if stop():
                not_run(gate, "profile run(s)", len(pairs) - done)
                break
    except KeyboardInterrupt:
        # What other workers finished is reported too (in order, unshrunk).
        for result in _finished_after(list(pending), 0):
            _finish(gate, result, plan, shrinker, on_result, shrink=False)
        raise
    finally:
        for future in pending:
            future.cancel()
    return gate


def _run_label(result: RunResult) -> str:
    return f"profile run {result.profile} seed {result.seed}"


def _reaches_limit(gate: GateResult, result: RunResult, plan: GatePlan) -> bool:
    """Whether ``result``, the next profile run in order, is the ``max_failures``-th
    failure of ``gate`` (as ``failfast`` counts them)."""
    return (plan.max_failures is not None and not result.ok and gate.unexpected(result)
            and failure_count(gate) + 1 >= plan.max_failures)


def not_run(gate: GateResult, what: str, count: int | None = None) -> None:
    """Say in ``gate.stopped`` that ``what`` (``count`` of them) was not run (a count of
    0: nothing said)."""
    if gate.stopped is not None and count != 0:
        gate.stopped.not_run.append(what if count is None else f"{count} {what}")


def _in_order(
    tasks: Iterable[Callable[[], Future[T]]], pending: deque[Future[T]], *, window: int
) -> Iterator[T]:
    """The results of ``tasks`` in their order, with at most ``window`` of them submitted
    ahead (``pending``): a shrink submitted meanwhile does not wait behind all the runs."""
    queued = iter(tasks)
    pending.extend(task() for task in itertools.islice(queued, window))
    while pending:
        result = pending[0].result()
        pending.popleft()
        pending.extend(task() for task in itertools.islice(queued, 1))
        yield result


def _shrink_here(result: RunResult, *, plan: GatePlan, on_run: OnRun | None) -> RunResult:
    from rmqsim.conformance.searching.shrink import shrink_and_save

    assert plan.shrink is not None
    shrink_and_save(result, impl=plan.impl, budget=plan.shrink, on_run=on_run)
    return result


def _shrink_in_pool(result: RunResult, *, plan: GatePlan, pool: WorkerPool) -> RunResult:
    return pool.submit(_shrink_one, result, plan).result()


def _finish(
    gate: GateResult,
    result: RunResult,
    plan: GatePlan,
    shrinker: Callable[[RunResult], RunResult],
    on_result: Callable[[RunResult], None] | None,
    *,
    shrink: bool = True,
) -> None:
    """Save a failing run's trace, shrink it when it is one of the first failures, and
    count it (unshrunk, when its shrink is interrupted: Ctrl-C)."""
    saved = not result.ok and save_failure_or_note(result, plan.out) is not None
    shrinks = (shrink and saved and gate.unexpected(result)
               and len(gate.failures) < MAX_SHRUNK_FAILURES)
    try:
        if plan.shrink is not None and shrinks:
            shrunk = shrinker(result)
            result.shrunk = shrunk.shrunk
    finally:
        gate.add(result)
        if on_result is not None:
            on_result(result)


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """What a gate's crash sweeps run: the ``seed`` of each profile against ``impl``,
    ``steps`` operations each, crashing as ``crash_mode`` says (``inprocess`` or
    ``process``); failing cases are saved under ``out``."""

    seed: int
    impl: str | Factory
    out: Path
    steps: int = DEFAULT_SWEEP_STEPS
    crash_mode: str = "inprocess"

    def __post_init__(self) -> None:
        assert self.steps >= 1, self.steps


def run_sweeps(
    profiles: Iterable[str],
    plan: SweepPlan,
    *,
    on_sweep: Callable[[SweepResult], None] | None = None,
    pool: WorkerPool | None = None,
    weighed_by: GateResult | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[SweepResult]:
    """The crash sweep of ``plan.seed`` of every profile, reported (``on_sweep``) and
    returned in the order of ``profiles``. With a ``pool`` the sweeps are its tasks,
    submitted heaviest first when ``weighed_by`` (the gate's profile runs) says how heavy
    each profile is (``sweep_order``): the last to finish is then a short one, and no
    worker idles long at the end. The order they run in changes no result. ``stop``
    (``--max-failures``), asked after each sweep is reported, ends them there."""
    names = list(profiles)
    if pool is None:
        done = (_sweep_one(name, plan) for name in names)
        return collect_sweeps(done, [], plan.out, on_sweep, stop=stop)
    order = names if weighed_by is None else sweep_order(weighed_by, names)
    submitted = dict(zip(order, submit_sweeps(order, plan, pool), strict=True))
    futures = [submitted[name] for name in names]
    return collect_sweeps((future.result() for future in futures), futures, plan.out, on_sweep,
                          stop=stop)  # fmt: skip


def submit_sweeps(
    profiles: Iterable[str], plan: SweepPlan, pool: WorkerPool
) -> list[Future[SweepResult]]:
    """``run_sweeps``'s tasks, submitted to ``pool`` in the order of ``profiles``
    (``collect_sweeps`` takes their results)."""
    return [pool.submit(_sweep_one, profile, plan) for profile in profiles]


def sweep_order(gate: GateResult, profiles: list[str]) -> list[str]:
    """``profiles`` heaviest first, by the mean wall time of the gate's runs of each (a
    sweep replays its profile's scenario once per crash point): in a pool, the last sweep
    to finish is then a short one, where in the gate's order the heaviest (swarm) ran last
    while the other worker idled. Ties keep the given order; the sweeps' results are
    reported in the given order whatever the order they ran in."""
    def mean_wall_s(profile: str) -> float:
        walls = [r.wall_s for r in gate.results if r.profile == profile]
        return sum(walls) / len(walls) if walls else 0.0

    return sorted(profiles, key=mean_wall_s, reverse=True)


def collect_sweeps(
    done: Iterable[SweepResult],
    futures: list[Future[SweepResult]],
    out: Path,
    on_sweep: Callable[[SweepResult], None] | None,
    *,
    stop: Callable[[], bool] | None = None,
) -> list[SweepResult]:
    """The sweeps of ``done`` (the results of ``futures``, when they ran in a pool), in
    order, each failing base run saved under ``out`` and passed to ``on_sweep``; when
    ``stop()`` says so after one, none after it (the futures not started are cancelled)."""
    sweeps: list[SweepResult] = []
    try:
        for sweep in done:
            _add_sweep(sweeps, sweep, out, on_sweep)
            interrupts.raise_if_interrupted()
            if stop is not None and stop():
                for future in futures:
                    future.cancel()
                break
    except KeyboardInterrupt:
        for sweep in _finished_after(futures, len(sweeps)):
            _add_sweep(sweeps, sweep, out, on_sweep)
        raise
    return sweeps


def _add_sweep(
    sweeps: list[SweepResult],
    sweep: SweepResult,
    out: Path,
    on_sweep: Callable[[SweepResult], None] | None,
) -> None:
    if not sweep.base.ok:
        # Not the profile run of the same seed (other steps, crash points logged): a
        # name of its own keeps that run's trace and shrunk trace beside it intact.
        save_failure_or_note(sweep.base, out, prefix="crash-sweep-")
    sweeps.append(sweep)
    if on_sweep is not None:
        on_sweep(sweep)


def run_steering(
    gate: GateResult,
    plan: GatePlan,
    *,
    pool: WorkerPool | None = None,
    on_group: Callable[[SweepResult], None] | None = None,
) -> None:
    """After the profile runs and crash sweeps of ``gate``: the crash cases each layer
    steers beyond the sweeps (``GateHooks.steer_crashes``: the queue's, at the first place
    its runs reached each crash cell no sweep armed), added to ``gate.steered`` in the
    gate's order (the same with or without a ``pool``), failing base runs saved. Once
    ``plan.max_failures`` failures are known after a group, no other group is started."""
    stop = stop_check(gate, plan.max_failures, lambda: _steered_label(gate.steered[-1]))
    if stop():
        not_run(gate, "the steered crash cases")
        return
    for layer in registered_layers():
        heard: list[SweepResult] = []
        hear = functools.partial(_hear_steered, gate, plan, (heard, on_group, stop))
        try:
            steered = gate_hooks(layer).steer_crashes(
                gate.results, gate.sweeps, plan, pool=pool, on_group=hear)
        except _StopSteering:
            if pool is not None:
                pool.cancel_pending()
            not_run(gate, "the rest of the steered crash cases")
            return
        for result in steered:  # those the hook did not report to on_group
            if not any(result is seen for seen in heard):
                _add_steered(gate, result, plan.out)


class _StopSteering(Exception):
    """Raised from a steering hook's ``on_group``: ``--max-failures`` stops it there."""


def _hear_steered(
    gate: GateResult,
    plan: GatePlan,
    listeners: tuple[list[SweepResult], Callable[[SweepResult], None] | None, Callable[[], bool]],
    result: SweepResult,
) -> None:
    """A steering hook's ``on_group``: ``result`` added to ``gate`` (and ``heard``), told to
    the caller's ``on_group``; ``_StopSteering`` once ``stop()`` says the gate stops."""
    heard, on_group, stop = listeners
    heard.append(result)
    _add_steered(gate, result, plan.out)
    if on_group is not None:
        on_group(result)
    if stop():
        raise _StopSteering


def _steered_label(result: SweepResult) -> str:
    return f"the steered crash cases of {result.profile} seed {result.seed}"


def _add_steered(gate: GateResult, result: SweepResult, out: Path) -> None:
    if not result.base.ok:
        save_failure_or_note(result.base, out, prefix=STEER_PREFIX)
    gate.steered.append(result)


def layer_runs(gate: GateResult, layer: Layer) -> list[RunResult]:
    """The profile runs of ``gate`` that are ``layer``'s, in run order."""
    return [r for r in gate.results if layer_for_profile(r.profile) is layer]


def run_layer_steering(
    gate: GateResult, plan: GatePlan, *, on_result: Callable[[RunResult], None] | None = None
) -> None:
    """After the profile runs of ``gate``: the runs each layer adds (``GateHooks.
    steering_runs``: the streams', aimed at the stream cells the profiles left empty), each
    added to ``gate`` as a profile run (its failure saved and shrunk like theirs); a
    layer's stop at its first failing one (that is the report). Once ``plan.max_failures``
    failures are known, none is started."""
    shrinker = functools.partial(_shrink_here, plan=plan, on_run=None)
    stop = stop_check(gate, plan.max_failures, lambda: _run_label(gate.results[-1]))
    for layer in registered_layers():
        if stop():
            not_run(gate, "the runs the layers add after the profile runs (steering runs)")
            return
        chosen = gate_hooks(layer).steering_runs(
            functools.partial(layer_runs, gate, layer), plan.seeds.stop)
        for profile, seed in chosen:
            result = _run_one(profile, seed, plan)
            _finish(gate, result, plan, shrinker, on_result)
            if not result.ok:
                break


def crash_case_failures(gate: GateResult) -> list[RunResult]:
    """The failing crash cases of ``gate``: its sweeps' in profile order, then its steered
    cases' (a failing base run of a sweep is not a case)."""
    return [run for swept in (*gate.sweeps, *gate.steered) for _, run in swept.failures]


def shrink_crash_cases(
    gate: GateResult,
    plan: GatePlan,
    *,
    pool: WorkerPool | None = None,
    on_shrink_run: OnRun | None = None,
    on_shrunk: Callable[[RunResult], None] | None = None,
) -> None:
    """Shrink the first ``MAX_SHRUNK_FAILURES`` failing crash cases of ``gate``
    (``crash_case_failures``) as the first failing runs are: within ``plan.shrink`` each
    (None: none), the shrunk trace beside the case's, ``shrunk`` set on the case's result
    (left None when the failure does not recur). A case's crash is one of its steps
    (``ArmCrash``, or the header's ``open_crash``), so a candidate that drops it fails
    otherwise or not at all and is not kept. With a ``pool`` the shrinks are its tasks
    (the same shrunk traces; ``on_shrink_run`` is not called); ``on_shrunk`` hears each
    case once its shrink is over, in order."""
    if plan.shrink is None:
        return
    cases = crash_case_failures(gate)[:MAX_SHRUNK_FAILURES]
    if pool is None:
        for case in cases:
            _shrink_here(case, plan=plan, on_run=on_shrink_run)
            if on_shrunk is not None:
                on_shrunk(case)
        return
    futures = [pool.submit(_shrink_one, case, plan) for case in cases]
    try:
        for case, future in zip(cases, futures, strict=True):
            case.shrunk = future.result().shrunk
            if on_shrunk is not None:
                on_shrunk(case)
    finally:
        for future in futures:
            future.cancel()


def _finished_after(futures: list[Future[T]], count: int) -> list[T]:
    """The results of ``futures[count:]`` that had finished when the gate was interrupted
    (in order): it reports them too."""
    return [
        future.result()
        for future in futures[count:]
        if future.done() and not future.cancelled() and future.exception() is None
    ]


def _sweep_one(profile: str, plan: SweepPlan) -> SweepResult:
    """One crash sweep, its base run's trace rendered (it may go to another process)."""
    sweep = crash_sweep(profile, plan.seed, impl=plan.impl, steps=plan.steps, out=plan.out,
                        crash_mode=plan.crash_mode)  # fmt: skip
    sweep.base.trace_lines = list(sweep.base.trace_lines)
    return sweep


def _sweep_suite(
    root: ET.Element, sweeps: list[SweepResult], steered: list[SweepResult]
) -> None:
    """One JUnit test suite for the crash sweeps: a test case per profile, then one per
    (profile, seed) of the steered crash cases (named ``steered ...``)."""
    every = [*sweeps, *steered]
    suite = ET.SubElement(
        root,
        "testsuite",
        name="rmqsim.crash-sweep",
        tests=str(len(every)),
        failures=str(sum(not s.ok for s in every)),
        errors="0",
        time=f"{sum(s.wall_s for s in every):.3f}",
    )
    for index, sweep in enumerate(every):
        kind = "steered " if index >= len(sweeps) else ""
        case = ET.SubElement(
            suite,
            "testcase",
            classname="rmqsim.crash-sweep",
            name=f"{kind}{sweep.profile} seed {sweep.seed} ({len(sweep.cases)} cases)",
            time=f"{sweep.wall_s:.3f}",
        )
        if not sweep.ok:
            runs = [sweep.base] if not sweep.base.ok else [run for _, run in sweep.failures]
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{len(runs)} failing crash case(s): {runs[0].anomaly}",
                type="divergence",
            )
            failure.text = "\n\n".join(
                [_case_line(c, r) for c, r in sweep.failures]
                + [render_failure(runs[0])]
            )


def _case_line(case: CrashCase, run: RunResult) -> str:
    """A failing crash case in the JUnit failure text: what and how to repeat it (and its
    shrunk reproducer, when it was shrunk)."""
    line = f"{case.label()}: {run.anomaly}: {run.repro_command()}"
    if run.shrunk is not None:
        line += f" (shrunk to {run.shrunk.steps} operations: {run.shrunk.repro_command()})"
    return line


def run_corpus(gate: GateResult, directory: Path, *, impl: str | Factory) -> None:
    """Replay every file of the regression corpus in ``directory`` into ``gate``."""
    gate.corpus = replay_corpus(directory, impl)
    if gate.corpus:
        summary = gate.summaries.setdefault(CORPUS_SUITE, ProfileSummary(CORPUS_SUITE))
        for result in gate.corpus:
            summary.add(result)


def _cases(gate: GateResult, profile: str) -> list[tuple[str, RunResult]]:
    """(test case name, result) of one suite: a seed per run, a file per corpus replay."""
    if profile == CORPUS_SUITE:
        return [(r.trace_path.name if r.trace_path else "?", r) for r in gate.corpus]
    return [(f"seed {r.seed}", r) for r in gate.results if r.profile == profile]


def junit_xml(gate: GateResult) -> bytes:
    """JUnit XML: one test suite per profile, one test case per seed (and a suite
    ``regressions`` with one test case per corpus file)."""
    root = ET.Element("testsuites", name="rmqsim-gate")
    for profile, summary in gate.summaries.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"rmqsim.{profile}",
            tests=str(summary.runs),
            failures=str(summary.failed),
            errors="0",
            time=f"{summary.wall_s:.3f}",
        )
        for name, result in _cases(gate, profile):
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"rmqsim.{profile}",
                name=name,
                time=f"{result.wall_s:.3f}",
            )
            if not result.ok:
                failure = ET.SubElement(
                    case, "failure", message=f"{result.anomaly}", type="divergence"
                )
                failure.text = render_failure(result)
    if gate.sweeps or gate.steered:
        _sweep_suite(root, gate.sweeps, gate.steered)
    if gate.power_sweeps:
        power_suite(root, gate.power_sweeps)
    if gate.interrupted_by is not None:
        _interrupted_suite(root, gate)
    if gate.stopped is not None:
        _stopped_suite(root, gate.stopped)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _interrupted_suite(root: ET.Element, gate: GateResult) -> None:
    """A suite with one erring test case that says the gate did not finish: a CI that
    reads only the JUnit XML must not take a cut-short gate for a pass."""
    suite = ET.SubElement(
        root, "testsuite", name="rmqsim.interrupted", tests="1", failures="0", errors="1"
    )
    case = ET.SubElement(suite, "testcase", classname="rmqsim.interrupted", name="gate")
    error = ET.SubElement(
        case, "error", message=f"interrupted by {gate.interrupted_by}", type="interrupted"
    )
    error.text = (
        f"the gate was stopped by {gate.interrupted_by} after {len(gate.results)} profile "
        f"run(s), {len(gate.sweeps)} crash sweep(s) and {len(gate.corpus)} corpus replay(s); "
        "only those are reported"
    )


def _stopped_suite(root: ET.Element, stop: GateStop) -> None:
    """A suite with one skipped test case that says the gate stopped early
    (``--max-failures``) and what it did not run: its failures are in the suites above."""
    suite = ET.SubElement(
        root, "testsuite", name="rmqsim.stopped-early", tests="1", failures="0", errors="0",
        skipped="1",
    )
    case = ET.SubElement(suite, "testcase", classname="rmqsim.stopped-early", name="gate")
    ET.SubElement(case, "skipped", message=stop_note(stop))


def _status(gate: GateResult) -> str:
    if gate.interrupted_by is not None:
        return "interrupted"
    return "ok" if gate.ok else "divergence"


def summary_json(gate: GateResult) -> dict[str, Any]:
    """The gate's JSON summary (what a dashboard or a later job reads). An interrupted
    gate's status is ``interrupted`` (``interrupted_by`` names the signal), whatever
    its finished runs found; a gate stopped by ``--max-failures`` says where and what it
    did not run in ``stopped_early`` (null when it ran everything)."""
    return {
        "status": _status(gate),
        "interrupted_by": gate.interrupted_by,
        "stopped_early": stop_json(gate.stopped),
        "impl": gate.impl,
        "seeds": [gate.seeds.start, gate.seeds.stop],
        "profiles": {
            name: {
                "runs": s.runs,
                "failed": s.failed,
                "steps": s.steps,
                "wall_s": round(s.wall_s, 3),
                "anomalies": dict(sorted(s.anomalies.items())),
            }
            for name, s in gate.summaries.items()
        },
        "regressions": {
            "files": len(gate.corpus),
            "failed": sum(1 for r in gate.corpus if not r.ok),
        },
        "failures": [
            {
                "profile": r.profile,
                "seed": r.seed,
                "anomaly": r.anomaly,
                "step": r.divergence.step_index if r.divergence else None,
                "trace": str(r.trace_path) if r.trace_path else None,
                "repro": r.repro_command(),
                **_shrunk_json(r),
            }
            for r in gate.failures
        ],
        **_layer_entries(gate),
        "crash_steer": [
            {
                "profile": s.profile,
                "seed": s.seed,
                "cases": [c.label() for c in s.cases],
                "failed": s.failed,
                "failures": [_case_json(c, r) for c, r in s.failures],
            }
            for s in gate.steered
        ],
        "crash_sweep": {
            s.profile: {
                "seed": s.seed,
                "steps": s.steps,
                "cases": len(s.cases),
                "points": len(s.points),
                "resolved": dict(sorted(s.resolutions.items())),
                "failed": s.failed,
                "wall_s": round(s.wall_s, 3),
                "failures": [_case_json(c, r) for c, r in s.failures],
            }
            for s in gate.sweeps
        },
        "power_loss": power_summary(gate.power_sweeps),
        **({"power_coverage": cells} if (cells := power_coverage(gate.power_sweeps)) else {}),
        "deviations": _deviations_json(gate),
    }


def _layer_entries(gate: GateResult) -> dict[str, Any]:
    """Each layer's own entries of the summary (``GateHooks.summary``: the queue's
    ``coverage``, the streams' ``stream_coverage``), from its runs and every sweep."""
    entries: dict[str, Any] = {}
    for layer in registered_layers():
        entries.update(gate_hooks(layer).summary(layer_runs(gate, layer), gate.sweeps,
                                                 gate.steered))
    return entries


def _deviations_json(gate: GateResult) -> dict[str, Any] | None:
    """What ``--expect`` listed, and how many runs and crash cases ended at each."""
    if gate.expected is None:
        return None
    seen = Counter(d.name for _, d in [*gate.deviations(), *gate.power_deviations()])
    return {**gate.expected.to_json(), "seen": dict(sorted(seen.items()))}


def _case_json(case: CrashCase, run: RunResult) -> dict[str, Any]:
    """A failing crash case in the summary: its label, anomaly and repro command, and
    when it was shrunk its shrunk trace, length, replay command and search."""
    return {
        "case": case.label(),
        "anomaly": run.anomaly,
        "repro": run.repro_command(),
        "steps": run.steps,
        **_shrunk_json(run),
        "shrunk_repro": run.shrunk.repro_command() if run.shrunk else None,
    }


def _shrunk_json(run: RunResult) -> dict[str, Any]:
    """A failure's shrunk trace, its length and how its shrink searched (None each when
    it was not shrunk)."""
    shrunk = run.shrunk
    return {
        "shrunk_trace": str(shrunk.trace_path) if shrunk else None,
        "shrunk_steps": shrunk.steps if shrunk else None,
        "shrink_search": _search_json(shrunk),
    }


def _search_json(shrunk: RunResult | None) -> dict[str, Any] | None:
    """How a failure's shrink searched (``ShrinkStats``), for CI tooling: whether the
    shrunk trace is final (``stopped_by`` null) or the budget cut the search short."""
    if shrunk is None or shrunk.shrink_stats is None:
        return None
    stats = shrunk.shrink_stats
    return {"runs": stats.runs, "operations": stats.operations, "stopped_by": stats.stopped_by}


def write_outputs(gate: GateResult, out: Path) -> tuple[Path, Path]:
    """Write ``junit.xml`` and ``summary.json`` under ``out``, each atomically (a full disk
    leaves no half-written file)."""
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "junit.xml"
    _write_atomically(junit, junit_xml(gate))
    summary = out / "summary.json"
    _write_atomically(summary,
                      (json.dumps(summary_json(gate), indent=2, sort_keys=True) + "\n").encode())
    return junit, summary


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
