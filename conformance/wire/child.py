"""A protocol server as a child process: started in a process group of its own, spoken to
in JSON lines over two pipes, crashed by SIGKILL of the whole group.

Two ways to start one, with the same ends: ``ChildProcess`` runs a command (``exec:``:
the pipes are its stdin and stdout); ``ForkedChild`` forks the reference server for a
Python implementation from multiprocessing's fork server, which imported rmqsim and the
implementation once (a child costs a fork, not a new interpreter: one open, start to
``open``'s reply, takes ~25 ms wall and ~10 ms of the child's CPU, against ~130 ms of
CPU for an ``exec:`` server; what keeps ``--crash-mode process`` and a power-loss sweep
through FUSE affordable).

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
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rmqsim.conformance.running.watchdog import running_s

__all__ = [
    "MAX_LINE_BYTES",
    "STDERR_TAIL_BYTES",
    "ChildProcess",
    "ForkedChild",
    "ServerChild",
    "StartError",
    "enter_forked_server",
    "preload_forked",
]

#: Whether this process is a forked server child (``enter_forked_server``).
_in_forked_server = False


def enter_forked_server() -> None:
    """Called first in a forked server child: make it a process group of its own, which
    ``ServerChild.kill`` kills whole. The servers it starts in turn (a Python
    implementation wrapping another process's, as the mutants of the real RocketMQ store
    wrap its driver) then stay in that group instead of starting their own: a kill of
    the child (a crash, a power cut) kills them with it rather than leaving them running."""
    global _in_forked_server
    os.setpgid(0, 0)
    _in_forked_server = True


#: The longest line either end may send (a snapshot of a large store is one line).
MAX_LINE_BYTES = 512 * 1024 * 1024
#: How much of the child's stderr is kept for reports.
STDERR_TAIL_BYTES = 16 * 1024
#: How long a child that was told to close, or killed, may take to exit.
EXIT_WAIT_S = 10.0

_LIVE: weakref.WeakSet[ServerChild] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    """Safety net: no child outlives rmqsim."""
    for child in list(_LIVE):
        child.kill()


class StartError(Exception):
    """The command could not be started at all (not found, not executable)."""


class ServerChild:
    """One running server's two pipe ends: ``send`` a line, ``read_line`` the next one.
    Subclasses start the process and say how it ends."""

    pid: int

    def _ends(self, write_fd: int, read_fd: int) -> None:
        self._write_fd = write_fd
        self._read_fd = read_fd
        self._buffer = bytearray()
        self._eof = False
        _LIVE.add(self)

    def send(self, line: bytes) -> None:
        """Write one line; ``BrokenPipeError`` (an ``OSError``) when the child is gone."""
        view = memoryview(line)
        while view:
            view = view[os.write(self._write_fd, view) :]

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
            ready, _, _ = select.select([self._read_fd], [], [], left_s)
            if not ready:
                continue  # the deadline is checked again (a Ctrl-Z does not count)
            chunk = os.read(self._read_fd, 1 << 20)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    @property
    def partial(self) -> bytes:
        """What the child wrote after its last complete line."""
        return bytes(self._buffer)

    def stderr_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines the child wrote to stderr, where they were kept."""
        return ""

    @property
    def returncode(self) -> int | None:
        """The exit code once reaped (``-9`` after a SIGKILL), else ``None``."""
        raise NotImplementedError

    def wait_exit(self, wait_s: float = EXIT_WAIT_S) -> int | None:
        """The exit code once the child has exited within ``wait_s``, else ``None``."""
        raise NotImplementedError

    def _reap(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        """SIGKILL the child's whole process group (what is left of it) and reap the
        child. Idempotent."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.returncode is None:  # not in its own group yet (a fork that just began)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self._reap()
        _LIVE.discard(self)

    def finish(self) -> int | None:
        """After a ``close``: wait for the child to exit, kill what is left of its group,
        and return its exit code (``None`` when it had to be killed)."""
        code = self.wait_exit()
        self.kill()
        return code


class ChildProcess(ServerChild):
    """A server started as a command (``exec:``): its stdin and stdout are the pipes."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        # Imported here: a protocol server imports this module (through the adapter) and
        # never starts a child; every import is paid once per open (one process each).
        import subprocess
        import threading

        try:
            self.process = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Its own process group (kill takes its children too), but in a forked
                # server child the child's group, which its own kill takes whole.
                start_new_session=not _in_forked_server,
                env=env,
            )
        except OSError as exc:
            raise StartError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self.pid = self.process.pid
        self._ends(self.process.stdin.fileno(), self.process.stdout.fileno())
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_bytes = 0
        self._stderr_lock = threading.Lock()
        self._drain = threading.Thread(
            target=self._drain_stderr, name=f"rmqsim-stderr-{self.process.pid}", daemon=True
        )
        self._drain.start()

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

    # -- ending

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def wait_exit(self, wait_s: float = EXIT_WAIT_S) -> int | None:
        """The exit code once the child has exited within ``wait_s``, else ``None``."""
        import subprocess

        try:
            return self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None

    def _reap(self) -> None:
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            with contextlib.suppress(OSError, ValueError):
                assert stream is not None
                if stream is self.process.stderr:
                    self._drain.join(EXIT_WAIT_S)
                stream.close()



def _context() -> Any:
    """Forkserver where there is one, else spawn (correct, slower)."""
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def preload_forked(modules: Sequence[str]) -> None:
    """Have the fork server import the reference server and ``modules`` (the
    implementations', a worker pool's) once, so that a child costs a fork. It takes
    effect when the fork server starts, i.e. before the first child: a process has one
    fork server, so every caller asks for all it may fork. (``__main__`` is not among them: the
    children do not run it, ``_main_left_out``.)"""
    context = _context()
    if context.get_start_method() == "forkserver":
        preload = ["rmqsim.conformance.wire.server", "rmqsim.conformance.adapter",
                   "rmqsim.impl", *modules]
        context.set_forkserver_preload(list(dict.fromkeys(preload)))


#: Held while a child starts with ``__main__`` swapped out (``_main_left_out``).
_MAIN_SWAP_LOCK = threading.Lock()


@contextlib.contextmanager
def _main_left_out(serve: Callable[..., Any]) -> Iterator[None]:
    """While a forked server starts: ``__main__`` stood in for by an empty module, so
    that the child does not run the parent's main script again.

    multiprocessing tells every child to run the parent's ``__main__`` again (as
    ``__mp_main__``), so that what it defines can be unpickled there; the fork server
    was meant to have run it once already, but in Python 3.11 it never does (CPython
    gh-126631, gh-137996, fixed in later versions: ``forkserver.ensure_running`` passes
    a ``main_path`` that ``spawn.get_preparation_data`` names ``init_main_from_path``). Run from the
    ``rmqsim`` script, every child imported the whole command line again (click,
    ``importlib.metadata``, every command's module): ~60 ms of CPU per child instead of a
    fork. The server's body and the implementation are imported by name (``serve``'s
    module, ``MOD:FACTORY``), never from ``__main__``, so the child does not need it; a
    ``serve`` defined in ``__main__`` keeps the usual way. The swap is under a lock:
    two threads starting children must not restore each other's stand-in."""
    if getattr(serve, "__module__", "__main__") == "__main__":
        yield
        return
    with _MAIN_SWAP_LOCK:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


class ForkedChild(ServerChild):
    """A server forked from the fork server (``preload_forked``): ``serve(requests,
    replies, impl)`` (``conformance.wire.server.serve_forked``, the reference server for
    the Python implementation ``impl``) runs in the child on two pipe connections. Its
    stderr is rmqsim's own."""

    def __init__(self, serve: Callable[[Any, Any, str], None], impl: str) -> None:
        context = _context()
        parent_reads, child_writes = context.Pipe(duplex=False)
        child_reads, parent_writes = context.Pipe(duplex=False)
        self.process = context.Process(
            target=serve, args=(child_reads, child_writes, impl), daemon=True
        )
        try:
            with _main_left_out(serve):
                self.process.start()
        except OSError as exc:  # pragma: no cover - no processes left
            raise StartError(f"cannot start the reference server: {exc}") from None
        child_reads.close()
        child_writes.close()
        self._connections = (parent_reads, parent_writes)  # they own the two fds
        self.pid = self.process.pid
        self._ends(parent_writes.fileno(), parent_reads.fileno())

    @property
    def returncode(self) -> int | None:
        return self.process.exitcode

    def wait_exit(self, wait_s: float = EXIT_WAIT_S) -> int | None:
        self.process.join(wait_s)
        return self.process.exitcode

    def _reap(self) -> None:
        self.process.join(EXIT_WAIT_S)
        for connection in self._connections:
            connection.close()
