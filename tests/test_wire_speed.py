"""What the wire protocol no longer does for speed (issue 34 "Speed"), each with the check it
must keep: an ``exec:`` command is asked ``hello`` once per process, not once per run; the
snapshot the lockstep asks after a state-changing operation travels in the same write
(pipelining, docs/PROTOCOL.md), and answers only the very request it stands for; a state
divergence in the touched topic is caught through it at the same step as in process."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.adapter import BadImplError
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.wire import client
from rmqsim.conformance.wire.client import WireQueue, exec_factory, server_command
from rmqsim.model.api import MQConfig, ProducerMessage

STALE_ACKS = "rmqsim.conformance.mutants.classic:stale_acks"


@pytest.fixture(autouse=True)
def _servers_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))


def _count_starts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every server process ``exec_factory``'s launcher starts from now on."""
    started: list[object] = []

    class Counted(client.ChildProcess):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            started.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(client, "ChildProcess", Counted)
    # A command is remembered with the environment it ran in: this one is new.
    monkeypatch.setenv("RMQSIM_TEST_CHECK_ONCE", str(id(started)))
    return started


def test_a_command_is_asked_hello_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_seed`` loads ``--impl`` per seed; only the first load starts a server to ask
    it. A command that fails the check is not remembered: it fails again, one line."""
    started = _count_starts(monkeypatch)
    command = server_command("rocksmq")
    first = exec_factory(command)
    assert len(started) == 1
    again = exec_factory(command)
    assert len(started) == 1 and again.rmqsim_hello is first.rmqsim_hello  # type: ignore[attr-defined]
    broken = "exec:" + sys.executable + " -c 'import sys; sys.exit(3)'"
    for _ in range(2):
        with pytest.raises(BadImplError, match="exited during hello"):
            exec_factory(broken)
    assert len(started) == 3


def _open(tmp_path: Path) -> WireQueue:
    factory = exec_factory(server_command("rocksmq"))
    queue = factory(path=tmp_path / "q", config=MQConfig(), clock=lambda: 7, faults=None)
    assert isinstance(queue, WireQueue)
    return queue


def test_a_snapshot_sent_ahead_answers_only_the_same_request(tmp_path: Path) -> None:
    """After a produce the next one-topic snapshot is sent ahead (learnt from the last
    one); the same request is answered by it, any other is asked of the server."""
    queue = _open(tmp_path)
    try:
        queue.create_topic("t")
        queue.snapshot(topics=["t"], messages_from={"t": 1})  # learnt: from 1
        ids = queue.produce("t", [ProducerMessage(b"a", {})])
        sent_ahead = queue.snapshot(topics=["t"], messages_from={"t": 1})
        assert queue.pipelined == (1, 0)
        assert [m.msg_id for m in sent_ahead.topics["t"].messages] == ids
        more = queue.produce("t", [ProducerMessage(b"b", {})])  # ahead: from ids[-1] + 1
        other = queue.snapshot(topics=["t"], messages_from={"t": 1})  # not that one
        assert queue.pipelined == (1, 1)
        assert [m.msg_id for m in other.topics["t"].messages] == ids + more
        assert queue.snapshot() == other  # the whole state: the server's own answer
    finally:
        queue.crash()


def test_a_state_divergence_is_caught_through_the_snapshot_sent_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seeded bug whose outcomes are right and whose touched topic's state is wrong
    (acks against stale positions) is caught through the protocol at the step and with
    the anomaly it is caught with in process, by the snapshot that was sent ahead."""
    sessions: list[client.Session] = []
    session_init = client.Session.__init__

    def record(self: client.Session, *args: Any, **kwargs: Any) -> None:
        session_init(self, *args, **kwargs)
        sessions.append(self)

    monkeypatch.setattr(client.Session, "__init__", record)
    here = run_seed("smoke", 0, impl=STALE_ACKS, workdir=tmp_path)
    wire = run_seed("smoke", 0, impl=server_command(STALE_ACKS), workdir=tmp_path)
    assert here.divergence is not None and wire.divergence is not None
    assert (wire.anomaly, wire.divergence.step_index) == (here.anomaly, here.divergence.step_index)
    assert wire.anomaly == "ack-mismatch" and wire.divergence.diffs == here.divergence.diffs
    assert sum(s.ahead_used for s in sessions) > 100  # the checks went ahead of their turn


def test_the_bench_reports_the_ratio_with_its_verdict_and_the_overhead_per_operation() -> None:
    """Records in the bench's format: the 2x target on the CPU ratio, the overhead per
    operation in µs, and the breakdown line's split between starts and requests."""
    from rmqsim.conformance.bench.backends import protocol_breakdown, protocol_figures
    from rmqsim.conformance.bench.wire import ProtocolMeasurement, RoundTrip

    here = ProtocolMeasurement("in process", 1000, 0.5, 0.4, 0, opens=10)
    wire = ProtocolMeasurement("protocol", 1000, 2.0, 1.2, 0, opens=10)
    trip = RoundTrip(1.0, 100.0, 150.0, 1.0, 90.0, 50.0)
    figures = {f.name: f for f in protocol_figures([here, wire], trip)}
    ratio = figures["protocol.reference-server.cpu_slowdown"]
    assert (ratio.value, ratio.target, ratio.better, ratio.verdict()) == (3.0, 2.0, "lower",
                                                                          "MISSED")
    overhead = figures["protocol.reference-server.overhead_us_per_op"]
    assert overhead.unit == "µs" and overhead.value == pytest.approx(800.0)
    assert figures["protocol.open_cpu_ms"].value == 50.0
    line = protocol_breakdown([here, wire], trip)
    assert "800 µs of CPU beyond in process" in line
    assert "server starts 500 µs (10 opens x 50 ms over 1000 operations), the requests 300 µs" \
        in line


def test_the_bench_counts_the_cpu_of_forked_servers() -> None:
    """A forked server is the fork server's child, not rmqsim's: the bench reads its CPU
    from the fork server's ``/proc`` (its reaped children). A queue that burns CPU in
    every open, in the child, shows it in the forked way's CPU (once uncounted, the bench
    printed "-")."""
    from rmqsim.conformance.bench.wire import measure_way
    from tests.hang_impls import OPEN_BURN_CPU_S

    measured = measure_way("forked", "tests.hang_impls:burns_cpu_on_open", "smoke", range(1),
                           crash_mode="process")  # fmt: skip
    assert measured.cpu_counted and measured.diverged == 0 and measured.opens >= 2
    assert measured.cpu_s >= measured.opens * OPEN_BURN_CPU_S
