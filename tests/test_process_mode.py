"""``--crash-mode process``: the SUT in a child process, crashes as real SIGKILLs. Shown to
agree with in-process crashes on impl, to catch a crash mutant the same way, to really
kill, to leave no child behind, and to report a child that dies on its own."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import DEFAULT_IMPL, BadImplError, model_factory
from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.crash_sweep import crash_sweep
from rmqsim.conformance.mutants.crash import MUTANTS
from rmqsim.conformance.running.lockstep import FaultInjector, InjectedCrash, SimClock
from rmqsim.conformance.running.process_sut import ChildDiedError, process_factory
from rmqsim.conformance.running.run import replay_trace, run_seed
from rmqsim.conformance.running.trace import parse_lines
from rmqsim.conformance.wire.client import WireQueue
from rmqsim.model.api import MQConfig, ProducerMessage

MUTANT_IMPL = {m.name: m.impl for m in MUTANTS}


@pytest.fixture
def proxies(wire_queues: list[WireQueue]) -> list[WireQueue]:
    """Every ``WireQueue`` opened during the test (to check that none survives)."""
    return wire_queues


def _no_child_left(opened: list[WireQueue]) -> None:
    assert opened, "the run opened no child"
    for proxy in opened:
        assert proxy.process.returncode is not None  # reaped
        with pytest.raises(ProcessLookupError):  # and its process group is gone
            os.killpg(proxy.process.pid, 0)


def test_process_mode_agrees_with_in_process_crashes(
    proxies: list[WireQueue],
) -> None:
    """Same steps, outcomes, crash resolutions and final state: only the header differs."""
    runs = {
        mode: run_seed("crashy", 1, steps=120, crash_rate=0.05, crash_mode=mode)
        for mode in ("inprocess", "process")
    }
    inprocess, process = runs["inprocess"], runs["process"]
    assert inprocess.ok and process.ok
    assert process.trace_lines[1:] == inprocess.trace_lines[1:]
    crashes = [s.crash for s in parse_lines(process.trace_lines).steps if s.crash]
    assert {c.resolved for c in crashes} == {"before", "after"}
    assert process.fault_points == inprocess.fault_points
    assert '"crash_mode":"process"' in process.trace_lines[0]
    assert "crash_mode" not in inprocess.trace_lines[0]
    # a real SIGKILL ended the children that crashed at a point
    assert any(p.process.returncode == -signal.SIGKILL for p in proxies)
    _no_child_left(proxies)
    # replay honours the header's crash mode
    replayed = replay_trace(parse_lines(process.trace_lines))
    assert replayed.ok and replayed.crash_mode == "process"
    assert replayed.state_digest == inprocess.state_digest
    assert "--crash-mode process" in process.repro_command()


def test_process_sweep_is_clean_on_impl_and_matches_in_process(
    proxies: list[WireQueue],
) -> None:
    sweeps = {
        m: crash_sweep("smoke", 0, impl=DEFAULT_IMPL, steps=12, crash_mode=m)
        for m in ("inprocess", "process")
    }
    assert sweeps["process"].ok, [c.label() for c, _ in sweeps["process"].failures]
    assert sweeps["process"].cases == sweeps["inprocess"].cases
    assert sweeps["process"].resolutions == sweeps["inprocess"].resolutions
    assert sum(sweeps["process"].resolutions.values()) > 0
    _no_child_left(proxies)


def test_process_sweep_catches_a_crash_mutant_as_in_process() -> None:
    impl = MUTANT_IMPL["two-step-produce"]
    found = {
        m: crash_sweep("crashy", 0, impl=impl, steps=15, crash_mode=m, max_failures=1)
        for m in ("inprocess", "process")
    }
    (case_in, failed_in), (case_proc, failed_proc) = (found[m].failures[0] for m in found)
    assert case_proc == case_in
    assert failed_proc.anomaly == failed_in.anomaly == "torn-operation"


def test_a_crash_is_a_real_sigkill_at_the_armed_point(tmp_path: Path) -> None:
    faults = FaultInjector()
    factory = process_factory(DEFAULT_IMPL)
    queue = factory(path=tmp_path / "q", config=MQConfig(), clock=SimClock(), faults=faults)
    queue.create_topic("t")
    faults.begin("produce")
    faults.armed = ("produce.after_write", 1)
    with pytest.raises(InjectedCrash) as crash:
        queue.produce("t", [ProducerMessage(b"x", {})])
    assert (crash.value.point, crash.value.hit) == ("produce.after_write", 1)
    assert queue.process.returncode == -signal.SIGKILL  # type: ignore[attr-defined]
    assert faults.seen[("produce", "produce.after_write")] == 1
    queue.crash()  # reaping a dead child is harmless
    reopened = factory(path=tmp_path / "q", config=MQConfig(), clock=SimClock(), faults=faults)
    assert len(reopened.snapshot().topics["t"].messages) == 1  # after_write: durable
    reopened.close()
    assert reopened.process.returncode == 0  # type: ignore[attr-defined]


def test_a_child_dying_on_its_own_is_reported_not_hung(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dying_mq.py").write_text(
        textwrap.dedent(
            """
            import os
            from rmqsim.conformance.adapter import rocksmq_factory

            def open_queue(**kwargs):
                queue = rocksmq_factory(**kwargs)
                queue.create_topic = lambda topic: os._exit(7)
                return queue

            open_queue.rmqsim_layer = "queue"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_seed("smoke", 0, impl="dying_mq:open_queue", steps=5, crash_mode="process")
    assert not result.ok and result.anomaly == "error-mismatch"
    assert result.divergence is not None and result.divergence.actual is not None
    error = result.divergence.actual.error or ""
    assert "ChildDiedError" in error and "exited during create_topic (exit code 7)" in error
    with pytest.raises(ChildDiedError):
        process_factory("dying_mq:open_queue")(
            path=tmp_path / "q", config=MQConfig(), clock=SimClock(), faults=None
        ).create_topic("t")


def test_a_factory_object_is_a_usage_error_in_process_mode() -> None:
    with pytest.raises(BadImplError, match="MOD:FACTORY"):
        run_seed("smoke", 0, impl=model_factory, steps=3, crash_mode="process")
    runner = CliRunner()
    bad = runner.invoke(cli, ["run", "--profile", "smoke", "--seed", "0", "--crash-mode", "kill"])
    assert bad.exit_code == 2
    consumer = runner.invoke(
        cli, ["run", "--profile", "consumer", "--seed", "0", "--crash-mode", "process"]
    )
    assert consumer.exit_code == 2 and "queue, stream and store profiles only" in consumer.output
    assert "Traceback" not in consumer.output


def test_cli_crash_sweep_in_process_mode(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            *("crash-sweep", "--profile", "smoke", "--steps", "8"),
            *("--crash-mode", "process", "--out", str(tmp_path)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "0 failing case(s)" in result.output


def test_gate_sweeps_in_process_mode(
    tmp_path: Path, proxies: list[WireQueue]
) -> None:
    (tmp_path / "corpus").mkdir()
    args = ["gate", "--profiles", "smoke", "--seeds", "0:1", "--steps", "10", "--sweep-steps", "5"]
    args += ["--sweep-crash-mode", "process", "--out", str(tmp_path / "out")]
    args += ["--jobs", "1"]  # the proxies are watched in this process
    result = CliRunner().invoke(cli, [*args, "--corpus", str(tmp_path / "corpus")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["crash_sweep"]["smoke"]["cases"] > 0
    _no_child_left(proxies)  # only the sweep ran in children
