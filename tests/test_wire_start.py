"""A protocol server's start is not the implementation's operation: the interpreter's
start and ``hello`` are bounded by ``HELLO_TIMEOUT_S``, not by the liveness bound of the
open they are part of (``watchdog.bounded_elsewhere``), so a slow start on a loaded
machine is no ``hang``; the open itself still is bounded."""

from __future__ import annotations

import shlex
import subprocess
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


#: What a queue server must not import: the stream layer and the simulations (simpy, every
#: profile). A server starts once per open, so its imports are most of an open's cost
#: through the protocol (≈ 260 -> ≈ 180 CPU ms per open when they went).
NOT_FOR_A_QUEUE_SERVER = (
    "simpy",
    "rmqsim.scenarios.catalog",
    "rmqsim.conformance.stream.side",
    "rmqsim.conformance.wire.streams",
    "importlib.resources",
)


def test_a_queue_server_imports_neither_the_stream_layer_nor_the_simulations(
    tmp_path: Path,
) -> None:
    """A reference server of the queue layer that answers ``hello``, opens our queue,
    produces and closes has imported none of ``NOT_FOR_A_QUEUE_SERVER``; a stream server
    still gets the stream layer when it is asked for it."""
    script = (
        "import io, json, sys\n"
        "from rmqsim.conformance.wire.server import Server\n"
        "impl, path = sys.argv[1], sys.argv[2]\n"
        "requests = [{'id': 1, 'op': 'hello'}, {'id': 2, 'op': 'open', 'path': path,\n"
        "            'config': {}}, {'id': 3, 'op': 'create_topic', 'topic': 't'},\n"
        "            {'id': 4, 'op': 'close'}]\n"
        "lines = b''.join(json.dumps(r).encode() + b'\\n' for r in requests)\n"
        "replies = io.BytesIO()\n"
        "assert Server(impl, io.BytesIO(lines), replies).serve() == 0\n"
        "assert b'error' not in replies.getvalue(), replies.getvalue()\n"
        f"print(sorted(m for m in {NOT_FOR_A_QUEUE_SERVER!r} if m in sys.modules))\n"
    )
    imported = {}
    for impl in ("rocksmq", "stream"):
        done = subprocess.run(
            [sys.executable, "-c", script, impl, str(tmp_path / impl)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        imported[impl] = done.stdout.strip()
    assert imported["rocksmq"] == "[]"
    assert "rmqsim.conformance.wire.streams" in imported["stream"]


def test_a_server_asked_for_an_impl_it_cannot_load_says_so_in_one_line() -> None:
    """``python -m rmqsim.conformance.wire.server IMPL`` with an IMPL that cannot be
    served (no such module, a factory of no form, an unknown name) exits with status 2
    before reading a request, its reason in one line on stderr: no traceback, nothing on
    stdout (the protocol's)."""
    for impl, reason in (("nosuch.module:factory", "cannot import 'nosuch.module'"),
                         ("rmqsim.impl:RocksMQ", "is no form"),
                         ("rmqsim.impl:", "must be module:factory")):
        done = subprocess.run(
            [sys.executable, "-m", "rmqsim.conformance.wire.server", impl],
            input='{"id": 1, "op": "hello", "protocol": 1, "layer": "queue"}\n',
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 2, (impl, done.stderr)
        assert done.stdout == "" and "Traceback" not in done.stderr, (impl, done.stderr)
        assert done.stderr.startswith("rmqsim wire server: ") and reason in done.stderr, (
            impl, done.stderr)
        assert len(done.stderr.splitlines()) == 1, (impl, done.stderr)
