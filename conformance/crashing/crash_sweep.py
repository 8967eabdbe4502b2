"""The exhaustive crash-point sweep: crash once at every point a scenario passes.

As ALICE and CrashMonkey do, not at random: run the scenario once, logging every call of
the faults hook as ``(step, point, hit)`` (points are learned from the calls, so an
implementation's own points are covered), then for each call build a case: the recorded
steps before that step, ``ArmCrash(hit, point)``, the step itself, ``crash_reopen``, and
then the rest of the recorded steps. The lockstep crashes the SUT at that call, reopens
it and requires the state to equal the model's before or after the operation; the
``crash_reopen`` right after checks that reopening a second time in a row changes nothing;
the rest of the scenario checks that the recovered queue goes on behaving (a bug such as a
high-water mark lost in the crash shows only when a topic is re-created later). Outcomes
are not compared with the recorded ones (a crash that undid an operation changes what
follows); both sides are re-run in lockstep, as always.

Where a case crashes:

- inside a queue operation (``produce.before_write``...);
- inside a ``close_reopen`` step's close or a reopen step's open (an implementation that
  writes while opening, e.g. to recover, is crashed there too);
- inside the very first open (step 0): the case's trace header carries ``open_crash`` and
  the first step checks that opening again gives the empty state.

Calls made while recovering from the scenario's own injected crashes are not cases (they
cannot be addressed by an ``ArmCrash`` before a step); the same points are reached by the
reopen steps. Each case is a normal trace: a failing one is saved and replays with
``rmqsim replay``. Cases run in log order, so the list is deterministic.

Cost: case ``i`` replays ``i`` steps, so a sweep is quadratic in its steps; the default
``DEFAULT_SWEEP_STEPS`` keeps a sweep of one seed of one profile to seconds.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqsim.conformance.adapter import Factory, queue_factory
from rmqsim.conformance.crashing.crash_record import ArmedCrash
from rmqsim.conformance.layer import layer_for_profile
from rmqsim.conformance.running.lockstep import PointPass
from rmqsim.conformance.running.run import RunResult, replay_trace, run_seed
from rmqsim.conformance.running.run_result import TraceRender
from rmqsim.conformance.running.trace import Trace, TraceStep, parse_lines, write_lines
from rmqsim.conformance.searching.shrink import shrunk_path
from rmqsim.scenarios.queue.ops import ArmCrash, CrashReopen, Step
from rmqsim.scenarios.queue.profiles import ProfileError

__all__ = [
    "DEFAULT_SWEEP_STEPS",
    "STEER_PREFIX",
    "SWEEP_ACTOR",
    "CrashCase",
    "SweepBase",
    "SweepResult",
    "case_digest",
    "case_file_name",
    "case_inputs",
    "case_trace",
    "crash_cases",
    "crash_resolutions",
    "crash_sweep",
    "run_case",
    "sweep_base",
]

#: Steps of the scenario a sweep crashes in, by default (cases grow about linearly with
#: it and each case replays its prefix, so the cost grows quadratically).
DEFAULT_SWEEP_STEPS = 60
#: The actor name of the operations a sweep adds to the scenario.
SWEEP_ACTOR = "crash-sweep"
#: File-name prefix of the traces of a crash case steered beyond the sweeps (a layer's
#: ``GateHooks.steer_crashes``) and of its failing base run.
STEER_PREFIX = "crash-steer-"
_REOPENS = frozenset({"crash_reopen", "close_reopen"})


@dataclass(frozen=True, slots=True)
class CrashCase:
    """Crash at the ``hit``-th call of ``point`` during step ``step`` (0: the first open)."""

    step: int
    during: str
    point: str
    hit: int

    def label(self) -> str:
        return f"step {self.step} ({self.during}) {self.point}#{self.hit}"


@dataclass(slots=True)
class SweepResult:
    """What one sweep found."""

    profile: str
    seed: int
    impl: str
    steps: int
    base: RunResult
    cases: list[CrashCase] = field(default_factory=list)
    failures: list[tuple[CrashCase, RunResult]] = field(default_factory=list)
    resolutions: Counter[str] = field(default_factory=Counter)
    #: Per case, in case order: a digest of what its replay recorded after the header
    #: (every outcome, the crash's resolution, a divergence): equal digests mean the
    #: queue recovered to the same state and went on the same way (see ``case_digest``).
    case_digests: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.base.ok and not self.failures

    @property
    def failed(self) -> int:
        """Its failing cases, and its base run if that failed."""
        return len(self.failures) + (0 if self.base.ok else 1)

    @property
    def points(self) -> list[str]:
        """Distinct points the cases crash at, in first-seen order."""
        return list(dict.fromkeys(case.point for case in self.cases))


def crash_cases(log: list[PointPass], steps: list[Step]) -> list[CrashCase]:
    """The cases of a logged run: every call an ``ArmCrash`` before its step can reach."""
    cases: list[CrashCase] = []
    for passed in log:
        if passed.step == 0:
            addressable = passed.during == "open"
        else:
            kind = steps[passed.step - 1].op.kind
            addressable = passed.during == kind or (
                kind in _REOPENS and passed.during in ("open", "close")
            )
        if addressable:
            cases.append(CrashCase(passed.step, passed.during, passed.point, passed.hit))
    return cases


def case_inputs(base: RunResult) -> tuple[dict[str, Any], list[Step]]:
    """What every crash case of the passing run ``base`` starts from: the header of its
    run's spec marked as a sweep's (``RunSpec.crash_sweep``), and its recorded steps
    (``case_trace`` builds a case of them)."""
    recorded = [Step(s.time_s, s.actor, s.op) for s in parse_lines(base.trace_lines).steps]
    return base.spec.replace(crash_sweep=True).to_header(), recorded


def case_trace(header: dict[str, Any], steps: list[Step], case: CrashCase) -> Trace:
    """The trace of one case (outcomes unrecorded: a crash may change what follows)."""
    if case.step == 0:
        header = dict(header, open_crash=ArmedCrash(case.point, case.hit).to_json())
        chosen = steps[:1]
    else:
        target = steps[case.step - 1]
        chosen = [
            *steps[: case.step - 1],
            Step(target.time_s, SWEEP_ACTOR, ArmCrash(case.hit, case.point)),
            target,
        ]
    last_time = chosen[-1].time_s if chosen else 0
    chosen.append(Step(last_time, SWEEP_ACTOR, CrashReopen()))
    chosen.extend(steps[max(case.step, 1) :])
    return Trace(
        header=header,
        steps=[TraceStep(i, s.time_s, s.actor, s.op, None) for i, s in enumerate(chosen, 1)],
    )


def crash_resolutions(outcome: RunResult) -> list[str]:
    """How each crash injected inside an operation of ``outcome`` resolved, in step order:
    from its step records while its trace is not rendered yet (what the trace's ``crash``
    fields are written from), else parsed from the lines. Parsing every case's trace back
    was ≈12% of a sweep's CPU (``_parse_step``, once per replayed step)."""
    trace = outcome.trace
    if isinstance(trace, TraceRender):
        return [record.crash.resolved for record in trace.records if record.crash is not None]
    return [s.crash.resolved for s in parse_lines(trace).steps if s.crash is not None]


def case_digest(outcome: RunResult) -> str:
    """The digest of a case's replay without its header (which names the crash mode):
    what the in-process crash and a real kill of the same case must agree on."""
    text = "".join(line + "\n" for line in outcome.trace_lines[1:])
    return f"{outcome.status}:{outcome.anomaly}:" + hashlib.sha256(text.encode()).hexdigest()


def case_file_name(result: SweepResult, case: CrashCase, anomaly: str | None) -> str:
    point = "".join(c if c.isalnum() or c in "._-" else "_" for c in case.point)
    return (
        f"{result.profile}-seed{result.seed}-crash-step{case.step}-{point}-"
        f"hit{case.hit}-{anomaly or 'failure'}.jsonl"
    )


def run_case(
    result: SweepResult,
    header: dict[str, Any],
    recorded: list[Step],
    case: CrashCase,
    *,
    impl: str | Factory,
    out: Path | None,
    prefix: str = "",
) -> bool:
    """Replay one ``case`` of the run ``recorded`` (its trace ``header``) and add what it
    found to ``result``: its digest, the crash's resolution, or the failing run (its
    trace saved under ``out``, named ``prefix`` + ``case_file_name``). True if it passed."""
    outcome = replay_trace(case_trace(header, recorded, case), impl=impl)
    resolved = crash_resolutions(outcome) if outcome.ok else []
    result.case_digests.append(case_digest(outcome))
    if outcome.ok:
        result.resolutions.update(resolved)
        if case.step == 0:  # in the first open: recorded in the header, not a step
            result.resolutions["before"] += 1
        return True
    outcome.replay_only = True
    if out is not None:
        outcome.trace_path = out / (prefix + case_file_name(result, case, outcome.anomaly))
        write_lines(outcome.trace_path, outcome.trace_lines)
        # A shrunk trace an earlier run left beside it would pass for this case's.
        shrunk_path(outcome.trace_path).unlink(missing_ok=True)
    result.failures.append((case, outcome))
    return False


@dataclass
class SweepBase:
    """A sweep's first part: its base run, in ``result`` with every case listed (none when
    the base run failed), and what each case replays: the base run's trace ``header`` and
    its ``recorded`` steps."""

    result: SweepResult
    header: dict[str, Any]
    recorded: list[Step]


def sweep_base(
    profile: str, seed: int, *, impl: str | Factory, steps: int | None, crash_mode: str
) -> SweepBase:
    """Run the scenario once, logging every fault point, and list its crash cases
    (``crash_sweep`` then runs them; a test may run some of them with ``run_case``)."""
    refusal = layer_for_profile(profile).crash_sweep_refusal
    if refusal is not None:
        raise ProfileError(refusal.format(profile=profile))
    queue_factory(impl, "a crash sweep")
    base = run_seed(profile, seed, impl=impl, steps=steps, log_faults=True, crash_mode=crash_mode)
    result = SweepResult(profile, seed, base.impl, base.steps, base)
    if not base.ok:
        return SweepBase(result, {}, [])
    header, recorded = case_inputs(base)
    result.cases = crash_cases(base.fault_log, recorded)
    return SweepBase(result, header, recorded)


def crash_sweep(
    profile: str,
    seed: int,
    *,
    impl: str | Factory,
    steps: int | None = DEFAULT_SWEEP_STEPS,
    out: Path | None = None,
    on_case: Callable[[int, int], None] | None = None,
    max_failures: int | None = None,
    crash_mode: str = "inprocess",
) -> SweepResult:
    """Run the scenario once, then every crash case of it; save failing cases under
    ``out`` (when given). ``on_case(done, total)`` reports progress. With
    ``max_failures``, stop after that many failing cases. ``crash_mode`` ``process``:
    every case SIGKILLs a child process (it is in the header, so the cases replay so)."""
    started = time.perf_counter()
    base = sweep_base(profile, seed, impl=impl, steps=steps, crash_mode=crash_mode)
    result = base.result
    for done, case in enumerate(result.cases, start=1):
        ok = run_case(result, base.header, base.recorded, case, impl=impl, out=out)
        if not ok and max_failures is not None and len(result.failures) >= max_failures:
            break
        if on_case is not None:
            on_case(done, len(result.cases))
    result.wall_s = time.perf_counter() - started
    return result
