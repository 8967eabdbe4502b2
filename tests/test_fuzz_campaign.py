"""Fuzz campaigns (issue 26): rounds bounded by examples or by time, the same rounds
with several jobs, resumable from an example database, examples that start from the
regression corpus, steering toward states that matter, and the kill matrix's fuzz column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import make_model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.mutants.kill import KILLED, NOT_RUN, fuzz_mutant
from rmqsim.conformance.running.trace import read_trace
from rmqsim.conformance.searching.stateful import (
    BYSTANDER_TOPIC,
    CAMPAIGN_FILE,
    FUZZ_BUDGETS,
    FUZZ_PROFILES,
    corpus_starts,
    coverage_keys,
    fuzz,
    round_seed,
    state_observations,
)
from rmqsim.model.api import ConsumerMessage, Page, State, TopicState
from rmqsim.scenarios.queue import ops
from tests.wrong_models import AckOffByOne

#: The reference model as an implementation: fast, and never fails.
MODEL = "rmqsim.conformance.adapter:model_factory"
REGRESSIONS = Path(__file__).resolve().parent.parent / "regressions"
#: The newcomer's three bug kinds, which ``rmqsim fuzz`` at its default settings missed.
NEWCOMERS = ("unread-group-holds-nothing", "seek-lands-on-oldest", "produce-in-two-transactions")
#: The round of the default campaign (ci, seed 0, the corpus) that first kills a newcomer,
#: where it is not the first: measured with ``fuzz(..., on_round=...)``, rounds 0-2 pass
#: seek-lands-on-oldest (17 CPU s) and round 3 kills it at its 12th example. Each round
#: runs on its own seed (``round_seed``), so the rounds from there on are the default
#: campaign's own: a kill among them is the default campaign's kill.
FIRST_KILLING_ROUND = {"seek-lands-on-oldest": 3}


def test_ci_is_a_deterministic_campaign_of_rounds_and_nightly_an_hour() -> None:
    ci = FUZZ_BUDGETS["ci"]
    assert ci.examples is not None and ci.examples > FUZZ_PROFILES["ci"].max_examples
    assert FUZZ_BUDGETS["nightly"].examples is None and FUZZ_BUDGETS["nightly"].seconds
    assert round_seed(7, 0) == 7 and len({round_seed(7, index) for index in range(50)}) == 50


def test_a_time_budget_runs_a_prefix_of_the_same_rounds() -> None:
    by_time = fuzz(MODEL, profile="dev", seed=3, budget_s=0.001, steps=20)
    assert by_time.stopped_by == "budget" and by_time.rounds == 1  # a round always starts
    repeat = "rmqsim fuzz --profile dev --seed 3 --examples 50 --steps 20 --impl " + MODEL
    assert by_time.repro_command() == repeat
    by_count = fuzz(MODEL, profile="dev", seed=3, examples=50, steps=20)
    assert by_count.stopped_by == "examples" and by_count.rounds == 1
    assert (by_time.examples, by_time.steps, by_time.coverage) == (
        by_count.examples,
        by_count.steps,
        by_count.coverage,
    )


def test_two_jobs_run_the_same_rounds_as_one() -> None:
    one = fuzz(MODEL, profile="dev", seed=4, examples=60, steps=15)
    two = fuzz(MODEL, profile="dev", seed=4, examples=60, steps=15, jobs=2)
    assert one.rounds == two.rounds == 2  # 50 + 10
    assert (one.examples, one.steps, one.coverage) == (two.examples, two.steps, two.coverage)
    with pytest.raises(ValueError, match="MOD:FACTORY"):
        fuzz(make_model_factory(AckOffByOne), jobs=2)


def test_a_campaign_in_a_database_resumes_after_its_last_round(tmp_path: Path) -> None:
    first = fuzz(MODEL, profile="dev", seed=5, examples=50, steps=10, database=tmp_path)
    record = json.loads((tmp_path / CAMPAIGN_FILE).read_text())
    assert record == {
        "examples": 50, "impl": MODEL, "next_round": 1, "profile": "dev", "seed": 5,
    }  # fmt: skip
    assert first.first_round == 0 and first.rounds == 1
    # No seed given: the recorded one; the examples count the whole campaign.
    resumed = fuzz(MODEL, profile="dev", examples=100, steps=10, database=tmp_path)
    assert (resumed.seed, resumed.first_round, resumed.rounds) == (5, 1, 1)
    assert json.loads((tmp_path / CAMPAIGN_FILE).read_text())["next_round"] == 2
    with pytest.raises(ValueError, match="another --db"):
        fuzz(MODEL, profile="dev", seed=6, examples=150, database=tmp_path)


def test_examples_may_start_from_the_regression_corpus() -> None:
    starts = corpus_starts(REGRESSIONS)
    assert len(starts) >= 10 and all(start.prefix for start in starts)
    assert {start.source for start in starts} <= {path.name for path in REGRESSIONS.iterdir()}
    assert corpus_starts(REGRESSIONS / "missing") == ()
    # The corpus holds this wrong model's failure: a campaign starting there finds it in
    # its first examples, where without the corpus this seed needs 400 examples of 30
    # steps and more (tests/test_fuzz.py: seed 7).
    factory = make_model_factory(AckOffByOne)
    found = fuzz(factory, examples=50, steps=10, seed=1, corpus=REGRESSIONS)
    assert found.failure is not None and found.failure.anomaly == "ack-mismatch"
    assert found.examples_to_find <= 10, found.examples_to_find


def test_state_observations_count_pages_acks_and_lagging_groups() -> None:
    def message(msg_id: int) -> ConsumerMessage:
        return ConsumerMessage(msg_id, b"x", {})

    topic = TopicState(
        messages=tuple(message(i) for i in range(3, 6)),
        pages=(Page(3, 20, 0, 5), Page(4, 20, 0, None)),
        open_page_bytes=1,
        last_id=5,
    )
    state = State.build({"t": topic}, {("t", "a"): 5, ("t", "b"): -1, ("t", "c"): 5})
    observed = state_observations(state)
    assert observed == {"pages": 2, "acked_pages": 1, "lagging_groups": 1}
    assert coverage_keys({**observed, "crashes": 5}) == {
        "pages>=2", "acked_pages>=1", "lagging_groups>=1", "crashes>=4",
    }  # fmt: skip


@pytest.mark.parametrize("name", NEWCOMERS)
def test_the_default_fuzz_campaign_kills_each_newcomer_mutant(name: str, tmp_path: Path) -> None:
    """The kill matrix's fuzz column for the three bug kinds a new user planted: the
    default campaign (ci, seed 0, the regression corpus) kills each, with a short program.
    The campaign starts at the round measured to kill it first (``FIRST_KILLING_ROUND``:
    the rounds skipped pass it, those run are the default campaign's own)."""
    (mutant,) = select([name])
    first_round = FIRST_KILLING_ROUND.get(name, 0)
    skipped = first_round * FUZZ_PROFILES["ci"].max_examples
    fuzz_kill = fuzz_mutant(mutant, tmp_path, REGRESSIONS, first_round=first_round)
    assert fuzz_kill.status == KILLED, fuzz_kill
    assert 0 < skipped + fuzz_kill.examples <= FUZZ_BUDGETS["ci"].examples  # type: ignore[operator]
    assert fuzz_kill.shrunk_steps is not None and fuzz_kill.shrunk_steps <= 10
    assert fuzz_kill.trace and Path(fuzz_kill.trace).exists()
    assert fuzz_kill.repro and fuzz_kill.repro.startswith("rmqsim fuzz --profile ci --seed 0")


def test_the_default_fuzz_campaign_kills_destroy_by_prefix(tmp_path: Path) -> None:
    """A queue that deletes by bare name prefix needs closed pages on a topic whose name
    extends ``t`` and then a destroy of ``t``: examples that start fresh from the second or
    third configuration start with such a bystander (``t2``) and its closed pages, so the
    default campaign kills it (its 800 examples did not before)."""
    (mutant,) = select(["destroy-by-prefix"])
    fuzz_kill = fuzz_mutant(mutant, tmp_path, REGRESSIONS)  # as ``rmqsim fuzz`` by default
    assert fuzz_kill.status == KILLED and fuzz_kill.anomaly == "page-mismatch", fuzz_kill
    assert fuzz_kill.shrunk_steps is not None and fuzz_kill.shrunk_steps <= 10
    assert fuzz_kill.trace is not None
    shrunk = [step.op for step in read_trace(Path(fuzz_kill.trace)).steps]
    assert ops.DestroyTopic("t") in shrunk and ops.CreateTopic(BYSTANDER_TOPIC) in shrunk, shrunk


def test_the_fuzz_column_skips_a_layer_the_fuzzer_does_not_drive(tmp_path: Path) -> None:
    (mutant,) = select(["no-fsync"])  # a storage mutant: only a power cut shows it
    assert fuzz_mutant(mutant, tmp_path).status == NOT_RUN


def test_cli_budget_stops_the_campaign_and_prints_the_repeat(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        cli,
        ["fuzz", "--impl", MODEL, "--budget", "0.001s", "--steps", "5", "--seed", "2",
         "--profile", "dev", "--out", str(tmp_path)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "round 0: " in done.output and "stopped by budget" in done.output
    assert "the same rounds again: rmqsim fuzz --profile dev --seed 2 --examples 50" in done.output


@pytest.mark.parametrize("budget", ["0", "-5s", "ten minutes", "5d", "inf"])
def test_cli_refuses_a_budget_that_is_not_a_duration(budget: str, tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["fuzz", "--budget", budget, "--out", str(tmp_path)])
    assert done.exit_code == 2, done.output
    assert "not a duration" in done.output and "Traceback" not in done.output


def test_the_kill_matrix_shows_and_sums_the_fuzz_column() -> None:
    from rich.console import Console

    from rmqsim.conformance.cli.mutants import kill_table
    from rmqsim.conformance.mutants.kill import SURVIVED, FuzzKill, Kill, KillMatrix, matrix_json

    first, second, consumer = select(["ack-off-by-one", "capped-poll", "commit-highest-acked"])
    kills = [
        Kill(first, KILLED, fuzz=FuzzKill(KILLED, examples=10, seconds=3.5, cpu_seconds=2.0)),
        Kill(second, KILLED, fuzz=FuzzKill(SURVIVED, examples=812, seconds=90, cpu_seconds=80)),
        Kill(consumer, KILLED, fuzz=FuzzKill(NOT_RUN)),
    ]
    matrix = KillMatrix(range(0, 1), ("smoke",), kills, None)
    assert matrix.fuzz_summary() == {
        "run": 2, "killed": 1, "gate_killed_of_those": 2, "median_seconds_to_kill": 3.5,
        "cpu_seconds": 82.0,
    }  # fmt: skip
    assert matrix_json(matrix)["mutants"][1]["fuzz"]["status"] == SURVIVED
    console = Console(width=250, record=True)
    console.print(kill_table(matrix, range(0, 1)))
    text = console.export_text()
    assert "fuzz ex" in text and "fuzz shrunk" in text and "3.50" in text and "survived" in text


def test_the_corpus_starts_only_from_the_queue_layers_traces() -> None:
    """The queue's fuzzer starts from queue traces only: a stream trace in the corpus is
    another layer's (the layer registry says so, ``layer_for_header``)."""
    sources = {start.source for start in corpus_starts(REGRESSIONS)}
    others = {path.name for path in REGRESSIONS.glob("*.jsonl")
              if json.loads(path.open().readline()).get("layer", "queue") != "queue"}
    assert others and sources and not sources & others
