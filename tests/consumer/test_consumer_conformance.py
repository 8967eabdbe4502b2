"""The consumer profiles on impl, their determinism, the history checks failing on wrong
reports, and every consumer-layer mutant killed."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL
from rmqsim.conformance.cli import cli
from rmqsim.conformance.consumer.check import GroupHistory
from rmqsim.conformance.consumer.run import DEFAULT_CONSUMER_IMPL
from rmqsim.conformance.mutants.consumer import MUTANTS
from rmqsim.conformance.running.gate import GATE_CONSUMER_PROFILES
from rmqsim.conformance.running.run import replay_file, run_seed
from rmqsim.impl import RocksMQ
from rmqsim.impl.consumer import ConsumerCore, PushConsumer, PushOptions
from rmqsim.model.api import Completion, ConsumerConfig, ConsumeResult, Delivered, Delivery
from tests.conftest import FakeClock
from tests.consumer.conftest import NO_RETENTION
from tests.consumer.test_push_threads import produce, wait_until

R = "%RETRY%g"


@pytest.mark.parametrize("profile", GATE_CONSUMER_PROFILES)
def test_consumer_profiles_run_clean_on_impl(profile: str) -> None:
    for seed in range(3):
        result = run_seed(profile, seed)
        assert result.ok, (seed, result.anomaly, result.divergence and result.divergence.detail)
        assert result.steps > 300  # the drain ran past the active phase


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    first = run_seed("consumer-crashy", 5)
    again = run_seed("consumer-crashy", 5)
    other = run_seed("consumer-crashy", 6)
    assert first.trace_lines == again.trace_lines
    assert first.trace_lines[1:] != other.trace_lines[1:]
    kinds = {line.split('"kind":"')[1].split('"')[0] for line in first.trace_lines[1:-1]}
    assert {"crash_client", "crash_queue", "complete", "persist", "pull", "run_retention"} <= kinds


#: What each mutant breaks first (the lockstep's mismatch is the fallback name).
EXPECTED = {
    "commit-highest-acked": ("consumer", {"offset-passes-unacked"}),
    "persist-drops-other-queues": ("consumer", {"offset-regression"}),
    "orderly-commit-empty-returns-one": (
        "consumer-orderly",
        {"offset-regression", "consumer-mismatch"},
    ),
    "failed-send-back-advances": ("consumer", {"offset-passes-unacked"}),
}


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_consumer_mutant_is_killed(mutant: Any) -> None:
    assert mutant.layer == "consumer"
    profile, anomalies = EXPECTED[mutant.name]
    for seed in range(2):
        result = run_seed(profile, seed, impl=mutant.impl)
        assert not result.ok and result.anomaly in anomalies, (seed, result.anomaly)


def test_cli_runs_consumer_profiles_and_reports_a_mutant(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli, ["run", "--profile", "consumer", "--seeds", "0:2"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(
        cli,
        [
            "run",
            "--profile",
            "consumer",
            "--seed",
            "0",
            "--impl",
            MUTANTS[0].impl,
            "--out",
            str(tmp_path),
        ],
    )
    assert bad.exit_code == 1
    assert "DIVERGENCE offset-passes-unacked" in bad.output
    assert list(tmp_path.glob("consumer-seed0-offset-passes-unacked.jsonl"))
    # The failing consumer run is shrunk, and the report lists the shrunk operations.
    (shrunk,) = tmp_path.glob("consumer-seed0-offset-passes-unacked.shrunk.jsonl")
    assert "same anomaly (offset-passes-unacked)" in bad.output
    assert f"rmqsim replay {shrunk}" in bad.output and "start_client(" in bad.output
    assert runner.invoke(cli, ["replay", str(shrunk)]).exit_code == 1  # the header's impl
    assert runner.invoke(cli, ["replay", str(shrunk), "--impl", DEFAULT_IMPL]).exit_code == 0


# ---------------------------------------------------------------------- threads


class RecordingCore(ConsumerCore):
    """Reports every step, in the order the core's lock serialised them."""

    reports: list[tuple[str, Any]]

    def start(self) -> dict[str, int]:
        with self._lock:
            self.reports = []
            offsets = super().start()
            self.reports.append(("started", offsets))
            return offsets

    def pull(self) -> dict[str, tuple[int, ...] | None]:
        with self._lock:
            added = super().pull()
            self.reports.append(("pulled", added))
            return added

    def next_batch(self) -> Delivery | None:
        with self._lock:
            batch = super().next_batch()
            if batch is not None:
                self.reports.append(("delivered", batch))
            return batch

    def complete(self, seq: int, result: ConsumeResult) -> Completion:
        with self._lock:
            done = super().complete(seq, result)
            self.reports.append(("completed", (done, result)))
            return done

    def persist(self) -> dict[str, int]:
        with self._lock:
            stored = super().persist()
            self.reports.append(("persisted", stored))
            return stored


def test_the_threaded_pool_passes_the_history_checks(tmp_path: Path) -> None:
    mq = RocksMQ.open(tmp_path / "queue", config=NO_RETENTION, clock=FakeClock())
    mq.create_topic("t")
    produce(mq, 200)
    lock = threading.Lock()
    calls: dict[int, int] = {}

    def handler(batch: tuple[Delivered, ...]) -> ConsumeResult:
        with lock:  # every third origin fails its first delivery
            first = batch[0].origin_id
            calls[first] = calls.get(first, 0) + 1
        return (
            ConsumeResult.RETRY_LATER
            if first % 3 == 0 and calls[first] == 1
            else (ConsumeResult.SUCCESS)
        )

    # A small cache: the pull thread keeps meeting flow control, which the history checks.
    config = ConsumerConfig(max_reconsume_times=3, max_cached_count=20, max_cached_bytes=60)
    push = PushConsumer(
        mq,
        group="g",
        topic="t",
        handler=handler,
        path=tmp_path / "o",
        config=config,
        clock=FakeClock(),
        options=PushOptions(workers=4, core_cls=RecordingCore),
    )
    push.start()
    core: Any = push.core
    wait_until(
        lambda: sum(len(r[0].acked) for kind, r in list(core.reports) if kind == "completed") >= 200
    )
    push.close()
    h = GroupHistory(
        "g",
        "t",
        max_reconsume_times=3,
        orderly=False,
        max_cached_count=config.max_cached_count,
        max_cached_bytes=config.max_cached_bytes,
    )
    h.produced(list(range(1, 201)), [len(b"m%d" % i) for i in range(200)])
    for kind, report in core.reports:
        if kind == "completed":
            h.completed(*report)
        else:
            getattr(h, kind)(report)
    h.finish()
    mq.close()


def test_replay_of_a_consumer_trace_checks_every_recorded_line(tmp_path: Path) -> None:
    runner = CliRunner()
    trace = tmp_path / "c.jsonl"
    made = runner.invoke(
        cli, ["run", "--profile", "consumer-orderly", "--seed", "2", "--trace", str(trace)]
    )
    assert made.exit_code == 0, made.output
    assert runner.invoke(cli, ["replay", str(trace)]).exit_code == 0
    lines = trace.read_text().splitlines()
    produced = next(i for i, line in enumerate(lines) if '"kind":"produce_batch"' in line)
    lines[produced] = lines[produced].replace('"value":[', '"value":[9', 1)  # an id changed
    trace.write_text("\n".join(lines) + "\n")
    tampered = runner.invoke(cli, ["replay", str(trace)])
    assert tampered.exit_code == 1 and "DIVERGENCE trace-mismatch" in tampered.output


def test_replay_executes_the_recorded_operations_not_the_seed(tmp_path: Path) -> None:
    """A trace is self-contained: another seed in its header changes nothing, a cut
    trace replays only its steps, and a mutant's trace fails at the recorded step."""
    recorded = run_seed("consumer-crashy", 4)
    lines = list(recorded.trace_lines)
    header = json.loads(lines[0])
    lines[0] = json.dumps({**header, "seed": 99})
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    again = replay_file(trace)
    assert again.ok and again.steps == recorded.steps
    assert again.trace_lines[1:] == recorded.trace_lines[1:]
    cut = tmp_path / "cut.jsonl"
    end = '{"type":"end","steps":100}'  # a cut keeps an end line counting its steps
    cut.write_text("\n".join([*lines[:101], end]) + "\n")  # the header and 100 steps
    short = replay_file(cut)
    assert short.steps == 100 and short.anomaly == "consumer-lost"  # not drained: reported
    mutant = MUTANTS[0]
    failing = run_seed("consumer", 0, impl=mutant.impl)
    saved = tmp_path / "m.jsonl"
    saved.write_text("\n".join(failing.trace_lines) + "\n")
    replayed = replay_file(saved)
    assert (replayed.anomaly, replayed.steps) == (failing.anomaly, failing.steps)
    fixed = replay_file(saved, impl=DEFAULT_CONSUMER_IMPL)
    # Our consumer passes the step where the mutant diverged; the cut run is not drained.
    assert (fixed.anomaly, fixed.steps) == ("consumer-lost", failing.steps)


def test_replay_rejects_a_consumer_trace_with_a_bad_operation(tmp_path: Path) -> None:
    lines = run_seed("consumer", 1, steps=20).trace_lines
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1].replace('"kind":"', '"kind":"x', 1)]) + "\n")
    result = CliRunner().invoke(cli, ["replay", str(bad)])
    assert result.exit_code == 2 and "unknown consumer operation" in result.output
    header = json.loads(lines[0])
    header["profile_config"]["clients"][0]["workers"] = 0
    bad.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    result = CliRunner().invoke(cli, ["replay", str(bad)])
    assert result.exit_code == 2 and "header profile_config" in result.output
