"""Property-based fuzzing: a hypothesis state machine that drives the model and a SUT in
lockstep, and a ``fuzz`` driver that shrinks a failure to a replayable trace.

Why a second explorer next to the seeded simulations: the simulations are fast and find
problems in long, realistic runs; hypothesis is slower per step but draws short programs
of its own choosing (swarm rules, ``target``), and a failing one is shrunk (by rmqsim's
shrinker, ``_shrunk``) to a program of a handful of steps. Every step goes through
``Lockstep.execute``, the one checking path the runner, replay and the shrinker use: the
machine has no checks of its own, a ``Divergence`` raised by the runner is the failure. The
steps the runner recorded become a normal trace
(``conformance.running.run.lockstep_result``), which ``rmqsim replay`` reads.

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
import json
import random
import shlex
import tempfile
import time
import unittest
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from hypothesis import HealthCheck, Phase, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
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
from rmqsim.conformance.layer import UnknownLayerError, layer_for_header, layer_named
from rmqsim.conformance.queue.layer import lockstep_result, trace_header
from rmqsim.conformance.reporting.report import render_op, render_outcome
from rmqsim.conformance.running.lockstep import Divergence, Lockstep
from rmqsim.conformance.running.pool import worker_pool
from rmqsim.conformance.running.run import RunResult, parse_run_lines
from rmqsim.conformance.running.scratch import scratch_root
from rmqsim.conformance.running.trace import read_trace
from rmqsim.conformance.running.watchdog import op_timeout, op_timeout_s
from rmqsim.conformance.searching.fuzz_layers import fuzz_layer_round, fuzzable_layers
from rmqsim.conformance.searching.shrink import shrink_result
from rmqsim.model.api import MQConfig, State
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
from rmqsim.scenarios.queue import ops
from rmqsim.scenarios.queue.ops import Message, Op, Outcome, Step

__all__ = [
    "AGE_JUMPS_S",
    "BULK_COUNTS",
    "BULK_PAYLOAD_SIZES",
    "BYSTANDER_BACKLOG",
    "BYSTANDER_TOPIC",
    "CAMPAIGN_FILE",
    "CI_EXAMPLES",
    "CI_SEED",
    "CLOCK_JUMPS_S",
    "CONSUME_SIZES",
    "EARLY_IDS",
    "FRESH_STARTS",
    "FUZZ_ACTOR",
    "FUZZ_BUDGETS",
    "FUZZ_CONFIGS",
    "FUZZ_PROFILES",
    "FUZZ_PROFILE_NAME",
    "GROUP_NAMES",
    "INVALID_NAMES",
    "NEVER_ISSUED_IDS",
    "PAYLOAD_SIZES",
    "ROUND_PHASES",
    "TOPIC_NAMES",
    "FuzzBudget",
    "FuzzOptions",
    "FuzzPlan",
    "FuzzResult",
    "LockstepMachine",
    "RoundResult",
    "RoundSpec",
    "Start",
    "corpus_starts",
    "coverage_keys",
    "default_steps",
    "fuzz",
    "fuzz_repro",
    "fuzzed_impl_name",
    "make_machine",
    "render_program",
    "resolve_seed",
    "round_seed",
    "run_round",
    "state_observations",
]

if TYPE_CHECKING:
    from typing_extensions import Unpack

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
    "ci": settings(max_examples=50, stateful_step_count=50, derandomize=True, **_COMMON),
    "nightly": settings(max_examples=600, stateful_step_count=80, **_COMMON),
}
for _name, _settings in FUZZ_PROFILES.items():
    settings.register_profile(f"rmqsim-{_name}", _settings)
#: The seed of the ``ci`` profile when none is given (the others draw a fresh one).
CI_SEED = 0
#: The examples of a ``ci`` campaign: about the default gate's CPU time here.
CI_EXAMPLES = 800

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
#: Messages in one bulk produce: a few (a produce of several messages, so a crash can
#: land between two of them), dozens, and a backlog over the 300 a capped poll returns.
BULK_COUNTS: tuple[int, ...] = (2, 8, 40, 350)
#: Payload bytes of each message of a bulk produce: 1 closes a page every few dozen
#: messages, 17 every one or two (FUZZ_CONFIGS's page sizes are 16 to 48 bytes).
BULK_PAYLOAD_SIZES: tuple[int, ...] = (1, 17)
#: Clock jumps before a retention pass: past every retention time of FUZZ_CONFIGS.
AGE_JUMPS_S: tuple[int, ...] = (11, 3600)
#: Ids a seek to the oldest messages uses: once retention has acted, retained away.
EARLY_IDS: tuple[int, ...] = (1, 2, 3)
#: A bystander: a topic whose name extends the first topic's, named by no rule (it is not
#: in TOPIC_NAMES), which examples starting fresh from a configuration other than the first
#: one start with (``LockstepMachine._start``), with three messages of 17 bytes that close a
#: page in every configuration of FUZZ_CONFIGS: a destroy of ``t`` must leave them alone.
#: It costs no draw and no rule, so a seed generates the programs it did without it (only
#: ``target``, which counts its pages, may steer elsewhere), and a shrink to the first
#: configuration drops it.
BYSTANDER_TOPIC = TOPIC_NAMES[0] + "2"
BYSTANDER_BACKLOG: tuple[Message, ...] = (Message(b"p" * 17),) * 3


def _favour_first(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Half the draws are the first name, so that steps often meet on one topic or
    group (bugs need several operations on the same one); the rest spread over all."""
    return st.just(names[0]) | st.sampled_from(names)


_topic_names = _favour_first(TOPIC_NAMES)
_group_names = _favour_first(GROUP_NAMES)
#: A second group's name: any but the first group's, half the draws the second name.
_other_group_names = _favour_first(GROUP_NAMES[1:])
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
_then_consume = st.none() | st.sampled_from(CONSUME_SIZES)


@dataclass(frozen=True, slots=True)
class Start:
    """Where an example starts: a queue configuration and a program run before the
    generated steps (empty, or a trace of the regression corpus)."""

    config: MQConfig
    prefix: tuple[tuple[int, Op], ...] = ()
    #: The corpus file the prefix came from (for reports).
    source: str = ""


#: The starts of every machine: a fresh queue of each configuration.
FRESH_STARTS: tuple[Start, ...] = tuple(Start(config) for config in FUZZ_CONFIGS)


def _renamed(function: Any, name: str) -> Any:
    """``function`` under another name: a second rule doing the same thing."""

    def alias(self: Any, **arguments: Any) -> Any:
        return function(self, **arguments)

    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = function.__doc__
    return alias


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
    failing example (shrunk, when the settings have hypothesis's shrink phase), whose
    lockstep holds the recorded steps.
    """

    factory: ClassVar[Factory]
    impl_name: ClassVar[str] = DEFAULT_IMPL
    last: ClassVar[LockstepMachine | None] = None
    examples: ClassVar[int] = 0
    #: Operations executed and crashes injected over every example of the campaign.
    steps_run: ClassVar[int] = 0
    crashes_injected: ClassVar[int] = 0
    #: The example (1-based) that first failed, before shrinking; 0 while none has; and
    #: when (seconds after ``started_at``, which ``run_round`` sets).
    first_failure: ClassVar[int] = 0
    first_failure_s: ClassVar[float] = 0.0
    started_at: ClassVar[float] = 0.0
    #: Where examples start (``make_machine`` adds the regression corpus's programs).
    starts: ClassVar[tuple[Start, ...]] = FRESH_STARTS
    #: What the campaign reached: operation/outcome pairs, fault points, state features
    #: (``coverage_keys``); ``make_machine`` gives each machine class its own set.
    coverage: ClassVar[set[str]] = set()

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
        self.start_topics: list[str] = []
        self.start_groups: list[tuple[str, str]] = []
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
            outcome = self.lockstep.execute(Step(self.now_s, FUZZ_ACTOR, op))
            type(self).coverage.add(f"{op.kind}:{outcome.error or 'ok'}")
            return outcome
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
        if not cls.first_failure:
            cls.first_failure = cls.examples
            cls.first_failure_s = time.perf_counter() - cls.started_at

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
                self._steer()
        finally:
            if self.lockstep is not None:
                cls = type(self)
                cls.steps_run += self.lockstep.stats.steps
                cls.crashes_injected += self.lockstep.stats.crashes_injected
                self.lockstep.close()
            self._tmp.cleanup()

    def _steer(self) -> None:
        """Tell hypothesis how far this example got (``target``: its target phase climbs
        toward more of each) and record the state features it reached."""
        assert self.lockstep is not None
        observed = state_observations(self.lockstep.model.snapshot())
        observed["crashes"] = self.lockstep.stats.crashes_injected
        for label, value in observed.items():
            target(float(value), label=label)
        cls = type(self)
        cls.coverage.update(coverage_keys(observed))
        cls.coverage.update(f"fault:{kind}:{point}" for kind, point in self.lockstep.faults.seen)

    def _run_prefix(self, start: Start) -> tuple[list[str], list[tuple[str, str]]]:
        """Run a corpus program's steps at their times; the topics and groups it created."""
        for time_s, op in start.prefix:
            self.now_s = time_s
            self._do(op)
            if isinstance(op, ops.AdvanceClock):
                self.now_s += op.seconds
        made = [op for _, op in start.prefix]
        topics = sorted({op.topic for op in made if isinstance(op, ops.CreateTopic)})
        groups = sorted({(op.topic, op.group) for op in made if isinstance(op, ops.CreateGroup)})
        return topics, groups

    # ------------------------------------------------------------------ rules

    def _start(self, data: st.DataObject) -> None:
        """Open the lockstep at a start (a configuration, or a corpus program to run
        first) and create the first topic, once, whichever initialize rule runs first."""
        if self.lockstep is not None:
            return
        starts = type(self).starts
        fresh = len(FRESH_STARTS)
        # Half the examples start from a corpus program, when there is one (shrinks to fresh).
        if len(starts) > fresh and data.draw(st.booleans(), label="from corpus"):
            start = starts[data.draw(st.integers(fresh, len(starts) - 1), label="corpus")]
        else:
            start = starts[data.draw(st.integers(0, fresh - 1), label="start")]
        self.lockstep = Lockstep(type(self).factory, start.config, Path(self._tmp.name))
        topics, groups = self._run_prefix(start)
        self._do(ops.CreateTopic(TOPIC_NAMES[0]))
        if start in FRESH_STARTS[1:]:
            self._do(ops.CreateTopic(BYSTANDER_TOPIC))
            self._do(ops.Produce(BYSTANDER_TOPIC, BYSTANDER_BACKLOG))
        self.start_topics = [TOPIC_NAMES[0], *(name for name in topics if name != TOPIC_NAMES[0])]
        first = (TOPIC_NAMES[0], GROUP_NAMES[0])
        self.start_groups = [pair for pair in groups if pair != first]

    @initialize(target=topics, data=st.data())
    def open_queue(self, data: st.DataObject) -> Any:
        """Start, with the first topic: most bugs need a topic, and a step every example
        shares is one fewer for generation to find."""
        self._start(data)
        return multiple(*self.start_topics)

    @initialize(target=groups, data=st.data())
    def first_group(self, data: st.DataObject) -> Any:
        """A group on the first topic (acks, retention and lag need one), and the groups
        a corpus program made."""
        self._start(data)
        self._do(ops.CreateGroup(TOPIC_NAMES[0], GROUP_NAMES[0]))
        return multiple((TOPIC_NAMES[0], GROUP_NAMES[0]), *self.start_groups)

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

    @rule(target=groups, topic=topics, group=_other_group_names)
    def another_group(self, topic: str, group: str) -> Any:
        """A group named other than the first group: on the first topic, it lags behind
        that one (from -1)."""
        return (topic, group) if self._do(ops.CreateGroup(topic, group)).ok else multiple()

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

    @rule(
        target=ids,
        topic=topics,
        count=st.sampled_from(BULK_COUNTS),
        size=st.sampled_from(BULK_PAYLOAD_SIZES),
        crash=_crash_hits,
    )
    def produce_bulk(self, topic: str, count: int, size: int, crash: int | None) -> Any:
        """Many messages in one produce: pages close, a backlog builds, and a crash armed
        inside lands in a produce of several messages. Its first, middle and last ids
        join the bundle."""
        outcome = self._do(ops.Produce(topic, (Message(b"b" * size),) * count), crash)
        if not outcome.ok:
            return multiple()
        assert type(outcome.value) is tuple, "a produce returns its ids"
        issued = outcome.value
        return multiple(*sorted({issued[0], issued[len(issued) // 2], issued[-1]}))

    @rule(pair=groups, n=st.sampled_from(CONSUME_SIZES), crash=_crash_hits)
    def consume(self, pair: tuple[str, str], n: int, crash: int | None) -> None:
        self._do(ops.Consume(*pair, n), crash)

    # Swarm weights: the operations that build state get a second rule each, so that
    # hypothesis's per-example switching of rules gives them a weight of 0, 1 or 2.
    create_group_2 = rule(target=groups, topic=topics, group=_group_names, crash=_crash_hits)(
        _renamed(create_group, "create_group_2")
    )
    produce_2 = rule(target=ids, topic=topics, messages=_messages, crash=_crash_hits)(
        _renamed(produce, "produce_2")
    )
    consume_2 = rule(pair=groups, n=st.sampled_from(CONSUME_SIZES), crash=_crash_hits)(
        _renamed(consume, "consume_2")
    )
    another_group_2 = rule(target=groups, topic=topics, group=_other_group_names)(
        _renamed(another_group, "another_group_2")
    )

    def _seek(self, pair: tuple[str, str], msg_id: int, then_consume: int | None) -> None:
        self._do(ops.Seek(*pair, msg_id))
        if then_consume is not None:
            self._do(ops.Consume(*pair, then_consume))

    @rule(pair=groups, msg_id=ids, then_consume=_then_consume)
    def seek(self, pair: tuple[str, str], msg_id: int, then_consume: int | None) -> None:
        """Seek, and often read right away as a consumer does (shrinks to no read)."""
        self._seek(pair, msg_id, then_consume)

    @rule(pair=groups, msg_id=st.sampled_from(EARLY_IDS), then_consume=_then_consume)
    def seek_early(self, pair: tuple[str, str], msg_id: int, then_consume: int | None) -> None:
        """Seek to one of the first ids: retained away once retention has acted."""
        self._seek(pair, msg_id, then_consume)

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

    @rule(seconds=st.sampled_from(AGE_JUMPS_S), crash=_crash_hits)
    def age_and_retain(self, seconds: int, crash: int | None) -> None:
        """Jump past the retention time and run a pass: acked pages go, ids are
        retained away (two steps generation would otherwise have to find together)."""
        self._do(ops.AdvanceClock(seconds))
        self.now_s += seconds
        self._do(ops.RunRetention(), crash)

    @rule(target=topics, topic=topics, crash=_crash_hits)
    def recreate_topic(self, topic: str, crash: int | None) -> Any:
        """Destroy a topic and create the same name again (ids continue under it)."""
        self._do(ops.DestroyTopic(topic), crash)
        return topic if self._do(ops.CreateTopic(topic)).ok else multiple()

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


def state_observations(state: State) -> dict[str, int]:
    """What ``target`` steers toward, from the model's state at an example's end:
    closed pages retained, acked pages (retention may delete them), and lagging groups
    (behind another group of their topic, or at -1 while another has read something)."""
    pages = [page for topic in state.topics.values() for page in topic.pages]
    acked = sum(1 for page in pages if page.acked_ts is not None)
    ahead: dict[str, int] = {}
    for (topic, _group), position in state.groups.items():
        ahead[topic] = max(ahead.get(topic, -1), position)
    lagging = sum(1 for (topic, _), position in state.groups.items() if position < ahead[topic])
    return {"pages": len(pages), "acked_pages": acked, "lagging_groups": lagging}


def coverage_keys(observed: dict[str, int]) -> set[str]:
    """State features as coverage: each observation bucketed by powers of two."""
    return {
        f"{label}>={1 << (value.bit_length() - 1)}"
        for label, value in observed.items()
        if value > 0
    }


def make_machine(
    impl: str | Factory = DEFAULT_IMPL, starts: tuple[Start, ...] = ()
) -> type[LockstepMachine]:
    """A state machine class fuzzing ``impl`` (``MOD:FACTORY`` or a factory); examples
    start fresh or, with ``starts`` (``corpus_starts``), also from those programs.

    Use it from a test with ``run_state_machine_as_test(make_machine(f), settings=...)``
    or ``TestMyQueue = make_machine(f).TestCase``.
    """
    name, factory = queue_factory(impl, "fuzzing")
    return type(
        "LockstepMachine",
        (LockstepMachine,),
        {
            "factory": staticmethod(factory),
            "impl_name": name,
            "starts": FRESH_STARTS + starts,
            "coverage": set(),
            "__module__": __name__,
        },
    )


def _is_queue_header(header: dict[str, Any]) -> bool:
    """Whether a trace header records a queue run (the layer it names or that claims it);
    a header no layer recognises counts as one, so that ``read_trace`` says what is wrong."""
    try:
        return layer_for_header(header).name == "queue"
    except UnknownLayerError:
        return True


def corpus_starts(directory: Path) -> tuple[Start, ...]:
    """The queue traces of a regression corpus as starts (those of other layers, whose
    header names a ``layer`` or consumer clients, are skipped: the machine drives the
    queue); none if ``directory`` does not exist."""
    found = []
    for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else ():
        with path.open(encoding="utf-8") as lines:
            try:
                header = json.loads(lines.readline())
            except ValueError:
                header = None  # read_trace says what is wrong with it
        if isinstance(header, dict) and not _is_queue_header(header):
            continue
        trace = read_trace(path)
        config = MQConfig(**trace.header["config"])
        prefix = tuple((step.time_s, step.op) for step in trace.steps)
        found.append(Start(config, prefix, path.name))
    return tuple(found)


# ---------------------------------------------------------------------- the fuzz driver


@dataclass(frozen=True, slots=True)
class FuzzBudget:
    """How long a profile's campaign runs: ``examples`` (deterministic for a seed), or,
    when that is None, ``seconds`` of wall time (rounds start until it is spent)."""

    examples: int | None
    seconds: float | None = None


#: Each profile's campaign. ci is sized to the default gate's CPU time on this machine
#: (docs/BENCHMARKS.md) and stays deterministic; nightly is an hour, whatever it holds.
FUZZ_BUDGETS: dict[str, FuzzBudget] = {
    "dev": FuzzBudget(examples=100),
    "ci": FuzzBudget(examples=CI_EXAMPLES),
    "nightly": FuzzBudget(examples=None, seconds=3600.0),
}
#: The file in a campaign's example database that says how far it got (``--db``).
CAMPAIGN_FILE = "rmqsim-campaign.json"


@dataclass(frozen=True, slots=True)
class RoundSpec:
    """One round of a campaign: a hypothesis run of ``examples`` examples on its own
    seed (``round_seed``), so a campaign is the same sequence of rounds for a seed,
    whether it runs them in one process or several, and however long it runs."""

    impl: str | Factory
    profile: str
    seed: int
    index: int
    examples: int
    steps: int
    #: The command that repeats the campaign up to this round (in the failure's trace).
    repro: str
    corpus: str | None = None
    database: str | None = None
    #: The layer fuzzed: ``queue`` (this module's machine) or one of
    #: ``fuzz_layers.fuzzable_layers()``.
    layer: str = "queue"


@dataclass(slots=True)
class RoundResult:
    """What one round did."""

    index: int
    impl: str
    #: The examples the round was asked for (``examples`` counts every one it ran).
    planned: int = 0
    examples: int = 0
    steps: int = 0
    crashes_injected: int = 0
    #: The example of the round that first failed (0: none), and when (s into the round).
    first_failure: int = 0
    first_failure_s: float = 0.0
    coverage: frozenset[str] = frozenset()
    wall_s: float = 0.0
    cpu_s: float = 0.0
    failure: RunResult | None = None
    report: list[str] = field(default_factory=list)


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
    #: Rounds run (``RoundSpec``), the first one this run started at (a resumed
    #: campaign's is not 0), CPU seconds of every round, what ended the campaign
    #: (``examples``, ``budget`` or ``failure``).
    rounds: int = 0
    first_round: int = 0
    #: The examples of the rounds run (what ``--examples`` repeats them with).
    examples_planned: int = 0
    cpu_s: float = 0.0
    stopped_by: str = "examples"
    #: Wall seconds of the rounds, summed (with several jobs, more than ``wall_s``), and
    #: of them those until the first failing example (before shrinking; 0 if none).
    rounds_wall_s: float = 0.0
    seconds_to_find: float = 0.0
    #: Distinct coverage keys reached (operation/outcome pairs, fault points, state
    #: features: ``coverage_keys``).
    coverage: set[str] = field(default_factory=set)
    #: Keys the last round reached first.
    new_coverage: int = 0
    #: The layer fuzzed.
    layer: str = "queue"

    @property
    def ok(self) -> bool:
        return self.failure is None

    def repro_command(self) -> str:
        """The command that runs the same rounds again (a time budget's by its count)."""
        default = default_steps(self.profile, self.layer)
        steps = None if self.max_steps == default else self.max_steps
        return fuzz_repro(
            self.impl, self.profile, self.seed, self.examples_planned, steps, self.layer
        )

    @property
    def reproduce_line(self) -> str | None:
        return next((line for line in self.hypothesis_report if "@reproduce_failure" in line), None)

    def add(self, done: RoundResult) -> None:
        """Count a finished round in (rounds are added in order)."""
        if done.first_failure and not self.examples_to_find:
            self.examples_to_find = self.examples + done.first_failure
            self.seconds_to_find = self.rounds_wall_s + done.first_failure_s
        self.rounds += 1
        self.examples_planned += done.planned
        self.rounds_wall_s += done.wall_s
        self.new_coverage = len(done.coverage - self.coverage)
        self.examples += done.examples
        self.steps += done.steps
        self.crashes_injected += done.crashes_injected
        self.cpu_s += done.cpu_s
        self.coverage |= done.coverage
        if done.failure is not None and self.failure is None:
            self.failure = done.failure
            self.hypothesis_report = done.report
            self.stopped_by = "failure"


def resolve_seed(profile: str, seed: int | None) -> int:
    """The seed a campaign runs with: the given one, ``CI_SEED`` for the ci profile (so
    CI is deterministic), else a fresh one (printed, so any run can be repeated)."""
    if seed is not None:
        return seed
    return CI_SEED if profile == "ci" else random.SystemRandom().randrange(2**32)


def fuzz_repro(
    impl: str,
    profile: str,
    seed: int,
    examples: int | None,
    steps: int | None,
    layer: str = "queue",
) -> str:
    """The ``rmqsim fuzz`` command line that repeats a campaign."""
    parts = ["rmqsim", "fuzz", "--profile", profile, "--seed", str(seed)]
    if layer != "queue":
        parts += ["--layer", layer]
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


def round_seed(seed: int, index: int) -> int:
    """Round ``index``'s hypothesis seed: the campaign's own for the first round."""
    return seed if index == 0 else (seed * 1_000_003 + index * 7_919) % 2**32


#: The hypothesis phases of a campaign's round: the profile's without ``Phase.shrink``.
#: A round stops at its first failing example, and rmqsim's own shrinker (``_shrunk``)
#: shrinks that example's trace: measured 2026-11-28 on the nfc-insensitive-names mutant
#: (ci, round 2, failing at its 9th example), hypothesis's shrink phase re-ran the machine
#: 1,120 times (98% of the round's CPU; its test took 45 CPU s) for a 7-step program;
#: rmqsim's shrinker, 33 candidate runs (0.3 CPU s) for 3 steps (the test: 0.9 CPU s).
ROUND_PHASES: tuple[Phase, ...] = tuple(
    phase for phase in _COMMON["phases"] if phase is not Phase.shrink
)


def _round_settings(spec: RoundSpec) -> settings:
    database = DirectoryBasedExampleDatabase(spec.database) if spec.database else None
    return settings(
        FUZZ_PROFILES[spec.profile],
        max_examples=spec.examples,
        stateful_step_count=spec.steps,
        derandomize=False,  # the round's seed decides
        database=database,
        phases=ROUND_PHASES,
    )


def _shrunk(failure: RunResult, impl: str | Factory) -> RunResult:
    """The failing example's trace shrunk by rmqsim's shrinker (``shrink_result``, the
    one ``rmqsim shrink`` and the gate use: deterministic, bounded by operations, within
    ``DEFAULT_SHRINK_BUDGET``), for a round's failure; ``failure`` itself if its steps do
    not fail the same way when re-run (a flaky SUT)."""
    shrunk = shrink_result(failure, impl=impl)
    if shrunk is None:
        return failure
    shrunk.replay_only = failure.replay_only  # the report names the trace as before
    return shrunk


def run_round(spec: RoundSpec) -> RoundResult:
    """Run one round; a failure comes back shrunk (``_shrunk``), with a replayable trace.
    Its calls into the SUT are bounded as a run's are (``--op-timeout-s``, ``op_timeout_s``):
    a round's examples are long and build big backlogs, and a machine shared with other
    work once took more than a shrink's 1 s for one produce of the reference model."""
    if spec.layer != "queue":
        return _run_layer_round(spec)
    starts = corpus_starts(Path(spec.corpus)) if spec.corpus else ()
    machine = hypothesis_seed(round_seed(spec.seed, spec.index))(make_machine(spec.impl, starts))
    done = RoundResult(spec.index, machine.impl_name, planned=spec.examples)
    machine.started_at = started = time.perf_counter()
    cpu_started = time.process_time()
    try:
        with (
            _collect_reports(done.report),
            _without_local_constants(),
            op_timeout(op_timeout_s()),
        ):
            run_state_machine_as_test(machine, settings=_round_settings(spec))
    except Divergence as divergence:
        # Anything else (the SUT failing to reopen, a flaky SUT) propagates, as in ``run``.
        done.failure = _shrunk(_failure(machine, spec, divergence), spec.impl)
        done.report.extend(getattr(divergence, "__notes__", ()))
    finally:
        done.wall_s = time.perf_counter() - started
        done.cpu_s = time.process_time() - cpu_started
        done.examples, done.steps = machine.examples, machine.steps_run
        done.crashes_injected = machine.crashes_injected
        done.first_failure, done.first_failure_s = machine.first_failure, machine.first_failure_s
        done.coverage = frozenset(machine.coverage)
    return done


def _run_layer_round(spec: RoundSpec) -> RoundResult:
    """``run_round`` for a layer other than the queue (``fuzz_layers``)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    report: list[str] = []
    with _collect_reports(report), _without_local_constants(), op_timeout(op_timeout_s()):
        ran = fuzz_layer_round(
            spec.layer, spec.impl, seed=round_seed(spec.seed, spec.index),
            round_settings=_round_settings(spec), max_steps=spec.steps, repro=spec.repro,
        )  # fmt: skip
    failure = _shrunk(ran.failure, spec.impl) if ran.failure is not None else None
    return RoundResult(
        spec.index, ran.impl, planned=spec.examples, examples=ran.examples, steps=ran.steps,
        crashes_injected=ran.crashes_injected, first_failure=ran.first_failure,
        first_failure_s=ran.first_failure_s, coverage=frozenset(ran.coverage),
        wall_s=time.perf_counter() - started, cpu_s=time.process_time() - cpu_started,
        failure=failure, report=report if failure is not None else [],
    )  # fmt: skip


@dataclass(slots=True)
class FuzzPlan:
    """A campaign's bounds and where its rounds start (``fuzz``'s arguments, resolved)."""

    profile: str
    seed: int
    steps: int
    round_examples: int
    examples: int | None
    budget_s: float | None
    first_round: int = 0
    #: The examples of the rounds before ``first_round`` (a resumed campaign).
    examples_before: int = 0
    #: The layer fuzzed (``RoundSpec.layer``).
    layer: str = "queue"

    def rounds(self) -> Iterator[tuple[int, int, int]]:
        """(index, examples, examples through it) of every round the bounds allow by
        examples; a time budget stops the iteration from outside."""
        index, total = self.first_round, self.examples_before
        while self.examples is None or total < self.examples:
            size = self.round_examples
            if self.examples is not None:
                size = min(size, self.examples - total)
            total += size
            yield index, size, total
            index += 1


def _specs(
    plan: FuzzPlan, impl: str | Factory, corpus: Path | None, database: Path | None
) -> Iterator[RoundSpec]:
    name = impl if isinstance(impl, str) else fuzzed_impl_name(impl, plan.layer)
    for index, size, through in plan.rounds():
        # Repeating a campaign needs the examples through the failing round (a time
        # budget's campaign is repeated by its count) and, if not the profile's, the steps.
        repro_examples = plan.examples if plan.examples is not None else through
        steps = None if plan.steps == default_steps(plan.profile, plan.layer) else plan.steps
        yield RoundSpec(
            impl=impl,
            profile=plan.profile,
            seed=plan.seed,
            index=index,
            examples=size,
            steps=plan.steps,
            repro=fuzz_repro(name, plan.profile, plan.seed, repro_examples, steps, plan.layer),
            corpus=str(corpus) if corpus is not None and plan.layer == "queue" else None,
            database=str(database) if database is not None else None,
            layer=plan.layer,
        )


def default_steps(profile: str, layer: str = "queue") -> int:
    """Most operations per example of a ``profile`` campaign on ``layer`` without
    ``--steps``: the profile's ``stateful_step_count``, times the layer's
    ``fuzz_steps_factor`` (a layer whose bugs need longer runs: the message store's
    retention needs simulated time to pass)."""
    factor = 1 if layer == "queue" else getattr(layer_named(layer), "fuzz_steps_factor", 1)
    return int(FUZZ_PROFILES[profile].stateful_step_count * factor)


def fuzzed_impl_name(impl: str | Factory, layer: str = "queue") -> str:
    """The name a campaign on ``layer`` records for ``impl`` (``BadImplError`` if that
    layer cannot fuzz it, ``ValueError`` if no fuzzer drives ``layer``)."""
    if layer not in fuzzable_layers():
        known = ", ".join(fuzzable_layers())
        raise ValueError(f"no fuzzer drives the layer {layer!r:.80}; known: {known}")
    if layer == "queue":
        return queue_factory(impl, "fuzzing")[0]
    name: str = layer_named(layer).resolve_impl(impl, for_replay=False)[0]
    return name


class FuzzOptions(TypedDict, total=False):
    """``fuzz``'s keyword arguments, each optional (its default in brackets)."""

    #: A name of ``FUZZ_PROFILES`` [``"ci"``]: each round's settings and the budget.
    profile: str
    #: The layer to fuzz, one of ``fuzz_layers.fuzzable_layers()`` [``"queue"``]; the
    #: corpus is the queue's only.
    layer: str
    #: Examples of the whole campaign [the profile's ``FuzzBudget``].
    examples: int | None
    #: Most operations per example [the profile's].
    steps: int | None
    #: The campaign's seed [``resolve_seed``; a resumed campaign's own].
    seed: int | None
    #: Wall seconds: no round starts after them [the profile's, when it has no examples].
    budget_s: float | None
    #: A regression corpus whose queue traces examples may start from [none].
    corpus: Path | None
    #: An example database directory, kept across rounds and campaigns; a campaign
    #: there resumes after its last round [none: each round starts empty].
    database: Path | None
    #: The round to start at, as if the rounds before it had run and passed: they count
    #: toward the examples; each round runs on its own seed, so the rounds run are those
    #: of the whole campaign [0; a resumed campaign's next].
    first_round: int
    #: Worker processes running rounds side by side (``impl`` must be a string) [1].
    jobs: int
    #: Called after each round, in round order, with the campaign so far and the round.
    on_round: Callable[[FuzzResult, RoundResult], None] | None


def _plan(impl_name: str, options: FuzzOptions) -> FuzzPlan:
    """The campaign's bounds: the options, else the profile's; resumed from ``database``."""
    profile = options.get("profile", "ci")
    if profile not in FUZZ_PROFILES:
        raise ValueError(f"unknown fuzz profile {profile!r}; known: {', '.join(FUZZ_PROFILES)}")
    budget = FUZZ_BUDGETS[profile]
    examples, budget_s = options.get("examples"), options.get("budget_s")
    if examples is None and budget_s is None:
        examples, budget_s = budget.examples, budget.seconds
    base = FUZZ_PROFILES[profile]
    plan = FuzzPlan(
        profile=profile,
        seed=resolve_seed(profile, options.get("seed")),
        steps=options.get("steps") or default_steps(profile, options.get("layer", "queue")),
        round_examples=base.max_examples,
        examples=examples,
        budget_s=budget_s,
        layer=options.get("layer", "queue"),
    )
    first_round = options.get("first_round", 0)
    plan.first_round, plan.examples_before = first_round, first_round * plan.round_examples
    database = options.get("database")
    if database is not None:
        _resume(plan, database / CAMPAIGN_FILE, impl_name, options.get("seed"))
    return plan


def _resume(plan: FuzzPlan, path: Path, impl_name: str, seed: int | None) -> None:
    """Continue the campaign recorded at ``path`` (if any) after its last round."""
    if not path.exists():
        return
    try:
        saved = json.loads(path.read_text())
        saved_impl, saved_seed = saved["impl"], int(saved["seed"])
        saved_layer = saved.get("layer", "queue")
        next_round, examples_done = int(saved["next_round"]), int(saved["examples"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a fuzz campaign record ({exc})") from None
    if (saved_impl, saved_layer) != (impl_name, plan.layer) or seed not in (None, saved_seed):
        raise ValueError(
            f"{path} records a campaign of {saved_impl} on the {saved_layer} layer with seed "
            f"{saved_seed}; give another --db to fuzz another implementation, layer or seed"
        )
    plan.seed, plan.first_round, plan.examples_before = saved_seed, next_round, examples_done


def _record(path: Path, result: FuzzResult, plan: FuzzPlan) -> None:
    """Write how far the campaign in this database got (``_resume`` reads it)."""
    record = {
        "impl": result.impl,
        "seed": result.seed,
        "profile": result.profile,
        "next_round": plan.first_round + result.rounds,
        "examples": plan.examples_before + result.examples_planned,
    }
    if result.layer != "queue":  # a queue campaign's record is as it was before layers
        record["layer"] = result.layer
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _run_rounds(
    specs: Iterator[RoundSpec], jobs: int, keep_going: Callable[[], bool]
) -> Generator[RoundResult, None, None]:
    """The rounds' results in round order: run here, or ``jobs`` at a time in workers.
    No round starts once ``keep_going()`` is false; closing the iterator ends the
    workers (a failure found: the rounds after it are not needed)."""
    if jobs <= 1:
        for spec in specs:
            if not keep_going():
                return
            yield run_round(spec)
        return
    with worker_pool(jobs) as pool:
        assert pool is not None
        pending: deque[Future[RoundResult]] = deque()
        for spec in specs:
            if not keep_going():
                break
            pending.append(pool.submit(run_round, spec))
            if len(pending) >= jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def fuzz(impl: str | Factory = DEFAULT_IMPL, **options: Unpack[FuzzOptions]) -> FuzzResult:
    """Fuzz ``impl`` with the state machine, round after round (``RoundSpec``), until
    the examples or the time budget are spent or an example fails; return the campaign
    with the shrunk failure. ``FuzzOptions`` says what each option does.

    Deterministic for a given (implementation, profile, examples, steps, seed, corpus)
    whatever ``jobs`` is; a time budget runs a prefix of the same rounds.
    """
    jobs = options.get("jobs", 1)
    if jobs > 1 and not isinstance(impl, str):
        raise ValueError("fuzzing with several jobs needs the implementation as MOD:FACTORY")
    impl_name = fuzzed_impl_name(impl, options.get("layer", "queue"))
    plan = _plan(impl_name, options)
    database, on_round = options.get("database"), options.get("on_round")
    result = FuzzResult(
        impl=impl_name, profile=plan.profile, seed=plan.seed, examples=0, max_steps=plan.steps,
        steps=0, crashes_injected=0, examples_to_find=0, wall_s=0.0, first_round=plan.first_round,
        layer=plan.layer,
    )  # fmt: skip
    started = time.perf_counter()

    rounds_started = 0

    def keep_going() -> bool:
        """Whether another round may start: the first always does."""
        nonlocal rounds_started
        spent_s = time.perf_counter() - started
        if rounds_started and plan.budget_s is not None and spent_s >= plan.budget_s:
            result.stopped_by = "budget"
            return False
        rounds_started += 1
        return True

    specs = _specs(plan, impl, options.get("corpus"), database)
    rounds = _run_rounds(specs, jobs, keep_going)
    try:
        for done in rounds:
            result.add(done)
            result.wall_s = time.perf_counter() - started
            if database is not None:
                _record(database / CAMPAIGN_FILE, result, plan)
            if on_round is not None:
                on_round(result, done)
            if done.failure is not None:
                break
    finally:
        rounds.close()
        result.wall_s = time.perf_counter() - started
    return result


def _failure(machine: type[LockstepMachine], spec: RoundSpec, divergence: Divergence) -> RunResult:
    """The shrunk failing example as a run result with a replayable trace."""
    last = machine.last
    assert last is not None and last.lockstep is not None
    header = trace_header(
        profile=FUZZ_PROFILE_NAME,
        profile_config={
            "fuzz_profile": spec.profile,
            "max_examples": spec.examples,
            "max_steps": spec.steps,
            "round": spec.index,
        },
        config=last.lockstep.config,
        seed=spec.seed,
        impl=machine.impl_name,
        steps=None,
    )
    # The header carries the command, so a replay of the trace reports it too.
    header["repro"] = spec.repro
    return lockstep_result(last.lockstep, header, divergence, time.perf_counter())


def render_program(run: RunResult) -> str:
    """The shrunk program, one operation per line with the model's outcome."""
    out = io.StringIO()
    trace = parse_run_lines(run.trace_lines)
    config = trace.header["config"]
    out.write(f"shrunk program ({len(trace.steps)} steps, config {config}):\n")
    for step in trace.steps:
        out.write(f"  {step.index:>3}  t={step.time_s:<6} {render_op(step.op)}")
        out.write(f"  -> {render_outcome(step.outcome)}\n")
    return out.getvalue().rstrip("\n")
