"""Progress where no one watches, and every command's time (``conformance/cli/clock.py``).

A command whose stderr is not a terminal (a CI log) prints its progress as plain lines
with the elapsed time, and a heartbeat when it has been silent for ``RMQSIM_PROGRESS_S``;
every command that reaches a verdict ends with its wall and CPU time, child processes
included."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.cli.clock import Board, CommandClock, PlainProgress, cpu_times

ROOT = Path(__file__).resolve().parent.parent
#: The last line of every command that reached a verdict.
TIMING = re.compile(
    r"^rmqsim [\w -]+: \d+\.\d s wall, \d+\.\d s CPU \(user \d+\.\d s, system \d+\.\d s, "
    r"child processes included\)$"
)
PROGRESS = re.compile(r"^rmqsim gate: .*\d+\.\d s elapsed$")


def test_a_gate_in_a_log_prints_progress_lines_with_the_elapsed_time(tmp_path: Path) -> None:
    """The gate with stdout and stderr not a terminal (as in CI): progress lines on stderr,
    each with the elapsed time; its last line is its time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RMQSIM_PROGRESS_S": "0.05"}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from rmqsim.conformance.cli import main; "
         "sys.exit(main())", "gate", "--profiles", "smoke", "--seeds", "0:3", "--steps", "40",
         "--jobs", "1", "--sweep-steps", "3", "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    progress = [line for line in lines if PROGRESS.match(line)]
    assert any(re.match(r"rmqsim gate: gate \d/3", line) for line in progress), lines
    assert "rmqsim gate: gate 3/3 done" in " ".join(progress), lines
    assert any(line.startswith("rmqsim gate: crash sweep") for line in progress), lines
    assert TIMING.match(lines[-1]), lines[-1]
    # The first progress line comes before the gate's table (stdout) is printed whole.
    assert "rmqsim gate: PASS" in done.stdout


def test_the_heartbeat_speaks_when_a_long_step_is_silent() -> None:
    """Inside one long unit of work (no bar advances), the board's heartbeat prints the
    active bar's state with the elapsed time once per interval."""
    stream = io.StringIO()
    board = Board(CommandClock("rmqsim gate"), stream=stream)
    board.interval_s = 0.05
    with PlainProgress(board) as bar:
        bar.add_task("gate", total=10)
        bar.advance(0)
        time.sleep(0.2)
        board.beat()
        written = stream.getvalue().splitlines()
    assert written, "nothing was printed"
    assert all(re.fullmatch(r"rmqsim gate: gate \d+/10, \d+\.\d s elapsed", w) for w in written)
    before = len(stream.getvalue().splitlines())
    board.beat()  # just printed: not due again
    assert len(stream.getvalue().splitlines()) == before


def test_a_bar_in_a_log_rate_limits_its_lines_and_says_when_it_is_done() -> None:
    stream = io.StringIO()
    board = Board(CommandClock("rmqsim run"), stream=stream)
    board.interval_s = 3600.0
    with PlainProgress(board) as bar:
        task = bar.add_task("run smoke", total=1000)
        for _ in range(1000):
            bar.advance(task)
        hidden = bar.add_task("shrink", total=5, visible=False)
        bar.update(hidden, completed=2)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmqsim run: run smoke 1,000/1,000 done, ")


def test_cpu_times_count_child_processes() -> None:
    """A child's CPU time counts once it is waited for, and while it is still alive."""
    user, system = cpu_times()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    child = subprocess.Popen([sys.executable, "-c", burn + "time.sleep(30)"])
    try:
        time.sleep(1.5)  # the child has burnt its 0.3 s and sleeps, alive
        alive = sum(cpu_times()) - user - system
        assert alive >= 0.25, alive
    finally:
        child.kill()
        child.wait()
    assert sum(cpu_times()) - user - system >= 0.25


def _every_command(group: click.Group, ctx: click.Context) -> list[click.Command]:
    found: list[click.Command] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _every_command(command, ctx)
        else:
            found.append(command)
    return found


def test_every_command_is_timed() -> None:
    """Every command ``rmqsim --help`` lists (the lazy ones and the entry points' too)
    ends through ``friendly_errors``, which prints the time."""
    ctx = click.Context(cli)
    commands = _every_command(cli, ctx)
    assert {"run", "gate", "bench", "crash-sweep", "fuzz", "mutants", "sweep"} <= {
        c.name for c in commands
    }
    untimed = [c.name for c in commands if not getattr(c.callback, "rmqsim_timed", False)]
    assert untimed == []


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--profile", "smoke", "--seeds", "0:2", "--steps", "30"],
        ["run", "--profile", "smoke", "--seed", "4", "--steps", "500", "--no-shrink",
         "--impl", "rmqsim.conformance.mutants.crash:hwm_not_persisted"],
        ["crash-sweep", "--profile", "smoke", "--steps", "3"],
        ["fuzz", "--profile", "dev", "--examples", "2", "--steps", "5"],
        # No power-loss sweep here: the bench with it (through FUSE) and lockstep ends with
        # its time in tests/test_bench_json.py::test_bench_json_to_stdout_is_data_only.
        ["bench", "--messages", "100", "--repeats", "1", "--backend", "rocksmq",
         "--lockstep-seeds", "0", "--protocol-seeds", "0", "--power-steps", "0"],
    ],
    ids=["run", "run-diverging", "crash-sweep", "fuzz", "bench"],
)
def test_a_command_ends_with_its_wall_and_cpu_time(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1), result.output
    assert TIMING.match(result.output.splitlines()[-1]), result.output[-2000:]
    assert TIMING.match(result.stderr.splitlines()[-1])


def test_replay_and_store_check_end_with_their_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "t.jsonl"
    ran = CliRunner().invoke(cli, ["run", "--profile", "smoke", "--seed", "0", "--steps", "20",
                                   "--trace", str(trace)])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    replayed = CliRunner().invoke(cli, ["replay", str(trace)])
    assert replayed.exit_code == 0 and TIMING.match(replayed.output.splitlines()[-1])
    from rmqsim.impl import RocksMQ

    RocksMQ.open(str(tmp_path / "store")).close()
    checked = CliRunner().invoke(cli, ["store", "check", str(tmp_path / "store")])
    assert checked.exit_code == 0, checked.output
    last = checked.output.splitlines()[-1]
    assert TIMING.match(last) and last.startswith("rmqsim store check: ")


def test_a_usage_error_stays_the_last_line() -> None:
    """Exit 2 is one line naming the problem: no time after it."""
    result = CliRunner().invoke(cli, ["run", "--profile", "no-such-profile", "--seed", "0"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1, result.output
