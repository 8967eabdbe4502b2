"""A by-hand self-test of rmqsim-milvus (the driver around the real Milvus RocksMQ).

Run after ``scripts/build-milvus.sh``::

    python3 impl/external/milvus_rocksmq/smoke.py [path/to/rmqsim-milvus]

It starts the binary three times on one fresh directory and prints every line exchanged:
1. hello, open, create a topic, produce 3 messages, create a group, consume, seek forward,
   get the latest id, snapshot, close;
2. reopen: snapshot (Milvus keeps groups in memory only: they are gone), produce one more
   message (its id continues from the stored ones), then a request that stops at the fault
   point between Milvus's two writes of a produce ("produce.before_write.2"), where the
   process is killed with SIGKILL, as rmqsim does;
3. reopen after the kill: snapshot (the killed produce's messages are in the message store,
   its page information is not), close.
It exits 1 if a reply is malformed or the protocol stream has anything but JSON objects.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CONFIG", "HERE", "Driver", "b64", "main"]

HERE = Path(__file__).resolve().parent
CONFIG = {"page_size_bytes": 10, "retention_time_s": 60, "retention_size_bytes": -1}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Driver:
    """One driver process: one open of the queue."""

    def __init__(self, binary: Path) -> None:
        self.proc = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        self.next_id = 0

    def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        raw = self.proc.stdout.readline()
        if not raw:
            raise SystemExit("driver closed its output")
        value = json.loads(raw)
        if not isinstance(value, dict):
            raise SystemExit(f"not a JSON object: {raw!r}")
        print(f"  <- {raw.rstrip()}")
        return value

    def send(self, value: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        text = json.dumps(value)
        print(f"  -> {text}")
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def call(self, op: str, now: int, **args: Any) -> Any:
        """Send one request, read its points and its reply; the reply's ok or error."""
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "op": op, "now": now, "wait_at_points": False, **args})
        while True:
            reply = self.line()
            if reply.get("id") != rid:
                raise SystemExit(f"reply for another request: {reply}")
            if "point" in reply:
                continue
            if "ok" in reply:
                return reply["ok"]
            if "error" in reply:
                return {"error": reply["error"]}
            raise SystemExit(f"malformed reply: {reply}")

    def kill_at(self, point: str, op: str, now: int, **args: Any) -> None:
        """Send a request that waits at points; go on until ``point``, then SIGKILL."""
        self.next_id += 1
        rid = self.next_id
        self.send({"id": rid, "op": op, "now": now, "wait_at_points": True, **args})
        while True:
            reply = self.line()
            if reply.get("point") == point:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                print(f"  (SIGKILL at {point})")
                return
            if "point" not in reply:
                raise SystemExit(f"{point} never came: {reply}")
            self.send({"go_on": rid})

    def close(self) -> None:
        self.proc.wait(timeout=30)
        if self.proc.returncode != 0:
            raise SystemExit(f"driver exited with {self.proc.returncode}")


def main() -> None:
    binary = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "bin" / "rmqsim-milvus"
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: run scripts/build-milvus.sh first")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "queue")

        print("session 1")
        d = Driver(binary)
        d.call("hello", 0, protocol=1, layer="queue")
        d.call("open", 1000, path=path, config=CONFIG)
        d.call("create_topic", 1000, topic="t")
        messages = [
            {"payload": b64(text), "properties": {"k": "v"}} for text in ("hello", "world!", "")
        ]
        d.call("produce", 1001, topic="t", messages=messages)
        d.call("create_consumer_group", 1002, topic="t", group="g")
        d.call("consume", 1003, topic="t", group="g", n=1)
        d.call("seek", 1004, topic="t", group="g", msg_id=3)
        d.call("consume", 1005, topic="t", group="g", n=10)
        d.call("get_latest_msg", 1005, topic="t")
        d.call("snapshot", 1006, topics=None, messages_from=None)
        d.call("close", 1007)
        d.close()

        print("session 2 (reopen)")
        d = Driver(binary)
        d.call("hello", 0, protocol=1, layer="queue")
        d.call("open", 2000, path=path, config=CONFIG)
        d.call("snapshot", 2000, topics=["t"], messages_from={"t": 2})
        d.call("exist_consumer_group", 2000, topic="t", group="g")
        d.call("produce", 2001, topic="t", messages=[{"payload": b64("four"), "properties": {}}])
        big = [{"payload": b64("0123456789ab"), "properties": {}}]
        d.kill_at("produce.before_write.2", "produce", 2002, topic="t", messages=big)

        print("session 3 (reopen after SIGKILL)")
        d = Driver(binary)
        d.call("open", 3000, path=path, config=CONFIG)
        d.call("snapshot", 3000, topics=None, messages_from=None)
        d.call("close", 3001)
        d.close()
    print("smoke: done")


if __name__ == "__main__":
    main()
