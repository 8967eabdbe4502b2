"""``rmqsim protocol-check`` on a stream server (docs/PROTOCOL.md "The stream layer").

Each check is a short, fixed program of stream calls run on the server's streams and on
the model's (``model.stream`` over a ``ReferenceMQ``) side by side: every ``stream_*``
operation with every error the contract gives it, the queue operations the stream layer
sends (``create_topic``, ``destroy_topic``, ``run_retention``, ``snapshot``), the clock
(retention at the request's ``now``), a kill (SIGKILL) and restart, and a crash at each
fault point the server announces in a ``stream_produce``. After every call the two
outcomes (a value, or an error kind) and the named stream's ``snapshot()`` must be equal,
and at the end the two queues must hold the same records. A failed check says at which
call, what was expected and what came back; the checks do not stop at the first failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rmqsim.conformance.running.apply import exception_text
from rmqsim.conformance.running.lockstep import InjectedCrash
from rmqsim.conformance.running.watchdog import OperationHang
from rmqsim.conformance.stream.check import describe_states
from rmqsim.conformance.stream.side import pack_to_plain, whole_messages
from rmqsim.conformance.wire.streams import QUEUE_FACTORY_ATTRIBUTE
from rmqsim.model import ReferenceMQ
from rmqsim.model.api import MQConfig, MQError
from rmqsim.model.stream import StreamModelFactory
from rmqsim.model.stream.api import (
    MsgPack,
    MsgPosition,
    MsgType,
    Row,
    StreamFactory,
    StreamState,
    SubscriptionPosition,
    TsMsg,
)

__all__ = [
    "STREAM_CHECKS",
    "Call",
    "StreamCheck",
    "StreamCheckResult",
    "points_of",
    "run_stream_checks",
]

_A, _B = "a", "b"
#: Small pages and retention after 10 s: a few messages close, are read and expire.
_CONFIG = MQConfig(page_size_bytes=64, retention_time_s=10, retention_size_bytes=-1)
_LATEST, _EARLIEST = SubscriptionPosition.LATEST, SubscriptionPosition.EARLIEST


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of a check: ``stream.method(*args)``, or of the queue and the process when
    ``stream`` is None (``crash_reopen``, ``advance`` the clock, ``arm`` a crash point)."""

    stream: str | None
    method: str
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        shown = ", ".join(_short(arg) for arg in self.args)
        return f"{self.stream or 'queue'}.{self.method}({shown})"


def _short(value: object) -> str:
    if value is whole_messages:
        return "whole_messages"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclasses.dataclass(frozen=True)
class StreamCheck:
    """A named program: what it shows and its calls."""

    name: str
    shows: str
    calls: tuple[Call, ...]


@dataclasses.dataclass(frozen=True)
class StreamCheckResult:
    check: StreamCheck
    problem: str | None  # None: passed
    points: tuple[str, ...] = ()  # the fault points the server announced

    @property
    def ok(self) -> bool:
        return self.problem is None


# --------------------------------------------------------------------------- programs


def _s(stream: str, method: str, *args: Any) -> Call:
    return Call(stream, method, args)


def _q(method: str, *args: Any) -> Call:
    return Call(None, method, args)


def _new(stream: str, kind: str = "plain") -> Call:
    return Call(stream, "new", (kind,))


def _dml(msg_id: int, *rows: tuple[int, int, int], msg_type: MsgType = MsgType.INSERT) -> TsMsg:
    """A DML message of ``(row_id, timestamp, hash_key)`` rows."""
    return TsMsg(msg_type, msg_id, 0, tuple(key for _, _, key in rows), b"\x00row\xff",
                 tuple(Row(row_id, ts) for row_id, ts, _ in rows))  # fmt: skip


def _pack(*msgs: TsMsg) -> MsgPack:
    return MsgPack(tuple(msgs))


def _pos(channel: str, queue_id: int, timestamp: int, group: str = "g") -> MsgPosition:
    return MsgPosition.at(channel, queue_id, group, timestamp)


def _tick(timestamp: int) -> MsgPack:
    return _pack(TsMsg.time_tick(timestamp))


_PRODUCE = StreamCheck("produce", "as_producer, produce (default and whole repack), broadcast, "
                       "and NoProducer / InvalidArgument / InvalidPack / NotSubscribed", (
    _new("p"), _s("p", "produce", _pack(_dml(1, (1, 10, 0)))),
    _s("p", "as_producer", []), _s("p", "as_producer", ["a/b"]), _s("p", "as_producer", [_A, _B]),
    _s("p", "produce", _pack(_dml(1, (1, 10, 0), (2, 20, 1), (3, 30, 5)))),
    _s("p", "produce", MsgPack()),
    _s("p", "set_repack_func", whole_messages),
    _s("p", "produce", _pack(_dml(2, (4, 40, 1), (5, 50, 0), msg_type=MsgType.DELETE))),
    _s("p", "set_repack_func", None),
    _s("p", "broadcast", _pack(TsMsg(MsgType.CREATE_COLLECTION, 3, 5, (), b""))),
    _s("p", "broadcast", MsgPack()),
    _s("p", "produce", _pack(TsMsg(999, 4, 0, (0,)))),  # type: ignore[arg-type]  # on purpose
    _s("p", "produce", _pack(TsMsg(MsgType.INSERT, 5, 0, (0,)))),
    _s("p", "produce", _pack(_dml(6, (6, 60, 2**32)))),
    _s("p", "produce", _pack(TsMsg(MsgType.INSERT, 7, 9, (0,), b"", (Row(7, 70),)))),
    _s("p", "produce", _pack(TsMsg(MsgType.FLUSH, 8, 2**64, (0,)))),
    _s("p", "produce", _pack(TsMsg(MsgType.FLUSH, 9, 90, (0,), b"", (Row(9, 90),)))),
    _s("p", "produce", _pack(TsMsg(MsgType.FLUSH, 10, 100))),
    _s("p", "get_latest_msg_id", _A), _s("p", "consume"),
))  # fmt: skip

_PLAIN = StreamCheck("plain-consume-seek", "as_consumer (earliest, latest, new and existing "
                     "groups), consume, get_latest_msg_id, seek, and InvalidPosition", (
    _new("p"), _s("p", "as_producer", [_A, _B]),
    _s("p", "produce", _pack(_dml(1, (1, 10, 0), (2, 20, 0), (3, 30, 1), (4, 40, 2)))),
    _new("c"), _s("c", "consume"), _s("c", "as_consumer", [], "g"),
    _s("c", "as_consumer", [_A, _B], ""), _s("c", "as_consumer", [_A, _B], "g", _EARLIEST),
    *[_s("c", "consume")] * 5,
    _s("c", "get_latest_msg_id", _A), _s("c", "get_latest_msg_id", "zzz"),
    _s("c", "seek", [_pos(_A, 1, 0)], False), _s("c", "consume"),
    _s("c", "seek", [_pos(_A, 2, 0), _pos(_B, 1, 0)], True), *[_s("c", "consume")] * 3,
    _s("c", "seek", [_pos("zzz", 1, 0)]), _s("c", "seek", [_pos(_A, 999, 0)]),
    _s("c", "seek", [MsgPosition(_A, b"\x01\x00", "g", 0)]),
    _s("c", "seek", [_pos(_A, 1, 0), _pos(_A, 2, 0)]), _s("c", "seek", [_pos(_A, 1, 2**64)]),
    _new("l"), _s("l", "as_consumer", [_A, _B], "g", _LATEST), _s("l", "consume"),
    _s("p", "produce", _pack(_dml(2, (5, 50, 1)))), _s("l", "consume"),
    _new("e"), _s("e", "as_consumer", [_B, _A], "h"), *[_s("e", "consume")] * 2,
))  # fmt: skip

_TT = StreamCheck("time-tick", "time-tick packs, buffered, dropped and ignored ids, "
                  "duplicates, SeekAfterConsume, resume from a checkpoint", (
    _new("p"), _s("p", "as_producer", [_A, _B]),
    _new("t", "tt"), _s("t", "as_consumer", [_A, _B], "t"), _s("t", "consume"),
    _s("p", "produce", _pack(_dml(1, (1, 50, 0), (2, 60, 1)))),
    _s("p", "broadcast", _tick(100)), _s("t", "consume"),
    _s("p", "set_repack_func", whole_messages),
    _s("p", "produce", _pack(_dml(2, (3, 150, 0), (4, 250, 0)))),
    _s("p", "set_repack_func", None),
    _s("p", "broadcast", _tick(200)), _s("t", "consume"),
    _s("p", "broadcast", _tick(150)), _s("p", "produce", _pack(_dml(3, (5, 120, 0)))),
    _s("p", "produce", _pack(_dml(4, (6, 260, 1)), _dml(4, (6, 260, 1)))),
    _s("p", "broadcast", _tick(300)), _s("t", "consume"), _s("t", "consume"),
    _s("t", "seek", [_pos(_A, 1, 100, "t")], True),
    _new("r", "tt"), _s("r", "as_consumer", [_A, _B], "r"),
    _s("r", "seek", [_pos(_A, 3, 100, "r"), _pos(_B, 2, 100, "r")], True),
    *[_s("r", "consume")] * 3,
))  # fmt: skip

_CLOSE = StreamCheck("close", "close (twice), then StreamClosed for every operation", (
    _new("c"), _s("c", "as_consumer", [_A], "g"), _s("c", "close"), _s("c", "close"),
    _s("c", "consume"), _s("c", "seek", []), _s("c", "as_producer", [_A]),
    _s("c", "as_consumer", [_B], "g"), _s("c", "get_latest_msg_id", _A),
    _s("c", "set_repack_func", None), _s("c", "produce", MsgPack()),
    _s("c", "broadcast", MsgPack()),
))  # fmt: skip

_QUEUE = StreamCheck("queue-clock-retention", "a channel destroyed and re-created under a "
                     "consumer, retention at the request's now, a seek to a trimmed id", (
    _new("p"), _s("p", "as_producer", [_A]),
    _s("p", "produce", _pack(_dml(1, (1, 10, 0), (2, 20, 0), (3, 30, 0)))),
    _new("c"), _s("c", "as_consumer", [_A], "g"), _s("c", "consume"),
    _q("destroy_topic", _A), _q("create_topic", _A), _s("c", "consume"),
    _new("c"), _s("c", "as_consumer", [_A], "g"),
    _s("p", "produce", _pack(_dml(2, (4, 40, 0), (5, 50, 0), (6, 60, 0), (7, 70, 0)))),
    *[_s("c", "consume")] * 3,
    _q("advance", 30), _s("p", "produce", _pack(_dml(3, (8, 80, 0), (9, 90, 0)))),
    _q("run_retention"), _s("c", "seek", [_pos(_A, 5, 0)], True), _s("c", "consume"),
    _new("e"), _s("e", "as_consumer", [_A], "e"), _s("e", "consume"),
))  # fmt: skip

_KILL = StreamCheck("kill-restart", "SIGKILL between operations; a new process on the same "
                    "directory keeps the records and the groups' positions", (
    _new("p"), _s("p", "as_producer", [_A, _B]),
    _s("p", "produce", _pack(_dml(1, (1, 10, 0), (2, 20, 1), (3, 30, 0)))),
    _s("p", "broadcast", _tick(100)),
    _new("c"), _s("c", "as_consumer", [_A, _B], "g"), *[_s("c", "consume")] * 2,
    _q("crash_reopen"),
    _new("c"), _s("c", "as_consumer", [_A, _B], "g"), *[_s("c", "consume")] * 4,
    _new("t", "tt"), _s("t", "as_consumer", [_A, _B], "t"), _s("t", "consume"),
))  # fmt: skip

#: The fixed checks; a crash check per fault point of a produce follows them.
STREAM_CHECKS: tuple[StreamCheck, ...] = (_PRODUCE, _PLAIN, _TT, _CLOSE, _QUEUE, _KILL)


def _crash_check(point: str) -> StreamCheck:
    """A crash at ``point`` (its first hit) inside a produce to one channel: the reopened
    queue holds the records before or after it."""
    return StreamCheck(f"crash-at-{point}", f"SIGKILL at {point} inside a stream produce; "
                       "the reopened queue is before or after it", (
        _new("p"), _s("p", "as_producer", [_A, _B]), _s("p", "produce", _pack(_dml(1, (1, 10, 0)))),
        _q("arm", point), _s("p", "produce", _pack(_dml(2, (2, 20, 0)), _dml(3, (3, 30, 2)))),
    ))  # fmt: skip


# --------------------------------------------------------------------------- running


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


class _Points:
    """The server's fault hook: records each point (and the call it came in), and raises
    ``InjectedCrash`` at the first hit of an armed one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.during = "open"
        self.armed: str | None = None  # read by the session: wait at points while armed

    def __call__(self, point: str) -> None:
        self.seen.append((self.during, point))
        if point == self.armed:
            self.armed = None
            raise InjectedCrash(point, 1)


def _plain(value: object) -> object:
    """A call's value as comparable plain data."""
    if isinstance(value, MsgPack):
        return pack_to_plain(value)
    if isinstance(value, dict):
        return tuple((key, tuple(ids)) for key, ids in value.items())
    return value


class _Side:
    """A stream factory over a queue and the check's streams on it, by name."""

    def __init__(self, open_streams: Callable[[], StreamFactory], killed: bool) -> None:
        self.open_streams = open_streams
        self.killed = killed  # a crash kills the queue's process (else: the model's, kept)
        self.factory = open_streams()
        self.streams: dict[str, Any] = {}

    def do(self, call: Call) -> tuple[str, object]:
        """``("ok", value)``, ``("error", kind)`` or ``("unexpected", text)``."""
        try:
            return "ok", _plain(self._do(call))
        except MQError as exc:
            return "error", exc.kind
        except Exception as exc:
            return "unexpected", f"{type(exc).__name__}: {exception_text(exc)[:300]}"

    def _do(self, call: Call) -> object:
        if call.stream is None:
            if call.method == "crash_reopen":
                self.reopen()
                return None
            return getattr(self.factory.mq, call.method)(*call.args)
        if call.method == "new":
            tt, factory = call.args[0] == "tt", self.factory
            stream = factory.new_tt_msg_stream() if tt else factory.new_msg_stream()
            self.streams[call.stream] = stream
            return None
        return getattr(self.streams[call.stream], call.method)(*call.args)

    def reopen(self) -> None:
        self.streams.clear()
        if self.killed:
            self.factory.mq.crash()  # type: ignore[attr-defined]  # a WireStreamQueue
            self.factory = self.open_streams()

    def state(self, name: str) -> tuple[str, object]:
        return self.do(Call(name, "snapshot"))


def _show(outcome: tuple[str, object]) -> str:
    kind, value = outcome
    text = repr(value) if kind == "ok" else f"{kind} {value}"
    return text if len(text) <= 300 else text[:297] + "..."


def _broke_protocol(outcome: tuple[str, object]) -> bool:
    return outcome[0] == "unexpected" and str(outcome[1]).startswith("WireProtocolError")


def _compare(index: int, call: Call, model: _Side, wire: _Side) -> str | None:
    """Run ``call`` on both sides: what differs, or None."""
    got = wire.do(call)
    want = model.do(call)
    where = f"call {index} ({call})"
    if _broke_protocol(got):
        return f"protocol-error at {where}: {got[1]}"
    if got != want:
        return f"{where}: expected {_show(want)}, got {_show(got)}"
    if call.stream is None or call.method == "new":
        return None
    model_state, wire_state = model.state(call.stream), wire.state(call.stream)
    if _broke_protocol(wire_state):
        return f"protocol-error at {where}, in the snapshot after it: {wire_state[1]}"
    if model_state != wire_state:
        if isinstance(model_state[1], StreamState) and isinstance(wire_state[1], StreamState):
            return f"{where}: {describe_states(call.stream, model_state[1], wire_state[1])}"
        return f"{where}: snapshot() expected {_show(model_state)}, got {_show(wire_state)}"
    return None


def _after_crash(index: int, call: Call, model: _Side, wire: _Side, queue: ReferenceMQ) -> str:
    """``call`` was killed at its armed point: the reopened queue must hold the model's
    records before or after it."""
    before = queue.snapshot()
    model.do(call)
    after = queue.snapshot()
    wire.reopen()
    state = wire.factory.mq.snapshot()
    if state in (before, after):
        return ""
    return (f"call {index} ({call}): after a SIGKILL at its fault point, the reopened queue "
            "holds neither the records before the call nor those after it")


def _run(factory: Any, check: StreamCheck, root: Path) -> StreamCheckResult:
    clock, points = _Clock(), _Points()
    model_queue = ReferenceMQ(config=_CONFIG, clock=clock)
    open_queue = getattr(factory, QUEUE_FACTORY_ATTRIBUTE)

    def open_wire() -> StreamFactory:
        queue = open_queue(path=root, config=_CONFIG, clock=clock, faults=points)
        streams: StreamFactory = factory(queue=queue)
        return streams

    model = _Side(lambda: StreamModelFactory(model_queue), killed=False)
    try:
        wire = _Side(open_wire, killed=True)
    except OperationHang as hang:
        return StreamCheckResult(check, f"open: hang: {hang.detail}")
    except Exception as exc:
        return StreamCheckResult(check, f"open failed: {type(exc).__name__}: {exception_text(exc)}")
    try:
        problem = _program(check, model, wire, (clock, points, model_queue))
    finally:
        with contextlib.suppress(Exception):
            wire.factory.mq.crash()  # type: ignore[attr-defined]  # a WireStreamQueue
    seen = tuple(dict.fromkeys(f"{during}:{point}" for during, point in points.seen))
    return StreamCheckResult(check, problem or None, seen)


def _program(
    check: StreamCheck, model: _Side, wire: _Side, run: tuple[_Clock, _Points, ReferenceMQ]
) -> str | None:
    """Every call of ``check`` on both sides: the first problem, or None."""
    clock, points, model_queue = run
    try:
        for index, call in enumerate(check.calls, 1):
            if call.stream is None and call.method in ("advance", "arm"):
                clock.now += call.args[0] if call.method == "advance" else 0
                points.armed = call.args[0] if call.method == "arm" else None
                continue
            points.during = call.method
            try:
                problem = _compare(index, call, model, wire)
            except InjectedCrash:
                return _after_crash(index, call, model, wire, model_queue)
            if problem is not None:
                return problem
        if wire.factory.mq.snapshot() != model_queue.snapshot():
            return "at the end: the queue under the streams holds other records than the model's"
    except OperationHang as hang:
        return f"hang: {hang.detail}"
    return None


def run_stream_checks(factory: Any) -> list[StreamCheckResult]:
    """Every check on the stream server behind ``factory`` (a stream factory naming its
    queue factory: a protocol server's), then a crash check per fault point it announced
    inside a ``stream_produce``."""
    results = []
    with tempfile.TemporaryDirectory(prefix="rmqsim-protocol-check-") as scratch:
        for number, check in enumerate(STREAM_CHECKS):
            results.append(_run(factory, check, Path(scratch) / str(number)))
        announced = [p.partition(":")[2] for r in results for p in r.points
                     if p.startswith("produce:")]  # fmt: skip
        for number, point in enumerate(dict.fromkeys(announced)):
            results.append(_run(factory, _crash_check(point), Path(scratch) / f"crash{number}"))
    return results


def points_of(results: Sequence[StreamCheckResult]) -> list[str]:
    """The fault points the server announced, by name."""
    return sorted({p.partition(":")[2] for r in results for p in r.points})
