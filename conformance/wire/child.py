"""A protocol server as a child process: started in a process group of its own, spoken to
in JSON lines over its stdin and stdout, crashed by SIGKILL of the whole group.

Its stderr is drained by a thread into a bounded tail (a server that floods stderr never
blocks on a full pipe, and a report can quote its last lines: a Go panic, a Java stack).
Its stdout is read without a thread: ``read_line`` waits on the pipe with ``select`` up
to a deadline of running time (``watchdog.running_s``), so a child that never answers
costs the bound, not a hang. A line longer than ``MAX_LINE_BYTES`` breaks the protocol.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import select
import signal
import subprocess
import threading
import weakref
from collections.abc import Sequence

from rmqsim.conformance.watchdog import running_s

__all__ = [
    "MAX_LINE_BYTES",
    "STDERR_TAIL_BYTES",
    "ChildProcess",
    "StartError",
]

#: The longest line either end may send (a snapshot of a large store is one line).
MAX_LINE_BYTES = 512 * 1024 * 1024
#: How much of the child's stderr is kept for reports.
STDERR_TAIL_BYTES = 16 * 1024
#: How long a child that was told to close, or killed, may take to exit.
EXIT_WAIT_S = 10.0

_LIVE: weakref.WeakSet[ChildProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """Safety net: no child outlives rmqsim."""
    for child in list(_LIVE):
        child.kill()


class StartError(Exception):
    """The command could not be started at all (not found, not executable)."""


class ChildProcess:
    """One running server. ``send`` a line, ``read_line`` the next one, ``kill`` it."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        try:
            self.process = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: kill takes its children too
                env=env,
            )
        except OSError as exc:
            raise StartError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self._stdin = self.process.stdin
        self._stdout_fd = self.process.stdout.fileno()
        self._buffer = bytearray()
        self._eof = False
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_bytes = 0
        self._stderr_lock = threading.Lock()
        self._drain = threading.Thread(
            target=self._drain_stderr, name=f"rmqsim-stderr-{self.process.pid}", daemon=True
        )
        self._drain.start()
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.process.pid

    # -- stderr

    def _drain_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536):  # type: ignore[attr-defined]  # a BufferedReader
                with self._stderr_lock:
                    self._stderr_tail.append(chunk)
                    self._stderr_bytes += len(chunk)
                    while self._stderr_bytes - len(self._stderr_tail[0]) >= STDERR_TAIL_BYTES:
                        self._stderr_bytes -= len(self._stderr_tail.popleft())

    def stderr_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines the child wrote to stderr (waits briefly for the drain
        to reach the end when the child has exited)."""
        if self.process.poll() is not None:
            self._drain.join(1.0)
        with self._stderr_lock:
            text = b"".join(self._stderr_tail)[-STDERR_TAIL_BYTES:]
        kept = text.decode("utf-8", "replace").rstrip("\n").splitlines()
        return "\n".join(kept[-lines:])

    # -- lines

    def send(self, line: bytes) -> None:
        """Write one line; ``BrokenPipeError`` (an ``OSError``) when the child is gone."""
        self._stdin.write(line)
        self._stdin.flush()

    def read_line(self, wait_s: float) -> bytes | None:
        """The next line (with its ``\\n``), ``b""`` at end of file (what was left of a
        line is in ``partial``), or ``None`` when none came within ``wait_s`` seconds of
        running time (0: no limit)."""
        deadline_s = running_s() + wait_s if wait_s else None
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_LINE_BYTES:
                return bytes(self._buffer)  # not a line: the caller refuses it
            if self._eof:
                return b""
            left_s = None if deadline_s is None else deadline_s - running_s()
            if left_s is not None and left_s <= 0:
                return None
            ready, _, _ = select.select([self._stdout_fd], [], [], left_s)
            if not ready:
                continue  # the deadline is checked again (a Ctrl-Z does not count)
            chunk = os.read(self._stdout_fd, 1 << 20)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    @property
    def partial(self) -> bytes:
        """What the child wrote after its last complete line."""
        return bytes(self._buffer)

    # -- ending

    def exit_code(self) -> int | None:
        return self.process.poll()

    def wait_exit(self, wait_s: float = EXIT_WAIT_S) -> int | None:
        """The exit code once the child has exited within ``wait_s``, else ``None``."""
        try:
            return self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the child's whole process group and reap the child. Idempotent."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self._stdin.close()
        self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError, ValueError):
                assert stream is not None
                if stream is self.process.stderr:
                    self._drain.join(EXIT_WAIT_S)
                stream.close()
        _LIVE.discard(self)

    def finish(self) -> int | None:
        """After a ``close``: wait for the child to exit, kill what is left of its group,
        and return its exit code (``None`` when it had to be killed)."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        code = self.wait_exit()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._close_pipes()
        return code
