"""The liveness bound (``conformance/running/watchdog.py``, ``--op-timeout-s``): a queue that
deadlocks is the anomaly ``hang`` within seconds, in process and in ``--crash-mode
process``, with the usual report and a trace that replays to ``hang``; shrinking it stays
quick; a normal run is unaffected. Real processes for the commands (a test that hangs
would hang the suite: each has a timeout), and for the last resorts, which end the process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rmqsim.conformance.cli import cli
from rmqsim.conformance.mutants import kill as kill_module
from rmqsim.conformance.mutants.catalogue import select
from rmqsim.conformance.mutants.consumer import core_factory
from rmqsim.conformance.mutants.kill import KILLED, kill_mutant
from rmqsim.conformance.running import watchdog
from rmqsim.conformance.running.process_sut import process_factory
from rmqsim.conformance.running.run import parse_run_lines, replay_run_trace, replay_trace, run_seed
from rmqsim.conformance.running.watchdog import CallBound, OperationHang, op_timeout
from rmqsim.conformance.searching.shrink import shrink_and_save
from rmqsim.impl.consumer import ConsumerCore
from rmqsim.model.api import MQConfig

ROOT = Path(__file__).resolve().parent.parent
RMQSIM = str(Path(sys.executable).with_name("rmqsim"))
DEADLOCK = "rmqsim.conformance.mutants.liveness:last_group_deadlock"
#: smoke seed 0 destroys a topic's last group over an unacked page at this operation.
HANG_STEP = 285
#: Seconds a command of these tests may take before it counts as hung.
COMMAND_TIMEOUT_S = 240
#: The bound of the deadlock test's run and replay: every operation before the deadlock
#: must finish within it, some waiting on the disk (no CPU, so no grace), on a machine that
#: pytest-xdist's two workers share with whatever else runs (1 s lost operation 1 there).
DEADLOCK_BOUND_S = 5


def _rmqsim(*args: str, cwd: Path, timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[Any, float]:
    """Run ``rmqsim`` in a process of its own; (the completed process, seconds taken)."""
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))
    started = time.monotonic()
    done = subprocess.run(
        [RMQSIM, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    return done, time.monotonic() - started


def _rmqsim_side_by_side(commands: dict[str, list[str]], cwd: Path) -> dict[str, Any]:
    """Run each ``rmqsim`` command of ``commands`` (name -> arguments) in a process of its
    own, all at once: their waits on the bound overlap; name -> the completed process."""
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT))
    started = {
        name: subprocess.Popen(
            [RMQSIM, *args], cwd=cwd, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for name, args in commands.items()
    }
    done = {}
    try:
        for name, process in started.items():
            stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT_S)
            done[name] = subprocess.CompletedProcess(
                process.args, process.returncode, stdout, stderr
            )
    finally:  # none left behind when one overruns the command's timeout
        for process in started.values():
            process.kill()
            process.wait()
    return done


def test_a_deadlocking_queue_is_a_hang_found_in_seconds(tmp_path: Path) -> None:
    """In both crash modes, the deadlock mutant's run is a hang at ``HANG_STEP`` found by the
    bound, and its trace replays to the same hang. The two modes' runs (then their replays:
    the traces differ, the process mode's says so) go side by side, so their waits on
    ``DEADLOCK_BOUND_S`` overlap instead of adding up."""
    modes = ("inprocess", "process")
    runs = _rmqsim_side_by_side(
        {
            mode: [
                "run", "--profile", "smoke", "--seed", "0", "--impl", DEADLOCK,
                "--out", str(tmp_path / mode), "--crash-mode", mode,
                "--op-timeout-s", str(DEADLOCK_BOUND_S), "--no-shrink",
            ]
            for mode in modes
        },
        cwd=tmp_path,
    )
    for mode, done in runs.items():
        assert done.returncode == 1, (mode, done.stderr)
        assert "DIVERGENCE hang" in done.stderr, mode
        assert f"step {HANG_STEP} of {HANG_STEP}" in done.stderr, mode
        assert f"destroy_group did not return within {DEADLOCK_BOUND_S} s" in done.stderr, mode
        # Found by the bound (its message above), not by the command's timeout: no wall-time
        # assertion, which would measure the machine's load.
        trace = tmp_path / mode / "smoke-seed0-hang.jsonl"
        end = json.loads(trace.read_text().splitlines()[-1])
        assert (end["status"], end["anomaly"], end["steps"]) == ("divergence", "hang", HANG_STEP)
    replays = _rmqsim_side_by_side(
        {
            mode: [
                "replay", str(tmp_path / mode / "smoke-seed0-hang.jsonl"),
                "--op-timeout-s", str(DEADLOCK_BOUND_S),
            ]
            for mode in modes
        },
        cwd=tmp_path,
    )
    for mode, replayed in replays.items():
        assert replayed.returncode == 1, (mode, replayed.stderr)
        assert f"hang at operation {HANG_STEP}" in replayed.stdout, mode


#: The command's bound in the shared ``mutants`` run below: not ``SHRINK_OP_TIMEOUT_S``, so
#: that the bounds seen while shrinking tell the shrink's own from the command's.
CLI_BOUND_S = 2.0


@dataclass
class _HangShrink:
    """What one ``rmqsim mutants`` run on the deadlock mutant did (``hang_kill``): its
    command result, the failing run it shrank, the shrunk run, the bounds every call had
    while shrinking, the bound in force after, and the shrink's wall seconds."""

    done: Any
    out: Path
    failure: Any = None
    shrunk: Any = None
    bounds: list[float] = field(default_factory=list)
    bound_after_s: float | None = None
    seconds: float = 0.0


@pytest.fixture(scope="module")
def hang_kill(tmp_path_factory: pytest.TempPathFactory) -> _HangShrink:
    """``rmqsim mutants --only last-group-deadlock`` once, with spies on its shrink: the
    shrink of a hang is slow by nature (every candidate that still hangs waits out a
    bound: ≈20 of them), so the CLI test and the shrink test share this one search."""
    out = tmp_path_factory.mktemp("hang") / "out"
    seen = _HangShrink(done=None, out=out)
    shrinking = threading.Event()
    original_bound = CallBound.__init__

    def spying_bound(self: CallBound, limit_s: float | None = None) -> None:
        original_bound(self, limit_s)
        if shrinking.is_set():
            seen.bounds.append(self.limit_s)

    def spying_shrink(result: Any, **kwargs: Any) -> Any:
        seen.failure = result
        shrinking.set()
        started = time.monotonic()
        try:
            seen.shrunk = shrink_and_save(result, **kwargs)
        finally:
            shrinking.clear()
        seen.seconds = time.monotonic() - started
        seen.bound_after_s = watchdog.op_timeout_s()
        return seen.shrunk

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CallBound, "__init__", spying_bound)
        patch.setattr(kill_module, "shrink_and_save", spying_shrink)
        seen.done = CliRunner().invoke(
            cli,
            [
                *("mutants", "--only", "last-group-deadlock", "--profiles", "smoke"),
                *("--seeds", "0:1", "--steps", "300"),
                *("--op-timeout-s", str(CLI_BOUND_S), "--out", str(out)),
            ],
        )
    return seen


def test_shrinking_a_hang_keeps_the_bound_short_and_finishes_quickly(
    hang_kill: _HangShrink,
) -> None:
    """Every shrink candidate that still hangs waits out the bound once: the shrink runs
    them under ``SHRINK_OP_TIMEOUT_S`` (1 s), not the command's (``CLI_BOUND_S``), and the
    command's bound is back after it."""
    failure, shrunk = hang_kill.failure, hang_kill.shrunk
    assert failure is not None, hang_kill.done.output
    assert failure.anomaly == "hang" and failure.steps == HANG_STEP
    assert shrunk is not None and shrunk.anomaly == "hang" and shrunk.steps <= 6
    assert shrunk.shrink_stats is not None and shrunk.shrink_stats.stopped_by is None
    assert hang_kill.bounds and set(hang_kill.bounds) == {watchdog.SHRINK_OP_TIMEOUT_S}
    assert hang_kill.bound_after_s == CLI_BOUND_S  # restored after
    assert hang_kill.seconds < 120, hang_kill.seconds  # ≈20 s here: ≈20 candidates hang, 1 s each
    with op_timeout(1):
        again = replay_trace(parse_run_lines(shrunk.trace_lines))
    assert again.anomaly == "hang" and again.steps == shrunk.steps


def test_a_normal_run_is_unaffected_and_the_process_goes_on_after_a_hang() -> None:
    """The bound changes no trace; after a hang the next seed runs in the same process on
    a fresh directory, and the SIGALRM handler is back to what it was."""
    before = signal.getsignal(signal.SIGALRM)
    with op_timeout(0):
        unbounded = run_seed("crashy", 1, steps=150, crash_rate=0.05)
    bounded = run_seed("crashy", 1, steps=150, crash_rate=0.05)
    assert bounded.ok and bounded.trace_lines == unbounded.trace_lines
    with op_timeout(0.5):
        hung = run_seed("smoke", 0, impl=DEADLOCK)
    assert hung.anomaly == "hang"
    assert hung.divergence is not None and hung.divergence.step.op.kind == "destroy_group"
    after = run_seed("smoke", 0)
    assert after.ok and after.steps > HANG_STEP
    assert signal.getsignal(signal.SIGALRM) == before


def test_a_queue_whose_open_never_returns_hangs_at_the_first_step() -> None:
    with op_timeout(0.5):
        result = run_seed("smoke", 0, impl="tests.hang_impls:open_never_returns")
    assert result.anomaly == "hang" and result.steps == 1
    assert result.divergence is not None
    assert result.divergence.detail.startswith("opening a fresh directory: open did not return")


def test_a_deadlocking_push_consumer_is_a_hang_and_replays_to_one() -> None:
    class _PersistTakesItsLockTwice(ConsumerCore):
        """``persist`` takes a lock it already holds."""

        def persist(self) -> dict[str, int]:
            lock = threading.Lock()
            with lock, lock:
                return super().persist()

    with op_timeout(0.5):
        result = run_seed("consumer", 0, impl=core_factory(_PersistTakesItsLockTwice))
        assert result.anomaly == "hang", result.anomaly
        assert result.divergence is not None and result.divergence.step.op.kind == "persist"
        replayed = replay_run_trace(
            parse_run_lines(result.trace_lines), impl=core_factory(_PersistTakesItsLockTwice)
        )
    assert (replayed.anomaly, replayed.steps) == ("hang", result.steps)


def test_the_bound_interrupts_a_lock_wait_and_leaves_other_alarms_alone() -> None:
    heard: list[int] = []

    def theirs(signum: int, _frame: Any) -> None:
        heard.append(signum)

    previous = signal.signal(signal.SIGALRM, theirs)
    try:
        with CallBound(0.3) as bound:
            assert bound.call("quick", sum, [1, 2]) == 3
            signal.raise_signal(signal.SIGALRM)  # not the watchdog's: passed on
            assert heard == [signal.SIGALRM]
            lock = threading.Lock()
            lock.acquire()
            started = time.monotonic()
            with pytest.raises(OperationHang, match=r"relock did not return within 0\.3 s"):
                bound.call("relock", lock.acquire)
            assert time.monotonic() - started < 5
        assert signal.getsignal(signal.SIGALRM) is theirs
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_the_process_mode_proxy_kills_a_child_that_does_not_answer(tmp_path: Path) -> None:
    """Without the lockstep's watchdog (a proxy used on its own), the proxy's own wait is
    the bound: it was a fixed 300 s."""
    factory = process_factory("tests.hang_impls:swallows_interrupts")
    with op_timeout(0.5):
        mq: Any = factory(path=tmp_path / "q", config=MQConfig(), clock=lambda: 0, faults=None)
        started = time.monotonic()
        with pytest.raises(OperationHang, match=r"create_topic did not return within 0\.5 s"):
            mq.create_topic("t")
    assert time.monotonic() - started < 10
    assert mq.process.returncode == -signal.SIGKILL


def test_a_call_that_does_not_give_way_ends_the_process_with_a_message(tmp_path: Path) -> None:
    """The last resort: an implementation that swallows even the watchdog's interruption."""
    done, seconds = _rmqsim(
        *("run", "--profile", "smoke", "--seed", "0", "--no-shrink", "--out", str(tmp_path)),
        *("--impl", "tests.hang_impls:swallows_interrupts", "--op-timeout-s", "0.5"),
        cwd=tmp_path,
        timeout_s=60,
    )
    assert done.returncode == watchdog.LAST_RESORT_EXIT_STATUS, done.stderr
    assert "hang: create_topic did not return within 0.5 s and did not give way" in done.stderr
    assert "swallows_interrupts" in done.stderr or "create_topic" in done.stderr  # stacks
    assert seconds < 30


def test_a_call_holding_the_gil_ends_the_process_or_is_a_hang_in_process_mode(
    tmp_path: Path,
) -> None:
    """Native code that keeps the GIL stops the watchdog too: faulthandler's timer ends the
    process (its floor lowered here from 30 s); ``--crash-mode process`` reports a hang."""
    script = textwrap.dedent(
        """
        from rmqsim.conformance.running import watchdog
        from rmqsim.conformance.running.run import run_seed
        watchdog.MIN_DEAD_MAN_S = 1.0
        with watchdog.op_timeout(0.5):
            run_seed("smoke", 0, impl="tests.hang_impls:holds_the_gil")
        """
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "Timeout (" in done.stderr and "create_topic" in done.stderr
    assert time.monotonic() - started < 30
    process_run, _ = _rmqsim(
        *("run", "--profile", "smoke", "--seed", "0", "--no-shrink", "--out", str(tmp_path)),
        *("--impl", "tests.hang_impls:holds_the_gil", "--op-timeout-s", "0.5"),
        *("--crash-mode", "process"),
        cwd=tmp_path,
        timeout_s=60,
    )
    assert process_run.returncode == 1, process_run.stderr
    assert "DIVERGENCE hang" in process_run.stderr


def test_a_hang_outside_the_main_thread_ends_the_process_with_a_message() -> None:
    script = textwrap.dedent(
        """
        import threading
        from rmqsim.conformance.running import watchdog
        from rmqsim.conformance.running.run import run_seed
        with watchdog.op_timeout(0.5):
            impl = "rmqsim.conformance.mutants.liveness:last_group_deadlock"
            worker = threading.Thread(target=run_seed, args=("smoke", 0), kwargs={"impl": impl})
            worker.start()
            worker.join()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "in a thread other than the main one" in done.stderr


def test_the_deadlock_mutant_is_listed_and_killed_by_the_gate(tmp_path: Path) -> None:
    (mutant,) = select(["last-group-deadlock"])
    assert mutant.bug_class == "liveness"
    with op_timeout(1):
        kill = kill_mutant(mutant, range(0, 1), out=tmp_path, profiles=("smoke",), shrink=None)
    assert (kill.status, kill.anomaly, kill.check) == (KILLED, "hang", "liveness")
    assert (kill.profile, kill.seed, kill.step) == ("smoke", 0, HANG_STEP)


def test_cli_mutants_kills_the_deadlock_mutant(hang_kill: _HangShrink) -> None:
    done = hang_kill.done
    assert done.exit_code == 0, done.output
    assert "PASS: 1 of 1 killed" in done.output
    data = json.loads((hang_kill.out / "kill-matrix.json").read_text())
    (kill,) = data["mutants"]
    assert (kill["mutant"], kill["anomaly"], kill["check"]) == (
        "last-group-deadlock",
        "hang",
        "liveness",
    )
    assert kill["shrunk_steps"] is not None and kill["shrunk_steps"] <= 6


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_bad_op_timeout_is_refused(value: str) -> None:
    done = CliRunner().invoke(
        cli, ["run", "--profile", "smoke", "--seed", "0", "--op-timeout-s", value]
    )
    assert done.exit_code == 2
    assert "--op-timeout-s" in done.output and ("range" in done.output or "finite" in done.output)


def test_a_child_forked_during_a_run_bounds_its_own_calls() -> None:
    """The parent's watchdog thread (and faulthandler's timer thread) do not survive a
    fork: the child starts its own, and does not wait for the parent's timer thread."""
    script = textwrap.dedent(
        """
        import os, threading
        from rmqsim.conformance.running.watchdog import CallBound, OperationHang
        with CallBound(0.3):
            pid = os.fork()
            if pid == 0:
                with CallBound(0.3) as bound:
                    lock = threading.Lock()
                    lock.acquire()
                    try:
                        bound.call("relock", lock.acquire)
                    except OperationHang as hang:
                        print("child:", hang, flush=True)
                os._exit(0)
            os.waitpid(pid, 0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "child: relock did not return within 0.3 s" in done.stdout
