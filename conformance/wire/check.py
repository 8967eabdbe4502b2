"""``rmqsim protocol-check``: the protocol test suite an author runs before the gate.

Each check is a short, fixed program run in lockstep with the reference model (the same
``Lockstep`` the gate uses) on a fresh directory: the handshake, every operation with
every error it can raise, snapshots whole and partial, the clock (pages closed and acked
at the request's ``now``), retention, a kill (SIGKILL) and restart, a close and reopen,
and a crash at each fault point the server announces in a produce. A failed check says
what was expected and what came back; the checks do not stop at the first failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rmqsim.conformance.running.lockstep import Divergence, Lockstep
from rmqsim.model.api import MQConfig
from rmqsim.scenarios.queue.ops import (
    AdvanceClock,
    ArmCrash,
    CloseReopen,
    Consume,
    CrashReopen,
    CreateGroup,
    CreateTopic,
    DestroyGroup,
    DestroyTopic,
    ExistGroup,
    GetLatest,
    Message,
    Op,
    Produce,
    RunRetention,
    Seek,
    SeekToLatest,
    Step,
)

__all__ = ["CHECKS", "CheckResult", "ProtocolCheck", "run_checks", "run_program"]

_T, _G = "t", "g"
#: Pages of 4 bytes and retention after 10 s: a few short messages close, ack and expire.
_SMALL_PAGES = MQConfig(page_size_bytes=4, retention_time_s=10, retention_size_bytes=-1)


@dataclasses.dataclass(frozen=True)
class ProtocolCheck:
    """A named program: what it shows, its queue configuration and its operations."""

    name: str
    shows: str
    ops: tuple[Op, ...]
    config: MQConfig = dataclasses.field(default_factory=lambda: _SMALL_PAGES)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    check: ProtocolCheck
    problem: str | None  # None: passed
    points: tuple[str, ...] = ()  # the fault points the server announced

    @property
    def ok(self) -> bool:
        return self.problem is None


def _messages(
    *payloads: bytes, properties: tuple[tuple[str, str], ...] = ()
) -> tuple[Message, ...]:
    return tuple(Message(p, properties) for p in payloads)


CHECKS: tuple[ProtocolCheck, ...] = (
    ProtocolCheck(
        "topics",
        "create (twice), get_latest_msg, destroy, and their errors",
        (
            CreateTopic(_T),
            CreateTopic(_T),
            GetLatest(_T),
            GetLatest("absent"),
            DestroyTopic("absent"),
            CreateTopic(""),
            CreateTopic("a/b"),
            CreateTopic("nul\0"),
            CreateTopic("x" * 4097),
            CreateTopic("T"),
            CreateTopic("\u00fc"),
            CreateTopic("u\u0308"),
            DestroyTopic(_T),
            GetLatest(_T),
        ),
    ),
    ProtocolCheck(
        "groups",
        "create, exist, destroy, and GroupExists / TopicNotFound / InvalidArgument",
        (
            CreateGroup("absent", _G),
            CreateTopic(_T),
            CreateGroup(_T, _G),
            CreateGroup(_T, _G),
            ExistGroup(_T, _G),
            ExistGroup(_T, "h"),
            ExistGroup("absent", _G),
            CreateGroup(_T, ""),
            DestroyGroup(_T, "h"),
            DestroyGroup(_T, _G),
            ExistGroup(_T, _G),
            DestroyGroup("absent", _G),
        ),
    ),
    ProtocolCheck(
        "produce-consume",
        "ids, payloads (empty, binary), properties, consume n, and their errors",
        (
            CreateTopic(_T),
            Produce(_T, ()),
            Produce("absent", _messages(b"x")),
            Produce(_T, _messages(b"a", b"", b"\x00\xff\n")),
            Produce(_T, _messages(b"p", properties=(("k", "v"), ("\u00fc", "")))),
            CreateGroup(_T, _G),
            Consume(_T, _G, 2),
            Consume(_T, _G, 0),
            Consume(_T, _G, -1),
            Consume(_T, "h", 1),
            Consume("absent", _G, 1),
            Consume(_T, _G, 10),
            GetLatest(_T),
        ),
    ),
    ProtocolCheck(
        "seek",
        "seek forward, backward, to an absent id (-1), to latest, and their errors",
        (
            CreateTopic(_T),
            Produce(_T, _messages(b"a", b"b", b"c")),
            CreateGroup(_T, _G),
            Seek(_T, _G, 3),
            Consume(_T, _G, 1),
            Seek(_T, _G, 1),
            Consume(_T, _G, 5),
            Seek(_T, _G, 99),
            Consume(_T, _G, 1),
            SeekToLatest(_T, _G),
            Consume(_T, _G, 1),
            Seek(_T, "h", 1),
            SeekToLatest("absent", _G),
        ),
    ),
    ProtocolCheck(
        "clock-pages-retention",
        "pages close and are acked at the request's now; retention at now frees them",
        (
            CreateTopic(_T),
            CreateGroup(_T, _G),
            Produce(_T, _messages(b"12345", b"678")),
            AdvanceClock(5),
            Consume(_T, _G, 1),
            AdvanceClock(20),
            RunRetention(),
            Produce(_T, _messages(b"abcde")),
            GetLatest(_T),
        ),
    ),
    ProtocolCheck(
        "kill-restart",
        "SIGKILL between operations, a new process on the same directory keeps everything",
        (
            CreateTopic(_T),
            Produce(_T, _messages(b"a", b"b")),
            CreateGroup(_T, _G),
            Consume(_T, _G, 1),
            CrashReopen(),
            Consume(_T, _G, 1),
            GetLatest(_T),
        ),
    ),
    ProtocolCheck(
        "close-reopen",
        "close (then NotServing for everything), exit 0, reopen keeps everything",
        (
            CreateTopic(_T),
            Produce(_T, _messages(b"a")),
            CreateGroup(_T, _G),
            CloseReopen(),
            Consume(_T, _G, 1),
            CloseReopen(),
            GetLatest(_T),
        ),
    ),
)


def _steps(ops: Sequence[Op]) -> Iterator[Step[Op]]:
    now_s = 1_000
    for op in ops:
        if isinstance(op, AdvanceClock):
            now_s += op.seconds
        yield Step(now_s, "check", op)


def run_program(
    factory: Callable[..., object], ops: Sequence[Op], config: MQConfig, root: Path
) -> tuple[Divergence | None, tuple[str, ...]]:
    """Run ``ops`` (an ``AdvanceClock`` moves the clock) in lockstep on a fresh directory
    under ``root``: the divergence, if any, and the fault points announced."""
    lockstep = Lockstep(factory, config, root)  # type: ignore[arg-type]  # a queue factory
    try:
        steps = list(_steps(ops))
        for step in steps:
            lockstep.execute(step)
        lockstep.finish(len(steps) + 1, Step(0, "check", GetLatest(_T)))
    except Divergence as divergence:
        return divergence, ()
    finally:
        with contextlib.suppress(Exception):
            lockstep.close()
    return None, tuple(dict.fromkeys(point for _, point in lockstep.faults.seen))


def _run(factory: Callable[..., object], check: ProtocolCheck, root: Path) -> CheckResult:
    divergence, points = run_program(factory, check.ops, check.config, root)
    if divergence is not None:
        return CheckResult(check, _describe(divergence))
    return CheckResult(check, None, points)


def _describe(divergence: Divergence) -> str:
    said = f"{divergence.anomaly} at step {divergence.step_index} ({divergence.step.op})"
    if divergence.expected is not None or divergence.actual is not None:
        said += f": expected {divergence.expected}, got {divergence.actual}"
    if divergence.detail:
        said += f" ({divergence.detail})"
    return said


def _crash_checks(points: Sequence[str]) -> list[ProtocolCheck]:
    """A crash at each fault point a produce announced (hit 1), then a reopen."""
    return [
        ProtocolCheck(
            f"crash-at-{point}",
            f"SIGKILL at {point} inside a produce; the reopened state is before or after it",
            (
                CreateTopic(_T),
                Produce(_T, _messages(b"a")),
                ArmCrash(1, point),
                Produce(_T, _messages(b"b", b"c")),
                GetLatest(_T),
            ),
        )
        for point in points
        if point.startswith("produce")
    ]


def run_checks(factory: Callable[..., object]) -> list[CheckResult]:
    """Every check, then a crash check per fault point the produces announced."""
    results = []
    with tempfile.TemporaryDirectory(prefix="rmqsim-protocol-check-") as scratch:
        for number, check in enumerate(CHECKS):
            results.append(_run(factory, check, Path(scratch) / str(number)))
        announced = [p for r in results for p in r.points]
        for number, check in enumerate(_crash_checks(list(dict.fromkeys(announced)))):
            results.append(_run(factory, check, Path(scratch) / f"crash{number}"))
    return results
