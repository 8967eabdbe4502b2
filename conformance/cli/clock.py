"""How long a command took, and its progress where no one is watching.

Every command (``common.friendly_errors``) ends with one line on stderr, its wall time and
its CPU time: user and system time of its own process and of its child processes, both
those it waited for (``os.times``) and those still alive when it ends, with what they in
turn waited for (``/proc/PID/stat``): the fork server of ``--jobs`` and the workers it
reaped, a Spark JVM. A command that ends in a usage error (exit 2) or an interruption
prints its one error line last instead.

Progress bars (``common.progress``) are drawn by rich on a terminal. When stderr is not a
terminal (a CI log, a pipe) a bar prints plain lines instead (``PlainProgress``): one when
it advances and the last line is ``interval_s()`` old, and one when it ends; and while a
command runs, a heartbeat thread prints the active bars' state, or "working", whenever
nothing was printed for ``interval_s()`` seconds (``RMQSIM_PROGRESS_S``, default 15). So a
log never stays silent for longer than that, even inside one long run. Every such line
holds the elapsed time.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_INTERVAL_S",
    "INTERVAL_ENV",
    "Board",
    "CommandClock",
    "PlainProgress",
    "cpu_times",
    "current_board",
    "interval_s",
    "watched",
]

#: Seconds a log may stay silent while a command runs (the environment variable sets it).
INTERVAL_ENV = "RMQSIM_PROGRESS_S"
DEFAULT_INTERVAL_S = 15.0


def interval_s() -> float:
    """``RMQSIM_PROGRESS_S`` when it is a number > 0, else ``DEFAULT_INTERVAL_S``."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if 0 < value < float("inf") else DEFAULT_INTERVAL_S


def _live_children_s() -> tuple[float, float]:
    """User and system seconds of this process's live children, each with the children
    it waited for (Linux ``/proc``; 0 elsewhere)."""
    me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
    user = system = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended meanwhile
            continue
        if len(fields) > 14 and fields[1] == str(me):
            user += (int(fields[11]) + int(fields[13])) / tick
            system += (int(fields[12]) + int(fields[14])) / tick
    return user, system


def cpu_times() -> tuple[float, float]:
    """User and system CPU seconds so far of this process and its children (waited for,
    and alive with what they waited for)."""
    own = os.times()
    live_user, live_system = _live_children_s()
    return (own.user + own.children_user + live_user,
            own.system + own.children_system + live_system)


@dataclass
class CommandClock:
    """A command's wall and CPU time since it started."""

    name: str
    started: float = field(default_factory=time.monotonic)
    cpu_at_start: tuple[float, float] = field(default_factory=cpu_times)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def summary(self) -> str:
        """The command's last line: ``rmqsim gate: 12.3 s wall, 20.1 s CPU (...)``."""
        user, system = cpu_times()
        user -= self.cpu_at_start[0]
        system -= self.cpu_at_start[1]
        return (f"{self.name}: {self.elapsed_s():.1f} s wall, {user + system:.1f} s CPU "
                f"(user {user:.1f} s, system {system:.1f} s, child processes included)")


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0
    visible: bool = True

    def status(self) -> str:
        """``gate 40/140``; a task without a total and not advanced: its name alone."""
        done = f"{self.completed:,.0f}"
        if self.total:
            return f"{self.description} {done}/{self.total:,.0f}"
        return f"{self.description} {done}" if self.completed else self.description


class Board:
    """What a command not on a terminal has printed last and which bars are active; its
    heartbeat thread (``watched``) prints when the log has been silent too long."""

    def __init__(self, clock: CommandClock, stream: Any = None) -> None:
        self.clock = clock
        self.interval_s = interval_s()
        self._stream = stream
        self._lock = threading.RLock()
        self._bars: list[PlainProgress] = []
        self._last_line = time.monotonic()

    def write(self, what: str) -> None:
        """One progress line with the elapsed time; the log is not silent from now."""
        with self._lock:
            stream = self._stream or sys.stderr
            stream.write(f"{self.clock.name}: {what}, {self.clock.elapsed_s():.1f} s elapsed\n")
            stream.flush()
            self._last_line = time.monotonic()

    def due(self) -> bool:
        return time.monotonic() - self._last_line >= self.interval_s

    def add(self, bar: PlainProgress) -> None:
        with self._lock:
            self._bars.append(bar)

    def remove(self, bar: PlainProgress) -> None:
        with self._lock:
            if bar in self._bars:
                self._bars.remove(bar)

    def beat(self) -> None:
        """The heartbeat's line, when the log has been silent for the interval."""
        with self._lock:
            if not self.due():
                return
            states = [bar.status() for bar in self._bars]
            self.write("; ".join(s for s in states if s) or "working")


class PlainProgress:
    """The part of ``rich.progress.Progress`` the commands use, printing plain lines on
    a ``Board`` instead of drawing (see the module's docstring)."""

    def __init__(self, board: Board) -> None:
        self._board = board
        self._tasks: dict[int, _Task] = {}
        self.task_ids: list[int] = []

    def add_task(self, description: str, total: float | None = None,
                 visible: bool = True) -> int:
        task_id = len(self.task_ids)
        self._tasks[task_id] = _Task(description, total, visible=visible)
        self.task_ids.append(task_id)
        return task_id

    def update(self, task_id: int, *, total: float | None = None,
               completed: float | None = None, advance: float | None = None,
               visible: bool | None = None) -> None:
        task = self._tasks[task_id]
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = completed
        if advance is not None:
            task.completed += advance
        if visible is not None:
            task.visible = visible
        if self._board.due():
            self._board.write(self.status())

    def advance(self, task_id: int, advance: float = 1.0) -> None:
        self.update(task_id, advance=advance)

    def status(self) -> str:
        """The visible tasks, the first (the bar's own) first."""
        return ", ".join(t.status() for t in self._tasks.values() if t.visible)

    def __enter__(self) -> PlainProgress:
        self._board.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._board.remove(self)
        if exc[0] is None and self.task_ids:
            self._board.write(self._tasks[self.task_ids[0]].status() + " done")


_current: Board | None = None


def current_board() -> Board:
    """The running command's board (a board of its own outside a command)."""
    return _current if _current is not None else Board(CommandClock("rmqsim"))


def _heartbeat(board: Board, stop: threading.Event) -> None:
    while not stop.wait(min(board.interval_s, 1.0)):
        board.beat()


@contextmanager
def watched(clock: CommandClock, terminal: bool) -> Iterator[Board]:
    """Within the block, the command's board; when stderr is not a terminal, its
    heartbeat runs (a nested command shares the outer one's board)."""
    global _current
    if _current is not None:
        yield _current
        return
    board = _current = Board(clock)
    stop = threading.Event()
    thread = None
    if not terminal:
        thread = threading.Thread(target=_heartbeat, args=(board, stop), daemon=True,
                                  name="rmqsim-heartbeat")
        thread.start()
    try:
        yield board
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        _current = None
