"""A protocol server's start is not the implementation's operation: the interpreter's
start and ``hello`` are bounded by ``HELLO_TIMEOUT_S``, not by the liveness bound of the
open they are part of (``watchdog.bounded_elsewhere``), so a slow start on a loaded
machine is no ``hang``; the open itself still is bounded."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from click.testing import CliRunner

from rmqsim.conformance.cli import cli

SLOW_START_S = 2.5


def _slow_starting_server(tmp_path: Path, *, slow_open: bool = False) -> str:
    """exec: a reference server that sleeps before it starts (or, ``slow_open``, in its
    open: the implementation's own work)."""
    script = tmp_path / "slow_server.py"
    script.write_text(
        "import sys, time\n"
        "from rmqsim.conformance.wire import server\n"
        f"SLOW_OPEN = {slow_open!r}\n"
        "if not SLOW_OPEN:\n"
        f"    time.sleep({SLOW_START_S})\n"
        "else:\n"
        "    from rmqsim.impl import RocksMQ\n"
        "    real_init = RocksMQ.__init__\n"
        "    def slow_init(self, *args, **kwargs):\n"
        f"        time.sleep({SLOW_START_S})\n"
        "        real_init(self, *args, **kwargs)\n"
        "    RocksMQ.__init__ = slow_init\n"
        "sys.argv = ['server', 'rocksmq']\n"
        "server.main()\n")
    return "exec:" + shlex.join([sys.executable, str(script)])


def _run(impl: str, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [
        "run", "--profile", "smoke", "--seed", "0", "--steps", "40", "--impl", impl,
        "--op-timeout-s", "1", "--no-shrink", "--out", str(out)])
    return result.exit_code, result.output


def test_a_server_slower_to_start_than_the_bound_is_no_hang(tmp_path: Path) -> None:
    code, output = _run(_slow_starting_server(tmp_path), tmp_path / "out")
    assert code == 0, output


def test_an_open_slower_than_the_bound_is_still_a_hang(tmp_path: Path) -> None:
    code, output = _run(_slow_starting_server(tmp_path, slow_open=True), tmp_path / "out")
    assert code == 1, output
    assert "hang" in output or "unrecoverable" in output, output
