"""The stream layer over the wire protocol (docs/PROTOCOL.md "The stream layer"): a stream
server's run is step for step the run in process; the stream gate passes through the
reference server; seeded stream bugs are caught through it as in process; every way a
stream server can misbehave is a named anomaly or a one-line exit 2, with no child process
or scratch directory left behind; and ``rmqsim protocol-check`` passes a good stream
server and names what a bad one gets wrong."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.adapter import load_impl
from rmqsim.conformance.cli import cli
from rmqsim.conformance.running.run import run_seed
from rmqsim.conformance.running.watchdog import op_timeout
from rmqsim.conformance.stream import gate_hooks as stream_gate_hooks
from rmqsim.conformance.wire import client
from rmqsim.conformance.wire.client import WireQueue, server_command
from rmqsim.conformance.wire.codec import WireProtocolError
from rmqsim.conformance.wire.stream_codec import (
    decode_pack,
    decode_stream_state,
    decode_written,
    encode_pack,
    encode_stream_state,
    encode_written,
)
from rmqsim.conformance.wire.streams import WireStreamQueue
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MQConfig
from rmqsim.model.stream.api import MsgPack, MsgType, Row, TsMsg
from rmqsim.model.stream.reference import TtStreamModel

SERVERS = Path(__file__).with_name("wire_servers.py")
MUTANTS = "rmqsim.conformance.mutants.stream"


def misbehaving(mode: str, at: int = 3) -> str:
    """``exec:`` of tests/wire_servers.py serving our streams, misbehaving at reply ``at``
    (hello is 1, open 2, the first stream operation 3)."""
    return "exec:" + shlex.join([sys.executable, str(SERVERS), mode, str(at), "stream"])


@pytest.fixture
def opened(wire_queues: list[WireQueue], monkeypatch: pytest.MonkeyPatch) -> list[WireQueue]:
    """Every queue of a stream server opened during the test; the servers import what
    this process imports."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    return wire_queues


def _nothing_left(queues: list[WireQueue], workdir: Path) -> None:
    assert queues, "no server was started"
    for queue in queues:
        assert queue.process.returncode is not None
        with pytest.raises(ProcessLookupError):
            os.killpg(queue.process.pid, 0)
    assert not any(workdir.iterdir()), list(workdir.iterdir())


def test_a_stream_server_is_a_stream_factory_over_its_own_queue() -> None:
    loaded = load_impl(server_command("stream"))
    assert loaded.layer == "stream"
    assert loaded.factory.rmqsim_hello.layer == "stream"


def test_a_run_through_the_stream_server_is_the_run_in_process(
    opened: list[WireQueue], tmp_path: Path
) -> None:
    """Same steps and outcomes; the process crashes were SIGKILLs of the server."""
    wire = run_seed("stream-crashy", 0, impl=server_command("stream"), workdir=tmp_path)
    here = run_seed("stream-crashy", 0, workdir=tmp_path)
    assert wire.ok and here.ok, wire.divergence
    assert wire.trace_lines[1:] == here.trace_lines[1:]
    assert all(isinstance(q, WireStreamQueue) for q in opened) and len(opened) > 1
    assert any(q.process.returncode == -9 for q in opened)
    _nothing_left(opened, tmp_path)


def test_a_stream_operation_and_the_snapshot_after_it_are_one_round_trip(
    opened: list[WireQueue], tmp_path: Path
) -> None:
    """The lockstep asks the snapshot of the stream an operation names right after it: a
    produce, broadcast, consume or seek sends that snapshot ahead, in the same write. Only
    the same request is answered by it; any other next request drops it and is asked of
    the server, so every answer is still the server's state at the time it is asked."""
    streams = load_impl(server_command("stream")).factory
    queue = streams.rmqsim_queue_factory(path=tmp_path / "queue", config=MQConfig(),
                                         clock=lambda: 7, faults=None)  # fmt: skip
    try:
        factory = streams(queue=queue)
        producer = factory.new_msg_stream()
        producer.as_producer(["a"])
        consumer = factory.new_msg_stream()
        consumer.as_consumer(["a"], "g")
        producer.produce(MsgPack.of(TsMsg(MsgType.INSERT, 1, 0, (0,), b"x", (Row(1, 5),))))
        assert producer.snapshot().producer_channels == ("a",)
        assert queue.pipelined == (1, 0)
        before = consumer.snapshot()  # no operation of its since: asked of the server
        pack = consumer.consume()
        assert pack is not None and len(pack.msgs) == 1
        producer.broadcast(MsgPack.of(TsMsg.time_tick(10)))  # not the consumer's snapshot
        assert queue.pipelined == (1, 1)
        after = consumer.snapshot()
        assert after != before and after.channels[0].position is not None
        assert queue.pipelined == (1, 2)  # the producer's snapshot sent ahead was dropped
    finally:
        queue.crash()


@pytest.mark.parametrize(("impl", "served"), [("stream", WireStreamQueue),
                                              ("commitlog", WireQueue)])
def test_process_mode_serves_the_streams_or_the_queue_under_ours(
    impl: str, served: type, opened: list[WireQueue], tmp_path: Path
) -> None:
    """``--crash-mode process``: a stream factory is served with its queue; a queue factory
    alone, under our streams in process."""
    result = run_seed("stream", 0, impl=impl, crash_mode="process", steps=60, workdir=tmp_path)
    assert result.ok, result.divergence
    assert opened and all(type(q) is served for q in opened)
    _nothing_left(opened, tmp_path)


@pytest.mark.parametrize(
    ("mutant", "profile"),
    [("seek_first_position_only", "stream-seek"), ("dedup_by_msg_id", "stream"),
     ("lost_wakeup", "stream")],
)
def test_stream_mutants_are_killed_through_the_protocol_as_in_process(
    mutant: str, profile: str
) -> None:
    impl = f"{MUTANTS}:{mutant}"
    here = run_seed(profile, 0, impl=impl)
    wire = run_seed(profile, 0, impl=server_command(impl))
    assert not here.ok and not wire.ok
    assert (wire.anomaly, wire.divergence.step_index) == (here.anomaly,  # type: ignore[union-attr]
                                                          here.divergence.step_index)  # type: ignore[union-attr]


#: The repository's regression corpus (the gate's default is ./regressions, relative to
#: where it runs: named here, so that the test does not depend on the worker's directory).
REGRESSIONS = Path(__file__).resolve().parent.parent / "regressions"


@pytest.mark.slow
def test_the_stream_gate_passes_through_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rmqsim gate --impl exec:...`` on a stream server runs the stream gate profiles
    (and the stream regressions) through it. Without the runs the gate steers at the
    stream cells its seed left empty (three stream-steer runs, ~45% of the test's time):
    steering is the same runs of another profile, and
    tests/stream/test_stream_cells.py::test_the_gate_steers_runs_at_the_empty_stream_cells
    checks it."""
    monkeypatch.setattr(stream_gate_hooks, "MAX_STREAM_STEER_RUNS", 0)
    gate = CliRunner().invoke(cli, [
        "gate", "--impl", server_command("stream"), "--seeds", "0:1", "--jobs", "1",
        "--out", str(tmp_path / "gate"), "--corpus", str(REGRESSIONS),
    ])  # fmt: skip
    assert gate.exit_code == 0, gate.output
    summary = json.loads((tmp_path / "gate" / "summary.json").read_text())
    profiles = summary["profiles"]
    assert {"stream", "stream-crashy", "stream-seek", "stream-swarm", "stream-args",
            "regressions"} <= set(profiles), profiles  # fmt: skip
    assert all(entry["runs"] > 0 and entry["failed"] == 0 for entry in profiles.values())
    assert '"smoke"' not in json.dumps(summary)


def test_mutants_in_process_mode_kill_stream_mutants_through_the_protocol(
    tmp_path: Path,
) -> None:
    """Seed 0 kills both (stream/0 and stream-crashy/0; seeds 0:2 ran a second seed of
    every profile for the baseline only)."""
    killed = CliRunner().invoke(cli, [
        "mutants", "--crash-mode", "process", "--only",
        "seek-first-position-only,dedup-by-msg-id", "--seeds", "0:1", "--no-shrink",
        "--out", str(tmp_path),
    ])  # fmt: skip
    assert killed.exit_code == 0, killed.output
    matrix = json.loads((tmp_path / "kill-matrix.json").read_text())
    assert {m["status"] for m in matrix["mutants"]} == {"killed"}, matrix["mutants"]


@pytest.mark.parametrize(
    ("mode", "anomaly", "says"),
    [
        ("junk", "protocol-error", "not a JSON line"),
        ("wrong-id", "protocol-error", "got a line for id 4"),
        ("half-line", "protocol-error", "output ended inside a line"),
        ("bad-kind", "protocol-error", "'Weird' is none of StreamClosed"),
        ("bad-value", "protocol-error", "expected null"),
        ("exit0", "stream-mismatch", "exited during stream_new (exit code 0)"),
    ],
)
def test_a_misbehaving_stream_server_is_a_named_anomaly(
    mode: str, anomaly: str, says: str, opened: list[WireQueue], tmp_path: Path
) -> None:
    result = run_seed("stream", 0, impl=misbehaving(mode), steps=5, workdir=tmp_path)
    assert not result.ok and result.anomaly == anomaly
    divergence = result.divergence
    assert divergence is not None and divergence.step_index == 1
    told = f"{divergence.actual} {divergence.detail}"
    assert says in told, told
    _nothing_left(opened, tmp_path)


def test_a_silent_stream_server_is_a_hang(opened: list[WireQueue], tmp_path: Path) -> None:
    with op_timeout(1.0):
        result = run_seed("stream", 0, impl=misbehaving("silent"), steps=5, workdir=tmp_path)
    assert not result.ok and result.anomaly == "hang"
    _nothing_left(opened, tmp_path)


@pytest.mark.parametrize("mode", ["flood", "print"])
def test_stderr_floods_and_stray_prints_do_not_break_a_stream_run(
    mode: str, opened: list[WireQueue], tmp_path: Path
) -> None:
    result = run_seed("stream", 0, impl=misbehaving(mode), steps=15, workdir=tmp_path)
    assert result.ok, result.divergence
    _nothing_left(opened, tmp_path)


@pytest.mark.parametrize(
    ("impl", "says"),
    [
        (misbehaving("old"), "speaks protocol 0; rmqsim speaks 1"),
        (misbehaving("no-hello"), "did not answer hello within 2 s"),
        (misbehaving("exit0", 1), "exited during hello (exit code 0)"),
    ],
)
@pytest.mark.parametrize("command", ["run", "gate", "protocol-check"])
def test_a_stream_server_that_does_not_start_is_one_line_exit_2(
    impl: str, says: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "no-hello" in impl:  # waits out the bound: a short one. The others answer or exit
        # at once, so they keep the default bound: a loaded machine's slow start is no hang.
        monkeypatch.setattr(client, "HELLO_TIMEOUT_S", 2.0)
    args = {"run": ["run", "--profile", "stream", "--seed", "0"], "gate": ["gate"],
            "protocol-check": ["protocol-check"]}[command]  # fmt: skip
    result = CliRunner().invoke(cli, [*args, "--impl", impl])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_protocol_check_passes_our_streams_and_names_what_a_bug_breaks() -> None:
    runner = CliRunner()
    good = runner.invoke(cli, ["protocol-check", "--impl", "stream"])
    assert good.exit_code == 0, good.output
    assert "layer stream" in good.output and "FAIL" not in good.output
    assert "PASS crash-at-produce.before_write" in good.output  # a crash inside stream_produce
    bad = runner.invoke(cli, ["protocol-check", "--impl", f"{MUTANTS}:seek_first_position_only"])
    assert bad.exit_code == 1, bad.output
    assert "FAIL plain-consume-seek: call 18 (c.seek(" in bad.output
    assert "PASS time-tick" in bad.output  # the other checks still ran


def test_protocol_check_fails_a_stream_server_returning_a_wrong_position() -> None:
    wrong = CliRunner().invoke(cli, ["protocol-check", "--impl", misbehaving("wrong-position")])
    assert wrong.exit_code == 1, wrong.output
    lines = [line for line in wrong.output.splitlines() if line.startswith("FAIL")]
    assert lines and all("consume()): expected" in line for line in lines), wrong.output
    assert "FAIL time-tick: call 8 (t.consume())" in wrong.output
    assert "(('a', 2, 100), ('b', 2, 100))), got" in wrong.output


def test_protocol_check_names_a_broken_line_of_a_stream_server() -> None:
    broken = CliRunner().invoke(cli, ["protocol-check", "--impl", misbehaving("junk", 5)])
    assert broken.exit_code == 1, broken.output
    assert "protocol-error at call 2" in broken.output and "not a JSON line" in broken.output


def _state_and_pack() -> tuple[object, MsgPack | None]:
    from rmqsim.model.stream import StreamModelFactory

    streams = StreamModelFactory(ReferenceMQ())
    producer = streams.new_msg_stream()
    producer.as_producer(["ü", "b"])
    tt = streams.new_tt_msg_stream()
    tt.as_consumer(["ü", "b"], "g\u0308")
    producer.produce(MsgPack.of(TsMsg(MsgType.INSERT, 2**63 - 1, 0, (0, 1), b"\x00\xff",
                                      (Row(1, 5), Row(2, 2**64 - 1)))))  # fmt: skip
    producer.broadcast(MsgPack.of(TsMsg.time_tick(10)))
    pack = tt.consume()
    assert isinstance(tt, TtStreamModel)
    return tt.snapshot(), pack


def test_stream_values_cross_the_wire_unchanged() -> None:
    state, pack = _state_and_pack()
    assert pack is not None and pack.msgs
    assert decode_stream_state(encode_stream_state(state), "s") == state  # type: ignore[arg-type]
    decoded = decode_pack(json.loads(json.dumps(encode_pack(pack))), "p")
    assert decoded == pack and decoded is not None
    assert [m.position for m in decoded.msgs] == [m.position for m in pack.msgs]
    assert decode_written(encode_written({"b": [1, 2], "a": []}), "w") == {"b": [1, 2], "a": []}
    assert list(decode_written(encode_written({"b": [1], "a": [2]}), "w")) == ["b", "a"]


@pytest.mark.parametrize(
    ("value", "decode", "says"),
    [
        ([["a", [1]], ["a", [2]]], decode_written, "listed twice"),
        ([["a", [1.5]]], decode_written, "expected an integer, got float"),
        ({"msgs": [], "begin_ts": 0, "end_ts": 1, "start_positions": [],
          "end_positions": [{"channel": "a", "msg_id": "!!", "group": "g", "timestamp": 0}]},
         decode_pack, "not standard base64"),
        ({"msgs": [], "begin_ts": True, "end_ts": 1, "start_positions": [],
          "end_positions": []}, decode_pack, "begin_ts: expected an integer, got bool"),
    ],
)  # fmt: skip
def test_a_malformed_stream_value_is_a_protocol_error(value, decode, says: str) -> None:
    with pytest.raises(WireProtocolError, match=says):
        decode(value, "reply")


def test_a_wrong_stream_state_kind_is_a_protocol_error() -> None:
    state, _ = _state_and_pack()
    wrong = encode_stream_state(state)  # type: ignore[arg-type]
    wrong["kind"] = "tick-tock"
    with pytest.raises(WireProtocolError, match="'plain' or 'time_tick'"):
        decode_stream_state(wrong, "state")


PROTOCOL_MD = Path(__file__).resolve().parents[1] / "docs" / "PROTOCOL.md"


def _stream_section() -> str:
    text = PROTOCOL_MD.read_text()
    return text[text.index("## The stream layer"):text.index("## Fault points: crashing")]


def test_the_protocol_page_lists_every_stream_operation_with_its_arguments() -> None:
    from rmqsim.conformance.wire.stream_codec import STREAM_OPS

    rows = {line.split("`")[1]: line for line in _stream_section().splitlines()
            if line.startswith("| `stream_")}  # fmt: skip
    assert set(rows) == set(STREAM_OPS)
    for op, arguments in STREAM_OPS.items():
        for argument in arguments:
            assert f"`{argument}`" in rows[op], (op, argument)


def test_the_protocol_pages_stream_exchange_is_what_the_reference_server_says(
    tmp_path: Path,
) -> None:
    """The example exchange, replayed on the reference server, line for line."""
    import subprocess

    block = _stream_section().split("### One exchange", 1)[1].split("```text\n", 1)[1]
    lines = block.split("```", 1)[0].splitlines()
    path = str(tmp_path / "queue")
    requests = [line[2:].replace("/tmp/rmqsim-x/queue", path) for line in lines
                if line.startswith("→ ")]  # fmt: skip
    replies = [line[2:] for line in lines if line.startswith("← ")]
    served = subprocess.run(
        [sys.executable, "-m", "rmqsim.conformance.wire.server", "stream"],
        input="\n".join(requests) + "\n", capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert served.returncode == 0, served.stderr
    assert served.stdout.splitlines() == replies


def test_protocol_check_fails_a_stream_server_torn_by_a_crash_inside_a_produce() -> None:
    """A crash at each fault point of a stream produce: the queue under these streams
    writes a produce in two steps, and a SIGKILL between them is neither before nor after."""
    impl = "tests.wire_stream_impls:torn_streams"
    torn = CliRunner().invoke(cli, ["protocol-check", "--impl", impl])
    assert torn.exit_code == 1, torn.output
    assert "PASS crash-at-produce.before_write" in torn.output
    assert ("FAIL crash-at-produce.between_writes: call 5 (p.produce(" in torn.output
            and "holds neither the records before the call nor those after it" in torn.output)
