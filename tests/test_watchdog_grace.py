"""Slow is not stuck: the liveness bound tells a call that is still computing on a loaded
machine from one that waits for good (conformance/running/watchdog.py)."""

from __future__ import annotations

import time

import pytest

from rmqsim.conformance.running.watchdog import CallBound, OperationHang

LIMIT_S = 0.4


def _slow_but_computing(wall_s: float) -> str:
    """Half computing, half descheduled (as on a machine with more jobs than cores), for
    ``wall_s``: it uses well under two bounds of CPU."""
    end = time.monotonic() + wall_s
    while time.monotonic() < end:
        spin_until = time.monotonic() + 0.004
        while time.monotonic() < spin_until:
            pass
        time.sleep(0.004)
    return "done"


def test_a_call_still_computing_past_its_bound_is_not_a_hang() -> None:
    with CallBound(LIMIT_S) as bound:
        assert bound.call("produce", _slow_but_computing, 2.5 * LIMIT_S) == "done"


def test_a_call_that_uses_no_cpu_past_its_bound_is_a_hang() -> None:
    started = time.monotonic()
    with CallBound(LIMIT_S) as bound, pytest.raises(OperationHang):
        bound.call("produce", time.sleep, 20 * LIMIT_S)
    # the bound, then one probe interval (a fifth of it) to see that nothing moves
    assert time.monotonic() - started < 3 * LIMIT_S


def test_a_busy_loop_is_still_a_hang() -> None:
    """Grace lasts another bound's worth of CPU: a loop that never ends is a hang."""

    def forever() -> None:
        while True:
            pass

    started = time.monotonic()
    with CallBound(LIMIT_S) as bound, pytest.raises(OperationHang):
        bound.call("produce", forever)
    assert time.monotonic() - started < (1 + 5.0 + 1) * LIMIT_S
