"""Slow is not stuck: the liveness bound tells a call that is still computing on a loaded
machine from one that waits for good (conformance/running/watchdog.py)."""

from __future__ import annotations

import time

import pytest

from rmqsim.conformance.running.watchdog import CallBound, OperationHang, bounded_elsewhere

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


def _wait_elsewhere_then(wait_s: float, then_s: float, allowed_s: float = 10.0) -> str:
    """Wait ``wait_s`` inside a block that bounds itself within ``allowed_s`` (a server's
    start), then ``then_s`` as the operation's own work."""
    with bounded_elsewhere(allowed_s):
        time.sleep(wait_s)
    time.sleep(then_s)
    return "done"


def test_a_wait_bounded_elsewhere_does_not_count_against_the_call() -> None:
    """A protocol server's start and hello (conformance/wire/client.py) wait in the open
    call, bounded by their own timeout, not by the liveness bound."""
    with CallBound(LIMIT_S) as bound:
        assert bound.call("open", _wait_elsewhere_then, 3 * LIMIT_S, LIMIT_S / 2) == "done"


def test_after_the_block_the_call_has_only_the_time_it_had_left() -> None:
    started = time.monotonic()
    with CallBound(LIMIT_S) as bound, pytest.raises(OperationHang):
        bound.call("open", _wait_elsewhere_then, 2 * LIMIT_S, 20 * LIMIT_S)
    assert time.monotonic() - started < 2 * LIMIT_S + 3 * LIMIT_S


def test_without_the_block_the_same_wait_is_a_hang() -> None:
    with CallBound(LIMIT_S) as bound, pytest.raises(OperationHang):
        bound.call("open", time.sleep, 3 * LIMIT_S)


def test_a_wait_bounded_elsewhere_is_still_ended_past_its_own_bound() -> None:
    started = time.monotonic()
    with CallBound(LIMIT_S) as bound, pytest.raises(OperationHang):
        bound.call("open", _wait_elsewhere_then, 50 * LIMIT_S, 0, 5 * LIMIT_S)
    assert time.monotonic() - started < 15 * LIMIT_S
