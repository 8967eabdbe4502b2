"""The gate shrinks its first failing crash cases (the crash sweeps' and the steered ones)
as it shrinks its first failing runs: a crash-only mutant that the profile runs pass is
caught by a case, whose shrunk trace (beside the case's) is shorter, still crashes where
the failure needs it, replays to the same anomaly, and is in the summary, the JUnit XML
and the failure report; the same with ``--jobs 2``. Real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rmqsim.conformance.running.run import replay_file
from rmqsim.conformance.running.scratch import WORKDIR_ENV
from rmqsim.conformance.running.trace import read_trace
from rmqsim.scenarios.queue.ops import ArmCrash
from tests.gate_outputs import without_times

ROOT = Path(__file__).resolve().parent.parent
RMQSIM = str(Path(sys.executable).with_name("rmqsim"))
#: A produce in two batches: only a crash between them shows it (crashy seed 0's first
#: 15 steps pass without one).
MUTANT = "rmqsim.conformance.mutants.crash:two_step_produce"
POINT = "produce.between_writes"
TIMEOUT_S = 300


def _gate(cwd: Path, sweep_steps: int, jobs: int) -> subprocess.CompletedProcess[str]:
    (cwd / "work").mkdir(parents=True)
    (cwd / "corpus").mkdir()
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
               **{WORKDIR_ENV: str(cwd / "work")})  # fmt: skip
    return subprocess.run(
        [RMQSIM, "gate", "--impl", MUTANT, "--profiles", "crashy", "--seeds", "0:1",
         "--steps", "15", "--sweep-steps", str(sweep_steps), "--jobs", str(jobs),
         "--corpus", "corpus", "--out", "out"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


def _failing_cases(summary: dict[str, Any]) -> list[dict[str, Any]]:
    swept = [case for s in summary["crash_sweep"].values() for case in s["failures"]]
    steered = [case for s in summary["crash_steer"] for case in s["failures"]]
    return swept + steered


# 15 sweep steps: the sweep's cases catch it; 2: the sweep passes and the steered cases
# (into the crash cells the sweep never armed) catch it.
@pytest.mark.parametrize(("sweep_steps", "prefix"), [(15, "crashy-"), (2, "crash-steer-")])
def test_failing_crash_cases_are_shrunk_the_same_with_a_pool(
    tmp_path: Path, sweep_steps: int, prefix: str
) -> None:
    serial = _gate(tmp_path / "j1", sweep_steps, jobs=1)
    parallel = _gate(tmp_path / "j2", sweep_steps, jobs=2)
    assert serial.returncode == parallel.returncode == 1, (serial.stderr, parallel.stderr)
    out = tmp_path / "j1" / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures"] == []  # the profile run passes: only a crash case fails
    cases = _failing_cases(summary)
    assert cases and all(Path(c["repro"].split()[-1]).name.startswith(prefix) for c in cases)
    longest = max(cases, key=lambda c: c["steps"])
    assert longest["steps"] >= 10
    for case in cases:
        shrunk = tmp_path / "j1" / case["shrunk_trace"]
        original = case["repro"].split()[-1]
        assert shrunk.name == Path(original).name.replace(".jsonl", ".shrunk.jsonl")
        assert shrunk.parent == (tmp_path / "j1" / original).parent
        assert case["shrunk_steps"] < case["steps"]
        assert case["shrunk_repro"] == f"rmqsim replay {case['shrunk_trace']}"
        assert case["shrink_search"]["stopped_by"] is None
        # It still crashes where the failure needs it, and replays to the same anomaly.
        ops = [step.op for step in read_trace(shrunk).steps]
        assert any(isinstance(op, ArmCrash) and op.point == POINT for op in ops)
        again = replay_file(shrunk)
        assert again.anomaly == case["anomaly"] and again.steps == case["shrunk_steps"]
    assert f"shrunk to {longest['shrunk_steps']} operations" in (out / "junit.xml").read_text()
    assert f"shrunk     {longest['steps']} -> {longest['shrunk_steps']} operations" in (
        serial.stderr
    )
    # --jobs 2: the same summary, JUnit XML and trace files, shrunk ones included.
    assert without_times(out) == without_times(tmp_path / "j2" / "out")
    traces = _traces(out)
    assert traces == _traces(tmp_path / "j2" / "out")
    assert sum(name.endswith(".shrunk.jsonl") for name in traces) == len(cases)


def _traces(out: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(out.glob("*.jsonl"))}
