"""rmqsim's end of the wire protocol (docs/PROTOCOL.md): a queue (``WireQueue``) or a
message store (``WireStore``, the storage layer) in another process.

``--impl exec:'COMMAND ARGS'`` names a protocol server. ``exec_factory`` checks it once
(``hello``), and returns a queue factory like any other: each call starts the command,
says ``hello`` and ``open``, and returns a ``WireQueue``, a ``MessageQueue`` whose
operations are requests. A crash is SIGKILL of the child's process group; a reopen starts
a new child. Our Python implementations run through the same protocol (``--crash-mode
process`` serves them with ``python -m rmqsim.conformance.wire.server IMPL``).

Fault points: every request carries ``wait_at_points``, true when the lockstep armed a
crash for this operation. The server announces each point it passes; the client feeds it
through the lockstep's hook (which learns the points, and raises ``InjectedCrash`` at the
armed one), then answers ``go_on`` when the server waits. When the hook raises, the child
is killed there, still waiting: the crash lands inside the operation.

What breaks the protocol (a line that is not JSON, a reply to another request, a value of
the wrong shape, end of output in the middle of a reply) raises ``WireProtocolError``
with the line: the child is killed, and the lockstep reports the anomaly
``protocol-error``. A child that exits raises ``ChildDiedError`` with its exit code and the
last lines of its stderr (a Go panic's first line is there). A child that does not answer
within the liveness bound is killed, and the call raises ``OperationHang`` (``hang``).
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rmqsim.conformance.bad_impl import BadImplError
from rmqsim.conformance.running.watchdog import OperationHang, bounded_elsewhere, op_timeout_s
from rmqsim.conformance.wire.child import (
    ChildProcess,
    ForkedChild,
    ServerChild,
    StartError,
    preload_forked,
)
from rmqsim.conformance.wire.codec import (
    ERROR_KINDS,
    PROTOCOL_VERSION,
    WireProtocolError,
    bodies_from_wire,
    bodies_to_wire,
    decode_consumed,
    decode_error,
    decode_line,
    decode_offsets,
    decode_produced,
    decode_state,
    encode_line,
    encode_messages,
)
from rmqsim.model.api import (
    Clock,
    ConsumerMessage,
    InvalidArgumentError,
    MessageQueue,
    MQConfig,
    MQError,
    NotServingError,
    ProducerMessage,
    State,
)
from rmqsim.model.store.api import StoreConfig

__all__ = [
    "EXEC_PREFIX",
    "HELLO_TIMEOUT_S",
    "QUEUE_FACTORY_ATTRIBUTE",
    "SERVED_LAYERS",
    "ChildDiedError",
    "Hello",
    "Session",
    "StoreOpenError",
    "WireEnd",
    "WireQueue",
    "WireStore",
    "exec_argv",
    "exec_factory",
    "forked_factory",
    "is_exec_impl",
    "server_command",
]

#: The attribute of a stream factory that names the queue factory its streams must run
#: over (a protocol server serves both: its streams cannot run over rmqsim's queue). Here,
#: not in ``wire.streams``, so that ``conformance.adapter`` (which every protocol server and
#: command imports) need not import the stream layer to read it.
QUEUE_FACTORY_ATTRIBUTE = "rmqsim_queue_factory"

EXEC_PREFIX = "exec:"
#: The lockstep's fault hook (``conformance.adapter.FaultHook``).
FaultHook = Callable[[str], None]
#: Starts one server process.
Launcher = Callable[[], ServerChild]
#: The factory of a layer whose client lives in a module of its own, by the layer its
#: server's ``hello`` names: ``make(start, impl, hello)``, registered by that module
#: (``conformance.wire.streams``: ``"stream"``).
SERVED_LAYERS: dict[str, Callable[[Launcher, str, Hello], Callable[..., Any]]] = {}
#: How long a server may take to answer ``hello`` when its command is checked (a JVM or a
#: cold Go binary starts in well under this).
HELLO_TIMEOUT_S = 60.0


class StoreOpenError(RuntimeError):
    """A store server refused to open (its error reply, with the end of its stderr)."""


class ChildDiedError(RuntimeError):
    """The server's process exited (or was gone) other than at an armed crash point."""


def is_exec_impl(impl: object) -> bool:
    return isinstance(impl, str) and impl.startswith(EXEC_PREFIX)


def exec_argv(impl: str) -> list[str]:
    """The command of ``exec:COMMAND ARGS``, split as a POSIX shell would (no shell runs)."""
    try:
        argv = shlex.split(impl[len(EXEC_PREFIX) :])
    except ValueError as exc:
        raise BadImplError(f"--impl {impl}: cannot split the command: {exc}") from None
    if not argv:
        raise BadImplError(f"--impl {impl}: no command after {EXEC_PREFIX}")
    return argv


def server_command(impl: str) -> str:
    """``exec:...`` serving the Python implementation ``impl`` (``MOD:FACTORY`` or a
    built-in name) through the reference server, with this interpreter."""
    argv = [sys.executable, "-m", "rmqsim.conformance.wire.server", impl]
    return EXEC_PREFIX + shlex.join(argv)


class Hello:
    """What a server said of itself: its layer, name and which snapshot arguments it takes."""

    def __init__(self, reply: object, where: str) -> None:
        if type(reply) is not dict:
            raise WireProtocolError(f"{where}: expected an object")
        version = reply.get("protocol")
        if version != PROTOCOL_VERSION:
            raise WireProtocolError(
                f"{where}: the server speaks protocol {version!r}; rmqsim speaks {PROTOCOL_VERSION}"
            )
        layer, name, snapshot = (
            reply.get("layer"),
            reply.get("implementation"),
            reply.get("snapshot", []),
        )
        if type(layer) is not str or type(name) is not str:
            raise WireProtocolError(f"{where}: layer and implementation must be strings")
        if type(snapshot) is not list or not set(snapshot) <= {"topics", "messages_from"}:
            raise WireProtocolError(f"{where}.snapshot: a list of 'topics', 'messages_from'")
        self.layer = layer
        self.implementation = name
        self.snapshot_arguments = tuple(snapshot)
        modes, atomic = reply.get("flush_modes", ["sync"]), reply.get("batch_atomic", False)
        if type(modes) is not list or not set(modes) <= {"sync", "async"} or not modes:
            raise WireProtocolError(f"{where}.flush_modes: a non-empty list of 'sync', 'async'")
        if type(atomic) is not bool:
            raise WireProtocolError(f"{where}.batch_atomic: true or false")
        #: The storage layer's: the flush modes it serves, whether a batch is all or nothing.
        self.flush_modes = tuple(modes)
        self.batch_atomic = atomic
        pipelining = reply.get("pipelining", False)
        if type(pipelining) is not bool:
            raise WireProtocolError(f"{where}.pipelining: true or false")
        #: Whether it reads a request sent before the reply to the one before (docs/PROTOCOL.md
        #: "Pipelining"): rmqsim then sends an operation and the snapshot after it together.
        self.pipelining = pipelining


class Session:
    """One child and the requests made of it, in order; its replies' error kinds are
    ``error_kinds`` (the layer's)."""

    error_kinds: Mapping[str, type[MQError]] = ERROR_KINDS

    def __init__(self, start: Launcher, faults: FaultHook | None, clock: Clock) -> None:
        self.faults = faults
        self.clock = clock
        self.next_id = 1
        try:
            self.child = start()
        except StartError as exc:
            raise ChildDiedError(str(exc)) from None
        #: Why the child is no longer served (``None`` while it is).
        self.dead: str | None = None
        #: A request sent ahead (``request``'s ``ahead``) whose reply is not read yet: its
        #: fields (without the id) and its id.
        self._ahead: tuple[dict[str, Any], int] | None = None
        #: Requests sent ahead whose reply answered the next request, and those dropped.
        self.ahead_used = 0
        self.ahead_dropped = 0

    def request(self, op: str, arguments: dict[str, Any], *, bound_s: float,
                ahead: tuple[str, dict[str, Any]] | None = None) -> Any:
        """Send one request and return its ``ok`` value (or raise its error).

        ``ahead`` (a server whose ``hello`` said ``pipelining``): a request ``(op,
        arguments)`` sent right behind this one, in the same write, when this one does not
        wait at points. Its reply is read by the next request: when that request is the
        same (op, arguments, ``now``, not waiting), it is answered by that reply, else the
        reply is read, checked and dropped, and the request is sent."""
        if self.dead is not None:
            raise ChildDiedError(self.dead)
        wait = self._armed()
        fields = {"op": op, "now": self.clock(), "wait_at_points": wait, **arguments}
        pending, self._ahead = self._ahead, None
        if pending is not None:
            pending_fields, pending_id = pending
            pending_op = str(pending_fields["op"])
            value, error = self._guarded(
                pending_op, lambda: self._await_reply(pending_id, pending_op, False, bound_s)
            )
            if pending_fields == fields:
                self.ahead_used += 1
                if error is not None:
                    raise error
                return value
            self.ahead_dropped += 1
        request_id = self._take_id()
        lines = encode_line({"id": request_id, **fields})
        if ahead is not None and not wait:
            ahead_fields = {"op": ahead[0], "now": fields["now"], "wait_at_points": False,
                            **ahead[1]}  # fmt: skip
            ahead_id = self._take_id()
            lines += encode_line({"id": ahead_id, **ahead_fields})
            self._ahead = (ahead_fields, ahead_id)
        value, error = self._guarded(op, lambda: self._exchange(lines, request_id, op, wait,
                                                                bound_s))  # fmt: skip
        if error is not None:
            raise error
        return value

    def _take_id(self) -> int:
        request_id = self.next_id
        self.next_id += 1
        return request_id

    def _guarded(
        self, op: str, exchange: Callable[[], tuple[Any, Exception | None]]
    ) -> tuple[Any, Exception | None]:
        try:
            return exchange()
        except BaseException:  # a crash, a hang, a broken line: the child is done
            self._ahead = None
            if self.dead is None:
                self.dead = f"was killed during {op}"
            self.child.kill()
            raise

    def _exchange(
        self, lines: bytes, request_id: int, op: str, wait: bool, bound_s: float
    ) -> tuple[Any, Exception | None]:
        try:
            self.child.send(lines)
        except OSError:
            self._died(f"was gone before {op}")
        return self._await_reply(request_id, op, wait, bound_s)

    def _armed(self) -> bool:
        if self.faults is None:
            return False
        armed = getattr(self.faults, "armed", True)  # a hook that cannot say: always wait
        return armed is not None and armed is not False

    def _send(self, line: dict[str, Any], op: str) -> None:
        try:
            self.child.send(encode_line(line))
        except OSError:
            self._died(f"was gone before {op}")

    def _await_reply(
        self, request_id: int, op: str, wait: bool, bound_s: float
    ) -> tuple[Any, Exception | None]:
        where = f"the reply to request {request_id} ({op})"
        while True:
            raw = self.child.read_line(bound_s)
            if raw is None:
                self.dead = f"did not answer {op} within {bound_s:g} s and was killed"
                raise OperationHang(op, op_timeout_s() or bound_s)
            if not raw:
                partial = self.child.partial
                if partial:
                    raise WireProtocolError(
                        f"{where}: output ended inside a line: {partial[:200]!r}"
                    )
                self._died(f"exited during {op}")
            if not raw.endswith(b"\n"):
                raise WireProtocolError(f"{where}: a line over the size limit")
            message = decode_line(raw, where)
            if message.get("id") != request_id:
                raise WireProtocolError(
                    f"{where}: got a line for id {message.get('id')!r}: {raw[:200]!r}"
                )
            if "point" in message:
                self._at_point(message, request_id, wait, raw)
                continue
            return self._result(message, where, raw)

    def _at_point(self, message: dict[str, Any], request_id: int, wait: bool, raw: bytes) -> None:
        point = message["point"]
        if type(point) is not str or set(message) != {"id", "point"}:
            raise WireProtocolError(f"a fault-point line must be {{id, point}}: {raw[:200]!r}")
        if self.faults is not None:
            self.faults(point)  # raises InjectedCrash at the armed call: the child is killed
        if wait:
            self._send({"go_on": request_id}, point)

    def _result(
        self, message: dict[str, Any], where: str, raw: bytes
    ) -> tuple[Any, Exception | None]:
        if set(message) == {"id", "ok"}:
            return message["ok"], None
        if set(message) == {"id", "error"}:
            return None, decode_error(message["error"], f"{where}.error", self.error_kinds)
        raise WireProtocolError(f"{where}: expected {{id, ok}} or {{id, error}}: {raw[:200]!r}")

    def _died(self, what: str) -> None:
        code = self.child.wait_exit(2.0)
        self.child.kill()
        stderr = self.child.stderr_tail(5)
        self.dead = f"the server (pid {self.child.pid}) {what} (exit code {code})"
        if stderr:
            self.dead += "; its stderr ended with: " + stderr.replace("\n", " | ")[-600:]
        raise ChildDiedError(self.dead)


def _bound_s() -> float:
    """The client's own wait: twice the liveness bound, so that the lockstep's bound on the
    call (which can tell slow from stuck) speaks first; 0 is no bound."""
    return 2 * op_timeout_s()


class WireEnd:
    """What a queue and a store served by a protocol server share: the session with the
    child, its process, SIGKILL as ``crash``, and ``close`` (the reply, then the child's
    exit). ``noun`` names what the child serves (``queue``, ``store``)."""

    noun = "implementation"
    #: Whether the server's ``hello`` said it pipelines (a request may be sent ahead).
    serves_ahead = False

    def __init__(self, start: Launcher, faults: FaultHook | None, clock: Clock) -> None:
        # A process start is not the implementation's operation: it has its own bound.
        with bounded_elsewhere(HELLO_TIMEOUT_S):
            self._session = Session(start, faults, clock)
        self._closed = False

    def _hello(self, layer: str) -> Any:
        """The handshake, bounded by ``HELLO_TIMEOUT_S`` and not by the liveness bound of
        the open it is part of: a new interpreter's start and imports are not the
        implementation's work (and take seconds on a loaded machine)."""
        with bounded_elsewhere(HELLO_TIMEOUT_S):
            return self._session.request(
                "hello", {"protocol": PROTOCOL_VERSION, "layer": layer}, bound_s=HELLO_TIMEOUT_S)

    def _call(self, op: str, ahead: tuple[str, dict[str, Any]] | None = None,
              **arguments: Any) -> Any:
        if self._closed:
            # The child closed and exited; this proxy is that closed queue or store and
            # answers as a closed one does (the lockstep probes it).
            raise NotServingError(f"the {self.noun} is closed")
        return self._session.request(op, arguments, bound_s=_bound_s(), ahead=ahead)

    def request(
        self, op: str, ahead: tuple[str, dict[str, Any]] | None = None, **arguments: Any
    ) -> Any:
        """One request (``op`` of a layer served beside this one: the stream layer's,
        ``conformance.wire.streams``), as the operations here make theirs; ``ahead``: a
        request sent right behind it when the server pipelines (``Session.request``)."""
        if ahead is not None and not self.serves_ahead:
            ahead = None
        return self._call(op, ahead=ahead, **arguments)

    @property
    def process(self) -> ServerChild:
        """The server's process (its ``returncode`` is ``-9`` after a crash)."""
        return self._session.child

    @property
    def pipelined(self) -> tuple[int, int]:
        """Requests sent ahead (pipelining) whose reply answered the next request, and
        those whose reply was dropped."""
        return self._session.ahead_used, self._session.ahead_dropped

    def crash(self) -> None:
        """SIGKILL the server's process group: nothing more is written."""
        if self._session.dead is None:
            self._session.dead = "was crashed"
        self._session.child.kill()

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._session.dead is None:
                _none(self._call("close"), "close")
                self._session.dead = f"closed its {self.noun}"
                self._session.child.finish()
        finally:
            self._closed = True
            self._session.child.kill()


class WireQueue(WireEnd):
    """A ``MessageQueue`` served by a protocol server in a child process, which ``start``
    starts."""

    noun = "queue"
    #: The layer its ``hello`` asks for, and that layer's error kinds.
    layer = "queue"
    error_kinds: Mapping[str, type[MQError]] = ERROR_KINDS

    def __init__(
        self,
        start: Launcher,
        *,
        path: Path,
        config: MQConfig,
        clock: Clock,
        faults: FaultHook | None,
    ) -> None:
        super().__init__(start, faults, clock)
        self._session.error_kinds = self.error_kinds
        try:
            hello = Hello(self._hello(self.layer), "hello")
            self._call("open", path=str(path), config=_config_json(config))
        except BaseException:
            self.crash()
            raise
        #: Topic -> the ``messages_from`` of the lockstep's next one-topic snapshot of it
        #: (learnt from its last one and the ids produced since): what is sent ahead.
        self._next_from: dict[str, int] = {}
        self._produced: tuple[str, int] | None = None
        self._pipelining = hello.pipelining and "messages_from" in hello.snapshot_arguments
        self.serves_ahead = hello.pipelining
        if "topics" not in hello.snapshot_arguments:
            self.snapshot = self._full_snapshot  # type: ignore[method-assign,assignment]  # narrower on purpose: the lockstep reads the signature
        elif "messages_from" not in hello.snapshot_arguments:
            self.snapshot = self._topics_snapshot  # type: ignore[method-assign,assignment]  # as above

    def _named(self, op: str, **names: Any) -> Any:
        """A request naming topics or groups. A name without a UTF-8 form (a lone
        surrogate) cannot cross a UTF-8 wire: SPEC makes it ``InvalidArgument``, and the
        queue is answered so on the server's behalf (docs/PROTOCOL.md "Names")."""
        if self._closed:
            raise NotServingError("the queue is closed")
        for what, name in names.items():
            if isinstance(name, str) and not _has_utf8(name):
                raise InvalidArgumentError(f"{what} name has no UTF-8 form")
        return self._call(op, **names)

    def _changing(self, op: str, topic: str, **names: Any) -> Any:
        """A state-changing request on ``topic``, with the snapshot the lockstep asks
        after it sent ahead when it can be foreseen (``Session.request``): the one-topic
        snapshot from the ``messages_from`` learnt for ``topic``. Only an identical
        request is answered by it, so a wrong guess costs the server one snapshot."""
        first = self._next_from.get(topic) if self._pipelining else None
        if first is None or not _has_utf8(topic):
            return self._named(op, topic=topic, **names)
        ahead = ("snapshot", {"topics": [topic], "messages_from": {topic: first}})
        dropped = self._session.ahead_dropped
        try:
            return self._call(op, ahead=ahead, topic=topic, **names)
        finally:
            if self._session.ahead_dropped > dropped:  # the guess before this one was unused
                self._next_from.clear()

    # -- the queue

    def snapshot(
        self, topics: list[str] | None = None, messages_from: dict[str, int] | None = None
    ) -> State:
        if topics is not None:
            topics = [t for t in topics if _has_utf8(t)]  # the others are absent anyway
        self._learn(topics, messages_from)
        raw = self._call("snapshot", topics=topics, messages_from=messages_from)
        return decode_state(raw, "the reply to snapshot: ok")

    def _learn(self, topics: list[str] | None, messages_from: dict[str, int] | None) -> None:
        """The lockstep asks a topic's messages from its model's last id + 1 before the
        operation it checks; after a produce, the next check asks from the last id
        produced + 1 (those ids are the model's, or the run has already diverged)."""
        produced, self._produced = self._produced, None
        if topics is None or len(topics) != 1 or messages_from is None:
            return
        topic = topics[0]
        first = messages_from.get(topic)
        if type(first) is int and set(messages_from) == {topic}:
            self._next_from[topic] = first
            if produced is not None and produced[0] == topic:
                self._next_from[topic] = max(first, produced[1] + 1)

    def _topics_snapshot(self, topics: list[str] | None = None) -> State:
        return WireQueue.snapshot(self, topics)

    def _full_snapshot(self) -> State:
        return WireQueue.snapshot(self)

    def create_topic(self, topic: str) -> None:
        self._next_from.pop(topic, None)  # a new topic's ids: the model's to say
        _none(self._named("create_topic", topic=topic), "create_topic")

    def destroy_topic(self, topic: str) -> None:
        self._next_from.pop(topic, None)
        _none(self._named("destroy_topic", topic=topic), "destroy_topic")

    def create_consumer_group(self, topic: str, group: str) -> None:
        _none(
            self._changing("create_consumer_group", topic, group=group), "create_consumer_group"
        )

    def destroy_consumer_group(self, topic: str, group: str) -> None:
        reply = self._changing("destroy_consumer_group", topic, group=group)
        _none(reply, "destroy_consumer_group")

    def exist_consumer_group(self, topic: str, group: str) -> bool:
        reply = self._named("exist_consumer_group", topic=topic, group=group)
        if type(reply) is not bool:
            raise WireProtocolError(
                f"the reply to exist_consumer_group: ok: expected a bool, got {reply!r}"
            )
        return reply

    def produce(self, topic: str, messages: Sequence[ProducerMessage]) -> list[int]:
        reply = self._changing("produce", topic, messages=encode_messages(messages))
        ids = decode_produced(reply, "the reply to produce: ok")
        self._produced = (topic, max(ids)) if ids else None
        return ids

    def consume(self, topic: str, group: str, n: int) -> list[ConsumerMessage]:
        reply = self._changing("consume", topic, group=group, n=n)
        return decode_consumed(reply, "the reply to consume: ok")

    def seek(self, topic: str, group: str, msg_id: int) -> None:
        _none(self._changing("seek", topic, group=group, msg_id=msg_id), "seek")

    def seek_to_latest(self, topic: str, group: str) -> None:
        _none(self._changing("seek_to_latest", topic, group=group), "seek_to_latest")

    def get_latest_msg(self, topic: str) -> int:
        reply = self._named("get_latest_msg", topic=topic)
        if type(reply) is not int:
            raise WireProtocolError(
                f"the reply to get_latest_msg: ok: expected an integer, got {reply!r}"
            )
        return reply

    def run_retention(self) -> None:
        _none(self._call("run_retention"), "run_retention")


class WireStore(WireEnd):
    """A ``model.store.api.MessageStore`` served by a protocol server whose ``hello`` said
    ``"layer": "store"`` (docs/PROTOCOL.md "The storage layer")."""

    noun = "store"

    def __init__(self, start: Launcher, *, path: Path, store_config: StoreConfig, clock: Clock,
                 faults: FaultHook | None) -> None:
        super().__init__(start, faults, clock)
        config = {"flush": store_config.flush, "segment_bytes": store_config.segment_bytes,
                  "max_body_bytes": store_config.max_body_bytes}
        try:
            self._hello("store")
            self._call("open", path=str(path), config=config)
        except Exception as exc:  # a refusal to open: with the store's own reason
            self.crash()
            self._session.child.wait_exit(2.0)
            tail = self._session.child.stderr_tail(30)
            if not tail or isinstance(exc, WireProtocolError | ChildDiedError):
                raise
            raise StoreOpenError(f"{type(exc).__name__}: {exc}; its stderr ended with: "
                                 + tail.replace("\n", " | ")[-1500:]) from None
        except BaseException:
            self.crash()
            raise

    def put(self, topic: str, queue: int, bodies: Sequence[bytes]) -> int:
        if not _has_utf8(topic):
            raise InvalidArgumentError("topic name has no UTF-8 form")
        reply = self._call("put", topic=topic, queue=queue, bodies=bodies_to_wire(bodies))
        if type(reply) is not int:
            raise WireProtocolError(f"the reply to put: ok: expected an integer, got {reply!r:.80}")
        return reply

    def get(self, topic: str, queue: int, offset: int, max_count: int) -> list[bytes]:
        if not _has_utf8(topic):
            raise InvalidArgumentError("topic name has no UTF-8 form")
        reply = self._call("get", topic=topic, queue=queue, offset=offset, max_count=max_count)
        return bodies_from_wire(reply, "the reply to get: ok")

    def offsets(self, topic: str, queue: int) -> tuple[int, int]:
        if not _has_utf8(topic):
            raise InvalidArgumentError("topic name has no UTF-8 form")
        return decode_offsets(self._call("offsets", topic=topic, queue=queue),
                              "the reply to offsets: ok")

    def flush(self) -> None:
        _none(self._call("flush"), "flush")

    def retain(self, cutoff_s: int) -> None:
        _none(self._call("retain", cutoff=cutoff_s), "retain")


def _none(reply: object, op: str) -> None:
    if reply is not None:
        raise WireProtocolError(f"the reply to {op}: ok: expected null, got {reply!r}")


def _has_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _config_json(config: MQConfig) -> dict[str, int]:
    return {
        "page_size_bytes": config.page_size_bytes,
        "retention_time_s": config.retention_time_s,
        "retention_size_bytes": config.retention_size_bytes,
    }


def check_server(start: Launcher, impl: str) -> Hello:
    """Start the server once and ask ``hello``: a command that cannot start, or does not
    answer like a protocol server, is bad input (``BadImplError``, one line)."""
    try:
        session = Session(start, None, lambda: 0)
    except ChildDiedError as exc:
        raise BadImplError(f"--impl {impl}: {exc}") from None
    try:
        reply = session.request(
            "hello", {"protocol": PROTOCOL_VERSION, "layer": "queue"}, bound_s=HELLO_TIMEOUT_S
        )
        return Hello(reply, "hello")
    except OperationHang:
        raise BadImplError(
            f"--impl {impl}: the server did not answer hello within {HELLO_TIMEOUT_S:g} s"
            + _stderr_note(session)
        ) from None
    except (ChildDiedError, WireProtocolError, Exception) as exc:
        raise BadImplError(f"--impl {impl}: {exc}" + _stderr_note(session)) from None
    finally:
        session.child.kill()


def _stderr_note(session: Session) -> str:
    tail = session.child.stderr_tail(3)
    return f" (its stderr: {tail.replace(chr(10), ' | ')[-300:]})" if tail else ""


#: ``exec:`` commands that answered ``hello`` in this process: (argv, folder, environment)
#: -> what they said. Every open says ``hello`` again and is held to it; this only spares
#: a run (``run_seed`` loads its ``--impl`` once per seed) a process started to be asked.
_CHECKED: dict[tuple[tuple[str, ...], str, frozenset[tuple[str, str]]], Hello] = {}


def exec_factory(impl: str) -> Callable[..., Any]:
    """The factory of ``exec:COMMAND`` (a queue's, or a message store's), once the command
    answered ``hello`` (once per process for the same command, folder and environment)."""
    argv = exec_argv(impl)
    start = functools.partial(ChildProcess, argv)
    key = (tuple(argv), os.getcwd(), frozenset(os.environ.items()))
    hello = _CHECKED.get(key)
    if hello is None:
        hello = _CHECKED[key] = check_server(start, impl)
    return _wire_factory(start, impl, hello)


def forked_factory(
    serve: Callable[[Any, Any, str], None], impl: str, modules: Sequence[str] = ()
) -> Callable[..., Any]:
    """The queue factory of the Python implementation ``impl`` served by ``serve`` (the
    reference server's ``serve_forked``) in a forked child (``--crash-mode process``);
    ``modules``: what to import before forking (the implementation's)."""
    preload_forked(modules)
    start = functools.partial(ForkedChild, serve, impl)
    return _wire_factory(start, impl, check_server(start, impl))


def _wire_factory(start: Launcher, impl: str, hello: Hello) -> Callable[..., Any]:
    """The factory of a checked server (``hello``: what it said): a queue factory, or a
    message store factory when its ``hello`` said ``"layer": "store"``."""
    if hello.layer == "store":
        def store_factory(*, path: Path, store_config: StoreConfig, clock: Clock,
                          faults: FaultHook | None) -> WireStore:
            return WireStore(start, path=path, store_config=store_config, clock=clock,
                             faults=faults)

        return _named_factory(store_factory, impl, hello)
    if hello.layer in SERVED_LAYERS:
        return _named_factory(SERVED_LAYERS[hello.layer](start, impl, hello), impl, hello)
    if hello.layer != "queue":
        raise BadImplError(
            f"--impl {impl}: the server serves the {hello.layer!r} layer; over the wire rmqsim "
            f"checks the {', '.join(['queue', 'store', *SERVED_LAYERS])} layers "
            "(docs/PROTOCOL.md)"
        )

    def factory(
        *, path: Path, config: MQConfig, clock: Clock, faults: FaultHook | None
    ) -> MessageQueue:
        return WireQueue(start, path=path, config=config, clock=clock, faults=faults)

    return _named_factory(factory, impl, hello)


def _named_factory(factory: Callable[..., Any], impl: str, hello: Hello) -> Callable[..., Any]:
    factory.__qualname__ = impl
    factory.__module__ = "exec"
    factory.rmqsim_hello = hello  # type: ignore[attr-defined]  # what the server said
    return factory
