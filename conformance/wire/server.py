"""The reference protocol server: any Python queue (or message store) factory, served
over stdin/stdout.

    python -m rmqsim.conformance.wire.server IMPL

``IMPL`` is what ``--impl`` takes (``rocksmq``, ``commitlog``, ``commitlog-async``,
``MODULE:FACTORY``). This is the wire protocol's executable example (docs/PROTOCOL.md)
and how ``--crash-mode process`` runs our implementations: the whole gate passes through
it. One process serves one open; rmqsim kills it to crash it.

Anything the implementation prints goes to stderr: the protocol's stdout is a private
copy of file descriptor 1, taken before the implementation is imported.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from rmqsim.conformance.wire.child import MAX_LINE_BYTES, enter_forked_server
from rmqsim.conformance.wire.codec import (
    ERROR_KINDS,
    PROTOCOL_VERSION,
    QUEUE_OPS,
    STORE_OPS,
    WireProtocolError,
    bodies_from_wire,
    bodies_to_wire,
    decode_line,
    encode_consumed,
    encode_error,
    encode_line,
    encode_state,
    messages_from_wire,
)
from rmqsim.model.api import InvalidArgumentError, MQConfig, MQError, State
from rmqsim.model.store.api import StoreConfig

__all__ = ["Server", "main", "private_stdout", "serve_forked"]


class _Stop(Exception):
    """The parent is gone (end of input): stop serving."""


class Server:
    """Serves one queue: ``hello``, ``open``, the operations, ``close``."""

    #: The longest request line read, without its ``\n``: the client's bound on a reply
    #: line (``child.MAX_LINE_BYTES``, docs/PROTOCOL.md "Lines"), which holds rmqsim's
    #: largest requests too (a batch of base64 payloads is far smaller than a snapshot).
    #: A longer line is not read whole: it breaks the protocol as a line that is not JSON.
    max_line_bytes = MAX_LINE_BYTES

    def __init__(self, impl: str, requests: IO[bytes], replies: IO[bytes]) -> None:
        self.impl = impl
        self.requests = requests
        self.replies = replies
        self.now_s = 0
        #: The id of the request being served (0 before the first).
        self.request_id = 0
        self.wait_at_points = False
        self.queue: Any = None
        self._layer: str | None = None
        #: The optional snapshot arguments the open queue's own ``snapshot`` takes.
        self._snapshot_takes: frozenset[str] = frozenset()

    @property
    def layer(self) -> str:
        """``queue``, ``store`` for a message store factory or ``stream`` for a stream
        factory (``adapter.load_impl``)."""
        if self._layer is None:
            from rmqsim.conformance.adapter import load_impl

            layer = load_impl(self.impl).layer
            self._layer = layer if layer in ("store", "stream") else "queue"
        return self._layer

    # -- lines

    def _write(self, obj: dict[str, Any]) -> None:
        self.replies.write(encode_line(obj))
        self.replies.flush()

    def _read(self) -> dict[str, Any]:
        line = self.requests.readline(self.max_line_bytes + 1)
        if not line:
            raise _Stop
        if len(line) > self.max_line_bytes and not line.endswith(b"\n"):
            raise WireProtocolError(f"request: a line over {self.max_line_bytes} bytes")
        return decode_line(line, "request")

    # -- the implementation's hooks

    def clock(self) -> int:
        return self.now_s

    def faults(self, point: str) -> None:
        """Announce ``point``; when told to wait, wait for ``go_on`` (or be killed here).
        A point the client need not answer goes out with the reply (one write, one wake-up
        of rmqsim per request): rmqsim reads it before the reply either way."""
        if not self.wait_at_points:
            self.replies.write(encode_line({"id": self.request_id, "point": point}))
            return
        self._write({"id": self.request_id, "point": point})
        answer = self._read()
        if answer != {"go_on": self.request_id}:
            raise WireProtocolError(f"expected go_on for {self.request_id!r}, got {answer!r}")

    # -- requests

    def serve(self) -> int:
        """Answer requests until ``close`` (exit 0) or end of input (exit 0)."""
        try:
            while True:
                request = self._read()
                op = request.get("op")
                self._begin(request)
                try:
                    value = self._dispatch(op, request)
                except WireProtocolError:
                    raise
                except Exception as exc:  # the queue's error: its kind, or Unexpected
                    error = encode_error(exc, _layer_table(self.layer)[2])
                    self._write({"id": self.request_id, "error": error})
                else:
                    self._write({"id": self.request_id, "ok": value})
                if op == "close":
                    return 0
        except _Stop:
            return 0

    def _begin(self, request: dict[str, Any]) -> None:
        """Take ``request``'s id, clock and ``wait_at_points``. Its id must be the next
        integer (1, 2, ... in this process) and its ``now``, when given, integer seconds
        (docs/PROTOCOL.md "Lines"): else the request is broken, as a line that is not JSON."""
        request_id, now = request.get("id"), request.get("now")
        if type(request_id) is not int or request_id != self.request_id + 1:
            raise WireProtocolError(
                f"request: id must be {self.request_id + 1}, the next integer; got "
                f"{request_id!r:.40} (op {request.get('op')!r:.40})"
            )
        self.request_id = request_id
        if "now" in request:
            if type(now) is not int:
                raise WireProtocolError(
                    f"request {request_id}: now must be integer seconds, got {now!r:.40}"
                )
            self.now_s = now
        self.wait_at_points = request.get("wait_at_points") is True

    def _dispatch(self, op: object, request: dict[str, Any]) -> Any:
        if op == "hello":
            version = request.get("protocol", PROTOCOL_VERSION)  # none said: version 1
            if type(version) is not int or version != PROTOCOL_VERSION:
                raise InvalidArgumentError(
                    f"hello: protocol {version!r:.40} is not spoken here: this server speaks "
                    f"protocol {PROTOCOL_VERSION} only"
                )
            hello = {"protocol": PROTOCOL_VERSION, "layer": self.layer,
                     "implementation": f"rmqsim reference server: {self.impl}"}
            if self.layer == "store":
                from rmqsim.conformance.adapter import load_impl

                atomic = getattr(load_impl(self.impl).factory, "rmqsim_batch_atomic", False)
                return {**hello, "flush_modes": ["sync", "async"], "batch_atomic": atomic is True}
            return {**hello, "snapshot": ["topics", "messages_from"], "pipelining": True}
        if op == "open":
            return self._open(request)
        ops, calls, _ = _layer_table(self.layer)
        if op not in ops:
            raise WireProtocolError(f"unknown op {op!r}")
        if self.queue is None:
            raise WireProtocolError(f"{op} before open")
        arguments = [request.get(name) for name in ops[str(op)]]
        return calls[str(op)](self, self.queue, *arguments)

    def _open(self, request: dict[str, Any]) -> None:
        from rmqsim.conformance.adapter import load_impl

        path, config = request.get("path"), request.get("config")
        if type(path) is not str or type(config) is not dict:
            raise WireProtocolError("open needs path (a string) and config (an object)")
        factory = load_impl(self.impl).factory
        if self.layer == "store":
            self.queue = factory(path=Path(path), store_config=StoreConfig(**config),
                                 clock=self.clock, faults=self.faults)
            return
        if self.layer == "stream":  # the streams over the queue they name, else ours
            from rmqsim.conformance.wire.stream_server import open_stream_host

            self.queue = open_stream_host(factory, Path(path), MQConfig(**config), self.clock,
                                          self.faults)  # fmt: skip
            return
        self.queue = factory(
            path=Path(path), config=MQConfig(**config), clock=self.clock, faults=self.faults
        )
        try:  # read once per open, not per snapshot (a signature costs ~0.2 ms)
            self._snapshot_takes = frozenset(inspect.signature(self.queue.snapshot).parameters)
        except (TypeError, ValueError, AttributeError):
            self._snapshot_takes = frozenset()

    def snapshot(self, queue: Any, topics: object, messages_from: object) -> Any:
        """The state as asked. ``hello`` promised both optional arguments: what the queue's
        own ``snapshot`` does not take, the server does on its whole state."""
        if topics is not None and not (
            type(topics) is list and all(type(t) is str for t in topics)
        ):
            raise WireProtocolError(f"snapshot: topics must be null or a list of names: {topics!r}")
        if messages_from is not None and not (
            type(messages_from) is dict and all(type(i) is int for i in messages_from.values())
        ):
            raise WireProtocolError("snapshot: messages_from must be null or {topic: id}")
        kwargs: dict[str, Any] = {}
        parameters = self._snapshot_takes
        if topics is not None and "topics" in parameters:
            kwargs["topics"] = topics
            if messages_from is not None and "messages_from" in parameters:
                kwargs["messages_from"] = messages_from
        state = queue.snapshot(**kwargs)
        if topics is not None and "topics" not in kwargs:
            state = _only(state, set(topics), {})
        if messages_from is not None and "messages_from" not in kwargs:
            state = _only(state, set(state.topics), messages_from)
        return encode_state(state)


def _only(state: State, topics: set[str], messages_from: dict[str, int]) -> State:
    """``state`` with only ``topics`` (and their groups), and a topic's messages only from
    its ``messages_from`` id on."""
    kept = {
        name: dataclasses.replace(
            topic,
            messages=tuple(m for m in topic.messages if m.msg_id >= messages_from.get(name, 0)),
        )
        for name, topic in state.topics.items()
        if name in topics
    }
    groups = {key: position for key, position in state.groups.items() if key[0] in topics}
    return State.build(kept, groups)


_CALLS: dict[str, Callable[..., Any]] = {
    "create_topic": lambda s, q, topic: q.create_topic(topic),
    "destroy_topic": lambda s, q, topic: q.destroy_topic(topic),
    "create_consumer_group": lambda s, q, t, g: q.create_consumer_group(t, g),
    "destroy_consumer_group": lambda s, q, t, g: q.destroy_consumer_group(t, g),
    "exist_consumer_group": lambda s, q, t, g: q.exist_consumer_group(t, g),
    "produce": lambda s, q, t, m: list(q.produce(t, messages_from_wire(m, "messages"))),
    "consume": lambda s, q, t, g, n: encode_consumed(q.consume(t, g, n)),
    "seek": lambda s, q, t, g, i: q.seek(t, g, i),
    "seek_to_latest": lambda s, q, t, g: q.seek_to_latest(t, g),
    "get_latest_msg": lambda s, q, t: q.get_latest_msg(t),
    "run_retention": lambda s, q: q.run_retention(),
    "snapshot": lambda s, q, topics, messages_from: s.snapshot(q, topics, messages_from),
    "close": lambda s, q: q.close(),
}


_STORE_CALLS: dict[str, Callable[..., Any]] = {
    "put": lambda s, q, t, n, b: q.put(t, n, bodies_from_wire(b, "bodies")),
    "get": lambda s, q, t, n, offset, count: bodies_to_wire(q.get(t, n, offset, count)),
    "offsets": lambda s, q, t, n: list(q.offsets(t, n)),
    "flush": lambda s, q: q.flush(),
    "retain": lambda s, q, cutoff: q.retain(cutoff),
    "close": lambda s, q: q.close(),
}


_LayerTable = tuple[
    dict[str, tuple[str, ...]], dict[str, Callable[..., Any]], Mapping[str, type[MQError]]
]
#: Each layer's operations, their calls and its error kinds (the stream layer's added when
#: a stream server first needs them: a queue server never imports the stream layer).
_LAYERS: dict[str, _LayerTable] = {
    "queue": (QUEUE_OPS, _CALLS, ERROR_KINDS),
    "store": (STORE_OPS, _STORE_CALLS, ERROR_KINDS),
}


def _layer_table(layer: str) -> _LayerTable:
    """``layer``'s operations, calls and error kinds."""
    if layer == "stream" and layer not in _LAYERS:
        from rmqsim.conformance.wire.stream_codec import STREAM_ERROR_KINDS, STREAM_OPS
        from rmqsim.conformance.wire.stream_server import STREAM_CALLS

        ops, calls = {**QUEUE_OPS, **STREAM_OPS}, {**_CALLS, **STREAM_CALLS}
        _LAYERS[layer] = (ops, calls, STREAM_ERROR_KINDS)
    return _LAYERS[layer]


def serve_forked(requests: Any, replies: Any, impl: str) -> None:
    """A forked child's body (``conformance.wire.child.ForkedChild``): a process group of
    its own (``enter_forked_server``), then the reference server on the two pipe
    connections."""
    enter_forked_server()
    reader = os.fdopen(os.dup(requests.fileno()), "rb")
    writer = os.fdopen(os.dup(replies.fileno()), "wb")
    requests.close()
    replies.close()
    Server(impl, reader, writer).serve()


def private_stdout() -> IO[bytes]:
    """The protocol's stdout: a copy of fd 1; fd 1 itself then points at stderr, so that
    a ``print`` anywhere in the implementation cannot break a line of the protocol."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rmqsim.conformance.wire.server IMPL", file=sys.stderr)
        return 2
    from rmqsim.conformance.bad_impl import BadImplError

    server = Server(args[0], sys.stdin.buffer, private_stdout())
    try:
        server.layer  # noqa: B018  (an IMPL that cannot be served is one line, not a traceback)
    except BadImplError as exc:
        print(f"rmqsim wire server: {exc}", file=sys.stderr)
        return 2
    try:
        return server.serve()
    except WireProtocolError as exc:
        print(f"rmqsim wire server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
