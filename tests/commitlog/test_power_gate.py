"""Power loss in the gate and the kill matrix (conformance/crashing/gate_power.py), and power-cut
traces that ``rmqsim replay`` reproduces (conformance/crashing/power_trace.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.crashing.gate_power import GATE_POWER_STEPS
from rmqsim.conformance.crashing.power_loss import gate_promise
from rmqsim.conformance.crashing.power_trace import read_power_trace, run_power_trace
from rmqsim.conformance.mutants import kill
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.running.trace import TraceFormatError

NO_FSYNC = "rmqsim.conformance.mutants.storage:open_no_fsync"
#: One profile, one seed, no crash sweep: the gate's power-loss step alone is under test.
GATE_ARGS = ["gate", "--profiles", "crashy", "--seeds", "0:1", "--no-crash-sweep",
             "--power-steps", "3", "--jobs", "1"]  # fmt: skip


def test_the_gate_holds_a_file_system_backend_to_its_promise() -> None:
    assert gate_promise("commitlog") == "sync"
    assert gate_promise("commitlog-async") == "async"
    assert gate_promise(NO_FSYNC) == "sync"
    assert gate_promise("rocksmq") is None  # no fs=: no power-loss sweep


def test_the_gate_fails_a_storage_mutant_and_passes_the_backend(tmp_path: Path) -> None:
    runner = CliRunner()
    failed = runner.invoke(cli, [*GATE_ARGS, "--impl", NO_FSYNC, "--out", str(tmp_path / "m")])
    assert failed.exit_code == 1, failed.output
    assert "failing power-cut cases" in failed.output
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert summary["status"] == "divergence" and not summary["failures"]  # runs all pass
    power = summary["power_loss"]["crashy"]
    assert power["promise"] == "sync" and power["failed"] > 0
    trace = Path(power["failures"][0]["trace"])
    junit = (tmp_path / "m" / "junit.xml").read_text()
    assert 'name="rmqsim.power-loss"' in junit and "rmqsim replay" in junit
    # The saved case replays: exit 1 on the mutant, exit 0 on the fixed backend.
    on_mutant = runner.invoke(cli, ["replay", str(trace)])
    assert on_mutant.exit_code == 1 and "power-cut-" in on_mutant.output, on_mutant.output
    fixed = runner.invoke(cli, ["replay", str(trace), "--impl", "commitlog"])
    assert fixed.exit_code == 0 and "keeps the sync promise" in fixed.output, fixed.output
    # The first failing case is shrunk (here to the one operation and the open it needs).
    shrunk = Path(power["shrunk_trace"])
    assert 0 < power["shrunk_steps"] <= 10
    assert len(read_power_trace(shrunk).steps) == power["shrunk_steps"]
    assert runner.invoke(cli, ["replay", str(shrunk)]).exit_code == 1
    assert runner.invoke(cli, ["replay", str(shrunk), "--impl", "commitlog"]).exit_code == 0
    passed = runner.invoke(cli, [*GATE_ARGS, "--impl", "commitlog", "--out", str(tmp_path / "c")])
    assert passed.exit_code == 0, passed.output
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["power_loss"]["crashy"]["failed"] == 0
    assert summary["power_loss"]["crashy"]["cases"] > 50


def test_no_power_loss_sweep_for_a_queue_without_fs(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [*GATE_ARGS, "--impl", "rocksmq", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "summary.json").read_text())["power_loss"] == {}


def test_a_power_cut_trace_records_the_cut_and_reproduces_it(tmp_path: Path) -> None:
    runner = CliRunner()
    swept = runner.invoke(cli, ["crash-sweep", "--storage", "sync", "--profile", "crashy",
                                "--steps", "3", "--impl", NO_FSYNC, "--out", str(tmp_path)])
    assert swept.exit_code == 1, swept.output
    traces = sorted(tmp_path.glob("crashy-seed0-power-*.jsonl"))
    assert traces and all(f"rmqsim replay {t}" in swept.output for t in traces)
    shrunk = [t for t in traces if t.name.endswith(".shrunk.jsonl")]
    assert len(shrunk) == 1 and "shrunk to " in swept.output
    for path in traces:
        trace = read_power_trace(path)
        header = json.loads(path.read_text().splitlines()[0])
        assert header["cut"] == {"point_in_step": trace.point_in_step, "mode": trace.mode}
        again = run_power_trace(trace)
        assert again.anomaly == header["recorded"]["anomaly"] is not None
        assert again.problem == header["recorded"]["problem"]
        assert run_power_trace(trace, impl="commitlog").ok
    # Re-serialised by another tool (spaces after separators): still a power-cut trace.
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("".join(json.dumps(json.loads(line)) + "\n"
                              for line in traces[0].read_text().splitlines()))
    replayed = runner.invoke(cli, ["replay", str(spaced)])
    assert replayed.exit_code == 1 and "power cut at call" in replayed.output, replayed.output


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: lines[:-1], "end line"),
        (lambda lines: [lines[0].replace('"mode":"', '"mode":"x'), *lines[1:]], "bad header"),
        (lambda lines: [lines[0].replace('"seed":0', '"seed":0,"extra":1'), *lines[1:]],
         "header fields"),
    ],
)
def test_a_damaged_power_trace_is_refused_naming_the_file(
    tmp_path: Path, edit: object, message: str
) -> None:
    runner = CliRunner()
    runner.invoke(cli, ["crash-sweep", "--storage", "sync", "--profile", "crashy", "--steps",
                        "2", "--impl", NO_FSYNC, "--out", str(tmp_path)])
    path = sorted(tmp_path.glob("*.jsonl"))[0]
    lines = path.read_text().splitlines()
    path.write_text("\n".join(edit(lines)) + "\n")  # type: ignore[operator]
    with pytest.raises(TraceFormatError, match=message):
        read_power_trace(path)
    result = runner.invoke(cli, ["replay", str(path)])
    assert result.exit_code == 2 and str(path) in result.output
    assert "Traceback" not in result.output


def test_the_kill_matrix_kills_storage_mutants_by_power_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kill, "STORAGE_POWER_STEPS", 3)
    mutants = select(["no-fsync", "fsync-retried"])
    assert {m.layer for m in mutants} == {"storage"}
    matrix = kill.run_matrix(mutants, range(0, 1), out=tmp_path, profiles=("smoke", "crashy"))
    assert matrix.ok and matrix.profiles == ("smoke", "crashy")
    assert matrix.baseline is not None and len(matrix.baseline.power_sweeps) == 2
    assert all(s.impl == "commitlog" and s.ok for s in matrix.baseline.power_sweeps)
    for record in matrix.kills:
        assert record.status == kill.KILLED and record.check == "power loss", record
        assert record.repro == f"rmqsim replay {record.trace}"
        assert record.shrunk_steps is not None and 0 < record.shrunk_steps <= 10
        assert record.step and record.step >= record.shrunk_steps  # a cut in an operation
        assert run_power_trace(read_power_trace(Path(str(record.trace)))).anomaly == record.anomaly


def test_the_default_gate_sweep_kills_every_storage_mutant(tmp_path: Path) -> None:
    """The kill matrix sweeps as the default gate does (``GATE_POWER_STEPS`` steps of the
    first seed): every storage mutant dies there, roll-skips-previous-segment included
    (its 512-byte segments roll within the first steps), shrunk to at most 10 operations."""
    assert kill.STORAGE_POWER_STEPS == GATE_POWER_STEPS
    mutants = tuple(m for m in select(None) if m.layer == "storage")
    assert len(mutants) == 11 and "roll-skips-previous-segment" in {m.name for m in mutants}
    matrix = kill.run_matrix(mutants, range(0, 1), out=tmp_path, profiles=("smoke",))
    assert matrix.ok and matrix.baseline is not None
    for record in matrix.kills:
        assert record.status == kill.KILLED and record.check == "power loss", record
        assert record.shrunk_steps is not None and 0 < record.shrunk_steps <= 10, record
