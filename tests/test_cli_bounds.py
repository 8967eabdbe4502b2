"""Bad input found by an audit of every command (2026-11-29): values no run can use are
usage errors (exit 2) before anything runs, an in-process implementation that calls
``sys.exit`` is a divergence rather than the end of rmqsim, an output path that is not a
regular file is refused (never renamed over) without losing the verdict, and a trace is
read with a bound on each line."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rmqsim.conformance.cli import cli
from rmqsim.conformance.running import trace
from rmqsim.conformance.running.trace import TraceFormatError, read_lines, read_trace
from rmqsim.scenarios.queue import sim

MAX_STEPS = sim.MAX_STEPS

MUTANT = "rmqsim.conformance.mutants.classic:page_boundary_skip"
#: An in-process queue that calls ``sys.exit`` in its produce, or in its factory.
EXITING = '''
import sys
from rmqsim.conformance.adapter import rocksmq_factory


class ExitsOnProduce:
    def __init__(self, queue):
        self._queue = queue

    def __getattr__(self, name):
        if name == "produce":
            return lambda *args, **kwargs: sys.exit(0)
        return getattr(self._queue, name)


def exits_on_produce(*, path, config, clock, faults):
    return ExitsOnProduce(rocksmq_factory(path=path, config=config, clock=clock, faults=faults))


def exits_on_open(*, path, config, clock, faults):
    sys.exit(5)
'''


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _usage_error(result: Result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


def test_the_command_lines_steps_bound_is_the_simulations() -> None:
    from rmqsim.conformance.cli import common

    assert common.MAX_STEPS == sim.MAX_STEPS


@pytest.mark.parametrize("args", [
    ("run", "--profile", "smoke", "--seed", "0", "--steps", str(MAX_STEPS + 1)),
    ("crash-sweep", "--profile", "smoke", "--steps", str(MAX_STEPS + 1)),
    ("gate", "--profiles", "smoke", "--seeds", "0:1", "--sweep-steps", str(MAX_STEPS + 1)),
    ("run", "--profile", "smoke", "--seed", "0", "--steps", "5", "--op-timeout-s", "1e10"),
    ("gate", "--profiles", "smoke", "--seeds", "0:1", "--jobs", "99999999999999999999"),
    ("fuzz", "--layer", "queue", "--seed", "1" + "0" * 40),
    ("bench", "--messages", "99999999999999999999900"),
])  # fmt: skip
def test_values_no_run_can_use_are_usage_errors(args: tuple[str, ...]) -> None:
    """Each was exit 3 (an OverflowError, a ValueError of the simulation, a watchdog
    thread's traceback) or, for the fuzz seed, a failure lost after the campaign ran."""
    _usage_error(invoke(*args), "is not in the range")


@pytest.mark.parametrize("command", [
    ("run", "--profile", "smoke", "--seed", "0", "--steps", "5"),
    ("gate", "--profiles", "smoke", "--seeds", "0:1", "--no-crash-sweep"),
])  # fmt: skip
def test_an_empty_impl_is_not_the_default_implementation(command: tuple[str, ...]) -> None:
    """``--impl "$IMPL"`` with the variable unset: it ran (and passed) our own queue."""
    _usage_error(invoke(*command, "--impl", ""), "--impl", "is empty")


def test_an_empty_trace_path_is_a_usage_error() -> None:
    _usage_error(invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "5",
                        "--trace", ""), "--trace", "is empty")  # fmt: skip


@pytest.fixture
def exiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The module holding ``EXITING``, importable by name; its name."""
    (tmp_path / "exiting_queue.py").write_text(EXITING)
    (tmp_path / "exits_at_import.py").write_text("raise SystemExit(7)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "exiting_queue"
    for name in ("exiting_queue", "exits_at_import"):
        sys.modules.pop(name, None)


def test_an_implementation_that_calls_sys_exit_is_a_divergence(exiting: str,
                                                               tmp_path: Path) -> None:
    """It was rmqsim's own exit, with the implementation's status (0: a pass in CI) and no
    verdict, report or trace."""
    out = tmp_path / "gate"
    gate = invoke("gate", "--impl", f"{exiting}:exits_on_produce", "--profiles", "smoke",
                  "--seeds", "0:1", "--jobs", "1", "--no-crash-sweep", "--no-power-loss",
                  "--no-shrink", "--out", str(out))  # fmt: skip
    assert gate.exit_code == 1, gate.output
    assert (out / "summary.json").exists() and list(out.glob("smoke-seed0-*.jsonl"))
    opened = invoke("run", "--impl", f"{exiting}:exits_on_open", "--profile", "smoke",
                    "--seed", "0", "--steps", "10", "--no-shrink", "--out", str(tmp_path / "o"))
    assert opened.exit_code == 1 and "1 divergence" in opened.output, opened.output
    _usage_error(invoke("run", "--impl", "exits_at_import:factory", "--profile", "smoke",
                        "--seed", "0", "--steps", "5"),
                 "cannot import 'exits_at_import': it called sys.exit(7)")  # fmt: skip


def test_a_directory_where_a_failing_trace_goes_keeps_the_verdict(tmp_path: Path) -> None:
    """It was exit 3 (IsADirectoryError at the rename) with the divergence lost."""
    out = tmp_path / "out"
    (out / "smoke-seed0-poll-skip.jsonl").mkdir(parents=True)
    result = invoke("run", "--profile", "smoke", "--seed", "0", "--impl", MUTANT,
                    "--out", str(out), "--no-shrink")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "1 divergence" in result.output and "a directory is there" in result.output
    assert (out / "smoke-seed0-poll-skip.jsonl").is_dir()


def test_a_trace_is_never_renamed_over_a_non_file_and_is_written_through_a_link(
    tmp_path: Path,
) -> None:
    """``--trace`` at a FIFO (or a device: ``/dev/full`` became a regular file) is refused
    and left as it was; at a symbolic link, the link's target is written."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    refused = invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "5",
                     "--trace", str(fifo))  # fmt: skip
    _usage_error(refused, "something other than a regular file is there")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    target, link = tmp_path / "target.jsonl", tmp_path / "link.jsonl"
    target.write_text("old\n")
    link.symlink_to(target.name)
    written = invoke("run", "--profile", "smoke", "--seed", "0", "--steps", "5",
                     "--trace", str(link))  # fmt: skip
    assert written.exit_code == 0, written.output
    assert link.is_symlink() and read_trace(target).header["profile"] == "smoke"


def test_a_trace_line_is_read_with_a_bound(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A file with no line end (``/dev/zero``) was read whole into memory before the line
    length was checked: the reader stops at the bound."""
    monkeypatch.setattr(trace, "MAX_LINE_BYTES", 1000)
    endless = tmp_path / "endless.jsonl"
    endless.write_text("x" * 5000)
    for read in (read_lines, read_trace):
        with pytest.raises(TraceFormatError, match="line longer than 1000 bytes"):
            read(endless)
    ok = tmp_path / "ok.jsonl"
    ok.write_text("a\r\nb\u2028c\n\nd")  # a line end is \n (or \r\n) only, as JSON lines
    assert read_lines(ok) == ["a", "b\u2028c", "", "d"]
