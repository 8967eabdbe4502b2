"""The regression corpus (``regressions/``): one test per file, replayed on our
implementation, plus the corpus machinery (names, dedup, the gate's replay)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from rmqsim.conformance.adapter import DEFAULT_IMPL, make_model_factory, model_factory
from rmqsim.conformance.reporting.report import render_failure
from rmqsim.conformance.running.corpus import (
    corpus_files,
    program_digest,
    replay_regression,
    save_regression,
)
from rmqsim.conformance.running.gate import GateResult, junit_xml, run_corpus, summary_json
from rmqsim.conformance.running.run import read_run_trace, replay_trace, run_seed
from rmqsim.conformance.running.trace import read_trace
from rmqsim.model import ReferenceMQ
from tests.wrong_models import LostWrite

CORPUS = Path(__file__).resolve().parent.parent / "regressions"
FILES = corpus_files(CORPUS)


def origin_factory(found_on: str):
    """The wrong queue a corpus file was found on (``module:Class`` of a model subclass)."""
    module_name, _, name = found_on.partition(":")
    cls = getattr(importlib.import_module(module_name), name)
    assert issubclass(cls, ReferenceMQ)
    return make_model_factory(cls)


def test_the_corpus_is_seeded() -> None:
    assert len(FILES) >= 10
    assert all(path.stem.rsplit("-", 1)[1].isalnum() for path in FILES)


@pytest.mark.parametrize("path", FILES, ids=[path.name for path in FILES])
def test_regression_replays_clean_on_impl_and_fails_where_found(path: Path) -> None:
    result = replay_regression(path)
    assert result.ok, result.divergence
    trace = read_run_trace(path)
    found_on = trace.header.get("found_on", "")
    if found_on.startswith("tests."):
        anomaly = path.stem.rsplit("-", 1)[0]
        again = replay_trace(trace, impl=origin_factory(found_on))
        assert again.anomaly == anomaly, again.divergence


def test_save_regression_names_by_anomaly_and_program_and_keeps_one_copy(tmp_path: Path) -> None:
    failing = next(
        r
        for seed in range(6)
        if not (r := run_seed("smoke", seed, impl=make_model_factory(LostWrite))).ok
    )
    first = save_regression(failing, tmp_path)
    assert first.name == f"lost-write-{program_digest(failing.trace_lines)[:12]}.jsonl"
    assert save_regression(failing, tmp_path) == first and len(list(tmp_path.iterdir())) == 1
    header = read_trace(first).header
    assert header["impl"] == DEFAULT_IMPL and header["found_on"] == failing.impl
    # The digest is of the program: versions, commit and outcomes do not change it.
    lines = list(failing.trace_lines)
    header_obj = json.loads(lines[0])
    header_obj["git_commit"] = "0" * 40
    lines[0] = json.dumps(header_obj)
    assert program_digest(lines) == program_digest(failing.trace_lines)


def test_gate_replays_the_corpus_and_reports_it(tmp_path: Path) -> None:
    for path in FILES[:2]:
        (tmp_path / path.name).write_text(path.read_text())
    gate = GateResult(impl="model", seeds=range(0))
    run_corpus(gate, tmp_path, impl=model_factory)
    assert gate.ok and len(gate.corpus) == 2
    assert summary_json(gate)["regressions"] == {"files": 2, "failed": 0}
    xml = junit_xml(gate).decode()
    assert 'name="rmqsim.regressions"' in xml and FILES[0].name in xml
    # On the wrong queue it came from, the file fails the gate.
    wrong = GateResult(impl="wrong", seeds=range(0))
    found_on = read_trace(FILES[0]).header["found_on"]
    run_corpus(wrong, tmp_path, impl=origin_factory(found_on))
    assert not wrong.ok and "<failure" in junit_xml(wrong).decode()


def test_run_save_regression_writes_the_failure_into_the_corpus(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rmqsim.conformance.cli import cli

    corpus = tmp_path / "corpus"
    done = CliRunner().invoke(
        cli,
        ["run", "--profile", "seek-storm", "--seed", "0", "--out", str(tmp_path / "out"),
         "--impl", "tests.fuzz_wrong_models:seek_redelivers", "--save-regression", str(corpus)],
    )  # fmt: skip
    assert done.exit_code == 1, done.output
    [saved] = corpus.glob("duplicate-*.jsonl")
    assert replay_regression(saved).ok
    # The file replays on our queue by default: the run says how to check the one it
    # failed on, and that command fails again.
    found_on = "tests.fuzz_wrong_models:seek_redelivers"
    assert f"rmqsim replay {saved} --impl {found_on}" in done.output, done.output
    again = replay_regression(saved, impl=found_on)
    assert not again.ok
    replays = [line for line in render_failure(again).splitlines() if "rmqsim replay" in line]
    assert replays and all(f"--impl {found_on}" in line for line in replays), replays


def test_a_failing_consumer_run_in_the_corpus_replays_clean_and_fails_where_found(
    tmp_path: Path,
) -> None:
    """A consumer run that failed at a step stops there, without its drain: saved with
    the final check off, it replays clean on our consumer and fails on the one it was
    found on; and the gate reads it beside queue traces."""
    from rmqsim.conformance.mutants.consumer import MUTANTS

    mutant = MUTANTS[0].impl
    failing = run_seed("consumer", 0, impl=mutant)
    assert not failing.ok
    saved = save_regression(failing, tmp_path)
    header = json.loads(saved.read_text().splitlines()[0])
    assert header["final_check"] is False and header["found_on"] == mutant
    assert replay_regression(saved).ok
    again = replay_regression(saved, impl=mutant)
    assert again.anomaly == failing.anomaly
    assert again.repro == f"rmqsim replay {saved} --impl {mutant}"
    (tmp_path / FILES[0].name).write_text(FILES[0].read_text())
    gate = GateResult(impl=DEFAULT_IMPL, seeds=range(0))
    run_corpus(gate, tmp_path, impl=DEFAULT_IMPL)
    assert gate.ok and len(gate.corpus) == 2
