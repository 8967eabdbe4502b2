"""The reference server (``python -m rmqsim.conformance.wire.server IMPL``) on bad input:
a request line that breaks docs/PROTOCOL.md "Lines" (nested too deeply to parse, longer
than the line bound, not UTF-8, an id that is not the next integer, a ``now`` that is not
integer seconds) is a broken request, handled as a line that is not JSON is: no reply,
exit status 2 and the reason in one line on stderr, no traceback. A ``hello`` asking for a
version the server does not speak gets an error reply naming the version it speaks
("Versions")."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import Any

import pytest

from rmqsim.conformance.wire.codec import WireProtocolError
from rmqsim.conformance.wire.server import Server

HELLO = {"op": "hello", "now": 0, "wait_at_points": False, "protocol": 1, "layer": "queue"}


def _line(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode() + b"\n"


def _hello(request_id: object = 1, **fields: Any) -> bytes:
    return _line({"id": request_id, **HELLO, **fields})


def _serve(lines: bytes, *, max_line_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    """The reference server for ``rocksmq`` as a process, given ``lines`` on stdin (with
    ``max_line_bytes``: its line bound set so before it starts)."""
    if max_line_bytes is None:
        argv = ["-m", "rmqsim.conformance.wire.server", "rocksmq"]
    else:
        argv = ["-c", "import sys\nfrom rmqsim.conformance.wire import server\n"
                      f"server.Server.max_line_bytes = {max_line_bytes}\n"
                      "sys.exit(server.main(['rocksmq']))\n"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, *argv], input=lines, capture_output=True, timeout=120, check=False
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode("utf-8", "replace")
    )


def _replies(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def _broken(done: subprocess.CompletedProcess[str], says: str, replies: int = 0) -> None:
    """The server stopped at a broken request: exit 2, its reason in one line on stderr,
    no traceback, and only the ``replies`` replies to the requests before it on stdout."""
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(done.stderr.splitlines()) == 1, done.stderr[-2000:]
    assert done.stderr.startswith("rmqsim wire server: request"), done.stderr[:300]
    assert says in done.stderr, done.stderr[:300]
    assert len(_replies(done)) == replies, done.stdout


def test_a_line_that_is_not_json_is_a_broken_request() -> None:
    """What every case below is held to: today's answer to a line that is not JSON."""
    _broken(_serve(b"this is not JSON\n"), "request: not a JSON line (")


def test_a_line_nested_too_deeply_to_parse_is_a_line_that_is_not_json() -> None:
    """100,000 ``[``: json's parser runs out of recursion. The server says the line is
    not JSON, as for any other such line, instead of dying with a ``RecursionError``."""
    _broken(_serve(b"[" * 100_000 + b"\n"), "request: not a JSON line (maximum recursion depth")
    done = _serve(_hello() + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    _broken(done, "request: not a JSON line", replies=1)


def test_a_line_longer_than_the_bound_is_refused_without_being_read_whole() -> None:
    """A request line longer than ``Server.max_line_bytes`` (without its ``\\n``) is
    refused after reading at most the bound and one byte, even when it is valid JSON; a
    line of exactly the bound is served."""
    hello = _hello()
    padded = hello[:-2] + b" " * 10_000 + b"}\n"  # a valid request, 10 KB long
    requests = io.BytesIO(padded)
    server = Server("rocksmq", requests, io.BytesIO())
    server.max_line_bytes = 100
    with pytest.raises(WireProtocolError, match="request: a line over 100 bytes"):
        server.serve()
    assert requests.tell() <= 101
    exact = hello[:-2] + b" " * (100 - len(hello) + 1) + b"}\n"
    assert len(exact) == 101
    replies = io.BytesIO()
    server = Server("rocksmq", io.BytesIO(exact), replies)
    server.max_line_bytes = 100
    assert server.serve() == 0
    assert json.loads(replies.getvalue())["ok"]["protocol"] == 1
    _broken(_serve(padded, max_line_bytes=100), "request: a line over 100 bytes")


def test_the_line_bound_is_the_clients() -> None:
    """The server reads what rmqsim's client would read from it (docs/PROTOCOL.md
    "Lines": 512 MiB)."""
    from rmqsim.conformance.wire.child import MAX_LINE_BYTES

    assert Server.max_line_bytes == MAX_LINE_BYTES == 512 * 1024 * 1024


def test_a_line_that_is_not_utf8_is_refused_as_not_utf8() -> None:
    """``\\xff\\xfe`` is not UTF-8; the message says so, not that a UTF-16 codec (json's
    guess from the first bytes) could not decode it."""
    done = _serve(b"\xff\xfe\n")
    _broken(done, "request: not UTF-8 (")
    assert "utf-16" not in done.stderr
    done = _serve(_hello() + b'{"id": 2, "op": "create_topic", "topic": "\xff"}\n')
    _broken(done, "request: not UTF-8", replies=1)


@pytest.mark.parametrize(
    ("second", "got"),
    [
        (b'{"op": "hello", "protocol": 1, "layer": "queue"}\n', "got None"),
        (_hello("a"), "got 'a'"),
        (_hello(2.0), "got 2.0"),
        (_hello(True), "got True"),
        (_hello(1), "got 1"),  # the same id again
        (_hello(3), "got 3"),  # one skipped
    ],
    ids=["none", "string", "float", "bool", "repeated", "skipped"],
)
def test_a_request_whose_id_is_not_the_next_integer_is_broken(second: bytes, got: str) -> None:
    """An id is an integer, 1, 2, ... in this process (docs/PROTOCOL.md "Lines"): a
    request without one, or with another, gets no reply with ``"id": null``."""
    _broken(_serve(_hello(1) + second), f"request: id must be 2, the next integer; {got}", 1)
    if got != "got 1":  # as the first request too
        _broken(_serve(second), f"request: id must be 1, the next integer; {got}")


@pytest.mark.parametrize("now", [b"NaN", b"Infinity", b"1.5", b'"5"', b"null", b"true"])
def test_a_request_whose_now_is_not_integer_seconds_is_broken(now: bytes) -> None:
    """``now`` is the simulated clock in integer seconds (docs/PROTOCOL.md "Lines"): one
    that is not (Python's json reads ``NaN``) is a broken request, not a clock."""
    bad = _hello(2).replace(b'"now": 0', b'"now": ' + now)  # a request served before open
    assert bad != _hello(2)
    _broken(_serve(_hello() + bad), "request 2: now must be integer seconds, got ", 1)


def test_an_integer_now_is_the_clock_and_a_request_without_one_keeps_it() -> None:
    """What a good request does with the clock is unchanged."""
    server = Server("rocksmq", io.BytesIO(_hello(1, now=7) + _line({"id": 2, "op": "hello"})),
                    io.BytesIO())  # fmt: skip
    assert server.serve() == 0
    assert server.now_s == 7 and server.request_id == 2


@pytest.mark.parametrize("version", [99, 0, 2, "1", 1.0, True, None])
def test_hello_for_a_version_the_server_does_not_speak_gets_an_error_naming_its_own(
    version: object,
) -> None:
    """docs/PROTOCOL.md "Versions": the server replies (a server replies to every request
    it is sent) with an error saying the version it speaks, then keeps serving: a
    ``hello`` for version 1 after it is answered."""
    done = _serve(_hello(1, protocol=version) + _hello(2))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    refused, hello = _replies(done)
    assert set(refused) == {"id", "error"} and refused["id"] == 1, refused
    assert refused["error"]["kind"] == "InvalidArgument", refused
    assert f"protocol {version!r} is not spoken here" in refused["error"]["message"], refused
    assert "this server speaks protocol 1 only" in refused["error"]["message"], refused
    assert hello == {"id": 2, "ok": {
        "protocol": 1, "layer": "queue", "implementation": "rmqsim reference server: rocksmq",
        "snapshot": ["topics", "messages_from"], "pipelining": True}}  # fmt: skip
