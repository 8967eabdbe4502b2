"""Seeded bugs: the catalogue is sound, the gate fails on a mutant (the CI canary) and
passes the real implementation on the same seeds, and every mutant is killed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rmqsim.conformance.adapter import DEFAULT_IMPL, load_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.mutants import Mutant
from rmqsim.conformance.mutants.catalogue import MUTANTS, UnknownMutantError, gather, select
from rmqsim.conformance.mutants.kill import (
    KILLED,
    LAYER_PROFILES,
    NOT_RUN,
    SURVIVED,
    Kill,
    check_of,
    kill_mutant,
    run_matrix,
)
from rmqsim.conformance.running.gate import DEFAULT_GATE_SEEDS, all_gate_profiles
from rmqsim.conformance.running.lockstep import Divergence, Lockstep
from rmqsim.conformance.searching.shrink_budget import DEFAULT_SHRINK_BUDGET
from rmqsim.conformance.stream.run import resolve_stream_impl
from rmqsim.impl import RocksMQ
from rmqsim.impl.errors import CorruptDatabaseError
from rmqsim.impl.storage import Store
from rmqsim.model.api import MQConfig, ProducerMessage
from rmqsim.scenarios.queue.ops import (
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    ExistGroup,
    Message,
    Produce,
    Step,
)

#: Mutants the gate must fail on in the canary: one outcome bug, one crash bug.
CANARIES = ("page-boundary-skip", "positions-in-memory")
#: Operations per run in the canary (the whole gate, every profile, one seed).
CANARY_STEPS = 300
#: Operations per crash sweep in the canary: half the default, and still a crash armed in
#: every crash cell (the steered crash cases fill the cells a shorter sweep leaves; the
#: real queue's canary gate asserts it), at about 60% of the gate's CPU time.
CANARY_SWEEP_STEPS = 30
#: The canary's gate command (but ``--impl`` and ``--out``): on a mutant it stops at the
#: first failure (``--max-failures 1``: the claim is only that it fails, with a shrunk
#: failure), on the real queue it runs everything (nothing fails).
CANARY_GATE = ["gate", "--seeds", "0:1", "--steps", str(CANARY_STEPS), "--sweep-steps",
               str(CANARY_SWEEP_STEPS), "--max-failures", "1"]


def _loaded(mutant: Mutant) -> Any:
    """The factory ``--impl`` loads for ``mutant``: a stream factory through the stream
    layer (it takes a queue, not a path), any other through ``load_factory``."""
    if mutant.layer == "stream":
        return resolve_stream_impl(mutant.impl)[1][1]
    return load_factory(mutant.impl)


def test_catalogue_is_sorted_unique_and_loadable() -> None:
    names = [mutant.name for mutant in MUTANTS]
    assert names == sorted(set(names))
    assert len(MUTANTS) >= 18
    for mutant in MUTANTS:
        factory = _loaded(mutant)  # the path --impl takes
        assert factory.__doc__ and "Bug class" in factory.__doc__, mutant.name
    # Every [Milvus: ...] note of SPEC.md is a mutant; the crash module's four are in.
    for name in (
        "decimal-keys",
        "destroy-keeps-messages",
        "destroy-by-prefix",
        "latest-by-substring",
        "ack-off-by-one",
        "ack-registered-only",
        "empty-payload-none",
        "ids-restart",
        "group-without-topic",
        "seek-backward-panics",
        "two-step-produce",
        "positions-in-memory",
        "acks-before-messages",
        "hwm-not-persisted",
    ):
        assert name in names


def test_gather_refuses_a_repeated_name() -> None:
    module = "rmqsim.conformance.mutants.milvus"
    with pytest.raises(AssertionError, match="not unique"):
        gather((module, module))


def test_select_names_the_known_mutants() -> None:
    assert [m.name for m in select(["stale-acks", " decimal-keys"])] == [
        "decimal-keys",
        "stale-acks",
    ]
    with pytest.raises(UnknownMutantError, match="known: ack-off-by-one"):
        select(["no-such-bug"])


def test_mutants_leave_the_real_implementation_alone(tmp_path: Path) -> None:
    """Opening every mutant changes nothing global: RocksMQ and Store keep their methods,
    and the real queue still behaves after them in the same process."""
    before = (dict(vars(RocksMQ)), dict(vars(Store)))
    queue_mutants = [mutant for mutant in MUTANTS if mutant.layer == "queue"]
    for index, mutant in enumerate(queue_mutants):
        mq = load_factory(mutant.impl)(
            path=tmp_path / str(index), config=MQConfig(), clock=lambda: 0, faults=None
        )
        mq.create_topic("t")
        mq.close()
    assert (dict(vars(RocksMQ)), dict(vars(Store))) == before
    mq = RocksMQ.open(tmp_path / "real", clock=lambda: 0)
    mq.create_topic("t")
    assert mq.produce("t", [ProducerMessage(b"") for _ in range(12)]) == list(range(1, 13))
    mq.create_consumer_group("t", "g")
    assert [m.msg_id for m in mq.consume("t", "g", 4)] == [1, 2, 3, 4]
    mq.close()


@pytest.fixture(scope="module")
def real_queue_canary_gate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Path]:
    """The canary's gate on the unmodified queue (its result and output directory): the
    same command for every canary, so it runs once per module and each canary asserts on
    it."""
    out = tmp_path_factory.mktemp("canary-real")
    return CliRunner().invoke(cli, [*CANARY_GATE, "--impl", DEFAULT_IMPL, "--out", str(out)]), out


@pytest.mark.parametrize("canary", CANARIES)
def test_canary_gate_fails_on_a_mutant_and_passes_the_real_queue(
    canary: str, tmp_path: Path, real_queue_canary_gate: tuple[Result, Path]
) -> None:
    """The CI canary: ``rmqsim gate`` itself must fail on a seeded bug, so a gate that can
    no longer fail is noticed at once; and pass the real implementation on the same runs
    (``real_queue_canary_gate``: the same arguments with the real queue's ``--impl``).
    ``--max-failures 1`` ends the mutant's gate at its first failure (shrunk as ever); on
    the real queue it changes nothing: every run, sweep and steered case runs."""
    (mutant,) = select([canary])
    failed = CliRunner().invoke(
        cli, [*CANARY_GATE, "--impl", mutant.impl, "--out", str(tmp_path / "m")])
    assert failed.exit_code == 1, failed.output
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert summary["status"] == "divergence" and summary["stopped_early"]["failures"] == 1
    failure = summary["failures"][0]  # the first failures are shrunk
    assert 0 < failure["shrunk_steps"] <= 10 and Path(failure["shrunk_trace"]).exists()
    search = failure["shrink_search"]
    assert search["stopped_by"] is None and 0 < search["runs"] <= search["operations"]
    passed, out = real_queue_canary_gate
    assert passed.exit_code == 0, passed.output
    everything = json.loads((out / "summary.json").read_text())
    assert everything["status"] == "ok" and everything["stopped_early"] is None
    assert all(everything["profiles"][p]["runs"] == 1 for p in all_gate_profiles())
    assert everything["crash_sweep"] and everything["crash_steer"]
    crash_cells = everything["coverage"]["crash_cells"]
    assert crash_cells["hit"] == crash_cells["reachable"] > 0, crash_cells


#: The storage mutants (killed by power-loss sweeps: tests/commitlog/test_power_loss.py
#: kills each, tests/commitlog/test_power_gate.py through the gate and the kill matrix) and
#: the stream mutants (tests/stream/test_stream_layer.py kills each through a stream
#: profile) have their own kill tests; these are the queue and consumer layers'.
GATE_LAYER_MUTANTS = [m for m in MUTANTS if m.layer in ("queue", "consumer")]


#: The default gate's first killing run (profile, seed) of the mutants it kills only after
#: more than a few runs (docs/commands/mutants.md, the kill matrix on ``0:20``; the gate
#: runs every seed of a profile before the next profile). Their kill test runs that run
#: alone: it is one of the default gate's runs, so a mutant the default gate no longer
#: kills fails the test as before (and so does one it kills only on another run).
GATE_KILLING_RUNS: dict[str, tuple[str, int]] = {
    "acks-before-messages": ("crashy", 9),
    "capped-poll": ("swarm", 8),
    "destroy-group-keeps-acks": ("smoke", 6),
    "end-before-messages": ("crashy", 2),
    "orderly-commit-empty-returns-one": ("consumer-orderly", 0),
    "produce-in-two-transactions": ("crashy", 2),
    "seek-lands-on-oldest": ("smoke", 3),
    "two-step-destroy-topic": ("seek-storm", 10),
    "two-step-produce": ("crashy", 2),
}


def _kill_by_default_gate(mutant: Mutant, out: Path) -> Kill:
    """``mutant`` against the default gate seeds: its recorded killing run alone
    (``GATE_KILLING_RUNS``, checked to be a run of the default gate), else every run."""
    if mutant.name not in GATE_KILLING_RUNS:
        return kill_mutant(mutant, DEFAULT_GATE_SEEDS, out=out, shrink=None)
    profile, seed = GATE_KILLING_RUNS[mutant.name]
    assert profile in LAYER_PROFILES[mutant.layer] and seed in DEFAULT_GATE_SEEDS
    return kill_mutant(mutant, range(seed, seed + 1), out=out, profiles=(profile,), shrink=None)


def test_the_recorded_killing_runs_are_gate_layer_mutants() -> None:
    assert set(GATE_KILLING_RUNS) <= {mutant.name for mutant in GATE_LAYER_MUTANTS}


@pytest.mark.parametrize("mutant", GATE_LAYER_MUTANTS, ids=lambda m: m.name)
def test_every_mutant_is_killed_by_the_default_gate_seeds(mutant: Mutant, tmp_path: Path) -> None:
    kill = _kill_by_default_gate(mutant, tmp_path)
    assert kill.status == KILLED, f"{mutant.name} survived {kill.runs} runs"
    assert kill.anomaly and kill.check and kill.repro and kill.trace
    assert Path(kill.trace).exists()
    assert kill.operations >= (kill.step or 0) > 0


def test_a_store_that_cannot_reopen_is_caught_by_the_reopen_check(tmp_path: Path) -> None:
    (mutant,) = select(["end-before-messages"])
    kill = _kill_by_default_gate(mutant, tmp_path)
    assert (kill.status, kill.check, kill.anomaly) == (KILLED, "reopen", "unrecoverable")


def test_none_properties_are_a_payload_mismatch_not_a_crash(tmp_path: Path) -> None:
    (mutant,) = select(["empty-payload-none"])
    kill = kill_mutant(mutant, range(0, 5), out=tmp_path, shrink=None)
    assert (kill.check, kill.anomaly) == ("outcome", "payload-mismatch")


def test_kill_is_deterministic_and_shrinks(tmp_path: Path) -> None:
    (mutant,) = select(["ids-restart"])
    first = kill_mutant(mutant, range(0, 3), out=tmp_path / "a", shrink=DEFAULT_SHRINK_BUDGET)
    second = kill_mutant(mutant, range(0, 3), out=tmp_path / "b", shrink=None)
    assert (first.profile, first.seed, first.step, first.anomaly) == (
        second.profile,
        second.seed,
        second.step,
        second.anomaly,
    )
    assert first.trace and second.trace
    assert Path(first.trace).read_bytes() == Path(second.trace).read_bytes()
    assert first.shrunk_steps is not None and 0 < first.shrunk_steps <= first.step
    assert first.shrunk_trace and Path(first.shrunk_trace).exists()


def test_consumer_layer_mutants_run_on_the_consumer_profiles(tmp_path: Path) -> None:
    (mutant,) = select(["commit-highest-acked"])
    assert mutant.layer == "consumer"
    kill = kill_mutant(mutant, range(0, 2), out=tmp_path)
    assert kill.status == KILLED, kill
    assert kill.profile in LAYER_PROFILES["consumer"]
    assert kill.anomaly == "offset-passes-unacked"


def test_a_layer_without_gate_profiles_is_listed_not_run(tmp_path: Path) -> None:
    unknown = Mutant("engine-bug", "storage", "a bug below the queue", "x.y:z")
    object.__setattr__(unknown, "layer", "storage-engine")  # a layer newer than this engine
    kill = kill_mutant(unknown, range(0, 1), out=tmp_path)
    assert kill.status == NOT_RUN and "no gate profiles" in kill.note


def test_matrix_needs_the_baseline_to_pass(tmp_path: Path) -> None:
    """A harness that fails everything would kill every mutant: the matrix fails when the
    unmodified implementation fails (here: a mutant posing as the baseline)."""
    (mutant,) = select(["ids-restart"])
    matrix = run_matrix([mutant], range(0, 1), out=tmp_path, steps=300, shrink=None)
    assert matrix.ok and matrix.baseline_ok
    assert matrix.baseline is not None
    matrix.baseline.results[0].status = "divergence"
    assert not matrix.ok


def test_a_survivor_fails_the_matrix(tmp_path: Path) -> None:
    """The real implementation posing as a mutant survives, and the matrix says so."""
    fake = Mutant("no-bug", "none", "the real implementation", DEFAULT_IMPL)
    matrix = run_matrix([fake], range(0, 1), out=tmp_path, steps=50, shrink=None)
    (kill,) = matrix.kills
    assert kill.status == SURVIVED and kill.runs == 7 and kill.anomaly is None
    assert matrix.baseline_ok and not matrix.ok


def test_cli_mutants_writes_the_matrix_and_refuses_unknown_names(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(
        cli,
        [
            *("mutants", "--only", "ids-restart,empty-payload-none", "--seeds", "0:1"),
            *("--steps", "300", "--shrink-ops-budget", "20000", "--out", str(out)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "PASS: 2 of 2 killed" in result.output
    data = json.loads((out / "kill-matrix.json").read_text())
    assert data["status"] == "ok" and data["summary"]["killed"] == 2
    assert [m["mutant"] for m in data["mutants"]] == ["empty-payload-none", "ids-restart"]
    assert b"rmqsim.mutants" in (out / "kill-matrix.junit.xml").read_bytes()
    bad = runner.invoke(cli, ["mutants", "--only", "nope", "--out", str(out)])
    assert bad.exit_code == 2
    assert "unknown mutant nope; known: ack-off-by-one" in bad.output


def test_cli_mutants_runs_each_mutant_on_the_given_profiles_of_its_layer(tmp_path: Path) -> None:
    """``--profiles``: a queue mutant runs on the queue profiles named (smoke: its killing
    run), a consumer mutant none of them reaches is not run and says why, the baseline runs
    exactly the profiles named; an unknown or empty list is bad usage."""
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(cli, [
        "mutants", "--only", "ack-off-by-one,commit-highest-acked", "--profiles", "smoke",
        "--seeds", "0:1", "--no-shrink", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "kill-matrix.json").read_text())
    assert data["profiles"] == ["smoke"]
    status = {m["mutant"]: (m["status"], m.get("note")) for m in data["mutants"]}
    assert status["ack-off-by-one"][0] == KILLED
    assert status["commit-highest-acked"] == (
        NOT_RUN, "none of the profiles smoke exercises the consumer layer")
    assert data["baseline"]["runs"] == 1 and data["baseline"]["failed"] == 0  # smoke/0
    for bad_list, says in (("smoke,nosuch", "nosuch"), (",", "names no profile")):
        bad = runner.invoke(cli, ["mutants", "--profiles", bad_list, "--out", str(out)])
        assert bad.exit_code == 2 and says in bad.output, bad.output


def test_a_queue_that_cannot_reopen_between_operations_is_unrecoverable(tmp_path: Path) -> None:
    """A store that opens once and then refuses its own directory: the lockstep reports a
    divergence at the reopen (check "reopen"), not a traceback."""
    opened: list[int] = []

    def open_once(*, path: Path, config: MQConfig, clock: Any, faults: Any) -> Any:
        if opened:
            raise CorruptDatabaseError("cannot read what I wrote")
        opened.append(1)
        return RocksMQ.open(path, config=config, clock=clock, faults=faults)

    lockstep = Lockstep(open_once, MQConfig(), tmp_path)
    lockstep.execute(Step(0, "producer-0", CreateTopic("t")))
    with pytest.raises(Divergence) as caught:
        lockstep.execute(Step(1, "crasher", CrashReopen()))
    lockstep.close()
    assert caught.value.anomaly == "unrecoverable"
    assert check_of(caught.value) == "reopen"
    assert "CorruptDatabaseError" in caught.value.detail


#: The name-identity mutants (``conformance/mutants/names.py``) and the pair each one merges.
NAME_MUTANTS = {
    "case-insensitive-names": ("t", "T"),
    "nfc-insensitive-names": ("\u00fc-topic", "u\u0308-topic"),
}


@pytest.mark.parametrize("name", sorted(NAME_MUTANTS))
def test_a_name_mutant_behaves_with_one_name_and_fails_on_its_pair(
    name: str, tmp_path: Path
) -> None:
    """The blind spot the pairs close: one spelling alone is served exactly right; the
    other spelling of the same name is taken for the first (here: created as a no-op)."""
    (mutant,) = select([name])
    first, second = NAME_MUTANTS[name]
    lockstep = Lockstep(load_factory(mutant.impl), MQConfig(), tmp_path)
    alone = [
        CreateTopic(first),
        Produce(first, (Message(b"x"),)),
        CreateGroup(first, "g"),
        Consume(first, "g", 5),
        CrashReopen(),
        ExistGroup(first, "g"),
    ]
    for index, op in enumerate(alone):
        lockstep.execute(Step(index, "client", op))
    with pytest.raises(Divergence) as caught:
        lockstep.execute(Step(len(alone), "client", CreateTopic(second)))
    lockstep.close()
    assert caught.value.anomaly in ("lost-write", "state-mismatch"), caught.value


def test_the_gate_and_fuzz_name_pools_hold_case_and_normalization_pairs() -> None:
    """Every queue profile (swarm resolved per seed) and the fuzzer draw from topic and
    group pools with two names that differ only by case and two that differ only by
    Unicode normalization: a queue that merges either pair cannot pass them unseen."""
    import unicodedata

    from rmqsim.conformance.running.gate import DEFAULT_GATE_SEEDS
    from rmqsim.conformance.searching.stateful import GROUP_NAMES, TOPIC_NAMES
    from rmqsim.scenarios.queue.profiles import PROFILES, resolve

    def merged_by(fold: Any, pool: tuple[str, ...]) -> bool:
        return len({fold(name) for name in pool}) < len(set(pool))

    def nfc(name: str) -> str:
        return unicodedata.normalize("NFC", name)

    pools = {"fuzz": (TOPIC_NAMES, GROUP_NAMES)}
    for profile in PROFILES.values():
        for seed in DEFAULT_GATE_SEEDS if profile.swarm else (0,):
            concrete = resolve(profile, seed)
            pools[f"{profile.name}/{seed}"] = (concrete.topic_names, concrete.group_names)
    lacking = [
        f"{where} {kind} {fold.__name__}"
        for where, (topics, groups) in pools.items()
        for kind, pool in (("topics", topics), ("groups", groups))
        for fold in (str.casefold, nfc)
        if not merged_by(fold, pool)
        # digits keeps its two-topic pool ("d", "d1") for the id boundaries; its groups count
        and not (where.startswith("digits/") and kind == "topics")
    ]
    assert lacking == []


def test_cli_mutants_kills_the_name_mutants(tmp_path: Path) -> None:
    """``rmqsim mutants --only`` on the two name mutants: both killed, shrunk to a few
    operations, and the unmodified queue passes the same (pair-holding) runs."""
    result = CliRunner().invoke(
        cli,
        [
            *("mutants", "--only", ",".join(NAME_MUTANTS), "--seeds", "0:1"),
            *("--out", str(tmp_path)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "PASS: 2 of 2 killed" in result.output
    data = json.loads((tmp_path / "kill-matrix.json").read_text())
    assert [m["mutant"] for m in data["mutants"]] == sorted(NAME_MUTANTS)
    for killed in data["mutants"]:
        assert killed["status"] == KILLED and 0 < killed["shrunk_steps"] <= 5, killed


def test_a_report_tells_the_two_spellings_of_a_name_apart() -> None:
    """The NFD spelling of a name is shown escaped in operation lines (reports, fuzz
    programs), so the normalization mutant's report does not list two identical-looking
    operations with different outcomes."""
    from rmqsim.conformance.reporting.report import render_op

    nfc, nfd = "gr\u00fcppe", "gru\u0308ppe"
    shown = render_op(CreateGroup("t", nfd))
    assert shown != render_op(CreateGroup("t", nfc))
    assert shown == "create_group(topic='t', group='gru\\u0308ppe')"
    assert render_op(CreateGroup("t", nfc)) == f"create_group(topic='t', group='{nfc}')"


def _newcomer_program(name: str) -> tuple[MQConfig, list[Step], str]:
    """A short program showing the bug of one newcomer mutant (issue 26), and its anomaly."""
    from rmqsim.scenarios.queue import ops

    one_page = (Message(b"x" * 17),)
    if name == "unread-group-holds-nothing":
        # Group b has read nothing: the page a's poll reads past is not acked.
        program = [
            (0, CreateTopic("t")),
            (0, CreateGroup("t", "a")),
            (0, CreateGroup("t", "b")),
            (0, Produce("t", one_page)),
            (0, Consume("t", "a", 5)),
        ]
        return MQConfig(page_size_bytes=16), [Step(t, "c", op) for t, op in program], "ack-mismatch"
    if name == "seek-lands-on-oldest":
        # Retention deletes ids 1 and 2; a seek to 1 resets the position to -1.
        program = [
            (0, CreateTopic("t")),
            (0, CreateGroup("t", "g")),
            (0, Produce("t", (*one_page, *one_page, Message(b"y")))),
            (0, Consume("t", "g", 2)),
            (0, ops.AdvanceClock(11)),
            (11, ops.RunRetention()),
            (11, ops.Seek("t", "g", 1)),
        ]
        config = MQConfig(page_size_bytes=16, retention_time_s=10, retention_size_bytes=-1)
        return config, [Step(t, "c", op) for t, op in program], "position-mismatch"
    assert name == "produce-in-two-transactions", name
    # A crash at the second fault-hook call of a two-message produce: between its halves.
    program = [
        CreateTopic("t"),
        ops.ArmCrash(hit=2),
        Produce("t", (Message(b"a"), Message(b"b"))),
    ]
    return MQConfig(), [Step(0, "c", op) for op in program], "torn-operation"


@pytest.mark.parametrize(
    "name", ["unread-group-holds-nothing", "seek-lands-on-oldest", "produce-in-two-transactions"]
)
def test_a_newcomer_mutant_diverges_where_the_real_queue_conforms(
    name: str, tmp_path: Path
) -> None:
    config, program, anomaly = _newcomer_program(name)
    (mutant,) = select([name])
    real = Lockstep(load_factory(DEFAULT_IMPL), config, tmp_path / "real")
    for step in program:
        real.execute(step)
    real.close()
    wrong = Lockstep(load_factory(mutant.impl), config, tmp_path / "wrong")
    with pytest.raises(Divergence) as caught:
        for step in program:
            wrong.execute(step)
    wrong.close()
    assert caught.value.anomaly == anomaly, caught.value
    assert caught.value.step_index == len(program), caught.value
