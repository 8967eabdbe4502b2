"""Protocol servers that misbehave, for tests/test_wire.py and tests/test_wire_stream.py:
the reference server over impl.RocksMQ (or over ``IMPL``: ``stream`` serves our streams),
except at the reply numbered ``AT`` (hello is 1, open 2, the first operation 3).

    python tests/wire_servers.py MODE [AT [IMPL]]

Modes: ``good`` (no fault), ``junk`` (a line that is not JSON), ``wrong-id`` (the reply
carries another id), ``half-line`` (half a reply, then exit 0), ``exit0`` (exit 0 instead
of replying), ``silent`` (never replies), ``flood`` (2 MiB on stderr before every reply,
otherwise good), ``bad-kind`` (an error of a kind SPEC does not have), ``bad-value`` (a
reply of the wrong type), ``print`` (the implementation prints to stdout: the reference
server moves it to stderr, so the run is clean), ``no-hello`` (never answers hello),
``old`` (answers hello with protocol 0), ``wrong-position`` (from reply ``AT`` on, the
first end position of every pack a stream delivers names the next queue id).
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

from rmqsim.conformance.wire import server as wire_server


class Misbehaving(wire_server.Server):
    def __init__(self, mode: str, at: int, impl: str = "rocksmq") -> None:
        super().__init__(impl, sys.stdin.buffer, wire_server.private_stdout())
        self.mode = mode
        self.at = at
        self.replies_sent = 0

    def _write(self, obj: dict[str, Any]) -> None:
        if "point" in obj:
            return super()._write(obj)
        self.replies_sent += 1
        if self.mode == "flood":
            sys.stderr.write("x" * (2 * 1024 * 1024) + "\n")
            sys.stderr.flush()
        if self.mode == "no-hello" or (self.mode == "silent" and self.replies_sent == self.at):
            time.sleep(3600)
        if self.mode == "old" and self.replies_sent == 1:
            obj = {**obj, "ok": {**obj["ok"], "protocol": 0}}
        if self.mode == "wrong-position" and self.replies_sent >= self.at:
            obj = _shift_end_position(obj)
        if self.replies_sent == self.at:
            obj = self._fault(obj)
        return super()._write(obj)

    def _fault(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.mode == "junk":
            self.replies.write(b"hello, this is not JSON\n")
        elif self.mode == "wrong-id":
            return {**obj, "id": obj["id"] + 1}
        elif self.mode == "half-line":
            self.replies.write(b'{"id": 3, "ok"')
            self.replies.flush()
            os._exit(0)
        elif self.mode == "exit0":
            os._exit(0)
        elif self.mode == "bad-kind":
            return {"id": obj["id"], "error": {"kind": "Weird", "message": "?"}}
        elif self.mode == "bad-value":
            return {"id": obj["id"], "ok": "not what was asked"}
        elif self.mode == "print":
            print("a stray print of the implementation")
        return obj


def _shift_end_position(obj: dict[str, Any]) -> dict[str, Any]:
    """A delivered pack's first end position one queue id further (any other reply as it is)."""
    pack = obj.get("ok")
    if not (isinstance(pack, dict) and pack.get("end_positions")):
        return obj
    first = pack["end_positions"][0]
    queue_id = int.from_bytes(base64.b64decode(first["msg_id"]), "little", signed=True)
    moved = base64.b64encode((queue_id + 1).to_bytes(8, "little", signed=True)).decode()
    positions = [{**first, "msg_id": moved}, *pack["end_positions"][1:]]
    return {**obj, "ok": {**pack, "end_positions": positions}}


if __name__ == "__main__":
    mode = sys.argv[1]
    at = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    impl = sys.argv[3] if len(sys.argv) > 3 else "rocksmq"
    sys.exit(Misbehaving(mode, at, impl).serve())
