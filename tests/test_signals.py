"""SIGINT and SIGTERM stop a command cleanly: its temporary directories are removed, what
it has finished is written (a gate's JUnit XML and summary, a failing run's trace), and it
exits 130 or 143. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rmqsim.conformance.running.scratch import WORKDIR_ENV
from tests.signal_impls import SIGNAL_AT_ENV, ctrl_c_default

ROOT = Path(__file__).resolve().parent.parent
RMQSIM = str(Path(sys.executable).with_name("rmqsim"))
SELF_SIGNALLING = "tests.signal_impls:lost_write_then_signal"
#: The opening of ``lost_write_then_signal`` that falls in the shrink of the first failing
#: run (smoke seed 0 opens its queue once; each shrink candidate once more).
OPEN_IN_FIRST_SHRINK = 2


def _env(workdir: Path, **extra: str) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    pythonpath = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    return dict(os.environ, PYTHONPATH=pythonpath, **{WORKDIR_ENV: str(workdir)}, **extra)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _interrupted_suite(out: Path) -> ET.Element:
    root = ET.parse(out / "junit.xml").getroot()
    [suite] = [s for s in root if s.get("name") == "rmqsim.interrupted"]
    return suite


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_mid_gate_cleans_up_and_writes_what_is_done(
    sig: signal.Signals, tmp_path: Path
) -> None:
    workdir, out = tmp_path / "work", tmp_path / "out"
    workdir.mkdir()
    # One job: three directories mean a finished run (test_gate_parallel: --jobs 2).
    args = [RMQSIM, "gate", "--profiles", "smoke", "--seeds", "0:500", "--jobs", "1"]
    args += ["--out", str(out)]
    child = subprocess.Popen(
        args, cwd=tmp_path, env=_env(workdir), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_default,
    )  # fmt: skip
    # The check of RMQSIM_WORKDIR makes one directory, each run one more: once three have
    # been seen, the first run has finished and the second is under way.
    seen: set[str] = set()
    deadline = time.monotonic() + 120
    while len(seen) < 3 and child.poll() is None and time.monotonic() < deadline:
        seen.update(os.listdir(workdir))
        time.sleep(0.002)
    assert child.poll() is None, "the gate ended before it was signalled"
    child.send_signal(sig)
    stdout, stderr = child.communicate(timeout=120)

    assert child.returncode == 128 + sig, (child.returncode, stderr)
    assert stderr.splitlines()[-1] == f"rmqsim: error: interrupted by {sig.name}"
    assert "Traceback" not in stderr
    assert list(workdir.iterdir()) == []  # no database left behind
    summary = _summary(out)
    assert summary["status"] == "interrupted" and summary["interrupted_by"] == sig.name
    runs = summary["profiles"]["smoke"]["runs"]
    assert 1 <= runs < 500
    assert f"INTERRUPTED by {sig.name} after {runs} run(s)" in stdout
    root = ET.parse(out / "junit.xml").getroot()
    [smoke] = [s for s in root if s.get("name") == "rmqsim.smoke"]
    assert len(smoke.findall("testcase")) == runs
    [error] = _interrupted_suite(out).iter("error")
    assert error.get("message") == f"interrupted by {sig.name}"


#: A queue whose N-th opening makes a finalizer signal the gate's own process.
IN_A_FINALIZER = "tests.signal_impls:signal_in_a_finalizer"
#: Seeds of the gate below: far more than the run the signal falls in.
FINALIZER_SEEDS = 40


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_whose_exception_a_finalizer_swallowed_still_stops_the_gate(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """CPython runs the handler inside the finalizer and ignores what it raises; the gate
    raises it again before its next run (``conformance.running.interrupts``): it stops
    there, as if the signal had come between two runs, rather than run every seed."""
    workdir, out = tmp_path / "work", tmp_path / "out"
    workdir.mkdir()
    done = subprocess.run(
        [RMQSIM, "gate", "--profiles", "smoke", "--seeds", f"0:{FINALIZER_SEEDS}",
         "--no-crash-sweep", "--impl", IN_A_FINALIZER, "--out", str(out), "--jobs", "1"],
        cwd=tmp_path, env=_env(workdir, **{SIGNAL_AT_ENV: f"{sig.name}@3"}),
        capture_output=True, text=True, timeout=300, check=False, preexec_fn=ctrl_c_default,
    )  # fmt: skip
    assert "Exception ignored" in done.stderr  # the finalizer swallowed it
    assert done.returncode == 128 + sig, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == f"rmqsim: error: interrupted by {sig.name}"
    summary = _summary(out)
    assert summary["status"] == "interrupted" and summary["interrupted_by"] == sig.name
    assert 1 <= summary["profiles"]["smoke"]["runs"] < FINALIZER_SEEDS
    assert list(workdir.iterdir()) == []


def test_a_gate_interrupted_while_shrinking_keeps_the_failure_and_its_trace(
    tmp_path: Path,
) -> None:
    """SIGTERM arrives inside the shrink of the first failing run: the failure is in the
    summary and the JUnit XML, unshrunk, and its trace is on disk."""
    workdir, out = tmp_path / "work", tmp_path / "out"
    workdir.mkdir()
    done = subprocess.run(
        [RMQSIM, "gate", "--profiles", "smoke", "--seeds", "0:10", "--no-crash-sweep",
         "--impl", SELF_SIGNALLING, "--out", str(out), "--jobs", "1"],
        cwd=tmp_path, env=_env(workdir, **{SIGNAL_AT_ENV: f"SIGTERM@{OPEN_IN_FIRST_SHRINK}"}),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 143, done.stderr
    assert list(workdir.iterdir()) == []
    summary = _summary(out)
    assert summary["status"] == "interrupted"
    [failure] = summary["failures"]
    assert (failure["seed"], failure["anomaly"], failure["shrunk_trace"]) == (
        0,
        "lost-write",
        None,
    )
    trace = Path(failure["trace"])
    trace = trace if trace.is_absolute() else tmp_path / trace
    header = json.loads(trace.read_text().splitlines()[0])
    assert header["type"] == "header" and header["seed"] == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "junit.xml",
        "smoke-seed0-lost-write.jsonl",
        "summary.json",
    ]
    root = ET.parse(out / "junit.xml").getroot()
    assert [f.get("message") for f in root.iter("failure")] == ["lost-write"]


def test_a_run_interrupted_while_shrinking_leaves_its_trace_and_no_scratch(
    tmp_path: Path,
) -> None:
    workdir, out = tmp_path / "work", tmp_path / "out"
    workdir.mkdir()
    done = subprocess.run(
        [RMQSIM, "run", "--profile", "smoke", "--seeds", "0:10", "--impl", SELF_SIGNALLING,
         "--out", str(out)],
        cwd=tmp_path, env=_env(workdir, **{SIGNAL_AT_ENV: f"SIGTERM@{OPEN_IN_FIRST_SHRINK}"}),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines()[-1] == "rmqsim: error: interrupted by SIGTERM"
    assert list(workdir.iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == ["smoke-seed0-lost-write.jsonl"]


def test_a_spark_task_stopped_by_sighup_removes_its_temporary_directory(tmp_path: Path) -> None:
    """When Spark stops (its driver interrupted, say), PySpark's daemon sends its workers
    SIGHUP, which killed a task at once and left its directory behind. The task's code,
    run here in a plain process, as in a worker."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    script = (
        "from rmqsim.reports.tasks import TaskSpec, WorkItem, run_chunk\n"
        f"spec = TaskSpec(impl={SELF_SIGNALLING!r}, out_dir={str(tmp_path / 'out')!r}, "
        "sweep_id='s', shrink=None)\n"
        "list(run_chunk([WorkItem('smoke', seed) for seed in range(5)], spec))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
        env=_env(workdir, **{SIGNAL_AT_ENV: "SIGHUP@3"}), timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "Terminated: SIGHUP" in done.stderr, done.stderr
    assert list(workdir.iterdir()) == []


def test_local_spark_workers_make_their_directories_in_one_the_session_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed as Spark stops cannot leave a directory behind: local workers
    inherit an RMQSIM_WORKDIR of the session's own, removed when it ends."""
    from rmqsim.reports.spark import workers_scratch

    monkeypatch.setenv(WORKDIR_ENV, str(tmp_path))
    with workers_scratch("local[2]"):
        scratch = Path(os.environ[WORKDIR_ENV])
        assert scratch.parent == tmp_path and scratch.is_dir()
        (scratch / "rmqsim-task-left-by-a-killed-worker").mkdir()
    assert os.environ[WORKDIR_ENV] == str(tmp_path)
    assert list(tmp_path.iterdir()) == []
    with workers_scratch("spark://elsewhere:7077"):  # remote workers: their own place
        assert os.environ[WORKDIR_ENV] == str(tmp_path)


def test_an_interruption_is_recorded_until_the_outermost_block_ends() -> None:
    """What the gate's loops ask (``interrupts.pending``) after a handler raised: kept
    through an inner block (a Spark task's inside a command's), forgotten at the end of the
    outermost, where Python's own Ctrl-C handler is back."""
    from rmqsim.conformance.running import interrupts
    from rmqsim.conformance.running.interrupts import signals_raise

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with signals_raise():
            with signals_raise(signal.SIGHUP, signal.SIGTERM), pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
            assert type(interrupts.pending()) is KeyboardInterrupt
            with pytest.raises(KeyboardInterrupt):
                interrupts.raise_if_interrupted()
        assert interrupts.pending() is None
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        interrupts.raise_if_interrupted()  # nothing recorded: nothing raised
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("command", [
    ["run", "--profile", "smoke", "--seeds", f"0:{FINALIZER_SEEDS}"],
    ["crash-sweep", "--profile", "smoke", "--seed", "0", "--steps", "40"],
    ["fuzz", "--layer", "queue", "--profile", "dev", "--budget", "120s", "--steps", "10"],
], ids=lambda c: c[0])  # fmt: skip
def test_a_signal_whose_exception_a_finalizer_swallowed_stops_the_other_commands_too(
    command: list[str], tmp_path: Path
) -> None:
    """As the gate after each run (its test above): ``rmqsim run --seeds`` asks after each
    seed, every command that draws progress after each piece of work (a crash sweep's
    case: ``cli.common.InterruptibleProgress``), the fuzzer after each round."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    done = subprocess.run(
        [RMQSIM, *command, "--impl", IN_A_FINALIZER, "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=_env(workdir, **{SIGNAL_AT_ENV: "SIGINT@3"}),
        capture_output=True, text=True, timeout=300, check=False, preexec_fn=ctrl_c_default,
    )  # fmt: skip
    assert "Exception ignored" in done.stderr  # the finalizer swallowed it
    assert done.returncode == 130, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == "rmqsim: error: interrupted by SIGINT"
    assert list(workdir.iterdir()) == []


def test_a_recorded_interruption_is_raised_in_the_main_thread_only() -> None:
    """Another thread (a progress update from a Spark job's listener) passes; the main
    thread, whose exception ends the command, raises it."""
    import threading

    from rmqsim.conformance.running import interrupts

    interrupts.record(KeyboardInterrupt())
    try:
        raised: list[BaseException] = []

        def elsewhere() -> None:
            try:
                interrupts.raise_if_interrupted()
            except KeyboardInterrupt as exc:
                raised.append(exc)

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert raised == []
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_if_interrupted()
    finally:
        interrupts.clear()
