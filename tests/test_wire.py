"""The wire protocol (docs/PROTOCOL.md): a queue in another process, spoken to in JSON
lines. A run through the reference server is step for step the run in process; a seeded
bug is caught through it; every way a server can misbehave is a named anomaly or a
one-line exit 2, with no child process or scratch directory left behind; and
``rmqsim protocol-check`` passes a good server and names what a bad one gets wrong."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.watchdog import op_timeout
from rmqsim.conformance.wire import client
from rmqsim.conformance.wire.child import ForkedChild
from rmqsim.conformance.wire.client import WireQueue, server_command
from rmqsim.conformance.wire.codec import WireProtocolError, decode_state, encode_state
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MQConfig, ProducerMessage

SERVERS = Path(__file__).with_name("wire_servers.py")


def misbehaving(mode: str, at: int = 3) -> str:
    """``exec:`` of tests/wire_servers.py in ``mode``, misbehaving at reply ``at``."""
    return "exec:" + shlex.join([sys.executable, str(SERVERS), mode, str(at)])


@pytest.fixture
def opened(wire_queues: list[WireQueue], monkeypatch: pytest.MonkeyPatch) -> list[WireQueue]:
    """Every ``WireQueue`` opened during the test; the servers import what this process
    imports."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    return wire_queues


def _nothing_left(queues: list[WireQueue], workdir: Path) -> None:
    assert queues, "no server was started"
    for queue in queues:
        assert queue.process.returncode is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(queue.process.pid, 0)
    assert not any(workdir.iterdir()), list(workdir.iterdir())


def test_a_run_through_the_reference_server_is_the_run_in_process(
    opened: list[WireQueue], tmp_path: Path
) -> None:
    """Same steps, outcomes, crash resolutions and fault points; crashes were SIGKILLs."""
    wire = run_seed("crashy", 3, steps=80, crash_rate=0.05, impl=server_command("rocksmq"),
                    workdir=tmp_path)  # fmt: skip
    here = run_seed("crashy", 3, steps=80, crash_rate=0.05, workdir=tmp_path)
    assert wire.ok and here.ok
    assert wire.trace_lines[1:] == here.trace_lines[1:]
    assert wire.fault_points == here.fault_points and wire.fault_points
    assert any(q.process.returncode == -9 for q in opened)
    _nothing_left(opened, tmp_path)


def test_a_seeded_bug_is_caught_through_the_protocol(tmp_path: Path) -> None:
    impl = server_command("rmqsim.conformance.mutants.milvus:empty_payload_none")
    result = run_seed("smoke", 0, impl=impl, workdir=tmp_path)
    assert not result.ok and result.anomaly == "payload-mismatch"


@pytest.mark.parametrize(
    ("mode", "anomaly", "says"),
    [
        ("junk", "protocol-error", "not a JSON line"),
        ("wrong-id", "protocol-error", "got a line for id 4"),
        ("half-line", "protocol-error", "output ended inside a line"),
        ("bad-kind", "protocol-error", "'Weird' is none of"),
        ("bad-value", "protocol-error", "expected null"),
        ("exit0", "error-mismatch", "exited during create_topic (exit code 0)"),
    ],
)
def test_a_misbehaving_server_is_a_named_anomaly(
    mode: str, anomaly: str, says: str, opened: list[WireQueue], tmp_path: Path
) -> None:
    result = run_seed("smoke", 0, impl=misbehaving(mode), steps=5, workdir=tmp_path)
    assert not result.ok and result.anomaly == anomaly
    divergence = result.divergence
    assert divergence is not None and divergence.step_index == 1
    told = f"{divergence.actual} {divergence.detail}"
    assert says in told, told
    _nothing_left(opened, tmp_path)


def test_a_silent_server_is_a_hang(opened: list[WireQueue], tmp_path: Path) -> None:
    with op_timeout(1.0):
        result = run_seed("smoke", 0, impl=misbehaving("silent"), steps=5, workdir=tmp_path)
    assert not result.ok and result.anomaly == "hang"
    _nothing_left(opened, tmp_path)


@pytest.mark.parametrize("mode", ["flood", "print"])
def test_stderr_floods_and_stray_prints_do_not_break_a_run(
    mode: str, opened: list[WireQueue], tmp_path: Path
) -> None:
    result = run_seed("smoke", 0, impl=misbehaving(mode), steps=15, workdir=tmp_path)
    assert result.ok, result.divergence
    _nothing_left(opened, tmp_path)


@pytest.mark.parametrize(
    ("impl", "says"),
    [
        ("exec:/no/such/server --x", "cannot start '/no/such/server'"),
        ("exec:", "no command after exec:"),
        ("exec:'unbalanced", "cannot split the command"),
        (misbehaving("old"), "speaks protocol 0; rmqsim speaks 1"),
        (misbehaving("no-hello"), "did not answer hello within 2 s"),
        (misbehaving("exit0", 1), "exited during hello (exit code 0)"),
    ],
)
def test_a_server_that_does_not_start_is_one_line_exit_2(
    impl: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "no-hello" in impl:  # waits out the bound: a short one. The others answer or exit
        # at once, so they keep the default bound: a loaded machine's slow start is no hang.
        monkeypatch.setattr(client, "HELLO_TIMEOUT_S", 2.0)
    result = CliRunner().invoke(cli, ["run", "--profile", "smoke", "--seed", "0", "--impl", impl])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_state_crosses_the_wire_unchanged() -> None:
    clock = iter(range(100, 10_000, 7))
    queue = ReferenceMQ(config=MQConfig(page_size_bytes=3), clock=lambda: next(clock))
    queue.create_topic("ü")
    queue.create_consumer_group("ü", "g\u0308")
    queue.produce("ü", [ProducerMessage(b"\x00\xff", {"k": "v"}), ProducerMessage(b"", {})] * 3)
    queue.consume("ü", "g\u0308", 4)
    state = queue.snapshot()
    assert decode_state(encode_state(state), "state") == state
    wrong = encode_state(state)
    wrong["groups"].append(wrong["groups"][0])
    with pytest.raises(WireProtocolError, match="listed twice"):
        decode_state(wrong, "state")


def test_protocol_check_passes_our_queues_and_names_what_a_bug_breaks() -> None:
    runner = CliRunner()
    good = runner.invoke(cli, ["protocol-check", "--impl", "commitlog"])
    assert good.exit_code == 0, good.output
    assert "FAIL" not in good.output and "crash-at-produce." in good.output
    bad = runner.invoke(
        cli, ["protocol-check", "--impl", "rmqsim.conformance.mutants.milvus:empty_payload_none"]
    )
    assert bad.exit_code == 1, bad.output
    assert "FAIL produce-consume: payload-mismatch" in bad.output
    assert "PASS topics" in bad.output  # the other checks still ran
    broken = runner.invoke(cli, ["protocol-check", "--impl", misbehaving("junk", 5)])
    assert broken.exit_code == 1 and "protocol-error" in broken.output, broken.output


def test_the_gate_runs_through_the_protocol_and_kills_seeded_bugs(tmp_path: Path) -> None:
    """``gate --crash-mode process``: every run and crash case through the reference
    server; ``mutants --crash-mode process``: seeded bugs caught through it. The mutants
    run seeds 0:3 of smoke and crashy, the fewest that hold both killing runs
    (ack-off-by-one: smoke/0, two-step-produce: crashy/2, the runs that killed them on the
    gate's profiles and seeds 0:4): the baseline, the real queue, is then 6 runs, not 21."""
    runner = CliRunner()
    (tmp_path / "corpus").mkdir()
    gate = runner.invoke(cli, [
        "gate", "--crash-mode", "process", "--profiles", "smoke,crashy", "--seeds", "0:2",
        "--sweep-steps", "6", "--jobs", "1", "--corpus", str(tmp_path / "corpus"),
        "--out", str(tmp_path / "gate"),
    ])  # fmt: skip
    assert gate.exit_code == 0, gate.output
    summary = json.loads((tmp_path / "gate" / "summary.json").read_text())
    assert summary["crash_sweep"]["crashy"]["cases"] > 0
    killed = runner.invoke(cli, [
        "mutants", "--crash-mode", "process", "--only", "two-step-produce,ack-off-by-one",
        "--profiles", "smoke,crashy", "--seeds", "0:3", "--no-shrink",
        "--out", str(tmp_path / "mutants"),
    ])  # fmt: skip
    assert killed.exit_code == 0, killed.output
    matrix = json.loads((tmp_path / "mutants" / "kill-matrix.json").read_text())
    assert {m["status"] for m in matrix["mutants"]} == {"killed"}, matrix["mutants"]
    assert matrix["profiles"] == ["smoke", "crashy"]


def test_the_reference_server_answers_partial_snapshots_for_any_queue(tmp_path: Path) -> None:
    """Its ``hello`` promises both optional snapshot arguments; for a queue whose own
    ``snapshot`` takes none, the server narrows the whole state itself (else the lockstep's
    one-topic checks would see every message as extra)."""
    result = run_seed("smoke", 1, impl="tests.hang_impls:whole_snapshot_only", steps=120,
                      crash_mode="process", workdir=tmp_path)  # fmt: skip
    assert result.ok, result.divergence


def test_a_server_started_by_a_forked_child_dies_with_it(tmp_path: Path) -> None:
    """A Python implementation that wraps another process's (the real RocketMQ store's
    mutants wrap its driver) runs in a forked child under ``--crash-mode process`` and the
    FUSE power sweep; a kill of the child (a crash, a power cut) kills the server it
    started too, even one that would outlive its closed stdin (it left JVMs running)."""
    from tests.forked_group_impls import start_a_server_and_wait

    pid_file = tmp_path / "server.pid"
    child = ForkedChild(start_a_server_and_wait, str(pid_file))
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text().endswith("\n"):
            assert time.monotonic() < deadline, "the forked child started no server"
            time.sleep(0.05)
        server_pid = int(pid_file.read_text())
        assert os.getpgid(server_pid) == child.pid  # in the child's group
    finally:
        child.kill()
    deadline = time.monotonic() + 30
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server_pid), "the forked child's server outlived it"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (not gone, not a zombie waiting for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
