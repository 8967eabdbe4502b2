"""A forked server child's body for tests/test_wire.py: what ``serve_forked`` does first,
then a server of its own started as a command (``ChildProcess``: ``sleep``, standing in
for a JVM that does not exit when its stdin closes), whose pid it writes to the file named
by ``impl``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rmqsim.conformance.wire.child import ChildProcess, enter_forked_server

__all__ = ["start_a_server_and_wait"]


def start_a_server_and_wait(requests: Any, replies: Any, impl: str) -> None:
    enter_forked_server()
    server = ChildProcess(["sleep", "600"])
    Path(impl).write_text(f"{server.pid}\n")
    requests.recv()  # until killed
