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


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--profile", "smoke", "--seeds", f"0:{FINALIZER_SEEDS}"],
        ["crash-sweep", "--profile", "smoke", "--seed", "0", "--steps", "40"],
        ["fuzz", "--layer", "queue", "--profile", "dev", "--budget", "120s", "--steps", "10"],
    ],
    ids=lambda c: c[0],
)
def test_a_signal_whose_exception_a_finalizer_swallowed_stops_the_other_commands_too(
    command: list[str], tmp_path: Path
) -> None:
    """As the gate after each run (the test above): ``rmqsim run --seeds`` asks after each
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
