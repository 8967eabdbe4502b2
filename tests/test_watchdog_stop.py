"""Ctrl-Z does not end a run (``conformance/running/watchdog.py``): SIGTSTP stops the process as
a terminal program does (the wall-time last resort disarmed, SIGSTOP, re-armed on
SIGCONT, the time stopped left out of the calls' deadlines), so a run suspended past its
bound and past the last resort's timer carries on and passes; ``kill -STOP``, which
cannot be caught, may end such a run on resume, as documented. Real processes, real signals;
the last resort's floor is lowered from 30 s to 1 s so that it would fire within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: A run of smoke whose every crash point sleeps 10 ms (far within the 0.5 s bound): it
#: lasts seconds, so that it is in the middle of its calls when stopped.
SCRIPT = textwrap.dedent(
    """
    import sys, time
    from rmqsim.conformance.running import watchdog
    from rmqsim.conformance.running.run import run_seed
    from rmqsim.impl import RocksMQ

    def slow(*, path, config, clock, faults):
        def hook(point):
            time.sleep(0.01)
            if faults is not None:
                faults(point)
        return RocksMQ.open(path, config=config, clock=clock, faults=hook)

    watchdog.MIN_DEAD_MAN_S = 1.0  # the last resort fires 3 s after the watchdog's look
    with watchdog.op_timeout(0.5):
        print("started", flush=True)
        started = time.monotonic()
        result = run_seed("smoke", 0, impl=slow, steps=400)
    print(result.status, result.anomaly, f"{time.monotonic() - started:.1f}", flush=True)
    sys.exit(0 if result.ok else 1)
    """
)
#: A run whose first produce waits 0.4 s inside the SUT (short sleeps: hardly any CPU),
#: under a 1 s bound and the last resort's own floor (30 s: its timer is not what this
#: one is about); it says when it starts waiting, to be stopped right then.
WAIT_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from rmqsim.conformance.running import watchdog
    from rmqsim.conformance.running.run import run_seed
    from rmqsim.impl import RocksMQ

    waited = []

    def waits_once(*, path, config, clock, faults):
        def hook(point):
            if not waited and point.startswith("produce."):
                waited.append(point)
                print("waiting", flush=True)
                for _ in range(40):
                    time.sleep(0.01)
            if faults is not None:
                faults(point)
        return RocksMQ.open(path, config=config, clock=clock, faults=hook)

    with watchdog.op_timeout(1.0):
        result = run_seed("smoke", 0, impl=waits_once, steps=100)
    print(result.status, result.anomaly, flush=True)
    sys.exit(0 if result.ok else 1)
    """
)
#: Stopped this long: past the bound (0.5 s) and the last resort's timer (about 3.5 s).
STOPPED_S = 6.0
#: Stopped this long inside ``WAIT_SCRIPT``'s waiting call: three times its 1 s bound (so a
#: watchdog counting the time stopped finds the call past its deadline on resume), and
#: that script's last resort has its 30 s floor, so its timer is not reached.
WAIT_STOPPED_S = 3.0


def _state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_for_state(pid: int, state: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _state(pid) != state:
        assert time.monotonic() < deadline, f"process {pid} never reached state {state}"
        time.sleep(0.02)


def _suspended_run(
    stop_signal: signal.Signals,
    script: str = SCRIPT,
    *,
    marker: str = "started",
    delay_s: float = 1.0,
    stopped_s: float = STOPPED_S,
) -> subprocess.CompletedProcess[str]:
    """``script``'s run, sent ``stop_signal`` ``delay_s`` after it printed ``marker``,
    continued after ``stopped_s``."""
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == marker + "\n"
        time.sleep(delay_s)
        assert child.poll() is None, "the run ended before it was stopped"
        child.send_signal(stop_signal)
        _wait_for_state(child.pid, "T")  # it does stop
        time.sleep(stopped_s)
        assert _state(child.pid) == "T"
        child.send_signal(signal.SIGCONT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


@pytest.mark.skipif(not hasattr(signal, "SIGTSTP"), reason="POSIX job control")
def test_ctrl_z_past_the_bound_and_the_last_resort_does_not_end_the_run() -> None:
    done = _suspended_run(signal.SIGTSTP)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok None"), done.stdout
    assert "Timeout" not in done.stderr and "hang" not in done.stderr


@pytest.mark.skipif(not hasattr(signal, "SIGTSTP"), reason="POSIX job control")
def test_ctrl_z_inside_a_waiting_call_does_not_count_against_its_bound() -> None:
    """Stopped 3 s in a call that waits 0.4 s under a 1 s bound: on resume the call is
    not past its deadline (the time stopped is left out), though it waits on with hardly
    any CPU (which, past the deadline, would be a hang at once)."""
    done = _suspended_run(
        signal.SIGTSTP, WAIT_SCRIPT, marker="waiting", delay_s=0.0, stopped_s=WAIT_STOPPED_S
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith("ok None"), done.stdout


@pytest.mark.skipif(not hasattr(signal, "SIGTSTP"), reason="POSIX job control")
def test_kill_stop_past_the_last_resort_behaves_as_documented() -> None:
    """SIGSTOP cannot be caught: on resume the last resort's timer, expired, races with
    the watchdog re-arming it. Either the last resort ends the process (exit 1, its
    stacks) or the run carries on and passes; never a ``hang`` of the queue."""
    done = _suspended_run(signal.SIGSTOP)
    if done.returncode == 1:
        assert "Timeout (" in done.stderr, done.stderr  # faulthandler's: every stack
        assert "ok None" not in done.stdout
    else:
        assert done.returncode == 0 and done.stdout.startswith("ok None"), done
    assert "hang" not in done.stdout


def test_the_stop_key_handler_goes_with_the_watchdog() -> None:
    """SIGTSTP is ours only while a bound of the main thread is active; an ignored one is
    left ignored."""
    from rmqsim.conformance.running.watchdog import CallBound

    assert signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL
    with CallBound(5.0):
        assert callable(signal.getsignal(signal.SIGTSTP))
    assert signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL
    previous = signal.signal(signal.SIGTSTP, signal.SIG_IGN)
    try:
        with CallBound(5.0):
            assert signal.getsignal(signal.SIGTSTP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTSTP, previous)


def test_a_child_forked_during_a_run_stops_on_ctrl_z_by_default() -> None:
    """The parent's handler belongs to the parent's watchdog: a child forked while it is
    installed gets SIGTSTP's previous handler back (its own runs install it again)."""
    from rmqsim.conformance.running.watchdog import CallBound

    with CallBound(5.0):
        pid = os.fork()
        if pid == 0:  # the child: report by exit status only
            os._exit(0 if signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL else 3)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
