"""A real crash: a child process runs a workload and is killed with SIGKILL in the middle.
On reopen every produce that had returned is there with its payload and properties, the
group's position is at least the last one reported, and nothing is torn: whole batches
only, and the pages on disk are exactly those the stored messages produce."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from impl_helpers.sigkill_child import BATCH_MESSAGES, CONFIG, payload_for, properties_for

from rmqsim.impl import RocksMQ
from rmqsim.model.api import ProducerMessage

REPO = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "impl_helpers" / "sigkill_child.py"
STARTUP_TIMEOUT_S = 60.0


def _run_and_kill(path: Path, after_produces: int) -> tuple[int, int]:
    """Start the child, let ``after_produces`` produces return, SIGKILL it; return the
    highest acknowledged id and the last reported position."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(CHILD.parent.parent)]))
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    acked_id = 0
    position = -1
    produces = 0
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    try:
        assert child.stdout is not None
        for line in child.stdout:
            kind, *fields = line.split()
            if kind == "P":
                produces += 1
                acked_id = int(fields[2])
            elif kind == "C":
                position = int(fields[0])
            if produces >= after_produces or time.monotonic() > deadline:
                break
        os.kill(child.pid, signal.SIGKILL)  # in the middle of the next operations
    finally:
        child.kill()
        _, stderr = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, stderr
    assert produces >= after_produces, f"child made only {produces} produces: {stderr}"
    return acked_id, position


def _expected_pages(sizes: list[int]) -> tuple[list[tuple[int, int]], int]:
    pages = []
    open_bytes = 0
    for msg_id, size in enumerate(sizes, start=1):
        if open_bytes + size > CONFIG.page_size_bytes:
            pages.append((msg_id, open_bytes + size))
            open_bytes = 0
        else:
            open_bytes += size
    return pages, open_bytes


@pytest.mark.parametrize("after_produces", [1, 40, 300])
def test_sigkill_loses_no_returned_produce_and_tears_nothing(
    tmp_path: Path, after_produces: int
) -> None:
    path = tmp_path / "db"
    acked_id, reported_position = _run_and_kill(path, after_produces)

    mq = RocksMQ.open(path, CONFIG)
    try:
        state = mq.snapshot()
        topic = state.topics["t"]
        last_id = topic.last_id
        assert last_id >= acked_id, "a produce that had returned was lost"
        assert last_id % BATCH_MESSAGES == 0, "a produce batch was torn"
        assert [m.msg_id for m in topic.messages] == list(range(1, last_id + 1))
        for message in topic.messages:
            batch, index = divmod(message.msg_id - 1, BATCH_MESSAGES)
            assert message.payload == payload_for(batch, index)
            assert dict(message.properties) == properties_for(batch, index)
        pages, open_bytes = _expected_pages([len(m.payload) for m in topic.messages])
        assert [(p.end_id, p.size_bytes) for p in topic.pages] == pages
        assert topic.open_page_bytes == open_bytes
        position = state.groups[("t", "g")]
        assert position >= reported_position
        assert position == -1 or position <= last_id + 1
        # The reopened queue goes on where the dead process stopped.
        assert mq.produce("t", []) == []
        assert mq.produce("t", [ProducerMessage(b"after")]) == [last_id + 1]
    finally:
        mq.close()
