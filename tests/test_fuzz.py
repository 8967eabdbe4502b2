"""The hypothesis fuzzer: passes on our implementation, finds and shrinks wrong ones to a
handful of steps, writes traces that replay, and is deterministic for a seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import settings

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory, model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.fuzz import PROFILE_NAMES
from rmqsim.conformance.running.run import replay_trace
from rmqsim.conformance.running.trace import parse_lines, read_trace
from rmqsim.conformance.searching.stateful import FUZZ_PROFILES, fuzz
from tests.fuzz_wrong_models import SeekRedelivers
from tests.wrong_models import AckOffByOne, TwoStepProduce

#: The most steps a shrunk failure may keep ("a handful").
MAX_SHRUNK_STEPS = 8


def test_profiles_are_registered_and_ci_is_derandomized_and_bounded() -> None:
    assert tuple(FUZZ_PROFILES) == PROFILE_NAMES
    ci = settings.get_profile("rmqsim-ci")
    assert ci.derandomize and ci.print_blob and ci.database is None and ci.deadline is None
    assert ci.max_examples <= 100 and ci.stateful_step_count <= 50
    assert settings.get_profile("rmqsim-nightly").max_examples > 10 * ci.max_examples


def test_fuzz_passes_on_our_implementation_and_reaches_crashes() -> None:
    result = fuzz(DEFAULT_IMPL, profile="ci", examples=15, steps=25)
    assert result.ok, result.failure and result.failure.divergence
    assert result.examples >= 15 and result.steps > 100
    assert result.crashes_injected > 0  # crashes armed inside operations reach RocksMQ


@pytest.mark.parametrize(
    ("wrong", "anomaly", "seed", "must_contain"),
    [
        (SeekRedelivers, "duplicate", 0, "seek"),
        (AckOffByOne, "ack-mismatch", 7, "create_group"),
    ],
    ids=["duplicate-after-seek", "ack-off-by-one"],
)
def test_fuzz_finds_and_shrinks_a_wrong_queue(
    wrong: type, anomaly: str, seed: int, must_contain: str
) -> None:
    factory = make_model_factory(wrong)
    result = fuzz(factory, profile="ci", examples=400, steps=30, seed=seed)
    failure = result.failure
    assert failure is not None, f"{wrong.__name__} not found"
    assert failure.anomaly == anomaly
    assert failure.steps <= MAX_SHRUNK_STEPS, failure.trace_lines
    trace = parse_lines(failure.trace_lines)
    assert must_contain in [step.op.kind for step in trace.steps]
    # The trace is an ordinary one: it fails again on the wrong queue, passes on the model.
    assert replay_trace(trace, impl=factory).anomaly == anomaly
    assert replay_trace(trace, impl=model_factory).ok


def test_crash_inside_an_operation_is_found_and_the_same_seed_gives_the_same_trace() -> None:
    factory = make_model_factory(TwoStepProduce)
    first = fuzz(factory, profile="ci", examples=200, steps=30, seed=5)
    second = fuzz(factory, profile="ci", examples=200, steps=30, seed=5)
    assert first.failure is not None and first.failure.anomaly == "torn-operation"
    assert first.failure.steps <= MAX_SHRUNK_STEPS
    assert second.failure is not None
    assert first.failure.trace_lines == second.failure.trace_lines
    assert first.examples == second.examples
    header = json.loads(first.failure.trace_lines[0])
    assert header["profile"] == "fuzz" and header["seed"] == 5
    assert header["repro"].startswith("rmqsim fuzz --profile ci --seed 5 --examples 200")
    assert first.failure.repro_command() == header["repro"]


@pytest.mark.parametrize(
    ("mutant", "pair"),
    [
        ("case-insensitive-names", ("g", "G")),
        ("nfc-insensitive-names", ("gr\u00fcppe", "gru\u0308ppe")),
    ],
)
def test_the_default_fuzz_campaign_catches_a_queue_that_merges_two_names(
    mutant: str, pair: tuple[str, str]
) -> None:
    """``rmqsim fuzz`` as it runs by default (profile ci, seed 0) finds a queue that takes
    two spellings of a name for one, and shrinks it to a program that names both. The
    campaign starts at the round measured to find it first (rounds 0 and 1 pass
    nfc-insensitive-names, 11 CPU s; round 2 finds it at its 9th example): each round runs
    on its own seed, so the rounds run are the default campaign's own."""
    from rmqsim.conformance.mutants.catalogue import select

    (wrong,) = select([mutant])
    first_round = {"nfc-insensitive-names": 2}.get(mutant, 0)
    result = fuzz(wrong.impl, profile="ci", first_round=first_round)
    failure = result.failure
    assert failure is not None, f"{mutant} not found"
    assert failure.steps <= MAX_SHRUNK_STEPS, failure.trace_lines
    trace = parse_lines(failure.trace_lines)
    named = {getattr(step.op, "group", None) for step in trace.steps}
    assert set(pair) <= named, trace.steps
    assert replay_trace(trace, impl=DEFAULT_IMPL).ok  # our queue keeps the two names apart


# ---------------------------------------------------------------------- command line


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_exit_0_when_nothing_is_found(tmp_path: Path) -> None:
    done = invoke("fuzz", "--examples", "5", "--steps", "15", "--out", str(tmp_path))
    assert done.exit_code == 0, done.output
    assert "no failure found" in done.output
    assert list(tmp_path.iterdir()) == []


def test_cli_exit_1_writes_a_trace_that_replay_reproduces(tmp_path: Path) -> None:
    """A queue's --impl is fuzzed on the queue, consumer and stream layers: the queue's
    campaign fails (at its 9th example), the others pass, the command exits 1 with the
    queue's failure. 20 examples (was 200: the two passing layer campaigns of 200 examples
    took most of the test's CPU, 11 s; now 1.6 s). That a queue's --impl is fuzzed on
    exactly these layers: ``test_fuzz_layers.test_fuzz_with_no_options_fuzzes_every_layer``."""
    impl = "tests.fuzz_wrong_models:two_step_produce"
    corpus = tmp_path / "corpus"
    done = invoke(
        "fuzz", "--impl", impl, "--examples", "20", "--steps", "30", "--seed", "5",
        "--out", str(tmp_path), "--save-regression", str(corpus),
    )  # fmt: skip
    assert done.exit_code == 1, done.output
    assert "shrunk program" in done.output and "DIVERGENCE torn-operation" in done.output
    assert "@reproduce_failure" in done.output
    assert "no failure found" not in done.output
    for layer in ("queue", "consumer", "stream"):
        assert f"{layer} layer, profile ci, seed 5: 1 rounds, " in done.output, done.output
    [trace_file] = tmp_path.glob("fuzz-seed5-torn-operation.jsonl")
    assert invoke("replay", str(trace_file)).exit_code == 1  # the header names the wrong impl
    clean = invoke("replay", str(trace_file), "--impl", "rmqsim.conformance.adapter:model_factory")
    assert clean.exit_code == 0, clean.output
    [saved] = corpus.glob("torn-operation-*.jsonl")
    header = read_trace(saved).header
    assert header["impl"] == DEFAULT_IMPL and header["found_on"] == impl


@pytest.mark.parametrize(
    "args",
    [
        ["--profile", "weekly"],
        ["--impl", "no_such_module:factory"],
        ["--impl", "not-a-spec"],
        ["--examples", "0"],
        ["--seed", "-1"],
    ],
)
def test_cli_exit_2_on_bad_usage(args: list[str], tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["fuzz", "--out", str(tmp_path), *args])
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize("name", ["smoke", "consumer"])
def test_a_scenario_profile_given_to_fuzz_says_what_fuzz_profile_means(name: str) -> None:
    """``--profile`` is a scenario profile everywhere else; here it picks settings."""
    result = CliRunner().invoke(cli, ["fuzz", "--profile", name])
    assert result.exit_code == 2, result.output
    assert "is a scenario profile" in result.output and "dev, ci, nightly" in result.output


#: A module of the user's (outside site-packages, not a test file): hypothesis counts it as
#: local code and, unless rmqsim stops it, mixes its literals into the draws; these are
#: bytes of the fuzzer's payload sizes (``PAYLOAD_SIZES``).
USER_MODULE = """
PAYLOADS = (b"q", b"qwert", b"qwertyuiopasdfgh", b"qwertyuiopasdfghj", b"Q" * 33, b"Z" * 40)
"""
FUZZ_IN_A_PROCESS = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from rmqsim.conformance.adapter import make_model_factory
from rmqsim.conformance.searching.stateful import fuzz
from tests.wrong_models import AckOffByOne
r = fuzz(make_model_factory(AckOffByOne), profile="ci", examples=400, steps=30, seed=7)
print(json.dumps([r.examples, r.steps, r.failure.trace_digest if r.failure else None]))
"""
#: The README's other way in: ``make_machine(f).TestCase`` in a project's own test suite,
#: run by hypothesis's runner (not ``fuzz``), with a fixed seed; generation only (shrinking
#: would take a minute and shows nothing more).
TEST_CASE_IN_A_PROCESS = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
from hypothesis import Phase, seed, settings
from rmqsim.conformance.adapter import make_model_factory
from rmqsim.conformance.running.lockstep import Divergence
from rmqsim.conformance.searching.stateful import make_machine
from tests.wrong_models import AckOffByOne
machine = seed(7)(make_machine(make_model_factory(AckOffByOne)))
TestQueue = machine.TestCase
TestQueue.settings = settings(
    TestQueue.settings,
    max_examples=400,
    stateful_step_count=30,
    database=None,
    phases=[Phase.generate],
)
try:
    TestQueue().runTest()
    found = False
except Divergence:
    found = True
print(json.dumps([machine.examples, machine.steps_run, found]))
"""


@pytest.mark.parametrize(
    "script",
    [FUZZ_IN_A_PROCESS, TEST_CASE_IN_A_PROCESS],
    ids=["fuzz", "make_machine-TestCase"],
)
def test_a_campaign_does_not_depend_on_what_the_process_imported(
    script: str, tmp_path: Path
) -> None:
    """Same seed, same program, whichever modules were loaded before: hypothesis's draws
    of local constants are kept out (an editable install, an adapter, earlier tests)."""
    (tmp_path / "rmqsim_user_constants.py").write_text(USER_MODULE)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(tmp_path)])}

    def campaign(*imports: str) -> list[object]:
        done = subprocess.run(
            [sys.executable, "-c", script, *imports],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=True,
        )  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])

    bare = campaign()
    assert bare[-1], "the wrong model was not found: the comparison would prove little"
    assert bare == campaign("rmqsim_user_constants", "rmqsim.reports.aggregate")


#: A project's own test module, as the README shows it: one state machine test case for a
#: conforming queue and one for a wrong one.
OWN_TEST_MODULE = """
from hypothesis import Phase, seed, settings
from rmqsim.conformance.adapter import make_model_factory
from rmqsim.conformance.searching.stateful import make_machine
from tests.wrong_models import AckOffByOne

TestOurQueue = seed(7)(make_machine()).TestCase
TestOurQueue.settings = settings(max_examples=5, stateful_step_count=10, database=None)
TestWrongQueue = seed(7)(make_machine(make_model_factory(AckOffByOne))).TestCase
TestWrongQueue.settings = settings(
    max_examples=400, stateful_step_count=30, database=None, phases=[Phase.generate]
)
"""


def test_make_machine_test_case_runs_under_pytest(tmp_path: Path) -> None:
    """The README's way to fuzz from a project's own suite: pytest collects the test
    cases, ours passes and the wrong queue fails with the runner's divergence."""
    (tmp_path / "test_own_queue.py").write_text(OWN_TEST_MODULE)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-qp", "no:cacheprovider", "-rA", "test_own_queue.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PASSED test_own_queue.py::TestOurQueue::runTest" in done.stdout, done.stdout
    assert "FAILED test_own_queue.py::TestWrongQueue::runTest" in done.stdout, done.stdout
    assert "Divergence" in done.stdout, done.stdout
    # What differed is shown, not only the anomaly's name.
    assert "model: " in done.stdout and "sut:   " in done.stdout, done.stdout
