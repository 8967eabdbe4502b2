"""Property-based fuzzing: a hypothesis state machine that drives the model and a SUT in
lockstep, and a ``fuzz`` driver that shrinks a failure to a replayable trace.

Why a second explorer next to the seeded simulations: the simulations are fast and find
problems in long, realistic runs; hypothesis is slower per step but *shrinks*, so what it
reports is a program of a handful of steps. Every step goes through ``Lockstep.execute``,
the one checking path the runner, replay and the shrinker use: the machine has no checks of
its own, a ``Divergence`` raised by the runner is the failure. The steps the runner recorded
become a normal trace (``conformance.run.lockstep_result``), which ``rmqsim replay`` reads.

The machine is built per implementation (``make_machine(factory)``), so the same rules fuzz
our RocksMQ, a user's queue or a deliberately wrong model. Its rules cover the whole
operation vocabulary: topics, groups and ids are hypothesis bundles (so later steps reuse
what earlier ones made, including topics since destroyed and ids since retained away), names
are drawn from pools of names that contain each other and names at and over the length
limit, payloads may be empty, crashes are armed at the fault points the SUT has shown so far.

Settings profiles (``FUZZ_PROFILES``, registered with hypothesis as ``rmqsim-dev``,
``rmqsim-ci`` and ``rmqsim-nightly``, prefixed so that loading them never replaces a user's
own ``ci`` profile): ``dev`` a quick look, ``ci`` derandomized and bounded, ``nightly`` many
examples. All run without an example database, so a run depends on its seed only.
"""

from __future__ import annotations

import io
import random
import shlex
import tempfile
import time
import unittest
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypedDict

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from rmqsim.conformance.adapter import DEFAULT_IMPL, Factory, queue_factory
from rmqsim.conformance.lockstep import Divergence, Lockstep
from rmqsim.conformance.report import render_op, render_outcome
from rmqsim.conformance.run import RunResult, lockstep_result, trace_header
from rmqsim.conformance.scratch import scratch_root
from rmqsim.conformance.trace import parse_lines
from rmqsim.conformance.watchdog import op_timeout, shrink_op_timeout_s
from rmqsim.model.api import MQConfig
from rmqsim.scenarios import ops
from rmqsim.scenarios.names import (
    AT_LIMIT_NAMES,
    CASE_PAIRS,
    DEFAULT_GROUP_NAMES,
    DEFAULT_TOPIC_NAMES,
    NORMALIZATION_PAIRS,
    OVER_LIMIT_NAMES,
    PROPERTY_KEYS,
    PROPERTY_VALUES,
)
from rmqsim.scenarios.ops import Message, Op, Outcome, Step

#: The trace header's ``profile`` for traces written by the fuzzer.
FUZZ_PROFILE_NAME = "fuzz"
#: The actor of every fuzzer step (one sequential client).
FUZZ_ACTOR = "fuzz"


class _CommonSettings(TypedDict):
    """The hypothesis settings every fuzz profile shares."""

    deadline: None
    database: None
    print_blob: bool
    report_multiple_bugs: bool
    suppress_health_check: tuple[HealthCheck, ...]
    phases: tuple[Phase, ...]


_COMMON: _CommonSettings = {
    "deadline": None,
    "database": None,
    "print_blob": True,
    "report_multiple_bugs": False,
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.data_too_large),
    "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
}

#: Settings per fuzz profile; ``max_examples`` and ``stateful_step_count`` are the bounds.
FUZZ_PROFILES: dict[str, settings] = {
    "dev": settings(max_examples=50, stateful_step_count=40, **_COMMON),
    "ci": settings(max_examples=40, stateful_step_count=30, derandomize=True, **_COMMON),
    "nightly": settings(max_examples=2000, stateful_step_count=80, **_COMMON),
}
for _name, _settings in FUZZ_PROFILES.items():
    settings.register_profile(f"rmqsim-{_name}", _settings)
#: The seed of the ``ci`` profile when none is given (the others draw a fresh one).
CI_SEED = 0

#: Queue configurations an example starts from: small pages so that a few bytes close a
#: page, and retention by time, by size, and both. The first is what examples shrink to.
FUZZ_CONFIGS: tuple[MQConfig, ...] = (
    MQConfig(page_size_bytes=32, retention_time_s=10, retention_size_bytes=64),
    MQConfig(page_size_bytes=16, retention_time_s=-1, retention_size_bytes=40),
    MQConfig(page_size_bytes=48, retention_time_s=5, retention_size_bytes=-1),
)

#: Valid topic names: prefixes and suffixes of each other, one at the byte limit and one a
#: byte under it (those two contain each other too), and names that differ from another
#: only by case or only by Unicode normalization (NFC vs NFD). The first is what examples
#: shrink to.
TOPIC_NAMES: tuple[str, ...] = (
    *DEFAULT_TOPIC_NAMES[:4],
    AT_LIMIT_NAMES[0],
    AT_LIMIT_NAMES[1],
    CASE_PAIRS[0][1],
    *NORMALIZATION_PAIRS[0],
)
#: Valid group names, in the same spirit ("0" and "10" collide with "t1"+"0" and "t"+"10").
GROUP_NAMES: tuple[str, ...] = (
    *DEFAULT_GROUP_NAMES[:6],
    AT_LIMIT_NAMES[3],
    CASE_PAIRS[1][1],
    *NORMALIZATION_PAIRS[1],
)
#: Invalid names (empty, slashes, NUL, a byte over the limit): one rule of their own, so
#: that most steps use valid names and reach deep states.
INVALID_NAMES: tuple[str, ...] = ("", "t/1", "t\0", OVER_LIMIT_NAMES[1])
#: Ids no produce of an example issues (or only a very long one would).
NEVER_ISSUED_IDS: tuple[int, ...] = (-1, 0, 10_000, 2**63 - 1, -(2**63))
#: Clock jumps in seconds: small, around the retention times of FUZZ_CONFIGS, backward.
CLOCK_JUMPS_S: tuple[int, ...] = (1, 6, 11, 60, 3600, -3)
#: ``n`` of a consume: small, larger than any topic here, thousands (more than any cap a
#: queue might put on one poll), zero, invalid.
CONSUME_SIZES: tuple[int, ...] = (1, 2, 3, 100, 5000, 0, -1)

#: Payload sizes in bytes: empty, small, and around the page sizes of FUZZ_CONFIGS.
PAYLOAD_SIZES: tuple[int, ...] = (0, 1, 5, 16, 17, 33, 40)


def _favour_first(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Half the draws are the first name, so that steps often meet on one topic or
    group (bugs need several operations on the same one); the rest spread over all."""
    return st.just(names[0]) | st.sampled_from(names)


_topic_names = _favour_first(TOPIC_NAMES)
_group_names = _favour_first(GROUP_NAMES)
_properties = st.dictionaries(
    st.sampled_from(PROPERTY_KEYS), st.sampled_from(PROPERTY_VALUES), max_size=2
).map(lambda d: tuple(sorted(d.items())))
_payloads = st.sampled_from(PAYLOAD_SIZES).flatmap(
    lambda size: st.binary(min_size=size, max_size=size)
)
#: Whether to crash inside a writing operation, and at which fault-hook call (1-based) of
#: it: mostly not (a crash costs a reopen), shrinking to not.
_crash_hits = st.sampled_from((None, None, None, 1, 2))
_messages = st.lists(st.builds(Message, payload=_payloads, properties=_properties), max_size=4).map(
    tuple
)


class _SeedOnlyTestCase:
    """``Machine.TestCase`` as hypothesis builds it, run without hypothesis's draws of
    local constants (``_without_local_constants``): the README's way to fuzz a queue from
    a project's own test suite must depend on its seed only, as ``fuzz`` does (measured
    before this: seed 7 on a wrong model ran 1,211 examples in a bare process and 2,655
    after one user module and one rmqsim module more were imported)."""

    def __get__(
        self, obj: LockstepMachine | None, owner: type[LockstepMachine]
    ) -> type[unittest.TestCase]:
        machine = owner if obj is None else type(obj)
        base = super(LockstepMachine, machine).TestCase

        class TestCase(base):  # type: ignore[misc, valid-type]  # a base known at run time
            def runTest(self) -> None:
                with _without_local_constants():
                    super().runTest()

            # What hypothesis's pytest plugin looks for on a state machine's test.
            vars(runTest).update(is_hypothesis_test=True, _hypothesis_state_machine_class=machine)

        TestCase.__name__ = base.__name__
        TestCase.__qualname__ = base.__qualname__
        return TestCase


class LockstepMachine(RuleBasedStateMachine):
    """Every rule is one operation through ``Lockstep.execute``; see the module docstring.

    Subclasses made by ``make_machine`` set ``factory`` and ``impl_name``. ``last`` is the
    most recent instance: after a failing run it is hypothesis's final replay of the
    shrunk example, whose lockstep holds the recorded steps.
    """

    factory: ClassVar[Factory]
    impl_name: ClassVar[str] = DEFAULT_IMPL
    last: ClassVar[LockstepMachine | None] = None
    examples: ClassVar[int] = 0
    #: Operations executed and crashes injected over every example of the campaign.
    steps_run: ClassVar[int] = 0
    crashes_injected: ClassVar[int] = 0
    #: The example (1-based) that first failed, before shrinking; 0 while none has.
    first_failure: ClassVar[int] = 0

    topics = Bundle("topics")
    groups = Bundle("groups")
    ids = Bundle("ids")

    #: ``make_machine(f).TestCase``: hypothesis's, but depending on the seed only.
    TestCase = _SeedOnlyTestCase()  # type: ignore[assignment]  # a descriptor for the class

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        cls.last = self
        cls.examples += 1
        self._tmp = tempfile.TemporaryDirectory(prefix="rmqsim-fuzz-", dir=scratch_root())
        self.lockstep: Lockstep | None = None
        self.now_s = 0
        self.diverged = False

    # ------------------------------------------------------------------ plumbing

    def _do(self, op: Op, crash: int | None = None) -> Outcome:
        """Execute one operation in lockstep (the runner's checks are the invariants);
        with ``crash``, first arm a crash at the ``crash``-th fault-hook call inside it."""
        assert self.lockstep is not None, "the initialize rule opens the lockstep first"
        try:
            if crash is not None:
                self.lockstep.execute(Step(self.now_s, FUZZ_ACTOR, ops.ArmCrash(hit=crash)))
            return self.lockstep.execute(Step(self.now_s, FUZZ_ACTOR, op))
        except Divergence as divergence:
            self._failed()
            # What differed, for a test run by hypothesis's own runner (``TestCase``),
            # which shows the exception and its notes but not rmqsim's failure report.
            divergence.add_note(f"model: {render_outcome(divergence.expected)}")
            divergence.add_note(f"sut:   {render_outcome(divergence.actual)}")
            divergence.add_note(f"detail: {divergence.detail}")
            for difference in divergence.diffs:
                divergence.add_note(f"  {difference.render()}")
            raise

    def _failed(self) -> None:
        self.diverged = True
        cls = type(self)
        cls.first_failure = cls.first_failure or cls.examples

    def _crash_points(self) -> list[str]:
        """Fault points seen inside queue operations so far (sorted: deterministic)."""
        if self.lockstep is None:
            return []
        return sorted(
            {
                point
                for kind, point in self.lockstep.faults.seen
                if kind != "open" and not point.startswith(("open.", "close."))
            }
        )

    def teardown(self) -> None:
        """Final full comparison (unless a step already diverged), then release."""
        try:
            if self.lockstep is not None and not self.diverged and self.lockstep.records:
                try:
                    self.lockstep.finish(self.lockstep.stats.steps, self.lockstep.records[-1].step)
                except Divergence:
                    self._failed()
                    raise
        finally:
            if self.lockstep is not None:
                cls = type(self)
                cls.steps_run += self.lockstep.stats.steps
                cls.crashes_injected += self.lockstep.stats.crashes_injected
                self.lockstep.close()
            self._tmp.cleanup()

    # ------------------------------------------------------------------ rules

    @initialize(target=topics, config=st.sampled_from(FUZZ_CONFIGS))
    def open_queue(self, config: MQConfig) -> Any:
        """Open the lockstep and create the first topic: most bugs need a topic, and a
        step every example shares is one fewer for generation to find."""
        self.lockstep = Lockstep(type(self).factory, config, Path(self._tmp.name))
        self._do(ops.CreateTopic(TOPIC_NAMES[0]))
        return TOPIC_NAMES[0]

    @initialize(target=ids)
    def never_issued_ids(self) -> Any:
        """Seed the ids bundle with ids no produce issues (besides issued and later
        retained-away ones, seeks must meet never-issued ones)."""
        return multiple(*NEVER_ISSUED_IDS)

    @rule(target=topics, topic=_topic_names)
    def create_topic(self, topic: str) -> Any:
        return topic if self._do(ops.CreateTopic(topic)).ok else multiple()

    @rule(topic=topics, crash=_crash_hits)
    def destroy_topic(self, topic: str, crash: int | None) -> None:
        self._do(ops.DestroyTopic(topic), crash)

    @rule(target=groups, topic=topics, group=_group_names, crash=_crash_hits)
    def create_group(self, topic: str, group: str, crash: int | None) -> Any:
        return (topic, group) if self._do(ops.CreateGroup(topic, group), crash).ok else multiple()

    @rule(pair=groups, crash=_crash_hits)
    def destroy_group(self, pair: tuple[str, str], crash: int | None) -> None:
        self._do(ops.DestroyGroup(*pair), crash)

    @rule(topic=topics, group=_group_names)
    def exist_group(self, topic: str, group: str) -> None:
        self._do(ops.ExistGroup(topic, group))

    @rule(target=ids, topic=topics, messages=_messages, crash=_crash_hits)
    def produce(self, topic: str, messages: tuple[Message, ...], crash: int | None) -> Any:
        outcome = self._do(ops.Produce(topic, messages), crash)
        if not outcome.ok:
            return multiple()
        assert type(outcome.value) is tuple, "a produce returns its ids"
        return multiple(*outcome.value)

    @rule(pair=groups, n=st.sampled_from(CONSUME_SIZES), crash=_crash_hits)
    def consume(self, pair: tuple[str, str], n: int, crash: int | None) -> None:
        self._do(ops.Consume(*pair, n), crash)

    @rule(pair=groups, msg_id=ids, then_consume=st.none() | st.sampled_from(CONSUME_SIZES))
    def seek(self, pair: tuple[str, str], msg_id: int, then_consume: int | None) -> None:
        """Seek, and often read right away as a consumer does (shrinks to no read)."""
        self._do(ops.Seek(*pair, msg_id))
        if then_consume is not None:
            self._do(ops.Consume(*pair, then_consume))

    @rule(pair=groups)
    def seek_to_latest(self, pair: tuple[str, str]) -> None:
        self._do(ops.SeekToLatest(*pair))

    @rule(topic=topics)
    def get_latest(self, topic: str) -> None:
        self._do(ops.GetLatest(topic))

    @rule(seconds=st.sampled_from(CLOCK_JUMPS_S))
    def advance_clock(self, seconds: int) -> None:
        if self.now_s + seconds < 0:  # the clock never goes below the epoch
            seconds = -seconds
        self._do(ops.AdvanceClock(seconds))
        self.now_s += seconds

    @rule(crash=_crash_hits)
    def run_retention(self, crash: int | None) -> None:
        self._do(ops.RunRetention(), crash)

    @rule(crash=st.booleans())
    def reopen(self, crash: bool) -> None:
        """Crash (or close) between operations and reopen the same path."""
        self._do(ops.CrashReopen() if crash else ops.CloseReopen())

    @rule(
        kind=st.sampled_from(("create_topic", "create_group", "produce", "consume")),
        name=st.sampled_from(INVALID_NAMES),
        topic=topics,
    )
    def invalid_name(self, kind: str, name: str, topic: str) -> None:
        """An operation naming an invalid topic or group (InvalidArgument, nothing changes)."""
        by_kind: dict[str, Op] = {
            "create_topic": ops.CreateTopic(name),
            "create_group": ops.CreateGroup(topic, name),
            "produce": ops.Produce(name, ()),
            "consume": ops.Consume(topic, name, 1),
        }
        self._do(by_kind[kind])

    @precondition(lambda self: bool(self._crash_points()))
    @rule(data=st.data(), hit=st.integers(min_value=1, max_value=3))
    def arm_crash(self, data: st.DataObject, hit: int) -> None:
        point = data.draw(st.none() | st.sampled_from(self._crash_points()), label="point")
        self._do(ops.ArmCrash(hit=hit, point=point))


def make_machine(impl: str | Factory = DEFAULT_IMPL) -> type[LockstepMachine]:
    """A state machine class fuzzing ``impl`` (``MOD:FACTORY`` or a factory).

    Use it from a test with ``run_state_machine_as_test(make_machine(f), settings=...)``
    or ``TestMyQueue = make_machine(f).TestCase``.
    """
    name, factory = queue_factory(impl, "fuzzing")
    return type(
        "LockstepMachine",
        (LockstepMachine,),
        {"factory": staticmethod(factory), "impl_name": name, "__module__": __name__},
    )


# ---------------------------------------------------------------------- the fuzz driver


@dataclass(slots=True)
class FuzzResult:
    """What one fuzz campaign did and, when it failed, the shrunk failure."""

    impl: str
    profile: str
    seed: int
    examples: int
    max_steps: int
    steps: int
    crashes_injected: int
    #: How many examples ran until the first failure (the rest shrank it); 0 if none.
    examples_to_find: int
    wall_s: float
    failure: RunResult | None = None
    #: Hypothesis's own report of the final failing run (the program and a
    #: ``@reproduce_failure`` line).
    hypothesis_report: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def reproduce_line(self) -> str | None:
        return next((line for line in self.hypothesis_report if "@reproduce_failure" in line), None)


def resolve_seed(profile: str, seed: int | None) -> int:
    """The seed a campaign runs with: the given one, ``CI_SEED`` for the ci profile (so
    CI is deterministic), else a fresh one (printed, so any run can be repeated)."""
    if seed is not None:
        return seed
    return CI_SEED if profile == "ci" else random.SystemRandom().randrange(2**32)


def fuzz_repro(impl: str, profile: str, seed: int, examples: int | None, steps: int | None) -> str:
    """The ``rmqsim fuzz`` command line that repeats a campaign."""
    parts = ["rmqsim", "fuzz", "--profile", profile, "--seed", str(seed)]
    if examples is not None:
        parts += ["--examples", str(examples)]
    if steps is not None:
        parts += ["--steps", str(steps)]
    if impl != DEFAULT_IMPL:
        parts += ["--impl", impl]
    return shlex.join(parts)


@contextmanager
def _without_local_constants() -> Iterator[None]:
    """Draw only from the fuzzer's own strategies, not from the literals of whatever
    "local" modules the process has imported.

    Hypothesis (since 6.131) mixes into its draws the constants of every module it deems
    local: loaded from outside site-packages (so rmqsim itself in an editable install,
    and a user's adapter), not a test file. That pool depends on what the process
    imported before and during the campaign, so the same seed gave another program in
    the CLI than in a test run (measured: 587 against 923 examples for one seed, after a
    few more rmqsim modules were imported). No public setting turns it off; this
    empties the pool for the campaign through the function hypothesis calls for it, and
    does nothing if a later hypothesis has no such function (a test then fails).
    """
    from hypothesis.internal.conjecture import providers

    original = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if original is None or cache is None:
        yield
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache.clear()  # it holds the allowed constants per kind of draw, from the old pool
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()


@contextmanager
def _collect_reports(lines: list[str]) -> Iterator[None]:
    with with_reporter(lambda value: lines.extend(str(value).splitlines())):
        yield


def fuzz(
    impl: str | Factory = DEFAULT_IMPL,
    *,
    profile: str = "ci",
    examples: int | None = None,
    steps: int | None = None,
    seed: int | None = None,
) -> FuzzResult:
    """Fuzz ``impl`` with the state machine; on a failure, return the shrunk run.

    Deterministic for a given (implementation, profile, examples, steps, seed). Its
    calls into the SUT are bounded as a shrink's are (``watchdog.shrink_op_timeout_s``).
    """
    if profile not in FUZZ_PROFILES:
        raise ValueError(f"unknown fuzz profile {profile!r}; known: {', '.join(FUZZ_PROFILES)}")
    base = FUZZ_PROFILES[profile]
    chosen = settings(
        base,
        max_examples=examples if examples is not None else base.max_examples,
        stateful_step_count=steps if steps is not None else base.stateful_step_count,
    )
    used_seed = resolve_seed(profile, seed)
    machine = hypothesis_seed(used_seed)(make_machine(impl))
    result = FuzzResult(
        impl=machine.impl_name,
        profile=profile,
        seed=used_seed,
        examples=0,
        examples_to_find=0,
        steps=0,
        crashes_injected=0,
        max_steps=chosen.stateful_step_count,
        wall_s=0.0,
    )
    started = time.perf_counter()
    try:
        # Short programs, shrunk by re-running: the shrinking bound (each example that still
        # hangs waits it out once).
        with (
            _collect_reports(result.hypothesis_report),
            _without_local_constants(),
            op_timeout(shrink_op_timeout_s()),
        ):
            run_state_machine_as_test(machine, settings=chosen)
    except Divergence as divergence:
        # Anything else (the SUT failing to reopen, a flaky SUT) propagates, as in ``run``.
        result.failure = _failure(machine, result, divergence, examples, steps)
        result.hypothesis_report.extend(getattr(divergence, "__notes__", ()))
    finally:
        result.wall_s = time.perf_counter() - started
        result.examples = machine.examples
        result.examples_to_find = machine.first_failure
        result.steps = machine.steps_run
        result.crashes_injected = machine.crashes_injected
    return result


def _failure(
    machine: type[LockstepMachine],
    result: FuzzResult,
    divergence: Divergence,
    examples: int | None,
    steps: int | None,
) -> RunResult:
    """The shrunk failing example as a run result with a replayable trace."""
    last = machine.last
    assert last is not None and last.lockstep is not None
    header = trace_header(
        profile=FUZZ_PROFILE_NAME,
        profile_config={
            "fuzz_profile": result.profile,
            "max_examples": examples,
            "max_steps": result.max_steps,
        },
        config=last.lockstep.config,
        seed=result.seed,
        impl=result.impl,
        steps=None,
    )
    # The header carries the command, so a replay of the trace reports it too.
    header["repro"] = fuzz_repro(result.impl, result.profile, result.seed, examples, steps)
    return lockstep_result(last.lockstep, header, divergence, time.perf_counter())


def render_program(run: RunResult) -> str:
    """The shrunk program, one operation per line with the model's outcome."""
    out = io.StringIO()
    trace = parse_lines(run.trace_lines)
    config = trace.header["config"]
    out.write(f"shrunk program ({len(trace.steps)} steps, config {config}):\n")
    for step in trace.steps:
        out.write(f"  {step.index:>3}  t={step.time_s:<6} {render_op(step.op)}")
        out.write(f"  -> {render_outcome(step.outcome)}\n")
    return out.getvalue().rstrip("\n")
